#!/bin/sh
# Ship a WAL and its checkpoints to object storage from cron, and restore them onto a fresh machine.
#
#   archive.sh push WAL_DIR CHECKPOINT_DIR DEST [NAMESPACE]
#       crontab:  */5 * * * * /usr/local/bin/archive.sh push /var/lib/agent/wal /var/lib/agent/ckpt s3://backups/agents agent-7
#   archive.sh restore DEST NAMESPACE OUT_DIR [--to N | --until T]
#       then:     walctl recover --checkpoints OUT_DIR/checkpoints --log OUT_DIR/wal --out state.json
#
# DEST: file:///mnt/backup or s3://bucket/prefix (AWS_ENDPOINT_URL and AWS_* credentials for MinIO, Ceph...).
# Environment: WALCTL (default: walctl), ALERT (a command taking a message; default: logger -t walctl)
set -u
WALCTL=${WALCTL:-walctl}
ALERT=${ALERT:-"logger -t walctl"}
verb=${1:-}
case $verb in
push)
    wal=$2; ckpt=$3; dest=$4; ns=${5:-$(basename "$wal")}
    # Idempotent: what is archived already is skipped, so a missed or overlapping run does no harm.
    "$WALCTL" archive push "$wal" "$dest" --namespace "$ns" --checkpoints "$ckpt" --json > /dev/null
    code=$?
    case $code in
        0) echo "pushed $wal to $dest/$ns" ;;
        3) $ALERT "ARCHIVE $wal: a sealed chunk or checkpoint is damaged and was held back; run walctl verify" ;;
        6) $ALERT "ARCHIVE $wal: $dest unreachable or an upload failed; the next run resumes" ;;
        7) $ALERT "ARCHIVE $wal: $dest/$ns holds other bytes under a name we push; investigate before anything else" ;;
        *) $ALERT "ARCHIVE $wal: walctl archive push exited $code" ;;
    esac
    # Check what is up there once a day (02:xx): every object read back and scanned.
    if [ "$(date +%H)" = 02 ] && [ "$(date +%M)" -lt 05 ]; then
        "$WALCTL" archive verify "$dest" --namespace "$ns" > /dev/null || $ALERT "ARCHIVE $dest/$ns does not verify"
    fi
    exit $code ;;
restore)
    dest=$2; ns=$3; out=$4; shift 4
    "$WALCTL" archive list "$dest" --namespace "$ns" || exit $?
    "$WALCTL" archive restore "$dest" "$out" --namespace "$ns" "$@" || exit $?
    echo "restored into $out; the agent's state: $WALCTL recover --checkpoints $out/checkpoints --log $out/wal" ;;
*)
    sed -n '2,12p' "$0"; exit 2 ;;
esac
