"""An own bundle trained without a clock sweep answers at its device's boost clock from its own measurements:
the boost clock is the default clock they were taken at (costing.reference_clock_mhz), so the answer is the
default clock's, `clock_source` is `measured` and recommend marks nothing transferred there; any other clock
goes through the cross-clock model (`transferred`, widened)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import record_in_lock, tiny_bundle
from opcost.devices import DEVICES
from opcost.model.composition.costing import CLOCK_SOURCES, MEASURED, TRANSFERRED
from opcost.paths import Paths


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from opcost.model.clocks.clock import ClockModel

    tiny_bundle(tmp_path, "A30-inference")
    record_in_lock(tmp_path)
    ClockModel(static_frac=0.3, gamma=2.0, logo_error={"time": 0.05, "energy": 0.07}).save(
        Paths(tmp_path).clock_model_dir
    )
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path


def test_the_boost_clock_of_an_own_bundle_is_its_measured_default(project: Path) -> None:
    from opcost.model.prediction.predict import Predictor

    assert DEVICES["A30"].boost_clock_mhz == 1440 and {MEASURED, TRANSFERRED} == set(CLOCK_SOURCES)
    pr = Predictor(paths=Paths(project), disk_cache=False)
    base = pr.predict("resnet18", "2,3,32,32", "A30")
    boost = pr.predict("resnet18", "2,3,32,32", "A30", clock_mhz=1440.0)
    assert base.clock_source is None and boost.clock_source == MEASURED
    assert (boost.time_s, boost.time_interval_s) == (base.time_s, base.time_interval_s)
    assert (boost.energy_j, boost.energy_interval_j) == (base.energy_j, base.energy_interval_j)
    assert "at 1440 MHz, the A30's boost clock" in boost.note and "clock behaviour transferred" not in boost.note
    slow = pr.predict("resnet18", "2,3,32,32", "A30", clock_mhz=1200.0)
    assert slow.clock_source == TRANSFERRED and slow.time_s > base.time_s and "clock behaviour transferred" in slow.note
    df = pr.recommend("resnet18", "2,3,32,32", "inference").set_index("clock_mhz")
    assert df.loc[1440.0, "clock_source"] == MEASURED and "clock transferred" not in df.loc[1440.0, "marks"]
    others = df.drop(index=1440.0)
    assert len(others) and (others["clock_source"] == TRANSFERRED).all()
    assert others["marks"].str.contains("clock transferred").all()
