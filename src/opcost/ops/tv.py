"""Import torchvision without importing torch._dynamo: a cold `opcost predict` of a new network.

`import torchvision` imports `torchvision.ops.roi_align`, whose only use of `torch._dynamo` is
`from torch._dynamo.utils import is_compile_supported`, a check made when `roi_align` runs. That
one line costs about 1.1 s of a cold start on a 2-core machine (`python -X importtime`), more than
everything else torchvision does, and nothing opcost extracts needs the compiler. So while
torchvision is first imported, `torch._dynamo.utils` is a one-function module whose
`is_compile_supported` imports the real one when called; it is removed right after, so any later
import gets the real module. If torchvision ever needs more of it, the import fails and is simply
done again the usual way.
"""

from __future__ import annotations

import sys
import types
from typing import Any

_DYNAMO_UTILS = "torch._dynamo.utils"


def _is_compile_supported(device_type: Any) -> Any:
    from torch._dynamo.utils import is_compile_supported

    return is_compile_supported(device_type)


def import_torchvision() -> types.ModuleType:
    """torchvision, imported (once) without torch._dynamo (see module docstring)."""
    if "torchvision" in sys.modules or _DYNAMO_UTILS in sys.modules:
        import torchvision

        return torchvision
    import torch  # noqa: F401 - torch first, as torchvision imports it

    shim = types.ModuleType(_DYNAMO_UTILS)
    shim.is_compile_supported = _is_compile_supported  # type: ignore[attr-defined]
    sys.modules[_DYNAMO_UTILS] = shim
    try:
        import torchvision
    except ImportError:
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules.pop(_DYNAMO_UTILS, None)
        import torchvision
    finally:
        if sys.modules.get(_DYNAMO_UTILS) is shim:
            del sys.modules[_DYNAMO_UTILS]
    return torchvision
