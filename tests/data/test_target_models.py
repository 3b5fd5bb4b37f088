"""The target table's `models` column: which models of the target's mode call each op (what netval's model
split may keep when it holds one model out)."""

from __future__ import annotations

import pandas as pd

from opcost.data.targets import op_models


def test_op_models_lists_the_callers_of_the_targets_mode_only():
    occ = pd.DataFrame(
        [
            ("resnet18:32x3x224x224", "resnet18", "inference", "conv"),
            ("resnet34:32x3x224x224", "resnet34", "inference", "conv"),
            ("resnet18:8x3x32x32", "resnet18", "inference", "conv"),
            ("resnet18:8x3x32x32", "resnet18", "inference", "small"),
            ("vit_b_32:32x3x224x224", "vit_b_32", "training", "conv"),
            ("vit_b_32:32x3x224x224", "vit_b_32", "training", "attn"),
        ],
        columns=["set_id", "model", "mode", "op_id"],
    )
    assert op_models(occ, "inference") == {"conv": ["resnet18", "resnet34"], "small": ["resnet18"]}
    assert op_models(occ, "training") == {"attn": ["vit_b_32"], "conv": ["vit_b_32"]}
