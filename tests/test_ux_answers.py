"""What a user reads: an answer's basis in one sentence (the derivation under --explain and in the JSON's
`note`), a user's own model of unknown family, no torch line that concerns nobody, and a batch outside the
measured ones said in that sentence rather than as a warning on every question. Each command runs in a fresh
process: what reaches stderr is decided at start-up (logging filters, imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builders import layer_scores, record_in_lock, tiny_bundle
from opcost.model.composition.compose import Composition
from opcost.ops.netspec import NetSpec
from subproc_env import src_dir

SRC = src_dir()  # the src/ imported here (a mutant's under bench/mutate.py)
TINY = """
from torch import nn


def tiny():
    return nn.Sequential(nn.Linear(8, 4), nn.ReLU())
"""


def opcost(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(SRC), **env}
    environ.pop("OPCOST_ROOT", None)
    return subprocess.run(
        [sys.executable, "-m", "opcost", *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300
    )


def calibrated(family: str = "resnet") -> Composition:
    """A layer fitted on measured networks of one family, with the score sets an interval is taken from."""
    scores = [0.01 * (i - 10) for i in range(21)]
    return Composition(
        "inference", calibrated=True, family_terms={family: {"time": 0.0, "energy": 0.0, "n": 3.0}},
        scores={k: s for q in ("pooled", "known", "new") for k, s in layer_scores(scores, scores, q).items()},
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with a user's model file and an A30 bundle measured at batch 32 only."""
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "tiny.py").write_text(TINY)
    tiny_bundle(tmp_path, "A30-inference", ranges={"batch": [32.0, 32.0]}, composition=calibrated())
    record_in_lock(tmp_path)
    return tmp_path


def test_a_user_file_has_an_unknown_family_not_its_path():
    from opcost.model.prediction.answer import own_summary, question_family

    assert question_family(NetSpec.make("/home/me/nets/my.py:gpt2", ["float32:2,8"])) is None
    assert question_family(NetSpec.make("mypkg.nets:resnet_clone", ["float32:2,8"])) is None
    assert question_family(NetSpec.make("resnet50", [1, 3, 32, 32])) == "resnet"
    comp = calibrated()
    assert comp.note("A30-inference", None).startswith("unknown family: no family term")
    assert "unknown family" in own_summary("A30", comp, None, None, None)
    assert "3 measured resnet network(s)" in own_summary("A30", comp, "resnet", None, None)


def test_predict_says_its_basis_in_one_sentence_and_the_derivation_under_explain(project):
    """Batch 2 lies outside the measured batch 32: the interval is widened, and the one sentence says so; no
    warning on stderr for it (nothing to act on), nor torch's CUDA line."""
    args = ["predict", "--model", "tiny.py:tiny", "--input", "float32:2,8", "--device", "A30"]
    res = opcost(project, *args, CUDA_HOME=str(project))
    assert res.returncode == 0, res.stderr
    assert "warning" not in res.stderr and "No CUDA runtime" not in res.stderr, res.stderr
    text = " ".join(res.stdout.split())  # Rich may wrap the sentence
    (note,) = [line for line in text.split("note: ")[1:]]
    assert note.startswith("based on A30's own measurements; unknown family, so no family correction")
    assert "interval widened: batch 2 lies outside the measured batch 32 (--explain: how)" in note
    assert "derivation" not in text and "family-left-out scores" not in text  # the formulas: --explain only

    res = opcost(project, *args, "--explain")
    text = " ".join(res.stdout.split())
    assert res.returncode == 0 and "derivation: unknown family: no family term; 90 % interval from" in text
    assert "batch 2 lies outside the batches the A30-inference model was measured at (32)" in text

    doc = json.loads(opcost(project, *args, "--json").stdout)
    assert doc["warnings"] == [] and "unknown family" in doc["summary"]
    assert "family-left-out scores" in doc["note"] and "measure the network at this batch" in doc["note"]


def test_an_op_larger_than_any_measured_stays_a_warning_with_the_batch_advice(project):
    """Beyond the measured op sizes the models extrapolate where the widening may not cover: a warning, and
    the batch's advice goes with it."""
    from opcost.model.prediction.predict import Predictor
    from opcost.paths import Paths

    tiny_bundle(project, "A30-inference", ranges={"batch": [32.0, 32.0], "in_numel": [1.0, 2.0]},
                composition=calibrated())  # fmt: skip
    record_in_lock(project)
    p = Predictor(paths=Paths(project)).predict(
        NetSpec.make(f"{project / 'tiny.py'}:tiny", ["float32:2,8"]), None, "A30"
    )
    assert len(p.warnings) == 2 and "measure the network at this batch (opcost profile)" in p.warnings[0]
    assert "ops exceed by more than 2x the largest input size" in p.warnings[1]
    assert "batch" not in p.summary


def test_no_cuda_runtime_line_where_no_gpu_is_usable(tmp_path):
    """torch logs "No CUDA runtime is found" on importing torch.utils.cpp_extension (profile's timing imports it)
    wherever CUDA_HOME exists and no GPU is usable; the command line filters that one line."""
    res = opcost(tmp_path, "profile", "--models", "resnet18:1,3,32,32", "--dry-run", CUDA_HOME=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "No CUDA runtime" not in res.stderr and "cpp_extension" not in res.stderr


@pytest.mark.parametrize("columns, width", [("120", 120), ("", 160)])
def test_piped_output_takes_the_width_columns_names(tmp_path, columns, width):
    code = "import opcost.cli as c; print(c.out.width)"
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": columns}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == str(width), res.stderr


def test_a_host_given_for_a_gpu_with_its_own_models_is_said_to_be_unused(project):
    """`--host` shapes transferred answers only: on a GPU with its own models it was silently ignored (exit 0,
    no word). Now the answer says it was not used, and why."""
    args = ["predict", "--model", "tiny.py:tiny", "--input", "float32:32,8", "--device", "A30", "--host", "nohost"]
    res = opcost(project, *args)
    assert res.returncode == 0, res.stderr
    line = " ".join(res.stderr.split())
    assert "--host nohost is not used for A30: answered from its own measurements" in line, res.stderr
    res = opcost(project, *args[:-2])
    assert "--host" not in res.stderr, res.stderr
