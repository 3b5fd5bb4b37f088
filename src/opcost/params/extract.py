"""Section `extract` of params.yaml: the model-input sets whose operations are extracted.

ModelInputSet and ExtractParams are moved here unchanged in style (another change is rewriting how
extract sets are given); the section's list-level checks live in load.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opcost.errors import OpcostError
from opcost.modes import MODES
from opcost.shapes import DTYPES, parse_input_shape, shape_text
from opcost.validation import check_keys, check_name


@dataclass(frozen=True)
class ModelInputSet:
    """A torchvision model at one input shape and dtype, extracted for one or more modes."""

    model: str
    input_shape: tuple[int, ...]
    dtype: str = "float32"
    modes: tuple[str, ...] = ("inference",)

    @property
    def set_id(self) -> str:
        """Stable, readable id: `resnet18:32x3x224x224` (dtype appended unless float32)."""
        base = f"{self.model}:{shape_text(self.input_shape)}"
        return base if self.dtype == "float32" else f"{base}:{self.dtype}"

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "ModelInputSet":
        if not isinstance(raw, dict) or "model" not in raw or "input_shape" not in raw:
            raise OpcostError(f"{where}: expected a mapping with 'model' and 'input_shape', got {raw!r}")
        check_keys(raw, ("model", "input_shape", "dtype", "modes"), where)
        model = raw["model"]
        if not isinstance(model, str) or not model:
            raise OpcostError(f"{where}: 'model' must be a torchvision model name, got {model!r}")
        check_name(model, where, "model")
        shape = parse_input_shape(raw["input_shape"], what=f"{where} input_shape")
        dtype = raw.get("dtype", "float32")
        if dtype not in DTYPES:
            raise OpcostError(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        modes = raw.get("modes", ["inference"])
        if isinstance(modes, str):
            modes = [modes]
        if not isinstance(modes, list) or not modes or any(m not in MODES for m in modes):
            raise OpcostError(f"{where}: modes {modes!r} must be a non-empty list of {', '.join(MODES)}")
        return cls(model=model, input_shape=shape, dtype=dtype, modes=tuple(dict.fromkeys(modes)))


@dataclass(frozen=True)
class ExtractParams:
    sets: tuple[ModelInputSet, ...] = field(default_factory=tuple)
