#!/bin/sh
# After a crash: check a WAL, cut a torn tail, rescue what a damaged WAL still holds, then compact.
# Adapt the paths and the policy; every step is safe to run twice.
# Usage: recovery.sh WAL_DIR [CHECKPOINT_META]
# Environment: WALCTL (default: walctl); ACCEPT_REASON: when set, the sequences a salvage lost are
#   accepted as lost with this reason (an operator's decision, recorded in the ledger) and the salvaged
#   copy is left ready for writing; unset, the script stops and prints the commands.
set -u
WALCTL=${WALCTL:-walctl}
wal=$1
meta=${2:-}

"$WALCTL" verify "$wal"
case $? in
    0)  echo "== $wal is clean" ;;
    1)  echo "== torn tail: the writer died mid-append; cutting it (the bytes are kept in $wal/.quarantine/)"
        "$WALCTL" repair "$wal" --apply || exit $? ;;
    3|4)
        rescued="$wal.salvaged.$(date +%Y%m%d%H%M%S)"
        echo "== acknowledged data is damaged or missing: copying every valid record to $rescued"
        "$WALCTL" salvage "$wal" --out "$rescued" --json > "$rescued.report.json"
        echo "   report: $rescued.report.json; the original is untouched."
        # the ranges the copy misses, one A..B per line, from verify's sequence findings
        missing=$("$WALCTL" verify --json "$rescued" | python3 -c '
import json, sys
for p in json.load(sys.stdin)["paths"]:
    for f in p["findings"]:
        if f["exit_code"] == 4 and f["sequence_range"]:
            print("%d..%d" % tuple(f["sequence_range"]))')
        if [ -z "${ACCEPT_REASON:-}" ]; then
            for r in $missing; do
                echo "   lost: sequences $r. If that is final: '$WALCTL repair $rescued --accept-loss $r --reason TEXT --apply'"
            done
            echo "   Decide before going on: point the service at $rescued, or move damaged chunks aside with"
            echo "   '$WALCTL quarantine move $wal CHUNK --reason ... --apply'."
            exit 3
        fi
        for r in $missing; do
            "$WALCTL" repair "$rescued" --accept-loss "$r" --reason "$ACCEPT_REASON" --apply || exit $?
        done
        "$WALCTL" verify -q "$rescued" || exit $?
        echo "== $rescued: losses accepted ($ACCEPT_REASON); writers continue after the highest sequence issued"
        echo "   point the service at $rescued"
        exit 0 ;;
    6)  echo "== a live writer holds $wal, or it cannot be read: stop the service first"; exit 6 ;;
    *)  echo "== $wal is not a Spector V2 WAL walctl can mend"; exit 5 ;;
esac

if [ -n "$meta" ]; then
    echo "== compacting chunks the checkpoint covers ($meta)"
    "$WALCTL" compact "$wal" --checkpoint-meta "$meta"            # the plan
    "$WALCTL" compact "$wal" --checkpoint-meta "$meta" --apply || exit $?
fi
"$WALCTL" verify -q "$wal" && echo "== $wal is ready for the service to start"
