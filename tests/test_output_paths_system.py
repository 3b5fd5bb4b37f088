"""Output paths in folders that take no new files (/proc, /sys) are one line naming the option, checked
before any work. Root passes every permission check there, so the check creates and removes a probe
file instead of trusting the permission bits. Each case starts the CLI in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from subproc_env import src_dir

REPO = Path(__file__).resolve().parents[1]


def _opcost(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": src_dir()}
    return subprocess.run(
        [sys.executable, "-m", "opcost", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "args, option",
    [
        (["profile", "--models", "resnet18:1,3,32,32", "--device", "cpu", "--out", "/proc/x"], "--out /proc/x"),
        (["profile", "--models", "resnet18:1,3,32,32", "--device", "cpu", "--out", "/sys/x"], "--out /sys/x"),
        (["recommend", "--model", "resnet18", "--input-shape", "1,3,32,32", "--plot", "/proc/x.png"],
         "--plot /proc/x.png"),
    ],
)  # fmt: skip
def test_an_output_in_a_system_folder_is_one_line(tmp_path, args, option):
    r = _opcost(args, tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {option}: "), r.stderr[-2000:]
    assert not list(tmp_path.iterdir())  # nothing measured or written on the way


def test_the_probe_leaves_a_writable_folder_as_it_was(tmp_path):
    from opcost.outputs import check_output_dir, check_output_file

    check_output_file(tmp_path / "plot.png", "--plot")
    check_output_dir(tmp_path / "new" / "deeper", "--out")
    assert not list(tmp_path.iterdir())
