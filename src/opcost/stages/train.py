"""Stage `train@<device>-<mode>`: per-operation models, the composition layer, honest scores, registry.

Reads only data/evaluated/targets/<target>/ (that device config and mode's op rows, measured
networks and their ops), so measurements of other devices never retrain this target. Then:
1. every algorithm x feature set x quantity scored under the grouped and the family split
   (model/training/fit.py); the champion per quantity chosen on the grouped split and refitted on all rows;
2. the measured networks predicted with their whole model (every input size), their family, and
   the one network held out (model/training/netval.py): op models and composition refitted without them; the
   intervals' coverage and width under each split;
3. the composition layer and its per-family terms fitted on every measured network, the held-out
   residuals kept for prediction intervals by the question they answer: known family (model split),
   new family (family split), pooled (model/composition/compose.py; `netval.score_sets`). A target with too few
   measured networks gets its composition transferred from the calibrated targets of the same mode
   (`transferred_composition`: their op models refitted here with this target's chosen algorithm on
   their own rows, data/evaluated/targets/<source>/), and says so in the bundle (`source`).
Writes models/<target>/ (bundle.json + trees.npz, and run.json: what the run logs to MLflow, built by
model/training/runrecord.py), the
detailed scores reports/train/targets/<target>.json and the out-of-sample network predictions
reports/train/networks/<target>.csv; replays the run into MLflow and registers the bundle.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import numpy as np
import pandas as pd

from opcost.devices import find_device
from opcost.errors import OpcostError
from opcost.io import atomic_path, write_report
from opcost.model.composition.bundle import Bundle
from opcost.model.composition.extrapolation import network_ranges, op_ranges
from opcost.model.records import runlog, tracking
from opcost.model.store import registry
from opcost.model.training import netval, runrecord
from opcost.model.training.fit import (
    TargetData,
    bundle_hash,
    choose,
    final_model,
    fit_model,
    prepare,
    score_all,
    transform_of,
)
from opcost.modes import OP_PHASE
from opcost.params.load import Params
from opcost.params.train import TrainParams
from opcost.paths import Paths
from opcost.schemas import TARGET_NETWORK_OPS, TARGET_NETWORKS, TARGET_OPERATIONS
from opcost.stages._run import execute
from opcost.tables import read_table


def read_target(paths: Paths, target: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    df = read_table(paths.target_operations(target), TARGET_OPERATIONS, "evaluate")
    if df.empty:
        raise OpcostError(f"{paths.target_operations(target)} holds no rows to train {target} on")
    nets = read_table(paths.target_networks(target), TARGET_NETWORKS, "evaluate")
    nops = read_table(paths.target_network_ops(target), TARGET_NETWORK_OPS, "evaluate")
    return df.reset_index(drop=True), nets, nops


def data_version(paths: Paths, target: str) -> str:
    """md5 over the files this target learns from: what DVC calls this data."""
    h = hashlib.md5()
    for f in (paths.target_operations(target), paths.target_networks(target), paths.target_network_ops(target)):
        h.update(f.read_bytes())
    return h.hexdigest()


def op_scores(results: dict[str, Any]) -> dict[str, Any]:
    """results[quantity][algorithm][feature_set][split] without the per-row arrays."""
    return {
        q: {
            a: {
                f: {s: {k: r[k] for k in runrecord.SCORE_KEYS} for s, r in by_split.items()}
                for f, by_split in fs.items()
            }
            for a, fs in by_alg.items()
        }
        for q, by_alg in results.items()
    }


def by_kind(df: pd.DataFrame, r: dict[str, Any], quantity: str) -> dict[str, dict[str, float]]:
    """The chosen model's grouped-split errors per op kind (MAPE, median APE, weighted error)."""
    d = df.iloc[r["rows"]].assign(y=r["measured"], p=r["predicted"])
    w = d["t_s"].to_numpy() if quantity == "power" else np.ones(len(d))
    d = d.assign(w=w, ae=(d["p"] - d["y"]).abs())
    out = {}
    for kind, g in d.groupby("kind"):
        out[str(kind)] = {
            "n": int(len(g)),
            "mape": float((g["ae"] / g["y"]).mean()),
            "mdape": float((g["ae"] / g["y"]).median()),
            "twe": float((g["w"] * g["ae"]).sum() / (g["w"] * g["y"]).sum()),
        }
    return out


def source_composition(
    paths: Paths, params: Params, source: str, chosen: dict[str, tuple[str, str]]
) -> netval.compose.SourceNetworks | None:
    """A calibrated target's composition with op models refitted here (this target's chosen algorithm
    and features on the source's rows), its residuals with each model's networks held out of the
    composition fit (op costs in sample), its floor and median op power, and its networks' terms and
    measurements (for leave-one-config-out); None if it has too few networks."""
    tp = params.train
    s_dev, s_mode = TrainParams.split_target(source)
    df, nets, nops = read_target(paths, source)
    if len(nets) < netval.compose.MIN_NETWORKS:
        return None
    data = prepare(df, s_mode, s_dev)
    rows = np.arange(data.n)
    models = {}
    for q, (alg, fs) in chosen.items():
        if q == "power" and not np.isfinite(data.y("power")).any():
            continue
        f = fit_model(data, alg, fs, q, rows, tp)
        models[q] = netval.LibraryModel(f.model, f.encoding(data), transform_of(q, fs))
    coster = netval.coster_from(data, rows, models)
    terms = netval.all_terms(coster, netval.network_records(nops), data)
    comp = netval.fit_composition(s_mode, terms, nets.drop(columns="family"), s_dev)
    comp.scores = netval.composition_scores(s_mode, terms, nets, s_dev, "power" in models)
    e = nets["e_j"].to_numpy(float) if "power" in models and nets["e_j"].notna().all() else None
    return netval.compose.SourceNetworks(
        source, comp, coster.floor_s, coster.median_power_w, [terms[s] for s in nets["set_id"]],
        nets["t_s"].to_numpy(float), e, [str(m) for m in nets["model"]],
    )  # fmt: skip


def transferred_composition(
    paths: Paths, params: Params, target: str, chosen: dict[str, tuple[str, str]], floor_s: float, power_w: float
) -> netval.compose.Composition:
    """The composition of the calibrated targets of this mode, in this device's floor and power units, its
    interval from held-out evidence of transfer (compose.transfer_calibrated): the calibrated targets of
    every mode are read, since a mode with one calibrated target borrows the widening measured in another."""
    device, mode = TrainParams.split_target(target)
    sources = []
    for src in params.train.targets:
        if src == target or not paths.target_networks(src).exists():
            continue
        got = source_composition(paths, params, src, chosen)
        if got is not None:
            sources.append(got)
    return netval.compose.transfer_calibrated(
        sources, mode, floor_s, power_w, netval.compose.power_limit_w(find_device(device))
    )


def run(paths: Paths, params: Params, target: str, log_to_mlflow: bool = True) -> dict[str, Any]:
    tp = params.train
    if target not in tp.targets:
        raise OpcostError(f"unknown train target {target!r}; targets in params.yaml: {', '.join(tp.targets)}")
    device, mode = TrainParams.split_target(target)
    if log_to_mlflow:  # a dead tracking server or a damaged store is one line now, not after the fit
        tracking.check_store(tracking.tracking_uri(paths.root))
    df, networks, nops = read_target(paths, target)
    version = data_version(paths, target)
    data: TargetData = prepare(df, mode, device)
    results = score_all(data, tp)
    chosen = choose(results)
    models = {q: final_model(data, alg, fs, q, tp) for q, (alg, fs) in chosen.items()}
    costing = netval.coster_params(data, np.arange(data.n))
    coster = netval.coster_from(data, np.arange(data.n), models)

    splits = netval.SPLITS
    net_rows = [r for r in (netval.evaluate(data, networks, nops, chosen, tp, s) for s in splits) if len(r)]
    net_pred = pd.concat(net_rows, ignore_index=True) if net_rows else pd.DataFrame()
    terms = netval.all_terms(coster, netval.network_records(nops), data) if len(networks) else {}
    comp = netval.fit_composition(mode, terms, networks, device) if len(networks) else netval.compose.Composition(mode)
    netval.attach_scores(comp, net_pred)  # interval scores by question: known family, new family, pooled
    if not comp.calibrated:
        comp = transferred_composition(paths, params, target, chosen, coster.floor_s, coster.median_power_w)
    detail = {
        "device_config": device,
        "mode": mode,
        "n_ops": int(data.n),
        "n_noop": int(data.noop.sum()),
        "n_estimated": int(df["estimated"].sum()),
        "n_layers": int(df["layer_id"].nunique()),
        "data_version": version,
        "split": runrecord.split_id(tp),
        "ops": op_scores(results),
        "chosen": {q: f"{a}-{f}" for q, (a, f) in chosen.items()},
        "by_kind": {q: by_kind(df, results[q][a][f]["grouped"], q) for q, (a, f) in chosen.items()},
        "costing": {k: v for k, v in costing.items() if k != "lookup"},
        "composition": {k: v for k, v in comp.to_json().items() if not k.startswith("residuals")},
        "networks": {
            s: {
                **netval.error_summary(net_pred[net_pred["split"] == s]),
                "interval": netval.coverage(net_pred[net_pred["split"] == s], net_pred),  # every split's scores
            }
            if len(net_pred)
            else {"networks": 0}
            for s in netval.SPLITS
        },
        "interval_half_width_pct": {q: 100 * float(np.expm1(comp.half_width(q))) for q in ("time", "energy")},
        "intervals": netval.interval_table(comp),
    }
    scores = {}
    for q, (a, f) in chosen.items():
        by_split = results[q][a][f]
        scores[q] = {
            **{k: by_split["grouped"][k] for k in runrecord.SCORE_KEYS},
            "family_mape": by_split["family"]["mape"],
        }
    bundle = Bundle(
        target=target,
        device_config=device,
        mode=mode,
        phase=OP_PHASE[mode],
        models=models,
        kinds=tuple(sorted(set(df["kind"]))),
        clocks_mhz=tuple(sorted({float(c) for c in df["clock_mhz"].dropna()})),
        scores=scores,
        data_version=version,
        bundle_hash=bundle_hash(version, tp, target),
        ranges={**op_ranges(data.records), **network_ranges(networks["input_shape"] if len(networks) else [])},
        composition=comp,
        **costing,
    )
    record = runrecord.build(target, tp, results, bundle, detail, net_pred).as_dict()
    folder = paths.model_dir(target)
    bundle.save(folder)
    runlog.save(record, folder)  # adds the training commit to the tags the replay below logs
    write_report({target: detail}, paths.train_metrics(target))
    with atomic_path(paths.train_networks(target)) as tmp:
        (net_pred if len(net_pred) else pd.DataFrame(columns=["set_id"])).to_csv(tmp, index=False, float_format="%.6g")
    registered = None
    if log_to_mlflow:
        mlflow = tracking.setup(paths.root)
        with runlog.replayed(mlflow, record, tracking.source_tags(paths.root)):
            registered = registry.register_bundle(paths.root, mlflow, bundle, runrecord.split_id(tp))
    return {"target": target, "metrics": detail, "registered_version": registered}


def summary(r: dict[str, Any]) -> str:
    m = r["metrics"]
    lines = []
    for q, name in m["chosen"].items():
        alg, fs = name.split("-")
        g, f = m["ops"][q][alg][fs]["grouped"], m["ops"][q][alg][fs]["family"]
        lines.append(
            f"{r['target']} {q}: {name}; grouped split MAPE {100 * g['mape']:.1f} % (median {100 * g['mdape']:.1f} %, "
            f"time-weighted {100 * g['twe']:.1f} %, R2 {g['r2']:.3f}); family left out MAPE {100 * f['mape']:.1f} %"
        )
    for s in ("model", "family", "network"):
        t = m["networks"][s].get("time")
        if t:
            n = m["networks"][s]["networks"]
            iv = m["networks"][s].get("interval", {}).get("time")
            cov = (
                f"; 90 % interval covers {iv['coverage_pct']:.0f} %, width {iv['median_width_pct']:.0f} %" if iv else ""
            )
            lines.append(f"networks, {s} left out: time MAPE {t['mape_pct']:.1f} % over {n}{cov}")
    lines.append(f"composition: {m['composition']['source']}")
    reg = r["registered_version"]
    lines.append(f"registered version {reg}" if reg else "registry: nothing new to register")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    def args(p: Any) -> None:
        p.add_argument("--target", required=True, help="<device config>-<mode>, e.g. A30-inference")
        p.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow or register")

    return execute(
        argv,
        __doc__.splitlines()[0],
        args,
        lambda paths, params, a: run(paths, params, a.target, log_to_mlflow=not a.no_mlflow),
        summary,
    )


if __name__ == "__main__":
    sys.exit(main())
