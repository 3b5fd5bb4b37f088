"""A composition layer's score sets (compose.ScoreSet, one per question and quantity): bundle.json keeps the
names and bytes it always had, and each question reads its own set, filled from its own split."""

from __future__ import annotations

import json

import pandas as pd

from builders import layer_scores
from opcost.io import json_text
from opcost.model.composition.compose import NEW_FAMILY_RULE, Composition
from opcost.model.training import netval

# six distinct score sets, each with its own labels and covariates: a set read for another question, or its
# labels or covariates taken from another set, gives other numbers
SETS = {
    ("pooled", "t"): [0.11, 0.12, 0.13],
    ("pooled", "e"): [0.21, 0.22],
    ("known", "t"): [0.31, 0.32],
    ("known", "e"): [0.41],
    ("new", "t"): [0.51, 0.52, 0.53, 0.54],
    ("new", "e"): [0.61, 0.62, 0.63],
}
NAME = {"pooled": "residuals", "known": "residuals_known", "new": "residuals_new"}


def legacy_json() -> dict:
    """A composition as bundle.json has always held it (the six lists and the two dicts keyed by list name)."""
    lists = {f"{NAME[q]}_{x}": v for (q, x), v in SETS.items()}
    return {
        "mode": "inference",
        "time_coef": {
            "sum": 1.0,
            "memory_sum": 0.0,
            "l2_sum": 0.0,
            "calls_floor": 0.0,
            "params_bw": 0.0,
            "const": 0.0,
        },  # fmt: skip
        "energy_coef": {"energy_sum": 1.0, "time": 0.0},
        "calibrated": True,
        "n_networks": 9,
        **lists,
        "source": "calibrated",
        "transferred_from": [],
        "family_terms": {"resnet": {"time": 0.0, "energy": 0.0, "n": 2.0}},
        "family_terms_rule": NEW_FAMILY_RULE,
        "transfer_widening": {},
        "transfer_evidence": "",
        "residual_groups": {k: [f"{k}:{i}" for i in range(len(v))] for k, v in lists.items()},
        "residual_covariates": {k: [round(-x, 2) for x in v] for k, v in lists.items()},
        "power_cap_w": 0.0,
    }


def test_a_layers_json_reads_back_byte_for_byte() -> None:
    """bundle.json's composition, written by the layer read from it, is the same text: every one of the six
    lists, labels and covariates under its own name; a set built with the test builders the same."""
    text = json_text(legacy_json(), 10)
    assert json_text(Composition.from_json(json.loads(text)).to_json(), 10) == text
    built = Composition("inference", calibrated=True, scores={
        k: s for q in ("pooled", "known", "new") for k, s in layer_scores(
            SETS[q, "t"], SETS[q, "e"], q, cov_t=[0.5] * len(SETS[q, "t"]), cov_e=[0.7] * len(SETS[q, "e"]),
            groups_t=["a"] * len(SETS[q, "t"]), groups_e=["b"] * len(SETS[q, "e"])).items()
    })  # fmt: skip
    text = json_text(built.to_json(), 10)
    back = Composition.from_json(json.loads(text))
    assert back.scores == built.scores and json_text(back.to_json(), 10) == text
    # sets with no labels or covariates recorded (as a transferred layer's known and new sets) stay without;
    # labels that do not match their scores are kept as written, and unused
    d = legacy_json()
    del d["residual_groups"]["residuals_new_e"], d["residual_covariates"]["residuals_known_t"]
    d["residual_groups"]["residuals_t"] = ["x"]
    text = json_text(d, 10)
    odd = Composition.from_json(json.loads(text))
    assert json_text(odd.to_json(), 10) == text and odd.groups_for("time") is None


def test_each_question_reads_its_own_set_its_labels_and_covariates() -> None:
    """Known answer: a family with a term gets the known set, another family the new one, no family the
    pooled one, for time and energy apart, each with the labels and covariates written beside it."""
    comp = Composition.from_json(legacy_json())
    for family, q in (("resnet", "known"), ("convnext", "new"), (None, "new"), ("*", "pooled")):
        for which, x in (("time", "t"), ("energy", "e")):
            name = f"{NAME[q]}_{x}"
            assert comp.scores_for(which, family) == (q, SETS[q, x]), (family, which)
            assert comp.groups_for(which, family) == [f"{name}:{i}" for i in range(len(SETS[q, x]))]
            assert comp.covariates_for(which, family) == [round(-v, 2) for v in SETS[q, x]]


def test_the_train_stage_records_each_split_under_its_question() -> None:
    """netval.attach_scores: the model split's known-family rows are the known set, the family split the new
    set, the whole model split the pooled set (time and energy from their own columns), each labelled with
    what was held out and bundle.json's names unchanged."""
    rows = [  # split, family_known, t_error, e_error, held_out
        ("model", True, 0.1, 0.15, "m1"),
        ("model", False, 0.2, 0.25, "m2"),
        ("family", False, 0.3, 0.35, "f1"),
        ("family", False, 0.4, 0.45, "f2"),
        ("network", True, 0.5, 0.55, "n1"),
    ]
    net_pred = pd.DataFrame(rows, columns=["split", "family_known", "t_error", "e_error", "held_out"]).assign(
        predicted_t_s=[2.0, 3.0, 4.0, 5.0, 6.0], summed_t_s=1.0
    )
    comp = Composition("inference", calibrated=True, family_terms={"resnet": {"time": 0.0, "n": 2.0}})
    netval.attach_scores(comp, net_pred)
    d = comp.to_json()
    assert (d["residuals_t"], d["residuals_e"]) == ([0.1, 0.2], [0.15, 0.25])
    assert (d["residuals_known_t"], d["residuals_known_e"]) == ([0.1], [0.15])
    assert (d["residuals_new_t"], d["residuals_new_e"]) == ([0.3, 0.4], [0.35, 0.45])
    assert d["residual_groups"]["residuals_new_e"] == ["f1", "f2"]
    assert d["residual_groups"]["residuals_t"] == ["m1", "m2"]
    assert comp.covariates_for("time", "convnext") == [float(netval.covariate(p, 1.0)) for p in (4.0, 5.0)]
    empty = Composition("inference")
    netval.attach_scores(empty, net_pred.iloc[:0])
    assert empty.scores == {}
