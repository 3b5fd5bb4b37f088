"""Spy: in the `model` split no row of the held-out model, at any of its input sizes, reaches a fit
(op models or composition); round 1's `network` split let the model's other sizes in."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from builders import LEFT_OUT_SIZES, left_out_data, linear_op_row
from opcost.model.composition import compose
from opcost.model.training import netval
from opcost.model.training.fit import prepare
from opcost.params.train import TrainParams


@pytest.fixture(scope="module")
def synthetic():
    return left_out_data()


@pytest.mark.parametrize("split", [netval.SPLIT_MODEL, netval.SPLIT_NETWORK])
def test_no_row_of_the_held_out_model_reaches_a_fit(synthetic, monkeypatch, split):
    data, nets, nops = synthetic
    fits, comps = [], []
    real_fit, real_comp = netval.fit_model, compose.fit

    def spy_fit(d, alg, fs, q, rows, tp):
        fits.append(set(d.df["op_id"].iloc[rows]))
        return real_fit(d, alg, fs, q, rows, tp)

    def spy_comp(mode, terms, time_s, energy_j, *limit):
        comps.append(set(np.round(np.asarray(time_s, float), 12)))
        return real_comp(mode, terms, time_s, energy_j, *limit)

    monkeypatch.setattr(netval, "fit_model", spy_fit)
    monkeypatch.setattr(compose, "fit", spy_comp)
    tp = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 10})
    out = netval.evaluate(data, nets, nops, {"time": ("rf", "improved")}, tp, split)
    assert len(out) == len(nets)
    leaks = 0
    # evaluate visits its groups in order, one op fit and one composition fit each
    groups = sorted(nets["model"].unique()) if split == netval.SPLIT_MODEL else list(nets["set_id"])
    assert len(fits) == len(comps) == len(groups)
    for g, fit_ops, comp_times in zip(groups, fits, comps):
        model = g.split(":")[0]
        model_ops = {o for o in data.df["op_id"] if o.startswith(model + "-")}
        model_times = set(np.round(nets.loc[nets["model"] == model, "t_s"].to_numpy(float), 12))
        leaks += len(fit_ops & model_ops) + len(comp_times & model_times)
    if split == netval.SPLIT_MODEL:
        assert leaks == 0
    else:  # the other input size of the held-out network's model stays in: what `model` fixes
        assert leaks > 0
    assert set(out["split"]) == {split}
    assert np.isfinite(out["t_error"]).all()


def _shared_build():
    """`left_out_data`'s six models, each op listing the model that calls it (the target table's `models`), plus
    three ops: `shared-x` called by net_a and net_c (another family), `shared-ab` by net_a and its sibling
    net_b, and `net_a-extra` that only an unmeasured input size of net_a calls (in `models`, not in `nops`)."""
    data, nets, nops = left_out_data()
    df = data.df.drop(columns=["models"], errors="ignore").copy()
    df["models"] = [[o.split("-")[0]] for o in df["op_id"]]
    extra = []
    for op_id, k, models, fams in (("shared-x", 512, ["net_a", "net_c"], ["fam1", "fam2"]),
                                   ("shared-ab", 576, ["net_a", "net_b"], ["fam1"]),
                                   ("net_a-extra", 640, ["net_a"], ["fam1"])):  # fmt: skip
        extra.append(linear_op_row(op_id, 256, k, 64, fams) | {"models": models})
    df = pd.concat([df, pd.DataFrame(extra)], ignore_index=True)
    add = [{"set_id": f"{m}:{size}", "op_id": o, "calls": 1}
           for o, ms in (("shared-x", ["net_a", "net_c"]), ("shared-ab", ["net_a", "net_b"]))
           for m in ms for size in LEFT_OUT_SIZES]  # fmt: skip
    catalog = df.drop(columns=["t_s", "p_w", "e_j"]).set_index("op_id")
    spec_cols = [c for c in nops.columns if c not in ("set_id", "op_id", "calls")]
    add = pd.DataFrame(add).join(catalog[spec_cols], on="op_id")
    return prepare(df, "inference", "A30"), nets, pd.concat([nops, add], ignore_index=True)


@pytest.mark.parametrize(
    "split, keep_shared, held, kept, dropped",
    [
        # a layer net_c also calls stays (measured for net_c); net_a's own ops go, at every input size
        (netval.SPLIT_MODEL, True, "net_a", {"shared-x", "shared-ab"}, {"net_a-extra", "net_a-8-0", "net_a-16-3"}),
        # a new family: what only its models call goes, siblings' shared layer too; a layer of fam2 stays
        (netval.SPLIT_FAMILY, True, "fam1", {"shared-x"}, {"shared-ab", "net_a-extra", "net_b-8-0"}),
        # round 28's rule, kept for comparison: every op the held-out networks call goes
        (netval.SPLIT_MODEL, False, "net_a", set(), {"shared-x", "shared-ab"}),
    ],
)
def test_a_layer_another_model_calls_stays_and_the_models_own_layers_go(monkeypatch, split, keep_shared, held, kept,
                                                                         dropped):  # fmt: skip
    data, nets, nops = _shared_build()
    seen: dict[str, set[str]] = {}
    real_fit = netval.fit_model

    def spy_fit(d, alg, fs, q, rows, tp):
        seen.setdefault("rows", set()).update(d.df["op_id"].iloc[rows])
        return real_fit(d, alg, fs, q, rows, tp)

    monkeypatch.setattr(netval, "fit_model", spy_fit)
    tp = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 5})
    fold = next(f for f in netval.folds(data, nets, nops, {"time": ("rf", "improved")}, tp, split, keep_shared)
                if f.name == held)  # fmt: skip
    fit_ops = set(data.df["op_id"].iloc[fold.train_rows])
    assert kept <= fit_ops and not (dropped & fit_ops)
    assert not (dropped & set(fold.coster.lookup))  # nor in the measured look-up
    assert seen["rows"] >= fit_ops


def test_a_new_family_loses_the_layers_its_unmeasured_siblings_call():
    """`held_only` by hand: holding out the ResNet family (only resnet18 measured) drops a layer that resnet18
    and the extracted-only resnet152 call, since a project that never saw ResNets would not have measured it;
    a layer vgg16 also calls stays. Holding out the model resnet18 alone keeps both (resnet152 calls one)."""
    callers = [frozenset({"resnet18", "resnet152"}), frozenset({"resnet18", "vgg16"}), frozenset({"resnet18"}),
               frozenset()]  # fmt: skip
    fam = netval.held_only(callers, {"resnet18"}, family="resnet")
    model = netval.held_only(callers, {"resnet18"})
    assert fam.tolist() == [True, False, True, False]
    assert model.tolist() == [False, False, True, False]


def test_a_network_smaller_than_every_fold_network_is_flagged_extrapolating() -> None:
    """Each held-out network is flagged as a prediction of it would be (model/composition/extrapolation.py), from its
    fold's networks only: net_f at 32 x 32 (3072 values per sample) against a fold of 224 x 224 ones
    (150528) is; at 160 x 160 (76800, within a factor 2 of 150528) it is not; no 224 x 224 network is."""
    tp = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 5})
    chosen = {"time": ("rf", "improved")}
    for small, flagged in (((32, 32), {"net_f"}), ((160, 160), set())):
        data, nets, nops = left_out_data(tiny="net_f", small=small)
        out = netval.evaluate(data, nets, nops, chosen, tp, netval.SPLIT_MODEL)
        assert set(out.loc[out["extrapolating"].astype(bool), "model"]) == flagged
        assert out["extrapolating"].dtype == bool and len(out) == len(nets)
