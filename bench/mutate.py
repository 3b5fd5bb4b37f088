"""Mutation check: small, wrong changes to the core, one at a time; the tests must catch every one.

    PYTHONPATH=src python bench/mutate.py              # every mutation, each against its own test files
    PYTHONPATH=src python bench/mutate.py --full       # each against the whole fast suite (-m "not slow", -x)
    PYTHONPATH=src python bench/mutate.py --only compose-absolute-error,netval-trains-on-held-out-ops

Each mutation is applied to a temporary copy of src/ (the working tree is never edited, so an
interrupted run leaves nothing behind); pytest runs from the repository with PYTHONPATH pointing at the
copy, subprocesses included. A mutation is `killed` when a test fails, `survived` when all pass, and
`not-applied` when its old text is no longer in the file: the code moved, and the entry below must be
updated (the old text must occur exactly once). Exit status 1 if any mutation survived or could not be
applied. Writes reports/bench/mutation.json.

Entries are (id, file under src/opcost, [(exact old text, new text), ...], description, test files).
The first eight are the changes issue 22 listed, which `make test` once let through.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "mutation.json"
KNOWN = "tests/test_known_answers.py"


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str  # relative to src/opcost
    edits: tuple[tuple[str, str], ...]  # (exact old text, new text), each old text exactly once in the file
    description: str
    tests: tuple[str, ...]  # test files that should catch it (the quick run); --full runs the fast suite


MUTATIONS: tuple[Mutation, ...] = (
    # -- the eight of issue 22 --------------------------------------------------------------------
    Mutation(
        "cv-leaks-held-out-row",
        "model/training/fit.py",
        (
            (
                "p = predict_rows(data, fit_model(data, alg, fs, quantity, tr, tp), te)",
                "p = predict_rows(data, fit_model(data, alg, fs, quantity, np.append(tr, te[:1]), tp), te)",
            ),
        ),
        "cross-validation leaks one held-out row per fold into training",
        (KNOWN,),
    ),
    Mutation(
        "netval-trains-on-held-out-ops",
        "model/training/netval.py",
        (('keep = ~data.df["op_id"].isin(held_ops).to_numpy()', "keep = np.ones(len(data.df), bool)"),),
        "leave-one-network-out trains on the held-out network's own ops",
        (KNOWN,),
    ),
    Mutation(
        "compose-drops-optimizer-term",
        "model/composition/compose.py",
        (('"params_bw": float(param_bytes / bw) if mode == "training" else 0.0,', '"params_bw": 0.0,'),),
        "the composition layer drops the training optimizer term",
        (KNOWN,),
    ),
    Mutation(
        "compose-absolute-error",
        "model/basis/nnls.py",
        (("x, _ = nnls(A * w[:, None], np.ones_like(y))", "x, _ = nnls(A, y)"),),
        "the composition is fitted on absolute instead of relative error",
        (KNOWN,),
    ),
    Mutation(
        "evaluate-swaps-energy-power",
        "data/evaluate.py",
        (
            ('trials_e_j=("energy_per_iter_j", "mean"),', 'trials_e_j=("power_w", "mean"),'),
            ('trials_p_w=("power_w", "mean"),', 'trials_p_w=("energy_per_iter_j", "mean"),'),
        ),
        "campaign evaluation swaps the energy and power columns",
        ("tests/test_known_measurements.py",),
    ),
    Mutation(
        "costing-ignores-noop-floor",
        "model/composition/costing.py",
        (
            (
                "t[i], p[i], source[i] = self.floor_s if self.noop_s is None else self.noop_s, self.noop_power_w, "
                '"floor"',
                't[i], p[i], source[i] = self.floor_s, self.noop_power_w, "floor"',
            ),
        ),
        "prediction ignores the no-op time the device measured (costs the launch floor instead)",
        (KNOWN,),
    ),
    Mutation(
        "interval-from-quartiles",
        "model/composition/intervals.py",
        (("    need = level * (n_groups + 1)\n", "    need = 0.5 * (n_groups + 1)\n"),),
        'the "90 %" interval is built from the middle half of the scores (25th to 75th percentile)',
        (KNOWN, "tests/test_intervals_composition.py"),
    ),
    Mutation(
        "clock-share-ignores-matmul-peak",
        "model/prediction/clocktransfer.py",
        (("                peak_of(r.kind, dev, tf32),\n", "                dev.fp32_flops,\n"),),
        "the compute share moved by the clock uses the FP32 peak for matmul-like ops too",
        ("tests/model/test_roofline_shares.py",),
    ),
    Mutation(
        "roofline-ignores-tf32",
        "model/basis/physics.py",
        (
            (
                "return dev.peak_flops(dtype, tf32 and uses_tf32(kind))",
                "return dev.peak_flops(dtype, uses_tf32(kind))",
            ),
        ),
        "the roofline ignores the config's TF32 switch, so A30_no_tf32 gets the TF32 peak",
        (KNOWN,),
    ),
    # -- more on the core ---------------------------------------------------------------------------
    Mutation(
        "costing-noops-to-the-trees",
        "model/composition/costing.py",
        (("elif is_noop(r.kind, r.hp, r.metrics, self.mode):", "elif False:"),),
        "no-ops are never recognised: they go to the trees or get charged",
        (KNOWN,),
    ),
    Mutation(
        "noop-time-mean",
        "model/training/fit.py",
        (
            (
                "noop_t = float(np.median(t)) if len(t) >= MIN_MEASURED_NOOPS else floor",
                "noop_t = float(np.mean(t)) if len(t) >= MIN_MEASURED_NOOPS else floor",
            ),
        ),
        "a no-op's time is the mean, not the median, of the measured no-ops",
        (KNOWN,),
    ),
    Mutation(
        "grouped-folds-by-row",
        "model/training/fit.py",
        (("split(idx, groups=layers))", "split(idx, groups=idx))"),),
        "grouped cross-validation splits rows, not layers: a layer's other shapes train its test rows",
        ("tests/model/test_model.py::test_grouped_folds_keep_every_shape_of_a_layer_on_one_side",),
    ),
    Mutation(
        "weighted-error-unweighted-denominator",
        "model/training/fit.py",
        (
            (
                '"twe": float((w * np.abs(p - y)).sum() / (w * y).sum()),',
                '"twe": float((w * np.abs(p - y)).sum() / y.sum()),',
            ),
        ),
        "the time-weighted error divides by the unweighted sum",
        (KNOWN,),
    ),
    Mutation(
        "netval-error-inverted",
        "model/training/netval.py",
        (('"t_error": t_pred / n["t_s"] - 1,', '"t_error": n["t_s"] / t_pred - 1,'),),
        "leave-one-network-out errors are measured / predicted - 1 (the intervals' residuals flip)",
        (KNOWN,),
    ),
    Mutation(
        "extrapolation-narrows",
        "model/composition/compose.py",
        (("EXTRAPOLATION_WIDENING = 2.0", "EXTRAPOLATION_WIDENING = 0.5"),),
        "an extrapolating question gets a narrower interval",
        (KNOWN,),
    ),
    Mutation(
        "compose-terms-floor-not-subtracted",
        "model/composition/compose.py",
        (("excess = np.clip(costs.t_s - floor_s, 0.0, None)", "excess = np.asarray(costs.t_s, float)"),),
        "the summed term keeps every op's launch floor (counted twice with calls x floor)",
        (KNOWN,),
    ),
    # -- round 26: intervals by question, constant power at a clock, depthwise baseline, views ----------
    Mutation(
        "new-family-gets-known-scores",
        "model/composition/compose.py",
        (
            (
                '                    return "new"\n',
                '                    return "known"\n',
            ),
        ),
        "a network of a new family gets the known-family (model-split) scores: intervals too narrow for it",
        (KNOWN, "tests/test_intervals_composition.py"),
    ),
    Mutation(
        "depthwise-efficiency-from-every-row",
        "model/training/fit.py",
        (("    dw = fit_rows[data.depthwise[fit_rows]]\n", "    dw = np.flatnonzero(data.depthwise)\n"),),
        "the depthwise efficiency is fitted on every depthwise row, held-out families included",
        ("tests/model/test_gemm.py",),
    ),
    Mutation(
        "depthwise-baseline-ignored",
        "model/basis/gemm.py",
        (
            (
                "    if dw_efficiency > 0:\n        dw = np.asarray(depthwise, bool)",
                "    if False:\n        dw = np.asarray(depthwise, bool)",
            ),
        ),
        "the depthwise baseline is never applied (a depthwise conv's compute part stays its nominal FLOPs time)",
        ("tests/model/test_gemm.py",),
    ),
    Mutation(
        "views-counted-under-inference-mode",
        "ops/features.py",
        (("    with torch.no_grad(), counter:", "    with torch.inference_mode(), counter:"),),
        "op metrics counted under inference_mode: flatten and reshape copy, so a view is costed as a kernel",
        ("tests/ops/test_kinds.py",),
    ),
    Mutation(
        "dvfs-curve-on-the-reference-clock",
        "model/clocks/clock.py",
        (
            (
                "        fb = np.asarray(f_ref if f_boost is None else f_boost, float)\n        shape = self.dvfs(",
                "        fb = np.asarray(f_ref, float)\n        shape = self.dvfs(",
            ),
        ),
        "the DVFS voltage curve is placed on the reference clock, not the boost clock",
        ("tests/model/test_clock_model.py",),
    ),
    # -- round 27 --------------------------------------------------------------------------------
    Mutation(
        "matmul-on-tf32-units",
        "model/basis/physics.py",
        (("return dev.peak_flops(dtype, tf32 and uses_tf32(kind))", "return dev.peak_flops(dtype, tf32)"),),
        "Linear/matmul/bmm get the TF32 peak where the config allows TF32 (PyTorch leaves cuBLAS TF32 off)",
        ("tests/model/test_op_peak.py", KNOWN),
    ),
    Mutation(
        "conformal-counts-sizes-as-models",
        "model/composition/intervals.py",
        (("    n_groups = len(count)\n    need = ", "    n_groups = len(s)\n    need = "),),
        "the grouped conformal quantile counts every input size of a model as its own exchangeable unit",
        ("tests/test_intervals_composition.py",),
    ),
    Mutation(
        "clock-fallback-share-not-fitted",
        "model/clocks/clock.py",
        (
            (
                "    solve(step2, rows2, w2, t2, ([box[k][2] for k in step2],))",
                "    if (~known).any():\n        solve(step2, rows2, w2, t2, ([box[k][2] for k in step2],))",
            ),
        ),
        "the fallback compute share is never fitted when every training curve has an observed share",
        ("tests/model/test_clock_model.py",),
    ),
    Mutation(
        "transfer-evidence-uses-own-config",
        "model/composition/compose.py",
        (("[o.as_source() for o in cal if o.name != s.name], mode", "[o.as_source() for o in cal], mode"),),
        "a config's leave-one-config-out score comes from a layer that saw its own networks",
        ("tests/model/test_transfer_evidence.py",),
    ),
    # -- round 28: the normal rule below 9 groups (model/composition/intervals.py) ------------------------------------
    Mutation(
        "normal-interval-z-for-t",
        "model/composition/intervals.py",
        (
            (
                "    h = t_quantile(0.5 * (1 + level), max(n_groups - 1 - extra_params, 1)) * float(np.sqrt(v))\n",
                "    h = 1.644854 * float(np.sqrt(v))\n",
            ),
        ),
        "the small-sample interval takes the normal quantile, not Student t with G - 1 degrees of freedom",
        ("tests/model/test_intervals.py",),
    ),
    Mutation(
        "normal-interval-centre-known",
        "model/composition/intervals.py",
        (("    v = s_b2 * (1 + 1 / n_groups) + ", "    v = s_b2 + "),),
        "the small-sample interval treats the centre m as known (no sqrt(1 + 1/G))",
        ("tests/model/test_intervals.py",),
    ),
    Mutation(
        "normal-interval-ignores-groups",
        "model/composition/intervals.py",
        (
            (
                "    e, g = e[ok], g[ok].astype(str)\n    _, inv, count = np.unique(g, return_inverse=True, "
                "return_counts=True)\n    n_groups = len(count)\n    if n_groups < MIN_NORMAL_GROUPS",
                "    e, g = e[ok], np.arange(ok.sum()).astype(str)\n"
                "    _, inv, count = np.unique(g, return_inverse=True, "
                "return_counts=True)\n    n_groups = len(count)\n    if n_groups < MIN_NORMAL_GROUPS",
            ),
        ),
        "the small-sample interval treats a model's input sizes as independent networks",
        ("tests/model/test_intervals.py",),
    ),
    Mutation(
        "conformal-largest-score-from-nine-groups",
        "model/composition/intervals.py",
        (
            (
                "    q = conformal_q(e, level, g) if n_groups >= min_conformal_groups(level) else None\n",
                "    q = conformal_q(e, level, g)\n",
            ),
        ),
        "from 9 to 18 groups the interval is the largest score (conformal's degenerate quantile), not the normal rule",
        ("tests/model/test_intervals.py",),
    ),
    Mutation(
        "normal-interval-dropped",
        "model/composition/intervals.py",
        (("    got = normal_interval(e, level, g, extra_params=int(ratio > 0))", "    got = None"),),
        "below 19 groups the interval is the old largest score, at least +-30 % (over-covers, wide)",
        ("tests/model/test_intervals.py",),
    ),
    # -- round 28 --------------------------------------------------------------------------------
    Mutation(
        "compose-l2-share-inverted",
        "model/composition/compose.py",
        (
            (
                "return np.minimum(1.0, l2_bytes / np.maximum(read, 1.0))",
                "return np.minimum(1.0, np.maximum(read, 1.0) / l2_bytes)",
            ),
        ),
        "an op's share of its input in L2 is read the wrong way round (bytes / L2)",
        (KNOWN, "tests/model/test_model_left_out.py"),
    ),
    Mutation(
        "stem-channels-not-checked",
        "model/basis/physics.py",
        (
            (
                "return all(c % TF32_CHANNEL_MULTIPLE == 0 for c in per_group)",
                "return any(c % TF32_CHANNEL_MULTIPLE == 0 for c in per_group)",
            ),
        ),
        "a 3-channel stem counts as tensor-core eligible because its out channels are a multiple of 4",
        ("tests/model/test_conv_kernels.py",),
    ),
    Mutation(
        "memory-clock-share-scales-compute",
        "model/clocks/clock.py",
        (("return s0 / np.maximum(s0 + (1.0 - s0) / r, 1e-12)", "return s0 / np.maximum(s0 / r + (1.0 - s0), 1e-12)"),),
        "a lower memory clock stretches the compute-bound part instead of the memory-bound part",
        ("tests/model/test_clock_model.py",),
    ),
    Mutation(
        "static-power-ignores-share",
        "model/clocks/clock.py",
        (
            (
                "return np.minimum(self.static_frac + self.static_mem * (1.0 - s), STATIC_MAX)",
                "return np.minimum(self.static_frac + self.static_mem * s, STATIC_MAX)",
            ),
        ),
        "static power grows with the compute-bound share instead of the memory-bound one",
        ("tests/model/test_clock_model.py",),
    ),
    Mutation(
        "bundle-column-layout-unchecked",
        "model/composition/bundle.py",
        (
            (
                "if not isinstance(written, list) or [str(c) for c in written] != encoding.columns:",
                "if not isinstance(written, list) or len(written) != len(encoding.columns):",
            ),
        ),
        "a bundle with the same number of feature columns in another order loads and misreads its features",
        ("tests/model/test_trust_bundle.py",),
    ),
    # -- round 29 --------------------------------------------------------------------------------------
    Mutation(
        "family-split-keeps-sibling-ops",
        "model/training/netval.py",
        (("return m in group or (family is not None and family_of(m) == family)", "return m in group"),),
        "the family split keeps an op that only the held-out family's other models call: a new family's layers leak",
        ("tests/model/test_model_left_out.py",),
    ),
    Mutation(
        "unreached-clock-never-flagged",
        "model/clocks/clock.py",
        (("return (med > UNREACHED_JUMP)", "return (med > 10 * UNREACHED_JUMP)"),),
        "a clock setting the GPU did not reach (f t jumps on most curves) is kept as if it ran there",
        ("tests/model/test_clock_model.py",),
    ),
    Mutation(
        "physical-baseline-sums-parts",
        "model/basis/gemm.py",
        (("return np.maximum((c**norm + m**norm) ** (1.0 / norm), 1e-9)", "return np.maximum(c + m, 1e-9)"),),
        "the physical baseline adds compute and memory time instead of combining them as sqrt(C^2 + M^2)",
        ("tests/model/test_gemm.py",),
    ),
    Mutation(
        "interval-scale-ignores-ratio",
        "model/composition/intervals.py",
        (("s = np.sqrt(1.0 + ratio * np.square(covariate))", "s = np.sqrt(1.0 + np.square(covariate))"),),
        "a normalised interval's scale s(c) ignores the fitted ratio r",
        ("tests/model/test_hetero_intervals.py",),
    ),
    Mutation(
        "row-cache-ignores-clock",
        "model/basis/features.py",
        (
            (
                "key = (lid, clock, *content) if content is not None else None",
                "key = (lid, *content) if content is not None else None",
            ),
        ),
        "the encoded-row cache serves a row encoded at one clock for a question at another",
        ("tests/model/test_row_cache.py",),
    ),
    # -- round 29b: warm sequential predictions ---------------------------------------------------------
    Mutation(
        "prediction-cache-ignores-clock",
        "model/composition/predcache.py",
        (("key = (clock, *content) if content is not None else None", "key = (*content,) if content else None"),),
        "the predicted-value cache serves an op's value at one clock for a question at another",
        ("tests/model/test_predcache.py",),
    ),
    Mutation(
        "prediction-cache-ignores-device-table",
        "model/composition/predcache.py",
        (("return (encoding, transform, encoding.device)", "return (encoding, transform)"),),
        "the predicted-value cache survives a change of the device table entry its physics features read",
        ("tests/model/test_predcache.py",),
    ),
    Mutation(
        "bundle-listing-never-stale",
        "model/store/bundlestore.py",
        (("return all(os.stat(p).st_mtime_ns == m for p, m in self.stamps)", "return True"),),
        "models/ is listed once and a bundle written later (dvc repro) is never seen",
        ("tests/model/test_predcache.py",),
    ),
    # -- round 30 --------------------------------------------------------------------------------
    Mutation(
        "question-covariate-always-zero",
        "model/composition/intervals.py",
        (("    return c if np.isfinite(c) else 0.0\n", "    return 0.0\n"),),
        "a prediction's interval (and a transferred layer's scores) ignore the composition layer's correction",
        ("tests/model/test_hetero_intervals.py",),
    ),
    Mutation(
        "transferred-scores-without-covariate",
        "model/composition/compose.py",
        (('question_covariate(float(tp), t.get("raw_sum_s", 0.0))', "0.0"),),
        "a transferred layer's leave-one-config-out scores all carry covariate 0: not normalised like the others",
        ("tests/model/test_transfer_evidence.py", "tests/model/test_hetero_intervals.py"),
    ),
    Mutation(
        "goals-family-reads-grouped",
        "validate/goals.py",
        (('fam = chosen_op_scores(targets[t])["family"]', 'fam = chosen_op_scores(targets[t])["grouped"]'),),
        "issue 21's goals table reports the grouped split as the family-out op error",
        ("tests/validate/test_goals.py",),
    ),
    Mutation(
        "goals-clock-ignores-guesses",
        "validate/goals.py",
        (
            (
                "goal, beats and within)",
                "goal, within)",
            ),
        ),
        "a GPU whose clock model loses to a guess is marked met when it is within 10 %",
        ("tests/validate/test_goals.py",),
    ),
    Mutation(
        "backward-efficiency-sees-held-out-rows",
        "model/training/fit.py",
        (
            (
                "dw_train = backward.efficiency(data.dw_work[fit_rows], y, floor)",
                "dw_train = backward.efficiency(data.dw_work, data.y(quantity), floor)",
            ),
        ),
        "the depthwise training baseline's bandwidth fraction is learnt from every row, held-out ones included",
        ("tests/model/test_backward.py",),
    ),
    Mutation(
        "backward-taps-not-counted",
        "model/basis/backward.py",
        (
            (
                "return np.where(k > 0, (FORWARD_PASSES + k) * m, 0.0)",
                "return np.where(k > 0, (FORWARD_PASSES + 1) * m, 0.0)",
            ),
        ),
        "a depthwise convolution's training passes ignore its kernel taps",
        ("tests/model/test_backward.py",),
    ),
    Mutation(
        "backward-trees-added-on-baseline-rows",
        "model/training/fit.py",
        (("only = backward.baseline_only(works, len(rows))", "only = None"),),
        "rows with a training baseline also get the trees' residual at prediction",
        ("tests/model/test_backward.py",),
    ),
    Mutation(
        "extrapolation-small-networks-unflagged",
        "model/composition/extrapolation.py",
        (("and _outside(size, net[0], net[1]):", "and size > net[1] * EXTRAPOLATION_FACTOR:"),),
        "a network input smaller than every calibration network's is not flagged (round 31's rule)",
        ("tests/model/test_extrapolation.py",),
    ),
    Mutation(
        "netval-coverage-skips-extrapolation-widening",
        "model/training/netval.py",
        (("iv = iv.widened(compose.EXTRAPOLATION_WIDENING)", "iv = iv"),),
        "coverage judges a flagged network by a narrower interval than its prediction gets",
        ("tests/model/test_interval_rows.py",),
    ),
    Mutation(
        "netval-flags-from-all-networks",
        "model/training/netval.py",
        (('**network_ranges(others["input_shape"])}', '**network_ranges(networks["input_shape"])}'),),
        "a held-out network's extrapolation flag sees its own input size among the calibration networks",
        ("tests/model/test_model_left_out.py",),
    ),
    Mutation(
        "powerlimit-fits-censored-as-exact",
        "model/clocks/powerlimit.py",
        (("np.minimum(unlimited / e - 1, 0.0)", "unlimited / e - 1"),),
        "a network at the power limit is fitted as an exact energy, so a fold of capped networks learns constant power",
        ("tests/model/test_power_limit.py",),
    ),
    Mutation(
        "powerlimit-cap-is-nominal",
        "model/clocks/powerlimit.py",
        (("return float(np.median(at)) if len(at) else float(limit_w)", "return float(limit_w)"),),
        "the cap is the nominal limit, not the power the limiter held",
        ("tests/model/test_power_limit.py",),
    ),
    Mutation(
        "compose-energy-uncapped",
        "model/composition/compose.py",
        (('terms["energy_sum"], time_s, self.power_cap_w))', 'terms["energy_sum"], time_s, 0.0))'),),
        "the composition layer predicts energy above the device's power limit",
        ("tests/model/test_power_limit.py",),
    ),
    Mutation(
        "floors-counts-compute-bound-rows",
        "data/floors.py",
        (("ok = np.isfinite(excess) & (m >= np.asarray(compute_s, float))", "ok = np.isfinite(excess)"),),
        "a kind's floor counts compute-bound rows, whose excess over their memory time is compute",
        ("tests/model/test_kind_floors.py",),
    ),
    Mutation(
        "floors-below-device-floor",
        "data/floors.py",
        (("out.append((str(kind), max(float(floor_s), ", "out.append((str(kind), min(float(floor_s), "),),
        "a kind's floor may fall below the device's (or never rise above it)",
        ("tests/model/test_kind_floors.py",),
    ),
    Mutation(
        "floors-bundle-ignores-kind-floors",
        "model/basis/features.py",
        (("fl = floors.per_op([r.kind for r in records], self.floor_s, self.kind_floors)", "fl = self.floor_s"),),
        "a saved bundle predicts with the device floor where its trees were fitted against kind floors",
        ("tests/model/test_kind_floors.py",),
    ),
    Mutation(
        "floors-learnt-from-all-rows",
        "model/training/fit.py",
        (
            (
                "kf = kind_floors_of(data, fs, quantity, fit_rows, floor)",
                "kf = kind_floors_of(data, fs, quantity, np.arange(data.n), floor)",
            ),
        ),
        "kind floors are learnt from every row, held-out ones included",
        ("tests/model/test_kind_floors.py",),
    ),
    Mutation(
        "xdevice-keeps-host-bound-rows",
        "model/crossdevice/xdevice.py",
        (("rows = rows[~host_bound(rows, p.host_plateau_factor)].reset_index(drop=True)", "rows = rows"),),
        "the cross-device fit keeps the wall-clock rows that time the host, not the GPU",
        ("tests/model/test_xdevice_host_plateau.py",),
    ),
    Mutation(
        "xdevice-plateau-over-every-row",
        "model/crossdevice/xdevice.py",
        (
            (
                "    for k in np.unique(key[wall]):\n        sel = wall & (key == k)",
                "    for k in np.unique(key):\n        sel = key == k",
            ),
        ),
        "event-timed rows are censored at a plateau as if the host had timed them",
        ("tests/model/test_xdevice_host_plateau.py",),
    ),
    Mutation(
        "xdevice-plateau-unscaled",
        "model/crossdevice/xdevice.py",
        (
            (
                "out[sel] = t[sel] <= factor * floors.device_floor(t[sel])",
                "out[sel] = t[sel] <= floors.device_floor(t[sel])",
            ),
        ),
        "the plateau factor is ignored: only the plateau's lowest calls are left out",
        ("tests/model/test_xdevice_host_plateau.py",),
    ),
    Mutation(
        "xdevice-keeps-no-ops",
        "model/crossdevice/xdevice.py",
        (('if physics.is_noop(rec.kind, rec.hp, rec.metrics, str(r["mode"])):', "if False:"),),
        "a no-op (StochasticDepth in eval) enters the cross-device rows with an add's bytes",
        ("tests/model/test_xdevice_host_plateau.py",),
    ),
    Mutation(
        "xdevice-coverage-in-sample",
        "model/crossdevice/xinterval.py",
        (('        law = fit(frame[frame["gpu"] != g], level)', "        law = fit(frame, level)"),),
        "the cross-device interval's coverage is scored with a law fitted on the scored GPU too",
        ("tests/model/test_xinterval.py",),
    ),
    Mutation(
        "xdevice-winograd-on-tf32",
        "model/crossdevice/xdevice.py",
        (('X[:, col["winograd_fp32"]] = wino * (peak <= fp32)', 'X[:, col["winograd_fp32"]] = wino'),),
        "a TF32 convolution is flagged Winograd, though cuDNN runs it as an implicit GEMM on the tensor cores",
        ("tests/model/test_xdevice_winograd.py",),
    ),
    Mutation(
        "xdevice-neusight-winograd-any-stride",
        "model/crossdevice/xdevice.py",
        (('d["winograd"] = ((ks == 3) & (st == 1)).astype(float)', 'd["winograd"] = (ks == 3).astype(float)'),),
        "a NeuSight 3x3 convolution of stride 2 is flagged Winograd",
        ("tests/model/test_xdevice_winograd.py",),
    ),
    Mutation(
        "no-tf32-alias-ignored",
        "devices.py",
        (
            (
                "return key if tf32 or DEVICES[key].tf32_flops is None else key + NO_TF32_SUFFIX",
                "return key if tf32 else key + NO_TF32_SUFFIX",
            ),
        ),
        "`RTX2080Ti_no_tf32` (a GPU without TF32) no longer finds its own bundle",
        ("tests/model/test_xdevice.py",),
    ),
    Mutation(
        "forest-predicts-on-threads",
        "model/training/fit.py",
        (("        est.set_params(n_jobs=1)\n", ""),),
        "a random forest predicts on two threads: its sums differ between runs in the last digits",
        ("tests/model/test_rf_determinism.py",),
    ),
    # -- energy over whole counter updates (measure/counter.py) ------------------------------------------
    Mutation(
        "counter-change-at-seen-read",
        "measure/counter.py",
        (("        return (self.before_s + self.seen_s) / 2\n", "        return self.seen_s\n"),),
        "a change is placed at the read that saw it, not between its bracketing reads",
        ("tests/measure/test_counter.py",),
    ),
    Mutation(
        "counter-bound-ignores-brackets",
        "measure/counter.py",
        (("    return change.width_s / 2\n", "    return 0.0\n"),),
        "a window's bound leaves out the brackets of its changes (every window passes)",
        ("tests/measure/test_counter.py",),
    ),
    Mutation(
        "counter-window-plain-difference",
        "measure/counter.py",
        (
            (
                "    aligned = aligned_energy(changes, t0, t1, period)\n    if aligned is not None:",
                "    aligned = None\n    if aligned is not None:",
            ),
        ),
        "a window's energy is the counter's plain difference over the window, not over whole updates",
        ("tests/measure/test_counter.py",),
    ),
    Mutation(
        "counter-change-before-window",
        "measure/counter.py",
        (
            (
                "    inside = [c for c in changes if c.before_s >= t0 and c.seen_s <= t1]",
                "    inside = [c for c in changes if c.seen_s <= t1]",
            ),
        ),
        "a change bracketed across the window's start counts as inside it",
        ("tests/measure/test_counter.py",),
    ),
    Mutation(
        "window-stops-before-its-bound",
        "measure/campaign.py",
        (("        return aligned is None or aligned.bound > campaign.energy_bound\n", "        return False\n"),),
        "a window stops after its planned chunks whether or not its changes bound its energy",
        ("tests/measure/test_counter.py",),
    ),
    Mutation(
        "bound-not-flagged",
        "measure/campaign.py",
        (
            (
                "bound > campaign.energy_bound:\n        energy_flag = bound_flag(",
                "bound > 1e9:\n        energy_flag = bound_flag(",
            ),
        ),
        "a row whose energy bound misses energy_bound is not flagged",
        ("tests/measure/test_visit.py", "tests/measure/test_counter.py"),
    ),
    # -- host and GPU apart (model/crossdevice/hostqueue.py, model/crossdevice/hosts.py, the transferred path) ---
    Mutation(
        "queue-gpu-never-waits-for-first-issue",
        "model/crossdevice/hostqueue.py",
        (("gpu = max(gpu + c * g, host + h + c * g, host + c * h + g)", "gpu = max(gpu + c * g, host + c * h + g)"),),
        "a run of GPU-bound calls starts before the host has issued the first one",
        ("tests/model/test_hostqueue.py",),
    ),
    Mutation(
        "queue-backward-at-forward-host-cost",
        "model/crossdevice/hostqueue.py",
        (("np.concatenate([host_fw, bw_host_factor * host_fw[::-1]])", "np.concatenate([host_fw, host_fw[::-1]])"),),
        "backward calls are issued at the forward's host cost whatever bw_host_factor says",
        ("tests/model/test_hostqueue.py", "tests/model/test_hosts.py"),
    ),
    Mutation(
        "transferred-host-ignores-in-network-share",
        "model/prediction/xdevice_predict.py",
        (('else float(comp.get("in_network", 1.0)))', "else 1.0)"),),
        "a transferred answer charges a profile's isolated-call costs, not the fitted in-network share",
        ("tests/model/test_hosts.py",),
    ),
    Mutation(
        "composites-costed-as-one-row",
        "model/crossdevice/xdevice_net.py",
        (('parts = rec.metrics.get("parts") if has_parts(rec.kind) else None', "parts = None"),),
        "Conv1D, attention and recurrent layers are costed as the one row their name resembles",
        ("tests/model/test_xdevice.py",),
    ),
    Mutation(
        "plateau-is-the-median",
        "model/crossdevice/hosts.py",
        (
            (
                "return _from_medians(name, groups, source, device_floor)",
                "return _from_medians(name, groups, source, np.median)",
            ),
        ),
        "a thesis host's per-call cost is its rows' median, not the plateau of its small calls",
        ("tests/model/test_hosts.py",),
    ),
    Mutation(
        "constant-power-follows-the-clock",
        "model/composition/compose.py",
        (('        k = self.energy_coef["time"]\n', '        k = self.energy_coef["time"] * 0.5\n'),),
        "the composition's constant power is not the static power it was fitted as",
        ("tests/test_intervals_composition.py", "tests/model/test_power_limit.py"),
    ),
    # -- round 44: a new GPU from one measured network (model/crossdevice/fewshot.py) ------------------------------
    Mutation(
        "fewshot-kind-factor-unshrunk",
        "model/crossdevice/fewshot.py",
        (("(len(rk) * float(np.median(rk)) + shrink * pooled) / (len(rk) + shrink)", "float(np.median(rk))"),),
        "a kind's factor is its raw median, not shrunk towards the pooled one",
        ("tests/model/test_fewshot.py", "tests/model/test_measured_ops.py"),
    ),
    Mutation(
        "fewshot-mean-not-median",
        "model/crossdevice/fewshot.py",
        (("pooled = float(np.median(r)) * len(r)", "pooled = float(np.mean(r)) * len(r)"),),
        "the pooled factor is a mean of log ratios: one outlier op moves every kind",
        ("tests/model/test_fewshot.py",),
    ),
    Mutation(
        "fewshot-own-ops-ignored",
        "model/crossdevice/fewshot.py",
        (("    out[hit] = own[hit]\n", ""),),
        "an op measured on the GPU does not take its measured time in another network",
        ("tests/model/test_fewshot.py",),
    ),
    Mutation(
        "fewshot-fold-sees-held-out-gpu",
        "model/crossdevice/xdevice_net.py",
        (('    train = nets[nets["gpu"] != gpu]\n', "    train = nets\n"),),
        "the few-shot fold's composition is fitted on the held-out GPU's networks too",
        ("tests/model/test_fewshot.py",),
    ),
    Mutation(
        "fewshot-factors-not-applied",
        "model/prediction/xdevice_predict.py",
        (("    if factors and len(rows):", "    if False:"),),
        "answers ignore the kind factors of the GPU's measured ops",
        ("tests/model/test_measured_ops.py",),
    ),
    Mutation(
        "shrink-weight-inverted",
        "model/crossdevice/fewshot.py",
        (
            (
                "return vb / (vb + vw / max(n, 1)) if vb > 0 else 0.0",
                "return vw / (vb + vw / max(n, 1)) if vb > 0 else 0.0",
            ),
        ),
        "the network scale's weight trusts scatter within a GPU, not its bias",
        ("tests/model/test_fewshot.py",),
    ),
    Mutation(
        "interval-slopes-may-narrow",
        "model/crossdevice/xinterval.py",
        (
            (
                "    bounds = [(None, None), (0, None), (0, None)]",
                "    bounds = [(None, None), (None, None), (None, None)]",
            ),
        ),
        "the interval law may narrow with distance or with the share outside matrix products",
        ("tests/model/test_xinterval.py",),
    ),
    Mutation(
        "interval-share-counts-gemm",
        "model/crossdevice/xinterval.py",
        (
            (
                "    return float(t[~np.isin(xk, GEMM_KINDS)].sum() / total)",
                "    return float(t[np.isin(xk, GEMM_KINDS)].sum() / total)",
            ),
        ),
        "the interval's share counts matrix products instead of the rest",
        ("tests/model/test_xinterval.py", "tests/model/test_xdevice.py"),
    ),
    Mutation(
        "power-level-ignored",
        "model/clocks/xpower.py",
        (('        level = float(self.levels.get(dev.name, {}).get("factor", 1.0))', "        level = 1.0"),),
        "answers on a GPU with measured networks ignore its power level",
        ("tests/model/test_xpower.py",),
    ),
    Mutation(
        "energy-fewshot-scores-its-own-networks",
        "model/crossdevice/fewshot.py",
        (
            (
                '            mine, others = d[d["model"] == m], d[d["model"] != m]',
                '            mine, others = d[d["model"] == m], d',
            ),
        ),
        "the energy few-shot table scores the measured model's own networks too",
        ("tests/model/test_fewshot.py", "tests/validate/test_validate_xdevice.py"),
    ),
    Mutation(
        "transferred-energy-from-source-coefficients",
        "model/composition/compose.py",
        (
            (
                '        if self.source == TRANSFERRED and terms.get("raw_sum_s", 0.0) > 0 and "raw_sum_j" in terms:',
                "        if False:",
            ),
        ),
        "a transferred layer's energy takes its source's a_e and k (the RTX 2080 Ti training at its 250 W limit)",
        ("tests/model/test_power_limit.py",),
    ),
    Mutation(
        "transferred-energy-ignores-power-ratio",
        "model/composition/compose.py",
        (
            (
                '            k = self.energy_coef.get(POWER_RATIO, 1.0) * terms["raw_sum_j"] / terms["raw_sum_s"]',
                '            k = terms["raw_sum_j"] / terms["raw_sum_s"]',
            ),
        ),
        "a transferred layer's power leaves out its sources' network-over-ops power ratio",
        ("tests/model/test_power_limit.py",),
    ),
    Mutation(
        "matmul-check-on-tensor-peak",
        "model/clocks/xpower.py",
        (
            (
                "        u = 2 * n**3 * k / dev.fp32_flops / sec",
                "        u = 2 * n**3 * k / (dev.tf32_flops or dev.fp32_flops) / sec",
            ),
        ),
        "the matmul check's busy share is taken over the TF32 peak its fp32 matmuls never use",
        ("tests/model/test_xpower.py",),
    ),
    Mutation(
        "big-cards-boundary",
        "stages/train_clock.py",
        (('("over_300w", off["tdp"] > BIG_CARD_W)', '("over_300w", off["tdp"] >= BIG_CARD_W)'),),
        "a 300 W card counts as big",
        ("tests/stages/test_power_by_card_size.py",),
    ),
    # -- issue 39: what a user meets ---------------------------------------------------------------
    Mutation(
        "interval-scale-extrapolated",
        "model/composition/intervals.py",
        (
            (
                "s = float(scale_of(min(abs(float(covariate)), self.span), self.ratio))",
                "s = float(scale_of(covariate, self.ratio))",
            ),
        ),
        "the interval's scale model is read beyond the covariates it was fitted on (0.0015-92 ms for one Linear)",
        ("tests/model/test_hetero_intervals.py", "tests/model/test_overhead_interval.py"),
    ),
    Mutation(
        "training-busy-share-forward-only",
        "model/prediction/xdevice_predict.py",
        (("u = busy_share(r, device_config, xpower.work_factor(mode))", "u = busy_share(r, device_config, 1.0)"),),
        "a transferred training step's busy share counts the forward pass only (less power than inference)",
        ("tests/model/test_xpower.py",),
    ),
    Mutation(
        "fitted-gpu-called-transferred",
        "model/prediction/xdevice_predict.py",
        (
            (
                "sources=[MEASURED if h else FITTED if in_sample else TRANSFERRED for h in hit],",
                "sources=[MEASURED if h else TRANSFERRED for h in hit],",
            ),
        ),
        "a GPU whose ops the cross-device model was trained on is labelled transferred",
        ("tests/model/test_xdevice.py",),
    ),
    Mutation(
        "boost-clock-transferred",
        "model/prediction/answer.py",
        (
            (
                "at_default = clock is not None and not bundle.clocks_mhz and float(clock) == ref",
                "at_default = False",
            ),
        ),
        "an own bundle's boost clock (its measurements' default) is answered as a transferred clock",
        ("tests/model/test_boost_clock_source.py",),
    ),
    Mutation(
        "every-tie-not-said-once",
        "model/prediction/recommend.py",
        (
            (
                "return [o for o, col in TIE_COLUMNS.items() if col in df and bool(df[col].astype(bool).all())]",
                "return []",
            ),
        ),
        "a tie of every setting is marked on each row instead of said once",
        ("tests/model/test_recommend_table.py",),
    ),
    Mutation(
        "mistyped-store-created",
        "model/store/registry.py",
        (("    if db.is_file() and db.stat().st_size > 0:\n        return\n", "    return\n"),),
        "a store URI naming no store is opened (MLflow creates a new, empty one)",
        ("tests/model/test_registry_folder_models.py",),
    ),
    Mutation(
        "no-closest-device",
        "errors.py",
        (
            (
                "return [by_low[m] for m in difflib.get_close_matches(str(name).lower(), list(by_low), n=n, cutoff="
                "0.5)]",
                "return []",
            ),
        ),
        "an unknown name's error names no closest match",
        ("tests/test_ux_lines.py",),
    ),
    Mutation(
        "clock-optima-boost-source",
        "validate/clocks.py",
        (
            (
                '"clock_source": optima_source(e["clock_source"], d["clock_source"]),',
                '"clock_source": ref["clock_source"],',
            ),
        ),
        "a clock optimum below an own bundle's boost clock is labelled measured (the boost row's source)",
        ("tests/validate/test_validate.py",),
    ),
)


def _failed(output: str) -> list[str]:
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.M)


def apply(m: Mutation, src: Path) -> str | None:
    """Apply `m` to the copy under `src`; the reason it cannot be applied, else None."""
    path = src / "opcost" / m.file
    if not path.exists():
        return f"{m.file} does not exist"
    text = path.read_text()
    for old, new in m.edits:
        n = text.count(old)
        if n != 1:
            return f"old text found {n} times in {m.file} (expected exactly once): {old!r}"
        text = text.replace(old, new)
    path.write_text(text)
    return None


def run_one(m: Mutation, full: bool, timeout_s: float) -> dict:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opcost-mutant-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        reason = apply(m, src)
        if reason:
            return {"status": "not-applied", "reason": reason, "seconds": 0.0}
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
        tests = ["-m", "not slow"] if full else list(m.tests)
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE", *tests]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "seconds": round(time.monotonic() - start, 1), "tests": tests}
    out = proc.stdout + proc.stderr
    failed = _failed(out)
    status = "killed" if proc.returncode != 0 else "survived"
    if proc.returncode not in (0, 1):  # collection errors, interrupted runs: killed, but say how
        status = "killed" if failed else f"error (pytest exit {proc.returncode})"
    result = {"status": status, "killed_by": failed[:3], "seconds": round(time.monotonic() - start, 1),
              "tests": tests}  # fmt: skip
    if status.startswith("error"):
        result["output_tail"] = out[-2000:]
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help='run the fast suite (-m "not slow") on every mutant')
    ap.add_argument("--only", default="", help="comma-separated mutation ids")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.id in args.only.split(",")]
    if args.list:
        for m in chosen:
            print(f"{m.id:40s} {m.file:22s} {m.description}")
        return 0
    unknown = set(filter(None, args.only.split(","))) - {m.id for m in MUTATIONS}
    if unknown:
        print(f"unknown mutation id(s): {', '.join(sorted(unknown))}; see --list", file=sys.stderr)
        return 2
    rows = []
    for m in chosen:
        r = run_one(m, args.full, args.timeout)
        rows.append({"id": m.id, "file": f"src/opcost/{m.file}", "description": m.description, **r})
        line = f"{r['status']:12s} {m.id:40s} {r['seconds']:7.1f} s  " + " ".join(r.get("killed_by", []))
        if r["status"] == "not-applied":
            line += f"\n    !!! NOT APPLIED: {r['reason']}  -> update the entry in bench/mutate.py"
        print(line, flush=True)
    survived = [r["id"] for r in rows if r["status"] != "killed"]
    report = {"mode": "full" if args.full else "per-mutation test files", "mutations": rows,
              "killed": len(rows) - len(survived), "total": len(rows), "not_killed": survived}  # fmt: skip
    if not args.only:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {REPORT.relative_to(ROOT)}")
    print(f"{report['killed']}/{report['total']} killed" + (f"; NOT killed: {', '.join(survived)}" if survived else ""))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
