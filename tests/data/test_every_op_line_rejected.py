"""A source of ops and networks whose every op line is rejected fails (exit 2, one line naming the op
lines and why), even though its network lines are taken: the networks alone would let the stage pass
with every op measurement gone. The stage's summary line counts the rejected lines of a source it takes.

Lines: the real first lines of data/external/nicolai-thesis/ops/inference/A30.log (tests/builders.py)
and models/inference/A30.log; the op lines are damaged the way the break-it test did.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from builders import A30_CONV_LINE, A30_RELU_LINE
from subproc_env import src_dir

REPO = Path(__file__).resolve().parents[2]
NET = (
    "ResNet (32, 3, 56, 56) 0.003855626331182494 403.4538874622257 0.17777659309090635 4.9682615124581995 5064 "
    "19.52489174110815 104.6402977900841 1.037498410634341 681.0301620362369 8.38642543302944 0.004973933649289099 "
    "2024-11-18_13-19-23 2024-11-18_13-19-50 2.8158547297645037e-05"
)


def _project(root: Path, op_lines: list[str]) -> None:
    (root / "dvc.yaml").write_text("stages: {}\n")
    for name in ("params.yaml", "sets.yaml"):
        shutil.copy(REPO / name, root / name)
    thesis = root / "data" / "external" / "nicolai-thesis"
    for folder, lines in (("ops", op_lines), ("models", ["resnet34 (32, 3, 56, 56)", NET])):
        (thesis / folder / "inference").mkdir(parents=True)
        (thesis / folder / "inference" / "A30.log").write_text("\n".join(lines) + "\n")


def _ingest(root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OPCOST_ROOT", "DVC_ROOT")}
    env["PYTHONPATH"] = src_dir()
    return subprocess.run(
        [sys.executable, "-m", "opcost.stages.ingest", "--source", "nicolai-thesis"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_every_op_line_rejected_fails_although_networks_were_taken(tmp_path):
    _project(tmp_path, [A30_CONV_LINE[:-7], A30_RELU_LINE.replace(" 1558640 ", " 155864 ")])
    r = _ingest(tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr[-2000:]
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr[-2000:]
    assert r.stderr.startswith(
        "error: data/external/nicolai-thesis: every one of its 2 op lines was rejected (1 network rows taken) "
        "(inconsistent 2; first: ops/inference/A30.log:1 "
    )
    assert "sigma_t = 5.39109 s exceeds" in r.stderr
    assert r.stderr.rstrip().endswith("nothing written")
    assert not (tmp_path / "data" / "ingested").exists()


def test_the_summary_line_counts_the_rejected_lines(tmp_path):
    _project(tmp_path, [A30_CONV_LINE, A30_RELU_LINE.replace(" 1558640 ", " 155864 ")])
    r = _ingest(tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith(
        "ingest nicolai-thesis: {'op_rows': 1, 'network_rows': 1}; rejected lines 1 (inconsistent 1);"
    )
