"""Any network: model references, typed inputs, families beyond classification, Hugging Face
configs, ops that cannot be rebuilt, bad input, and the memory footprint."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from opcost.cli import app
from opcost.errors import OpcostError
from opcost.ops.catalog import extract_nets
from opcost.ops.footprint import Footprint, fits, memory_summary, reserved_estimate, round_block
from opcost.ops.memory import footprint, measure_cpu_peak
from opcost.ops.netspec import (
    InputSpec,
    NetSpec,
    build_model,
    integer_bound,
    make_inputs,
    parse_input,
    parse_model_args,
    trace_network,
)

runner = CliRunner()


def coverage_of(model, inputs=(), model_args=None, mode="inference"):
    rows = extract_nets([(NetSpec.make(model, inputs, model_args), mode)], show_progress=False).coverage_rows()
    return rows[0]


# -- parsing ---------------------------------------------------------------------------------


def test_parse_input_forms():
    assert parse_input("float32:32,3,224,224") == InputSpec((32, 3, 224, 224), "float32", None)
    assert parse_input("int64:8,512") == InputSpec((8, 512), "int64", None)
    assert parse_input("int64:8,512:vocab=50257") == InputSpec((8, 512), "int64", 50257)
    assert parse_input("float32:1,3,16,112,112").shape == (1, 3, 16, 112, 112)
    assert parse_input("int64:8,512:vocab=50257").text() == "int64:8,512:vocab=50257"
    for bad, what in [
        ("float31:2,3", "dtype 'float31'"),
        ("float32:2,x3", "positive integers"),
        ("float32:2,0", "positive integers"),
        ("float32:2,3:vocab=10", "integer inputs only"),
        ("int64:2,3:vocabulary=10", "vocab=N"),
        ("2,3,4", "expected DTYPE:D0"),
    ]:
        with pytest.raises(OpcostError, match=what):
            parse_input(bad)


def test_parse_model_args_reads_json_values_else_strings():
    args = parse_model_args(["n_layer=2", "attn_implementation=eager", "aux_logits=false", "dropout=0.5", "s=[1, 2]"])
    assert args == {"n_layer": 2, "attn_implementation": "eager", "aux_logits": False, "dropout": 0.5, "s": [1, 2]}
    with pytest.raises(OpcostError, match="expected key=value"):
        parse_model_args(["n_layer"])


def test_netspec_key_is_stable_and_follows_a_user_file(tmp_path):
    f = tmp_path / "net.py"
    f.write_text("from torch import nn\ndef make(width=4):\n    return nn.Linear(width, 2)\n")
    a = NetSpec.make(f"{f}:make", ["float32:3,4"], {"width": 4})
    b = NetSpec.make(f"{f}:make", [InputSpec((3, 4))], {"width": 4})
    before = a.key()
    assert before == b.key() and a.set_id == f"{f}:make(width=4):float32:3,4" and before["source"]
    f.write_text(f.read_text() + "# edited\n")  # the key hashes the file's content when asked
    assert a.key() != before and a.key()["source"] != before["source"]


# -- families beyond classification ----------------------------------------------------------


@pytest.mark.slow
def test_segmentation_video_and_optical_flow_cover_their_flops():
    rows = extract_nets(
        [
            (NetSpec.make("lraspp_mobilenet_v3_large", ["float32:1,3,64,64"]), "inference"),
            (NetSpec.make("r3d_18", ["float32:1,3,4,32,32"]), "inference"),
            (NetSpec.make("raft_small", ["float32:1,3,128,128", "float32:1,3,128,128"]), "inference"),
        ],
        show_progress=False,
    ).coverage_rows()
    for r in rows:
        assert r["within_tolerance"] and not r["missing_kinds"] and r["traced_on"] == "meta", r
    # RAFT takes two images, also by default; r3d_18's Conv3DSimple is recorded as the Conv3d it is
    assert build_model(NetSpec.make("raft_small")).inputs == (InputSpec((2, 3, 224, 224)),) * 2
    assert build_model(NetSpec.make("r3d_18")).inputs == (InputSpec((2, 3, 16, 112, 112)),)
    cat = extract_nets([(NetSpec.make("r3d_18", ["float32:1,3,4,32,32"]), "inference")], show_progress=False)
    kinds = Counter(cat.specs[o].kind for o in cat.results[0].calls.elements())
    assert kinds["Conv3d"] == 20 and "Conv3DSimple" not in kinds


@pytest.mark.slow
def test_detection_is_traced_on_the_cpu_where_meta_cannot_run_it():
    traced = trace_network(
        NetSpec.make("fasterrcnn_mobilenet_v3_large_320_fpn", ["float32:1,3,128,128"], {"min_size": 128}),
        "inference",
    )
    assert traced.device == "cpu" and "nonzero" in traced.notes[0]
    row = coverage_of("fasterrcnn_mobilenet_v3_large_320_fpn", ["float32:1,3,128,128"], {"min_size": 128})
    assert row["traced_on"] == "cpu" and row["within_tolerance"], row
    with pytest.raises(OpcostError, match="extract it in inference mode"):
        trace_network(NetSpec.make("fasterrcnn_mobilenet_v3_large_320_fpn"), "training")


def test_import_path_model_with_arguments_has_exact_calls():
    row = coverage_of("torch.nn:Linear", ["float32:2,8"], {"in_features": 8, "out_features": 4})
    # one Linear call: 2 x 4 outputs, 8 multiply-adds each
    assert row["calls"] == 1 and row["flops_total"] == 2 * 2 * 4 * 8 and row["coverage"] == 1.0


USER_FILE = """
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self, vocab=100, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        x = x + self.ln(x)
        return self.head(x)


def tiny(vocab=100, dim=16):
    return Tiny(vocab, dim)


def not_a_module():
    return 42


def broken():
    raise ValueError("width must be even,\\n got 3")


class Gather(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        y = self.act(x)
        idx = torch.nonzero(y)  # data-dependent: runs on the CPU, and cannot be rebuilt on meta
        return y.sum() + idx.sum()
"""


@pytest.fixture
def user_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("user") / "my_models.py"
    f.write_text(USER_FILE)
    return f


def test_user_file_model_with_token_inputs(user_file):
    net = NetSpec.make(f"{user_file}:tiny", ["int64:4,10"], {"vocab": 50})
    row = coverage_of(net.model, net.inputs, net.kwargs)
    assert row["calls"] == 4 and row["within_tolerance"]  # Embedding, LayerNorm, add, Linear
    loaded = build_model(net, meta=False)
    assert integer_bound(loaded.module, loaded.inputs[0]) == 50  # from the first nn.Embedding
    (ids,), _ = make_inputs(loaded, "cpu")
    assert ids.dtype == torch.int64 and int(ids.max()) < 50 and int(ids.min()) >= 0
    assert integer_bound(loaded.module, InputSpec((4, 10), "int64", 7)) == 7  # vocab= wins
    with pytest.raises(OpcostError, match="has no default input: describe what it takes with --input"):
        build_model(NetSpec.make(f"{user_file}:tiny"))


def test_an_op_that_cannot_be_rebuilt_is_named_with_its_share_of_calls(user_file):
    row = coverage_of(f"{user_file}:Gather", ["float32:3,4"])
    # ReLU, nonzero, sum, sum, add: nonzero's output shape depends on the values
    assert row["calls"] == 5 and row["traced_on"] == "cpu"
    assert list(row["missing_kinds"]) == ["nonzero"]
    assert row["missing_kinds"]["nonzero"]["calls"] == 1
    assert row["missing_kinds"]["nonzero"]["calls_share"] == pytest.approx(1 / 5)


@pytest.mark.parametrize(
    "model, inputs, message",
    [
        ("no_such_pkg.models:net", ["float32:2,3"], "cannot import module 'no_such_pkg.models'"),
        ("torch.nn:NoSuchLayer", ["float32:2,3"], "torch.nn has no callable 'NoSuchLayer'"),
        ("missing_file.py:net", ["float32:2,3"], "model file 'missing_file.py' of 'missing_file.py:net' not found"),
        ("{f}:not_a_module", ["float32:2,3"], "returned a int, not a torch.nn.Module"),
        ("{f}:broken", ["float32:2,3"], "building model .*broken failed: width must be even, got 3$"),
        ("{f}:tiny", ["float32:2,3,4"], "Tiny cannot run on input shape 2x3x4: Expected tensor for argument #1"),
        ("resnet19", [], "unknown model 'resnet19'; closest: resnet18"),
        ("hf:gpt3", [], "unknown Hugging Face model hf:gpt3"),
    ],
)
@pytest.mark.slow
def test_bad_models_and_inputs_are_one_line_errors_and_write_nothing(user_file, tmp_root, model, inputs, message):
    model = model.format(f=user_file)
    args = ["coverage", model, "--no-progress"] + [x for i in inputs for x in ("--input", i)]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith("error:")
    import re

    assert re.search(message, line.replace("error: ", "", 1)), line
    assert not any(tmp_root.iterdir())  # nothing written


def test_cli_coverage_takes_inputs_and_model_args(tmp_root):
    res = runner.invoke(
        app,
        ["coverage", "torch.nn:Linear", "--input", "float32:2,8", "--model-arg", "in_features=8",
         "--model-arg", "out_features=4", "--json", "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["model"] == "torch.nn:Linear(in_features=8, out_features=4)" and row["coverage"] == 1.0
    both = runner.invoke(app, ["coverage", "resnet18", "--input-shape", "1,3,32,32", "--input", "float32:1,3,32,32"])
    assert both.exit_code == 2 and "not both" in both.stderr


# -- Hugging Face transformers (built from configs: nothing is downloaded) -----------------


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.slow
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_transformers_gpt2_bert_vit_cover_their_flops(attn):
    pytest.importorskip("transformers")
    small = {"attn_implementation": attn}
    jobs = [
        (NetSpec.make("hf:gpt2", ["int64:2,128"], {**small, "n_layer": 2}), "inference"),
        (NetSpec.make("hf:bert", ["int64:2,128"], {**small, "num_hidden_layers": 2}), "training"),
        (NetSpec.make("hf:vit", ["float32:1,3,64,64"], {**small, "num_hidden_layers": 2, "image_size": 64}),
         "inference"),
    ]  # fmt: skip
    cat = extract_nets(jobs, show_progress=False)
    for r in cat.coverage_rows():
        assert r["within_tolerance"] and not r["missing_kinds"] and r["flops_total"] > 0, r
    calls = [cat.specs[o] for o in cat.results[0].calls.elements()]
    gpt2 = Counter(s.kind for s in calls)
    # token and position embeddings; per block ln_1, attention, +, ln_2, MLP (GELU), +; final LayerNorm
    assert gpt2["Embedding"] == 2 and gpt2["LayerNorm"] == 2 * 2 + 1 and gpt2["NewGELUActivation"] == 2
    adds = Counter(tuple(i.shape for i in s.inputs) for s in calls if s.kind == "add")
    assert adds[((2, 128, 768), (1, 128, 768))] == 1  # token + position embeddings
    assert adds[((2, 128, 768), (2, 128, 768))] == 2 * 2  # two residual adds per block
    if attn == "sdpa":
        assert gpt2["scaled_dot_product_attention"] == 2
    else:
        assert gpt2["softmax"] == 2 and gpt2["matmul"] == 4


@pytest.mark.slow
def test_hf_class_form_and_default_inputs():
    pytest.importorskip("transformers")
    loaded = build_model(NetSpec.make("hf:GPT2LMHeadModel", [], {"n_layer": 1, "vocab_size": 1000}))
    assert type(loaded.module).__name__ == "GPT2LMHeadModel"
    assert loaded.inputs == (InputSpec((2, 128), "int64", 1000),)
    vit = build_model(NetSpec.make("hf:vit", [], {"num_hidden_layers": 1, "image_size": 32, "patch_size": 8}))
    assert vit.inputs == (InputSpec((2, 3, 32, 32), "float32"),)


# -- memory ----------------------------------------------------------------------------------


def test_allocator_rounding_rule():
    assert [round_block(n) for n in (0, 1, 512, 513, 4096)] == [0, 512, 512, 1024, 4096]
    # 3 small blocks in one 2 MiB segment, one 5 MiB block in a 20 MiB segment, 11 MiB rounded to 12 MiB
    assert reserved_estimate(3 * 512, 5 << 20, 11 << 20) == (2 << 20) + (20 << 20) + (12 << 20)


def test_linear_inference_footprint_by_hand():
    """nn.Linear(256, 128) on a 64 x 256 input: weight 128 KiB, bias 512 B, input 64 KiB, output 32 KiB."""
    net = NetSpec.make("torch.nn:Linear", ["float32:64,256"], {"in_features": 256, "out_features": 128})
    traced = trace_network(net, "inference")
    fp = footprint(traced.loaded.module, traced.args, traced.kwargs, "inference")
    assert (fp.parameters, fp.buffers, fp.inputs) == (128 * 256 * 4 + 512, 0, 64 * 256 * 4)
    assert fp.activations == 64 * 128 * 4 and fp.gradients == fp.optimizer_state == 0
    assert fp.peak_bytes == 128 * 256 * 4 + 512 + 64 * 256 * 4 + 64 * 128 * 4
    sgd = footprint(traced.loaded.module, traced.args, traced.kwargs, "training", "sgd")
    adam = footprint(traced.loaded.module, traced.args, traced.kwargs, "training", "adam")
    assert sgd.gradients == sgd.parameters and sgd.optimizer_state == sgd.parameters  # one momentum buffer
    assert adam.optimizer_state == 2 * adam.parameters  # first and second moments
    assert sgd.activations == 0  # a Linear keeps its input (already there) and its weight for backward


@pytest.mark.slow
def test_training_peak_matches_the_cpu_allocator_on_a_small_cnn():
    def net():
        torch.manual_seed(0)
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 16 * 16, 10)
        )

    x = torch.randn(4, 3, 16, 16)
    # What oneDNN's convolution takes for itself on this CPU (its scratchpad and weight reorders go
    # through PyTorch's allocator, so the profiler sees them; a trace on meta tensors cannot): the
    # lone convolution's peak beyond its weights, input and output. 0 on CPUs whose kernel needs
    # none; 64 KiB + 1.9 KiB on an AVX-512 EPYC, which made an exact comparison depend on the CPU.
    lone = measure_cpu_peak(net()[0], (x,), {}, "inference")
    workspace = lone["peak_bytes"] - lone["existing_bytes"] - 4 * 8 * 16 * 16 * 4
    assert workspace >= 0
    for mode, opt in (("inference", None), ("training", "sgd"), ("training", "adam")):
        measured = measure_cpu_peak(net(), (x,), {}, mode, opt)["peak_bytes"]
        with torch.device("meta"):
            m = net()
        predicted = footprint(m, (torch.empty(4, 3, 16, 16, device="meta"),), {}, mode, opt)
        # the prediction is the measured peak, give or take 2 %, but for the library's own workspace
        assert 0.98 * predicted.peak_raw_bytes <= measured <= 1.02 * (predicted.peak_raw_bytes + workspace), (
            mode,
            opt,
            predicted.peak_raw_bytes,
            measured,
            workspace,
        )


def test_fit_against_the_device_table():
    fp = Footprint("training", "adam", 0, 0, 0, 0, 0, 0, 0, 0, 0, 12 << 30, "backward")
    s = memory_summary(fp)
    assert s["fits"]["A30"] and not s["fits"]["RTX2080Ti"]  # 24 GiB vs 11 GiB
    assert fits(fp, 24 * 2**30) and not fits(fp, 12 * 2**30)  # the CUDA context counts too


# -- prediction and recommendation with memory ----------------------------------------------


def test_predict_reports_memory_and_recommend_drops_small_devices(trained, user_file):
    from opcost.model.prediction.predict import Predictor

    paths, _, _ = trained
    pr = Predictor(paths=paths, trust_unrecorded=True)
    p = pr.predict("resnet18", "32,3,32,32", "RTX2080Ti", "training", optimizer="adam")
    m = p.to_json()["memory"]
    assert m["mode"] == "training" and m["optimizer"] == "adam" and m["fits_device"] is True
    assert m["optimizer_state"] == 2 * m["gradients"] and m["peak_bytes"] > m["parameters"] + m["activations"]
    assert set(m["fits"]) >= {"A30", "RTX2080Ti", "H100"}
    # a network from a user's file, by the new call form
    net = NetSpec.make(f"{user_file}:tiny", ["int64:4,10"])
    q = pr.predict(net, None, "A30_no_tf32", "training")
    assert q.model == f"{user_file}:tiny" and q.inputs == ["int64:4,10"] and q.memory["optimizer"] == "sgd"
    # about 14 GiB for a resnet18 training step at batch 640: too big for the 11 GiB RTX 2080 Ti only
    df = pr.recommend("resnet18", "640,3,224,224", "training")
    assert list(df["device_config"]) == ["A30_no_tf32"] and df["fits_memory"].tolist() == [True]
    (dropped,) = df.attrs["dropped"]
    assert dropped["device_config"] == "RTX2080Ti" and dropped["needed_bytes"] > dropped["device_memory_bytes"]
    res = runner.invoke(app, ["recommend", "--model", "resnet18", "--input-shape", "640,3,224,224", "--mode",
                              "training", "--trust-unrecorded"], env={"OPCOST_ROOT": str(paths.root)})  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "dropped RTX2080Ti: the step needs" in res.stdout and "the device has 11.00 GiB" in res.stdout
