"""Every model the README and docs/ advertise builds and is answered, each in a fresh process.

A fresh process matters: whether an import works depends on what was imported before it (a
stand-in `torch._dynamo` once broke every `hf:` model, and the suite did not see it because an
earlier test had loaded the real one). So each example of the README or docs/ with an `hf:` or user-file
model, and one model of every family docs/predict.md names, runs as `python -m opcost ...` in its own process,
against a small project of tiny bundles (the answer's numbers are not what is checked here; that
the model builds, is traced and answered is).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from builders import record_in_lock, tiny_bundle

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TEXT = "\n".join(page.read_text() for page in PAGES)  # the README and every page of docs/
pytestmark = pytest.mark.slow  # each test starts python and imports torch (several seconds on 2 cores)


def _readme_file(name: str) -> str:
    """The Python block of the README or docs/ that starts with `# <name>` (the user file its examples use)."""
    for block in re.findall(r"```python\n(.*?)```", TEXT, flags=re.S):
        if block.startswith(f"# {name}\n"):
            return block
    raise AssertionError(f"README and docs/ have no ```python block starting with '# {name}'")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project root with tiny A30 bundles (both modes) and the `my.py` of docs/predict.md."""
    root = tmp_path_factory.mktemp("project")
    for target in ("A30-inference", "A30-training"):
        tiny_bundle(root, target)
    record_in_lock(root)
    (root / "my.py").write_text(_readme_file("my.py"))
    return root


def opcost(root: Path, args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """`python -m opcost ARGS` in a fresh process, in `root` (the project), nothing downloaded."""
    env = {**os.environ, "OPCOST_ROOT": str(root), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "opcost", *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )


def _readme_examples() -> list[list[str]]:
    """The `opcost predict|recommend|coverage` lines of the README and docs/ that name an `hf:` or user-file model."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", TEXT, flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if not line.startswith(("opcost predict", "opcost recommend", "opcost coverage")):
                continue
            words = shlex.split(line.replace("[--json]", ""))
            if any(w.startswith("hf:") or re.match(r"^[\w./-]+\.py:\w", w) for w in words):
                found.append(words[1:])
    return found


README_EXAMPLES = _readme_examples()


def test_the_readme_names_hf_and_user_file_examples():
    """The examples below are read from the README and docs/; an edit that drops them all would test nothing."""
    models = {w for ex in README_EXAMPLES for w in ex if w.startswith("hf:") or ".py:" in w}
    assert {"hf:gpt2", "my.py:gpt2"} <= models, README_EXAMPLES


@pytest.mark.parametrize("args", README_EXAMPLES, ids=lambda a: " ".join(a)[:70])
def test_every_readme_example_with_an_hf_or_user_file_model_runs(project, args):
    res = opcost(project, args)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    if args[0] == "predict":
        assert re.search(r"time [\d.]+ ms", res.stdout), res.stdout


# One model of every family docs/predict.md names ("Any network": torchvision's families, an import path, a
# file, a Hugging Face model type and class), small enough to take seconds: (model, inputs, model args).
FAMILIES = {
    "classification": ("resnet18", ["float32:1,3,32,32"], []),
    "segmentation": ("lraspp_mobilenet_v3_large", ["float32:1,3,64,64"], []),
    "detection": ("fasterrcnn_mobilenet_v3_large_320_fpn", ["float32:1,3,128,128"], ["min_size=128"]),
    "video": ("r3d_18", ["float32:1,3,4,32,32"], []),
    "optical flow": ("raft_small", ["float32:1,3,128,128", "float32:1,3,128,128"], []),
    "quantizable": ("quantized_mobilenet_v3_large", ["float32:1,3,64,64"], []),
    "import path": ("torch.nn:Linear", ["float32:2,8"], ["in_features=8", "out_features=4"]),
    "file": ("my.py:gpt2", ["int64:1,16"], ["n_layer=1"]),
    "hf model type": ("hf:vit", ["float32:1,3,32,32"], ["num_hidden_layers=1", "image_size=32", "patch_size=8"]),
    "hf class": ("hf:BertForSequenceClassification", ["int64:1,16"], ["num_hidden_layers=1"]),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_one_model_of_every_family_is_predicted_in_a_fresh_process(project, family):
    model, inputs, model_args = FAMILIES[family]
    if model.startswith("hf:") or model.startswith("my.py"):
        pytest.importorskip("transformers")
    args = ["predict", "--model", model, "--device", "A30", "--json"]
    args += [a for i in inputs for a in ("--input", i)] + [a for m in model_args for a in ("--model-arg", m)]
    res = opcost(project, args)
    assert res.returncode == 0, res.stderr[-3000:]
    answer = json.loads(res.stdout)  # stdout is the JSON and nothing else
    assert answer["time_s"] > 0 and answer["model"].startswith(model), answer


COLD = """
import sys
from opcost.model.composition.network import extract_network
from opcost.ops.netspec import NetSpec

for mode in ("inference", "training"):  # tracing, FLOP counting, the memory's optimizer step
    extract_network(NetSpec.make("resnet18", ["float32:2,3,32,32"]), mode)
print("dynamo loaded:", "torch._dynamo" in sys.modules)
"""
IMPORTS = """
import sys
import torch
from opcost.ops.nodynamo import dynamo_stub

with dynamo_stub():
    import torch.distributed.tensor  # registers custom ops: inspect.getmodule walks sys.modules mid-import
    import torch._dynamo  # not one of the importers served: the real module

    assert torch._dynamo.config is sys.modules["torch._dynamo.config"] and callable(torch._dynamo.optimize)
print("ok")
"""


def test_the_dynamo_stand_in_serves_its_importers_and_breaks_no_import():
    """A torchvision prediction (both modes) never loads TorchDynamo (the cold start); inside the
    stand-in's scope an import that walks `sys.modules` works, and any other importer gets the real one."""
    for code, expect in ((IMPORTS, "ok"), (COLD, "dynamo loaded: False")):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        assert res.stdout.strip() == expect
