# Shared settings of the local team stack (sourced by up.sh, down.sh and install.sh; not run).
#
# Everything lives under one state directory, $STACK (default <repo>/.stack, git- and DVC-ignored),
# except PostgreSQL's data directory, which must belong to a non-root user and so is a temporary
# directory under /tmp (its path is kept in $STACK/pg.dir). Every port is on 127.0.0.1 and can be
# moved with an environment variable, so two stacks (or other services) on one machine need not clash.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK="${OPCOST_STACK_DIR:-$REPO/.stack}"
# The Python whose environment holds mlflow, dvc, boto3, psycopg2 and weed (the `team` extra).
PY="${PY:-$REPO/.venv/bin/python}"
PYBIN="$(dirname "$PY")"

SLURMCTLD_PORT="${OPCOST_STACK_SLURMCTLD_PORT:-16817}"
SLURMD_PORT="${OPCOST_STACK_SLURMD_PORT:-16818}"
PG_PORT="${OPCOST_STACK_PG_PORT:-15432}"
S3_PORT="${OPCOST_STACK_S3_PORT:-18333}"
WEED_MASTER_PORT="${OPCOST_STACK_WEED_MASTER_PORT:-19333}"
WEED_VOLUME_PORT="${OPCOST_STACK_WEED_VOLUME_PORT:-18080}"
WEED_FILER_PORT="${OPCOST_STACK_WEED_FILER_PORT:-18888}"
MLFLOW_PORT="${OPCOST_STACK_MLFLOW_PORT:-15000}"

S3_BUCKET=opcost
S3_ACCESS_KEY=opcost
S3_SECRET_KEY=opcost-stack-secret
PG_USER=opcost
PG_DB=mlflow
PARTITION=local

# Nothing the stack starts sends telemetry.
export MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true DVC_NO_ANALYTICS=1

log() { printf 'stack: %s\n' "$*" >&2; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }

# wait_until SECONDS WHAT CMD...: poll CMD every 0.1 s until it succeeds, or fail naming WHAT and its log.
wait_until() {
    local limit=$1 what=$2
    shift 2
    local end=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= end)); then
            die "$what did not come up within ${limit}s; see $STACK/logs/"
        fi
        sleep 0.1
    done
}

# alive PIDFILE: the process named by PIDFILE is running.
alive() { [[ -s $1 ]] && kill -0 "$(head -n1 "$1")" 2>/dev/null; }
