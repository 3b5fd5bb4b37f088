"""Round 31's candidate changes to the `physical` baseline, family left out (issue 21, section 4).

Each variant is the smallest change aimed at one cause bench/family_cells.py names; it is applied here,
for this run only, by swapping the model/basis/gemm.py or model/training/fit.py function it changes (the shipped code
is untouched), and scored by bench/family_split.py's run_target: the same folds, models and choice (on
the grouped split). Every figure the variant learns comes from the fold's training rows, as the function
it replaces does.

- conv_unit: on configs without TF32 (A30_no_tf32, RTX 2080 Ti) cuDNN's FP32 convolutions are a unit of
  their own, with the attained fraction of the FP32 peak their compute-bound fit rows reach, while
  cuBLAS matmuls keep theirs (nominal where the fold has no compute-bound matmul row: ConvNeXt held out).
  Cause aimed at: ConvNeXt's Linear layers without TF32, +28 % (the trees see them as 1x1 convolutions,
  which attain 0.67 of the FP32 peak against the Linear layers' 0.84).
- conv_unit_paired: conv_unit only where the fold also gives the matmul unit its fraction.
- bandwidth: the attained fraction of the nominal DRAM bandwidth, median over the fold's memory-bound
  fit rows (memory time >= gemm.COMPUTE_BOUND_RATIO x compute time), divides every op's memory time in
  the baseline. Cause aimed at: the baseline's -40 to -66 % bias on memory-bound ops (BatchNorm, 1x1
  convolutions), which the trees' residual has to carry across families.
- depthwise_kind: a depthwise convolution shown to the trees as a kind of its own (no `Conv2d` one-hot),
  so its residual is not learnt from the GEMM convolutions. Cause aimed at: EfficientNet's depthwise
  convolutions held out, trees +29 to +38 % over a baseline within -21..+9 %.
- occupancy: a GEMM-like op with fewer output tiles (128 x 128) than the device has SMs computes on that
  many SMs only: its compute time x SMs / tiles; the units' attained fractions learnt from the rows that
  fill the device. Cause aimed at: skinny GEMMs far above their baseline (EfficientNet's squeeze-excite
  1x1 convolutions on 1x1 maps, M = 32: 0.5-1 % of the FP32 peak without TF32, -62 to -71 % family-out;
  their time follows K as one thread block's would).

Round 32 (bench/winograd.py first: compute-bound 3x3 stride-1 convolutions attain 1.15 / 1.12 of the FP32 peak
on A30 no-TF32 / RTX 2080 Ti inference, other convolutions 0.70 / 0.74; with TF32 on no class of their own):
- winograd: on a config whose convolutions run on the FP32 units (gemm.gemm_unit, i.e. the math mode), a
  Winograd-eligible convolution (3x3, stride 1, dilation 1, groups 1) is a unit of its own, charged at the
  median fraction of the FP32 peak its fold's compute-bound fit rows attain (nominal with fewer than
  gemm.COMPUTE_BOUND_ROWS); every other unit as shipped (nominal on these configs). A30 targets: no row changes.
- winograd_relative: the same unit at its fraction over the other FP32 convolutions' (the ratio of the two
  medians), so that in training, where every fraction also absorbs the backward pass, the class is put
  relative to its siblings, not to a nominal peak the others keep. Tried only if `winograd` fails the rule.
  Keep rule, fixed before any score: no target's family MAPE or twe of the chosen model worse by > 0.5 pt,
  grouped twe no worse by > 0.3 pt, and one inference target's family twe better by >= 1 pt.

Round 32's answer (main at 37cff10: family MAPE / twe of the chosen model; grouped twe; A30 targets unchanged
by construction, no row there is a Winograd unit):
- winograd: A30 no-TF32 inference 23.4/25.1 -> 22.5/24.4 (grouped 18.5 -> 18.3); RTX 2080 Ti inference
  13.9/13.5 -> 15.0/16.5 (the chosen model flips xgb -> rf on a grouped tie, 10.93 -> 10.88; xgb itself
  13.6/13.3); A30 no-TF32 training 9.8/11.7 -> 9.4/11.9 (the Winograd class charged 3x its siblings, its own
  fraction 0.32 in training against their 0.22); RTX 2080 Ti training 12.1/11.4 -> 11.9/11.0. Fails the rule.
- winograd_relative: A30 no-TF32 inference 23.4/25.1 -> 22.7/23.3 (grouped 18.5 -> 18.3); RTX 2080 Ti
  inference 13.9/13.5 -> 13.6/13.1 (grouped 10.9 -> 11.1); A30 no-TF32 training 9.8/11.7 -> 9.7/11.4 (grouped
  11.6 -> 10.9); RTX 2080 Ti training 12.1/11.4 -> 11.9/11.7 (grouped 10.3 -> 10.2). Passes the op rule; shipped
  in model/basis/gemm.py and taken out again after a full `dvc repro` (reports/bench/winograd_networks.json):
  model-left-out networks, time / energy MAPE, A30 no-TF32 inference 7.4/7.5 -> 9.2/9.1 %, RTX 2080 Ti inference
  8.0/5.3 -> 8.5/5.6 %; family left out A30 no-TF32 13.4/12.2 -> 14.7/13.4 %, RTX 10.9/10.0 -> 8.3/6.6 %. The op rule
  had not named the network figures; a next variant's rule must.

    PYTHONPATH=src python bench/baseline_variants.py --variant conv_unit [--targets A30_no_tf32-inference,...]

Needs `dvc pull`. About a minute per target. Writes reports/bench/baseline_variants/<variant>.json (the
shape of family_split.json).

Round 31's answer: none kept (family MAPE / twe of the chosen model, main -> variant; grouped twe):
- conv_unit: A30 no-TF32 inference 23.4/25.1 -> 22.2/20.4 (ConvNeXt Linear +28 -> -2 %; grouped 18.5 ->
  17.8), but RTX 2080 Ti inference 13.9/13.5 -> 16.0/19.2 (chosen model xgb -> rf; xgb itself 14.8/16.3):
  ConvNeXt Linear -7 -> -25 %, as on the RTX cuBLAS and cuDNN attain one fraction (0.77 / 0.73), and
  A30 no-TF32 training 10.6/14.5 -> 10.4/16.0. The gap between the two libraries is the device's, and a
  fold without ConvNeXt has no compute-bound matmul to measure it: an information limit, not a fit.
- conv_unit_paired: A30 no-TF32 inference 23.4/25.1 -> 22.5/24.4; RTX 2080 Ti inference 13.9/13.5 ->
  15.7/16.6 (chosen model xgb -> rf).
- bandwidth: A30 inference 17.4/15.2 -> 18.4/14.2; A30 no-TF32 inference 23.4/25.1 -> 19.9/19.8 only by
  a change of the chosen model (rf -> xgb; rf-physical 24.8/23.3); grouped twe worse on every physical
  model (A30 10.2 -> 10.6, no-TF32 18.5 -> 19.1).
- depthwise_kind: A30 inference 17.4/15.2 -> 17.3/15.7; A30 no-TF32 inference 23.4/25.1 -> 22.8/23.6
  (grouped within 0.1): noise.
- occupancy: worse on all three inference targets: A30 17.4/15.2 -> 20.2/16.2, A30 no-TF32 23.4/25.1 ->
  25.5/26.2, RTX 2080 Ti 13.9/13.5 -> 16.4/17.1 (grouped twe 10.2 -> 10.8, 18.5 -> 18.4, 10.9 -> 11.2).
  cuDNN and cuBLAS pick smaller tiles or split K for skinny problems, so 128 x 128 tiles overstate it;
  with the fractions learnt from every row (the first try) the ConvNeXt fold learnt the FP32 unit from
  classifier heads (M = 32) at 3.3x the peak, and ConvNeXt's Linear layers went -2 -> -63 % (A30 twe 30.8).
  With whole waves too (waves x SMs / tiles), A30 inference twe 30.1.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import benchreport  # noqa: E402
import family_split  # noqa: E402
from opcost.devices import find_device  # noqa: E402
from opcost.model.basis import gemm  # noqa: E402
from opcost.model.basis.physics import gemm_dims  # noqa: E402
from opcost.model.training import fit  # noqa: E402
from opcost.ops import kinds  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.train import TrainParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402

CONV_FP32_UNIT = "conv_fp32"  # cuDNN FP32 convolutions on a config without TF32 (conv_unit variants)
BANDWIDTH = "bandwidth"  # the fold's attained DRAM fraction, carried in Fitted.unit_eff (bandwidth variant)
DEPTHWISE_KIND = "DepthwiseConv2d"


def conv_unit_of(kind: str, hp: dict[str, Any], device_config: str) -> str:
    """gemm.gemm_unit, with a convolution on the FP32 units (no TF32 in the config) a unit of its own."""
    unit = gemm.gemm_unit(kind, hp, device_config)
    return CONV_FP32_UNIT if unit == gemm.FP32_UNIT and kind.startswith(gemm.CONV_PREFIX) else unit


def unit_fractions(unit: np.ndarray, c: np.ndarray, m: np.ndarray, t: np.ndarray, floor: float, paired: bool) -> dict:
    """gemm.unit_efficiencies over TF32, FP32 and the convolution unit: the median fraction of each unit's
    compute-bound rows (at least gemm.COMPUTE_BOUND_ROWS); none unless a convolution unit is learnt;
    `paired`: the FP32 convolution unit only where the matmul unit is learnt too."""
    t = np.asarray(t, float) - floor
    ok = np.isfinite(c) & np.isfinite(t) & (c > 0) & (t > 0) & (c >= gemm.COMPUTE_BOUND_RATIO * m)
    out = {}
    for u in (gemm.TF32_UNIT, gemm.FP32_UNIT, CONV_FP32_UNIT):
        sel = ok & (unit == u)
        if sel.sum() >= gemm.COMPUTE_BOUND_ROWS:
            out[u] = float(np.median(c[sel] / t[sel]))
    if paired and CONV_FP32_UNIT in out and gemm.FP32_UNIT not in out:
        out.pop(CONV_FP32_UNIT)
    return out if (gemm.TF32_UNIT in out or CONV_FP32_UNIT in out) else {}


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def conv_unit(paired: bool) -> contextlib.ExitStack:
    orig_prepare = fit.prepare

    def prepare(df, mode, device_config):  # type: ignore[no-untyped-def]
        data = orig_prepare(df, mode, device_config)
        data.unit = np.array([conv_unit_of(r.kind, r.hp, device_config) for r in data.records], dtype=object)
        return data

    def unit_efficiencies(unit, compute_s, memory_s, t_s, floor_s=0.0):  # type: ignore[no-untyped-def]
        return unit_fractions(np.asarray(unit), np.asarray(compute_s, float), np.asarray(memory_s, float),
                              t_s, floor_s, paired)  # fmt: skip

    stack = contextlib.ExitStack()
    stack.enter_context(patched(fit, "prepare", prepare))
    stack.enter_context(patched(gemm, "unit_efficiencies", unit_efficiencies))
    return stack


def bandwidth() -> contextlib.ExitStack:
    orig_units, orig_offsets = fit.unit_efficiency_of, fit.offsets

    def unit_efficiency_of(data, fs, quantity, fit_rows, floor):  # type: ignore[no-untyped-def]
        out = dict(orig_units(data, fs, quantity, fit_rows, floor))
        if fs == "physical" and quantity == "time":
            c, m = data.compute_s[fit_rows], data.memory_s[fit_rows]
            t = data.y("time")[fit_rows] - floor
            ok = (m >= gemm.COMPUTE_BOUND_RATIO * c) & (t > 0) & ~data.noop[fit_rows]
            if ok.sum() >= gemm.COMPUTE_BOUND_ROWS:
                out[BANDWIDTH] = float(np.median(m[ok] / t[ok]))
        return out

    def offsets(data, rows, floor, dw_efficiency=0.0, unit_eff=None, physical=False):  # type: ignore[no-untyped-def]
        if not (physical and unit_eff and BANDWIDTH in unit_eff):
            return orig_offsets(data, rows, floor, dw_efficiency, unit_eff, physical)
        eff = {k: v for k, v in unit_eff.items() if k != BANDWIDTH}
        c = gemm.compute_part_s(data.compute_s[rows], data.dw_compute[rows], data.fallback[rows], data.unit[rows],
                                eff, data.depthwise[rows], dw_efficiency)  # fmt: skip
        return np.log(gemm.overlap_s(c, data.memory_s[rows] / unit_eff[BANDWIDTH]) + floor)

    stack = contextlib.ExitStack()
    stack.enter_context(patched(fit, "unit_efficiency_of", unit_efficiency_of))
    stack.enter_context(patched(fit, "offsets", offsets))
    return stack


def depthwise_kind() -> contextlib.ExitStack:
    orig = gemm.tree_view

    def tree_view(kind, hp, input_shape):  # type: ignore[no-untyped-def]
        return (DEPTHWISE_KIND, hp, input_shape) if gemm.is_depthwise(kind, hp) else orig(kind, hp, input_shape)

    stack = contextlib.ExitStack()
    stack.enter_context(patched(gemm, "tree_view", tree_view))
    return stack


TILE = 128  # output tile edge of a GEMM thread block (occupancy variant)


def occupancy_factor(m: float, n: float, sms: int, tile: int = TILE) -> float:
    """How much longer a GEMM's compute takes than at the full device peak when it has fewer output tiles
    than the device has SMs (each tile one thread block on one SM): SMs / tiles, else 1; 1 for an op
    without GEMM dimensions."""
    if m <= 0 or n <= 0 or sms <= 0:
        return 1.0
    tiles = math.ceil(m / tile) * math.ceil(n / tile)
    return max(1.0, sms / tiles)


def occupancy() -> contextlib.ExitStack:
    orig_prepare = fit.prepare

    def prepare(df, mode, device_config):  # type: ignore[no-untyped-def]
        data = orig_prepare(df, mode, device_config)
        found = find_device(device_config)
        sms = found[0].sms if found else 0
        f = np.ones(data.n)
        for i, r in enumerate(data.records):
            if r.kind in kinds.MATMUL_KINDS and not data.depthwise[i]:
                m, n, _ = gemm_dims(r.kind, r.hp, r.input_shape, r.metrics["output_shapes"])
                f[i] = occupancy_factor(m, n, sms)
        data.compute_s = data.compute_s * f
        data.dw_compute = np.where(data.depthwise, data.dw_compute, data.dw_compute * f)
        data.occupancy = f  # type: ignore[attr-defined]
        return data

    orig_units = fit.unit_efficiency_of

    def unit_efficiency_of(data, fs, quantity, fit_rows, floor):  # type: ignore[no-untyped-def]
        # a unit's attained fraction measured where the op fills the device (the factor is the rest)
        return orig_units(data, fs, quantity, fit_rows[data.occupancy[fit_rows] == 1.0], floor)

    stack = contextlib.ExitStack()
    stack.enter_context(patched(fit, "prepare", prepare))
    stack.enter_context(patched(fit, "unit_efficiency_of", unit_efficiency_of))
    return stack


WINOGRAD_UNIT = "winograd"  # Winograd-eligible convolutions on a config whose convolutions run on the FP32 units


def winograd_unit_of(kind: str, hp: dict[str, Any], device_config: str) -> str:
    """gemm.gemm_unit, with a Winograd-eligible convolution (3x3, stride 1, dilation 1, groups 1) a unit of its
    own where it runs on the FP32 units: decided by the config's math mode (gemm_unit), not by any score."""
    unit = gemm.gemm_unit(kind, hp, device_config)
    eligible = kind.startswith(gemm.CONV_PREFIX) and gemm.kernel_features(kind, hp)[3] == 1.0
    return WINOGRAD_UNIT if unit == gemm.FP32_UNIT and eligible else unit


def winograd_fraction(unit: np.ndarray, c: np.ndarray, m: np.ndarray, t: np.ndarray, relative: bool) -> float:
    """The Winograd unit's attained fraction of the FP32 peak: the median of compute / time over its
    compute-bound rows (at least gemm.COMPUTE_BOUND_ROWS), 0.0 (nominal) with fewer; `relative`: over the
    median of the other FP32 convolutions' compute-bound rows (0.0 unless both have enough rows)."""
    ok = np.isfinite(c) & np.isfinite(t) & (c > 0) & (t > 0) & (c >= gemm.COMPUTE_BOUND_RATIO * m)
    w = ok & (unit == WINOGRAD_UNIT)
    if w.sum() < gemm.COMPUTE_BOUND_ROWS:
        return 0.0
    f = float(np.median(c[w] / t[w]))
    if not relative:
        return f
    o = ok & (unit == CONV_FP32_UNIT)
    return f / float(np.median(c[o] / t[o])) if o.sum() >= gemm.COMPUTE_BOUND_ROWS else 0.0


def winograd(relative: bool) -> contextlib.ExitStack:
    orig_prepare, orig_units = fit.prepare, gemm.unit_efficiencies

    def prepare(df, mode, device_config):  # type: ignore[no-untyped-def]
        data = orig_prepare(df, mode, device_config)
        units = [winograd_unit_of(r.kind, r.hp, device_config) for r in data.records]
        data.unit = np.array(units, dtype=object)
        # the relative variant's reference class: the other FP32 convolutions, measured apart from the matmuls
        data.conv_ref = np.array([conv_unit_of(r.kind, r.hp, device_config) for r in data.records], dtype=object)
        return data

    def unit_efficiencies(unit, compute_s, memory_s, t_s, floor_s=0.0):  # type: ignore[no-untyped-def]
        unit, c, m = np.asarray(unit), np.asarray(compute_s, float), np.asarray(memory_s, float)
        out = dict(orig_units(unit, c, m, t_s, floor_s))  # TF32 / FP32 as shipped (nothing on FP32-only configs)
        ref = np.where(unit == WINOGRAD_UNIT, WINOGRAD_UNIT, STATE["conv_ref"]) if relative else unit
        f = winograd_fraction(np.asarray(ref), c, m, np.asarray(t_s, float) - floor_s, relative)
        if f > 0:
            out[WINOGRAD_UNIT] = f
        return out

    orig_unit_of = fit.unit_efficiency_of

    def unit_efficiency_of(data, fs, quantity, fit_rows, floor):  # type: ignore[no-untyped-def]
        STATE["conv_ref"] = data.conv_ref[fit_rows]  # the fit rows' reference classes, for unit_efficiencies
        return orig_unit_of(data, fs, quantity, fit_rows, floor)

    stack = contextlib.ExitStack()
    stack.enter_context(patched(fit, "prepare", prepare))
    stack.enter_context(patched(fit, "unit_efficiency_of", unit_efficiency_of))
    stack.enter_context(patched(gemm, "unit_efficiencies", unit_efficiencies))
    return stack


STATE: dict[str, Any] = {}  # the winograd variants' per-fit reference classes (patched functions only)

VARIANTS: dict[str, Callable[[], contextlib.ExitStack]] = {
    "winograd": lambda: winograd(relative=False),
    "winograd_relative": lambda: winograd(relative=True),
    "occupancy": occupancy,
    "conv_unit": lambda: conv_unit(paired=False),
    "conv_unit_paired": lambda: conv_unit(paired=True),
    "bandwidth": bandwidth,
    "depthwise_kind": depthwise_kind,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    ap.add_argument("--targets", default="A30_no_tf32-inference,A30-inference")
    ap.add_argument("--algorithms", default="rf,xgb")
    args = ap.parse_args()
    paths = Paths(ROOT)
    tp: TrainParams = load_params(paths.params).train
    report: dict[str, Any] = {}
    with VARIANTS[args.variant]():
        for t in args.targets.split(","):
            report[t] = r = family_split.run_target(paths, tp, t, tuple(args.algorithms.split(",")))
            s = r["scores"][r["chosen"]]
            print(f"{t} [{args.variant}]: chosen {r['chosen']}, family MAPE {s['family']['mape']:.1f} % twe "
                  f"{s['family']['twe']:.1f} %, grouped twe {s['grouped']['twe']:.1f} %", flush=True)  # fmt: skip
    return benchreport.save(report, f"baseline_variants/{args.variant}.json")


if __name__ == "__main__":
    sys.exit(main())
