"""A full disk during ingest is one line, and the source's output folder keeps its previous files
(every table is written before the first is renamed into place).

The full disk is real: the ingest stage runs in a private mount namespace (`unshare -rm`, no root
needed) where the project's temporary folder `.opcost/tmp` is a tmpfs of a few KiB. Skipped where
the kernel does not allow unprivileged namespaces.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builders import A30_CONV_LINE, A30_RELU_LINE  # real lines of the thesis' A30 log
from subproc_env import src_dir

REPO = Path(__file__).resolve().parents[2]


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    r = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"], capture_output=True)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not _can_mount(), reason="no unprivileged mount namespace for a small tmpfs")


def _project(root: Path) -> Path:
    (root / "dvc.yaml").write_text("stages: {}\n")
    for name in ("params.yaml", "sets.yaml"):
        shutil.copy(REPO / name, root / name)
    log = root / "data" / "external" / "nicolai-thesis" / "ops" / "inference" / "A30.log"
    log.parent.mkdir(parents=True)
    log.write_text(A30_CONV_LINE + "\n")
    (root / ".opcost" / "tmp").mkdir(parents=True)
    return log


def _ingest(root: Path, tmpfs_kib: int | None = None) -> subprocess.CompletedProcess:
    cmd = f"{shlex.quote(sys.executable)} -m opcost.stages.ingest --source nicolai-thesis"
    if tmpfs_kib is not None:
        tmp = shlex.quote(str(root / ".opcost" / "tmp"))
        cmd = f"mount -t tmpfs -o size={tmpfs_kib}k tmpfs {tmp} && exec {cmd}"
    env = {k: v for k, v in os.environ.items() if k not in ("OPCOST_ROOT", "DVC_ROOT")}
    env["PYTHONPATH"] = src_dir()
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", cmd], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_full_disk_during_ingest_is_one_line_and_leaves_the_old_outputs(tmp_path):
    log = _project(tmp_path)
    first = _ingest(tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    out = tmp_path / "data" / "ingested" / "nicolai-thesis"
    before = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert {"op_measurements.parquet", "rejects.parquet", "summary.json"} <= set(before)

    log.write_text(A30_CONV_LINE + "\n" + A30_RELU_LINE + "\n")  # new data: every output would change
    full = _ingest(tmp_path, tmpfs_kib=32)  # room for the first tables' temporary files (~15 KiB each), not all
    assert full.returncode == 2, full.stderr[-2000:]
    lines = [ln for ln in full.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in full.stderr and len(lines) == 1, full.stderr[-2000:]
    assert lines[0].startswith("error: cannot write ") and "No space left on device (writing in " in lines[0]
    assert "op_measurements.parquet" not in lines[0]  # the first table was written; a later one found the disk full
    assert "nothing was half-written" in lines[0]
    assert {p.name: p.read_bytes() for p in sorted(out.iterdir())} == before  # not a mix of old and new
