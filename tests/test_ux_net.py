"""What a user meets (issue 23): silently wrong answers become one-line errors, tracebacks one line."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from opcost.cli import app
from opcost.config import Paths
from opcost.errors import OpcostError
from opcost.model.predict import Predictor
from opcost.ops.netspec import NetSpec, build_model


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
