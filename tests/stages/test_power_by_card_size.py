"""The power model's held-out errors are reported apart for cards above 300 W (stages/train_clock.by_card_size)."""

from __future__ import annotations

import pandas as pd
import pytest

from opcost.stages.train_clock import BIG_CARD_W, by_card_size, pooled


def test_big_and_small_cards_are_scored_apart():
    off = pd.DataFrame({
        "device": ["H200", "H200", "A100", "V100", "V100"],
        "tdp": [700.0, 700.0, 400.0, 250.0, BIG_CARD_W],  # exactly 300 W counts as small
        "kind": ["absolute", "absolute", "sweep", "absolute", "absolute"],
        "p": [600.0, 500.0, 400.0, 200.0, 100.0],
        "p_hat": [300.0, 500.0, 300.0, 220.0, 100.0],
        "t": [1.0, 3.0, 1.0, 1.0, 1.0],
    })  # fmt: skip
    got = by_card_size(off)
    big, small = got["over_300w"], got["up_to_300w"]
    assert big["gpus"] == ["A100", "H200"] and small["gpus"] == ["V100"]
    assert big["absolute"]["power_mape"] == pytest.approx(25.0)  # |300/600 - 1| = 0.5 and 0, mean 0.25
    assert big["absolute"]["power_mdape"] == pytest.approx(25.0)
    assert big["absolute"]["energy_time_weighted"] == pytest.approx(100 * 300 / (600 + 1500))
    assert big["sweep"]["power_mape"] == pytest.approx(25.0) and big["sweep"]["rows"] == 1
    assert small["absolute"]["power_mape"] == pytest.approx(5.0) and "sweep" not in small
    assert pooled(off[off["device"] == "V100"]) == small["absolute"]
