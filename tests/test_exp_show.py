"""`dvc exp show` at 120 columns: plain `dvc exp show` in a terminal and `make exp` show the headline metrics.

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


@pytest.mark.slow
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


def _in_terminal(cmd: list[str], cols: int, rows: int, env: dict[str, str]) -> str:
    """Run `cmd` on a pseudo-terminal of `cols` x `rows` (what a user's terminal is) and return what it showed."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    chunks: list[bytes] = []
    try:
        while True:  # until the command ends, or (a pager waiting for keys) 3 s pass without output after some
            ready, _, _ = select.select([leader], [], [], 3 if chunks else 120)
            if not ready:
                break
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
        proc.kill() if proc.poll() is None else None
        proc.wait(timeout=30)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r", "", b"".join(chunks).decode("utf-8", "replace"))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("dvc") is None or shutil.which("less") is None, reason="needs dvc and less")
def test_plain_dvc_exp_show_in_a_120_column_terminal_shows_every_headline_metric_first():
    """Plain `dvc exp show` in a terminal pages through `less -S` (DVC's default): the first 120 columns a
    user sees hold Experiment, Created and every headline metric, whole; the params and dependencies follow
    to the right. (With `--no-pager` DVC squeezes its ~300 columns into the width and shows ellipses: for
    that, `make exp`.) The headline metrics come first because reports/metrics.json is the one metrics file."""
    env = {k: v for k, v in os.environ.items() if k not in ("PAGER", "DVC_PAGER", "LESS")}
    env.update({"DVC_NO_ANALYTICS": "1", "TERM": "xterm", "COLUMNS": "120", "LINES": "40"})
    shown = _in_terminal(["dvc", "exp", "show"], 120, 40, env)
    lines = [line.rstrip() for line in shown.splitlines() if line.strip()]
    header = next(line for line in lines if "Experiment" in line)
    headline = json.loads((REPO / "reports" / "metrics.json").read_text())
    assert all(k in header[:120].split() for k in headline), header[:120]
    row = next(line for line in lines if "workspace" in line)
    assert "…" not in row[:120] and "…" not in header[:120], row[:120]
    values = row[:120].split()[2 : 2 + len(headline)]
    assert [float(v) for v in values] == [pytest.approx(v, abs=0.051) for v in headline.values()], row[:120]
