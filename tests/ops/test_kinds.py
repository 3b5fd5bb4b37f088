"""The op-kind registry (ops/kinds.py): every kind the extractor emits has a row, the facts agree with
each other, the ops package never reaches into the model package, and a view costs the no-op floor."""

from __future__ import annotations

import ast

import pytest
import torch
from torch import nn

from opcost.closure import SRC, closure
from opcost.devices import find_device
from opcost.model.basis.features import OpRecord
from opcost.model.basis.physics import is_noop, proxy_kind
from opcost.model.composition.costing import OpCoster
from opcost.ops import kinds
from opcost.ops.extract import trace, trace_call
from opcost.ops.features import op_metrics
from opcost.ops.models import meta_model
from opcost.ops.parts import op_parts
from opcost.ops.spec import CATEGORY_FUNCTION, CATEGORY_MODULE, OpSpec, TensorInput

# The networks of the thesis measurements (params.yaml extract sets), each once: kinds do not depend on
# the input size, so a batch of 2 (train-mode batch norm wants two values a channel) at the usual side.
THESIS_NETWORKS = ("alexnet", "convnext_base", "densenet121", "efficientnet_b0", "efficientnet_b4",
                   "efficientnet_v2_m", "googlenet", "inception_v3", "resnet18", "resnet50", "shufflenet_v2_x1_0",
                   "squeezenet1_1", "swin_t", "swin_v2_t", "vit_b_32")  # fmt: skip


def _emitted(calls) -> set[str]:
    """The kinds of the calls, and of the kernels of every call costed from its parts."""
    found = set()
    for c in calls:
        found.add(c.spec.kind)
        if kinds.has_parts(c.spec.kind):
            found |= {p["kind"] for p in op_parts(c.spec)}
    return found


@pytest.mark.slow
def test_every_kind_the_thesis_networks_emit_is_in_the_registry():
    unknown: dict[str, str] = {}
    for name in THESIS_NETWORKS:
        side = 299 if name == "inception_v3" else 224
        model = meta_model(name)
        for training in (False, True):
            for k in _emitted(trace(model, (2, 3, side, side), training=training).calls):
                if k not in kinds.KINDS:
                    unknown.setdefault(k, name)
    assert not unknown, f"kinds with no row in ops/kinds.py (kind: first network): {unknown}"


def test_recurrent_layers_and_their_kernels_are_in_the_registry():
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
            self.gru = nn.GRUCell(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y, _ = self.lstm(x)
            return self.gru(y[:, -1])

    x = torch.empty(2, 5, 8, device="meta")
    with torch.device("meta"):
        net = Net()
    emitted = _emitted(trace_call(net, (x,), {}).calls)
    assert {"LSTM", "GRUCell", "getitem"} <= emitted
    assert {"addmm", "sigmoid", "tanh"} <= emitted  # the LSTM's kernels
    assert emitted <= set(kinds.KINDS), emitted - set(kinds.KINDS)  # no `unsafe_split`: a view, not a kernel
    assert kinds.is_sequence("LSTM") and kinds.is_recurrent("GRUCell") and not kinds.is_sequence("GRUCell")


def test_no_module_of_the_ops_package_loads_the_model_package():
    ops_dir, model_dir = SRC / "opcost" / "ops", SRC / "opcost" / "model"
    for f in sorted(ops_dir.glob("*.py")):
        loaded = closure(f"opcost.ops.{f.stem}")
        reached = sorted(p.relative_to(SRC).as_posix() for p in loaded if model_dir in p.parents)
        assert not reached, f"ops/{f.name} loads {reached}: the arrow points from model/ to ops/, not back"
    assert SRC / "opcost" / "ops" / "kinds.py" in closure("opcost.model.basis.physics")


def test_the_registry_loads_no_library():
    """Costing a cached extraction asks the table without torch (or anything else) loaded."""
    tree = ast.parse((SRC / "opcost" / "ops" / "kinds.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "dataclasses", "typing"}, imported


def test_the_facts_agree_with_each_other():
    gemm = set(kinds.CATEGORIES[kinds.GEMM])
    assert gemm <= kinds.MATMUL_KINDS  # a GEMM-like op runs on the matrix units
    assert kinds.COMPOSITE_KINDS <= gemm and kinds.GEMM_PART_KINDS <= gemm
    assert {k for k in kinds.KINDS if kinds.bias_first(k)} <= kinds.GEMM_PART_KINDS
    assert all(kinds.has_parts(k) for k in kinds.RECURRENT_KINDS)
    assert all(kinds.has_parts(k) for k in kinds.COMPOSITE_KINDS)
    assert set(kinds.FALLBACK) | set(kinds.FALLBACK.values()) <= set(kinds.CATEGORIES)
    # every kind an ATen name maps to has a row, so a kernel of a composite is costed by its category
    assert set(kinds.ATEN_KIND.values()) <= set(kinds.KINDS)
    assert kinds.part_kind("_softmax") == "softmax" and kinds.part_kind("native_layer_norm") == "layer_norm"
    assert not kinds.launches_work("_unsafe_view") and kinds.launches_work("bmm")
    # a kind the table does not know has no facts
    assert kinds.category_of("NoSuchLayer") is None and kinds.has_parts("NoSuchLayer")
    assert not kinds.facts("NoSuchLayer").matmul and not kinds.is_composite("NoSuchLayer")


def test_proxies_follow_the_registry_order():
    # a convolution stands in for a convolution; any other product is first a linear layer
    assert proxy_kind("Conv1d", {"Linear", "Conv2d"}) == "Conv2d"
    assert proxy_kind("bmm", {"Linear", "Conv2d"}) == "Linear"
    # a data-movement kind with no known kind of its own category falls back to the first elementwise kind
    assert proxy_kind("cat", {"ReLU", "Conv2d"}) == "ReLU"
    assert proxy_kind("LSTM", {"ReLU", "Linear"}) is None  # no category: costed from its parts


# -- flatten of a contiguous tensor is a view: no work, the no-op floor ---------------------------


def _flatten_specs() -> list[OpSpec]:
    x = (TensorInput((32, 512, 1, 1), "float32"),)
    return [
        OpSpec("flatten", CATEGORY_FUNCTION, "torch.flatten", {"inplace": False}, [{"tensor": 0}, 1], {}, x),
        OpSpec(
            "reshape", CATEGORY_FUNCTION, "torch.Tensor.reshape", {"inplace": False}, [{"tensor": 0}, 32, 512], {}, x
        ),
        OpSpec(
            "Flatten",
            CATEGORY_MODULE,
            "torch.nn.modules.flatten.Flatten",
            {"start_dim": 1, "end_dim": -1},
            [{"tensor": 0}],
            {},
            x,
        ),
    ]


@pytest.mark.parametrize("spec", _flatten_specs(), ids=lambda s: s.kind)
def test_flatten_of_a_contiguous_tensor_is_a_view_that_moves_nothing(spec):
    m = op_metrics(spec)
    assert m.output_shapes == ((32, 512),)
    assert m.is_view and m.bytes_read == 0 and m.bytes_written == 0 and m.flops == 0
    assert is_noop(spec.kind, {}, m.as_dict(), "inference") and is_noop(spec.kind, {}, m.as_dict(), "training")


def test_resnet18s_flatten_costs_the_devices_no_op_time():
    flatten = next(c.spec for c in trace(meta_model("resnet18"), (32, 3, 224, 224)).calls if c.spec.kind == "flatten")
    rec = OpRecord(flatten.op_id, "flatten", {}, (32, 512, 1, 1), 32 * 512, op_metrics(flatten).as_dict())
    coster = OpCoster(
        mode="inference", device=find_device("A30"), models={}, kinds=("ReLU",), floor_s=3e-6, noop_power_w=60.0,
        charge_ratio=1.0, median_power_w=100.0, noop_s=4e-6,
    )  # fmt: skip
    costs = coster.cost([rec])
    assert costs.source == ["floor"] and costs.proxy == [None]
    assert costs.t_s[0] == 4e-6 and costs.p_w[0] == 60.0
