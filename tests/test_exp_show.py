"""`dvc exp show` at 120 columns (issue 23): `make exp` shows the headline metrics and nothing else.

Plain `dvc exp show` gives every params.yaml leaf and every file dependency of dvc.yaml (each src/
module a stage imports) a column, with no setting for its default view; the extract sets, one column
holding a list of 41 mappings, now live in sets.yaml (a dependency) instead of params.yaml.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def keep_pattern() -> re.Pattern:
    m = re.search(r"^EXP_KEEP := (.+)$", (REPO / "Makefile").read_text(), flags=re.M)
    assert m, "Makefile: EXP_KEEP, the columns `make exp` keeps"
    return re.compile(m.group(1).strip())


def leaves(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        out += leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"]
    return out


def test_make_exp_keeps_every_headline_metric_and_no_param_or_dependency():
    keep = keep_pattern()
    headline = json.loads((REPO / "reports" / "metrics.json").read_text())
    assert headline and all(keep.match(k) for k in headline), sorted(headline)
    params = leaves(yaml.safe_load((REPO / "params.yaml").read_text()))
    assert not [p for p in params if keep.match(p)]
    deps = {
        str(d)
        for s in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].values()
        for d in s.get("do", s).get("deps", [])
    }
    assert "sets.yaml" in deps and not [d for d in deps if keep.match(d)]


@pytest.mark.skipif(shutil.which("dvc") is None, reason="dvc is not on PATH")
def test_make_exp_table_fits_120_columns_without_ellipses():
    env = {**os.environ, "COLUMNS": "120", "DVC_NO_ANALYTICS": "1"}
    cmd = ["dvc", "exp", "show", "--no-pager", "--drop", ".*", "--keep", keep_pattern().pattern]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [line.rstrip() for line in out.stdout.splitlines() if line.strip()]
    header = next(line for line in lines if "Experiment" in line)
    headline = json.loads((REPO / "reports" / "metrics.json").read_text())
    assert all(k in header.split() for k in headline), header
    assert "…" not in out.stdout and max(len(line) for line in lines) <= 120, out.stdout
