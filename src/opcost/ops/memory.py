"""Peak device memory of a network: inference, and one training step with SGD (momentum) or Adam.

The network runs once more on its meta tensors under a `TorchDispatchMode` that adds each new
storage to a live total and subtracts it (through a `weakref.finalize`) when PyTorch frees it, so the
timeline follows what autograd keeps and frees, the gradients, the optimizer's state and every
temporary, without a hand-written rule per layer. Training is the steady state of a loop (optimizer
state allocated, `foreach=True`); `scaled_dot_product_attention` runs as the fused kernel, not meta's
L x L math path. The peak is kept in allocator blocks (`peak_bytes`) and as requested
(`peak_raw_bytes`); the rounding and the fit rule are in `ops/footprint.py`.
Design: docs/memory.md#the-trace.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, TypedDict

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from opcost.ops.footprint import (
    LARGE_BLOCK,
    OPTIMIZERS,
    SMALL_BLOCK,
    Footprint,
    reserved_estimate,
    round_block,
)
from opcost.ops.spec import flat_tensors


class _Tracker(TorchDispatchMode):
    """The live total of the storages that ops allocate on one device type (see module docstring)."""

    def __init__(self, device_type: str) -> None:
        super().__init__()
        self.device_type = device_type
        self.live = self.live_raw = 0
        self.by_class = [0, 0, 0]  # rounded bytes of live small / medium / large blocks
        self.peak = self.peak_raw = self.peak_reserved = 0
        self.phase = "forward"
        self.peak_phase = "forward"
        self._alive: dict[int, weakref.finalize[[], torch.UntypedStorage]] = {}
        self.window_peak = 0  # peak since the last `mark`, for per-op transients

    def _class(self, size: int) -> int:
        return 0 if size <= SMALL_BLOCK else (1 if size < LARGE_BLOCK else 2)

    def add(self, storage: torch.UntypedStorage) -> None:
        key = storage._cdata
        if key in self._alive:
            return
        raw = storage.nbytes()
        size = round_block(raw)
        cls = self._class(size)
        self.live += size
        self.live_raw += raw
        self.by_class[cls] += size
        self.peak_raw = max(self.peak_raw, self.live_raw)
        self.window_peak = max(self.window_peak, self.live)
        if self.live > self.peak:
            self.peak = self.live
            self.peak_phase = self.phase
            self.peak_reserved = reserved_estimate(*self.by_class)

        def free(key: int = key, size: int = size, raw: int = raw, cls: int = cls) -> None:
            self.live -= size
            self.live_raw -= raw
            self.by_class[cls] -= size
            self._alive.pop(key, None)

        self._alive[key] = weakref.finalize(storage, free)

    def add_tensors(self, tensors: Any) -> int:
        """Count tensors that exist before the step (parameters, inputs); their rounded bytes."""
        before = self.live
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.device.type == self.device_type:
                self.add(t.untyped_storage())
        return self.live - before

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in flat_tensors(out):
            if t.device.type == self.device_type:
                self.add(t.untyped_storage())
        return out

    def detach_all(self) -> None:
        """Stop counting (finalizers would otherwise run into a tracker nobody reads)."""
        for f in list(self._alive.values()):
            f.detach()
        self._alive.clear()


class _FusedAttentionOnMeta(TorchFunctionMode):
    """`F.scaled_dot_product_attention` on meta tensors as the fused (flash) kernel: see docstring."""

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention and not kwargs.get("enable_gqa"):
            q, k, v = args[:3]
            rest = dict(zip(("attn_mask", "dropout_p", "is_causal", "scale"), args[3:]))
            rest.update(kwargs)
            if q.device.type == "meta" and q.dim() == 4:
                out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                    q,
                    k,
                    v,
                    float(rest.get("dropout_p", 0.0)),
                    bool(rest.get("is_causal", False)),
                    attn_mask=rest.get("attn_mask"),
                    scale=rest.get("scale"),
                )
                return out[0]
        return func(*args, **kwargs)


class _OpWindows:
    """Forward hooks on the operation modules: the largest transient inside one call."""

    def __init__(self, tracker: _Tracker, model: nn.Module, is_op: Callable[[nn.Module], bool]) -> None:
        self.tracker = tracker
        self.largest = 0
        self._depth = 0
        self._handles = []
        for m in model.modules():
            if is_op(m):
                self._handles.append(m.register_forward_pre_hook(self._pre))
                self._handles.append(m.register_forward_hook(self._post))

    def _pre(self, *_: Any) -> None:
        if self._depth == 0:
            self.tracker.window_peak = self.tracker.live
        self._depth += 1

    def _post(self, *_: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.largest = max(self.largest, self.tracker.window_peak - self.tracker.live)

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


def _loss(output: Any) -> torch.Tensor | None:
    parts = [t.float().sum() for t in flat_tensors(output) if t.is_floating_point() and t.requires_grad]
    return sum(parts[1:], parts[0]) if parts else None


def make_optimizer(name: str, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """`sgd`: SGD with momentum 0.9; `adam`: Adam; both the foreach form CUDA uses by default. A network with
    nothing to train has no training step: one line, not the optimizer's traceback."""
    if not params:
        from opcost.errors import OpcostError

        raise OpcostError("--mode training: the network has no trainable parameters, so it has no training step; "
                          "use --mode inference")  # fmt: skip
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=True)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3, foreach=True)
    raise ValueError(f"unknown optimizer {name!r}; valid: {', '.join(OPTIMIZERS)}")


def _state_tensors(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]


def train_step(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], opt: torch.optim.Optimizer) -> None:
    """One training step as this module defines it: forward, sum loss, backward, step, zero_grad."""
    loss = _loss(model(*args, **kwargs))
    if loss is not None:
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _device_type(model: nn.Module, args: tuple[Any, ...]) -> str:
    for t in [*model.parameters(), *flat_tensors(list(args))]:
        return t.device.type
    return "meta"


def footprint(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    mode: str,
    optimizer: str | None = None,
    is_op: Callable[[nn.Module], bool] | None = None,
) -> Footprint:
    """Peak memory of one step of `model(*args, **kwargs)` (see the module docstring)."""
    from opcost.ops.extract import is_op_module

    device_type = _device_type(model, args)
    training = mode == "training"
    params = [p for p in model.parameters()]
    trainable = [p for p in params if p.requires_grad]
    opt = None
    if training:
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"a training footprint needs an optimizer: one of {', '.join(OPTIMIZERS)}")
        model.train()
        opt = make_optimizer(optimizer, trainable)
        with _FusedAttentionOnMeta():
            train_step(model, args, kwargs, opt)  # allocates the optimizer state: the steady state
    else:
        model.eval()
    tracker = _Tracker(device_type)
    windows = _OpWindows(tracker, model, is_op or is_op_module)
    saved: dict[int, int] = {}
    try:
        p_bytes = tracker.add_tensors(params)
        b_bytes = tracker.add_tensors(list(model.buffers()))
        i_bytes = tracker.add_tensors(flat_tensors([list(args), kwargs]))
        s_bytes = tracker.add_tensors(_state_tensors(opt)) if opt is not None else 0
        static = set(tracker._alive)

        def pack(t: torch.Tensor) -> torch.Tensor:
            st = t.untyped_storage()
            if t.device.type == device_type and st._cdata not in static:
                saved[st._cdata] = round_block(st.nbytes())
            return t

        with _FusedAttentionOnMeta(), tracker:
            if training:
                with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    loss = _loss(model(*args, **kwargs))
                tracker.phase = "backward"
                if loss is not None:
                    loss.backward()
                del loss
                grads = sum(round_block(p.grad.untyped_storage().nbytes()) for p in trainable if p.grad is not None)
                tracker.phase = "optimizer"
                assert opt is not None  # training always builds one
                opt.step()
                opt.zero_grad(set_to_none=True)
            else:
                with torch.inference_mode():
                    out = model(*args, **kwargs)
                del out
                grads = 0
        peak_live_intermediate = tracker.peak - (p_bytes + b_bytes + i_bytes + s_bytes)
        return Footprint(
            mode=mode,
            optimizer=optimizer if training else None,
            parameters=p_bytes,
            buffers=b_bytes,
            inputs=i_bytes,
            gradients=grads,
            optimizer_state=s_bytes,
            activations=sum(saved.values()) if training else peak_live_intermediate,
            workspace=windows.largest,
            peak_bytes=tracker.peak,
            peak_raw_bytes=tracker.peak_raw,
            peak_reserved_bytes=tracker.peak_reserved,
            peak_phase=tracker.peak_phase,
        )
    finally:
        windows.remove()
        tracker.detach_all()


def network_memory(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], mode: str) -> dict[str, Footprint]:
    """The footprints a prediction in `mode` may ask for: inference, or training per optimizer."""
    if mode == "inference":
        return {"inference": footprint(model, args, kwargs, "inference")}
    return {opt: footprint(model, args, kwargs, "training", opt) for opt in OPTIMIZERS}


class CpuPeak(TypedDict):
    """`measure_cpu_peak`'s record: the measured peak and what it is made of (bytes), and the step's time."""

    peak_bytes: int  # existing_bytes + the peak of the step's allocations
    existing_bytes: int  # the storages that exist before the step
    events: int  # the allocation and free events the profiler recorded
    step_s: float  # wall time of the recorded step


def measure_cpu_peak(
    model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], mode: str, optimizer: str | None = None
) -> CpuPeak:
    """What the CPU allocator records for the same step on real tensors: the validation's measurement.

    `torch.profiler` with `profile_memory=True` records every allocation and free during the step;
    the peak of their running sum plus the bytes that exist before it (parameters, buffers, inputs,
    and in training the optimizer state of a first, unrecorded step) is the measured peak, in bytes
    as requested. Allocations a library makes outside PyTorch's allocator are not seen.
    """
    import time

    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = None
    if mode == "training":
        model.train()
        opt = make_optimizer(optimizer or "sgd", trainable)
        train_step(model, args, kwargs, opt)  # the optimizer state: the steady state
    else:
        model.eval()
    existing: dict[int, int] = {}
    before = [*model.parameters(), *model.buffers(), *flat_tensors([list(args), kwargs])]
    for t in before + (_state_tensors(opt) if opt is not None else []):
        if t.device.type == "cpu":
            st = t.untyped_storage()
            existing[st.data_ptr()] = st.nbytes()
    start = time.perf_counter()
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        if opt is not None:
            train_step(model, args, kwargs, opt)
        else:
            with torch.inference_mode():
                out = model(*args, **kwargs)
            del out
    seconds = time.perf_counter() - start
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    )
    live = peak = 0
    for _, n in events:
        live += n
        peak = max(peak, live)
    base = sum(existing.values())
    return {"peak_bytes": base + peak, "existing_bytes": base, "events": len(events), "step_s": seconds}
