"""Mutation check by a tool (mutmut) over the answer path's functions: every mutant it makes, not a hand list.

    /work/main/.venv/bin/pip install mutmut==3.8.1        # once; a dev tool (pyproject's `dev` extra)
    nice -n 10 python bench/mutation_answer.py            # every mutant of FUNCTIONS
    nice -n 10 python bench/mutation_answer.py --sample 200 --seed 0   # a seeded subset, said so in the report
    python bench/mutation_answer.py --report-only         # rewrite the report from the last run's results

bench/mutate.py plants 103 chosen wrong changes; this runs mutmut's own operators (numbers, comparisons,
arithmetic, arguments, strings) over the functions that carry a value from the op costs to the answer: the
composition's terms and layer, the interval's scaling and widening, the costing at clocks, the assembly, the
clock transfer and the transferred GPU's clock, energy and interval. The working tree is never edited: src/,
tests/ and pyproject.toml are copied to a scratch project (SCRATCH) with a [tool.mutmut] section, and mutmut
runs there, each mutant against the tests of TESTS that reach its function (mutmut's coverage stats).

Writes reports/bench/mutation_answer.json: tool, version, modules and functions, counts by status, and every
survivor with its file, line, the mutated line and why it is not a wrong value (EXPLAINED, `explain`), or
"unexplained". Exit status 1 if any survivor is unexplained.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "mutation_answer.json"
SCRATCH = Path("/tmp/opcost-mutation-answer")  # the scratch project mutmut runs in (recreated each run)

# The one list of mutated modules and, per module, the answer-path functions mutated ("Class.method" for a
# method). A module moved to a sub-package: change its dotted name here, nothing else.
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "opcost.model.composition.compose": (
        "network_terms", "l2_share", "transfer", "Composition.time", "Composition.energy",
        "Composition.family_term", "Composition.question", "Composition.covariates_for",
        "Composition._log_interval", "Composition.log_interval", "Composition.interval",
    ),
    "opcost.model.composition.intervals": (
        "LogInterval.widened", "LogInterval.scaled", "LogInterval.outside", "LogInterval.bounds", "scale_of",
        "question_covariate", "log_errors",
    ),
    "opcost.model.composition.costing": ("reference_clock_mhz",),
    "opcost.model.prediction.predict": ("cost_groups",),
    "opcost.model.prediction.answer": ("assemble",),
    "opcost.model.prediction.clocktransfer": (
        "roofline_shares", "widen", "ClockTransfer.costs", "ClockTransfer.errors",
    ),
    "opcost.model.crossdevice.xinterval": ("other_share", "halfwidth"),
    "opcost.model.prediction.xdevice_predict": ("at_clock", "energy", "busy_share"),
    "opcost.model.clocks.xpower": (
        "work_factor", "PowerModel.level", "PowerModel.power_from_level", "PowerModel.predict",
    ),
}  # fmt: skip
# The tests mutmut may run (each mutant gets those of them that reach its function); fast ones only.
TESTS = (
    "tests/model/test_answer_properties.py",
    "tests/test_intervals_composition.py",
    "tests/model/test_intervals.py",
    "tests/model/test_hetero_intervals.py",
    "tests/model/test_xinterval.py",
    "tests/model/test_xpower.py",
    "tests/model/test_transfer_evidence.py",
)
# mutmut's exit codes (mutmut.stats.status_by_exit_code); a timeout counts as detected, as mutmut counts it
STATUS = {1: "killed", 3: "killed", 0: "survived", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout",
          255: "timeout", 33: "no tests", 5: "no tests", 34: "skipped", 37: "killed"}  # fmt: skip

# Survivors that are not a wrong value, each explained: (function, text of the mutated line, why). Keyed on the
# function and the mutated text, not on mutmut's numbering, so that the explanations survive a module's move.
EXPLAINED: tuple[tuple[str, str, str], ...] = (
    (
        "assemble",
        "if comp.note(None, family):",
        "equivalent: the note's truthiness does not depend on the target "
        "(every part it joins is a non-empty sentence); the note appended is built with the target",
    ),
    (
        "assemble",
        '"XXno power model for this device (time-only measurements)XX"',
        "note text: the sentence is "
        "checked as a substring of the note (test_the_assembled_answer_...), which XX around it keeps",
    ),
    (
        "assemble",
        'comp.interval(energy, "XXenergyXX"',
        'equivalent: Composition reads any `which` but "time" '
        "as energy (its score set and widening keys), and the transferred widening's .get falls back to 1 only for "
        "a key it lacks: killed where a transferred layer's energy widening differs (test_a_transferred_layer_...)",
    ),
    (
        "assemble",
        'comp.interval(energy, "ENERGY"',
        'equivalent: as "XXenergyXX" (any `which` but "time" reads as energy)',
    ),
    (
        "assemble",
        "costs = Costs(t, p, None,",
        "equivalent: the Costs built here feeds network_terms (which reads t_s "
        "and p_w) and the answer's proxies; its source list is never read (the answer takes `sources` directly)",
    ),
    ("assemble", "ValueError(", "error message text: the refusal itself is kept; its wording is not a value"),
    ("predict", "OpcostError(f\"mode {mode!r} is not one of {'XX, XX'", "error message text (the list's separator)"),
    (
        "Composition._log_interval",
        "covariate: float = 1.0",
        "equivalent: every caller that reads the bounds passes "
        "the question's covariate; those that do not (covariate_warning, interval_note) read span, n, groups and "
        "rule, which scaling leaves alone",
    ),
    ("Composition.covariates_for", 'which: str = "XXtimeXX"', "equivalent: every caller passes `which`"),
    (
        "Composition.energy",
        'terms.get("raw_sum_s", 1.0) > 0',
        "equivalent: every terms dict comes from network_terms, which always sets raw_sum_s",
    ),
    ("Composition.energy", "capped_energy(1.0, k, 0.0,", "equivalent: a_e x S_e with S_e = 0"),
    ("Composition.energy", "capped_energy(0.0, k, 1.0,", "equivalent: a_e x S_e with a_e = 0"),
    ("transfer", "mode, tc, ec, n_networks=0,", "equivalent: calibrated=False is Composition's default"),
    ("transfer", "mode, tc, ec, calibrated=False, source=", "equivalent: n_networks=0 is Composition's default"),
    ("scale_of", "and False else s", "equivalent: returns the same value as a numpy scalar instead of a float"),
    ("scale_of", "if ratio < 0:", "equivalent: at ratio 0 the formula gives sqrt(1 + 0 c^2) = 1, the same ones"),
    (
        "l2_share",
        "if not l2_bytes >= 0:",
        "equivalent: with no L2 known (0) the formula gives min(1, 0 / bytes read) = 0 for every op, the zeros "
        "returned; no table entry has a negative L2",
    ),
    (
        "at_clock",
        "if en is not None or p is not None:",
        "equivalent: p is None exactly when en is None (the branch above sets both or neither)",
    ),
    (
        "energy",
        "pm.predict(dev.name, np.array([u]), None, )",
        "equivalent: PowerModel.predict reads `mode` only to check it; a training step's work enters through "
        "busy_share",
    ),
    (
        "assemble",
        "if comp.note(bundle.target, None):",
        "equivalent: the condition only; a note without the family holds the same parts but the family's, and "
        'that part is a sentence either way ("unknown family" where the layer has family terms, none where it has '
        "none), so both are empty or neither; the note appended is built with the family",
    ),
    (
        "Composition.time",
        "terms.get(k, 1.0)",
        "equivalent: every terms dict comes from network_terms, which sets all six TIME_TERMS",
    ),
    (
        "Composition.time",
        "self.family_term(family, )",
        'equivalent: family_term\'s `which` defaults to "time", the argument the line passes',
    ),
    (
        "at_clock",
        'float("NAN")',
        'equivalent: float() reads "nan" in any case',
    ),
    (
        "at_clock",
        "(float(en.energy_j) or 2.0)",
        "equivalent: energy_j is 0 only where the power or the time is 0, and then its interval's bounds (the time's "
        "bounds, which scale with it, x the power) are 0 too: ke multiplies zeros",
    ),
    (
        "l2_share",
        'r.metrics.get("bytes_read", 1.0)',
        "equivalent: an op without bytes_read reads 0 or 1 byte, and np.maximum(read, 1.0) makes both 1",
    ),
    ("l2_share", "if not l2_bytes > 1:", "equivalent: no L2 lies between 0 and 1 byte (0: none known)"),
    (
        "l2_share",
        "np.maximum(read, 2.0)",
        "equivalent: differs only for an op reading under 2 bytes, where any L2 of 2 bytes or more gives min(1, "
        "...) = 1 either way",
    ),
    ("network_terms", "np.nan_to_num(costs.p_w, )", "equivalent: numpy's nan_to_num replaces NaN by 0.0 by default"),
    ("Composition.covariates_for", 'which: str = "TIME"', "equivalent: every caller passes `which`"),
    (
        "scale_of",
        "(np.ndim(covariate) == 0) and False else np.ones",
        "equivalent: a scalar covariate gets np.ones(()), a 0-d array of 1.0, for 1.0",
    ),
    (
        "LogInterval.scaled",
        "(s == 1.0) and False else replace",
        "equivalent: at s = 1 the replaced interval's bounds are lo x 1 and hi x 1, the same values",
    ),
    (
        "assemble",
        "notes.append(comp.note(None, family))",
        "note text: the target's name appears only in the sentence of a transferred layer",
    ),
    (
        "assemble",
        "if clock is not None and clocks is not None or clock_source == TRANSFERRED:",
        "equivalent: clock_source is TRANSFERRED only with a clock, and without `clocks` the line above refuses it",
    ),
    (
        "assemble",
        "transfer_device(bundle.device, None)",
        "error message text: the name is read only in the refusal of a device the table lacks",
    ),
    ("assemble", 'note="XX; XX".join(', "note text: the separator between the note's sentences"),
    (
        "assemble",
        "Composition(None)",
        "equivalent: a default layer's mode is read only by to_json, and an answer never serialises its layer",
    ),
    (
        "roofline_shares",
        "dtype=None,",
        "equivalent: the values are Python floats, so numpy infers float64 (the dtype given)",
    ),
    (
        "busy_share",
        "work: float = 2.0",
        "equivalent for answers: the one caller in src (energy) passes the mode's work factor",
    ),
    ("energy", "XXagainst the model", "note text: the derivation sentence of the energy"),
    ("energy", "AGAINST THE MODEL", "note text: the derivation sentence of the energy"),
    (
        "energy",
        "float(pm.level(None))",
        "note text: the dynamic share the sentence prints; the energy itself comes from pm.predict",
    ),
    ("energy", "{'XX, XX'.join(pm.trained_on)", "note text: the separator of the GPU list in the sentence"),
)
# function -> the test of tests/model/test_answer_properties.py that kills what the first draw let through there
T = "tests/model/test_answer_properties.py::"
KILLED_BY = {
    "assemble": T
    + "test_the_assembled_answer_is_the_reference_composition_and_its_scaled_interval, "
    + T
    + "test_a_batch_outside_the_measured_ones_widens_the_interval_and_says_so_once, "
    + T
    + "test_an_own_answer_at_a_transferred_clock_widens_by_the_clock_models_error_there",
    "roofline_shares": T + "test_the_clock_transfer_moves_each_op_by_its_roofline_share",
    "ClockTransfer.costs": T + "test_the_clock_transfer_moves_each_op_by_its_roofline_share",
    "transfer": T + "test_a_transferred_layer_is_its_sources_mean_in_this_devices_units",
    "Composition._log_interval": T
    + "test_the_assembled_answer_is_the_reference_composition_and_its_scaled_interval"
    + " (time and energy covariates apart), "
    + T
    + "test_intervals_contain_their_unwidened_selves_and_widen_about_"
    "the_centre (a NaN covariate)",
    "Composition.covariates_for": T + "test_the_assembled_answer_is_the_reference_composition_and_its_scaled_interval",
    "Composition.energy": T + "test_a_transferred_layer_is_its_sources_mean_in_this_devices_units (family term)",
    "Composition.family_term": T + "test_composed_time_is_the_coefficients_on_the_reference_sums",
    "Composition.interval": T + "test_intervals_contain_their_unwidened_selves_and_widen_about_the_centre",
    "cost_groups": T + "test_cost_groups_moves_only_clocks_off_the_boost_and_shares_their_reference_costs",
    "log_errors": T + "test_scaling_and_log_errors_at_their_edges",
    "LogInterval.outside": T + "test_scaling_and_log_errors_at_their_edges",
    "LogInterval.scaled": T + "test_scaling_and_log_errors_at_their_edges",
    "at_clock": T
    + "test_a_transferred_gpu_at_another_clock_moves_as_its_ops_do, "
    + T
    + "test_a_gpu_outside_the_table_and_a_zero_time_answer",
    "busy_share": T + "test_a_gpu_outside_the_table_and_a_zero_time_answer",
    "energy": T + "test_transferred_energy_is_time_times_the_power_models_power",
    "halfwidth": T + "test_a_transferred_interval_widens_with_distance_and_non_matrix_time",
    "PowerModel.predict": "tests/model/test_xpower.py::test_interface_for_the_cross_device_time_model",
    "PowerModel.level": T + "test_the_power_level_is_clipped_to_its_range_at_both_ends",
    "Composition.log_interval": T
    + "test_an_interval_asked_without_a_covariate_and_a_transferred_layer_without_a_factor",
    "reference_clock_mhz": T + "test_the_reference_clock_is_the_boost_clock_and_none_for_a_device_the_table_lacks",
}
# a dtype argument, given, None or dropped
DTYPE = re.compile(r",\s*(dtype=)?(float|np\.float64|bool|object|None)?\s*\)")


def explain(fn: str, original: str, mutated: str) -> str:
    """Why a survivor is not a wrong value (EXPLAINED, or a dtype the inputs already have), else "unexplained"."""
    for f, text, why in EXPLAINED:
        if fn.endswith(f) and text in mutated:
            return why
    dropped = original.strip().startswith("dtype=") and "dtype" not in mutated  # a keyword on its own line
    if dropped or (original != mutated and DTYPE.sub(")", original) == DTYPE.sub(")", mutated)):
        return (
            "equivalent: only a dtype argument changed (dropped or None); the inputs are already arrays or "
            "lists of that dtype (floats, bools, strings), so numpy infers the same"
        )
    return "unexplained"


def mutant_glob(module: str, function: str) -> str:
    """mutmut's name pattern for the mutants of `function` ("f" or "Class.f") in `module`."""
    if "." in function:
        cls, meth = function.split(".")
        return f"{module}.x\u01c1{cls}\u01c1{meth}__mutmut_*"
    return f"{module}.x_{function}__mutmut_*"


def module_path(module: str) -> str:
    return "src/" + module.replace(".", "/") + ".py"


def make_scratch() -> None:
    """src/, tests/ and pyproject.toml (with a [tool.mutmut] section) in SCRATCH, nothing else."""
    if SCRATCH.exists():
        shutil.rmtree(SCRATCH)
    SCRATCH.mkdir(parents=True)
    shutil.copytree(ROOT / "src", SCRATCH / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", SCRATCH / "tests", ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    conf = {
        "source_paths": ["src/"],
        "only_mutate": [module_path(m) for m in FUNCTIONS],
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "no:xdist", "-m", "not slow", "-q"],
        "pytest_add_cli_args_test_selection": list(TESTS),
        "timeout_multiplier": 10.0,
    }
    lines = ["[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in conf.items()]
    text = (ROOT / "pyproject.toml").read_text() + "\n" + "\n".join(lines) + "\n"
    (SCRATCH / "pyproject.toml").write_text(text)


def mutmut(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}  # mutmut puts mutants/src first
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=SCRATCH, env=env, check=check,
                          capture_output=True, text=True)  # fmt: skip


def all_results() -> dict[str, int | None]:
    """Mutant name -> mutmut's exit code (None: not run), from its .meta files in SCRATCH/mutants/."""
    out: dict[str, int | None] = {}
    for meta in (SCRATCH / "mutants").rglob("*.py.meta"):
        out.update(json.loads(meta.read_text()).get("exit_code_by_key", {}))
    return out


def selected(names: list[str]) -> list[str]:
    """The mutants of FUNCTIONS among `names`."""
    pats = [re.compile(re.escape(mutant_glob(m, f)).replace(r"\*", ".*") + "$") for m, fs in FUNCTIONS.items()
            for f in fs]  # fmt: skip
    return sorted(n for n in names if any(p.match(n) for p in pats))


def function_lines(module: str) -> dict[str, int]:
    """'f' / 'Class.f' -> its def line in the working tree's source."""
    tree = ast.parse((ROOT / module_path(module)).read_text())
    out: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            out.update({f"{node.name}.{n.name}": n.lineno for n in node.body if isinstance(n, ast.FunctionDef)})
    return out


def where(name: str) -> dict[str, object]:
    """File, line and mutated text of a mutant, from `mutmut show`'s diff of its function."""
    module, key = name.rsplit(".", 1)
    fn = key.split("__mutmut_")[0]
    fn = fn[2:] if fn.startswith("x_") else fn[1:].replace("\u01c1", ".").strip(".")
    diff = mutmut("show", name, check=False).stdout.splitlines()
    start = function_lines(module).get(fn, 0)
    line, old, new, at, offset = None, [], [], None, 0
    for d in diff:  # the first changed line's number; every removed and added line's text (a change may span two)
        if d.startswith("@@"):
            at = int(re.match(r"@@ -(\d+)", d).group(1))  # type: ignore[union-attr]
        elif at is not None and d.startswith("-") and not d.startswith("---"):
            line = line or start + at - 1 + offset
            old.append(d[1:].strip())
        elif at is not None and d.startswith("+") and not d.startswith("+++"):
            new.append(d[1:].strip())
        elif at is not None and not old:
            offset += 1
    return {"file": module_path(module), "function": fn, "line": line, "original": " ".join(old),
            "mutated": " ".join(new)}  # fmt: skip


def report(names: list[str], results: dict[str, int | None], sample: dict | None, version: str) -> dict:
    counts: dict[str, int] = {}
    survivors = []
    for n in names:
        status = "not checked" if results.get(n) is None else STATUS.get(results[n], "suspicious")  # type: ignore[arg-type]
        counts[status] = counts.get(status, 0) + 1
        if status in ("survived", "suspicious", "no tests"):
            w = where(n)
            why = explain(str(w["function"]), str(w["original"]), str(w["mutated"]))
            survivors.append({"mutant": n, "status": status, **w, "explanation": why})
    earlier = json.loads(REPORT.read_text()) if REPORT.is_file() else {}
    before = {x["mutant"]: x for x in earlier.get("survivors", []) + earlier.get("killed_after_first_draw", [])}
    now_killed = [
        {"mutant": n, "file": before[n]["file"], "line": before[n]["line"], "mutated": before[n]["mutated"],
         "status": STATUS.get(results[n], "?"),  # type: ignore[arg-type]
         "killed_by": KILLED_BY.get(str(where(n)["function"]), "")}
        for n in names if n in before and results.get(n) is not None and STATUS.get(results[n]) in ("killed", "timeout")  # type: ignore[arg-type]
    ]  # fmt: skip
    return {
        "tool": "mutmut",
        "version": version,
        "command": "nice -n 10 python bench/mutation_answer.py" + (f" --sample {sample['n']} --seed {sample['seed']}"
                                                                  if sample else ""),
        "modules": {module_path(m): list(fs) for m, fs in FUNCTIONS.items()},
        "tests": list(TESTS),
        "sample": sample or "every mutant of the functions above",
        "mutants": len(names),
        "counts": counts,
        "unexplained": sum(s["explanation"] == "unexplained" for s in survivors),
        "timeout_note": "a timeout (the tests ran past mutmut's limit, 10x their clean time) counts as detected, "
        "as mutmut counts it",
        "survivors": survivors,
        "killed_after_first_draw": now_killed,
    }  # fmt: skip


def sampled(n: int, seed: int) -> tuple[list[str], dict | None]:
    """The mutants of FUNCTIONS mutmut made, or a seeded sample of `n` of them (the same names for the same
    mutants, seed and n: `--only` and `--report-only` report on the sample the run drew)."""
    every = selected(list(all_results()))
    if not n or n >= len(every):
        return every, None
    return sorted(random.Random(seed).sample(every, n)), {"n": n, "seed": seed, "of": len(every)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=0, help="run a seeded random subset of this many mutants")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite the report from SCRATCH's last run (with the run's --sample and --seed)",
    )
    ap.add_argument("--jobs", type=int, default=2, help="mutants run at once (mutmut --max-children)")
    ap.add_argument("--only", default="", help="comma-separated mutant names or globs to (re)run")
    a = ap.parse_args(argv)
    import mutmut as tool

    globs = [mutant_glob(m, f) for m, fs in FUNCTIONS.items() for f in fs]
    if not a.report_only and not a.only:
        make_scratch()
        if a.sample:  # mutmut makes every mutant (and its coverage stats) before it filters: names first
            mutmut("run", "--max-children", str(a.jobs), "no-such-mutant", check=False)
    names, sample = sampled(a.sample, a.seed)
    if a.sample and not a.only:
        globs = names
    if a.only:  # rerun some mutants of the last run against the working tree's tests as they are now
        if not SCRATCH.exists():
            make_scratch()
        shutil.rmtree(SCRATCH / "tests")
        shutil.copytree(ROOT / "tests", SCRATCH / "tests", ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
        globs = a.only.split(",")
    if not a.report_only:
        got = mutmut("run", "--max-children", str(a.jobs), *globs, check=False)
        (SCRATCH / "mutmut_run.log").write_text(got.stdout[-20000:] + got.stderr[-20000:])
    if not a.sample:  # every mutant: mutmut makes them in its run, so their names are known only after it
        names = selected(list(all_results()))
    out = report(names, all_results(), sample, tool.__version__)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("mutants", "counts", "unexplained")}))
    return 1 if out["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
