"""The device table: every GPU the project knows, and the only place its figures and names live.

Peak throughputs are dense (no structured sparsity) at the boost clock, in FLOP/s; bandwidth in B/s; clocks
in MHz; power in W; memory in bytes. `clock_range_mhz` bounds the `--clock` a question may ask. A *device
config* is a device plus how it was run: `A30_no_tf32` is an A30 with TF32 disabled (`device_config()`).

Names: a GPU has one key (`Device.name`, [A-Za-z0-9_], never ending in `_no_tf32`: targets are
`<key>-<mode>`). `resolve_device` maps the key, the product name, every name NVML reports for the card and
NeuSight's file names to the key, case-insensitively; short aliases (`ALIASES`) name one variant. Resolve
once at the edge (CLI, campaign evaluation, ingest) and store the key: `find_device` and `device_config`
are memoised, since a prediction asks for its device a few hundred times.

What `fp16_flops`, `tf32_flops` and the clock ranges mean, and each GPU's sources: docs/cross-device.md,
"The device table".
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NamedTuple

from opcost.errors import OpcostError, closest

GB = 1e9
GIB = 2**30
TERA = 1e12
MIB = 2**20


@dataclass(frozen=True)
class Device:
    name: str  # the table key, e.g. "A30"
    product: str  # the product's name as NVML reports it, e.g. "NVIDIA A30"
    architecture: str
    fp32_flops: float  # FLOP/s
    tf32_flops: float | None  # FLOP/s on tensor cores; None where the GPU has no TF32
    fp16_flops: float  # FLOP/s, tensor cores with FP32 accumulation where present
    bandwidth: float  # B/s
    memory_bytes: float
    sms: int
    l2_bytes: float
    base_clock_mhz: float
    boost_clock_mhz: float
    clock_range_mhz: tuple[float, float]
    tdp_w: float
    # Every name NVML reports for this card (product first); resolve_device matches them.
    nvml_names: tuple[str, ...] = ()
    compute_capability: tuple[int, int] = (0, 0)
    tensor_cores: bool = False  # FP16 tensor cores (Volta and newer)
    memory_type: str = ""  # HBM2, HBM2e, HBM3, HBM3e, GDDR5, GDDR6, GDDR6X
    form_factor: str = ""  # PCIe, SXM2, SXM4, SXM5, ...

    def peak_flops(self, dtype: str = "float32", tf32: bool = True) -> float:
        """The matmul/convolution peak that applies: TF32 only where the device has it and the config
        allows it; half precision on tensor cores where present."""
        if dtype in ("float16", "bfloat16"):
            return self.fp16_flops
        if dtype == "float32" and tf32 and self.tf32_flops is not None:
            return self.tf32_flops
        return self.fp32_flops

    @property
    def ridge_point(self) -> float:
        """FLOP per byte above which an FP32 op is compute-bound on the FP32 units."""
        return self.fp32_flops / self.bandwidth

    @property
    def has_tf32(self) -> bool:
        return self.tf32_flops is not None


def _d(
    name: str,
    product: str,
    arch: str,
    fp32: float,
    tf32: float | None,
    fp16: float,
    bw_gbs: float,
    mem_gib: float,
    sms: int,
    l2_mib: float,
    base: float,
    boost: float,
    clocks: tuple[float, float],
    tdp: float,
    cc: tuple[int, int],
    mem_type: str,
    form: str,
    *more_names: str,
) -> Device:
    """One row: peaks in TFLOP/s, bandwidth in GB/s, memory in GiB, L2 in MiB."""
    return Device(name, product, arch, fp32 * TERA, None if tf32 is None else tf32 * TERA, fp16 * TERA, bw_gbs * GB,
                  mem_gib * GIB, sms, l2_mib * MIB, base, boost, clocks, tdp, (product, *more_names), cc,
                  cc >= (7, 0), mem_type, form)  # fmt: skip


DEVICES: dict[str, Device] = {
    d.name: d
    for d in (
        # -- Ampere, datacenter
        _d("A30", "NVIDIA A30", "Ampere", 10.3, 82, 165, 933, 24, 56, 24, 930, 1440, (210, 1440), 165, (8, 0),
           "HBM2", "PCIe"),
        _d("A100", "NVIDIA A100-SXM4-80GB", "Ampere", 19.5, 156, 312, 2039, 80, 108, 40, 1275, 1410, (210, 1410), 400,
           (8, 0), "HBM2e", "SXM4"),
        _d("A100_SXM_40GB", "NVIDIA A100-SXM4-40GB", "Ampere", 19.5, 156, 312, 1555, 40, 108, 40, 1095, 1410,
           (210, 1410), 400, (8, 0), "HBM2", "SXM4"),
        _d("A100_PCIe", "NVIDIA A100 80GB PCIe", "Ampere", 19.5, 156, 312, 1935, 80, 108, 40, 1065, 1410, (210, 1410),
           300, (8, 0), "HBM2e", "PCIe", "NVIDIA A100-PCIE-80GB"),
        _d("A100_PCIe_40GB", "NVIDIA A100-PCIE-40GB", "Ampere", 19.5, 156, 312, 1555, 40, 108, 40, 765, 1410,
           (210, 1410), 250, (8, 0), "HBM2", "PCIe"),
        _d("A40", "NVIDIA A40", "Ampere", 37.4, 74.8, 149.7, 696, 48, 84, 6, 1305, 1740, (210, 1740), 300, (8, 6),
           "GDDR6", "PCIe"),
        _d("A10", "NVIDIA A10", "Ampere", 31.2, 62.5, 125, 600, 24, 72, 6, 885, 1695, (210, 1695), 150, (8, 6),
           "GDDR6", "PCIe"),
        _d("A10G", "NVIDIA A10G", "Ampere", 35.0, 70.0, 140.1, 600, 24, 80, 6, 885, 1710, (210, 1710), 300, (8, 6),
           "GDDR6", "PCIe"),
        # -- Ampere, GeForce
        _d("RTX3080Ti", "NVIDIA GeForce RTX 3080 Ti", "Ampere", 34.1, 34.1, 68.2, 912, 12, 80, 6, 1365, 1665,
           (210, 2100), 350, (8, 6), "GDDR6X", "PCIe"),
        _d("RTX3090", "NVIDIA GeForce RTX 3090", "Ampere", 35.6, 35.6, 71, 936, 24, 82, 6, 1395, 1695, (210, 2100),
           350, (8, 6), "GDDR6X", "PCIe"),
        # -- Ada
        _d("RTX4090", "NVIDIA GeForce RTX 4090", "Ada", 82.6, 82.6, 165.2, 1008, 24, 128, 72, 2235, 2520, (210, 3105),
           450, (8, 9), "GDDR6X", "PCIe"),
        _d("L4", "NVIDIA L4", "Ada", 30.3, 60, 121, 300, 24, 58, 48, 795, 2040, (210, 2040), 72, (8, 9), "GDDR6",
           "PCIe"),
        _d("L40S", "NVIDIA L40S", "Ada", 91.6, 183, 362, 864, 48, 142, 96, 1110, 2520, (210, 2520), 350, (8, 9),
           "GDDR6", "PCIe"),
        # -- Hopper, Blackwell
        _d("H100", "NVIDIA H100 80GB HBM3", "Hopper", 67, 495, 990, 3350, 80, 132, 50, 1590, 1980, (345, 1980), 700,
           (9, 0), "HBM3", "SXM5", "NVIDIA H100 SXM5 80GB"),
        _d("H100_PCIe", "NVIDIA H100 PCIe", "Hopper", 51, 378, 756, 2000, 80, 114, 50, 1125, 1755, (345, 1755), 350,
           (9, 0), "HBM2e", "PCIe"),
        _d("H200", "NVIDIA H200", "Hopper", 67, 495, 990, 4800, 141, 132, 50, 1590, 1980, (345, 1980), 700, (9, 0),
           "HBM3e", "SXM5"),
        _d("B200", "NVIDIA B200", "Blackwell", 75, 1125, 2250, 8000, 180, 148, 126, 1200, 1965, (345, 1965), 1000,
           (10, 0), "HBM3e", "SXM6"),
        # -- Volta
        _d("V100", "Tesla V100-PCIE-32GB", "Volta", 14, None, 112, 900, 32, 80, 6, 1245, 1380, (405, 1380), 250, (7, 0),
           "HBM2", "PCIe"),
        _d("V100_PCIe_16GB", "Tesla V100-PCIE-16GB", "Volta", 14, None, 112, 900, 16, 80, 6, 1245, 1380, (405, 1380),
           250, (7, 0), "HBM2", "PCIe"),
        _d("V100_SXM2", "Tesla V100-SXM2-32GB", "Volta", 15.7, None, 125, 900, 32, 80, 6, 1290, 1530, (405, 1530), 300,
           (7, 0), "HBM2", "SXM2", "Tesla V100-SXM2-32GB-LS", "Tesla V100-DGXS-32GB"),
        _d("V100_SXM2_16GB", "Tesla V100-SXM2-16GB", "Volta", 15.7, None, 125, 900, 16, 80, 6, 1290, 1530, (405, 1530),
           300, (7, 0), "HBM2", "SXM2", "Tesla V100-DGXS-16GB"),
        # -- Turing
        _d("RTX2080Ti", "NVIDIA GeForce RTX 2080 Ti", "Turing", 13.4, None, 53.8, 616, 11, 68, 5.5, 1350, 1545,
           (300, 2100), 250, (7, 5), "GDDR6", "PCIe", "GeForce RTX 2080 Ti"),
        _d("RTX8000", "Quadro RTX 8000", "Turing", 16.3, None, 130.5, 672, 48, 72, 6, 1395, 1770, (300, 1770), 260,
           (7, 5), "GDDR6", "PCIe", "NVIDIA Quadro RTX 8000"),
        _d("RTX6000", "Quadro RTX 6000", "Turing", 16.3, None, 130.5, 672, 24, 72, 6, 1440, 1770, (300, 1770), 260,
           (7, 5), "GDDR6", "PCIe", "NVIDIA Quadro RTX 6000"),
        _d("T4", "Tesla T4", "Turing", 8.1, None, 65, 320, 16, 40, 4, 585, 1590, (300, 1590), 70, (7, 5), "GDDR6",
           "PCIe", "NVIDIA T4"),
        # -- Pascal
        _d("P100", "Tesla P100-PCIE-16GB", "Pascal", 9.3, None, 18.7, 732, 16, 56, 4, 1126, 1303, (300, 1329), 250,
           (6, 0), "HBM2", "PCIe"),
        _d("P4", "Tesla P4", "Pascal", 5.5, None, 5.5 / 64, 192, 8, 20, 2, 810, 1063, (300, 1114), 75, (6, 1), "GDDR5",
           "PCIe"),
    )
}  # fmt: skip

# Nominal memory clock (MHz, as nvidia-smi / NVML report it) at which `bandwidth` holds, where a sweep ran
# the card at other memory clocks: bandwidth scales with the memory clock (model/clocks/clock.py uses the ratio).
# RTX 3080 Ti: GDDR6X 19 Gbps on 384 bits = 912 GB/s, reported as 9501 MHz (GPU-FREQUENCY-DVFS' top memory clock).
NOMINAL_MEMORY_CLOCK_MHZ: dict[str, float] = {"RTX3080Ti": 9501.0}

# Short names users type, each for one documented variant (the most common one in clouds today).
ALIASES: dict[str, str] = {
    "H100_SXM": "H100",  # H100 = the SXM5 80GB (HBM3)
    "H100_SXM5": "H100",
    "A100_SXM": "A100",  # A100 = the SXM4 80GB
    "A100_SXM4": "A100",
    "A100_80GB": "A100",
    "A100_40GB": "A100_SXM_40GB",
    "V100_PCIe": "V100",  # V100 = the PCIe 32GB
    "V100_32GB": "V100",
    "V100_16GB": "V100_PCIe_16GB",
    "P100_PCIe": "P100",
}

NO_TF32_SUFFIX = "_no_tf32"
# Vendor and product-line words NVML puts before the model (dropped when matching, so `T4`, `Tesla T4`
# and `NVIDIA T4` are one name).
_PREFIXES = ("nvidia", "tesla", "geforce", "quadro")


def _canonical(name: str) -> str:
    """Lower case, vendor prefixes dropped, every non-alphanumeric removed: `NVIDIA_A100-PCIE-40GB` and
    `nvidia a100 pcie 40gb` are both `a100pcie40gb`."""
    words = [w for w in re.split(r"[^0-9a-z]+", str(name).lower()) if w]
    while len(words) > 1 and words[0] in _PREFIXES:
        words.pop(0)
    return "".join(words)


def _name_index() -> dict[str, str]:
    index: dict[str, str] = {}
    spellings = [(k, k) for k in DEVICES] + [(a, k) for a, k in ALIASES.items()]
    spellings += [(n, k) for k, d in DEVICES.items() for n in (d.product, *d.nvml_names)]
    for spelling, key in spellings:
        c = _canonical(spelling)
        if index.setdefault(c, key) != key:  # a table edit that makes a name ambiguous fails at import
            raise AssertionError(f"device name {spelling!r} matches both {index[c]} and {key}")
    return index


_INDEX = _name_index()


def unknown_device(name: str, what: str = "device") -> OpcostError:
    """One line: the closest table keys or aliases, and where the whole list is (`opcost devices`)."""
    close = closest(str(name), [*DEVICES, *ALIASES])
    hint = f"closest: {', '.join(close)}" if close else "no close match"
    return OpcostError(
        f"unknown {what} {name!r}; {hint}; `opcost devices` lists all (NVML names work too; append "
        f"{NO_TF32_SUFFIX} for TF32 off)"
    )


def _unknown(name: str) -> OpcostError:
    return unknown_device(name)


@functools.lru_cache(maxsize=1024)
def lookup_device(name: str) -> str | None:
    """The table key of a GPU name (key, product, NVML name, NeuSight file name, alias), None if unknown."""
    if name in DEVICES:
        return name
    return _INDEX.get(_canonical(name))


def resolve_device(name: str) -> str:
    """The one table key of a GPU name, matched case-insensitively on the key, the product name, every
    NVML name (also with `_` for spaces, as NeuSight names its files) and the aliases. Raises one line
    listing the valid keys for a name the table does not know."""
    key = lookup_device(str(name).strip())
    if key is None:
        raise _unknown(name)
    return key


def _split_config(config: str) -> tuple[str, bool]:
    c = str(config).strip()
    if c.lower().endswith(NO_TF32_SUFFIX):
        return c[: -len(NO_TF32_SUFFIX)], False
    return c, True


def resolve_device_config(config: str) -> str:
    """`nvidia a30_no_tf32` -> `A30_no_tf32`, `Tesla T4` -> `T4`: `resolve_device` keeping the TF32 suffix."""
    name, tf32 = _split_config(config)
    return resolve_device(name) + ("" if tf32 else NO_TF32_SUFFIX)


def table_name(config: str) -> str:
    """The table key (with its `_no_tf32`) where the table knows the GPU, else the name unchanged (a CPU
    host, a GPU not in the table): what tables and targets store for a measured device."""
    name, tf32 = _split_config(config)
    key = lookup_device(name)
    return str(config) if key is None else key + ("" if tf32 else NO_TF32_SUFFIX)


def same_numerics(config: str) -> str:
    """The table name of `config`, without `_no_tf32` where that changes nothing: a GPU without TF32
    (Turing, Volta and older) runs every fp32 op on its FP32 units either way, so `RTX2080Ti_no_tf32` is
    `RTX2080Ti` and its own bundle answers it (model/prediction/xdevice_predict.own_config). A name the table does
    not know comes back as `table_name` gives it."""
    name, tf32 = _split_config(config)
    key = lookup_device(name)
    if key is None:
        return table_name(config)
    return key if tf32 or DEVICES[key].tf32_flops is None else key + NO_TF32_SUFFIX


class DeviceConfig(NamedTuple):
    """A table GPU and its numerics: what a device-config string (`A30_no_tf32`) names, resolved once at the
    edge and passed on. A tuple, so `dev, tf32 = device_config(...)` reads it."""

    device: Device
    tf32: bool  # TF32 allowed (where the GPU has none, its fp32 ops run on the FP32 units either way)

    @property
    def name(self) -> str:
        """The canonical config string: the table key, with `_no_tf32` where TF32 is off."""
        return self.device.name + ("" if self.tf32 else NO_TF32_SUFFIX)


@functools.lru_cache(maxsize=1024)
def device_config(config: str) -> DeviceConfig:
    """`A30_no_tf32` -> (the A30, TF32 off); `RTX2080Ti` -> (the RTX 2080 Ti, TF32 on where it exists).
    Any spelling `resolve_device` accepts; memoised (a prediction asks a few hundred times)."""
    name, tf32 = _split_config(config)
    key = lookup_device(name)
    if key is None:
        raise _unknown(name)
    return DeviceConfig(DEVICES[key], tf32)


@functools.lru_cache(maxsize=1024)
def find_device(config: str) -> DeviceConfig | None:
    """Like `device_config`, None for a device the table does not know (a CPU campaign's host)."""
    name, tf32 = _split_config(config)
    key = lookup_device(name)
    return None if key is None else DeviceConfig(DEVICES[key], tf32)


def table_device(name: str) -> Device | None:
    """The table's entry of a GPU name as any table stores it (sweeps, targets), None where the table lacks it."""
    key = lookup_device(name)
    return None if key is None else DEVICES[key]
