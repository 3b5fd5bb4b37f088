"""Fuzz the ingest parsers with corrupted copies of the real external files.

    PYTHONPATH=src python bench/fuzz_ingest.py --inputs 3000 --seed 0

Each input is an excerpt of a real file from data/external/ (a thesis log, or a sweep CSV of any
ingest kind: Zeus, dvfs-conv, the cross-clock sources) with one to three mutations: byte flips,
truncation, deleted or duplicated tokens, huge numbers, nan/inf, zero and negative numbers, random
unicode (also undecodable bytes), CRLF and stray CR, NUL bytes, swapped columns or tokens, deleted,
duplicated or swapped lines; and, for some inputs, whole-file damage (empty, binary, a directory in
place of the file, header only, a header column renamed). The real parser runs on it and the input
is classified:

- parsed: the parser returned; its rows are checked against the table's schema and every line is
  accounted for (taken, rejected with a reason, or skipped as a non-data kind).
- clean_file_error: a one-line OpcostError, for whole-file damage or a damaged CSV header: expected.
- aborted_on_a_line: an OpcostError although only lines were damaged: one line stopped the source.
- crash: any other exception (a traceback); hang: over --timeout seconds.

Writes reports/bench/fuzz_ingest.json (counts per outcome, target and mutation; the rows accepted
that break the schema; lines not accounted for; the first crashing inputs to reproduce them).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from opcost.data import thesis
from opcost.data.ingest import SWEEP_READERS
from opcost.data.textfile import read_lines
from opcost.errors import OpcostError, SchemaError
from opcost.io import write_json
from opcost.paths import Paths, find_root
from opcost.progress import progress_bar
from opcost.schemas import NET_MEASUREMENTS, OP_MEASUREMENTS, SWEEPS, Table, conform

# --------------------------------------------------------------------------------------------
# What is fuzzed: excerpts of real files, parsed by the real parsers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    files: list[Path]  # real files to take excerpts from
    csv: bool  # a CSV: the first line is a header kept in every excerpt
    run: Callable[[Path, str], "Result"]  # (file written in a temp folder, file name) -> result


@dataclass
class Result:
    rows: list[dict[str, Any]]
    table: Table
    rejected: int
    accounted: int  # lines taken + rejected + skipped


def _thesis_ops(mode: str, cache: dict) -> Callable[[Path, str], Result]:
    def run(path: Path, name: str) -> Result:
        res = thesis.parse_op_log(path, name, "fuzz", mode, cache)
        return Result(
            res.rows, OP_MEASUREMENTS, len(res.rejects), res.parsed + len(res.rejects) + sum(res.skipped.values())
        )

    return run


def _thesis_nets(mode: str) -> Callable[[Path, str], Result]:
    def run(path: Path, name: str) -> Result:
        res = thesis.parse_network_log(path, name, "fuzz", mode)
        return Result(
            res.rows, NET_MEASUREMENTS, len(res.rejects), res.parsed + len(res.rejects) + sum(res.skipped.values())
        )

    return run


def _sweep(kind: str) -> Callable[[Path, str], Result]:
    def run(path: Path, name: str) -> Result:
        out = SWEEP_READERS[kind](path.parent, "fuzz")
        taken = sum(f["lines_taken"] for f in out.files.values())
        return Result(out.rows, SWEEPS, len(out.rejects), 1 + taken + len(out.rejects) + sum(out.skipped.values()))

    return run


def targets(external: Path, cache: dict) -> list[Target]:
    th = external / "nicolai-thesis"
    found = [
        Target(
            "thesis-ops-inference",
            sorted((th / "ops" / "inference").glob("*.log")),
            False,
            _thesis_ops("inference", cache),
        ),
        Target(
            "thesis-ops-training",
            sorted((th / "ops" / "training").glob("*.log")),
            False,
            _thesis_ops("training", cache),
        ),
        Target(
            "thesis-models-inference",
            sorted((th / "models" / "inference").glob("*.log")),
            False,
            _thesis_nets("inference"),
        ),
        Target(
            "thesis-models-training",
            sorted((th / "models" / "training").glob("*.log")),
            False,
            _thesis_nets("training"),
        ),
    ]
    folders = {
        "zeus-power-limit": "zeus-power-limit",
        "dvfs-conv": "dvfs-conv",
        "perseus-stage-profiles": "perseus-stage-profiles",
        "perseus-power-limit": "perseus-power-limit",
        "nv-dvfs-kernels": "nv-dvfs-kernels",
        "gpu-frequency-dvfs": "gpu-frequency-dvfs",
    }
    for kind, folder in folders.items():
        files = sorted((external / folder).glob("*.csv"))
        if files:
            found.append(Target(kind, files, True, _sweep(kind)))
    missing = [t.name for t in found if not t.files]
    if missing:
        raise OpcostError(f"no real files for {', '.join(missing)} under {external}: run `dvc pull`")
    return found


# --------------------------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------------------------

HUGE = [b"1e308", b"1e309", b"-1e308", b"99999999999999999999999999", b"1" * 400, b"4294967296"]
NONFINITE = [b"nan", b"NaN", b"inf", b"-inf", b"Infinity", b"1e999", b"-nan"]
UNICODE = ["\u2028", "\u202e", "\u00a0", "\ufeff", "\u0301", "\uff11", "\u0661", "\U0001f600", "\x85", "\x0c", "é"]


def _tokens(line: bytes) -> list[bytes]:
    return line.split(b",") if b"," in line else line.split(b" ")


def _join(line: bytes, toks: list[bytes]) -> bytes:
    return (b"," if b"," in line else b" ").join(toks)


def _number_positions(toks: list[bytes]) -> list[int]:
    out = []
    for i, t in enumerate(toks):
        try:
            float(t.strip(b"()\r"))
            out.append(i)
        except ValueError:
            pass
    return out


def m_byte_flip(line: bytes, rng: random.Random) -> bytes:
    b = bytearray(line or b" ")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(b))
        b[i] = b[i] ^ (1 << rng.randrange(8)) if rng.random() < 0.7 else rng.randrange(256)
    return bytes(b)


def m_truncate(line: bytes, rng: random.Random) -> bytes:
    return line[: rng.randrange(len(line) + 1)]


def m_delete_token(line: bytes, rng: random.Random) -> bytes:
    toks = _tokens(line)
    if len(toks) > 1:
        del toks[rng.randrange(len(toks))]
    return _join(line, toks)


def m_duplicate_token(line: bytes, rng: random.Random) -> bytes:
    toks = _tokens(line)
    i = rng.randrange(len(toks))
    toks.insert(i, toks[i])
    return _join(line, toks)


def _replace_number(line: bytes, rng: random.Random, choices: list[bytes]) -> bytes:
    toks = _tokens(line)
    nums = _number_positions(toks)
    if not nums:
        return line
    i = rng.choice(nums)
    toks[i] = rng.choice(choices)
    return _join(line, toks)


def m_huge_number(line: bytes, rng: random.Random) -> bytes:
    return _replace_number(line, rng, HUGE)


def m_nan_inf(line: bytes, rng: random.Random) -> bytes:
    return _replace_number(line, rng, NONFINITE)


def m_zero_negative(line: bytes, rng: random.Random) -> bytes:
    toks = _tokens(line)
    nums = _number_positions(toks)
    if not nums:
        return line
    i = rng.choice(nums)
    toks[i] = rng.choice([b"0", b"0.0", b"-0.0", b"-" + toks[i].lstrip(b"-")])
    return _join(line, toks)


def m_unicode(line: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(line) + 1)
    if rng.random() < 0.3:  # not UTF-8 at all: a lone surrogate, a stray continuation byte, Latin-1
        junk = rng.choice(["\udcff".encode("utf-8", "surrogatepass"), b"\x80", b"\xc3", "ü".encode("latin-1")])
    else:
        junk = "".join(rng.choice(UNICODE) for _ in range(rng.randint(1, 3))).encode()
    return line[:i] + junk + line[i:]


def m_nul(line: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(line) + 1)
    return line[:i] + b"\x00" * rng.randint(1, 3) + line[i:]


def m_stray_cr(line: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(line) + 1)
    return line[:i] + b"\r" + line[i:]


def m_swap_tokens(line: bytes, rng: random.Random) -> bytes:
    toks = _tokens(line)
    if len(toks) > 1:
        i, j = rng.sample(range(len(toks)), 2)
        toks[i], toks[j] = toks[j], toks[i]
    return _join(line, toks)


LINE_MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "byte_flip": m_byte_flip,
    "truncate_line": m_truncate,
    "delete_token": m_delete_token,
    "duplicate_token": m_duplicate_token,
    "huge_number": m_huge_number,
    "nan_inf": m_nan_inf,
    "zero_negative": m_zero_negative,
    "random_unicode": m_unicode,
    "nul_bytes": m_nul,
    "stray_cr": m_stray_cr,
    "swap_tokens": m_swap_tokens,
}
LINES_MUTATIONS = ("delete_line", "duplicate_line", "swap_lines", "crlf_file", "truncate_file", "swap_columns")
FILE_MUTATIONS = ("empty", "binary", "directory", "header_only", "rename_header_column", "utf16")


@dataclass
class Input:
    content: bytes | None  # None: a directory in place of the file
    mutations: list[str]
    whole_file: bool  # damage a parser may refuse as a whole (one-line error)


def mutate(lines: list[bytes], csv: bool, rng: random.Random) -> Input:
    """One to three mutations of an excerpt (a list of lines without newlines)."""
    lines = list(lines)
    names: list[str] = []
    whole = False
    if rng.random() < 0.1:
        kind = rng.choice(
            FILE_MUTATIONS if csv else [m for m in FILE_MUTATIONS if m not in ("header_only", "rename_header_column")]
        )
        names.append(kind)
        if kind == "empty":
            return Input(rng.choice([b"", b"\n", b" \n\t\n"]), names, True)
        if kind == "binary":
            return Input(bytes(rng.randrange(256) for _ in range(rng.randint(64, 4096))), names, True)
        if kind == "directory":
            return Input(None, names, True)
        if kind == "utf16":
            return Input(b"\n".join(lines).decode("utf-8", "replace").encode("utf-16"), names, True)
        if kind == "header_only":
            return Input(lines[0] + b"\n", names, True)
        toks = lines[0].split(b",")
        toks[rng.randrange(len(toks))] += b"_x"
        lines[0] = b",".join(toks)
        return Input(b"\n".join(lines) + b"\n", names, True)
    first = 1 if csv else 0  # a CSV's header stays as it is (damaged headers are whole-file damage)
    ending = b"\n"
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.25:
            kind = rng.choice(LINES_MUTATIONS)
            names.append(kind)
            body = range(first, len(lines))
            if kind == "delete_line" and len(body) > 1:
                del lines[rng.choice(body)]
            elif kind == "duplicate_line" and len(body):
                i = rng.choice(body)
                lines.insert(i, lines[i])
            elif kind == "swap_lines" and len(body) > 1:
                i, j = rng.sample(list(body), 2)
                lines[i], lines[j] = lines[j], lines[i]
            elif kind == "crlf_file":
                ending = b"\r\n"
            elif kind == "truncate_file":
                keep = b"\n".join(lines)
                cut = rng.randrange(len(lines[0]) + 1 if first else 0, len(keep) + 1)
                lines = keep[:cut].split(b"\n")
            elif kind == "swap_columns" and csv:
                # the same two fields swapped in every data line (a writer that mixed up columns)
                n = len(lines[0].split(b","))
                i, j = rng.sample(range(n), 2)
                for k in range(1, len(lines)):
                    toks = lines[k].split(b",")
                    if len(toks) == n:
                        toks[i], toks[j] = toks[j], toks[i]
                        lines[k] = b",".join(toks)
        else:
            kind = rng.choice(list(LINE_MUTATIONS))
            names.append(kind)
            if len(lines) > first:
                i = rng.randrange(first, len(lines))
                lines[i] = LINE_MUTATIONS[kind](lines[i], rng)
    return Input(ending.join(lines) + ending, names, whole)


def excerpt(path: Path, csv: bool, rng: random.Random, n: int) -> list[bytes]:
    lines = path.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
    head, body = (lines[:1], lines[1:]) if csv else ([], lines)
    start = rng.randrange(max(1, len(body) - n + 1))
    return head + body[start : start + n]


# --------------------------------------------------------------------------------------------
# Running and classifying
# --------------------------------------------------------------------------------------------


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


def schema_violations(rows: list[dict[str, Any]], table: Table) -> int:
    """Accepted rows that break the table's schema (0 when the whole table validates)."""
    if not rows:
        return 0
    df = pd.DataFrame(rows).assign(source="fuzz")
    try:
        conform(df, table)
        return 0
    except SchemaError:
        bad = 0
        for i in range(len(df)):
            try:
                conform(df.iloc[[i]].reset_index(drop=True), table)
            except SchemaError:
                bad += 1
        return max(bad, 1)


def run_one(target: Target, src: Path, inp: Input, work: Path, timeout: float) -> dict[str, Any]:
    """Write the input where the target's real file would be, parse it, classify the outcome."""
    folder = work / "src"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    path = folder / src.name
    if inp.content is None:
        path.mkdir()
    else:
        path.write_bytes(inp.content)
    out: dict[str, Any] = {"outcome": "parsed", "rows": 0, "violations": 0, "rejected": 0, "unaccounted": 0}
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        res = target.run(path, src.name)
        signal.setitimer(signal.ITIMER_REAL, 0)
        out.update(rows=len(res.rows), rejected=res.rejected, violations=schema_violations(res.rows, res.table))
        out["unaccounted"] = abs(len(read_lines(path, "input")) - res.accounted)
    except Hang:
        out.update(outcome="hang", error=f"no result after {timeout} s")
    except OpcostError as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        message = str(exc)
        one_line = "\n" not in message
        whole = inp.whole_file or _file_unusable(path)
        out.update(outcome="clean_file_error" if whole and one_line else "aborted_on_a_line", error=message[:300])
    except Exception as exc:  # noqa: BLE001 -- counting crashes is the point
        signal.setitimer(signal.ITIMER_REAL, 0)
        out.update(outcome="crash", error=f"{type(exc).__name__}: {exc}"[:300], where=_where(exc))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return out


def _file_unusable(path: Path) -> bool:
    """Line damage that leaves no usable file: empty, no data line left after a truncation, or
    mostly undecodable (then a whole-file error is the right answer)."""
    try:
        lines = read_lines(path, "input")
    except OpcostError:
        return True
    return len(lines) <= 1


def _where(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in tb if "/opcost/" in f.filename]
    f = (ours or tb)[-1]
    return f"{Path(f.filename).name}:{f.lineno} in {f.name}"


def fuzz(inputs: int, seed: int, external: Path, timeout: float = 30.0, show_progress: bool = False) -> dict[str, Any]:
    """Run `inputs` mutated inputs (deterministic for a seed) and return the report."""
    rng = random.Random(seed)
    cache: dict = {}
    tgts = targets(external, cache)
    outcomes: Counter = Counter()
    by_target: dict[str, Counter] = {t.name: Counter() for t in tgts}
    by_mutation: dict[str, Counter] = {}
    totals: Counter = Counter()
    samples: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opcost-fuzz-") as tmp, progress_bar(show_progress) as progress:
        task = progress.add_task("fuzzing ingest", total=inputs)
        for n in range(inputs):
            target = rng.choice(tgts)
            src = rng.choice(target.files)
            lines = excerpt(src, target.csv, rng, rng.randint(5, 40))
            inp = mutate(lines, target.csv, rng)
            r = run_one(target, src, inp, Path(tmp), timeout)
            outcomes[r["outcome"]] += 1
            by_target[target.name][r["outcome"]] += 1
            for m in set(inp.mutations):
                by_mutation.setdefault(m, Counter())[r["outcome"]] += 1
            totals.update(rows_accepted=r["rows"], rows_violating_schema=r["violations"])
            totals.update(lines_rejected=r["rejected"], lines_unaccounted=r["unaccounted"])
            bad = r["outcome"] in ("crash", "hang", "aborted_on_a_line") or r["violations"] or r["unaccounted"]
            if bad and len(samples) < 25:
                samples.append(
                    {
                        "input": n,
                        "target": target.name,
                        "file": src.name,
                        "mutations": inp.mutations,
                        **{
                            k: v
                            for k, v in r.items()
                            if k in ("outcome", "error", "where", "violations", "unaccounted")
                        },
                        "content": None
                        if inp.content is None
                        else inp.content[:1500].decode("utf-8", "backslashreplace"),
                    }
                )
            progress.advance(task)
    return {
        "seed": seed,
        "inputs_tried": inputs,
        "outcomes": {
            k: outcomes.get(k, 0) for k in ("parsed", "clean_file_error", "aborted_on_a_line", "crash", "hang")
        },
        **{
            k: totals.get(k, 0)
            for k in ("rows_accepted", "rows_violating_schema", "lines_rejected", "lines_unaccounted")
        },
        "by_target": {k: dict(sorted(v.items())) for k, v in by_target.items()},
        "by_mutation": {k: dict(sorted(v.items())) for k, v in sorted(by_mutation.items())},
        "failures": samples,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds one input may take before it counts as a hang")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    if args.inputs < 1 or not math.isfinite(args.timeout) or args.timeout <= 0:
        print("--inputs must be >= 1 and --timeout a finite number > 0", file=sys.stderr)
        return 2
    root = Paths(find_root()).root
    try:
        report = fuzz(args.inputs, args.seed, root / "data" / "external", args.timeout, not args.no_progress)
    except OpcostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report["command"] = f"PYTHONPATH=src python bench/fuzz_ingest.py --inputs {args.inputs} --seed {args.seed}"
    write_json(report, args.out or Paths(root).bench_report("fuzz_ingest.json"))
    print(json.dumps({k: v for k, v in report.items() if k not in ("by_target", "by_mutation", "failures")}, indent=2))
    bad = report["outcomes"]["crash"] + report["outcomes"]["hang"] + report["outcomes"]["aborted_on_a_line"]
    return 1 if bad or report["rows_violating_schema"] or report["lines_unaccounted"] else 0


if __name__ == "__main__":
    sys.exit(main())
