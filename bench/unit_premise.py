"""Do a GEMM unit's compute-bound Linear layers and convolutions attain one fraction of its peak? (issue 21, section 4)

The premise of pooling a unit's attained fraction across the kinds that run on it (model/basis/gemm.py: a
per-unit efficiency for folds with too few compute-bound rows of one kind, e.g. ConvNeXt held out, which
leaves no compute-bound Linear layer in the fold). Measured, per device config and mode: the fraction
compute_s / (t - floor) of the nominal peak that compute-bound rows (compute at least
gemm.COMPUTE_BOUND_RATIO x memory time, as gemm.unit_efficiencies selects them) attain, per unit and op
class: Linear / matmul (cuBLAS), 1x1 convolutions (cuDNN; the same GEMM as a Linear layer), other
convolutions, and the convolutions the TF32 tensor cores cannot take (gemm.tf32_fallback: FP32 units,
cuDNN). Then per family fold, from its training rows only: the compute-bound matmul rows left, the unit
estimate pooled over kinds, and (reported, never fitted) the held-out family's own matmul fraction.

Pooling can only help where the classes agree. Within a unit the `physical` trees see a Linear layer as the
1x1 convolution it computes (gemm.tree_view), so one efficiency shared by both leaves their ratio where it
is; what a fold without compute-bound Linear rows lacks is that ratio, cuBLAS against cuDNN.

    PYTHONPATH=src python bench/unit_premise.py [--targets A30_no_tf32-inference,...]

Needs `dvc pull` (data/evaluated/targets/). Seconds per target. Writes reports/bench/unit_premise.json.

Round 30's answer (the per-unit pooled efficiency was not kept; written here, not in model/basis/gemm.py, so the
train stages' dependency does not change for a note): the premise fails. On one unit cuBLAS Linear layers
attain more of the peak than cuDNN's 1x1 convolutions, the same GEMM (A30 no TF32: 0.84 against 0.67 in
inference, 0.27 against 0.23 in training; RTX 2080 Ti training 0.27 against 0.22; close only on RTX 2080 Ti
inference, 0.77 against 0.73), and the A30's TF32 fallbacks attain 0.49 of the FP32 peak against its Linear
layers' 0.84. Tried anyway as shrinkage (per unit and class, the median shrunk towards the unit's pooled
median with weight n / (n + 5), on every config): ConvNeXt's Linear layers on the A30 without TF32 +28 ->
+33 % bias; family MAPE / time-weighted of the chosen model 23.4/25.1 -> 22.6/26.2 (A30 no-TF32 inference),
10.6/14.5 -> 10.3/15.6 (its training), 13.9/13.5 -> 15.5/16.1 (RTX 2080 Ti inference); the rest unchanged.
"""

from __future__ import annotations

import argparse
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

CLASSES = ("matmul", "conv 1x1", "conv other", "conv TF32 fallback")


def op_class(data: fit.TargetData) -> np.ndarray:
    """Per row: one of CLASSES for a GEMM-like op on a unit (depthwise convolutions excluded), else ""."""
    out = []
    for r, u, fb in zip(data.records, data.unit, data.fallback):
        if fb:
            out.append("conv TF32 fallback")
        elif not u:
            out.append("")
        elif not r.kind.startswith(gemm.CONV_PREFIX):
            out.append("matmul")
        else:
            kh, kw = gemm.kernel_features(r.kind, r.hp)[:2]
            out.append("conv 1x1" if kh == kw == 1 else "conv other")
    return np.array(out, dtype=object)


def attained(data: fit.TargetData, rows: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute-bound rows among `rows`, their unit, their attained fraction of that unit's nominal peak).
    TF32 fallbacks count on the FP32 units, at the FP32 peak (as gemm.compute_part_s charges them)."""
    c = np.where(data.fallback[rows], data.dw_compute[rows], data.compute_s[rows])
    m, t = data.memory_s[rows], data.y("time")[rows] - floor
    unit = np.where(data.fallback[rows], gemm.FP32_UNIT, data.unit[rows])
    ok = ~data.noop[rows] & ~data.estimated[rows] & np.isfinite(t) & (t > 0) & (c > 0)
    ok &= (unit != "") & (c >= gemm.COMPUTE_BOUND_RATIO * m)
    return rows[ok], unit[ok], c[ok] / t[ok]


def summary(x: np.ndarray) -> dict[str, Any]:
    if not len(x):
        return {"n": 0}
    q25, med, q75 = np.quantile(x, [0.25, 0.5, 0.75])
    return {"n": int(len(x)), "median": float(med), "q25": float(q25), "q75": float(q75)}


def run_target(paths: Paths, target: str) -> dict[str, Any]:
    device, mode = TrainParams.split_target(target)
    df, _, _ = read_target(paths, target)
    return premise(fit.prepare(df, mode, device))


def premise(data: fit.TargetData) -> dict[str, Any]:
    """The fractions attained per (unit, class) over every row, and per family fold from its rows alone:
    the training rows' matmul, pooled and 1x1 fractions (floor from the training rows), the held-out
    family's matmul fraction (same floor; reported, never fitted)."""
    cls = op_class(data)
    every = np.arange(data.n)
    rows, unit, att = attained(data, every, fit.launch_floor(data, every))
    by_class = {
        f"{u} / {k}": summary(att[(unit == u) & (cls[rows] == k)])
        for u in gemm.UNITS
        for k in CLASSES
        if ((unit == u) & (cls[rows] == k)).any()
    }
    folds = []
    for fam, tr, te in fit.family_folds(data.families):
        r_tr, u_tr, a_tr = attained(data, tr, fit.launch_floor(data, tr))
        r_te, u_te, a_te = attained(data, te, fit.launch_floor(data, tr))
        fp_tr, fp_te = u_tr == gemm.FP32_UNIT, u_te == gemm.FP32_UNIT
        mm_tr, mm_te = fp_tr & (cls[r_tr] == "matmul"), fp_te & (cls[r_te] == "matmul")
        if not mm_te.any():
            continue  # no compute-bound matmul to predict in this family: pooling does not reach it
        folds.append({
            "held_out": fam,
            "train_fp32_matmul": summary(a_tr[mm_tr]),
            "train_fp32_pooled": summary(a_tr[fp_tr]),
            "train_fp32_conv_1x1": summary(a_tr[fp_tr & (cls[r_tr] == "conv 1x1")]),
            "held_out_fp32_matmul (reported only)": summary(a_te[mm_te]),
        })  # fmt: skip
    return {"compute_bound_by_unit_class": by_class, "family_folds_with_held_out_matmul": folds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", help="comma-separated train targets (default: params.yaml's)")
    args = ap.parse_args()
    paths = Paths(ROOT)
    tp: TrainParams = load_params(paths.params).train
    report = {t: run_target(paths, t) for t in (args.targets.split(",") if args.targets else tp.targets)}
    for t, r in report.items():
        print(t)
        for k, s in r["compute_bound_by_unit_class"].items():
            print(f"  {k:28s} n {s['n']:4d}  median {s['median']:.2f}  IQR {s['q25']:.2f}-{s['q75']:.2f}")
        for f in r["family_folds_with_held_out_matmul"]:
            med = [f"{k} {v['median']:.2f} (n {v['n']})" if v["n"] else f"{k} - (n 0)" for k, v in f.items()
                   if k != "held_out"]  # fmt: skip
            print(f"  fold {f['held_out']:12s} " + "; ".join(med))
    return benchreport.save(report, "unit_premise.json")


if __name__ == "__main__":
    sys.exit(main())
