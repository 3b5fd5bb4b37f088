"""Do stage outputs reproduce on another CPU? Reruns DVC stages, each in a scratch project that links the
stage's recorded inputs, under two CPU profiles, and compares every output with the checkout's (what
`dvc repro` wrote here):

- `native`: this machine as it is (same-machine determinism);
- `no-avx2`: OpenBLAS's Sandybridge kernels, and numpy's dispatch targets above its baseline switched off
  (NPY_DISABLE_CPU_FEATURES, numpy 2.4's names): other SIMD widths sum in another order, what an older or
  another vendor's CPU does. The stage modules now hold numpy at its baseline and OpenBLAS at one thread and
  one kernel set (opcost/numerics.py), over this profile's settings: under it a stage must be byte-identical,
  and `native` on a CPU other than the one that ran `dvc repro` is the check that counts.

An output reproduces when it is byte-identical; otherwise the report lists the numbers that differ and the
largest relative difference (JSON leaves and CSV cells; other files by bytes only). The stated tolerance
is TOLERANCE (relative): a stage passes when nothing differs by more. A content hash (a run record's
`bundle_hash` of the model file beside it, DERIVED) that differs is checked, not compared: it passes when it
is the hash of the rerun's own model file and that file is within tolerance.

    .venv/bin/python bench/repro_cpu.py [STAGE ...] [--profile NAME]   # default: STAGES, every profile;
                                                                       # run after `dvc repro`

Writes reports/bench/repro_cpu.json (issue 40: stage outputs were not reproducible across machines).
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import yaml

from benchreport import ROOT, save

STAGES = ("train-clock", "train@RTX2080Ti-training", "train-report")
PROFILES: dict[str, dict[str, str]] = {
    "native": {},
    "no-avx2": {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR", "OPENBLAS_CORETYPE": "Sandybridge"},
}
TOLERANCE = 1e-5  # one unit in the sixth significant digit, where reports round (io.REPORT_DIGITS)
SHOWN = 5  # differing values listed per file
WHERE_TAGS = ("/tags/training_commit", "/tags/training_dirty")  # run.json tags that say where, not what
# run.json tags that are the content hash (registry.json_hash) of the model file in the same folder
DERIVED = {"models/clock/run.json": "clock_model.json", "models/xpower/run.json": "xpower_model.json"}
HASH_AT = "/tags/bundle_hash"


def stage_record(name: str) -> dict[str, Any]:
    stages = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    if name not in stages:
        raise SystemExit(f"stage {name!r} is not in dvc.lock; known: {', '.join(sorted(stages))}")
    return stages[name]


def scratch(record: dict[str, Any], where: Path) -> None:
    """A project at `where` holding the checkout's dvc.yaml, params and the stage's data inputs as links (code
    comes from PYTHONPATH)."""
    for name in ("dvc.yaml", "params.yaml", "sets.yaml"):
        if (ROOT / name).is_file():
            (where / name).write_bytes((ROOT / name).read_bytes())
    for dep in record["deps"]:
        path = dep["path"]
        if path.startswith("src/"):
            continue
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).symlink_to(ROOT / path)


def files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.is_file())


def _numbers(obj: Any, at: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, f"{at}/{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, f"{at}[{i}]")
    else:
        yield at, obj


def _csv_cells(text: str) -> Iterator[tuple[str, Any]]:
    for i, row in enumerate(csv.reader(text.splitlines())):
        for j, cell in enumerate(row):
            yield f"r{i}c{j}", cell


def _rel(a: Any, b: Any) -> float | None:
    """Relative difference of two numbers (None: not both numbers; inf: differing non-numbers)."""
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return None if a == b else math.inf
    if x == y or (math.isnan(x) and math.isnan(y)):
        return 0.0
    return abs(x - y) / max(abs(x), abs(y), 1e-300)


def derived_hash(rel: str, rerun_root: Path, outs: dict[str, dict[str, Any]]) -> str | None:
    """Why a differing content hash of `rel` is explained (None: it is not): it is the hash of the rerun's own
    model file, and that file was judged within tolerance (or identical) against the checkout's."""
    from opcost.model.store.registry import json_hash

    model = str(Path(rel).parent / DERIVED[rel])
    if not (rerun_root / model).is_file():
        return None
    run = json.loads((rerun_root / rel).read_text())
    if run.get("tags", {}).get("bundle_hash") != json_hash(rerun_root / model):
        return None
    if outs.get(model, {}).get("status") not in ("identical", "within tolerance"):
        return None
    return f"the content hash of {model}, which is {outs[model]['status']}"


def explain_derived(rel: str, result: dict[str, Any], rerun_root: Path, outs: dict[str, dict[str, Any]]) -> None:
    """Judge the content hash `compare` left out of a run record: the record stays as judged where the hash
    is derived (`derived_hash`), and `differs` otherwise."""
    if not result.get("hash_differs"):
        return
    why = derived_hash(rel, rerun_root, outs)
    if why is None:
        result["status"] = "differs"
        result["derived"] = {HASH_AT: "not the hash of the rerun's model file, or that file differs"}
    else:
        result["derived"] = {HASH_AT: why}


def compare(rerun: Path, checkout: Path, derived: bool = False) -> dict[str, Any]:
    """One output file of the rerun against the checkout's. `derived`: a run record whose content hash is
    left out here (`hash_differs` says whether it differs) for `explain_derived` to judge."""
    if not rerun.is_file():
        return {"status": "missing in the rerun"}
    a, b = rerun.read_bytes(), checkout.read_bytes()
    if a == b:
        return {"status": "identical"}
    if rerun.suffix not in (".json", ".csv"):
        return {"status": "differs (bytes)"}
    if rerun.suffix == ".json":
        left, right = dict(_numbers(json.loads(a))), dict(_numbers(json.loads(b)))
        for side in (left, right):  # a run record names the commit that trained it: the scratch project has none
            for tag in WHERE_TAGS:
                side.pop(tag, None)
        hash_differs = derived and left.pop(HASH_AT, None) != right.pop(HASH_AT, None)
    else:
        left, right = dict(_csv_cells(a.decode())), dict(_csv_cells(b.decode()))
        hash_differs = False
    if left.keys() != right.keys():
        return {"status": "differs (structure)"}
    diffs = [(k, left[k], right[k], r) for k in left if (r := _rel(left[k], right[k]))]
    worst = max((d[3] for d in diffs), default=0.0)
    return {
        "status": "within tolerance" if worst <= TOLERANCE else "differs",
        **({"hash_differs": True} if hash_differs else {}),
        "n_values": len(left),
        "n_differ": len(diffs),
        "max_rel_diff": worst if math.isfinite(worst) else "a non-number differs",
        "examples": [{"at": k, "rerun": x, "checkout": y} for k, x, y, _ in sorted(diffs, key=lambda d: -d[3])[:SHOWN]],
    }


def rerun(name: str, profile: str) -> dict[str, Any]:
    record = stage_record(name)
    with tempfile.TemporaryDirectory(prefix="opcost-repro-") as tmp:
        where = Path(tmp)
        scratch(record, where)
        env = {k: v for k, v in os.environ.items() if k not in ("OPCOST_ROOT", "DVC_ROOT", "MLFLOW_TRACKING_URI")}
        env.update(PROFILES[profile], PYTHONPATH=str(ROOT / "src"), MLFLOW_TRACKING_URI=f"sqlite:///{where / 'm.db'}")
        env.update(MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true", DVC_NO_ANALYTICS="1")
        cmd = record["cmd"].split()
        cmd[0] = sys.executable if cmd[0].startswith("python") else cmd[0]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            return {"rc": p.returncode, "stderr_tail": p.stderr[-1500:], "wall_s": wall}
        outs: dict[str, Any] = {}
        for out in record["outs"]:
            for f in files(ROOT / out["path"]):
                rel = f.relative_to(ROOT)
                outs[str(rel)] = compare(where / rel, f, derived=str(rel) in DERIVED)
        for rel, result in outs.items():
            explain_derived(rel, result, where, outs)
    statuses = [o["status"] for o in outs.values()]
    return {
        "rc": 0,
        "wall_s": wall,
        "n_files": len(outs),
        "identical": statuses.count("identical"),
        "within_tolerance": statuses.count("within tolerance"),
        "passes": all(s in ("identical", "within tolerance") for s in statuses),
        "files": {k: v for k, v in outs.items() if v["status"] != "identical"},
    }


def main(argv: list[str]) -> int:
    profiles = list(PROFILES)
    if "--profile" in argv:  # one profile only: `--profile no-avx2`
        i = argv.index("--profile")
        profiles, argv = [argv[i + 1]], argv[:i] + argv[i + 2 :]
        if profiles[0] not in PROFILES:
            raise SystemExit(f"--profile {profiles[0]!r}: known profiles are {', '.join(PROFILES)}")
    stages = argv or list(STAGES)
    report: dict[str, Any] = {"tolerance_rel": TOLERANCE, "profiles": {p: PROFILES[p] for p in profiles}, "stages": {}}
    for name in stages:
        report["stages"][name] = {}
        for profile in profiles:
            print(f"{name} [{profile}] ...", flush=True)
            r = rerun(name, profile)
            report["stages"][name][profile] = r
            print(f"  rc {r['rc']}, {r.get('identical', 0)}/{r.get('n_files', 0)} identical, passes {r.get('passes')}")
    report["passes"] = all(r.get("passes") for s in report["stages"].values() for r in s.values())
    return save(report, "repro_cpu.json")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
