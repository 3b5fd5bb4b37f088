"""What one timed iteration is: an operation (a block of instances) or a whole network.

Operations: a block holds K instances, each with its own random weights and inputs, and one block
execution runs each once, so consecutive iterations touch different memory (the thesis cycled 500
copies for the same reason). K is as large as `max_instances` and a memory budget allow.
- inference: `eval()` and `torch.inference_mode()`;
- training: `train()`, forward, then backward from a fixed random output gradient; input and
  parameter gradients are reset every iteration so nothing accumulates. Autograd forbids in-place
  ops on leaf inputs, so in-place layers (`ReLU(inplace=True)`, `x += y`) are measured in their
  out-of-place form in training; the row says so (`variant`).
Networks: one instance; inference is a forward pass, training one SGD step (forward,
cross-entropy loss on random labels, backward, optimizer step), as the thesis measured them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch
from torch import nn

from opcost.ops.features import op_metrics
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, Runnable, build, flat_tensors
from opcost.params.extract import ModelInputSet

VARIANT_AS_IS = "as-is"
VARIANT_OUT_OF_PLACE = "out-of-place"


@dataclass
class Workload:
    block: Callable[[], None]  # runs `instances` iterations
    instances: int
    variant: str = VARIANT_AS_IS
    runs: list[Runnable] = field(default_factory=list)  # an op's instances (their inputs, parameters)


def device_sync(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        dev = torch.device(device)
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


def is_inplace(spec: OpSpec) -> bool:
    return bool(spec.attrs.get("inplace"))


def out_of_place(spec: OpSpec) -> OpSpec:
    """The same op without in-place writes (`ReLU(inplace=False)`, `Tensor.add` for `add_`)."""
    attrs = {**spec.attrs, "inplace": False}
    target = spec.target
    if spec.category != CATEGORY_MODULE and target.endswith("_"):
        target = target[:-1]
    return replace(spec, attrs=attrs, target=target)


def instance_count(spec: OpSpec, max_instances: int, budget_bytes: float) -> int:
    m = op_metrics(spec)
    per_instance = max(m.bytes_read + m.bytes_written, 1)
    return int(max(1, min(max_instances, budget_bytes // per_instance)))


def op_workload(
    spec: OpSpec, mode: str, device: str, seed: int, max_instances: int = 8, budget_bytes: float = 64e6
) -> Workload:
    training = mode == "training"
    variant = VARIANT_AS_IS
    if training and is_inplace(spec):
        spec, variant = out_of_place(spec), VARIANT_OUT_OF_PLACE
    k = instance_count(spec, max_instances, budget_bytes)
    torch.manual_seed(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    runs: list[Runnable] = [build(spec, device, generator=gen, requires_grad=training) for _ in range(k)]
    for r in runs:
        if isinstance(r.fn, nn.Module):
            r.fn.train(training)
    if not training:

        def infer() -> None:
            with torch.inference_mode():
                for r in runs:
                    r()

        return Workload(infer, k, variant, runs)

    grads = []
    for r in runs:
        outs = [o for o in flat_tensors(r()) if o.requires_grad]
        grads.append([torch.randn(o.shape, dtype=o.dtype, device=o.device, generator=gen) for o in outs])
        _reset_grads(r)

    def train() -> None:
        for r, g in zip(runs, grads):
            outs = [o for o in flat_tensors(r()) if o.requires_grad]
            if outs:
                torch.autograd.backward(outs, g)
            _reset_grads(r)

    return Workload(train, k, variant, runs)


def _reset_grads(r: Runnable) -> None:
    for t in r.inputs:
        t.grad = None
    if isinstance(r.fn, nn.Module):
        for p in r.fn.parameters():
            p.grad = None


def network_workload(mis: ModelInputSet, mode: str, device: str, seed: int) -> Workload:
    if mis.is_user:
        return user_network_workload(mis, mode, device, seed)
    import torchvision

    torch.manual_seed(seed)
    dtype = getattr(torch, mis.dtype)
    model = torchvision.models.get_model(mis.model).to(device=device, dtype=dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(mis.input_shape, dtype=dtype, device=device, generator=gen)
    if mode == "inference":
        model.eval()

        def infer() -> None:
            with torch.inference_mode():
                model(x)

        return Workload(infer, 1)

    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    logits = _logits(model(x))
    labels = torch.randint(0, logits.shape[-1], (mis.input_shape[0],), device=device, generator=gen)
    opt.zero_grad(set_to_none=True)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(_logits(model(x)), labels)
        loss.backward()
        opt.step()

    return Workload(step, 1)


def user_network_workload(mis: ModelInputSet, mode: str, device: str, seed: int) -> Workload:
    """A user's network (module:callable) as ops/netspec.py builds it, with seeded weights and inputs.

    It has no loss of its own: a training step is forward, backward from fixed random gradients of
    its float outputs (as an op in training), and an SGD step."""
    from opcost.ops.netspec import NetSpec, build_model, make_inputs

    loaded = build_model(NetSpec.from_set(mis), meta=False, seed=seed)
    model = loaded.module.to(device=device)
    args, kwargs = make_inputs(loaded, device, seed)
    if mode == "inference":
        model.eval()

        def infer() -> None:
            with torch.inference_mode():
                model(*args, **kwargs)

        return Workload(infer, 1)

    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator(device=device).manual_seed(seed)
    grads = [
        torch.randn(o.shape, dtype=o.dtype, device=o.device, generator=gen)
        for o in flat_tensors(model(*args, **kwargs))
        if o.requires_grad
    ]
    opt.zero_grad(set_to_none=True)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        outs = [o for o in flat_tensors(model(*args, **kwargs)) if o.requires_grad]
        if outs:
            torch.autograd.backward(outs, grads)
        opt.step()

    return Workload(step, 1)


def _logits(out: Any) -> torch.Tensor:
    """The main logits of a classifier output (GoogLeNet/Inception return namedtuples in training)."""
    if isinstance(out, torch.Tensor):
        return out
    return flat_tensors(out)[0]


def blocks_for(seconds: float, block_time_s: float, chunks: int) -> int:
    """Blocks per chunk so that `chunks` chunks last about `seconds` (at least one each)."""
    if block_time_s <= 0:
        return 1
    return max(1, math.ceil(seconds / block_time_s / chunks))
