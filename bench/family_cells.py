"""Where the family-out op time error of the inference targets comes from (issue 21, section 4).

For each target, the model bench/family_split.py reports as chosen (reports/bench/family_split.json;
rf/xgb on the `physical` set) is refitted per held-out family exactly as fit.cross_validate does. Per
(held-out family, op class) cell it reports the share of the held-out time, the cell's contribution
to the time-weighted error (its absolute error over ALL held-out time: the cells add up to the
target's twe), bias, MAPE, and splits the bias into the physical baseline's part (log(baseline /
measured), model/basis/gemm.py via fit.offsets) and the trees' residual on top of it (log(prediction /
baseline)). For GEMM-like classes it gives the fraction of their unit's nominal peak the held-out rows
attain (`attained`) next to what the same class attains in the fold's training rows, and the fold's
learnt efficiencies (depthwise, per unit). Op classes: Linear, 1x1 / Winograd 3x3 (stride 1) / other
convolutions, TF32 fallbacks (stems), depthwise by kernel size, every other kind by name.

    PYTHONPATH=src python bench/family_cells.py [--targets A30_no_tf32-inference,A30-inference] [--top 12]

Needs `dvc pull` (data/evaluated/targets/) and reports/bench/family_split.json. Writes
reports/bench/family_cells.json. About half a minute per target on two cores.

Round 31's answer (main at ea54ca7; "twe +x": the cell's share of the target's time-weighted error):
- Peaks: on A30_no_tf32 every kind, convolutions included, takes the FP32 peak (10.3 TFLOP/s) and no
  convolution is a TF32 fallback; depthwise rows the FP32 peak; the bandwidth 933 GB/s. Right.
- A30 no-TF32 inference (rf-physical, family 23.4 / 25.1 %):
  1. ConvNeXt Linear, 18 % of the time, +28 %, twe +6.2. Held out they attain 0.84 of the FP32 peak
     (cuBLAS); the fold keeps no compute-bound matmul row (its 8 Linear rows are classifier heads: Swin's
     large ones are ConvNeXt's layers too, held out with them), so the baseline stays nominal (-18 %)
     and the trees, seeing a 1x1 convolution (gemm.tree_view), add the 1x1 convolutions' residual
     (+57 %: cuDNN's FP32 1x1 convolutions attain 0.67). On the RTX 2080 Ti the two libraries attain
     one fraction (0.77 / 0.73) and the same cell is -7 %: the gap is the device's, and no training row
     of the fold measures it.
  2. ResNet "conv other", 8 %, -53 %, twe +3.3: its 3x3 stride-2 convolutions attain 0.009-0.79 of the
     FP32 peak (0.33-0.47 at 14x14 and 56-75 px maps, 0.01-0.17 on 1-8 px maps) against 0.79 for the
     fold's non-1x1, non-Winograd convolutions (Inception's 3x3 s2: 0.25-0.71); no shape rule orders them
     (cuDNN's algorithm choice: 512 -> 512 at 14 px 2.2 ms, at 19 px 2.0 ms).
  3. ConvNeXt "conv other" (2x2 stride-2 downsampling, 4x4 stem), 6.5 %, -17 %, twe +2.7: 0.68 against 0.74,
     one row (256 -> 512 at 48 px) at 0.22. Inception's "conv other" (ten 1x7 / 7x1, five 3x3 s2) +24 %,
     twe +2.3: 1.11 of the peak against the fold's 0.55; no other family has 1x7 / 7x1 kernels.
- A30 inference (xgb-physical, family 17.4 / 15.2 %): ConvNeXt Linear is right (-2 %; the TF32 unit's
  fraction puts convolutions and matmuls on one scale) but is 27 % of the time (twe +2.6); ConvNeXt's 7x7
  depthwise +20 % (twe +1.7): its baseline is +22 %, the depthwise efficiency (0.075) learnt from
  EfficientNet's 3x3 (0.061 s1, 0.053 s2) and 5x5 (0.101, 0.087) while 7x7 attains 0.091, no monotone
  rule in kernel size; EfficientNet's depthwise +9 % (3x3) / +41 % (5x5): baseline -21 / +9 %, the trees
  add +38 / +29 % though the fold's depthwise rows (ConvNeXt's) have a residual of -0.3 %. MAPE is spread:
  EfficientNet 1x1 (2.2 of 17.4 points), DenseNet ReLU (2.1: in-place ReLU reads from L2 at 1.4x the DRAM
  bandwidth), ResNet 1x1 (1.3); ConvNeXt's two StochasticDepth no-ops +170 % (0.5 points: the only
  measured no-ops, so a fold without ConvNeXt charges them the launch floor, 7.7 against 2.8 us).
- Five candidate changes aimed at these causes: bench/baseline_variants.py; none kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import benchreport  # noqa: E402
from opcost.model.basis import gemm  # noqa: E402
from opcost.model.training import fit  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.train import TrainParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.stages.train import read_target  # noqa: E402

DEFAULT_TARGETS = ("A30_no_tf32-inference", "A30-inference", "RTX2080Ti-inference")
GEMM_CLASSES = ("Linear", "conv 1x1", "conv 3x3 s1", "conv other", "conv stem (TF32 fallback)")


def op_class(kind: str, hp: dict[str, Any], device_config: str) -> str:
    """The physical class of an op: what decides which kernel (and attained fraction) it gets."""
    if gemm.is_depthwise(kind, hp):
        kh, kw, _, _ = gemm.kernel_features(kind, hp)
        return f"depthwise {kh:.0f}x{kw:.0f}"
    if kind == "Linear":
        return "Linear"
    if kind.startswith(gemm.CONV_PREFIX):
        if gemm.tf32_fallback(kind, hp, device_config):
            return "conv stem (TF32 fallback)"
        kh, kw, _, winograd = gemm.kernel_features(kind, hp)
        if winograd:
            return "conv 3x3 s1"
        return "conv 1x1" if kh == kw == 1 else "conv other"
    return kind


def attained(data: fit.TargetData, rows: np.ndarray, floor: float) -> tuple[float | None, int]:
    """Median fraction of its unit's nominal peak (TF32 for convolutions on the TF32 tensor cores, else
    FP32) the rows attain, launch floor off, and their count: over the compute-bound rows (compute time
    >= gemm.COMPUTE_BOUND_RATIO x memory time, as gemm.unit_efficiencies selects them); depthwise rows
    all (as gemm.depthwise_efficiency: none is compute-bound by that test)."""
    assert data.unit is not None and data.compute_s is not None and data.depthwise is not None
    c = np.where(data.unit[rows] == gemm.TF32_UNIT, data.compute_s[rows], data.dw_compute[rows])
    m, t = data.memory_s[rows], data.y("time")[rows] - floor
    sel = (data.depthwise[rows] | (c >= gemm.COMPUTE_BOUND_RATIO * m)) & (t > 0)
    return (round(float(np.median(c[sel] / t[sel])), 3) if sel.any() else None), int(sel.sum())


def pct_bias(log_ratio: np.ndarray) -> float:
    return round(100 * float(np.expm1(np.mean(log_ratio))), 1)


def cell_figures(y: np.ndarray, p: np.ndarray, base: np.ndarray, noop: np.ndarray) -> dict[str, Any]:
    """One cell's figures from measured `y`, predicted `p` and baseline `base` times [s]: bias (geometric
    mean of p / y - 1), MAPE, twe, and the bias split into the baseline's part (base / y) and the trees'
    part (p / base), both over the rows that are not no-ops (a no-op is predicted without the baseline)."""
    live = ~noop
    return {
        "n": int(len(y)), "time_s": float(y.sum()), "abs_err_s": float(np.abs(p - y).sum()),
        "ape_sum": float((np.abs(p - y) / y).sum()),
        "bias_pct": pct_bias(np.log(p / y)),
        "mape": round(100 * float(np.mean(np.abs(p - y) / y)), 1),
        "twe": round(100 * float(np.abs(p - y).sum() / y.sum()), 1),
        "baseline_bias_pct": pct_bias(np.log(base[live] / y[live])) if live.any() else None,
        "tree_residual_pct": pct_bias(np.log(p[live] / base[live])) if live.any() else None,
    }  # fmt: skip


def fold_cells(data: fit.TargetData, cls: np.ndarray, name: str, fitted: fit.Fitted, te: np.ndarray) -> list[dict]:
    """The cells of one held-out family: `te` its scored rows, `fitted` the model fitted without them."""
    p = fit.predict_rows(data, fitted, te)
    fl = fit.row_floors(data, te, fitted.floor, fitted.kind_floors)
    base = np.exp(fit.offsets(data, te, fl, fitted.dw_efficiency, fitted.unit_eff, True))
    y = data.y("time")[te]
    cells = []
    for c in sorted(set(cls[te])):
        sel = cls[te] == c
        cell = {"family": name, "class": c, **cell_figures(y[sel], p[sel], base[sel], data.noop[te][sel])}
        if c in GEMM_CLASSES or c.startswith("depthwise"):
            fit_rows = fitted.rows[cls[fitted.rows] == c]
            cell["held_peak_fraction"], cell["held_compute_bound"] = attained(data, te[sel], fitted.floor)
            cell["train_peak_fraction"], cell["train_compute_bound"] = attained(data, fit_rows, fitted.floor)
            cell["train_n"] = int(len(fit_rows))
        cells.append(cell)
    return cells


def summarise(cells: list[dict], top: int) -> tuple[float, float, list[dict]]:
    """(family MAPE, family twe) [%] from all cells, and the `top` cells by contribution to twe: each
    cell's absolute error over all held-out time (the contributions add up to the twe), likewise its
    summed APE over all held-out rows for MAPE."""
    total = sum(c["time_s"] for c in cells)
    n_all = sum(c["n"] for c in cells)
    out = []
    for c in cells:
        c = dict(c)
        c["time_share_pct"] = round(100 * c.pop("time_s") / total, 2)
        c["twe_contribution_pct"] = round(100 * c.pop("abs_err_s") / total, 3)
        c["mape_contribution_pct"] = round(100 * c.pop("ape_sum") / n_all, 3)
        out.append(c)
    out.sort(key=lambda x: -x["twe_contribution_pct"])
    twe = sum(c["twe_contribution_pct"] for c in out)
    mape = sum(c["mape_contribution_pct"] for c in out)
    return round(mape, 2), round(twe, 2), out[:top]


def run_target(paths: Paths, tp: TrainParams, target: str, alg: str, top: int) -> dict[str, Any]:
    device, mode = TrainParams.split_target(target)
    df, _, _ = read_target(paths, target)
    data = fit.prepare(df, mode, device)
    cls = np.array([op_class(r.kind, r.hp, device) for r in data.records], dtype=object)
    cells, folds = [], {}
    for name, tr, te in fit.folds_of(data, "family", tp):
        te = te[fit._ok(data, "time")[te] & ~data.estimated[te]]
        if not len(te):
            continue
        f = fit.fit_model(data, alg, "physical", "time", tr, tp)
        folds[name] = {"dw_efficiency": round(f.dw_efficiency, 4),
                       "unit_efficiency": {k: round(v, 3) for k, v in f.unit_eff.items()}}  # fmt: skip
        cells += fold_cells(data, cls, name, f, te)
    mape, twe, top_cells = summarise(cells, top)
    return {"model": f"{alg}-physical", "family_mape_pct": mape, "family_twe_pct": twe, "folds": folds,
            "cells": top_cells}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", default=",".join(DEFAULT_TARGETS))
    ap.add_argument("--top", type=int, default=12, help="cells kept per target, by contribution to twe")
    args = ap.parse_args()
    paths = Paths(ROOT)
    tp: TrainParams = load_params(paths.params).train
    chosen = json.loads((Paths(ROOT).bench_report("family_split.json")).read_text())
    report: dict[str, Any] = {}
    for t in args.targets.split(","):
        alg = chosen[t]["chosen"].split("-")[0] if t in chosen else "xgb"
        report[t] = r = run_target(paths, tp, t, alg, args.top)
        print(f"{t} ({r['model']}): family MAPE {r['family_mape_pct']:.1f} %, twe {r['family_twe_pct']:.1f} %")
        for c in r["cells"][:6]:
            held = f", peak fraction held {c['held_peak_fraction']}" if "held_peak_fraction" in c else ""
            train = f" vs train {c['train_peak_fraction']}" if held else ""
            print(f"  {c['family']:12s} {c['class']:26s} share {c['time_share_pct']:5.1f} %, "
                  f"twe +{c['twe_contribution_pct']:.1f}, bias {c['bias_pct']:+.1f} % (baseline "
                  f"{c['baseline_bias_pct']}, trees {c['tree_residual_pct']}){held}{train}", flush=True)  # fmt: skip
    return benchreport.save(report, "family_cells.json")


if __name__ == "__main__":
    sys.exit(main())
