"""Interval rules compared: the rule of model/composition/intervals.py against the fallback it replaced, on synthetic
errors of known distribution (where the rule is chosen) and on the held-out networks of reports/train/networks/ (what it
does there, reported, never used to choose).

    PYTHONPATH=src python bench/interval_rules.py [--reps 2000]

Rules: `current` (model/composition/intervals.log_interval: conformal from 19 groups, the normal prediction interval on
group means below), `old` (conformal from 9 groups, below it the largest |score|, at least +-30 %), and for
G >= 9 the two candidates alone (`conformal`, `normal`). Synthetic errors log(predicted / measured) per held-out
group: bias 0.05 + a group effect (normal sd 0.1; Student t3 of the same scale; or a mixture where 10 % of
groups are off by -0.5, a missed family) + a network's own deviation (sd 0.04), 1-3 networks per group; the
fresh draw is a network of a new group. Heteroscedastic errors (`hetero`): two strata of covariate c = 0 and
0.5, log errors normal with sd 0.05 sqrt(1 + 36 c^2) (0.05 and 0.158), one score per group, half from each;
coverage of a fresh network per stratum, with the scores normalised by the fitted scale model
(`normalised`, model/composition/intervals.py) and without (`plain`). Real data: `netval.coverage` on each target's CSV,
every split, with each rule: `current` (normalised on the covariate log(predicted / op sum)), `plain` (the same
rule unnormalised, round 28's) and `old` (through a stand-in for compose.log_interval in this process only).
Writes reports/bench/interval_rules.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from opcost.model.composition import compose, intervals
from opcost.model.training import netval
from opcost.paths import Paths

ROOT = Path(__file__).resolve().parents[1]
Rule = Callable[[np.ndarray, np.ndarray], "tuple[float, float] | None"]


def old_rule(
    e: np.ndarray, level: float = intervals.INTERVAL_LEVEL, groups=None, covariates=None
) -> intervals.LogInterval:  # type: ignore[no-untyped-def]  # noqa: E501
    """The rule before round 28: conformal where it exists, else the largest |score|, at least +-30 %
    (covariates ignored: it had none)."""
    e = np.asarray(e, float)
    g = np.arange(len(e)).astype(str) if groups is None else np.asarray(groups, dtype=object).astype(str)
    ok = np.isfinite(e)
    e, g = e[ok], g[ok]
    q = intervals.conformal_q(e, level, g)
    rule = intervals.RULE_CONFORMAL
    if q is None:
        q, rule = max(float(np.abs(e).max()) if len(e) else 0.0, float(np.log1p(0.3))), intervals.RULE_FALLBACK
    return intervals.LogInterval(-q, q, len(e), len(set(g)), rule)


def _conformal(e: np.ndarray, g: np.ndarray) -> tuple[float, float] | None:
    q = intervals.conformal_q(e, groups=g)
    return None if q is None else (-q, q)


def _normal(e: np.ndarray, g: np.ndarray) -> tuple[float, float] | None:
    got = intervals.normal_interval(e, groups=g)
    return None if got is None else (-got[0] - got[1], -got[0] + got[1])


RULES: dict[str, Rule] = {
    "current": lambda e, g: (lambda iv: (iv.lo, iv.hi))(intervals.log_interval(e, groups=g)),
    "old": lambda e, g: (lambda iv: (iv.lo, iv.hi))(old_rule(e, groups=g)),
    "conformal": _conformal,
    "normal": _normal,
}


def _effects(kind: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if kind == "normal":
        return rng.normal(0.0, 0.1, n)
    if kind == "t3":
        return 0.1 / np.sqrt(3.0) * rng.standard_t(3, n)
    return np.where(rng.random(n) < 0.1, -0.5, 0.0) + rng.normal(0.0, 0.08, n)  # a missed family now and then


def synthetic(reps: int) -> list[dict]:
    out = []
    for kind in ("normal", "t3", "mixture"):
        for n_groups in (3, 4, 6, 8, 9, 12, 19, 30):
            rng = np.random.default_rng(n_groups)
            draws = []
            for _ in range(reps):
                n = rng.choice((1, 2, 3), n_groups)
                e = np.repeat(0.05 + _effects(kind, rng, n_groups), n) + rng.normal(0.0, 0.04, n.sum())
                g = np.repeat(np.arange(n_groups), n).astype(str)
                fresh = -(0.05 + _effects(kind, rng, 1)[0] + rng.normal(0.0, 0.04))
                draws.append((e, g, fresh))
            for name, rule in RULES.items():
                got = [(rule(e, g), x) for e, g, x in draws]
                if any(b is None for b, _ in got):
                    continue
                hit = [lo <= x <= hi for (lo, hi), x in got]
                width = [np.exp(hi) - np.exp(lo) for (lo, hi), _ in got]
                out.append({"errors": kind, "groups": n_groups, "rule": name, "coverage_pct": 100 * float(np.mean(hit)),
                            "median_width_pct": 100 * float(np.median(width)), "reps": reps})  # fmt: skip
    return out


def hetero(reps: int) -> list[dict]:
    out = []
    sd = {0.0: 0.05, 0.5: 0.05 * np.sqrt(1 + 36 * 0.25)}
    for n_groups in (6, 10, 18, 30):
        for name, normalise in (("normalised", True), ("plain", False)):
            rng = np.random.default_rng(100 + n_groups)
            hits: dict[float, list[bool]] = {x: [] for x in sd}
            widths: dict[float, list[float]] = {x: [] for x in sd}
            for _ in range(reps):
                c = np.resize([0.0, 0.5], n_groups)
                e = rng.normal(0.0, [sd[x] for x in c])
                iv = intervals.log_interval(e, covariates=c if normalise else None)
                for x in sd:
                    q = iv.scaled(x)
                    hits[x].append(q.contains(-rng.normal(0.0, sd[x])))
                    widths[x].append(float(np.exp(q.hi) - np.exp(q.lo)))
            for x in sd:
                out.append({"groups": n_groups, "rule": name, "covariate": x, "sd": float(sd[x]),
                            "coverage_pct": 100 * float(np.mean(hits[x])),
                            "median_width_pct": 100 * float(np.median(widths[x])), "reps": reps})  # fmt: skip
    return out


def real() -> list[dict]:
    out = []
    current = compose.log_interval
    for path in sorted((ROOT / "reports" / "train" / "networks").glob("*.csv")):
        df = pd.read_csv(path)
        if "split" not in df:  # a transferred target: no measured networks
            continue
        for name, rule, normalise in (("current", current, True), ("plain", current, False), ("old", old_rule, False)):
            compose.log_interval = rule  # type: ignore[assignment]  # this process only: netval's rule
            try:
                for split in netval.SPLITS:
                    got = netval.coverage(df[df["split"] == split], df, normalise=normalise)
                    for q in ("time", "energy"):
                        if q in got:
                            out.append({"target": path.stem, "split": split, "quantity": q, "rule": name, **got[q],
                                        "coverage_note": got["coverage_note"][q]})  # fmt: skip
            finally:
                compose.log_interval = current  # type: ignore[assignment]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args()
    res = {"synthetic": synthetic(args.reps), "hetero": hetero(args.reps), "real": real()}
    dest = Paths(ROOT).bench_report("interval_rules.json")
    dest.write_text(json.dumps(res, indent=1) + "\n")
    for r in res["synthetic"]:
        print(f"{r['errors']:8s} G={r['groups']:2d} {r['rule']:9s} {r['coverage_pct']:5.1f} % "
              f"({r['median_width_pct']:5.1f} %)")  # fmt: skip
    for r in res["hetero"]:
        print(f"hetero   G={r['groups']:2d} {r['rule']:10s} c={r['covariate']:.1f} {r['coverage_pct']:5.1f} % "
              f"({r['median_width_pct']:5.1f} %)")  # fmt: skip
    for r in res["real"]:
        print(f"{r['target']:22s} {r['split']:8s} {r['quantity']:6s} {r['rule']:8s} {r['coverage_pct']:5.1f} % "
              f"[{r['coverage_ci_lo_pct']:3.0f}-{r['coverage_ci_hi_pct']:3.0f}] by family "
              f"{r['family_weighted_coverage_pct']:5.1f} % ({r['median_width_pct']:5.1f} %)")  # fmt: skip
    print(f"wrote {dest.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
