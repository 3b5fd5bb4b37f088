"""The Winograd signature of 3x3 stride-1 convolutions, per device config and mode (issue 21, section 4).

cuDNN runs a 3x3, stride-1, undilated, ungrouped convolution with Winograd on the FP32 units: fewer
multiplications than the direct convolution's FLOPs, so against the nominal FP32 peak such a convolution
can attain a fraction above 1, which no direct algorithm can. With TF32 on, cuDNN takes the tensor cores'
implicit GEMM instead, and the class should not stand out. This bench measures, before any model is
changed, the attained fraction of the unit's peak (direct FLOPs / unit peak over the measured time less the
launch floor) of every measured, not depthwise convolution, split into Winograd-eligible
(model/basis/gemm.py's kernel_features: 3x3, stride 1, dilation 1, groups 1) and other convolutions, per family
a row belongs to; all rows and the compute-bound ones (compute time >= gemm.COMPUTE_BOUND_RATIO x memory
time, where the peak is what limits the op).

The unit is the one the `physical` baseline charges: the TF32 peak for a convolution the tensor cores
take on a TF32 config, the FP32 peak otherwise (TF32 off, no TF32 on the device, tf32_fallback).

    PYTHONPATH=src python bench/winograd.py [--targets A30-inference,...]

Needs `dvc pull` (data/evaluated/targets/). Writes reports/bench/winograd.json. Seconds.
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
from opcost.devices import find_device  # noqa: E402
from opcost.model.basis import gemm  # noqa: E402
from opcost.model.training import fit  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.train import TrainParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.stages.train import read_target  # noqa: E402

CLASSES = ("winograd_3x3", "other_conv")


def figures(f: np.ndarray) -> dict[str, Any]:
    """n, median, quartiles, max and the share above 1 of attained fractions `f`."""
    if not len(f):
        return {"n": 0}
    q1, med, q3 = np.percentile(f, [25, 50, 75])
    return {"n": int(len(f)), "median": round(float(med), 3), "q1": round(float(q1), 3), "q3": round(float(q3), 3),
            "max": round(float(f.max()), 3), "share_above_1": round(float((f > 1).mean()), 3)}  # fmt: skip


def measure(paths: Paths, target: str) -> dict[str, Any]:
    device, mode = TrainParams.split_target(target)
    df, _, _ = read_target(paths, target)
    data = fit.prepare(df, mode, device)
    assert data.compute_s is not None and data.memory_s is not None and data.fallback is not None
    found = find_device(device)
    tf32_on = bool(found and found[1] and found[0].has_tf32)
    t = data.y("time")
    rows = np.flatnonzero(~data.noop & np.isfinite(t))
    floor = fit.launch_floor(data, rows)
    conv = np.array([r.kind.startswith(gemm.CONV_PREFIX) for r in data.records]) & ~data.depthwise
    wino = np.array([gemm.kernel_features(r.kind, r.hp)[3] == 1.0 for r in data.records])
    measured = ~data.estimated & np.isfinite(t) & ~data.noop & (t > floor)
    c = np.where(data.fallback, data.dw_compute, data.compute_s)  # the unit the baseline charges
    frac = c / (t - floor)
    bound = c >= gemm.COMPUTE_BOUND_RATIO * data.memory_s
    out: dict[str, Any] = {"tf32_on": tf32_on, "floor_s": floor}
    for cls, sel in (("winograd_3x3", conv & wino), ("other_conv", conv & ~wino)):
        s = measured & sel
        fams = sorted({f for i in np.flatnonzero(s) for f in data.families[i]})
        by_family = {}
        for fam in fams:
            fs = s & np.array([fam in f for f in data.families])
            by_family[fam] = {"all": figures(frac[fs]), "compute_bound": figures(frac[fs & bound])}
        out[cls] = {"all": figures(frac[s]), "compute_bound": figures(frac[s & bound]), "by_family": by_family}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", help="comma-separated train targets (default: params.yaml's)")
    args = ap.parse_args()
    paths = Paths(ROOT)
    tp: TrainParams = load_params(paths.params).train
    report: dict[str, Any] = {}
    for t in args.targets.split(",") if args.targets else tp.targets:
        report[t] = r = measure(paths, t)
        w, o = r["winograd_3x3"]["compute_bound"], r["other_conv"]["compute_bound"]
        print(f"{t} (TF32 {'on' if r['tf32_on'] else 'off'}): compute-bound fraction of the unit peak, Winograd 3x3 "
              f"median {w.get('median')} (n {w['n']}, >1: {w.get('share_above_1')}), other convs median "
              f"{o.get('median')} (n {o['n']}, >1: {o.get('share_above_1')})")  # fmt: skip
    return benchreport.save(report, "winograd.json")


if __name__ == "__main__":
    sys.exit(main())
