"""Trace on meta tensors without importing TorchDynamo (1.2-1.5 s of a cold prediction, 12 s loaded).

Torch wraps some internals with `torch._disable_dynamo` (the `__torch_dispatch__` of every
`TorchDispatchMode` subclass such as `FlopCounterMode`, the out= wrappers of the meta
decompositions). The wrapper imports `torch._dynamo` on its first call only to ask it for a
"disabled" version of the function, which matters only while `torch.compile` traces, and opcost
never compiles. `dynamo_stub()` serves that one request (`disable(fn)` is `fn`) from a stand-in
module while extraction runs; any other use of `torch._dynamo` imports the real one at once, and
the stand-in is gone afterwards. What stays is the cached answer on those few functions: they are
not hidden from a later `torch.compile` in the same process (a cost for compile speed, never for
results, and no opcost process compiles).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from typing import Any, Callable, Iterator

_NAME = "torch._dynamo"


def _disable(fn: Callable[..., Any] | None = None, recursive: bool = True, **_: Any) -> Any:
    """`torch._dynamo.disable` where nothing is ever compiled: the function itself."""
    if fn is None:
        return lambda f: f
    return fn


def _make_stub(torch: Any) -> types.ModuleType:
    stub = types.ModuleType(_NAME, "opcost's stand-in: serves disable(); anything else loads the real one")

    def real(name: str) -> Any:
        _remove(torch, stub)
        return getattr(importlib.import_module(_NAME), name)

    stub.disable = _disable  # type: ignore[attr-defined]
    stub.__getattr__ = real  # type: ignore[method-assign]  # PEP 562: only for names the stub lacks
    return stub


def _remove(torch: Any, stub: types.ModuleType) -> None:
    if sys.modules.get(_NAME) is stub:
        del sys.modules[_NAME]
    if torch.__dict__.get("_dynamo") is stub:
        delattr(torch, "_dynamo")


@contextlib.contextmanager
def dynamo_stub() -> Iterator[None]:
    """While the body runs, `import torch._dynamo` for a `disable()` does not load TorchDynamo."""
    import torch

    if _NAME in sys.modules:  # loaded already (by the user's code, or a test): nothing to save
        yield
        return
    stub = _make_stub(torch)
    sys.modules[_NAME] = stub
    torch._dynamo = stub  # torch.__getattr__ would import the real one
    try:
        yield
    finally:
        _remove(torch, stub)
