"""Which network, on which inputs: model references, typed input specs, and the network they make.

A user names a network in one of four ways (`--model`, with `--model-arg key=value` as keyword
arguments of its builder):
- a torchvision model, any of `torchvision.models.list_models()`: classification, segmentation,
  detection, video, optical flow and the quantizable variants (built with `weights=None` and,
  where the builder has one, `weights_backbone=None`: nothing is downloaded);
- `package.module:callable` or `path/to/file.py:callable`, a function or class returning an
  `nn.Module`;
- `hf:<model_type>` (`hf:gpt2`, `hf:bert`, `hf:vit`): the Hugging Face `transformers` base model of
  that type, built from `AutoConfig.for_model(model_type, **model_args)` with no weights and no
  download; `hf:<ClassName>` (`hf:GPT2LMHeadModel`) builds that class from its own config class.

Inputs are `dtype:shape[:vocab=N]` (`float32:32,3,224,224`, `int64:8,512:vocab=50257`), passed
positionally in order. Integer inputs are drawn below a bound: `vocab=` where given, else the
number of rows of the model's first `nn.Embedding`, else 1 (zeros: valid for any index). Without
inputs, torchvision and Hugging Face models get their family's default (`default_inputs`); a
user's own model must say what it takes.

`NetSpec` is the whole description; `key()` is JSON that names it stably (a user file's content
hash included, so editing the file is a new network) and needs no torch, so a cached extraction can
be found without importing it. Networks are built with meta parameters (no memory, no init cost);
`transformers` is imported only when an `hf:` model is asked for.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from opcost.errors import OpcostError

INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "bool")
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
INPUT_HELP = "DTYPE:D0,D1,...[:vocab=N], e.g. float32:32,3,224,224 or int64:8,512:vocab=50257"
HF_PREFIX = "hf:"
HF_SEQUENCE = 128  # default token count of a text model
DEFAULT_BATCH = 2

# Families of torchvision.models (the submodule that registers a name) and their default inputs.
TV_FAMILIES = ("classification", "segmentation", "detection", "video", "optical_flow", "quantization")


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputSpec:
    """One positional input: shape, dtype, and for integer inputs the bound values stay below."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    vocab: int | None = None

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    def text(self) -> str:
        base = f"{self.dtype}:{','.join(map(str, self.shape))}"
        return base if self.vocab is None else f"{base}:vocab={self.vocab}"

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype, "vocab": self.vocab}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "InputSpec":
        return cls(tuple(d["shape"]), d["dtype"], d.get("vocab"))


def parse_input(text: str, what: str = "--input") -> InputSpec:
    """`float32:32,3,224,224`, `int64:8,512`, `int64:8,512:vocab=50257` -> InputSpec, or fail clearly."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3):
        raise OpcostError(f"malformed {what} {text!r}: expected {INPUT_HELP}")
    dtype, shape_text = parts[0].strip(), parts[1]
    if dtype not in FLOAT_DTYPES + INT_DTYPES:
        raise OpcostError(
            f"malformed {what} {text!r}: dtype {dtype!r} is not one of {', '.join(FLOAT_DTYPES + INT_DTYPES)}"
        )
    try:
        shape = tuple(int(s) for s in shape_text.replace("x", ",").split(","))
    except ValueError:
        raise OpcostError(f"malformed {what} {text!r}: the shape must be positive integers ({INPUT_HELP})") from None
    if not shape or any(s <= 0 for s in shape):
        raise OpcostError(f"malformed {what} {text!r}: the shape must be positive integers ({INPUT_HELP})")
    vocab = None
    if len(parts) == 3:
        key, _, value = parts[2].partition("=")
        if key.strip() != "vocab" or not value.strip().isdigit() or int(value) <= 0:
            raise OpcostError(f"malformed {what} {text!r}: the third field may only be vocab=N with N > 0")
        if dtype in FLOAT_DTYPES or dtype == "bool":
            raise OpcostError(f"malformed {what} {text!r}: vocab= applies to integer inputs only")
        vocab = int(value)
    return InputSpec(shape, dtype, vocab)


def image_input(shape: tuple[int, ...], dtype: str = "float32") -> InputSpec:
    return InputSpec(tuple(int(s) for s in shape), dtype)


def parse_model_args(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`["n_layer=12", "attn_implementation=eager"]` -> {"n_layer": 12, "attn_implementation": "eager"}.

    Values are JSON where they parse as JSON (numbers, true/false/null, lists), else strings.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise OpcostError(f"malformed --model-arg {item!r}: expected key=value, e.g. num_classes=10")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


# --------------------------------------------------------------------------------------------
# Model references and the network description
# --------------------------------------------------------------------------------------------


def ref_kind(name: str) -> str:
    """ "hf", "file" (path/to/file.py:callable), "import" (package.module:callable) or "torchvision"."""
    if name.startswith(HF_PREFIX):
        return "hf"
    if ":" in name:
        return "file" if name.partition(":")[0].endswith(".py") else "import"
    return "torchvision"


def user_file(path: str, base_dir: str = "") -> Path:
    """A user's model file: a relative path from a set file is found in that file's folder (`base_dir`);
    one given on the command line (`base_dir` "") in the current directory, as a shell would."""
    p = Path(path)
    return p if p.is_absolute() or not base_dir else Path(base_dir) / p


def _file_hash(name: str, base_dir: str = "") -> str | None:
    """SHA-256 of the source that defines the model (a user file, or an importable module's file)."""
    kind = ref_kind(name)
    path: str | None = None
    if kind == "file":
        path = str(user_file(name.rpartition(":")[0], base_dir))
    elif kind == "import":
        with contextlib.suppress(Exception):
            spec = importlib.util.find_spec(name.partition(":")[0])
            path = spec.origin if spec is not None else None
    if path and os.path.isfile(path):
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return None


@dataclass(frozen=True)
class NetSpec:
    """A network question: the model, its builder's keyword arguments, its inputs and its dtype.

    `inputs=()` means the model family's default inputs. `dtype` is the parameters' dtype (float
    inputs keep their own).
    """

    model: str
    inputs: tuple[InputSpec, ...] = ()
    model_args: tuple[tuple[str, Any], ...] = ()
    dtype: str = "float32"
    # Where a relative model file is found: the folder of the set file it came from ("": the current
    # directory, as for `--model`). Not part of the question's identity (key(): the file's content is).
    base_dir: str = field(default="", compare=False, repr=False)

    @classmethod
    def make(
        cls,
        model: str,
        inputs: Any = (),
        model_args: dict[str, Any] | None = None,
        dtype: str = "float32",
    ) -> "NetSpec":
        """From friendlier values: `inputs` as InputSpecs, `--input` strings, or one image shape."""
        if dtype not in FLOAT_DTYPES:
            raise OpcostError(f"dtype {dtype!r} is not one of {', '.join(FLOAT_DTYPES)}")
        if inputs is None:
            inputs = ()
        if isinstance(inputs, str):
            inputs = [inputs]
        if inputs and all(isinstance(i, int) for i in inputs):
            inputs = [InputSpec(tuple(inputs), dtype)]
        specs = tuple(i if isinstance(i, InputSpec) else parse_input(i) for i in inputs)
        args = tuple(sorted((model_args or {}).items()))
        return cls(model, specs, args, dtype)

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.model_args)

    @property
    def kind(self) -> str:
        return ref_kind(self.model)

    @property
    def label(self) -> str:
        """`hf:gpt2(n_layer=2)`: the model and its arguments, as shown in tables."""
        if not self.model_args:
            return self.model
        return f"{self.model}({', '.join(f'{k}={json.dumps(v)}' for k, v in self.model_args)})"

    @property
    def input_text(self) -> str:
        return " ".join(i.text() for i in self.inputs) if self.inputs else "default"

    def key(self) -> dict[str, Any]:
        """What names this network in a cache: JSON, no torch needed."""
        return {
            "model": self.model,
            "model_args": [[k, v] for k, v in self.model_args],
            "inputs": [i.to_json() for i in self.inputs],
            "dtype": self.dtype,
            "source": _file_hash(self.model, self.base_dir),
        }

    def with_inputs(self, inputs: tuple[InputSpec, ...]) -> "NetSpec":
        return NetSpec(self.model, tuple(inputs), self.model_args, self.dtype, self.base_dir)

    # The identity columns the extraction tables and coverage rows carry (as ModelInputSet has).
    @property
    def set_id(self) -> str:
        return f"{self.label}:{self.input_text.replace(' ', ';')}"

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.inputs[0].shape if self.inputs else ()

    @classmethod
    def from_set(cls, mis: Any) -> "NetSpec":
        """An extract set (config.ModelInputSet: a torchvision name or a user's module:callable with its
        builder's arguments, one N-D input, its dtype and token bound) as a NetSpec."""
        spec = InputSpec(tuple(mis.input_shape), mis.input_dtype or mis.dtype, mis.vocab)
        return cls(mis.model, (spec,), tuple(mis.model_args), mis.dtype, getattr(mis, "base_dir", ""))


# --------------------------------------------------------------------------------------------
# Building the module
# --------------------------------------------------------------------------------------------


@dataclass
class LoadedModel:
    """A built network and what it needs to be called."""

    module: Any  # nn.Module
    family: str  # a TV_FAMILIES entry, "hf", or "user"
    inputs: tuple[InputSpec, ...]  # the inputs it is called with (defaults filled in)
    notes: list[str] = field(default_factory=list)


def torchvision_families() -> dict[str, str]:
    """Every name of `torchvision.models.list_models()` -> the family (submodule) it belongs to."""
    import torchvision.models as tvm

    fam = {n: "classification" for n in tvm.list_models(module=tvm)}
    for f in TV_FAMILIES[1:]:
        for n in tvm.list_models(module=getattr(tvm, f)):
            fam[n] = f
    return fam


def _unknown_model(name: str) -> OpcostError:
    names = sorted(torchvision_families())
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f"closest: {', '.join(close)}" if close else f"torchvision has {len(names)} models"
    return OpcostError(
        f"unknown model {name!r}; {hint}; or give package.module:callable, path/to/file.py:callable, "
        "or hf:<model_type> (e.g. hf:gpt2)"
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchvision's init-weights FutureWarnings, HF notices
        yield


def _builder(net: NetSpec) -> tuple[Any, dict[str, Any], str]:
    """The callable that builds the network, its keyword arguments, and the family."""
    kind, kwargs = net.kind, net.kwargs
    if kind == "torchvision":
        import inspect

        import torchvision.models as tvm

        fam = torchvision_families().get(net.model)
        if fam is None:
            raise _unknown_model(net.model)
        fn = tvm.get_model_builder(net.model)
        params = inspect.signature(fn).parameters
        for key in ("weights", "weights_backbone"):
            if kwargs.get(key) is not None:
                raise OpcostError(
                    f"--model-arg {key}={kwargs[key]!r} for {net.model}: opcost builds models without weights and "
                    "downloads nothing (weights change no op's time or energy); drop the argument"
                )
        defaults = {"weights": None}
        if "weights_backbone" in params:
            defaults["weights_backbone"] = None  # never download a backbone
        return fn, {**defaults, **kwargs}, fam
    if kind == "hf":
        return _hf_builder(net.model[len(HF_PREFIX) :], kwargs), {}, "hf"
    target, _, attr = net.model.rpartition(":")
    if not target or not attr:
        raise OpcostError(
            f"malformed model {net.model!r}: expected package.module:callable or path/to/file.py:callable"
        )
    if kind == "file":
        module = _load_file(target, net.model, net.base_dir)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise OpcostError(f"cannot import module {target!r} of model {net.model!r}: {exc}") from None
        except Exception as exc:
            raise OpcostError(f"importing {target!r} for model {net.model!r} failed: {_one_line(exc)}") from None
    fn = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            found = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
            raise OpcostError(
                f"{target} has no callable {attr!r} (model {net.model!r}); it defines: {', '.join(found) or 'none'}"
            )
        fn = getattr(fn, part)
    if not callable(fn):
        raise OpcostError(f"{net.model!r} names a {type(fn).__name__}, not a callable that returns an nn.Module")
    return fn, kwargs, "user"


def resolve_builder(net: NetSpec) -> None:
    """Check that `net`'s model reference resolves to a builder (imports a user's module or file, builds
    nothing): extract refuses a bad set before any work."""
    _builder(net)


def _load_file(path: str, name: str, base_dir: str = "") -> Any:
    p = user_file(path, base_dir)
    if not p.is_file():
        where = f"in {base_dir} (the set file's folder)" if base_dir and not Path(path).is_absolute() else ""
        raise OpcostError(f"model file {path!r} of {name!r} not found{' ' + where if where else ''}")
    mod_name = "opcost_user_" + hashlib.sha256(str(p.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise OpcostError(f"cannot load {path!r} as a Python file (model {name!r})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise OpcostError(f"loading {path!r} for model {name!r} failed: {_one_line(exc)}") from None
    return module


def _hf_builder(what: str, kwargs: dict[str, Any]) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # build from a config; never fetch anything
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        import transformers
    except ImportError:
        raise OpcostError(
            f"model hf:{what} needs the optional `transformers` package: pip install 'opcost[hf]'"
        ) from None
    cls = getattr(transformers, what, None)
    config_class = getattr(cls, "config_class", None) if isinstance(cls, type) else None
    if cls is not None and config_class is not None:  # a model class, e.g. hf:GPT2Model
        _check_config_args(config_class, kwargs, what)
        model_class: Any = cls
        return lambda: model_class(config_class(**kwargs))
    from transformers import AutoConfig, AutoModel
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if what not in CONFIG_MAPPING:
        close = difflib.get_close_matches(what, list(CONFIG_MAPPING.keys()), n=3, cutoff=0.6)
        raise OpcostError(
            f"unknown Hugging Face model hf:{what}; give a model type (hf:gpt2, hf:bert, hf:vit"
            f"{', closest: ' + ', '.join(close) if close else ''}) or a transformers model class (hf:GPT2LMHeadModel)"
        )
    _check_config_args(CONFIG_MAPPING[what], kwargs, what)
    return lambda: AutoModel.from_config(AutoConfig.for_model(what, **kwargs))


# Keyword arguments every Hugging Face config takes without keeping an attribute of that name.
_HF_GENERIC_ARGS = frozenset({"attn_implementation", "torch_dtype", "dtype", "output_attentions"})


def _check_config_args(config_cls: Any, kwargs: dict[str, Any], what: str) -> None:
    """Refuse a --model-arg the config does not know: a config takes any keyword and keeps it as an
    attribute nothing reads, so `n_layerz=2` would silently give the default 12-layer GPT-2."""
    import inspect

    if not kwargs:
        return
    try:
        default = config_cls()
    except Exception:  # noqa: BLE001 - a config without defaults: nothing to check against
        return
    known = set(default.to_dict()) | set(getattr(config_cls, "attribute_map", {}) or {}) | _HF_GENERIC_ARGS
    for klass in config_cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            known |= {p for p in inspect.signature(init).parameters if p != "self"}
    unknown = sorted(k for k in kwargs if k not in known and not hasattr(default, k))
    if unknown:
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, sorted(known), n=3, cutoff=0.6)
            hints.append(f"{k!r}" + (f" (closest: {', '.join(close)})" if close else ""))
        raise OpcostError(
            f"hf:{what}: {config_cls.__name__} has no argument {', '.join(hints)}; "
            "--model-arg takes the config's own fields, e.g. n_layer=2"
        )


def _one_line(exc: BaseException) -> str:
    from opcost.ops.extract import one_line

    return one_line(exc)


def build_model(net: NetSpec, meta: bool = True, seed: int = 0) -> LoadedModel:
    """Build the network (meta parameters unless `meta=False`: then seeded random weights) in its dtype.

    Bad references, a builder that fails, or one that returns no `nn.Module`: a one-line OpcostError.
    """
    import torch
    from torch import nn

    from opcost.ops.spec import meta_parameters

    fn, kwargs, family = _builder(net)
    try:
        with _quiet(), meta_parameters() if meta else contextlib.nullcontext():
            if not meta:
                torch.manual_seed(seed)
            module = fn(**kwargs)
    except OpcostError:
        raise
    except Exception as exc:
        raise OpcostError(f"building model {net.label} failed: {_one_line(exc)}") from None
    if not isinstance(module, nn.Module):
        raise OpcostError(f"model {net.label} returned a {type(module).__name__}, not a torch.nn.Module")
    module = module.to(dtype=getattr(torch, net.dtype))
    inputs = net.inputs or default_inputs(net, module, family)
    if family == "hf":
        _check_positions(net, module, inputs)
    _check_vocab(net, module, inputs)
    return LoadedModel(module, family, tuple(inputs))


def _check_vocab(net: NetSpec, module: Any, inputs: Any) -> None:
    """Refuse `vocab=N` larger than every `nn.Embedding` of the model: token ids up to N - 1 would index
    past each table, which real weights refuse, but meta tensors never check (the network would be
    answered as if it could run). A model without an Embedding is not judged."""
    from torch import nn

    rows = [m.num_embeddings for m in module.modules() if isinstance(m, nn.Embedding)]
    if not rows:
        return
    for spec in inputs:
        if spec.vocab is not None and spec.vocab > max(rows):
            raise OpcostError(
                f"input {spec.text()} of model {net.label}: token ids up to {spec.vocab - 1}, but its largest "
                f"nn.Embedding has {max(rows)} rows (ids 0..{max(rows) - 1}); give vocab={max(rows)} or less"
            )


def _check_positions(net: NetSpec, module: Any, inputs: Any) -> None:
    """Refuse token inputs longer than a learned position table (GPT-2's 1024 positions): on meta
    tensors an index past the table is never checked, so 4096 tokens would get a prediction for a
    network that cannot run. Models without a table of that size (rotary, relative) are not refused."""
    from torch import nn

    limit = getattr(getattr(module, "config", None), "max_position_embeddings", None)
    if not isinstance(limit, int) or limit <= 0:
        return
    if not any(isinstance(m, nn.Embedding) and m.num_embeddings == limit for m in module.modules()):
        return
    for spec in inputs:
        if not spec.is_float and spec.dtype != "bool" and len(spec.shape) >= 2 and spec.shape[-1] > limit:
            raise OpcostError(
                f"model {net.label} takes at most {limit} positions (max_position_embeddings), but input "
                f"{spec.text()} has {spec.shape[-1]} tokens; give at most {limit} tokens per sequence"
            )


def default_inputs(net: NetSpec, module: Any, family: str) -> tuple[InputSpec, ...]:
    """The inputs a model family takes when none are given (batch 2)."""
    b, dt = DEFAULT_BATCH, net.dtype
    if family in ("classification", "quantization", "segmentation", "detection"):
        side = 299 if net.model in ("inception_v3", "quantized_inception_v3") else 224
        return (InputSpec((b, 3, side, side), dt),)
    if family == "video":
        side = 112 if net.model in ("r3d_18", "mc3_18", "r2plus1d_18") else 224
        return (InputSpec((b, 3, 16, side, side), dt),)
    if family == "optical_flow":
        return (InputSpec((b, 3, 224, 224), dt), InputSpec((b, 3, 224, 224), dt))
    if family == "hf":
        cfg = getattr(module, "config", None)
        if cfg is not None and getattr(cfg, "image_size", None) and getattr(cfg, "num_channels", None):
            side = cfg.image_size if isinstance(cfg.image_size, int) else cfg.image_size[0]
            return (InputSpec((b, int(cfg.num_channels), int(side), int(side)), dt),)
        if cfg is not None and getattr(cfg, "vocab_size", None):
            return (InputSpec((b, HF_SEQUENCE), "int64", int(cfg.vocab_size)),)
    raise OpcostError(f"model {net.label} has no default input: describe what it takes with --input ({INPUT_HELP})")


def integer_bound(module: Any, spec: InputSpec) -> int:
    """Values of an integer input stay below this: `vocab=`, else the first Embedding's size, else 1."""
    from torch import nn

    if spec.vocab is not None:
        return spec.vocab
    for m in module.modules():
        if isinstance(m, nn.Embedding):
            return int(m.num_embeddings)
    return 1


def make_inputs(loaded: LoadedModel, device: str = "meta", seed: int = 0) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional arguments for the model: meta tensors, or seeded random values on a real device.

    Detection models take a list of images: a 4-D input becomes that list.
    """
    import torch

    gen = torch.Generator().manual_seed(seed) if device != "meta" else None
    args: list[Any] = []
    for spec in loaded.inputs:
        dtype = getattr(torch, spec.dtype)
        if device == "meta":
            t = torch.empty(spec.shape, dtype=dtype, device="meta")
        elif spec.is_float:
            t = torch.randn(spec.shape, generator=gen).to(dtype=dtype, device=device)
        elif spec.dtype == "bool":
            t = torch.ones(spec.shape, dtype=dtype, device=device)
        else:
            t = torch.randint(0, integer_bound(loaded.module, spec), spec.shape, generator=gen).to(dtype).to(device)
        if loaded.family == "detection" and t.dim() == 4:
            args.append(list(t.unbind(0)))
        else:
            args.append(t)
    return tuple(args), {}


# --------------------------------------------------------------------------------------------
# Tracing a network
# --------------------------------------------------------------------------------------------


@dataclass
class TracedNetwork:
    """One forward pass of a network, traced, with what was needed to run it (for memory)."""

    net: NetSpec  # inputs resolved (defaults filled in)
    loaded: LoadedModel
    trace: Any  # extract.Trace
    device: str  # "meta", or "cpu" where meta tensors could not run the model
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def notice(message: str) -> None:
    """Say, before it starts, that something slow is about to happen (stderr: JSON on stdout stays clean)."""
    sys.stderr.write(f"note: {message}\n")
    sys.stderr.flush()


def _meta_limitation(exc: BaseException) -> bool:
    """Whether a failure on meta tensors is meta's (data-dependent shapes: nonzero, nms, .item())."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, NotImplementedError) or "meta" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return False


def trace_network(net: NetSpec, mode: str = "inference", seed: int = 0) -> TracedNetwork:
    """Build `net` and trace one forward pass in `mode` (training = train() with autograd on).

    On meta tensors where possible (milliseconds); a model whose forward has data-dependent shapes
    (detection: `nonzero`, `nms`) cannot run there and is traced on the CPU with seeded random
    weights and inputs instead, which takes seconds and records the ops those values led to.
    """
    from opcost.ops.extract import trace_call

    training = mode == "training"
    loaded = build_model(net)
    if training and loaded.family == "detection":
        raise OpcostError(
            f"{net.label}: a detection model trains on images with target boxes, which opcost does not "
            "describe; extract it in inference mode"
        )
    resolved = net.with_inputs(loaded.inputs)
    ins = resolved.inputs
    if len(ins) == 1 and ins[0].dtype == net.dtype:
        what = f"input shape {'x'.join(map(str, ins[0].shape))}"
    else:
        what = f"input {resolved.input_text}"
    args, kwargs = make_inputs(loaded, "meta")
    try:
        tr = trace_call(loaded.module, args, kwargs, training, what)
        return TracedNetwork(resolved, loaded, tr, "meta", args, kwargs)
    except OpcostError as exc:
        if not _meta_limitation(exc.__cause__ or exc):
            raise
        reason = _one_line(exc.__cause__ or exc)[:160]
    n_params = sum(p.numel() for p in loaded.module.parameters())
    notice(
        f"{net.label}: meta tensors cannot run it (data-dependent shapes), so it is traced on the CPU with seeded "
        f"random weights ({n_params / 1e6:.1f} M parameters): this takes tens of seconds and can take 2 GB of memory "
        "for a detection model, once: the result is cached for the next question"
    )
    loaded = build_model(net, meta=False, seed=seed)
    args, kwargs = make_inputs(loaded, "cpu", seed)
    tr = trace_call(loaded.module, args, kwargs, training, what)
    note = f"traced on the CPU with seeded random weights: meta tensors cannot run it ({reason})"
    return TracedNetwork(resolved, loaded, tr, "cpu", args, kwargs, [note])
