"""Builders the tests share: op specs, records and rows made from real modules, synthetic GPUs and their
roofline rows, the six-model op/network tables of the split tests, a small bundle, tiny measurement
campaigns, a fake card's power trace, and real lines of the thesis' A30 log.

One place, so that a test module never imports another test module: importing one runs its module-level
code, can import it twice under two names (`test_x` and `tests.model.test_x`), and ties a test file's
helpers to whichever test first needed them (tests/test_test_imports.py keeps it so). The measure stack,
the cross-device model and scikit-learn are imported inside the functions that need them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from torch import nn

from opcost.devices import Device
from opcost.model.basis.features import Encoding, OpRecord, op_record
from opcost.model.composition.bundle import Bundle, QuantityModel
from opcost.model.composition.compose import Quantity, Question, ScoreSet
from opcost.ops.features import op_metrics
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, TensorInput, module_attrs, target_of_class
from opcost.params.profile import CampaignParams
from opcost.params.xdevice import XdeviceParams

# --------------------------------------------------------------------------------------------
# A composition layer's score sets (Composition.scores)
# --------------------------------------------------------------------------------------------


def layer_scores(
    time: Sequence[float] | None = None, energy: Sequence[float] | None = None, question: Question = "pooled",
    cov_t: Sequence[float] | None = None, cov_e: Sequence[float] | None = None,
    groups_t: Sequence[str] | None = None, groups_e: Sequence[str] | None = None,
) -> dict[tuple[Question, Quantity], ScoreSet]:  # fmt: skip
    """One question's score sets, for `Composition(scores=...)` (merge several with |): a quantity given no
    scores gets no set; covariates and labels None: none recorded."""

    def some(x: Sequence | None) -> list | None:
        return None if x is None else list(x)

    out: dict[tuple[Question, Quantity], ScoreSet] = {}
    if time is not None:
        out[question, "time"] = ScoreSet([float(x) for x in time], some(groups_t), some(cov_t))
    if energy is not None:
        out[question, "energy"] = ScoreSet([float(x) for x in energy], some(groups_e), some(cov_e))
    return out


# --------------------------------------------------------------------------------------------
# One op from a real module and input shape, as extraction would build it (no trace)
# --------------------------------------------------------------------------------------------


def module_spec(module: nn.Module, shape: tuple[int, ...]) -> OpSpec:
    """The op `module` called on one float32 tensor of `shape`."""
    return OpSpec(type(module).__name__, CATEGORY_MODULE, target_of_class(type(module)), module_attrs(module),
                  [{"tensor": 0}], {}, (TensorInput(tuple(shape), "float32"),))  # fmt: skip


def module_record(module: nn.Module, shape: tuple[int, ...]) -> OpRecord:
    """The op's record as the warm-path caches (row cache, prediction cache) hold it."""
    spec = module_spec(module, shape)
    return op_record(spec, {**op_metrics(spec).as_dict(), "parts": []})


def catalog_row(spec: OpSpec) -> dict[str, Any]:
    """The op as a row of the operations table (schemas.OPERATIONS) in memory: op id and kind, output
    shapes as lists, no parts."""
    return {
        "op_id": spec.op_id,
        "kind": spec.kind,
        "spec_json": json.dumps(spec.to_json()),
        **op_metrics(spec).as_dict(),
        "parts_json": "[]",
    }


def pyfunc_row(module: nn.Module, shape: tuple[int, ...]) -> dict[str, Any]:
    """The op as a registered pyfunc model takes it: output shapes as JSON text (a pyfunc signature column
    is a scalar), no op id or kind (the model derives both from spec_json)."""
    spec = module_spec(module, shape)
    metrics = op_metrics(spec).as_dict()
    return {"spec_json": json.dumps(spec.to_json()), **metrics, "output_shapes": json.dumps(metrics["output_shapes"]),
            "parts_json": ""}  # fmt: skip


# ops the measurement tests run for real on the CPU
CONV = module_spec(nn.Conv2d(8, 8, 3, padding=1), (2, 8, 16, 16))
BROKEN = module_spec(nn.Linear(10, 4), (2, 5))  # 5 features into a 10-feature layer: fails at run time

# --------------------------------------------------------------------------------------------
# Tiny measurement campaigns on the CPU (a fake GPU where clocks or NVML energy are needed)
# --------------------------------------------------------------------------------------------


def campaign(**kw: Any) -> CampaignParams:
    """Campaign `t` on the CPU: two trials of short windows, no energy source; `kw` overrides any field."""
    base: dict[str, Any] = dict(
        name="t",
        device="cpu",
        modes=("inference",),
        sets=("x",),
        networks=False,
        trials=2,
        min_time_s=0.01,
        window_s=0.03,
        energy_source="none",
        max_instances=4,
        instance_budget_mb=8,
    )
    base.update(kw)
    return CampaignParams(**base)


def op_units(specs: list[OpSpec], modes: tuple[str, ...] = ("inference",)) -> list:
    """One measurement unit per op and mode."""
    from opcost.measure.campaign import Unit

    return [Unit("op", s.op_id, m, s.kind, spec=s) for s in specs for m in modes]


def shard_campaign(root: Path):
    """8 ReLU ops at one locked clock, on a fake GPU whose state outlives each process (a killed shard's
    subprocess builds it too: tests/measure/test_measure.py SHARD_SCRIPT)."""
    from fake_nvml import FakeNvml
    from opcost.measure.campaign import Campaign, make_plan

    specs = [module_spec(nn.ReLU(), (2, 4, n, n)) for n in range(4, 12)]
    c = campaign(name="k", trials=2, window_s=0.1, max_instances=2, clocks_mhz=(900,))
    fake = FakeNvml(state_file=root / "gpu.json")
    return Campaign(
        make_plan(c, op_units(specs)), root / "out", root / "parts", nvml_lib=fake, state_dir=root / "state"
    )


WATTS = 180.0  # what the fake card of steady_trace draws in the known-measurement tests


def steady_trace(power_w: float, counter_w: float | None = None, seconds: float = 30.0, step: float = 0.05):
    """A fake NVML card drawing `power_w` steadily; its energy counter grows at `counter_w` W (default the same)."""
    counter_w = power_w if counter_w is None else counter_w
    return [
        [i * step, 1e6 + counter_w * i * step * 1000, power_w * 1000, 1410, 1215, 60, 100, 0]
        for i in range(int(round(seconds / step)) + 1)
    ]


# real first lines of data/external/nicolai-thesis/ops/inference/A30.log (thesis logs, data/external/README.md)
A30_CONV_LINE = (
    "Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False) (32, 3, 56, 56) "
    "0.0003358443377730762 55.32621974426894 0.014987827531664388 1.1739236603653267 57950 19.462179373949766 "
    "164.7376880346628 3.4854224102891465 641.230886836077 13.605775223634136 0.0004030025884383089 "
    "2024-11-17_14-45-42 2024-11-17_14-46-06 5.391090115417475e-07"
)
A30_RELU_LINE = (
    "ReLU(inplace=True) (32, 64, 28, 28) 1.0489756986790424e-05 1.2565083247413844 0.0005150506464108457 "
    "0.004384556351824504 1558640 16.349754829891026 119.78431209833406 0.4178635268228188 489.61103381872783 "
    "1.7084862280519362 1.3100523533336756e-05 2024-11-17_14-46-31 2024-11-17_14-46-51 8.807712019982645e-10"
)

# --------------------------------------------------------------------------------------------
# Synthetic GPUs and the cross-device model's rows on them
# --------------------------------------------------------------------------------------------

TERA, GB = 1e12, 1e9
# Spread over peak, bandwidth, SMs and L2 like real GPUs, none in the real table (tests add them to DEVICES).
SYNTH_GPUS = {
    f"SYN{i}": Device(f"SYN{i}", f"Synthetic GPU {i}", "Synthetic", fp32 * TERA, None, 2 * fp32 * TERA, bw * GB,
                      16 * 2**30, sms, l2 * 2**20, 1000, 1500, (300, 1500), 250)
    for i, (fp32, bw, sms, l2) in enumerate([(5, 200, 20, 2), (8, 320, 40, 4), (14, 900, 80, 6), (19.5, 1555, 108, 40),
                                             (30, 1000, 60, 48), (10, 600, 56, 8)])
}  # fmt: skip
XKIND_EFFICIENCY = {"linear": 0.6, "bmm": 0.5, "conv": 0.45, "add": 0.8, "layernorm": 0.4, "softmax": 0.5}
FAST_XDEVICE = XdeviceParams(n_estimators=40, max_depth=4, learning_rate=0.3, threads=1, floor_s=1e-9)


def synthetic_xdevice_rows(rng: np.random.Generator, n: int = 120) -> pd.DataFrame:
    """Ops whose time is exactly their roofline time over a known per-kind efficiency (XKIND_EFFICIENCY), on
    every synthetic GPU: `n` per kind and GPU."""
    from opcost.model.crossdevice import xdevice

    rows = []
    for cfg, dev in SYNTH_GPUS.items():
        for xk, eff in XKIND_EFFICIENCY.items():
            for _ in range(n):
                if xk in xdevice.GEMM_XKINDS:
                    m, nn_, k = (float(2 ** rng.integers(8, 13)) for _ in range(3))
                    flops, nbytes = 2 * m * nn_ * k, 4 * (m * k + k * nn_ + m * nn_)
                    numel = m * nn_
                else:
                    m = nn_ = k = 0.0
                    numel = float(2 ** rng.integers(18, 26))
                    flops, nbytes = 0.0, 12 * numel
                peak = xdevice.op_peak(xk, dev, True)
                t = max(flops / peak, nbytes / dev.bandwidth) / eff
                rows.append({"xkind": xk, "batch": 1.0, "m": m, "n": nn_, "k": k, "flops": flops, "bytes": nbytes,
                             "numel": numel, "t_s": t, "device_config": cfg, "wall_clock": 0.0})  # fmt: skip
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# Six models of three families: measured op rows, networks and their ops (the split tests)
# --------------------------------------------------------------------------------------------

LEFT_OUT_MODELS = {"net_a": "fam1", "net_b": "fam1", "net_c": "fam2", "net_d": "fam2", "net_e": "fam3", "net_f": "fam3"}
LEFT_OUT_SIZES = (8, 16)


def linear_op_row(op_id: str, batch: int, k: int, n: int, fams: list[str]) -> dict:
    """A measured A30 inference row of Linear(k, n) on (batch, k): time the launch floor plus FLOPs at 5 TFLOP/s."""
    flops = 2 * batch * k * n
    t = 5e-6 + flops / 5e12
    spec = {"args": [{"tensor": 0}], "attrs": {"bias": True, "in_features": k, "out_features": n},
            "category": "module", "inputs": [{"dtype": "float32", "shape": [batch, k]}], "kind": "Linear",
            "kwargs": {}, "target": "torch.nn.modules.linear.Linear"}  # fmt: skip
    return {"op_id": op_id, "kind": "Linear", "device_config": "A30", "mode": "inference", "phase": "forward",
            "clock_mhz": None, "power_limit_w": np.nan, "t_s": t, "p_w": 100.0 + k / 10, "e_j": t * 100.0,
            "output_shapes": [[batch, n]], "flops": flops, "bytes_read": 4 * (batch * k + k * n),
            "bytes_written": 4 * batch * n, "params": k * n + n, "is_view": False, "spec_json": json.dumps(spec),
            "parts_json": "[]", "layer_id": f"L{k}x{n}", "families": fams, "estimated": False}  # fmt: skip


def left_out_data(tiny: str = "", small: tuple[int, int] = (32, 32)):
    """(TargetData, networks, network ops) of LEFT_OUT_MODELS at LEFT_OUT_SIZES; model `tiny` takes `small`
    images, every other model 224 x 224 ones."""
    from opcost.model.training.fit import prepare

    ops, nets, nops = [], [], []
    for m_i, (model, fam) in enumerate(LEFT_OUT_MODELS.items()):
        for size in LEFT_OUT_SIZES:
            set_id = f"{model}:{size}"
            total = 0.0
            for j in range(4):
                k, n = 64 * (m_i + 1), 32 * (j + 1)
                row = linear_op_row(f"{model}-{size}-{j}", size * 32, k, n, [fam])
                ops.append(row)
                nops.append({"set_id": set_id, "op_id": row["op_id"], "calls": 2})
                total += 2 * row["t_s"]
            # network times unique (the composition spy knows a network by its time)
            t_net = 1.1 * total + 1e-5 + (100 * m_i + size) * 1e-9
            nets.append(
                {
                    "set_id": set_id,
                    "model": model,
                    "family": fam,
                    "t_s": t_net,
                    "e_j": 110.0 * total,
                    "input_shape": [size, 3, *(small if model == tiny else (224, 224))],
                }
            )
    df = pd.DataFrame(ops)
    data = prepare(df, "inference", "A30")
    catalog = df.drop(columns=["t_s", "p_w", "e_j"]).set_index("op_id")
    nops = pd.DataFrame(nops).join(catalog[["kind", "output_shapes", "flops", "bytes_read", "bytes_written", "params",
                                            "is_view", "spec_json", "parts_json"]], on="op_id")  # fmt: skip
    return data, pd.DataFrame(nets), nops


# --------------------------------------------------------------------------------------------
# A bundle
# --------------------------------------------------------------------------------------------


def small_bundle() -> Bundle:
    """An in-memory bundle `X-inference`: one small forest's time model over Conv2d and ReLU."""
    from sklearn.ensemble import RandomForestRegressor

    from opcost.model.basis.trees import compile_ensemble

    enc = Encoding("baseline", ("Conv2d", "ReLU"))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, len(enc.columns)))
    y = X[:, 0] * 3 + X[:, 5]
    ens = compile_ensemble(RandomForestRegressor(n_estimators=5, random_state=0).fit(X, y), X)
    qm = QuantityModel("rf-baseline", ens, enc, "raw")
    return Bundle("X-inference", "X", "inference", "forward", {"time": qm}, ("Conv2d", "ReLU"), (), {}, "v", "h")


# --------------------------------------------------------------------------------------------
# Tiny own bundles for a test project, recorded in its dvc.lock as `dvc repro` records them in a clone (a bundle
# nothing vouches for is refused); the numbers are not what such tests check: that a question is built, traced
# and answered, or refused, is. And a clone of a trained project, as a fresh clone's `dvc pull` brings it.
def tiny_bundle(root: Path, target: str, ranges: dict | None = None, composition: Any = None) -> None:
    """An own bundle for `target` under root/models/: one small forest over Linear and ReLU; other kinds
    are charged by the costing's fallbacks. `ranges` and `composition`: the Bundle fields, where a test needs them."""
    from sklearn.ensemble import RandomForestRegressor

    from opcost.model.basis.trees import compile_ensemble

    enc = Encoding("baseline", ("Linear", "ReLU"))
    X = np.random.default_rng(0).normal(size=(60, len(enc.columns)))
    ens = compile_ensemble(RandomForestRegressor(n_estimators=3, random_state=0).fit(X, np.abs(X[:, 0]) * 1e-5), X)
    device, mode = target.rsplit("-", 1)
    model = QuantityModel("rf-baseline", ens, enc, "raw")
    b = Bundle(target, device, mode, "forward", {"time": model}, ("Linear", "ReLU"), (), {}, "v", "h")
    b.ranges, b.composition = dict(ranges or {}), composition
    b.save(root / "models" / target)


def record_in_lock(root: Path, missing: tuple[str, ...] = ()) -> None:
    """root/dvc.lock recording every folder under root/models/ with its content md5, and each target of
    `missing` (a folder the checkout lacks) with a made-up one."""
    from opcost.model.records.integrity import dir_md5

    folders = sorted(p for p in (root / "models").iterdir() if p.is_dir()) if (root / "models").is_dir() else []
    md5 = {p.name: dir_md5(p) for p in folders} | {t: "0123456789abcdef0123456789abcdef" for t in missing}
    lines = ["schema: '2.0'", "stages:"]
    for target in sorted(md5):
        lines += [
            f"  train@{target}:",
            f"    cmd: python3 -m opcost.stages.train --target {target}",
            "    outs:",
            f"    - path: models/{target}",
            "      hash: md5",
            f"      md5: {md5[target]}.dir",
        ]
    (root / "dvc.lock").write_text("\n".join(lines) + "\n")


def clone_of(trained, tmp_path: Path) -> Path:
    """A project holding only the trained bundles, as a fresh clone's `dvc pull` brings them (no
    MLflow store yet); params.yaml lists just those targets."""
    import shutil
    import subprocess
    import sys

    import yaml

    paths, params, first = trained
    root = tmp_path / "clone"
    root.mkdir()
    # a DVC project whose dvc.lock records each model folder, as a clone's does (sync-registry checks
    # the folders' content against it, and `dvc status` for changes)
    stages = {f"train-{t}": {"cmd": "true", "outs": [f"models/{t}"]} for t in sorted(first)}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    raw = yaml.safe_load(paths.params.read_text())
    raw["train"]["targets"] = sorted(first)
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    for t in first:
        shutil.copytree(paths.model_dir(t), root / "models" / t)
    # a fresh clone is committed work on main: the registry moves `champion` only there
    git = ["git", "-c", "user.name=opcost-tests", "-c", "user.email=tests@opcost.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    dvc = [str(Path(sys.executable).with_name("dvc")), "--quiet"]
    subprocess.run([*dvc, "init"], cwd=root, check=True)
    subprocess.run([*dvc, "commit", "--force"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "clone"], cwd=root, check=True)
    return root


# --------------------------------------------------------------------------------------------
# A transferred answer's costs (model/prediction/xdevice_predict.TransferredOps)
# --------------------------------------------------------------------------------------------


def transferred_ops(records: list[OpRecord], calls: Sequence[float], time_s: float, interval: tuple[float, float],
                    t_s: Sequence[float] | None = None, factor: Sequence[float] | None = None,
                    optimizer_s: float = 0.0, sum_s: float = 0.0) -> Any:  # fmt: skip
    """A TransferredOps of `records` for at_clock, energy and busy_share: what they read given, the rest a plain
    transferred answer's (no op measured: factor 1, scale 1, no few-shot factors, a host that costs nothing)."""
    from opcost.model.prediction.xdevice_predict import HostSplit, TransferredOps

    n = len(records)
    return TransferredOps(
        ids=[r.op_id for r in records], records=list(records), calls=np.asarray(calls, float),
        t_s=np.zeros(n) if t_s is None else np.asarray(t_s, float), time_s=time_s, interval=interval,
        distance=0.0, other_share=1.0, tf32=True, optimizer_s=optimizer_s, sum_s=sum_s,
        sources=["transferred"] * n, fitted=None, factors={}, factor_ops=0,
        factor=np.ones(n) if factor is None else np.asarray(factor, float), scale=1.0,
        host=HostSplit("none", "a test", 0.0, 0.0, 0.0, 0.0),
    )  # fmt: skip
