#!/bin/sh
# Verify WAL directories from cron and act on the documented exit codes (walctl(1), EXIT STATUS).
# Usage: cron-verify.sh WAL_DIR...   Environment: WALCTL (default: walctl), ALERT (a command taking a message)
# Example crontab line:  */15 * * * * /usr/local/bin/cron-verify.sh /var/lib/agent/wal >> /var/log/walctl.log 2>&1
WALCTL=${WALCTL:-walctl}
ALERT=${ALERT:-"logger -t walctl"}
worst=0
for dir in "$@"; do
    report=$(mktemp)
    "$WALCTL" verify --json "$dir" > "$report"
    code=$?
    summary=$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["paths"][0]
s = p["summary"]
print("%s: %s records, seq %s..%s, %s findings" % (p["verdict"], s["records"], s["first_sequence"],
      s["last_sequence"], s["findings"]))' "$report" 2>/dev/null)
    # exit 6 lumps the environment's problems; the finding's env_reason tells them apart
    why=$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["paths"][0]
print(next((f.get("env_reason") for f in p["findings"] if f.get("env_reason")), "io"))' "$report" 2>/dev/null)
    case $code in
        0) echo "ok      $dir: $summary" ;;
        1) echo "torn    $dir: $summary (the writer died mid-append; nothing acknowledged is lost; cut the tail before the next start)" ;;
        3) $ALERT "CORRUPT $dir: $summary: acknowledged data is damaged; keep a copy, salvage what is readable" ;
           echo "CORRUPT $dir: $summary" ;;
        4) $ALERT "SEQUENCE $dir: $summary: records are missing or repeated" ; echo "SEQUENCE $dir: $summary" ;;
        5) $ALERT "UNSUPPORTED $dir: not a Spector V2 WAL (or an unsupported version)" ; echo "UNSUPPORTED $dir" ;;
        6) case $why in
               not-found|not-a-directory)
                   # a typo in the crontab or a volume not mounted: retrying will not help
                   $ALERT "MISSING $dir: $why: not a WAL directory that exists" ; echo "MISSING $dir ($why)" ;;
               *) echo "RETRY   $dir: environment problem ($why: I/O, permission, or locked by a live writer)" ;;
           esac ;;
        *) $ALERT "walctl verify $dir exited $code" ; echo "ERROR   $dir: exit $code" ;;
    esac
    rm -f "$report"
    [ "$code" -gt "$worst" ] && worst=$code
done
exit "$worst"
