#!/bin/sh
# Pull replication (Spector CloudSync's protocol, walctl on both ends): keep FOLLOWER_DIR a copy of
# LEADER_DIR by asking for every event after the follower's high-water mark and applying it.
# Usage: follower.sh LEADER_DIR FOLLOWER_DIR [INTERVAL_SECONDS]    (0: one round, then exit)
# Environment: WALCTL (default: walctl)
# Safe to kill at any moment: each round starts from what the follower holds durably, and import skips
# what it already has, so nothing is lost or applied twice.
set -u
WALCTL=${WALCTL:-walctl}
leader=$1
follower=$2
interval=${3:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

while :; do
    hwm=$("$WALCTL" import "$follower" --show-hwm) || exit $?
    # Ask from one event before the HWM: import compares that event with its own copy, so a follower
    # whose log has diverged from the leader's is refused instead of silently extended.
    after=$(( hwm > 0 ? hwm - 1 : 0 ))
    { "$WALCTL" replay "$leader" --after "$after" --msgpack 2>"$tmp/replay.err"; echo $? > "$tmp/replay.rc"; } |
        "$WALCTL" import "$follower" --sync batch
    imported=$?
    replayed=$(cat "$tmp/replay.rc")
    case $replayed in
        0|1) ;;  # 1: the leader has a torn tail (its writer died mid-append); nothing acknowledged is missing
        *)  echo "follower: the leader's log stops at damage (replay exit $replayed); fix the leader first:" >&2
            cat "$tmp/replay.err" >&2
            exit "$replayed" ;;
    esac
    case $imported in
        0) ;;
        4)  echo "follower: refused: a gap or a diverged log (see above). An empty follower of a compacted leader" >&2
            echo "          starts from a restored checkpoint with 'walctl import --allow-initial-gap'." >&2
            exit 4 ;;
        *)  exit "$imported" ;;
    esac
    [ "$interval" = 0 ] && exit 0
    sleep "$interval"
done
