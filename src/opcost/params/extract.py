"""Section `extract` of params.yaml: the model-input sets whose operations are extracted.

The sets live in their own file (Paths.extract_sets, sets.yaml), read by load.py; a small test root may
still give them inline as `extract.sets` of params.yaml.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from opcost.errors import OpcostError
from opcost.modes import MODES
from opcost.shapes import DTYPES, parse_input_shape, shape_text
from opcost.validation import as_int, check_keys, check_name, mapping


@dataclass(frozen=True)
class ModelInputSet:
    """A network at one input shape and dtype, extracted for one or more modes.

    `model` is a torchvision model name, or a user's network as `opcost predict --model` takes it:
    `package.module:callable` or `path/to/file.py:callable` (ops/netspec.py builds both, one home),
    with `model_args` as its builder's keyword arguments. A torchvision image model takes a 4-D
    input; a user's network any N-D one (`[batch, time, features]` for a batch-first LSTM), and an
    integer-token model says so with `input_dtype` (and `vocab`, the bound token ids stay below).
    """

    model: str
    input_shape: tuple[int, ...]
    dtype: str = "float32"  # the parameters' dtype (and the input's, unless input_dtype says otherwise)
    modes: tuple[str, ...] = ("inference",)
    model_args: tuple[tuple[str, Any], ...] = ()
    input_dtype: str | None = None  # None: the same as dtype
    vocab: int | None = None
    # The folder of the file the set was read from: a relative `path/to/file.py:callable` is found there,
    # wherever the command runs ("": the current directory). Not part of the set's identity.
    base_dir: str = field(default="", compare=False, repr=False)

    @property
    def is_user(self) -> bool:
        """A user's network (`module:callable`, `file.py:callable`), not a torchvision name."""
        return ":" in self.model

    @property
    def label(self) -> str:
        """The model and its builder's arguments: `networks/recurrent.py:lstm(layers=2)`."""
        if not self.model_args:
            return self.model
        args = ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in self.model_args)
        return f"{self.model}({args})"

    @property
    def set_id(self) -> str:
        """Stable, readable id: `resnet18:32x3x224x224`, then the dtype unless float32, the input's dtype
        where it differs (`input=int64`) and its token bound (`vocab=N`)."""
        extra = [self.dtype] if self.dtype != "float32" else []
        if self.input_dtype is not None and self.input_dtype != self.dtype:
            extra.append(f"input={self.input_dtype}")
        if self.vocab is not None:
            extra.append(f"vocab={self.vocab}")
        return ":".join([f"{self.label}:{shape_text(self.input_shape)}", *extra])

    @classmethod
    def from_dict(cls, raw: Any, where: str, base_dir: str = "") -> "ModelInputSet":
        if not isinstance(raw, dict) or "model" not in raw or "input_shape" not in raw:
            raise OpcostError(f"{where}: expected a mapping with 'model' and 'input_shape', got {raw!r}")
        check_keys(raw, SET_KEYS, where)
        model = raw["model"]
        if not isinstance(model, str) or not model:
            raise OpcostError(f"{where}: 'model' must be a torchvision model name or module:callable, got {model!r}")
        user = ":" in model
        if user:
            check_user_model(model, where)
        else:
            check_name(model, where, "model")
        shape = _set_shape(raw["input_shape"], f"{where} input_shape", any_rank=user)
        dtype = raw.get("dtype", "float32")
        if dtype not in DTYPES:
            raise OpcostError(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        input_dtype = raw.get("input_dtype")
        vocab = raw.get("vocab")
        if input_dtype is not None or vocab is not None:
            if not user:
                raise OpcostError(f"{where}: input_dtype and vocab are for a user's network (module:callable)")
            if input_dtype is not None and input_dtype not in DTYPES + INT_DTYPES:
                raise OpcostError(
                    f"{where}: input_dtype {input_dtype!r} is not one of {', '.join(DTYPES + INT_DTYPES)}"
                )
            if vocab is not None and (input_dtype not in INT_DTYPES or input_dtype == "bool"):
                raise OpcostError(f"{where}: vocab applies to an integer input: give input_dtype: int64 with it")
            if vocab is not None:
                as_int(vocab, f"{where}.vocab", lo=1)
        args = mapping(raw.get("model_args"), f"{where}.model_args", "a mapping of the builder's keyword arguments")
        if args and not user:
            raise OpcostError(f"{where}: model_args are for a user's network (module:callable)")
        for k, v in args.items():
            if not isinstance(k, str) or not k.isidentifier():
                raise OpcostError(f"{where}.model_args: {k!r} is not a keyword argument name")
            _check_arg_value(v, f"{where}.model_args.{k}")
        modes = raw.get("modes", ["inference"])
        if isinstance(modes, str):
            modes = [modes]
        if not isinstance(modes, list) or not modes or any(m not in MODES for m in modes):
            raise OpcostError(f"{where}: modes {modes!r} must be a non-empty list of {', '.join(MODES)}")
        return cls(
            model=model,
            input_shape=shape,
            dtype=dtype,
            modes=tuple(dict.fromkeys(modes)),
            model_args=tuple(sorted(args.items())),
            input_dtype=None if input_dtype in (None, dtype) else input_dtype,
            vocab=vocab,
            base_dir=base_dir,
        )


# Keys of one extract set; integer inputs a user's network may take (ops/netspec.py builds the tensors).
SET_KEYS = ("model", "input_shape", "dtype", "modes", "model_args", "input_dtype", "vocab")
INT_DTYPES: tuple[str, ...] = ("int64", "int32", "int16", "int8", "uint8", "bool")
USER_MODEL = re.compile(r"[A-Za-z0-9_./-]+:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def check_user_model(model: str, where: str) -> str:
    """`package.module:callable` or `path/to/file.py:callable` (relative to the set file's folder: a set file
    travels with the repository)."""
    if not USER_MODEL.fullmatch(model) or model.startswith("/"):
        raise OpcostError(
            f"{where}: model {model!r} is neither a torchvision name nor package.module:callable or "
            "path/to/file.py:callable (a relative path)"
        )
    return model


def _check_arg_value(v: Any, where: str) -> None:
    """A builder argument: a YAML scalar (finite number, string, bool, null) or a list of them."""
    items = v if isinstance(v, list) else [v]
    for x in items:
        if x is not None and not isinstance(x, (str, bool, int, float)):
            raise OpcostError(f"{where}: expected a number, string, true/false or a list of them, got {v!r}")
        if isinstance(x, float) and not math.isfinite(x):
            raise OpcostError(f"{where}: expected a finite number, got {v!r}")


def _set_shape(value: Any, what: str, any_rank: bool) -> tuple[int, ...]:
    """An image model's B,C,H,W (parse_input_shape), or for a user's network any 1..8 positive ints."""
    if not any_rank:
        return parse_input_shape(value, what)
    items = list(value) if isinstance(value, (list, tuple)) else None
    if (
        items is None
        or not 1 <= len(items) <= 8
        or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in items)
    ):
        raise OpcostError(f"malformed {what} {value!r}: expected a list of 1 to 8 positive integers, e.g. [16, 8, 32]")
    return tuple(items)


@dataclass(frozen=True)
class ExtractParams:
    """The model-input sets extract traces. They live in their own file (Paths.extract_sets, not a DVC
    params file), so `dvc exp show` lists one dependency for them instead of a column per set."""

    sets: tuple[ModelInputSet, ...] = field(default_factory=tuple)

    @classmethod
    def load(
        cls, file_raw: Any, file_name: str | None, inline: Any, params_name: str, base_dir: str = ""
    ) -> "ExtractParams":
        """The sets of the sets file (`file_raw`, parsed by load.read_yaml: a mapping with `sets:`), else (a
        small test root without one: `file_name` None) the `extract.sets` of params.yaml; both at once is an
        error, so no set is silently ignored. `base_dir`: the folder of the file(s), where a set's relative
        model file is found."""
        ex = mapping(inline, f"{params_name}: extract")
        check_keys(ex, ("sets",), f"{params_name}: extract")
        if file_name is not None:
            if "sets" in ex:
                raise OpcostError(
                    f"{params_name}: extract.sets is given, and so is {file_name}: keep the sets in {file_name} only"
                )
            raw = mapping(file_raw, file_name, "a mapping with 'sets'")
            check_keys(raw, ("sets",), f"{file_name} (top level)")
            raw_sets, where = raw.get("sets") or [], f"{file_name}: sets"
        else:
            raw_sets, where = ex.get("sets") or [], f"{params_name}: extract.sets"
        if not isinstance(raw_sets, list):
            raise OpcostError(f"{where} must be a list of model-input sets")
        sets = tuple(ModelInputSet.from_dict(s, f"{where}[{i}]", base_dir) for i, s in enumerate(raw_sets))
        ids = [s.set_id for s in sets]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise OpcostError(f"{where} lists {', '.join(dupes)} more than once; merge their modes")
        return cls(sets=sets)
