#!/usr/bin/env bash
# Stop the local team stack by the PID files stack/up.sh wrote, newest service first, and remove
# PostgreSQL's temporary data directory. Logs stay in $STACK/logs/ until the next start.
# Safe to run when nothing (or only part of the stack) is running.
set -uo pipefail
source "$(dirname "$0")/common.sh"

# stop NAME SIGNAL GROUP WAIT: send SIGNAL to the PID in pids/NAME.pid (its whole process group when GROUP
# is 1: mlflow's workers, weed's servers), wait up to WAIT seconds, then SIGKILL; the PID file goes last.
stop() {
    local name=$1 sig=$2 group=$3 wait=$4 f="$STACK/pids/$1.pid" pid target i t
    t=$(date +%s.%N)
    [[ -s $f ]] || return 0
    pid=$(head -n1 "$f")
    target=$pid
    ((group)) && target="-$pid"
    if kill -0 "$pid" 2>/dev/null; then
        kill "-$sig" -- "$target" 2>/dev/null
        for ((i = 0; i < wait * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name (pid $pid) did not stop on SIG$sig; killing it"
            kill -KILL -- "$target" 2>/dev/null
            sleep 0.2
        fi
    fi
    rm -f "$f"
    [[ -n ${STACK_DEBUG:-} ]] && log "$name stopped in $(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')s"
    return 0
}

[[ -d $STACK ]] || exit 0
if [[ -s $STACK/pids/slurmctld.pid ]] && alive "$STACK/pids/slurmctld.pid"; then
    # Cancel every job first: their steps run under slurmstepd, which outlives slurmd.
    export SLURM_CONF="$STACK/slurm/slurm.conf"
    scancel --partition="$PARTITION" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break
        sleep 0.1
    done
fi
# Independent of each other: stopped at once. munge last, SLURM's daemons authenticate with it.
stop mlflow TERM 1 10 &
stop weed TERM 1 2 & # waits on its own gRPC streams for a long while; its data is disposable
stop postgres INT 0 10 & # PostgreSQL's "fast" shutdown
stop slurmd TERM 0 10 &
stop slurmctld TERM 0 10 &
wait
stop munged TERM 0 10
if [[ -s $STACK/pg.dir ]]; then
    rm -rf "$(cat "$STACK/pg.dir")"
    rm -f "$STACK/pg.dir"
fi
# SeaweedFS puts the gRPC sockets of its master and volume server in /tmp, named by port.
rm -f "/tmp/seaweedfs-master-grpc-$((WEED_MASTER_PORT + 10000)).sock" \
    "/tmp/seaweedfs-volume-grpc-$((WEED_VOLUME_PORT + 10000)).sock" \
    "/tmp/seaweedfs-s3-grpc-$((S3_PORT + 10000)).sock"
rm -f "$STACK/env"
log "down"
