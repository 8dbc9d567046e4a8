#!/bin/sh
# Restore an agent after a crash: check the checkpoints and the log, then rebuild the state from the newest
# good checkpoint plus the entries after it. Nothing here modifies the checkpoints or the log.
# Usage: recover-state.sh CHECKPOINT_DIR LOG_DIR OUT_STATE_FILE     Environment: WALCTL (default: walctl)
set -u
WALCTL=${WALCTL:-walctl}
ckpts=$1 log=$2 out=$3

echo "== checkpoints, newest first"
"$WALCTL" checkpoint list "$ckpts"
echo "== the log"
"$WALCTL" verify -q "$log"
case $? in
    0|1) ;;  # clean, or a torn tail that recovery ignores (repair it before the writer restarts)
    *) echo "the log is damaged: see 'walctl verify $log'; not recovering from it"; exit 3 ;;
esac
echo "== recovering into $out"
"$WALCTL" recover --checkpoints "$ckpts" --log "$log" --out "$out" --json > "$out.report.json"
code=$?
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
used = r["checkpoint"]
print("outcome", r["outcome"], "| checkpoint", used["file"] if used else None, "| replayed", r["entries_replayed"],
      "| final sequence", r["final_sequence"])
for f in r["fallbacks"]:
    print("  passed over", f["file"], "step", f["step"], f["reason"])' "$out.report.json" 2>/dev/null
exit $code
