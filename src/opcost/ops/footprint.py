"""Memory footprints as data, the allocator's rounding rule, and whether a step fits on a device.

No torch here: a prediction from a cached extraction reads footprints and answers "does it fit?"
without importing it. `ops/memory.py` computes the footprints (see its docstring for the method).

The rule modelled is PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp):
- every request becomes a block rounded up to a multiple of 512 B (at least 512 B); the peak of
  the sum of live blocks is what `torch.cuda.max_memory_allocated` reports (`peak_bytes`);
- blocks are carved from segments reserved from the driver: blocks up to 1 MiB from 2 MiB
  segments, blocks under 10 MiB from 20 MiB segments, larger blocks from a segment of their own
  rounded up to 2 MiB. `peak_reserved_bytes` packs the blocks live at the peak into segments of
  their class with no fragmentation: a lower bound of `torch.cuda.max_memory_reserved`.
A step fits on a device when that reserve plus `CUDA_CONTEXT_BYTES` (the CUDA context, cuBLAS and
cuDNN handles and workspaces, which the allocator does not count) is at most the device's memory.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opcost.devices import DeviceConfig

OPTIMIZERS = ("sgd", "adam")
BLOCK = 512  # bytes: the CUDA caching allocator's smallest block and rounding unit
SMALL_BLOCK = 1 << 20  # blocks up to 1 MiB come from 2 MiB segments
SMALL_SEGMENT = 2 << 20
LARGE_BLOCK = 10 << 20  # blocks under 10 MiB come from 20 MiB segments
LARGE_SEGMENT = 20 << 20
ROUND_LARGE = 2 << 20  # larger blocks get a segment of their own, rounded up to 2 MiB
CUDA_CONTEXT_BYTES = 512 << 20  # context, handles, library workspaces: outside the allocator's count


def round_block(nbytes: int) -> int:
    """The block the CUDA caching allocator hands out for a request of `nbytes`."""
    return BLOCK * max(1, math.ceil(nbytes / BLOCK)) if nbytes > 0 else 0


def reserved_estimate(small: int, medium: int, large: int) -> int:
    """Segments holding live blocks of each class (sums of rounded blocks), packed with no gaps."""
    return (
        SMALL_SEGMENT * math.ceil(small / SMALL_SEGMENT)
        + LARGE_SEGMENT * math.ceil(medium / LARGE_SEGMENT)
        + ROUND_LARGE * math.ceil(large / ROUND_LARGE)
    )


@dataclass
class Footprint:
    """One step's memory, in bytes (blocks rounded as the CUDA allocator does, except `peak_raw_bytes`)."""

    mode: str  # inference or training
    optimizer: str | None  # sgd / adam for training
    parameters: int
    buffers: int
    inputs: int
    gradients: int  # every parameter gradient (training)
    optimizer_state: int  # momentum buffers (sgd) or first and second moments (adam)
    activations: int  # saved for backward (training) / largest live set of intermediates (inference)
    workspace: int  # the largest transient: allocated and freed within one operation call
    peak_bytes: int  # peak of the rounded live total: what torch.cuda.max_memory_allocated reports
    peak_raw_bytes: int  # the same timeline, sizes as requested (what a CPU allocator sees)
    peak_reserved_bytes: int  # segments the allocator would reserve at the peak
    peak_phase: str  # forward / backward / optimizer: where the peak is

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Footprint":
        return cls(**d)

    @property
    def needed_bytes(self) -> int:
        """Device memory the step needs: the reserve at the peak plus the CUDA context."""
        return self.peak_reserved_bytes + CUDA_CONTEXT_BYTES


def fits(fp: Footprint, memory_bytes: float) -> bool:
    """Whether the step fits in a device's memory (see the module docstring)."""
    return fp.needed_bytes <= memory_bytes


def footprint_key(mode: str, optimizer: str | None) -> str:
    """Where a network's footprints are stored: "inference", or the optimizer's name in training."""
    if mode == "inference":
        return "inference"
    if optimizer not in OPTIMIZERS:
        from opcost.errors import OpcostError

        raise OpcostError(f"unknown optimizer {optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
    return optimizer


def memory_summary(fp: Footprint) -> dict[str, Any]:
    """The footprint, what it needs, and whether it fits on each device of the table."""
    from opcost.devices import DEVICES

    return {
        **fp.to_json(),
        "cuda_context_bytes": CUDA_CONTEXT_BYTES,
        "needed_bytes": fp.needed_bytes,
        "fits": {name: fits(fp, d.memory_bytes) for name, d in DEVICES.items()},
    }


def device_fits(fp: Footprint, device: DeviceConfig | None) -> bool | None:
    """Whether the step fits on a resolved device config's device; None for one the table does not know."""
    return None if device is None else fits(fp, device.device.memory_bytes)
