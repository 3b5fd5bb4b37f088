# Two entry points that work on a fresh machine: `make repro` and `make test`.
# Both create .venv from pyproject.toml when it is missing or older than pyproject.toml.

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

.PHONY: repro test lint venv clean-venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

## make repro: install, pull versioned data from the DVC remote, run the pipeline, and register
## in the local MLflow store any pulled model it lacks (DVC skips stages whose outputs it pulled).
repro: $(STAMP)
	$(BIN)/dvc pull --allow-missing
	$(BIN)/dvc repro
	$(BIN)/opcost sync-registry

## make test: install, lint (ruff, line length 120) and run the test suite.
test: $(STAMP) lint
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

clean-venv:
	rm -rf $(VENV)
