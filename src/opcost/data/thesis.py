"""The thesis' measurement logs (raw stdout of its scripts) -> measurement rows.

Every line is classified: data lines become rows, warnings, tracebacks, out-of-memory notes and
progress messages are counted, and a line that looks like data but cannot be taken is a reject kept
with its file, line number and reason; one bad line never stops the file. A data line must agree with
its own arithmetic (`check_arithmetic`), and a file's last line without a line end must pin its last
value down (`check_last_value`), so a line cut short or missing a digit is rejected, not read.
Value layout, the checks and why they hold: docs/data-sources.md#the-thesis-logs.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from opcost.data.textfile import PROBLEM_MESSAGES, Line, LineError, Parsed, clip, parse_number, read_lines
from opcost.errors import OpcostError
from opcost.ops.features import OpMetrics, op_metrics
from opcost.ops.reprparse import spec_from_repr
from opcost.ops.spec import OpSpec
from opcost.schemas import NET_MEASUREMENTS, OP_MEASUREMENTS, Table

LINE_KINDS = ("data", "warning", "traceback", "out_of_memory", "progress", "other")

_SHAPE = r"\((?P<shape>\d+(?:, ?\d+)*,?)\)"
# A line that looks like a measurement: a repr (or class name), a parenthesised shape, values.
# What is inside the shape and how many values follow is checked afterwards, so a malformed line
# of this form is a reject with its reason, not an unexplained skip.
OP_CANDIDATE = re.compile(r"^(?P<repr>[A-Za-z_]\w*\(.*\)) \((?P<shape>[^()]*)\) (?P<values>\S.*)$")
NET_CANDIDATE = re.compile(r"^(?P<cls>[A-Za-z_]\w*) \((?P<shape>[^()]*)\) (?P<values>\S.*)$")
OP_HEADER = re.compile(r"^[A-Za-z_]\w*\(.*\)$")
NET_HEADER = re.compile(rf"^(?P<model>[a-z][a-z0-9_]*) {_SHAPE}$")
WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")
TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
EXCEPTION = re.compile(r"^[\w.]*(Error|Exception)\b.*")
OOM = re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE)
PROGRESS = re.compile(
    r"^(Loading dataset|Dataset saved|No dataset found|warmup complete|done flag|skipping|Processing|Benchmarking)"
)
DIM = re.compile(r"[0-9]+")
MAX_DIMS = 8
MAX_ELEMENTS = 2**40  # more elements than any GPU holds: a corrupted shape, not a measurement
INT64_MAX = 2**63 - 1


def parse_shape(text: str) -> tuple[int, ...]:
    """`32, 3, 56, 56` (or `32,` for a 1-tuple) -> (32, 3, 56, 56); LineError for anything else."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if not parts or len(parts) > MAX_DIMS or not all(DIM.fullmatch(p) for p in parts):
        raise LineError("bad_shape", f"shape ({clip(text, 60)}) is not 1 to {MAX_DIMS} comma-separated integers")
    if any(len(p) > 15 for p in parts):  # (and int() refuses strings of over 4300 digits)
        raise LineError("bad_shape", f"shape ({clip(text, 60)}) has a dimension of more than 2^40 elements")
    dims = tuple(int(p) for p in parts)
    if any(d <= 0 for d in dims):
        raise LineError("bad_shape", f"shape {dims} has a dimension <= 0")
    if math.prod(dims) > MAX_ELEMENTS:
        raise LineError("bad_shape", f"shape {dims} has more than 2^40 elements")
    return dims


def parse_time(text: str) -> str:
    """`2024-11-17_14-45-42` -> `2024-11-17T14:45:42` (local time of the measuring node, as logged)."""
    try:
        return datetime.strptime(text, "%Y-%m-%d_%H-%M-%S").isoformat()
    except ValueError:
        raise LineError("bad_timestamp", f"timestamp {clip(text, 40)!r} is not YYYY-MM-DD_HH-MM-SS") from None


def _number(tokens: list[str], i: int) -> float:
    """Value v{i+1} as a finite float; LineError naming it otherwise (nan, inf, 1e999, text)."""
    return parse_number(tokens[i], f"v{i + 1}")


def _count(tokens: list[str], i: int) -> int:
    x = _number(tokens, i)
    if not x.is_integer():
        raise LineError("bad_number", f"v{i + 1} = {tokens[i]!r} is not a whole number of iterations")
    return int(x)


def forward_values(tokens: list[str]) -> dict[str, Any]:
    """v1..v14 of a data line as named SI values (LineError naming the first bad one)."""

    def v(n: int) -> float:
        return _number(tokens, n - 1)

    return {
        "t_s": v(1),
        "e_j": v(2) / 1000,
        "e_sem_j": v(3) / 1000,
        "sigma_e_j": v(4) / 1000,
        "iterations": _count(tokens, 4),
        "total_time_s": v(6),
        "p_w": v(7),
        "sigma_p_w": v(8),
        "total_energy_j": v(9),
        "sigma_total_energy_j": v(10),
        "wall_time_per_iter_s": v(11),
        "start_time": parse_time(tokens[11]),
        "stop_time": parse_time(tokens[12]),
        "sigma_t_s": v(14),
    }


ARITHMETIC_TOLERANCE = 0.01  # relative; the real logs agree to within 1e-3


def check_arithmetic(v: dict[str, Any], phase: str) -> None:
    """LineError("inconsistent") unless the values of one measurement agree with each other (module
    docstring). Forward+backward values log no iteration count: it is total runtime / t there."""
    t, total = v["t_s"], v["total_time_s"]
    if not (t > 0 and total > 0):
        return  # a zero or negative value is out_of_range, found by the table's rules
    n = v.get("iterations") or total / t
    checks = [("total runtime", total, n * t, f"iterations x t = {n:g} x {t:g} s")] if v.get("iterations") else []
    if v.get("p_w") and v.get("e_j") is not None:
        checks.append(("e", v["e_j"], v["p_w"] * t, f"P x t = {v['p_w']:g} W x {t:g} s"))
    for what, logged, expected, how in checks:
        if abs(logged - expected) > ARITHMETIC_TOLERANCE * abs(expected):
            raise LineError("inconsistent", f"{phase}: {what} = {logged:g} disagrees with {how} = {expected:g}")
    sigma = v.get("sigma_t_s")
    if sigma is not None and sigma > t * math.sqrt(n):
        raise LineError(
            "inconsistent",
            f"{phase}: sigma_t = {sigma:g} s exceeds t x sqrt(iterations) = {t * math.sqrt(n):g} s, the largest "
            f"spread {n:.0f} times of mean {t:g} s can have (a value cut short?)",
        )


SIGMA_TOLERANCE = 1e-12  # relative; the real logs' sigma_E agrees with the propagation to 1e-15
CHECKED_TO = 1e-5  # a last value is checked when a relative change of this size breaks the relation


def check_last_value(v: dict[str, Any], phase: str) -> None:
    """LineError unless the last value of a line without a line end (sigma_t_s, or for the
    forward+backward row sigma_total_energy_j) agrees with the sigma_E relation (module docstring):
    `inconsistent` when it disagrees, `unterminated` when the relation cannot pin it down."""
    fb = phase == "forward+backward"
    name, number = ("sigma_total_energy_j", 23) if fb else ("sigma_t_s", 14)
    e, p, t = v["total_energy_j"], v["p_w"], v["t_s"]
    sigmas = v["sigma_total_energy_j"], v["sigma_p_w"], v["sigma_t_s"]
    where = f"{phase}: the file's last line has no line end and its last value v{number} = {v[name]:g}"
    if not (e > 0 and p > 0 and t > 0) or min(sigmas) < 0:
        raise LineError("unterminated", f"{where} cannot be checked (a zero or negative value); it may be cut short")
    rel_e, rel_p, rel_t = sigmas[0] / e, sigmas[1] / p, sigmas[2] / t
    expected = math.hypot(rel_p, rel_t)
    sensitivity = 1.0 if fb else (rel_t / expected) ** 2 if expected > 0 else 0.0
    if sensitivity * CHECKED_TO < SIGMA_TOLERANCE:
        raise LineError(
            "unterminated",
            f"{where} cannot be checked: sigma_t / t = {rel_t:.3g} is too small beside sigma_P / P = {rel_p:.3g} to "
            "move the total energy's sigma; it may be cut short",
        )
    if abs(rel_e - expected) > SIGMA_TOLERANCE * max(rel_e, expected):
        raise LineError(
            "inconsistent",
            f"{where} breaks sigma_E = E x hypot(sigma_P / P, sigma_t / t): sigma_E / E = {rel_e:.12g}, the "
            f"propagation gives {expected:.12g} (the value cut short?)",
        )


def backward_values(tokens: list[str]) -> dict[str, Any]:
    """v15..v23 of a training op line: the forward+backward measurement."""

    def v(n: int) -> float:
        return _number(tokens, n - 1)

    return {
        "t_s": v(15),
        "sigma_t_s": v(16),
        "e_j": v(17) / 1000,
        "sigma_e_j": v(18) / 1000,
        "total_time_s": v(19),
        "p_w": v(20),
        "sigma_p_w": v(21),
        "total_energy_j": v(22),
        "sigma_total_energy_j": v(23),
    }


@dataclass
class LogResult(Parsed):
    parsed: int = 0  # data lines turned into rows


class Classifier:
    """Line kinds, with the state that multi-line warnings and tracebacks need."""

    def __init__(self) -> None:
        self.prev = ""

    def kind(self, line: str) -> str:
        k = self._kind(line)
        self.prev = k
        return k

    def _kind(self, line: str) -> str:
        if WARNING.match(line):
            return "warning"
        if line.startswith((" ", "\t")) and self.prev in ("warning", "traceback"):
            return self.prev  # the echoed source line of a warning, a traceback frame
        if TRACEBACK.match(line):
            return "traceback"
        if OOM.search(line):
            return "out_of_memory"  # also when it is the exception that closes a traceback
        if self.prev == "traceback" and EXCEPTION.match(line):
            return "traceback"  # the exception line closing a traceback
        if PROGRESS.match(line) or OP_HEADER.match(line) or NET_HEADER.match(line):
            return "progress"
        return "other"


# A spec cache entry: the spec and its paper costs, or why the repr cannot be used.
SpecEntry = tuple[OpSpec, OpMetrics] | str
# The spec cache of a source: (repr, shape) of a logged op -> its SpecEntry.
SpecCache = dict[tuple[str, tuple[int, ...]], SpecEntry]


def spec_entry(text: str, shape: tuple[int, ...]) -> SpecEntry:
    """The spec and paper costs of a logged repr at a shape, or the reason it cannot be built.

    The repr is untrusted text: any failure while parsing, building it on the meta device or
    counting its FLOPs makes this line a reject, never an abort of the whole log."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. torch's "zero-element tensors" note on a corrupt repr
            spec = spec_from_repr(text, shape)
            metrics = op_metrics(spec)
    except OpcostError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 -- arbitrary constructor and kernel errors of corrupt reprs
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    big = [k for k in ("flops", "bytes_read", "bytes_written", "params") if getattr(metrics, k) > INT64_MAX]
    if big:
        return f"{', '.join(big)} beyond a 64-bit integer"
    return spec, metrics


def _take(res: LogResult, rel: str, line: Line, rows: list[dict[str, Any]], table: Table) -> None:
    """Keep the rows of one line if they meet the table's rules and then their own arithmetic
    (`check_arithmetic`: after the rules, so a zero or negative value is named out_of_range), and,
    for a file's last line without a line end, the check of its last value (`check_last_value`)."""
    for r in rows:
        problem = table.row_problem(r)
        if problem:
            res.reject(rel, line, *problem)
            return

    def label(r: dict[str, Any]) -> str:
        phase: str = r.get("phase", "")
        return {"forward_backward": "forward+backward"}.get(phase, phase)

    try:
        for r in rows:
            check_arithmetic(r, label(r))
        if not line.terminated:  # the last value is the one a cut can leave looking whole
            check_last_value(rows[-1], label(rows[-1]))
    except LineError as exc:
        res.reject(rel, line, exc.reason, exc.message)
        return
    if res.take(rel, line, rows, table):
        res.parsed += 1


def parse_op_log(path: Path, rel: str, device_config: str, mode: str, spec_cache: SpecCache) -> LogResult:
    """One ops log. Training lines give a forward and a forward_backward row each.

    `spec_cache` maps (repr, shape) to a `SpecEntry`; it is shared across the logs of a source so
    each distinct op is built once."""
    res = LogResult()
    cls = Classifier()
    n_values = 23 if mode == "training" else 14
    for line in read_lines(path, "thesis log"):
        if line.problem:
            res.reject(rel, line, line.problem, PROBLEM_MESSAGES[line.problem])
            cls.prev = "data"
            continue
        m = OP_CANDIDATE.match(line.text)
        if not m:
            res.skipped[cls.kind(line.text)] += 1
            continue
        cls.prev = "data"
        try:
            tokens = m.group("values").split()
            if len(tokens) != n_values:
                raise LineError("value_count", f"{len(tokens)} values after the shape; a {mode} line has {n_values}")
            shape = parse_shape(m.group("shape"))
            fwd = forward_values(tokens)
            fb = backward_values(tokens) if mode == "training" else None
        except LineError as exc:
            res.reject(rel, line, exc.reason, exc.message)
            continue
        key = (m.group("repr"), shape)
        if key not in spec_cache:
            spec_cache[key] = spec_entry(*key)
        entry = spec_cache[key]
        if isinstance(entry, str):
            res.reject(rel, line, "bad_repr", clip(entry, 200))
            continue
        spec = entry[0]
        base = {
            "op_id": spec.op_id,
            "kind": spec.kind,
            "input_shape": list(shape),
            "source_file": rel,
            "line": line.number,
            "device_config": device_config,
            "mode": mode,
            "clock_mhz": None,
            "power_limit_w": None,
        }
        rows = [{**base, "phase": "forward", **fwd}]
        if fb is not None:
            rows.append({**base, "phase": "forward_backward", **fb, "start_time": None, "stop_time": None})
        _take(res, rel, line, rows, OP_MEASUREMENTS)
    return res


def parse_network_log(path: Path, rel: str, device_config: str, mode: str) -> LogResult:
    """One whole-network log: a model-name line, then the measurement line of that model."""
    res = LogResult()
    cls = Classifier()
    current: tuple[str, tuple[int, ...]] | None = None
    phase = "forward" if mode == "inference" else "train_step"
    for line in read_lines(path, "thesis log"):
        if line.problem:
            res.reject(rel, line, line.problem, PROBLEM_MESSAGES[line.problem])
            cls.prev = "data"
            continue
        h = NET_HEADER.match(line.text)
        if h:
            try:
                current = (h.group("model"), parse_shape(h.group("shape")))
            except LineError as exc:
                res.reject(rel, line, exc.reason, exc.message)
                current = None
                continue
            res.skipped["progress"] += 1
            cls.prev = "progress"
            continue
        m = NET_CANDIDATE.match(line.text)
        if not m:
            res.skipped[cls.kind(line.text)] += 1
            continue
        cls.prev = "data"
        header, current = current, None
        try:
            tokens = m.group("values").split()
            if len(tokens) != 14:
                raise LineError("value_count", f"{len(tokens)} values after the shape; a network line has 14")
            shape = parse_shape(m.group("shape"))
            if header is None:
                raise LineError("unpaired", "a network measurement without the model-name line before it")
            if shape != header[1]:
                raise LineError("unpaired", f"shape {shape} differs from the model-name line's {header[1]}")
            values = forward_values(tokens)
        except LineError as exc:
            res.reject(rel, line, exc.reason, exc.message)
            continue
        model = header[0]
        row = {
            "set_id": f"{model}:{'x'.join(map(str, shape))}",
            "model": model,
            "input_shape": list(shape),
            "source_file": rel,
            "line": line.number,
            "device_config": device_config,
            "mode": mode,
            "phase": phase,
            "clock_mhz": None,
            "power_limit_w": None,
            **values,
        }
        _take(res, rel, line, [row], NET_MEASUREMENTS)
    return res


def thesis_logs(root: Path) -> list[tuple[str, Path, str, str]]:
    """(table, path, device_config, mode) for every log under root/{ops,models}/{inference,training}/."""
    if root.exists() and not root.is_dir():
        raise OpcostError(f"{root} is a file; expected the thesis folder with ops/ and models/")
    found = []
    for table in ("ops", "models"):
        for mode in ("inference", "training"):
            for p in sorted((root / table / mode).glob("*.log")):
                found.append((table, p, p.stem, mode))
    if not found:
        raise OpcostError(f"no thesis logs under {root} (expected ops/ and models/ folders): run `dvc pull`")
    return found
