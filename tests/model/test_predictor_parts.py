"""The pieces `Predictor` is composed of (issue 22), each on known answers: the clock grid takes its
size from the caller and reads no parameters file, intervals widen multiplicatively, an own bundle is
found without the cross-device model, and the network cache hands back what it stored."""

from __future__ import annotations

import sys

import pytest

from opcost.devices import find_device
from opcost.model.prediction.clocktransfer import clock_grid, widen
from opcost.model.prediction.predict import Predictor
from opcost.model.prediction.xdevice_predict import own_config
from opcost.paths import Paths


def test_the_clock_grid_is_the_callers_and_reads_no_params(tmp_path):
    """A30: 210..1440 MHz, boost 1440. Four points: 210, 620, 1030, 1440 (the boost among them)."""
    (tmp_path / "params.yaml").write_text("clock:\n  grid_points: fifteen\n")  # a typo the library must not read
    pr = Predictor(paths=Paths(tmp_path), clock_grid_points=4)
    assert pr.clock_grid("A30") == [210.0, 620.0, 1030.0, 1440.0]
    assert clock_grid(find_device("A30"), 3) == [210.0, 825.0, 1440.0]
    assert clock_grid(find_device("not-a-gpu"), 4) == []


def test_the_edge_reads_the_grid_from_params(tmp_path):
    from opcost.api import clock_grid_points
    from opcost.params.clock import ClockParams

    assert clock_grid_points(Paths(tmp_path)) == ClockParams().grid_points  # no params.yaml: the default
    (tmp_path / "params.yaml").write_text("clock:\n  grid_points: fifteen\n")
    with pytest.raises(Exception, match="grid_points"):
        clock_grid_points(Paths(tmp_path))


def test_intervals_widen_multiplicatively_and_never_reach_zero():
    assert widen((2.0, 4.0), 0.5) == pytest.approx((2.0 / 1.5, 6.0))
    assert widen((1e-3, 2e-3), 9.0)[0] == pytest.approx(1e-4) and widen((1e-3, 2e-3), 9.0)[0] > 0
    assert widen((1.0, 2.0), 0.0) == (1.0, 2.0)


def test_an_own_bundle_is_found_by_its_key_or_nvml_name_without_the_cross_device_model():
    own = ["A30-inference", "A30_no_tf32-training"]
    before = "opcost.model.crossdevice.xdevice" in sys.modules
    assert own_config("A30", "inference", own) == "A30"
    assert own_config("NVIDIA A30", "inference", own) == "A30"
    assert own_config("A30_no_tf32", "training", own) == "A30_no_tf32"
    assert own_config("A30", "training", own) is None and own_config("T4", "inference", own) is None
    assert ("opcost.model.crossdevice.xdevice" in sys.modules) == before  # answered from the device table alone


def test_a_bundle_whose_lookup_lacks_an_array_is_one_line_naming_it(tmp_path):
    """bundle.py's typed loading: op ids without their times (an edited trees.npz) say which arrays go
    together, instead of a NoneType attribute error."""
    import dataclasses

    import numpy as np

    from builders import tiny_bundle
    from opcost.errors import OpcostError
    from opcost.io import read_npz, write_npz
    from opcost.model.composition.bundle import Bundle

    tiny_bundle(tmp_path, "A30-inference")
    folder = tmp_path / "models" / "A30-inference"
    b = dataclasses.replace(Bundle.load(folder), lookup={"op-1": (1e-3, 50.0, False)})
    b.save(folder)
    assert Bundle.load(folder).lookup == {"op-1": (1e-3, 50.0, False)}
    arrays = read_npz(folder / "trees.npz")
    del arrays["lookup/t_s"]
    write_npz({k: np.asarray(v) for k, v in arrays.items()}, folder / "trees.npz")
    with pytest.raises(OpcostError, match=r"lookup arrays are incomplete \(op_id, t_s, p_w and estimated go"):
        Bundle.load(folder)
