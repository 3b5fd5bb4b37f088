"""Trace on meta tensors without importing TorchDynamo (1.2-1.5 s of a cold prediction, 12 s loaded).

Three importers ask for `torch._dynamo` on a prediction's path without needing it:
- torch's `_disable_dynamo` wrapper (`inner` in torch/_compile.py, around the `__torch_dispatch__`
  of every `TorchDispatchMode` such as `FlopCounterMode`, the out= wrappers of the meta
  decompositions, optimizer methods) imports it on its first call only to ask for a "disabled"
  version of the function, which matters only while `torch.compile` traces; opcost never compiles;
- the optimizers' `_use_grad` (torch/optim/optimizer.py, the training step of the memory
  footprint) calls `graph_break()`, a no-op outside `torch.compile`;
- torchvision/ops/roi_align.py imports `is_compile_supported` from `torch._dynamo.utils` when
  `torchvision.models` is imported; it calls it only where torchvision's C++ ops are missing.

`dynamo_stub()` answers those imports, and no other: while it runs, an import finder first on
`sys.meta_path` looks at who imports. Those three get a stand-in (`disable(fn)` is `fn`,
`graph_break()` does nothing, `is_compile_supported` loads the real one when called), which leaves
`sys.modules` as soon as its importer has used it, so no other code finds it there; every other
importer (a user's model file, `transformers`, torch itself) gets the real TorchDynamo, as it would
without opcost. (A stand-in that sat in `sys.modules` for the whole extraction broke imports:
`inspect.getmodule` walks `sys.modules`, and asking it for `__file__` loaded the real TorchDynamo
halfway through the import of `torch.distributed`, so every `hf:` model failed.) A dunder asked of
the stand-in never loads the real module; any other name does.
What stays is the cached answer on the few functions the wrapper served: they are not hidden from a
later `torch.compile` in the same process (a cost for compile speed, never for results, and no
opcost process compiles).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from typing import Any, Callable, Iterator, Sequence

_NAME = "torch._dynamo"
_UTILS = "torch._dynamo.utils"
# The importers served: (the end of the file's path, the function, or "<module>" for module code).
_SERVED = (
    (os.path.join("torch", "_compile.py"), "inner"),
    (os.path.join("torch", "optim", "optimizer.py"), "_use_grad"),
    (os.path.join("torchvision", "ops", "roi_align.py"), "<module>"),
)


def _importer() -> tuple[str, str]:
    """(file, function) of the code that started the import under way: the first frame outside the
    import machinery and this module."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith("<frozen importlib") and frame.f_globals.get("__name__") != __name__:
            return code.co_filename, code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    return "", ""


def _served(who: tuple[str, str]) -> bool:
    return any(who[1] == name and who[0].endswith(os.sep + path) for path, name in _SERVED)


def is_compile_supported(device_type: Any) -> Any:
    """torchvision's roi_align asks this only where its C++ ops are missing: then the real answer."""
    return importlib.import_module(_UTILS).is_compile_supported(device_type)


class _StandIn:
    """One extraction's stand-in `torch._dynamo` (and `.utils`), and the finder that hands them out."""

    def __init__(self) -> None:
        self.module = types.ModuleType(_NAME, "opcost's stand-in (ops/nodynamo.py); other names load the real one")
        self.utils = types.ModuleType(_UTILS, "opcost's stand-in (ops/nodynamo.py); other names load the real one")
        m, u = self.module, self.utils
        m.disable = self._disable  # type: ignore[attr-defined]
        m.graph_break = self._graph_break  # type: ignore[attr-defined]
        m.__getattr__ = lambda name: self._real(_NAME, name)  # type: ignore[method-assign]  # PEP 562
        u.__getattr__ = self._utils_attr  # type: ignore[method-assign]

    def leave_modules(self) -> None:
        """Out of `sys.modules`: no one but the importer that was served finds the stand-in there."""
        for stub in (self.module, self.utils):
            if sys.modules.get(stub.__name__) is stub:
                del sys.modules[stub.__name__]

    def unbind(self) -> None:
        """Out of `sys.modules` and off `torch` (where the import bound it as `torch._dynamo`)."""
        self.leave_modules()
        torch = sys.modules.get("torch")
        if torch is not None and torch.__dict__.get("_dynamo") is self.module:
            delattr(torch, "_dynamo")

    def _disable(self, fn: Callable[..., Any] | None = None, recursive: bool = True, **_: Any) -> Any:
        """`torch._dynamo.disable` where nothing is ever compiled: the function itself."""
        self.leave_modules()
        return (lambda f: f) if fn is None else fn

    def _graph_break(self) -> None:
        """`torch._dynamo.graph_break` outside `torch.compile`: nothing. The stand-in stays bound as
        `torch._dynamo` (the optimizer calls it again after its step) until a real import replaces it."""
        self.leave_modules()

    def _utils_attr(self, name: str) -> Any:
        if name == "is_compile_supported":  # roi_align's `from torch._dynamo.utils import ...`
            self.leave_modules()
            return is_compile_supported
        return self._real(_UTILS, name)

    def _real(self, module: str, name: str) -> Any:
        """What the stand-in lacks: the real module's attribute. Never loaded for a dunder, which
        introspection asks (`inspect.getmodule` wants `__file__`)."""
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self.unbind()
        return getattr(importlib.import_module(module), name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the stand-in for the served importers only; None for every other import, which then
    goes on to the real module."""

    def __init__(self, stand_in: _StandIn) -> None:
        self.stand_in = stand_in

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in (_NAME, _UTILS) or not _served(_importer()):
            return None
        if fullname == _UTILS and sys.modules.get(_NAME) is not self.stand_in.module:
            return None  # the real parent is loaded: its real utils
        return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname == _NAME)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.stand_in.module if spec.name == _NAME else self.stand_in.utils

    def exec_module(self, module: types.ModuleType) -> None:
        return None


@contextlib.contextmanager
def dynamo_stub() -> Iterator[None]:
    """While the body runs, the importers above do not load TorchDynamo; every other import of
    `torch._dynamo` loads the real one."""
    if _NAME in sys.modules:  # loaded already (by the user's code, or a test): nothing to save
        yield
        return
    stand_in = _StandIn()
    finder = _Finder(stand_in)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
        stand_in.unbind()
