"""torchvision classification models: valid names, default input shapes, meta-device instances."""

from __future__ import annotations

import difflib
import warnings
from functools import lru_cache

import torch
from torch import nn

from opcost.errors import OpcostError
from opcost.ops.spec import meta_parameters

# Networks whose stem expects a larger default image than 224x224.
_DEFAULT_SIDE = {"inception_v3": 299}


@lru_cache(maxsize=1)
def classification_models() -> tuple[str, ...]:
    """Every classification model torchvision ships (`list_models(module=torchvision.models)`)."""
    import torchvision

    return tuple(torchvision.models.list_models(module=torchvision.models))


def check_model_name(name: str) -> str:
    """Return `name` if torchvision has it, else fail listing the closest valid names."""
    names = classification_models()
    if name in names:
        return name
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    hint = f"closest: {', '.join(close)}" if close else f"valid names include {', '.join(names[:8])}, ..."
    raise OpcostError(f"unknown model {name!r}; {hint} (all {len(names)}: torchvision.models.list_models)")


def default_input_shape(name: str, batch: int = 2) -> tuple[int, int, int, int]:
    side = _DEFAULT_SIDE.get(name, 224)
    return (batch, 3, side, side)


def meta_model(name: str, dtype: str = "float32") -> nn.Module:
    """The model with random (meta) weights: built in milliseconds, whatever its size."""
    import torchvision

    check_model_name(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchvision's init-weights FutureWarnings
        with meta_parameters():
            model: nn.Module = torchvision.models.get_model(name)  # torchvision ships no type information
    return model.to(dtype=getattr(torch, dtype))
