# Two entry points that work on a fresh machine: `make repro` and `make test`.
# Both create .venv from pyproject.toml when it is missing or older than pyproject.toml.
# The team stack (docs/testing.md, "The local stack and the integration tests"): `make stack-up`,
# `make test-integration`, `make stack-down`.

PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed

# Stages call `opcost`; put the venv first on PATH so dvc finds it without activation.
export PATH := $(BIN):$(PATH)
# Nothing the project starts sends telemetry (MLflow, DVC, and any tool honouring DO_NOT_TRACK).
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := true
export DVC_NO_ANALYTICS := 1

# The Python that runs the stack and its tests: .venv's unless given (`make stack-up PY=...` uses that
# environment as it is and never installs into it, beyond the pinned `team` extra stack/install.sh adds).
PY ?= $(BIN)/python
VENV_FOR_PY := $(if $(filter $(BIN)/python,$(PY)),$(STAMP))
STACK_DIR ?= $(CURDIR)/.stack

.PHONY: repro test test-fast lint typecheck lock venv clean-venv stack-up stack-down test-integration exp

venv: $(STAMP)

# requirements.lock pins every transitive dependency to what CI tested (tests/test_lock.py keeps it in step
# with pyproject.toml); `make lock` rewrites it from the current venv.
$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev,team]'
	touch $(STAMP)

lock: $(STAMP)
	{ sed -n '/^#/p' requirements.lock; $(BIN)/python -m pip freeze --exclude-editable --disable-pip-version-check; } > requirements.lock.new
	mv requirements.lock.new requirements.lock

## make repro: install, check params.yaml (before DVC deletes any output: a typo must not cost models
## and reports), pull versioned data from the DVC remote, run the pipeline, and register in the local
## MLflow store any pulled model it lacks (DVC skips stages whose outputs it pulled).
repro: $(STAMP)
	$(BIN)/opcost check-params
	$(BIN)/dvc pull --allow-missing
	$(BIN)/dvc repro
	$(BIN)/opcost sync-registry

## make test: install, lint (ruff check and format check, line length 120), type-check (mypy; settings in
## pyproject.toml) and run the test suite on every core (pytest-xdist, at most 4 workers: each holds torch;
## the tests of the small end-to-end project share one worker, which builds it once). make test-fast: the
## same checks and the tests not marked slow. --durations=15 lists the slowest tests (CI keeps make test under 15 min).
test: $(STAMP) lint typecheck
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadgroup --durations=15

test-fast: $(STAMP) lint
	$(BIN)/python -m pytest -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

clean-venv:
	rm -rf $(VENV)

## make stack-up: install what is missing (apt, pip; pinned) and start SLURM, PostgreSQL, SeaweedFS (S3)
## and an MLflow server on 127.0.0.1 from empty directories; writes .stack/env and PID files.
stack-up: $(VENV_FOR_PY)
	PY=$(PY) OPCOST_STACK_DIR=$(STACK_DIR) bash stack/up.sh

## make stack-down: stop the stack by its PID files.
stack-down:
	PY=$(PY) OPCOST_STACK_DIR=$(STACK_DIR) bash stack/down.sh

## make test-integration: tests/integration/ against the running stack (never part of `make test`).
test-integration: $(VENV_FOR_PY)
	@test -s $(STACK_DIR)/env || { echo "the stack is not running: make stack-up" >&2; exit 1; }
	set -a && . $(STACK_DIR)/env && set +a && OPCOST_INTEGRATION=1 $(PY) -m pytest tests/integration

## make exp: `dvc exp show` with the headline metrics (reports/metrics.json) only, 107 columns wide. DVC
## gives every params.yaml leaf and every file dependency (each src/ module a stage imports) a column, and
## has no setting for its default view: plain `dvc exp show` folds them into "…" below ~2000 columns.
## `Created` is left out: from the day after a commit DVC writes it as a date ("Nov 25, 2026", not
## "10:32 AM"), and the table then overflowed 120 columns.
EXP_KEEP := Experiment|clk_.*|net_.*|op_.*|xd_.*
exp:
	$(BIN)/dvc exp show --no-pager --drop '.*' --keep '$(EXP_KEEP)'
