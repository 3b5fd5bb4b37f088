"""Host-bound wall-clock rows (xdevice.host_bound) and no-op rows (xdevice.thesis_ops) stay out of the
cross-device fit: known answers on synthetic rows, a spy on the trees' fit, and one row per no-op kind."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from builders import FAST_XDEVICE, SYNTH_GPUS, synthetic_xdevice_rows
from opcost.devices import DEVICES
from opcost.model.crossdevice import xdevice

PLATEAU = 150e-6


@pytest.fixture
def gpus(monkeypatch):
    for k, d in SYNTH_GPUS.items():
        monkeypatch.setitem(DEVICES, k, d)


def _plateau_rows() -> pd.DataFrame:
    """One wall-clock config: 10 `add` calls at the host's plateau (kernels of 1-20 us, each timed at
    max(kernel, plateau) plus a 1 % ripple), 6 large ones at 2.5-10x the plateau; 4 `relu` calls at the
    plateau (too few for a plateau of their own); and event-timed `add` calls as small as 1 us."""
    rng = np.random.default_rng(0)
    small = PLATEAU * (1 + 0.01 * rng.random(10))
    large = PLATEAU * np.array([2.5, 3, 4, 6, 8, 10])
    rows = [("SYN0", "add", t, 1.0) for t in (*small, *large)]
    rows += [("SYN0", "relu", PLATEAU, 1.0)] * 4
    rows += [("SYN1", "add", t, 0.0) for t in np.geomspace(1e-6, 1e-3, 12)]
    return pd.DataFrame(rows, columns=["device_config", "xkind", "t_s", "wall_clock"])


def test_host_bound_is_the_plateau_of_each_wall_clock_kind_and_nothing_else():
    rows = _plateau_rows()
    got = xdevice.host_bound(rows, 2.0)
    expect = np.r_[np.ones(10, bool), np.zeros(6, bool), np.zeros(4, bool), np.zeros(12, bool)]
    np.testing.assert_array_equal(got, expect)
    # the factor scales the plateau: at 3.5 the 2.5x and 3x calls are host-bound too
    np.testing.assert_array_equal(xdevice.host_bound(rows, 3.5)[10:16], [True, True, False, False, False, False])
    assert not xdevice.host_bound(rows.assign(wall_clock=0.0), 2.0).any()


def test_fit_never_sees_a_host_bound_row(gpus, monkeypatch):
    rows = synthetic_xdevice_rows(np.random.default_rng(1), n=30)
    wall = rows["device_config"].isin(["SYN0", "SYN1"]).to_numpy()
    small = wall & (rows["t_s"].to_numpy() < np.percentile(rows["t_s"], 30))
    rows.loc[wall, "wall_clock"] = 1.0
    rows.loc[small, "t_s"] = PLATEAU  # every small wall-clock call on the host's plateau
    seen: list[int] = []
    real = xdevice.fit_trees

    def spy(X, y, p, w=None):
        seen.append(len(y))
        return real(X, y, p, w)

    monkeypatch.setattr(xdevice, "fit_trees", spy)
    model = xdevice.fit(rows, FAST_XDEVICE)
    flagged = xdevice.host_bound(rows, FAST_XDEVICE.host_plateau_factor)
    assert flagged.sum() >= small.sum() and not flagged[~wall].any()
    assert seen == [len(rows) - int(flagged.sum())]
    assert model.trained_on == tuple(sorted(SYNTH_GPUS))


def test_a_kind_only_wall_clock_rows_measured_is_transferred_without_their_host(gpus):
    """`layernorm` measured only by wall clock on SYN0-SYN2 (small calls on a 150 us plateau, large ones at
    their bytes), every other kind by events everywhere: on an unseen GPU a small layernorm call is
    predicted near its device time with the rule and near the plateau without it."""
    rows = synthetic_xdevice_rows(np.random.default_rng(2), n=40)
    ln = rows["xkind"].to_numpy() == "layernorm"
    rows = rows[~ln | rows["device_config"].isin(["SYN0", "SYN1", "SYN2"]).to_numpy()].reset_index(drop=True)
    ln = rows["xkind"].to_numpy() == "layernorm"
    rows.loc[ln, "wall_clock"] = 1.0
    rows.loc[ln, "t_s"] = np.maximum(rows.loc[ln, "t_s"], PLATEAU)
    test = synthetic_xdevice_rows(np.random.default_rng(3), n=40)
    test = test[(test["device_config"] == "SYN5") & (test["xkind"] == "layernorm")]
    test = test[test["t_s"] < PLATEAU / 3].reset_index(drop=True)
    assert len(test) >= 5
    with_rule = xdevice.fit(rows[rows["device_config"] != "SYN5"].reset_index(drop=True), FAST_XDEVICE).predict(test)
    no_rule = dataclasses.replace(FAST_XDEVICE, host_plateau_factor=1e-9)
    without = xdevice.fit(rows[rows["device_config"] != "SYN5"].reset_index(drop=True), no_rule).predict(test)
    ratio_with = np.median(with_rule / test["t_s"].to_numpy())
    ratio_without = np.median(without / test["t_s"].to_numpy())
    assert 0.5 < ratio_with < 2.0, ratio_with
    assert ratio_without > 3.0, ratio_without


def _target_table(kind: str, attrs: dict, t_s: float) -> pd.DataFrame:
    shape = [32, 128, 56, 56]
    spec = {"args": [{"tensor": 0}], "attrs": attrs, "category": "module", "inputs": [{"dtype": "float32",
            "shape": shape}], "kind": kind, "kwargs": {}, "target": f"torch.nn.{kind}"}  # fmt: skip
    numel = int(np.prod(shape))
    return pd.DataFrame([{
        "op_id": "x", "kind": kind, "device_config": "A30", "mode": "inference", "phase": "forward",
        "t_s": t_s, "output_shapes": [shape], "flops": float(numel), "bytes_read": 4.0 * numel,
        "bytes_written": 4.0 * numel, "params": 0, "is_view": False, "spec_json": json.dumps(spec),
        "parts_json": "[]", "estimated": False,
    }])  # fmt: skip


@pytest.mark.parametrize(("kind", "attrs", "kept"), [
    ("StochasticDepth", {"p": 0.1, "mode": "row"}, 0),  # eval mode: returns its input
    ("Dropout", {"p": 0.5, "inplace": False}, 0),
    ("ReLU", {"inplace": False}, 1),
])  # fmt: skip
def test_thesis_ops_leaves_no_ops_out(kind, attrs, kept):
    assert len(xdevice.thesis_ops(_target_table(kind, attrs, 3e-6), "A30")) == kept
