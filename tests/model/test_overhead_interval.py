"""A one-layer network on an own bundle whose composition layer adds a constant time: its answer is mostly that
constant, far beyond the composition correction of any measured network, and its 90 % interval must stay a sane
band (the scale model held at its data's edge, widened as an extrapolation) with a warning saying why, not the
0.0015-92 ms a quadratic variance trend read far outside its data gave around 0.28 ms."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from builders import layer_scores, record_in_lock, tiny_bundle
from opcost.model.composition import intervals
from opcost.model.composition.bundle import Bundle
from opcost.model.composition.compose import DEFAULT_TIME, EXTRAPOLATION_WIDENING, Composition

LAYER = """
from torch import nn


def one():
    return nn.Linear(8, 4)
"""
COVARIATES = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5] * 2  # the measured networks' log(predicted / sum of op costs)
CONST_S = 3e-4  # the layer's constant time: nearly all of a one-layer network's answer


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tiny_bundle(tmp_path, "A30-inference")
    folder = tmp_path / "models" / "A30-inference"
    b = Bundle.load(folder)
    # errors e = +-0.1 sqrt(1 + 25 c^2): normalised scores +-0.1, scale ratio 25 (tests/model/test_hetero_intervals.py)
    res = [float(np.expm1(0.1 * math.sqrt(1 + 25 * x * x) * s)) for x, s in zip(COVARIATES, [1] * 6 + [-1] * 6)]
    comp = Composition("inference", {**DEFAULT_TIME, "const": CONST_S}, calibrated=True, n_networks=12,
                       scores=layer_scores(res, res, cov_t=COVARIATES, cov_e=COVARIATES))  # fmt: skip
    b.composition = comp
    b.save(folder)
    record_in_lock(tmp_path)
    (tmp_path / "layer.py").write_text(LAYER)
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path


def test_a_one_layer_network_gets_the_edge_interval_widened_and_a_warning(project: Path) -> None:
    from opcost.cli import app

    args = ["predict", "--model", f"{project / 'layer.py'}:one", "--input", "float32:2,8", "--device", "A30", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    t, summed = got["time_s"], got["sum_of_ops_s"]
    c = math.log(t / summed)
    assert c > 2.0, (t, summed)  # the constant is most of the answer: far beyond the networks' |c| <= 0.5
    # the normal rule on 12 one-score groups of normalised scores +-0.1 (one df spent on the scale ratio), the
    # scale taken at |c| = 0.5, the half-width doubled as an extrapolation; centred on the errors' mean, 0
    h = intervals.t_quantile(0.95, 10) * 0.1 * math.sqrt(12 / 11) * math.sqrt(1 + 1 / 12)
    q = EXTRAPOLATION_WIDENING * h * math.sqrt(1 + 25 * 0.25)
    lo, hi = got["time_interval_s"]
    assert (lo, hi) == (pytest.approx(t * math.exp(-q)), pytest.approx(t * math.exp(q)))
    assert hi / lo < 10  # read at c, sqrt(1 + 25 c^2) > 10 alone: a band of several orders of magnitude
    said = [w for w in got["warnings"] if "the plain sum of op costs" in w]
    assert len(said) == 1 and f"{math.exp(c):.3g}x" in said[0] and "(|c| <= 0.50)" in said[0]
    assert "warning: the A30-inference composition layer's answer is" in res.stderr
