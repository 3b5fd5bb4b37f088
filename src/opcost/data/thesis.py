"""The thesis' measurement logs (raw stdout of its scripts) -> measurement rows.

A log mixes data lines with Python warnings (two lines each: the warning and the echoed source
line), tracebacks, out-of-memory notes and progress messages. Every line is classified; data lines
become rows, the rest are counted by kind. Value layout (see data/external/README.md):

op line       `<module repr> (<input shape>) v1 .. v14` (inference) or `v1 .. v23` (training:
              v1..v14 the forward pass, v15..v23 forward+backward)
network line  `<model name> (<shape>)` followed by `<ModelClass> (<shape>) v1 .. v14`

v1 t [s], v2 e [mJ], v3 small error of e [mJ], v4 sigma_e = sigma_P x t [mJ], v5 iterations,
v6 total runtime [s], v7 mean power after the 3-sigma filter [W], v8 sigma_P [W], v9/v10 a total
energy and its sigma as logged [J], v11 a second time per iteration [s], v12/v13 start and stop
(`YYYY-MM-DD_HH-MM-SS`), v14 sigma_t [s]. Training v15..v23: t, sigma_t, e [mJ], sigma_e [mJ],
total runtime, P, sigma_P, total energy [J], its sigma. Energies are stored in J.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from opcost.errors import OpcostError
from opcost.ops.reprparse import spec_from_repr
from opcost.ops.spec import OpSpec

LINE_KINDS = ("data", "warning", "traceback", "out_of_memory", "progress", "other")

_SHAPE = r"\((?P<shape>\d+(?:, ?\d+)*,?)\)"
OP_LINE = re.compile(rf"^(?P<repr>[A-Za-z_]\w*\(.*\)) {_SHAPE} (?P<values>\S.*)$")
OP_HEADER = re.compile(r"^[A-Za-z_]\w*\(.*\)$")
NET_HEADER = re.compile(rf"^(?P<model>[a-z][a-z0-9_]*) {_SHAPE}$")
NET_LINE = re.compile(rf"^(?P<cls>[A-Z]\w*) {_SHAPE} (?P<values>\S.*)$")
WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")
TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
EXCEPTION = re.compile(r"^[\w.]*(Error|Exception)\b.*")
OOM = re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE)
PROGRESS = re.compile(
    r"^(Loading dataset|Dataset saved|No dataset found|warmup complete|done flag|skipping|Processing|Benchmarking)"
)


def parse_shape(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").strip(",").split(","))


def parse_time(text: str) -> str:
    """`2024-11-17_14-45-42` -> `2024-11-17T14:45:42` (local time of the measuring node, as logged)."""
    return datetime.strptime(text, "%Y-%m-%d_%H-%M-%S").isoformat()


def _floats(tokens: list[str]) -> list[float]:
    return [float(t) for t in tokens]


def forward_values(tokens: list[str]) -> dict[str, Any]:
    """v1..v14 of a data line as named SI values."""
    v = _floats(tokens[:11])
    return {
        "t_s": v[0],
        "e_j": v[1] / 1000,
        "e_sem_j": v[2] / 1000,
        "sigma_e_j": v[3] / 1000,
        "iterations": int(v[4]),
        "total_time_s": v[5],
        "p_w": v[6],
        "sigma_p_w": v[7],
        "total_energy_j": v[8],
        "sigma_total_energy_j": v[9],
        "wall_time_per_iter_s": v[10],
        "start_time": parse_time(tokens[11]),
        "stop_time": parse_time(tokens[12]),
        "sigma_t_s": float(tokens[13]),
    }


def backward_values(tokens: list[str]) -> dict[str, Any]:
    """v15..v23 of a training op line: the forward+backward measurement."""
    v = _floats(tokens[14:23])
    return {
        "t_s": v[0],
        "sigma_t_s": v[1],
        "e_j": v[2] / 1000,
        "sigma_e_j": v[3] / 1000,
        "total_time_s": v[4],
        "p_w": v[5],
        "sigma_p_w": v[6],
        "total_energy_j": v[7],
        "sigma_total_energy_j": v[8],
    }


@dataclass
class LogResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    parsed: int = 0  # data lines turned into rows
    skipped: Counter = field(default_factory=Counter)  # non-data lines by kind


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


def parse_op_log(path: Path, rel: str, device_config: str, mode: str, spec_cache: dict) -> LogResult:
    """One ops log. Training lines give a forward and a forward_backward row each."""
    res = LogResult()
    cls = Classifier()
    n_values = 23 if mode == "training" else 14
    for lineno, raw in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        m = OP_LINE.match(raw)
        tokens = m.group("values").split() if m else []
        if not m or len(tokens) != n_values:
            res.skipped[cls.kind(raw)] += 1
            continue
        cls.prev = "data"
        shape = parse_shape(m.group("shape"))
        key = (m.group("repr"), shape)
        if key not in spec_cache:
            spec_cache[key] = spec_from_repr(m.group("repr"), shape)
        spec: OpSpec = spec_cache[key]
        try:
            fwd = forward_values(tokens)
            fb = backward_values(tokens) if mode == "training" else None
        except ValueError:
            res.skipped["other"] += 1
            continue
        base = {
            "op_id": spec.op_id,
            "kind": spec.kind,
            "input_shape": list(shape),
            "source_file": rel,
            "line": lineno,
            "device_config": device_config,
            "mode": mode,
            "clock_mhz": None,
            "power_limit_w": None,
        }
        res.rows.append({**base, "phase": "forward", **fwd})
        if fb is not None:
            res.rows.append({**base, "phase": "forward_backward", **fb, "start_time": None, "stop_time": None})
        res.parsed += 1
    return res


def parse_network_log(path: Path, rel: str, device_config: str, mode: str) -> LogResult:
    """One whole-network log: a model-name line, then the measurement line of that model."""
    res = LogResult()
    cls = Classifier()
    current: tuple[str, tuple[int, ...]] | None = None
    phase = "forward" if mode == "inference" else "train_step"
    for lineno, raw in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        h = NET_HEADER.match(raw)
        if h:
            current = (h.group("model"), parse_shape(h.group("shape")))
            res.skipped["progress"] += 1
            cls.prev = "progress"
            continue
        m = NET_LINE.match(raw)
        tokens = m.group("values").split() if m else []
        if not m or len(tokens) != 14 or current is None or parse_shape(m.group("shape")) != current[1]:
            res.skipped[cls.kind(raw)] += 1
            continue
        cls.prev = "data"
        model, shape = current
        current = None
        res.rows.append(
            {
                "set_id": f"{model}:{'x'.join(map(str, shape))}",
                "model": model,
                "input_shape": list(shape),
                "source_file": rel,
                "line": lineno,
                "device_config": device_config,
                "mode": mode,
                "phase": phase,
                "clock_mhz": None,
                "power_limit_w": None,
                **forward_values(tokens),
            }
        )
        res.parsed += 1
    return res


def thesis_logs(root: Path) -> list[tuple[str, Path, str, str]]:
    """(table, path, device_config, mode) for every log under root/{ops,models}/{inference,training}/."""
    found = []
    for table in ("ops", "models"):
        for mode in ("inference", "training"):
            for p in sorted((root / table / mode).glob("*.log")):
                found.append((table, p, p.stem, mode))
    if not found:
        raise OpcostError(f"no thesis logs under {root} (expected ops/ and models/ folders): run `dvc pull`")
    return found
