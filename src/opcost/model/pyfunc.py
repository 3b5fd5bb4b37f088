"""The MLflow pyfunc flavour of a bundle, by *loader module*: the registered model stores the bundle's
files (bundle.json, trees.npz) as data and names this installed module; `mlflow.pyfunc.load_model`
imports it and calls `_load_pyfunc(data_path)`. Nothing is unpickled and no code is read from the
artifact, so loading a model from a registry runs only the installed opcost.

Input: rows of an operations table (spec_json, flops, ...; `output_shapes` as a list or its JSON
text) and an optional clock_mhz column. Output: per-op t_s, p_w and e_j for one call, and where each
cost came from (`source`: measured, estimated, floor, predicted, decomposed, proxy or charged;
model/composition/costing.py), exactly as predictions cost ops. `signature()` and `input_example()` give the
registered model its schema and an example a user can run (MLflow shows "Inputs (0)" without them).

The models stored as plain files (the cross-clock model models/clock, the cross-device op-time model
models/xdevice, the cross-device power model models/xpower) are registered the same way: their folder
is the data, and their loader module (`FOLDER_LOADER_MODULE`, model/pyfunc_folders.py, named here, not
imported: the train stages need none of those models' code) tells them apart by the file they hold; each
answers a table of its own (`FOLDER_MODELS`: input and output columns per model file).

Both loader modules sit directly in opcost.model, outside its sub-packages, and stay there: every registered
version in a user's store names its module path in its MLmodel file (`loader_module`), so moving either would
leave those versions unloadable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opcost.model.composition.bundle import Bundle

LOADER_MODULE = __name__


class BundlePyfunc:
    """What `mlflow.pyfunc.load_model` wraps: a loaded bundle with a DataFrame predict."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import pandas as pd

        from opcost.model.basis.features import record_of

        clock = None
        if "clock_mhz" in model_input and model_input["clock_mhz"].notna().any():
            clocks = set(model_input["clock_mhz"].dropna())
            if len(clocks) > 1:
                raise ValueError("one clock per call: split the rows by clock_mhz")
            clock = float(clocks.pop())
        rows = [_row(r) for _, r in model_input.iterrows()]
        costs = self.bundle.coster().cost([record_of(r) for r in rows], clock)
        out = pd.DataFrame({"t_s": costs.t_s, "p_w": costs.p_w})
        out["e_j"] = out["t_s"] * out["p_w"]
        out["source"] = costs.source
        return out


def _load_pyfunc(data_path: str) -> BundlePyfunc:
    return BundlePyfunc(Bundle.load(Path(data_path)))


def _row(r: Any) -> dict[str, Any]:
    """A row as the operations table holds it (output_shapes may arrive as JSON text: a signature
    column is a scalar)."""
    d = dict(r)
    if isinstance(d.get("output_shapes"), str):
        d["output_shapes"] = json.loads(d["output_shapes"])
    return d


INPUT_COLUMNS = (
    ("spec_json", "string", True, "the op's spec (opcost.ops.spec.OpSpec.to_json)"),
    ("flops", "long", True, "forward FLOPs"),
    ("bytes_read", "long", True, "bytes read"),
    ("bytes_written", "long", True, "bytes written"),
    ("params", "long", True, "parameter count"),
    ("is_view", "boolean", True, "output is a view of an input"),
    ("output_shapes", "string", True, "JSON list of output shapes"),
    ("parts_json", "string", False, "kernels of a composite op, JSON"),
    ("clock_mhz", "double", False, "core clock; empty: the default clock"),
)
OUTPUT_COLUMNS = (("t_s", "double"), ("p_w", "double"), ("e_j", "double"), ("source", "string"))


def signature() -> Any:
    """The registered model's input and output schema."""
    from mlflow.models.signature import ModelSignature
    from mlflow.types.schema import ColSpec, Schema

    return ModelSignature(
        inputs=Schema([ColSpec(t, n, required=req) for n, t, req, _ in INPUT_COLUMNS]),
        outputs=Schema([ColSpec(t, n) for n, t in OUTPUT_COLUMNS]),
    )


OP_COLUMNS = tuple(c for c in INPUT_COLUMNS if c[0] != "clock_mhz")
FOLDER_LOADER_MODULE = "opcost.model.pyfunc_folders"
# model file -> (input columns (name, type, required, meaning), output columns, an example row)
InputColumn = tuple[str, str, bool, str]  # name, MLflow type, required, meaning
OutputColumn = tuple[str, str]  # name, MLflow type
FOLDER_MODELS: dict[str, tuple[tuple[InputColumn, ...], tuple[OutputColumn, ...], dict[str, Any]]] = {
    "clock_model.json": (
        (
            ("device", "string", True, "a device table key, e.g. A30"),
            ("clock_mhz", "double", True, "the core clock to move to, within the device's range"),
            ("t_ref_s", "double", True, "the op's time per call at the device's boost clock"),
            ("p_ref_w", "double", True, "its average power there"),
            ("compute_share", "double", True, "its compute-bound share of the roofline time, 0-1"),
        ),
        (("t_s", "double"), ("p_w", "double")),
        {"device": "A30", "clock_mhz": 1100.0, "t_ref_s": 1e-4, "p_ref_w": 120.0, "compute_share": 0.5},
    ),
    "xdevice.json": (
        (*OP_COLUMNS, ("device_config", "string", True, "a table GPU, e.g. H100 (or H100_no_tf32)")),
        (("t_s", "double"),),
        {},  # an operations-table row: taken from the table where there is one (input_example)
    ),
    "xpower_model.json": (
        (
            ("device_config", "string", True, "a table GPU, e.g. H100"),
            ("busy_share", "double", True, "the network's roofline time over its time, >= 0"),
            ("mode", "string", True, "inference or training"),
        ),
        (("p_w", "double"), ("rel_err90", "double")),
        {"device_config": "H100", "busy_share": 0.5, "mode": "inference"},
    ),
}


def folder_model_file(folder: Path) -> str:
    """Which of `FOLDER_MODELS` a model folder holds (its model file's name)."""
    for file in FOLDER_MODELS:
        if (Path(folder) / file).is_file():
            return file
    raise ValueError(f"{folder} holds none of {', '.join(FOLDER_MODELS)}")


def folder_signature(file: str) -> Any:
    """The input and output schema of the folder model whose model file is `file`."""
    from mlflow.models.signature import ModelSignature
    from mlflow.types.schema import ColSpec, Schema

    inputs, outputs, _ = FOLDER_MODELS[file]
    return ModelSignature(
        inputs=Schema([ColSpec(t, n, required=req) for n, t, req, _ in inputs]),
        outputs=Schema([ColSpec(t, n) for n, t in outputs]),
    )


def folder_example(file: str, operations: Path) -> Any:
    """An example input of the folder model whose model file is `file` (None where it has none)."""
    import pandas as pd

    _, _, row = FOLDER_MODELS[file]
    if row:
        return pd.DataFrame([row])
    ops = input_example(operations, (), n=2)
    return None if ops is None else ops.assign(device_config="H100")


def input_example(operations: Path, kinds: tuple[str, ...], n: int = 3) -> Any:
    """A few rows of the operations table of kinds the bundle knows (None when the table is absent)."""
    import pandas as pd

    if not Path(operations).is_file():
        return None
    cols = [c for c, _, _, _ in INPUT_COLUMNS if c != "clock_mhz"]
    try:
        df = pd.read_parquet(operations, columns=[*cols, "kind"])
    except Exception:  # an unreadable table: register without an example rather than fail the training
        return None
    df = df[df["kind"].isin(kinds)] if kinds else df
    if df.empty:
        return None
    df = df.sort_values("flops", kind="stable").drop_duplicates("kind").head(n).drop(columns="kind")
    df["output_shapes"] = [json.dumps([list(map(int, s)) for s in v]) for v in df["output_shapes"]]
    df["parts_json"] = df["parts_json"].fillna("[]")
    return df.reset_index(drop=True)


def describe(bundle: Bundle, split: str) -> str:
    """What a registered version is: what it predicts, from which data, on which split, at which error."""
    s = bundle.scores
    errs = [
        f"{q} MAPE {100 * s[q]['mape']:.1f} %, time-weighted error {100 * s[q]['twe']:.1f} %"
        for q in ("time", "power")
        if q in s and "mape" in s[q] and "twe" in s[q]
    ]
    what = "time per call (s)" + (" and average power (W)" if "power" in bundle.models else "")
    calibrated = bundle.composition is not None and bundle.composition.calibrated
    comp = "a composition layer calibrated on measured networks" if calibrated else "an uncalibrated composition layer"
    return (
        f"Predicts each operation's {what} on {bundle.device_config} in {bundle.mode} mode; networks are composed "
        f"from these by {comp}. Trained on data version {bundle.data_version} "
        f"(evaluated operations of models/{bundle.target}'s train target). Out-of-sample error at split {split} "
        f"(grouped by layer): {'; '.join(errs) or 'n/a'}. Input: rows of data/operations/operations.parquet "
        f"(see the signature); output: t_s, p_w, e_j, source per op."
    )
