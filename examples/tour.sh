#!/bin/sh
# A tour of walctl on the bundled examples: every example's verdict and exit code, checked against the
# one it should give. Exits 0 when every example behaves as documented.
# Usage: sh examples/tour.sh [WALCTL]   (default: walctl on PATH)
WALCTL=${1:-walctl}
here=$(dirname "$0")
fail=0
total=0
good=0
check() {  # check DIR EXPECTED_EXIT
    "$WALCTL" verify "$here/$1"
    got=$?
    total=$((total + 1))
    if [ "$got" -eq "$2" ]; then
        good=$((good + 1)); echo "  -> exit $got, as documented"
    else
        echo "  -> exit $got, EXPECTED $2"; fail=1
    fi
    echo
}
check wal-healthy 0
check wal-torn-tail 1
check wal-midlog-corrupt 3
check wal-sequence-gap 4
check wal-legacy-v1 5
check segments 0
check checkpoints 3
check tasks 1
check agents-crashed 0
echo "== the interrupted task: where it can resume"
"$WALCTL" tasklog inspect "$here/tasks"
echo
echo "== the crashed agent root: the tree recovery rebuilds"
"$WALCTL" agents tree "$here/agents-crashed"
echo
echo "== recovery: the newest checkpoint is rotten, so the one at 20 plus entries 21..40:"
total=$((total + 1))
if "$WALCTL" recover --checkpoints "$here/checkpoints" --log "$here/segments"; then good=$((good + 1)); else fail=1; fi
echo
echo "== the records around the damage, readable past it:"
"$WALCTL" inspect "$here/wal-midlog-corrupt" --from 8 --to 12 --payload none
echo
echo "== what the healthy WAL holds:"
"$WALCTL" stats "$here/wal-healthy"
echo
echo "$good/$total examples gave their documented exit code"
exit $fail
