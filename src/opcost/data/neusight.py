"""NeuSight's public measurements (data/external/neusight/, MIT) -> the project's tables.

Op timings become op_measurements rows under the project's own op spec (so FLOPs, bytes and GEMM
dimensions apply as to any op), with the kernel each launched in a side table; whole-model timings
become networks rows and their per-FX-node timings the network-nodes table. Device configs come from
the device table, `_no_tf32` where the GPU has TF32 (NeuSight ran with it off). Paper costs of the
nine op kinds are closed formulas, the same numbers as ops.features.op_metrics, so ~190 000 lines
import in seconds. Files, units and conventions: docs/data-sources.md#neusight.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from opcost.data.textfile import CsvFile, Line, LineError, Parsed, clip, csv_records, parse_number, read_csv
from opcost.devices import DEVICES, NO_TF32_SUFFIX, lookup_device
from opcost.errors import OpcostError
from opcost.ops.features import OpMetrics
from opcost.ops.spec import OpSpec, TensorInput
from opcost.schemas import NET_MEASUREMENTS, NETWORK_NODES, OP_MEASUREMENTS

METHOD = {
    "timer": "CUDA events",
    "statistic": "mean of the fastest 5 of 25 runs",
    "runs": 25,
    "kept_fastest": 5,
    "numerics": "fp32, TF32 off (torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False)",
    "pytorch": "2.1.0",
    "cuda": "12.1",
    "time_unit_in_files": "ms",
    "source": "NeuSight (Lee et al., ASPLOS'25), MIT license: ../shared/datasets/neusight",
}
MS_PER_S = 1000.0  # the files give milliseconds
F32 = 4  # bytes per element: every NeuSight op runs in fp32
MAX_DIM = 2**31  # a dimension beyond this is a corrupt line, not a measurement

# op folder -> (the file's shape columns, the spec's kind)
OP_FILES: dict[str, tuple[tuple[str, ...], str]] = {
    "bmm": (("B", "M", "N", "K"), "bmm"),
    "linear": (("B", "M", "N", "K"), "Linear"),
    "conv": (("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"), "Conv2d"),
    "ln": (("B", "H"), "LayerNorm"),
    "softmax": (("B", "H"), "Softmax"),
    "gelu": (("B", "H"), "GELU"),
    "relu": (("B", "H"), "ReLU"),
    "add": (("B", "H"), "add"),
    "mul": (("B", "H"), "mul"),
}
KERNEL_COLUMNS = ("Kernel Name", "Warps per SM", "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x", "Block y",
                  "Block z")  # fmt: skip
OP_REQUIRED = ["OPName", "Latency", "Device", *KERNEL_COLUMNS]
NODE_REQUIRED = ["op", "target", "_args", "_kwargs", "meta", "input_shapes", "output_shape", "dtype", "latency",
                 "fw_latency", "bw_latency", "acc_latency", "Name"]  # fmt: skip
NETWORK_FILE = re.compile(
    r"(?P<model>[a-z0-9_]+)-(?P<mode>train|inf)-(?P<seqlen>\d+)-(?P<batch>\d+)(?P<fusion>-fusion)?"
)
MODULE_CLASS = re.compile(r"<class '(?P<cls>[\w.]+)'>\)\]\)\}$")
MODES = {"inf": "inference", "train": "training"}


def device_config_of(gpu_name: str, where: str) -> str:
    """The device config of a NeuSight GPU name: the table key, `_no_tf32` where the GPU has TF32."""
    key = lookup_device(gpu_name)
    if key is None:
        raise OpcostError(f"{where}: GPU {gpu_name!r} is not in the device table (opcost/devices.py)")
    return key + (NO_TF32_SUFFIX if DEVICES[key].tf32_flops is not None else "")


# --------------------------------------------------------------------------------------------
# Op specs and their paper costs
# --------------------------------------------------------------------------------------------

_MODULES = {
    "Linear": "torch.nn.modules.linear.Linear",
    "Conv2d": "torch.nn.modules.conv.Conv2d",
    "LayerNorm": "torch.nn.modules.normalization.LayerNorm",
    "Softmax": "torch.nn.modules.activation.Softmax",
    "GELU": "torch.nn.modules.activation.GELU",
    "ReLU": "torch.nn.modules.activation.ReLU",
}
_T0, _T1 = {"tensor": 0}, {"tensor": 1}


def _inputs(*shapes: tuple[int, ...]) -> tuple[TensorInput, ...]:
    return tuple(TensorInput(tuple(s), "float32") for s in shapes)


def op_spec(kind: str, d: tuple[int, ...]) -> OpSpec:
    """The project's spec of one NeuSight op (the same spec `opcost extract` records for that call)."""
    shape: tuple[int, ...]
    if kind in ("bmm", "add", "mul"):
        if kind == "bmm":
            b, m, n, k = d
            ins = _inputs((b, m, n), (b, n, k))
        else:
            ins = _inputs(d, d)
        return OpSpec(kind, "function", f"torch.{kind}", {"inplace": False}, [_T0, _T1], {}, ins)
    attrs: dict[str, Any]
    if kind == "Linear":
        b, m, n, k = d
        attrs, shape = {"bias": True, "in_features": n, "out_features": k}, (b, m, n)
    elif kind == "Conv2d":
        b, cin, cout, ks, size, stride, pad = d
        attrs = {
            "bias": False, "dilation": [1, 1], "groups": 1, "in_channels": cin, "kernel_size": [ks, ks],
            "out_channels": cout, "padding": [pad, pad], "padding_mode": "zeros", "stride": [stride, stride],
        }  # fmt: skip
        shape = (b, cin, size, size)
    elif kind == "LayerNorm":
        attrs, shape = {"bias": True, "elementwise_affine": True, "eps": 1e-05, "normalized_shape": [d[1]]}, d
    elif kind == "Softmax":
        attrs, shape = {"dim": -1}, d
    elif kind == "GELU":
        attrs, shape = {"approximate": "none"}, d
    elif kind == "ReLU":
        attrs, shape = {"inplace": False}, d
    else:
        raise OpcostError(f"no NeuSight op kind {kind!r}; known: {', '.join(k for _, k in OP_FILES.values())}")
    return OpSpec(kind, "module", _MODULES[kind], attrs, [_T0], {}, _inputs(shape))


def conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def op_metrics_of(kind: str, d: tuple[int, ...]) -> OpMetrics:
    """FLOPs (torch's FlopCounterMode conventions: 2 per multiply-add of a GEMM or convolution, none for
    the bias add, normalisation or element-wise ops), bytes (inputs and parameters read once, outputs
    written once), parameters and output shape of `op_spec(kind, d)`."""
    flops = params = 0
    out: tuple[int, ...]
    if kind in ("bmm", "Linear"):
        b, m, n, k = d
        flops, out = 2 * b * m * n * k, (b, m, k)
        params = n * k + k if kind == "Linear" else 0
        read = F32 * (b * m * n + (b * n * k if kind == "bmm" else params))
    elif kind == "Conv2d":
        b, cin, cout, ks, size, stride, pad = d
        o = conv_out(size, ks, stride, pad)
        params = cout * cin * ks * ks
        flops, out = 2 * b * cout * o * o * cin * ks * ks, (b, cout, o, o)
        read = F32 * (b * cin * size * size + params)
    else:
        bh = d[0] * d[1]
        params = 2 * d[1] if kind == "LayerNorm" else 0
        read = F32 * ((2 if kind in ("add", "mul") else 1) * bh + params)
        out = d
    written = F32 * _prod(out)
    return OpMetrics(flops, read, written, params, (tuple(out),), False)


def _prod(xs: tuple[int, ...]) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


class FileCounts(TypedDict):
    """What one NeuSight file gave, as summary.json lists it under `files`."""

    rows: int
    rejected: int
    nodes: NotRequired[int]  # a network's JSON: the rows its node CSV gave


@dataclass
class Read(Parsed):
    """Rows of every NeuSight table, plus what a summary needs."""

    kernels: list[dict[str, Any]] = field(default_factory=list)
    nets: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    specs: dict[str, tuple[OpSpec, OpMetrics]] = field(default_factory=dict)
    files: dict[str, FileCounts] = field(default_factory=dict)


def _whole(rec: dict[str, str], col: str, lo: int = 1) -> int:
    x = parse_number(rec[col].strip(), col)
    if not x.is_integer():
        raise LineError("bad_number", f"{col} = {clip(rec[col], 40)!r} is not a whole number")
    if not lo <= x <= MAX_DIM:
        raise LineError("out_of_range" if x < lo else "bad_shape", f"{col} = {int(x)}, outside {lo}..2^31")
    return int(x)


def _count(res: Read, rel: str, before: tuple[int, int]) -> None:
    res.files[rel] = {"rows": len(res.rows) - before[0], "rejected": len(res.rejects) - before[1]}


def parse_op_file(path: Path, rel: str, op: str, res: Read) -> None:
    """One `ops/<op>/<GPU>.csv.gz` into op_measurements rows and their kernel rows."""
    dims_cols, kind = OP_FILES[op]
    config = device_config_of(path.name.removesuffix(".csv.gz"), rel)
    f: CsvFile = read_csv(path, [*OP_REQUIRED, *dims_cols])
    before = (len(res.rows), len(res.rejects))
    for line, rec in csv_records(f, rel, res):
        try:
            if rec["OPName"].strip() != op:
                raise LineError("bad_value", f"OPName {clip(rec['OPName'], 40)!r} in the {op} file")
            if lookup_device(rec["Device"]) != config.removesuffix(NO_TF32_SUFFIX):
                raise LineError("bad_value", f"Device {clip(rec['Device'], 60)!r} is not the file's GPU")
            dims = tuple(_whole(rec, c, lo=0 if c == "Padding" else 1) for c in dims_cols)
            if kind == "Conv2d" and conv_out(dims[4], dims[3], dims[5], dims[6]) < 1:
                raise LineError("bad_shape", f"kernel {dims[3]} does not fit input {dims[4]} with padding {dims[6]}")
            t = parse_number(rec["Latency"].strip(), "Latency") / MS_PER_S
            kernel = _kernel_row(rec)
        except LineError as exc:
            res.reject(rel, line, exc.reason, exc.message)
            continue
        key = (kind, dims)
        spec = op_spec(kind, dims)
        op_id = spec.op_id
        row = {
            "op_id": op_id,
            "kind": kind,
            "input_shape": list(spec.inputs[0].shape),
            "source_file": rel,
            "line": line.number,
            "device_config": config,
            "mode": "inference",
            "phase": "forward",
            "clock_mhz": None,
            "power_limit_w": None,
            "t_s": t,
        }
        if res.take(rel, line, [row], OP_MEASUREMENTS):
            res.kernels.append({"source_file": rel, "line": line.number, "device_config": config, "op_id": op_id,
                                **kernel})  # fmt: skip
            if op_id not in res.specs:
                res.specs[op_id] = (spec, op_metrics_of(*key))
    _count(res, rel, before)


def _kernel_row(rec: dict[str, str]) -> dict[str, Any]:
    kernels = rec.get("Kernels")
    names = [k for k in kernels.split(";") if k.strip()] if kernels is not None else None
    out: dict[str, Any] = {
        "kernel_name": rec["Kernel Name"].strip(),
        "kernels": None if names is None else ";".join(names),
        "n_kernels": None if names is None else len(names),
        "warps_per_sm": parse_number(rec["Warps per SM"].strip(), "Warps per SM"),
        "blocks_per_sm": parse_number(rec["Blocks per SM"].strip(), "Blocks per SM"),
    }
    for axis in ("x", "y", "z"):
        out[f"grid_{axis}"] = _whole(rec, f"Grid {axis}")
        out[f"block_{axis}"] = _whole(rec, f"Block {axis}")
    return out


# A shape literal as the node CSV holds it, after checking: a list of ints, or of such lists (one per tensor).
Shape = list["int | Shape"]


def _shapes(text: str, what: str) -> Shape:
    """A literal list/tuple of non-negative ints (or of such lists), parsed without evaluation."""
    try:
        v = ast.literal_eval(text.strip()) if text.strip() else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise LineError("bad_shape", f"{what} {clip(text, 60)!r} is not a shape literal") from None

    def ok(x: object) -> bool:
        if isinstance(x, (list, tuple)):
            return all(ok(y) for y in x)
        return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_DIM

    if v is None or not isinstance(v, (list, tuple)) or not ok(v):
        raise LineError("bad_shape", f"{what} {clip(text, 60)!r} is not a shape of integers >= 0")
    shape: Shape = json.loads(json.dumps(v))  # tuples -> lists
    return shape


def parse_network(json_path: Path, rel: str, config: str, res: Read) -> None:
    """One network JSON (and its node CSV beside it) into networks rows and node rows."""
    m = NETWORK_FILE.fullmatch(json_path.name.removesuffix(".json"))
    if not m:
        raise OpcostError(f"{rel}: expected a name <model>-<train|inf>-<seqlen>-<batch>[-fusion].json")
    if m.group("fusion"):
        res.skipped["torch.compile (-fusion) network, end-to-end only"] += 1
        return
    try:
        doc: object = json.loads(json_path.read_text())  # untrusted until it is known to be an object
    except (OSError, ValueError) as exc:
        raise OpcostError(f"{rel} is not a JSON file: {exc}") from None
    if not isinstance(doc, dict):
        raise OpcostError(
            f"{rel}: expected a JSON object with num_layer, e2e/fw/bwall_latency; got {clip(json.dumps(doc), 40)}"
        )
    missing = [k for k in ("num_layer", "e2e_latency", "fw_latency", "bwall_latency") if k not in doc]
    if missing:
        raise OpcostError(f"{rel}: missing {', '.join(missing)}; expected num_layer, e2e/fw/bwall_latency")
    model, mode = m.group("model"), MODES[m.group("mode")]
    batch, seqlen = int(m.group("batch")), int(m.group("seqlen"))
    shape = [batch, seqlen]
    set_id = f"{model}:{batch}x{seqlen}"
    base = {"set_id": set_id, "model": model, "input_shape": shape, "source_file": rel, "line": 1,
            "device_config": config, "mode": mode, "clock_mhz": None, "power_limit_w": None}  # fmt: skip
    line = Line(1, clip(json.dumps(doc), 300))
    before = (len(res.nets), len(res.rejects))
    if mode == "inference":
        times = [("forward", "e2e_latency")]  # the whole model under no_grad
    else:  # forward, then forward + backward (no optimizer step)
        times = [("forward", "fw_latency"), ("forward_backward", "e2e_latency")]
    rows = []
    for phase, key in times:
        ms = doc[key]
        if isinstance(ms, bool) or not isinstance(ms, (int, float)):
            res.reject(rel, line, "bad_number", f"{key} = {clip(repr(ms), 40)} is not a number")
            return
        rows.append({**base, "phase": phase, "t_s": float(ms) / MS_PER_S})
    problem = next((p for p in map(NET_MEASUREMENTS.row_problem, rows) if p), None)
    if problem:
        res.reject(rel, line, *problem)
    else:
        res.nets += rows
    nodes = json_path.with_name(json_path.name.removesuffix(".json") + ".csv.gz")
    n_nodes = 0
    if nodes.is_file():
        layers = doc["num_layer"]
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
            raise OpcostError(
                f"{rel}: num_layer {clip(json.dumps(layers), 20)} is not a layer count (an integer >= 0), which its "
                f"node table {nodes.name} needs"
            )
        n_nodes = parse_nodes(nodes, str(Path(rel).with_name(nodes.name)), base, layers, res)
    res.files[rel] = {"rows": len(res.nets) - before[0], "rejected": len(res.rejects) - before[1], "nodes": n_nodes}


def parse_nodes(path: Path, rel: str, net: dict[str, Any], num_layer: int, res: Read) -> int:
    """The per-FX-node CSV of one network into NETWORK_NODES rows; returns the rows taken."""
    f = read_csv(path, NODE_REQUIRED)
    before, taken = len(res.rejects), 0
    for index, (line, rec) in enumerate(csv_records(f, rel, res)):
        try:
            ins = _shapes(rec["input_shapes"], "input_shapes")
            out = _shapes(rec["output_shape"], "output_shape")
            times = {c: parse_number(rec[c].strip(), c) / MS_PER_S for c in ("latency", "fw_latency", "bw_latency",
                                                                        "acc_latency")}  # fmt: skip
        except LineError as exc:
            res.reject(rel, line, exc.reason, exc.message)
            continue
        cls = MODULE_CLASS.search(rec["meta"].strip()) if rec["op"] == "call_module" else None
        row = {
            "source": None,
            "source_file": rel,
            "line": line.number,
            "device_config": net["device_config"],
            "mode": net["mode"],
            "set_id": net["set_id"],
            "model": net["model"],
            "num_layer": num_layer,
            "node_index": index,
            "name": rec["Name"],
            "op": rec["op"],
            "target": rec["target"],
            "module_class": cls.group("cls") if cls else None,
            "args": clip(rec["_args"], 500),
            "kwargs": clip(rec["_kwargs"], 500),
            "input_shapes": json.dumps(ins),
            "output_shape": json.dumps(out),
            "dtype": rec["dtype"].strip().removeprefix("torch.") or None,
            # NeuSight writes 0 for what it did not time (placeholders, inference backward): null here
            "latency_s": times["latency"] or None,
            "fw_s": times["fw_latency"] or None,
            "bw_s": times["bw_latency"] or None,
            "acc_s": times["acc_latency"] or None,
        }
        problem = NETWORK_NODES.row_problem(row)
        if problem:
            res.reject(rel, line, *problem)
            continue
        res.nodes.append(row)
        taken += 1
    res.files[rel] = {"rows": taken, "rejected": len(res.rejects) - before}
    return taken


def read_neusight(root: Path) -> Read:
    """Every op file and network of a NeuSight folder (module docstring); whole-file problems raise."""
    if not (root / "ops").is_dir() or not (root / "networks").is_dir():
        raise OpcostError(f"{root}: expected NeuSight's ops/ and networks/ folders (run `dvc pull`)")
    res = Read()
    for op in OP_FILES:
        for path in sorted((root / "ops" / op).glob("*.csv.gz")):
            parse_op_file(path, str(path.relative_to(root)), op, res)
    for gpu in sorted(p for p in (root / "networks").iterdir() if p.is_dir()):
        config = device_config_of(gpu.name, str(gpu.relative_to(root)))
        for path in sorted(gpu.glob("*.json")):
            parse_network(path, str(path.relative_to(root)), config, res)
    if not res.rows:
        raise OpcostError(f"{root}: no NeuSight op file under ops/<op>/<GPU>.csv.gz parsed")
    return res


def summary_counts(res: Read) -> dict[str, Any]:
    by_config: Counter[str] = Counter(r["device_config"] for r in res.rows)
    by_kind: Counter[str] = Counter(r["kind"] for r in res.rows)
    return {
        "method": METHOD,
        "op_rows_by_device_config": dict(sorted(by_config.items())),
        "op_rows_by_kind": dict(sorted(by_kind.items())),
        "network_rows": len(res.nets),
        "node_rows": len(res.nodes),
    }
