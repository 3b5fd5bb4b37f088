"""What an operation is, and how to run one again from its description.

An operation is the smallest thing whose cost depends only on itself: a layer (a leaf module, or a
composite module whose work happens in functional calls, such as `MultiheadAttention`) or a
functional call made between modules (a residual `add`, `cat`, `flatten`, ...), together with its
hyper-parameters, input shapes and dtypes.

`OpSpec` holds exactly that, in a JSON-safe canonical form, so that:
- the `op_id` is a hash of the canonical key (kind, hyper-parameters, call layout, inputs), never of
  a repr string, and is the same whichever PyTorch printed or traced the layer;
- the profiler can rebuild a runnable module or function from the spec alone (`build`).

Module hyper-parameters are the keyword arguments of the module's constructor, read back from a
constructed instance (`module_attrs`), so two specs of the same layer agree even when one came from
a traced network and the other from a parsed log line.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import torch
from torch import nn

from opcost.errors import OpcostError
from opcost.ops import kinds
from opcost.ops.keys import NON_KEY_ATTRS, NONFINITE_TAG, canonical_json, encode_float, is_encoded_float, short_hash

CATEGORY_MODULE = "module"
CATEGORY_FUNCTION = "function"

# Constructor arguments that choose placement, initial values or trainability, not computation
# (`Embedding(_weight=..., _freeze=...)`).
_SKIPPED_INIT_ARGS = frozenset({"self", "device", "dtype", "factory_kwargs", "_weight", "_freeze"})


# --------------------------------------------------------------------------------------------
# Canonical, JSON-safe values
# --------------------------------------------------------------------------------------------


class TensorRef(int):
    """Placeholder for the i-th input tensor inside an encoded call (an int subclass for hashing)."""


def encode_value(value: Any, tensors: list[torch.Tensor] | None = None, call: bool = False) -> Any:
    """Turn a Python/PyTorch value into canonical JSON-safe data.

    Tensors become `{"tensor": i}` and are appended to `tensors` (the same tensor object maps to the
    same index, so `mha(x, x, x)` is recorded as self-attention). In hyper-parameters tuples and
    lists are one thing (lists); in call arguments (`call=True`) a tuple stays `{"tuple": [...]}`,
    because `x[(a, b)]` and `x[[a, b]]` index differently.
    """
    if isinstance(value, torch.Tensor):
        if tensors is None:
            raise OpcostError("a tensor appears where only hyper-parameters are allowed")
        for i, t in enumerate(tensors):
            if t is value:
                return {"tensor": i}
        tensors.append(value)
        return {"tensor": len(tensors) - 1}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return encode_float(value)  # -inf (an attention mask's fill) as {"float": "-inf"}: JSON-safe
    if call and isinstance(value, tuple) and not isinstance(value, torch.Size):
        return {"tuple": [encode_value(v, tensors, call) for v in value]}
    if isinstance(value, (list, tuple, torch.Size)):
        return [encode_value(v, tensors, call) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_value(v, tensors, call) for k, v in sorted(value.items())}
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if isinstance(value, slice):
        return {"slice": [encode_value(value.start), encode_value(value.stop), encode_value(value.step)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).replace("torch.", "")}
    if isinstance(value, torch.device):
        # The device an op is told to use is the one it runs on: rebuilt, it follows its inputs.
        return {"device": "input"}
    raise OpcostError(f"cannot record a value of type {type(value).__name__} ({value!r}) in an operation spec")


def encode_opaque(value: Any, tensors: list[torch.Tensor]) -> Any:
    """Like `encode_value(call=True)`, but a value it cannot record becomes `{"opaque": type name}`.

    Used for a functional call that takes something no spec can describe (a library object): the
    call is still counted, with its tensor inputs, but marked as not rebuildable (`decode_value`
    refuses it), so coverage can name it instead of the extraction failing.
    """
    try:
        return encode_value(value, tensors, call=True)
    except OpcostError:
        pass
    if isinstance(value, tuple) and not isinstance(value, torch.Size):
        return {"tuple": [encode_opaque(v, tensors) for v in value]}
    if isinstance(value, list):
        return [encode_opaque(v, tensors) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_opaque(v, tensors) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return {"opaque": type(value).__name__}


def decode_value(value: Any, tensors: list[torch.Tensor] | None = None) -> Any:
    """Inverse of `encode_value`; `{"tensor": i}` becomes `tensors[i]` (lists stay lists)."""
    if isinstance(value, list):
        return [decode_value(v, tensors) for v in value]
    if isinstance(value, dict):
        if set(value) == {"tensor"}:
            if tensors is None:
                return TensorRef(value["tensor"])
            return tensors[value["tensor"]]
        if set(value) == {"tuple"}:
            return tuple(decode_value(v, tensors) for v in value["tuple"])
        if set(value) == {"dtype"}:
            return getattr(torch, value["dtype"])
        if set(value) == {"slice"}:
            return slice(*value["slice"])
        if set(value) == {"ellipsis"}:
            return Ellipsis
        if set(value) == {"memory_format"}:
            return getattr(torch, value["memory_format"])
        if set(value) == {"device"}:
            return tensors[0].device if tensors else torch.device("meta")
        if is_encoded_float(value):
            return float(value[NONFINITE_TAG])
        if set(value) == {"opaque"}:
            raise OpcostError(f"a {value['opaque']} argument was not recorded: the call cannot be rebuilt")
        return {k: decode_value(v, tensors) for k, v in value.items()}
    return value


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# --------------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInput:
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class OpSpec:
    """One operation: what runs (kind, target, attrs), how it is called, and on what inputs."""

    kind: str  # class name for modules ("Conv2d"), normalised function name ("add", "cat")
    category: str  # CATEGORY_MODULE or CATEGORY_FUNCTION
    target: str  # importable path used to rebuild it: "torch.nn.modules.conv.Conv2d", "torch.cat"
    attrs: dict[str, Any] = field(default_factory=dict)  # canonical hyper-parameters
    args: list[Any] = field(default_factory=list)  # encoded positional call arguments
    kwargs: dict[str, Any] = field(default_factory=dict)  # encoded keyword call arguments
    inputs: tuple[TensorInput, ...] = ()

    def key(self) -> dict[str, Any]:
        """The canonical key. The target is left out (`torch.add` and `Tensor.add` are one op), and
        so are NON_KEY_ATTRS (`x += y` and `x + y` are one op)."""
        return {
            "kind": self.kind,
            "attrs": {k: v for k, v in self.attrs.items() if k not in NON_KEY_ATTRS},
            "args": self.args,
            "kwargs": self.kwargs,
            "inputs": [i.to_json() for i in self.inputs],
        }

    def key_json(self) -> str:
        return canonical_json(self.key())

    @property
    def op_id(self) -> str:
        """First 16 hex digits of SHA-256 over the canonical key: stable across runs and machines."""
        return short_hash(self.key_json())

    @property
    def legacy_op_id(self) -> str:
        """The id this op had under a torch without the constructor arguments a newer one added at their old
        behaviour (ops/kinds.ADDED_ARGS): how measurements made under that torch find this op."""
        added = kinds.added_args(self.kind)
        attrs = {k: v for k, v in self.attrs.items() if not (k in added and added[k] == v)}
        return self.op_id if attrs == self.attrs else replace(self, attrs=attrs).op_id

    @property
    def dtype(self) -> str:
        """The op's compute dtype: that of its first floating-point input (else its first input)."""
        for i in self.inputs:
            if i.dtype.startswith(("float", "bfloat", "complex")):
                return i.dtype
        return self.inputs[0].dtype if self.inputs else "float32"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "category": self.category,
            "target": self.target,
            "attrs": self.attrs,
            "args": self.args,
            "kwargs": self.kwargs,
            "inputs": [i.to_json() for i in self.inputs],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "OpSpec":
        return cls(
            kind=data["kind"],
            category=data["category"],
            target=data["target"],
            attrs=data.get("attrs", {}),
            args=data.get("args", []),
            kwargs=data.get("kwargs", {}),
            inputs=tuple(TensorInput(tuple(i["shape"]), i["dtype"]) for i in data.get("inputs", [])),
        )


# --------------------------------------------------------------------------------------------
# Modules: constructor arguments read back from an instance
# --------------------------------------------------------------------------------------------


def _recurrent_parameters(cls: type) -> list[inspect.Parameter] | None:
    """`nn.LSTM`, `nn.GRU` and `nn.RNN` take `*args, **kwargs` and pass them on to `RNNBase` with the
    mode filled in: their arguments are RNNBase's without `mode` (and without `proj_size`, which
    only LSTM takes), plus `nn.RNN`'s `nonlinearity`, which it pops from its kwargs. None for any other class."""
    if not (isinstance(cls, type) and issubclass(cls, nn.RNNBase)) or cls is nn.RNNBase:
        return None
    skip = {"mode"} if issubclass(cls, nn.LSTM) else {"mode", "proj_size"}  # GRU and RNN refuse proj_size
    params = [p for p in inspect.signature(nn.RNNBase.__init__).parameters.values() if p.name not in skip]
    if issubclass(cls, nn.RNN):
        params.append(inspect.Parameter("nonlinearity", inspect.Parameter.KEYWORD_ONLY, default="tanh"))
    return params


def init_parameters(cls: type) -> list[inspect.Parameter]:
    """The constructor parameters of a module class that describe its computation."""
    recurrent = _recurrent_parameters(cls)
    # the class's own constructor, self included
    params = recurrent if recurrent is not None else list(inspect.signature(cls.__init__).parameters.values())  # type: ignore[misc]
    return [p for p in params if p.name not in _SKIPPED_INIT_ARGS and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def module_attrs(module: nn.Module, cls: type | None = None) -> dict[str, Any]:
    """Canonical constructor arguments of a module instance, read back from its attributes.

    Tensor-valued attributes stand for boolean switches (`bias=True` keeps a `bias` parameter).
    Fails when an argument cannot be read back, rather than guessing a default. `cls` reads the
    arguments of a base class instead (a subclass that only changes the constructor, such as
    torchvision's `Conv3DSimple(nn.Conv3d)`, is that base class).
    """
    cls = cls or type(module)
    getters = kinds.init_getters(cls.__name__)
    attrs: dict[str, Any] = {}
    for p in init_parameters(cls):
        if p.name in getters:
            value = getters[p.name](module)
        elif hasattr(module, p.name):
            value = getattr(module, p.name)
            if isinstance(value, torch.Tensor) or (value is None and isinstance(p.default, bool)):
                value = value is not None
        else:
            raise OpcostError(
                f"cannot read constructor argument {p.name!r} back from a {cls.__name__} module; "
                f"add a getter for it to its kind's init_getters in opcost/ops/kinds.py"
            )
        if isinstance(value, nn.Module) or (callable(value) and not isinstance(value, type)):
            raise OpcostError(f"{cls.__name__}.{p.name} is a module or function; such layers are not leaf ops")
        attrs[p.name] = encode_value(value)
    return attrs


def target_of_class(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# --------------------------------------------------------------------------------------------
# Functions: names and targets
# --------------------------------------------------------------------------------------------


def function_target(func: Callable[..., Any]) -> str:
    """Importable path of a function seen by a TorchFunctionMode: `torch.Tensor.add`, `torch.cat`."""
    name = getattr(func, "__name__", None)
    if name is None:
        raise OpcostError(f"cannot name function {func!r}")
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", "") or ""
    if module is None or qualname.startswith(("TensorBase.", "Tensor.")):
        return f"torch.Tensor.{name}"  # C methods, and those torch/_tensor.py defines (split, __rsub__)
    return f"{module}.{name}"


def function_kind(func_name: str) -> tuple[str, bool]:
    """Normalised kind and in-place flag: `__iadd__`/`add_` -> ("add", True), `__getitem__` -> "getitem"."""
    name = func_name
    inplace = False
    if name.startswith("__i") and name.endswith("__") and name[3:-2] in _INPLACE_DUNDER:
        return name[3:-2], True
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
        if name.startswith("r") and name[1:] in ("add", "mul"):
            name = name[1:]  # commutative: `2 * x` is `x * 2`
    elif name.endswith("_") and not name.startswith("_"):
        name, inplace = name[:-1], True
    return name, inplace


_INPLACE_DUNDER = frozenset({"add", "sub", "mul", "truediv", "floordiv", "matmul", "pow", "and", "or", "xor"})


def resolve_target(target: str) -> Any:
    """Import a dotted path (`torch.nn.modules.conv.Conv2d`, `torch._C._nn.avg_pool2d`)."""
    parts = target.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
            return obj
        except AttributeError:
            continue
    raise OpcostError(f"cannot import operation target {target!r}")


# --------------------------------------------------------------------------------------------
# Building runnable operations
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def meta_parameters() -> Iterator[None]:
    """Construct modules with parameters and buffers on the meta device: no memory, no init cost.

    Unlike `with torch.device("meta")` this leaves tensors that constructors compute with (RegNet's
    width schedule, for one) on the CPU, so every torchvision builder works.
    """
    orig_param = nn.Module.register_parameter
    orig_buffer = nn.Module.register_buffer

    def register_parameter(self: nn.Module, name: str, param: nn.Parameter | None) -> None:
        if param is not None and param.device.type != "meta":
            param = nn.Parameter(param.detach().to("meta"), requires_grad=param.requires_grad)
        orig_param(self, name, param)

    def register_buffer(self: nn.Module, name: str, tensor: torch.Tensor | None, persistent: bool = True) -> None:
        if tensor is not None and tensor.device.type != "meta":
            tensor = tensor.to("meta")
        orig_buffer(self, name, tensor, persistent)

    nn.Module.register_parameter = register_parameter  # type: ignore[method-assign]
    nn.Module.register_buffer = register_buffer  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.register_parameter = orig_param  # type: ignore[method-assign]
        nn.Module.register_buffer = orig_buffer  # type: ignore[method-assign]


def build_module(spec: OpSpec, device: torch.device | str = "meta") -> nn.Module:
    """Instantiate the spec's module class with its hyper-parameters, on `device`, in its dtype."""
    cls = resolve_target(spec.target)
    # Sizes stay lists: torch layers accept lists and tuples alike, torchvision's Swin wants lists.
    kwargs = {k: decode_value(v) for k, v in spec.attrs.items()}
    added = kinds.added_args(spec.kind)
    if added and isinstance(cls, type):
        takes = inspect.signature(cls).parameters
        for name, value in added.items():
            if name in kwargs and name not in takes and kwargs[name] == value:
                del kwargs[name]  # an older torch: the layer does without it what the argument says
    dtype = getattr(torch, spec.dtype)
    try:
        if torch.device(device).type == "meta":
            with meta_parameters():
                module: nn.Module = cls(**kwargs)  # a module-category spec's target is an nn.Module class
        else:
            module = cls(**kwargs).to(device)
    except TypeError as exc:  # an argument this torch's layer does not take: the op cannot be built here
        raise OpcostError(f"{spec.kind} does not build under torch {torch.__version__}: {exc}") from None
    if dtype.is_floating_point:
        module = module.to(dtype=dtype)
    return module


def make_inputs(
    spec: OpSpec,
    device: torch.device | str = "meta",
    generator: torch.Generator | None = None,
    requires_grad: bool = False,
) -> list[torch.Tensor]:
    """Random inputs of the recorded shapes and dtypes (integer inputs are zeros: valid indices)."""
    tensors = []
    for inp in spec.inputs:
        dtype = getattr(torch, inp.dtype)
        if dtype.is_floating_point:
            t = torch.randn(inp.shape, dtype=dtype, device=device, generator=generator)
            if requires_grad:
                t.requires_grad_(True)
        elif dtype == torch.bool:
            t = torch.ones(inp.shape, dtype=dtype, device=device)
        else:
            t = torch.zeros(inp.shape, dtype=dtype, device=device)
        tensors.append(t)
    return tensors


@dataclass
class Runnable:
    """A callable that performs the operation once on fixed inputs."""

    spec: OpSpec
    fn: Callable[..., Any]
    inputs: list[torch.Tensor]

    def __call__(self) -> Any:
        args = decode_value(self.spec.args, self.inputs)
        kwargs = decode_value(self.spec.kwargs, self.inputs)
        return self.fn(*args, **kwargs)


def build(
    spec: OpSpec,
    device: torch.device | str = "meta",
    generator: torch.Generator | None = None,
    requires_grad: bool = False,
) -> Runnable:
    """A runnable operation: the module (or function) and random inputs, on `device`."""
    fn = build_module(spec, device) if spec.category == CATEGORY_MODULE else resolve_target(spec.target)
    return Runnable(spec, fn, make_inputs(spec, device, generator, requires_grad))


def flat_tensors(value: Any) -> list[torch.Tensor]:
    """All tensors in a nested output (tuples, lists, dicts, namedtuples) in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in flat_tensors(v)]
    return []
