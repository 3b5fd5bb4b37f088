"""What a user meets (issue 23): silently wrong answers become one-line errors, tracebacks one line."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from builders import record_in_lock, tiny_bundle
from opcost.cli import app
from opcost.errors import OpcostError
from opcost.model.prediction.predict import Predictor
from opcost.ops.netspec import NetSpec, build_model
from opcost.paths import Paths


def test_a_hf_config_typo_is_refused_naming_the_closest_field():
    pytest.importorskip("transformers")
    with pytest.raises(OpcostError, match=r"no argument 'n_layerz' \(closest: n_layer\)"):
        build_model(NetSpec.make("hf:gpt2", ["int64:1,8"], {"n_layerz": 2}))
    with pytest.raises(OpcostError, match="n_layerz"):
        build_model(NetSpec.make("hf:GPT2Model", ["int64:1,8"], {"n_layerz": 2}))
    # the config's own fields, its attribute aliases and the generic switches still pass
    ok = build_model(NetSpec.make("hf:gpt2", ["int64:1,8"], {"n_layer": 2, "attn_implementation": "eager"}))
    assert ok.module.config.n_layer == 2
    assert build_model(NetSpec.make("hf:gpt2", ["int64:1,8"], {"num_hidden_layers": 1})).module.config.n_layer == 1


def test_tokens_beyond_a_learned_position_table_are_refused():
    pytest.importorskip("transformers")
    args = {"n_layer": 1}
    with pytest.raises(OpcostError, match="at most 1024 positions.*4096 tokens"):
        build_model(NetSpec.make("hf:gpt2", ["int64:2,4096"], args))
    with pytest.raises(OpcostError, match="at most 1024 positions"):
        build_model(NetSpec.make("hf:gpt2", ["int64:2,1025"], args))
    assert build_model(NetSpec.make("hf:gpt2", ["int64:2,1024"], args)).inputs[0].shape == (2, 1024)


@pytest.mark.parametrize("value", [math.nan, 0.5, -1.0])
def test_max_slowdown_that_keeps_no_row_is_refused(tmp_path, value):
    with pytest.raises(OpcostError, match="--max-slowdown .* must be >= 1"):
        Predictor(paths=Paths(tmp_path)).recommend("resnet18", "1,3,32,32", max_slowdown=value)


@pytest.mark.parametrize("verb", [["predict", "--device", "A30"], ["recommend"]])
@pytest.mark.parametrize("top", ["-3", "0"])
def test_a_top_that_would_drop_rows_is_refused(verb, top):
    res = CliRunner().invoke(app, [*verb, "--model", "resnet18", "--input-shape", "1,3,32,32", "--top", top])
    assert res.exit_code == 2 and f"--top {top}: expected a positive number" in res.stderr
    assert "Traceback" not in res.output


TINY = """
from torch import nn


def tiny():
    return nn.Sequential(nn.Linear(8, 4), nn.ReLU())
"""


@pytest.mark.parametrize("corrupt", ['{"key": [1', "[]", '{"records": 3}', "\x00\x01garbage"])
def test_a_corrupt_network_cache_entry_is_discarded_and_rebuilt(tmp_path, corrupt):
    (tmp_path / "tiny.py").write_text(TINY)
    net = NetSpec.make(f"{tmp_path / 'tiny.py'}:tiny", ["float32:2,8"])
    first = Predictor(paths=Paths(tmp_path)).network(net)
    (cached,) = (tmp_path / ".opcost" / "cache" / "networks").glob("*.json")
    cached.write_text(corrupt)
    again = Predictor(paths=Paths(tmp_path)).network(net)  # a new Predictor: nothing held in memory
    assert again.calls == first.calls and set(again.records) == set(first.records)
    assert json.loads(cached.read_text())["calls"] == first.calls  # rebuilt in place


def test_a_corrupt_parquet_is_one_line_naming_the_file(tmp_path):
    from opcost.data.evaluate import read_campaigns
    from opcost.schemas import TARGET_OPERATIONS
    from opcost.tables import read_table

    bad = tmp_path / "A30-inference" / "operations.parquet"
    bad.parent.mkdir()
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(OpcostError, match=r"operations.parquet is not a readable Parquet file .*dvc repro evaluate"):
        read_table(bad, TARGET_OPERATIONS, "evaluate")
    # a campaign's raw tables, read by the evaluate stage
    raw = tmp_path / "data" / "raw" / "cpu-smoke"
    raw.mkdir(parents=True)
    (raw / "campaign.json").write_text("{}")
    (raw / "timings.parquet").write_bytes(b"")
    with pytest.raises(OpcostError, match=r"timings.parquet is not a readable Parquet file .*profile@cpu-smoke"):
        read_campaigns(Paths(tmp_path))


HANGS = """
import time
from torch import nn


def builder():
    while True:
        time.sleep(0.05)


class Forward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        while True:
            try:
                time.sleep(0.05)
            except Exception:  # a user's catch-all does not swallow the deadline
                pass
"""


@pytest.mark.parametrize("name", ["builder", "Forward"])
def test_a_model_that_never_returns_stops_at_the_deadline(tmp_path, name):
    import time

    from opcost.deadline import deadline

    (tmp_path / "hangs.py").write_text(HANGS)
    net = NetSpec.make(f"{tmp_path / 'hangs.py'}:{name}", ["float32:2,8"])
    start = time.monotonic()
    with pytest.raises(OpcostError, match=r"did not finish within 1 s \(--timeout 1\)"):
        with deadline(1, f"predicting {net.label}"):
            Predictor(paths=Paths(tmp_path)).network(net)
    assert time.monotonic() - start < 20
    with pytest.raises(OpcostError, match="--timeout nan: expected seconds >= 0"):
        with deadline(float("nan"), "x"):
            pass


def test_cli_predict_times_out_on_one_line_and_survives_a_minus_inf_mask(trained, tmp_path):
    (tmp_path / "hangs.py").write_text(HANGS)
    model = f"{tmp_path / 'hangs.py'}:builder"
    # the pipeline root has no dvc.lock: its bundles are used as they are (the content check has its own tests)
    args = ["--input", "float32:2,8", "--device", "RTX2080Ti", "--mode", "training", "--trust-unrecorded"]
    res = CliRunner().invoke(app, ["predict", "--model", model, *args, "--timeout", "1"])
    assert res.exit_code == 2 and "did not finish within 1 s" in res.stderr and "Traceback" not in res.output
    (tmp_path / "mask.py").write_text(MASKED)
    args[1] = "float32:2,8,8"  # batch, tokens, width
    res = CliRunner().invoke(app, ["predict", "--model", f"{tmp_path / 'mask.py'}:Attention", *args, "--json"])
    assert res.exit_code == 0, res.output
    assert "NaN" not in res.stdout and "Infinity" not in res.stdout
    doc = json.loads(res.stdout)
    assert "masked_fill" in {o["kind"] for o in doc["operations"]} and doc["time_s"] > 0


MASKED = '''
import torch
from torch import nn


class Attention(nn.Module):
    """minGPT's causal self-attention scores."""

    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(8, 16)
        self.register_buffer("bias", torch.tril(torch.ones(8, 8)).view(1, 8, 8))

    def forward(self, x):
        q, k = self.qk(x).split(8, dim=2)
        att = (q @ k.transpose(-2, -1)).masked_fill(self.bias == 0, float("-inf"))
        return torch.softmax(att, dim=-1)
'''


DATA_DEPENDENT = '''
import torch
from torch import nn


class Picks(nn.Module):
    """Keeps the positive scores: an output whose shape depends on the values (as a detector's nms)."""

    def __init__(self):
        super().__init__()
        self.score = nn.Linear(8, 1)

    def forward(self, x):
        s = self.score(x).squeeze(-1)
        return x[torch.nonzero(s > 0, as_tuple=True)]
'''


def test_a_cpu_traced_network_says_so_up_front_and_is_cached(tmp_path, capsys, monkeypatch):
    import opcost.ops.netspec as netspec

    (tmp_path / "picks.py").write_text(DATA_DEPENDENT)
    net = NetSpec.make(f"{tmp_path / 'picks.py'}:Picks", ["float32:16,8"])
    order = []
    real_build = netspec.build_model

    def spy_build(n, meta=True, seed=0):
        if not meta:  # the slow path starts: the user has been told already
            order.append(("cpu build", "traced on the CPU" in capsys.readouterr().err))
        return real_build(n, meta=meta, seed=seed)

    monkeypatch.setattr(netspec, "build_model", spy_build)
    first = Predictor(paths=Paths(tmp_path)).network(net)
    assert order == [("cpu build", True)]
    assert any("traced on the CPU" in n for n in first.notes)
    # a new process (a new Predictor) reads the CPU trace from the cache: nothing is built or traced
    import opcost.ops.catalog as catalog

    monkeypatch.setattr(catalog, "trace_network", lambda *a, **k: pytest.fail("traced again"))
    again = Predictor(paths=Paths(tmp_path)).network(net)
    assert again.calls == first.calls and again.notes == first.notes


def _tiny_bundle(root, target: str = "A30-inference") -> None:
    """A small own bundle for `TINY`'s kinds (Linear, ReLU) under root/models/, and a cross-device model
    file beside it: a prediction for that GPU must not touch the cross-device model."""
    tiny_bundle(root, target)
    (root / "models" / "xdevice").mkdir()
    (root / "models" / "xdevice" / "xdevice.json").write_text("{}")  # never read for an own bundle


def test_a_never_seen_network_is_predicted_without_dynamo_pandas_torchvision_or_mlflow(tmp_path):
    """What a cold prediction of a user's file loads (issue 23's cold start): torch and the op tracer,
    not TorchDynamo (1.2-1.5 s), pandas (0.25 s: the cross-device model's module, needed only for a GPU
    without its own bundle), torchvision's model zoo or MLflow. SymPy is not in the list: torch's own
    decompositions import it (`torch._prims_common.elementwise_dtypes`, run by FlopCounterMode for ops
    without a flop formula), which no lighter path of opcost's avoids."""
    import subprocess
    import sys

    (tmp_path / "tiny.py").write_text(TINY)
    _tiny_bundle(tmp_path)
    record_in_lock(tmp_path)  # as a clone's dvc.lock records it: a bundle nothing vouches for is refused
    code = (
        "import sys\n"
        "from pathlib import Path\nfrom opcost.paths import Paths\n"
        "from opcost.model.prediction.predict import Predictor\n"
        "from opcost.ops.netspec import NetSpec\n"
        f"net = NetSpec.make({str(tmp_path / 'tiny.py')!r} + ':tiny', ['float32:2,8'])\n"
        f"pr = Predictor(paths=Paths(Path({str(tmp_path)!r})))\n"
        "n = pr.network(net)\n"
        "assert n.calls and 'torch' in sys.modules\n"
        "p = pr.predict(net, None, 'NVIDIA A30')  # an NVML name of a GPU with its own bundle\n"
        "assert p.device_config == 'A30' and p.sources and p.time_s > 0\n"
        "print(sorted(m for m in ('torch._dynamo', 'pandas', 'torchvision', 'mlflow') if m in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
