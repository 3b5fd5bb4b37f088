"""Extract sets in sets.yaml, and a user's network (module:callable, N-D input) as an extract set."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import yaml

from opcost.errors import OpcostError
from opcost.measure.workload import network_workload
from opcost.params.extract import ModelInputSet
from opcost.params.load import load_params
from opcost.params.profile import CampaignParams
from opcost.paths import Paths
from opcost.schemas import OCCURRENCES, OPERATIONS
from opcost.stages.extract import run as run_extract_stage

NET_FILE = '''
from torch import nn


class Tagger(nn.Module):
    """Token ids -> embedding -> a batch-first GRU -> one score per step."""

    def __init__(self, vocab, hidden=16, layers=1):
        super().__init__()
        self.emb = nn.Embedding(vocab, 8)
        self.rnn = nn.GRU(8, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.rnn(self.emb(x))
        return self.head(out)


def tagger(vocab=50, hidden=16, layers=1):
    return Tagger(vocab, hidden, layers)


def lstm(hidden=16, layers=1):
    return nn.LSTM(4, hidden, num_layers=layers, batch_first=True)
'''


def user_set(**kw) -> dict:
    return {"model": "nets/user.py:lstm", "input_shape": [2, 5, 4], **kw}


def parse(raw: dict) -> ModelInputSet:
    return ModelInputSet.from_dict(raw, "sets.yaml: sets[0]")


def test_a_user_set_takes_a_callable_its_arguments_and_an_n_d_input():
    s = parse(user_set(model_args={"layers": 2, "hidden": 8}, modes=["inference", "training"]))
    assert s.is_user and s.input_shape == (2, 5, 4)
    assert s.model_args == (("hidden", 8), ("layers", 2))  # sorted: the id does not depend on YAML order
    assert s.set_id == "nets/user.py:lstm(hidden=8,layers=2):2x5x4"
    tok = parse(user_set(model="nets/user.py:tagger", input_shape=[2, 7], input_dtype="int64", vocab=50))
    assert tok.set_id == "nets/user.py:tagger:2x7:input=int64:vocab=50"
    assert parse(user_set(model="pkg.mod:make", input_shape=[3])).set_id == "pkg.mod:make:3"
    # the campaign side accepts every such id
    for sid in (s.set_id, tok.set_id, "resnet18:2x3x32x32:float16"):
        CampaignParams.from_dict("c", {"sets": [sid]}, "params.yaml: profile.campaigns.c")


@pytest.mark.parametrize(
    "raw, message",
    [
        (user_set(model="/abs/user.py:lstm"), "relative path"),
        (user_set(model="nets/user.py:"), "neither a torchvision name"),
        (user_set(input_shape=[2, 0, 4]), "1 to 8 positive integers"),
        (user_set(input_shape=[]), "1 to 8 positive integers"),
        (user_set(model_args=["layers"]), "model_args: expected a mapping"),
        (user_set(model_args={"layers": {"deep": 1}}), "model_args.layers: expected a number"),
        (user_set(model_args={"scale": float("nan")}), "model_args.scale: expected a finite number"),
        (user_set(input_dtype="int64", vocab=0), "vocab: expected an integer >= 1"),
        (user_set(vocab=10), "vocab applies to an integer input"),
        (user_set(input_dtype="complex64"), "input_dtype 'complex64' is not one of"),
        (user_set(model_arg={"layers": 2}), "unknown key 'model_arg' (closest valid key: 'model_args'"),
        ({"model": "resnet18", "input_shape": [2, 3, 32]}, "B,C,H,W"),
        ({"model": "resnet18", "input_shape": [2, 3, 32, 32], "model_args": {"num_classes": 3}}, "user's network"),
    ],
)
def test_bad_user_sets_get_one_line_naming_the_entry(raw, message):
    with pytest.raises(OpcostError) as exc:
        parse(raw)
    msg = str(exc.value)
    assert message in msg and "\n" not in msg, msg


def _root(tmp_path, sets, inline=None):
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "user.py").write_text(NET_FILE)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({} if inline is None else {"extract": {"sets": inline}}))
    if sets is not None:
        (tmp_path / "sets.yaml").write_text(yaml.safe_dump({"sets": sets}))
    return Paths(tmp_path)


def test_sets_come_from_sets_yaml_and_never_from_two_places(tmp_path):
    paths = _root(tmp_path, [user_set(), {"model": "resnet18", "input_shape": [1, 3, 32, 32]}])
    assert paths.extract_sets == tmp_path / "sets.yaml"
    ids = [s.set_id for s in load_params(paths.params).extract.sets]
    assert ids == ["nets/user.py:lstm:2x5x4", "resnet18:1x3x32x32"]
    # the same sets inline in params.yaml as well: refused, naming both
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"extract": {"sets": [user_set()]}}))
    with pytest.raises(OpcostError, match="extract.sets is given, and so is sets.yaml"):
        load_params(paths.params)
    # a typo in sets.yaml names that file
    (tmp_path / "params.yaml").write_text("{}\n")
    (tmp_path / "sets.yaml").write_text(yaml.safe_dump({"set": []}))
    with pytest.raises(OpcostError, match=r"sets.yaml \(top level\): unknown key 'set'"):
        load_params(paths.params)
    (tmp_path / "sets.yaml").write_text(yaml.safe_dump({"sets": [user_set(), user_set()]}))
    with pytest.raises(OpcostError, match=r"sets.yaml: sets lists nets/user.py:lstm:2x5x4 more than once"):
        load_params(paths.params)


def test_without_a_sets_file_the_sets_are_params_yaml_extract_sets(tmp_path):
    """The one load_params call with no sets file: params.yaml's extract.sets, errors naming params.yaml."""
    paths = _root(tmp_path, None, inline=[user_set(), {"model": "resnet18", "input_shape": [1, 3, 32, 32]}])
    assert not paths.extract_sets.exists()
    ids = [s.set_id for s in load_params(paths.params).extract.sets]
    assert ids == ["nets/user.py:lstm:2x5x4", "resnet18:1x3x32x32"]
    (tmp_path / "params.yaml").write_text("{}\n")
    assert load_params(paths.params).extract.sets == ()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"extract": {"sets": [user_set(), user_set()]}}))
    with pytest.raises(OpcostError, match=r"^params.yaml: extract.sets lists nets/user.py:lstm:2x5x4 more than once"):
        load_params(paths.params)


@pytest.mark.parametrize(
    "set_id, model, shape, dtype",
    [
        ("resnet18:32x3x224x224", "resnet18", "32x3x224x224", None),
        ("resnet18:32x3x224x224:float16", "resnet18", "32x3x224x224", "float16"),
        ("networks/recurrent.py:lstm(layers=2):8x64x32", "networks/recurrent.py:lstm(layers=2)", "8x64x32", None),
        ("pkg.mod:net:16:input=int64:vocab=100", "pkg.mod:net", "16", None),
        ("nets/t.py:bert(heads=2):4x128:bfloat16:input=int64", "nets/t.py:bert(heads=2)", "4x128", "bfloat16"),
    ],
)
def test_set_id_pattern_names_model_shape_and_dtype(set_id, model, shape, dtype):
    """SET_ID's groups are how readers (validate's figure labels) take a set id apart, never by slicing."""
    from opcost.params.profile import SET_ID

    m = SET_ID.fullmatch(set_id)
    assert m is not None
    assert (m.group("model"), m.group("shape"), m.group("dtype")) == (model, shape, dtype)


def test_the_repository_keeps_its_sets_out_of_params_yaml(repo_root):
    """`dvc exp show` lists every leaf of params.yaml as a column: the sets (one column holding a list of
    41) live in sets.yaml, a dependency of extract, profile and validate, not a params entry."""
    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    assert "extract" not in params
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    for name in ("extract", "profile", "validate"):
        stage = stages[name].get("do", stages[name])
        assert "sets.yaml" in stage["deps"], name
        assert not any(str(p).startswith("extract") for p in stage.get("params", [])), name
    assert "networks" in stages["extract"]["deps"] and "networks" in stages["profile"]["do"]["deps"]
    assert len(load_params(repo_root / "params.yaml").extract.sets) == 41


def test_extract_stage_traces_a_user_network_with_token_inputs(tmp_path, monkeypatch):
    sets = [
        user_set(model_args={"layers": 2}, modes=["inference", "training"]),
        {"model": "nets/user.py:tagger", "input_shape": [2, 7], "input_dtype": "int64", "vocab": 50},
    ]
    paths = _root(tmp_path, sets)
    monkeypatch.chdir(tmp_path)  # a set's file is relative to the repository root, where DVC runs stages
    summary = run_extract_stage(paths, load_params(paths.params), show_progress=False)
    ops = OPERATIONS.validate(pd.read_parquet(paths.operations))
    occ = OCCURRENCES.validate(pd.read_parquet(paths.occurrences))
    assert summary["sets"] == 2 and summary["min_coverage"] == pytest.approx(1.0)
    kinds = occ.merge(ops[["op_id", "kind"]], on="op_id").groupby("set_id")["kind"].apply(sorted).to_dict()
    assert kinds["nets/user.py:lstm(layers=2):2x5x4"] == ["LSTM", "LSTM"]  # inference and training
    assert kinds["nets/user.py:tagger:2x7:input=int64:vocab=50"] == ["Embedding", "GRU", "Linear"]
    lstm = ops[ops["kind"] == "LSTM"].iloc[0]
    assert list(lstm["input_shapes"][0]) == [2, 5, 4] and lstm["hp_num_layers"] == 2
    emb = ops[ops["kind"] == "Embedding"].iloc[0]
    assert list(emb["input_dtypes"]) == ["int64"] and emb["hp_num_embeddings"] == 50


def test_a_missing_callable_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    paths = _root(tmp_path, [user_set(model="nets/user.py:lstn")])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OpcostError, match="has no callable 'lstn'.*it defines: .*lstm"):
        run_extract_stage(paths, load_params(paths.params), show_progress=False)
    assert not paths.operations.exists()


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_a_user_network_is_measured_as_a_whole(tmp_path, monkeypatch, mode):
    """A campaign with `networks: true` measures a user's set as netspec builds it (seeded real weights,
    int64 tokens below vocab); a training step moves the weights, inference leaves them."""
    import opcost.ops.netspec as netspec

    _root(tmp_path, None)
    monkeypatch.chdir(tmp_path)
    built = []
    real = netspec.build_model
    monkeypatch.setattr(netspec, "build_model", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    s = parse(user_set(model="nets/user.py:tagger", input_shape=[2, 7], input_dtype="int64", vocab=50))
    wl = network_workload(s, mode, "cpu", seed=0)
    (loaded,) = built
    assert wl.instances == 1 and loaded.inputs[0].dtype == "int64" and loaded.inputs[0].vocab == 50
    w0 = loaded.module.head.weight.detach().clone()
    wl.block()
    moved = not torch.equal(w0, loaded.module.head.weight.detach())
    assert moved == (mode == "training")
