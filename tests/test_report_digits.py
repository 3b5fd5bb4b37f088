"""Reports carry six significant digits; a bundle's bundle.json, which predictions read back, ten (io.py). Another
CPU's fit differs from this one's around the eighth digit in its flattest direction, so a report rounded to six
is the same on both; a bundle rounded to six would move its predictions."""

from __future__ import annotations

import json
from dataclasses import replace

from builders import small_bundle
from opcost.io import write_report


def test_a_report_rounds_to_six_significant_digits_and_a_rerun_s_eighth_digit_does_not_show(tmp_path):
    write_report({"mape": 4.956749742, "n": 3, "curve": [0.12345678, 26.88251355, None]}, tmp_path / "a.json")
    write_report({"mape": 4.956749749, "n": 3, "curve": [0.12345679, 26.8825132, None]}, tmp_path / "b.json")
    assert json.loads((tmp_path / "a.json").read_text()) == {
        "mape": 4.95675,
        "n": 3,
        "curve": [0.123457, 26.8825, None],
    }
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_a_bundle_keeps_ten_digits_of_what_predictions_read(tmp_path):
    b = replace(small_bundle(), scores={"time": {"twe": 1.2345678901234}})
    b.save(tmp_path / "bundle")
    assert json.loads((tmp_path / "bundle" / "bundle.json").read_text())["scores"]["time"]["twe"] == 1.23456789
