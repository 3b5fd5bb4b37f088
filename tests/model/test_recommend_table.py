"""The recommend table on known predictions: intervals carried as given, ties where 90 % intervals
overlap the best's, uncalibrated and transferred answers marked, drops said once, removals counted."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opcost.model.prediction.answer import NetworkPrediction
from opcost.model.prediction.recommend import dropped_once, settings_table, summary_lines


def pred(device, clock, t, t_iv, e, e_iv, calibrated=True, clock_source=None) -> NetworkPrediction:
    return NetworkPrediction(
        model="m", input_shape=(1,), device_config=device, mode="inference", clock_mhz=clock,
        time_s=t, time_interval_s=t_iv, energy_j=e, energy_interval_j=e_iv,
        avg_power_w=None if e is None else e / t, sum_s=t, op_ids=["a"], kinds=["conv2d"],
        calls=np.array([1.0]), t_s=np.array([t]), e_j=None if e is None else np.array([e]),
        sources=["measured"], proxies=[None], calibrated=calibrated, clock_source=clock_source,
    )  # fmt: skip


@pytest.fixture
def preds():
    return [
        # 784 vs 702 MHz: 0.1 % apart in energy, intervals of +-25 %: a tie the table must call
        pred("A30", 784.0, 0.010, (0.008, 0.013), 1.000, (0.80, 1.25), clock_source="transferred"),
        pred("A30", 702.0, 0.011, (0.009, 0.014), 1.001, (0.80, 1.25), clock_source="transferred"),
        # clearly worse energy (interval disjoint from the best's), uncalibrated
        pred("T4", None, 0.040, (0.030, 0.050), 3.000, (2.60, 3.50), calibrated=False),
    ]


def test_intervals_ties_and_marks(preds):
    df = settings_table(preds)
    best = df.iloc[0]
    assert best["device_config"] == "A30" and best["clock_mhz"] == 784.0
    assert (best["time_lo_s"], best["time_hi_s"]) == (0.008, 0.013)
    assert (best["energy_lo_j"], best["energy_hi_j"]) == (0.80, 1.25)
    assert best["edp_lo_js"] == pytest.approx(0.008 * 0.80) and best["edp_hi_js"] == pytest.approx(0.013 * 1.25)
    by = {(r.device_config, r.clock_mhz if r.clock_mhz == r.clock_mhz else None): r for r in df.itertuples()}
    assert by[("A30", 702.0)].tie_energy and by[("A30", 784.0)].tie_energy and not by[("T4", None)].tie_energy
    assert by[("A30", 702.0)].tie_time and not by[("T4", None)].tie_time
    assert df.attrs["ties"]["energy"] == [{"device_config": "A30", "clock_mhz": 702.0, "energy_j": 1.001}]
    assert by[("T4", None)].marks == "uncalibrated" and by[("A30", 702.0)].marks == "clock transferred"
    lines = summary_lines(df)
    tie = [line for line in lines if line.startswith("tie for best energy: 1 of the 2 other settings")]
    assert len(tie) == 1 and "E* in ranks" in tie[0]
    assert any(line.startswith("uncalibrated:") for line in lines)
    # the JSON the CLI prints carries the intervals and ties
    rows = json.loads(df.to_json(orient="records"))
    assert rows[0]["energy_lo_j"] == 0.80 and rows[0]["tie_energy"] is True


def test_a_device_transferred_answer_is_marked(preds):
    p = preds[2]
    p.sources = ["transferred"] * len(p.sources)  # the cross-device model's answer: every op transferred
    p.composition = "cross-device"  # its scale and host floor, fitted on other GPUs' networks: not "uncalibrated"
    df = settings_table([p])
    assert df.loc[0, "marks"] == "device transferred"
    assert df.loc[0, "source"] == "transferred" and df.loc[0, "composition"] == "cross-device"


def test_a_transferred_composition_is_said_once_and_the_same_everywhere(preds):
    """A layer transferred from other configs is applied: the JSON, the marks and the note agree (never
    `composition_calibrated: false` beside a note saying a layer was applied)."""
    p = preds[2]
    p.composition, p.note = "transferred", "the T4-inference composition layer is transferred from A30-inference"
    assert settings_table([p]).loc[0, "marks"] == "composition transferred"
    doc = p.to_json()
    assert doc["composition"] == "transferred" and "composition_calibrated" not in doc
    assert preds[0].to_json()["composition"] == "calibrated"


def test_max_slowdown_counts_what_it_removes(preds):
    df = settings_table(preds, max_slowdown=1.5)
    assert len(df) == 2 and df.attrs["removed_by_max_slowdown"] == 1
    assert "--max-slowdown removed 1 setting(s) slower than allowed" in summary_lines(df)


def test_a_device_dropped_at_every_clock_is_said_once(preds):
    drops = [{"device_config": "RTX2080Ti", "clock_mhz": float(c), "needed_bytes": 14 * 2**30,
              "device_memory_bytes": 11 * 2**30} for c in range(300, 2001, 100)]  # fmt: skip
    assert len(drops) == 18
    (once,) = dropped_once(drops)
    assert once["settings"] == 18 and "clock_mhz" not in once
    lines = summary_lines(settings_table(preds, dropped=drops))
    assert [line for line in lines if "RTX2080Ti" in line] == [
        "dropped RTX2080Ti: the step needs 14.00 GiB, the device has 11.00 GiB (18 setting(s))"
    ]


def _sweep() -> list[NetworkPrediction]:
    """48 settings as `recommend --devices A30,A30_no_tf32,H100,L4` gives them: 12 clocks each, every clock
    transferred, H100 and L4 device transferred, A30_no_tf32 with a transferred composition layer."""
    out = []
    base = {"A30": (0.064, 10.5), "A30_no_tf32": (0.071, 11.2), "H100": (0.0233, 7.6), "L4": (0.16, 3.0)}
    for d, (t0, e0) in base.items():
        for i, clock in enumerate(range(538, 1980, 120)):
            t, e = t0 * (1 + 0.03 * i), e0 * (1 + 0.01 * (i - 4) ** 2 / 10)
            p = pred(d, float(clock), t, (t * 0.7, t * 1.5), e, (e * 0.7, e * 1.45), clock_source="transferred")
            if d in ("H100", "L4"):
                p.sources, p.composition = ["transferred"], "cross-device"
            if d == "A30_no_tf32":
                p.composition = "transferred"
            out.append(p)
    return out


def _render(df, top: int, width: int = 120) -> str:
    import io

    from rich.console import Console

    from opcost.cli import _settings_table

    con = Console(width=width, file=io.StringIO(), record=True)
    con.print(_settings_table(df, top, "resnet50 float32:32,3,224,224 (training)"))
    for line in summary_lines(df):
        con.print(line, highlight=False)
    return con.export_text()


@pytest.mark.parametrize("top", [5, 48])
def test_the_table_fits_120_columns_with_its_ties_and_marks_visible(top):
    """At 120 columns no cell is cut ("…"), the marks that differ between settings are a column, the marks every
    setting carries are said once, and a tie with the best is a `*` on the objective's rank."""
    df = settings_table(_sweep())
    text = _render(df, top)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 120
    header = next(line for line in text.splitlines() if "device" in line and "ranks t/E/EDP" in line)
    assert "marks" in header
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) >= top  # a wrapped marks cell adds lines, never hides a row
    marks = [r.split("│")[-2].strip() for r in rows]  # the last column; a long mark may wrap onto a second line
    assert "device transferred" in marks or "device" in marks
    assert any(m.startswith("composition") for m in marks) == (top == 48)  # no A30_no_tf32 row in the best 5
    assert "clock" not in marks  # every setting's mark: said once under the table
    assert "clock transferred (every setting): clock behaviour from the cross-clock model" in text
    assert any("*" in r for r in rows)  # ties visible on the rows
    assert any(line.startswith("tie for best time: ") for line in text.splitlines())


def test_a_tie_of_every_setting_is_said_once_not_on_each_row():
    same = [
        pred("A30", float(c), 0.010, (0.008, 0.013), 1.0, (0.8, 1.25), clock_source="transferred")
        for c in (600, 700, 800)
    ]
    df = settings_table(same)
    text = _render(df, 3)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert rows and not any("*" in r for r in rows)
    lines = [line for line in text.splitlines() if "ties with the best" in line]
    assert lines == ["every setting ties with the best on time and energy and EDP (90 % intervals overlap): the model "
                     "cannot tell them apart"]  # fmt: skip
    assert not any(line.startswith("tie for best") for line in text.splitlines())
