"""Modes and defaults have one home each: the mode check is written once (opcost.modes), and the defaults
of train.folds and clock.min_points live on their parameter classes (opcost.params), which the parsers and
the clock model read instead of repeating the numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opcost.errors import OpcostError
from opcost.model.clocks import clock
from opcost.model.prediction.predict import Predictor
from opcost.modes import MODES, check_mode
from opcost.params.clock import ClockParams
from opcost.params.train import TrainParams
from opcost.paths import Paths

SRC = Path(__file__).resolve().parents[1] / "src" / "opcost"


def test_the_mode_check_is_written_once():
    homes = [p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if re.search(r"unknown mode\b", p.read_text())]
    assert homes == ["modes.py"]
    assert [check_mode(m) for m in MODES] == list(MODES)
    with pytest.raises(OpcostError, match=r"unknown mode 'trainig'; valid modes: inference, training"):
        check_mode("trainig")


def test_entry_points_give_the_one_mode_error(tmp_path):
    with pytest.raises(OpcostError, match=r"^unknown mode 'x'; valid modes: inference, training$"):
        Predictor(paths=Paths(tmp_path), disk_cache=False).bundle("A30", "x")


def test_defaults_have_one_home():
    assert clock.MIN_POINTS == ClockParams.min_points == 3
    assert TrainParams.folds == 15
    # a number given as the default of either anywhere but its field: get("folds", 15), MIN_POINTS = 3, ...
    literal = re.compile(r'get\("(folds|min_points)",\s*\d|\b(MIN_POINTS|FOLDS)\s*=\s*\d|\b(folds|min_points)\s*=\s*\d')
    for p in SRC.rglob("*.py"):
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if literal.search(line) and not re.search(r"^\s*(folds|min_points): int = \d+\b", line):
                pytest.fail(f"{p.relative_to(SRC)}:{n} repeats a default: {line.strip()}")
