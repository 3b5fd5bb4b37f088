"""A set's relative model file is found beside the set file, wherever the command runs; a `--model`
file given on the command line stays relative to the current directory."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from opcost.errors import OpcostError
from opcost.ops.netspec import NetSpec, build_model, resolve_builder
from opcost.params.load import load_params

NET = "from torch import nn\n\n\ndef net():\n    return nn.Sequential(nn.Linear(4, {out}))\n"


def _root(tmp_path, model="nets/user.py:net", inline=False):
    root = tmp_path / "project"
    (root / "nets").mkdir(parents=True)
    (root / "nets" / "user.py").write_text(NET.format(out=3))
    sets = [{"model": model, "input_shape": [2, 4]}]
    (root / "params.yaml").write_text(yaml.safe_dump({"extract": {"sets": sets}} if inline else {}))
    if not inline:
        (root / "sets.yaml").write_text(yaml.safe_dump({"sets": sets}))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "nets").mkdir(parents=True)
    (elsewhere / "nets" / "user.py").write_text(NET.format(out=7))  # same relative name: must not be taken
    return root, elsewhere


@pytest.mark.parametrize("inline", [False, True], ids=["sets.yaml", "params.yaml extract.sets"])
def test_a_sets_model_file_is_found_beside_the_set_file_from_any_directory(tmp_path, monkeypatch, inline):
    root, elsewhere = _root(tmp_path, inline=inline)
    monkeypatch.chdir(elsewhere)
    (s,) = load_params(root / "params.yaml").extract.sets
    assert s.model == "nets/user.py:net" and s.set_id == "nets/user.py:net:2x4"  # ids stay relative
    spec = NetSpec.from_set(s)
    resolve_builder(spec)
    loaded = build_model(spec)
    assert loaded.module[0].out_features == 3  # the set file's network, not the cwd's namesake (7)
    want = hashlib.sha256((root / "nets" / "user.py").read_bytes()).hexdigest()[:16]
    assert spec.key()["source"] == want  # the cache key hashes the file the set names
    assert spec.with_inputs(spec.inputs).key()["source"] == want


def test_a_missing_set_file_is_one_line_naming_the_path_and_the_folder(tmp_path, monkeypatch):
    root, elsewhere = _root(tmp_path, model="nets/gone.py:net")
    monkeypatch.chdir(elsewhere)
    (s,) = load_params(root / "params.yaml").extract.sets
    with pytest.raises(OpcostError) as exc:
        resolve_builder(NetSpec.from_set(s))
    msg = str(exc.value)
    want = f"model file 'nets/gone.py' of 'nets/gone.py:net' not found in {root.resolve()} (the set file's folder)"
    assert msg == want


def test_a_command_line_model_file_stays_relative_to_the_current_directory(tmp_path, monkeypatch):
    root, elsewhere = _root(tmp_path)
    monkeypatch.chdir(elsewhere)
    assert build_model(NetSpec.make("nets/user.py:net", ["float32:2,4"])).module[0].out_features == 7
    monkeypatch.chdir(root.parent)
    with pytest.raises(OpcostError, match=r"^model file 'nets/user.py' of 'nets/user.py:net' not found$"):
        resolve_builder(NetSpec.make("nets/user.py:net", ["float32:2,4"]))
