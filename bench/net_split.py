"""Whole networks with their model (or family) held out: per-network errors, where the error comes from,
and composition candidates judged on the same folds (issue 21, section 3).

For each target with measured networks and each split (`model`, `family`), the folds are netval.folds:
exactly the op models, measured look-up and held-out groups of `train@<target>`'s network validation
(the chosen algorithm and features are read from reports/train/targets/<target>.json). Per fold:
- `current`: the composition layer as the train stage fits it (netval.fit_composition, with its
  per-family terms in the model split): the figures must equal reports/train/networks/<target>.csv;
- candidates: other composition columns, fitted in-fold the same way (non-negative least squares on
  relative error, the energy layer a_e x S_e + k x time, the same per-family terms); each one a physical
  hypothesis about what a network saves against its ops measured alone (CANDIDATES below);
- `current, strict ops (round 28)` (with --strict-ops): `current` on round 28's folds, which also dropped
  every op row another model calls (resnet34's layers with resnet18's): what the split rule changed;
- `ops measured` (a diagnostic, never an accuracy figure): the held-out networks' ops at their own
  measured cost (the rows the fold held out), everything else as in `current`. What is left is the
  composition's own error; the difference to `current` is the op models' error on the held-out model;
- `worst ops, current` (`worst_ops`): per held-out network, the ops whose cost the fold's models missed the
  most, calls x (predicted - measured time) as % of the network's measured time, with their powers: what that
  op error is made of (on the RTX 2080 Ti, model split: one 3x3 512->512 conv at 2x2 spatial in resnet34 at
  56x56, 936 us measured at 63 W against 178 us predicted, is -45 % of that network; alexnet's 9216->4096
  Linear at batch 32, predicted 3x its 450 us, +21 %).
Prints per-network time and energy errors, each network's worst ops, and per target, split and layer, time
and energy MAPE, median APE, time-weighted error and R²; writes reports/bench/net_split.json.

    PYTHONPATH=src python bench/net_split.py [--targets A30-inference,...] [--splits model,family]

Needs `dvc pull` (data/evaluated/targets/, reports/train/targets/). About half a minute per target and
split on two cores (one op-model fit per held-out group).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opcost.devices import find_device  # noqa: E402
from opcost.io import write_report  # noqa: E402
from opcost.model.basis.features import OpRecord  # noqa: E402
from opcost.model.basis.nnls import nnls_relative  # noqa: E402
from opcost.model.basis.physics import compute_memory_s  # noqa: E402
from opcost.model.composition import compose  # noqa: E402
from opcost.model.composition.compose import Costs  # noqa: E402
from opcost.model.composition.costing import OpCoster  # noqa: E402
from opcost.model.training import netval  # noqa: E402
from opcost.model.training.fit import TargetData, prepare  # noqa: E402
from opcost.ops.kinds import facts as kind_facts  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.train import TrainParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.stages.train import read_target  # noqa: E402

STRICT = "current, strict ops (round 28)"
TARGETS = ("A30-inference", "A30_no_tf32-inference", "RTX2080Ti-inference", "A30-training")


class Ops:
    """One network's ops under one fold's coster: cost per call and what the candidates need."""

    def __init__(self, costs: Costs, calls: np.ndarray, records: list[OpRecord], floor_s: float, data: TargetData):
        self.calls = np.asarray(calls, float)
        self.excess = np.clip(costs.t_s - floor_s, 0.0, None)
        self.floor_s = floor_s
        self.p_w = np.nan_to_num(costs.p_w, nan=0.0)
        self.matmul = np.array([kind_facts(r.kind).matmul for r in records], bool)
        found = find_device(data.device_config)
        cm = np.array([compute_memory_s(r.kind, r.metrics, found) for r in records], float)
        self.compute_s, self.memory_s = cm[:, 0], cm[:, 1]
        self.l2_share = compose.l2_share(records, found[0].l2_bytes if found else 0.0)
        base = compose.network_terms(costs, calls, records, floor_s, found, data.mode)
        self.base = base
        self.kind_floor = np.full(len(records), floor_s)  # set per fold (`kind_floors`); default: no kind floor

    def weighted(self, share: np.ndarray) -> float:
        """sum over ops of calls x excess x share."""
        return float((self.calls * self.excess * share).sum())


def kind_floors(data: TargetData, rows: np.ndarray, q: float = 0.05) -> dict[str, float]:
    """Per kind, the time of its cheapest calls: the `q` quantile of the default-clock, measured (not
    estimated) rows of `rows` (the fold's training rows only), for kinds with at least five of them. What
    every call of that kind pays whatever its size (its library's per-call work on top of the launch floor:
    RTX 2080 Ti inference BatchNorm2d about 140 us, Conv2d 65-100 us, against a 23 us launch floor)."""
    df = data.df.iloc[rows]
    ok = (df["clock_mhz"].isna() & df["power_limit_w"].isna() & ~df["estimated"].astype(bool)).to_numpy()
    t = data.y("time")[rows][ok]
    kinds = df["kind"].to_numpy()[ok]
    return {str(k): float(np.quantile(t[kinds == k], q)) for k in set(kinds) if (kinds == k).sum() >= 5}


def _kind_split(o: Ops) -> tuple[np.ndarray, np.ndarray]:
    """(work above each op's kind floor, the part of its excess below it) per op, both >= 0."""
    kf = np.maximum(o.kind_floor, o.floor_s)
    t = o.excess + o.floor_s
    return np.clip(t - kf, 0.0, None), np.clip(np.minimum(t, kf) - o.floor_s, 0.0, None)


def _kind_floor_cols(o: Ops, mode: str) -> list[float]:
    work, ovh = _kind_split(o)
    mem = ~o.matmul
    return [
        float((o.calls * work)[o.matmul].sum()),
        float((o.calls * work * (1 - o.l2_share))[mem].sum()),
        float((o.calls * work * o.l2_share)[mem].sum()),
        float((o.calls * ovh).sum()),
    ] + _rest(o, mode)


def _rest(o: Ops, mode: str) -> list[float]:
    return [o.base["calls_floor"]] + ([o.base["params_bw"]] if mode == "training" else []) + [1.0]


# name -> columns of one network (each a non-negative time): the hypothesis each one tests
CANDIDATES: dict[str, Callable[[Ops, str], list[float]]] = {
    # round 27's layer: matrix products and the rest, without the L2 split (`current` is compose.fit's)
    "two shares (no L2)": lambda o, m: [o.weighted(o.matmul), o.weighted(~o.matmul)] + _rest(o, m),
    # one share for every op's excess (no class of op saves more than another)
    "one share": lambda o, m: [o.base["sum"]] + _rest(o, m),
    # the share acts on each op's roofline memory part: memory-bound time is what a network saves
    "memory-bound time": lambda o, m: (
        [o.weighted(1 - (f := o.memory_s / np.maximum(o.memory_s + o.compute_s, 1e-30))), o.weighted(f)] + _rest(o, m)
    ),
    # the part of every op's input that fits in L2 is read from there, matrix products too (`current` splits
    # the non-matrix ops only)
    "L2 for every op": lambda o, m: [o.weighted(1 - o.l2_share), o.weighted(o.l2_share)] + _rest(o, m),
    # the first launch floor of each call's excess is overhead a network's asynchronous launches hide
    # each kind's cheapest call (`kind_floors`, from the fold's own op rows) is per-call library work that a
    # network's launches may hide, unlike the work above it: its own share, the work above in the L2 classes.
    # Round 31, these folds: time MAPE model / family left out, current -> this: A30 inference 5.5 / 10.2 ->
    # 6.6 / 10.2, A30 no-TF32 7.4 / 13.4 -> 8.1 / 12.9, RTX 2080 Ti 8.0 / 10.9 -> 8.0 / 11.5, A30 training
    # 9.6 / 14.4 -> 10.6 / 16.5: no better anywhere on the model split, not kept
    "kind floors": _kind_floor_cols,
    "first floor of excess": lambda o, m: (
        [
            float((o.calls * (np.clip(o.excess - o.floor_s, 0, None)))[o.matmul].sum()),
            float((o.calls * (np.clip(o.excess - o.floor_s, 0, None)))[~o.matmul].sum()),
            float((o.calls * np.minimum(o.excess, o.floor_s)).sum()),
        ]
        + _rest(o, m)
    ),
}


class Layer:
    """A candidate composition fitted on in-fold networks: time = x . columns, energy = a_e S_e + k time,
    per-family terms as compose.fit_family_terms makes them (it calls `time` and `energy`)."""

    def __init__(self, cols: Callable[[Ops, str], list[float]], mode: str, ops: list[Ops], t_s: np.ndarray,
                 e_j: np.ndarray | None, families: list[str]):  # fmt: skip
        self.cols, self.mode = cols, mode
        self.x = nnls_relative(np.array([cols(o, mode) for o in ops]), t_s)
        self.xe = None
        if e_j is not None:
            ae = np.array([[o.base["energy_sum"], t] for o, t in zip(ops, t_s)])
            self.xe = nnls_relative(ae, e_j)
        self.family_terms: dict[str, dict[str, float]] = {}
        layer: Any = self  # fit_family_terms asks only for time(terms) and energy(terms, time)
        self.family_terms = compose.fit_family_terms(layer, ops, families, t_s, e_j)

    def time(self, o: Ops, family: str | None = None) -> float:
        return float(np.dot(self.x, self.cols(o, self.mode))) * float(np.exp(self._term(family, "time")))

    def energy(self, o: Ops, time_s: float, family: str | None = None) -> float:
        if self.xe is None:
            return float("nan")
        base = float(self.xe[0] * o.base["energy_sum"] + self.xe[1] * time_s)
        return base * float(np.exp(self._term(family, "energy")))

    def _term(self, family: str | None, which: str) -> float:
        return float(self.family_terms.get(family or "", {}).get(which, 0.0))


def measured_coster(fold: netval.Fold, data: TargetData, held_ops: set[str]) -> OpCoster:
    """The fold's coster (same models, floor and power) with the held-out ops' own measured rows added to its
    look-up: a diagnostic of the composition alone, never an accuracy figure."""
    rows = np.flatnonzero(data.df["op_id"].isin(held_ops).to_numpy())
    own = netval.coster_params(data, rows)["lookup"] if len(rows) else {}
    return dataclasses.replace(fold.coster, lookup={**fold.coster.lookup, **own})


def worst_ops(predicted: Costs, measured: Costs, calls: np.ndarray, records: list[OpRecord], t_s: float,
              top: int = 3) -> list[dict[str, Any]]:  # fmt: skip
    """The ops of one held-out network whose cost the fold's models missed the most: calls x (predicted -
    measured time) as % of the network's measured time, largest first, with each op's kind, calls, times and
    powers. Names what an op error of a network (`current` against `current | ops measured`) is made of."""
    calls = np.asarray(calls, float)
    gap = calls * (predicted.t_s - measured.t_s)
    out = []
    for i in np.argsort(-np.abs(gap))[:top]:
        if not measured.source[i] == "measured" or gap[i] == 0:
            continue  # only ops whose own measurement is known; a zero gap is no error
        out.append({"op_id": records[i].op_id, "kind": records[i].kind, "calls": float(calls[i]),
                    "source": predicted.source[i], "gap_pct_of_network": float(100 * gap[i] / t_s),
                    "predicted_us": float(1e6 * predicted.t_s[i]), "measured_us": float(1e6 * measured.t_s[i]),
                    "predicted_w": float(predicted.p_w[i]), "measured_w": float(measured.p_w[i])})  # fmt: skip
    return out


def run_split(data: TargetData, nets: pd.DataFrame, nops: pd.DataFrame, chosen: dict, tp: TrainParams,
              split: str, keep_shared: bool = True) -> pd.DataFrame:  # fmt: skip
    """Rows of every layer for every held-out network of `split`; `keep_shared=False`: round 28's folds
    (netval.folds), which also drop the op rows another model calls."""
    recs = netval.network_records(nops)
    has_e = bool(nets["e_j"].notna().all()) and "power" in chosen
    op_sets = {s: set(g["op_id"]) for s, g in nops.groupby("set_id")}
    rows = []
    for fold in netval.folds(data, nets, nops, chosen, tp, split, keep_shared):
        held = nets["set_id"].isin(fold.held).to_numpy()
        tr = nets[~held]
        fams = list(tr["family"])  # in the family split the held-out family is never among them: no term
        t_tr = tr["t_s"].to_numpy(float)
        e_tr = tr["e_j"].to_numpy(float) if has_e else None
        ops = {s: Ops(fold.coster.cost(r), c, r, fold.coster.floor_s, data) for s, (r, c) in recs.items()}
        kf = kind_floors(data, fold.train_rows)
        for s, o in ops.items():
            o.kind_floor = np.array([kf.get(r.kind, fold.coster.floor_s) for r in recs[s][0]], float)
        # `current`: the train stage's own layer (netval.fit_composition), so its rows equal the report's
        terms = {s: o.base for s, o in ops.items()}
        comp = netval.fit_composition(data.mode, terms, tr, data.device_config)
        layers: dict[str, Any] = {"current": comp}
        for name, cols in CANDIDATES.items():
            layers[name] = Layer(cols, data.mode, [ops[s] for s in tr["set_id"]], t_tr, e_tr, fams)
        held_ops = set().union(*(op_sets[s] for s in fold.held))
        mc = measured_coster(fold, data, held_ops)
        for _, n in nets[held].iterrows():
            s, fam = n["set_id"], n["family"]
            r, c = recs[s]
            costs_m = mc.cost(r)
            measured_ops = Ops(costs_m, c, r, mc.floor_s, data)
            worst = worst_ops(fold.coster.cost(r), costs_m, c, r, float(n["t_s"]))
            for name, layer in layers.items():
                for label, o in ((name, ops[s]), (f"{name} | ops measured", measured_ops)):
                    if label.endswith("ops measured") and name != "current":
                        continue
                    x = o.base if name == "current" else o
                    t_base = layer.time(x)
                    t = layer.time(x, fam)
                    e = layer.energy(x, t_base, fam) if has_e else np.nan
                    rows.append({"set_id": s, "family": fam, "split": split, "layer": label, "measured_t_s": n["t_s"],
                                 "predicted_t_s": t, "measured_e_j": n["e_j"], "predicted_e_j": e,
                                 "worst_ops": worst if label == "current" else None})  # fmt: skip
    return pd.DataFrame(rows)


def summary(d: pd.DataFrame) -> dict[str, float]:
    """MAPE, median APE, time-weighted error (%) and R² of time and energy."""
    out: dict[str, float] = {"n": float(len(d))}
    for q, m, p in (("time", "measured_t_s", "predicted_t_s"), ("energy", "measured_e_j", "predicted_e_j")):
        x = d.dropna(subset=[m, p])
        if x.empty:
            continue
        y, f = x[m].to_numpy(float), x[p].to_numpy(float)
        ape = np.abs(f - y) / y
        out[f"{q}_mape_pct"] = float(100 * ape.mean())
        out[f"{q}_mdape_pct"] = float(100 * np.median(ape))
        out[f"{q}_twe_pct"] = float(100 * np.abs(f - y).sum() / y.sum())
        out[f"{q}_r2"] = float(1 - ((f - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    return out


def check_current(cur: pd.DataFrame, stage_csv: Path, split: str) -> list[str]:
    """Where the `current` layer's predicted times differ from the train stage's report (its CSV rounds to 6
    significant digits): set ids with both figures. Empty when the bench runs the stage's own folds."""
    stage = pd.read_csv(stage_csv)
    stage = stage[stage["split"] == split].set_index("set_id")["predicted_t_s"]
    got = cur.set_index("set_id")["predicted_t_s"].astype(float)
    off = [f"{s}: stage {stage.get(s)} bench {t:.6g}" for s, t in got.items()
           if s not in stage.index or not np.isclose(t, stage[s], rtol=1e-5, atol=0)]  # fmt: skip
    off += [f"{s}: stage {stage[s]} bench none" for s in stage.index if s not in got.index]
    return off


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--splits", default=f"{netval.SPLIT_MODEL},{netval.SPLIT_FAMILY}")
    ap.add_argument(
        "--strict-ops",
        action="store_true",
        help=f"also report `{STRICT}`: round 28's folds, without the op rows another model calls too",
    )
    a = ap.parse_args(argv)
    paths = Paths(ROOT)
    tp = load_params(paths.params).train
    report: dict[str, Any] = {}
    for target in a.targets.split(","):
        device, mode = TrainParams.split_target(target)
        df, nets, nops = read_target(paths, target)
        detail = json.loads((ROOT / "reports" / "train" / "targets" / f"{target}.json").read_text())[target]
        chosen = {q: tuple(v.split("-", 1)) for q, v in detail["chosen"].items()}
        data = prepare(df, mode, device)
        for split in a.splits.split(","):
            d = run_split(data, nets, nops, chosen, tp, split)
            if a.strict_ops:
                strict = run_split(data, nets, nops, chosen, tp, split, keep_shared=False)
                d = pd.concat([d, strict[strict["layer"] == "current"].assign(layer=STRICT)], ignore_index=True)
            piv = d.assign(t_err=100 * (d["predicted_t_s"] / d["measured_t_s"] - 1))
            table = piv.pivot_table(index="set_id", columns="layer", values="t_err", sort=False)
            print(f"\n{target}, {split} left out: time error % per network")
            print(table.round(1).to_string())
            etable = d.assign(e_err=100 * (d["predicted_e_j"] / d["measured_e_j"] - 1)).pivot_table(
                index="set_id", columns="layer", values="e_err", sort=False
            )
            if etable.notna().any().any():
                print(f"\n{target}, {split} left out: energy error % per network")
                print(etable.round(1).to_string())
            cur = d[d["layer"] == "current"]
            off = check_current(cur, ROOT / "reports" / "train" / "networks" / f"{target}.csv", split)
            if off:  # the figures below would not be the stage's: a bench drifted from netval, or a stale report
                print(f"error: {target}, {split}: `current` differs from reports/train/networks/{target}.csv "
                      f"(run `dvc repro` first?): " + "; ".join(off[:5]), file=sys.stderr)  # fmt: skip
                return 1
            print(f"\n{target}, {split} left out: the ops the fold's models missed most (% of the network's time)")
            for _, row in cur.iterrows():
                ops = row["worst_ops"] or []
                print(
                    f"  {row['set_id']:30s} "
                    + "; ".join(
                        f"{o['kind']} x{o['calls']:.0f} {o['gap_pct_of_network']:+.1f} % ({o['predicted_us']:.0f} vs "
                        f"{o['measured_us']:.0f} us, {o['predicted_w']:.0f} vs {o['measured_w']:.0f} W)"
                        for o in ops
                    )
                )
            report.setdefault(target, {}).setdefault(split, {})["worst ops, current"] = {
                str(row["set_id"]): row["worst_ops"] or [] for _, row in cur.iterrows()
            }
            for layer, g in d.groupby("layer", sort=False):
                s = summary(g)
                report.setdefault(target, {}).setdefault(split, {})[str(layer)] = s
                print(f"  {layer:34s} time MAPE {s['time_mape_pct']:5.1f} median {s['time_mdape_pct']:5.1f} "
                      f"weighted {s['time_twe_pct']:5.1f} R2 {s['time_r2']:.3f}"
                      + (f" | energy MAPE {s['energy_mape_pct']:5.1f} median {s['energy_mdape_pct']:5.1f} "
                         f"weighted {s['energy_twe_pct']:5.1f}" if "energy_mape_pct" in s else ""))  # fmt: skip
    write_report(report, Paths(ROOT).bench_report("net_split.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
