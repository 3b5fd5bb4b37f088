"""The device table: every GPU the project knows, and the only place its figures live.

Peak throughputs are dense (no structured sparsity) at the boost clock, in FLOP/s; bandwidth in
B/s; clocks in MHz; power in W; memory in bytes. `clock_range_mhz` is the span of core clocks NVML
reports as supported (or, where no card was at hand, the span the public measurements swept), used
to refuse a `--clock` outside it; on a real card `nvmlDeviceGetSupportedGraphicsClocks` is the
authority. A *device config* is a device plus how it was run: `A30_no_tf32` is an A30 with TF32
disabled (`device_config()` parses it), so FP32 matmuls and convolutions run on the FP32 units.

Sources (vendor datasheets and architecture whitepapers):
- A30: NVIDIA A30 Tensor Core GPU datasheet (2021): FP32 10.3 TF, TF32 82 TF, FP16 165 TF, 933 GB/s,
  24 GB HBM2, 165 W; base/boost 930/1440 MHz; 56 SMs, 24 MB L2 (GA100 whitepaper, per-SM L2 share).
- A100 80GB SXM: A100 datasheet (2021): FP32 19.5, TF32 156, FP16 312 TF; 2039 GB/s; 400 W; 108 SMs,
  40 MB L2; boost 1410 MHz, base 1275 MHz (A100 whitepaper).
- H100 SXM5 80GB: H100 datasheet (2023): FP32 67, TF32 495, FP16 990 TF dense; 3.35 TB/s; 700 W;
  132 SMs, 50 MB L2; boost 1980 MHz, base 1590 MHz (Hopper whitepaper).
- H100 PCIe 80GB: same datasheet: FP32 51, TF32 378, FP16 756 TF dense; 2.0 TB/s; 350 W; 114 SMs,
  50 MB L2; boost 1755 MHz, base 1125 MHz.
- A40: A40 datasheet (2020): FP32 37.4, TF32 74.8, FP16 149.7 TF dense; 696 GB/s; 48 GB; 300 W;
  84 SMs, 6 MB L2; boost 1740 MHz, base 1305 MHz (GA102 whitepaper).
- RTX 3080 Ti: GA102 whitepaper / product page (2021): 10240 CUDA cores, boost 1665 MHz -> FP32 34.1 TF;
  TF32 34.1 TF, FP16 tensor (FP32 accumulate) 68.2 TF; 912 GB/s; 12 GB; 350 W; 80 SMs, 6 MB L2.
- V100 PCIe 32GB: V100 datasheet (2018): FP32 14, FP16 tensor 112 TF; 900 GB/s; 250 W; 80 SMs,
  6 MB L2; boost 1380 MHz, base 1245 MHz (Volta whitepaper). No TF32.
- RTX 2080 Ti: Turing whitepaper (2018), Founders Edition: FP32 14.2 TF at 1635 MHz (13.4 at the
  reference 1545 MHz boost used here), FP16 tensor (FP32 accumulate) 53.8 TF; 616 GB/s; 11 GB; 250 W;
  68 SMs, 5.5 MB L2; base 1350 MHz. No TF32.
- Quadro RTX 8000 / RTX 6000: Turing whitepaper and datasheets (2018): FP32 16.3, FP16 tensor 130.5 TF;
  672 GB/s; 48 / 24 GB; 260 W (295 W board maximum for the RTX 8000 active card); 72 SMs, 6 MB L2;
  boost 1770 MHz, base 1395 / 1440 MHz.
- P100 PCIe 16GB: P100 datasheet (2016): FP32 9.3, FP16 18.7 TF; 732 GB/s; 250 W; 56 SMs, 4 MB L2;
  boost 1303 MHz, base 1126 MHz.
Clock ranges: A30 210-1440 MHz (thesis A30 sweep and NVML's Ampere floor of 210 MHz); A40
855-1740 and A100 SXM 855-1410 swept by Perseus (NVML lists down to 210 MHz on Ampere); V100 405-1380
and RTX 8000 705-1710 swept by NV-DVFS-Benchmark; RTX 3080 Ti 210-2100 swept by GPU-FREQUENCY-DVFS;
the rest from 300 MHz (Turing/Pascal floors) to the maximum boost, approximate.
"""

from __future__ import annotations

from dataclasses import dataclass

from opcost.errors import OpcostError

GB = 1e9
GIB = 2**30
TERA = 1e12


@dataclass(frozen=True)
class Device:
    name: str  # the table key, e.g. "A30"
    product: str  # what NVML calls it, e.g. "NVIDIA A30"
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


DEVICES: dict[str, Device] = {
    d.name: d
    for d in (
        Device("A30", "NVIDIA A30", "Ampere", 10.3 * TERA, 82 * TERA, 165 * TERA, 933 * GB, 24 * GIB, 56, 24 * 2**20,
               930, 1440, (210, 1440), 165),
        Device("A100", "NVIDIA A100-SXM4-80GB", "Ampere", 19.5 * TERA, 156 * TERA, 312 * TERA, 2039 * GB, 80 * GIB, 108,
               40 * 2**20, 1275, 1410, (210, 1410), 400),
        Device("H100", "NVIDIA H100 80GB HBM3", "Hopper", 67 * TERA, 495 * TERA, 990 * TERA, 3350 * GB, 80 * GIB, 132,
               50 * 2**20, 1590, 1980, (345, 1980), 700),
        Device("H100_PCIe", "NVIDIA H100 PCIe", "Hopper", 51 * TERA, 378 * TERA, 756 * TERA, 2000 * GB, 80 * GIB, 114,
               50 * 2**20, 1125, 1755, (345, 1755), 350),
        Device("A40", "NVIDIA A40", "Ampere", 37.4 * TERA, 74.8 * TERA, 149.7 * TERA, 696 * GB, 48 * GIB, 84, 6 * 2**20,
               1305, 1740, (210, 1740), 300),
        Device("RTX3080Ti", "NVIDIA GeForce RTX 3080 Ti", "Ampere", 34.1 * TERA, 34.1 * TERA, 68.2 * TERA, 912 * GB,
               12 * GIB, 80, 6 * 2**20, 1365, 1665, (210, 2100), 350),
        Device("V100", "Tesla V100-PCIE-32GB", "Volta", 14 * TERA, None, 112 * TERA, 900 * GB, 32 * GIB, 80, 6 * 2**20,
               1245, 1380, (405, 1380), 250),
        Device("RTX2080Ti", "NVIDIA GeForce RTX 2080 Ti", "Turing", 13.4 * TERA, None, 53.8 * TERA, 616 * GB, 11 * GIB,
               68, 5.5 * 2**20, 1350, 1545, (300, 2100), 250),
        Device("RTX8000", "Quadro RTX 8000", "Turing", 16.3 * TERA, None, 130.5 * TERA, 672 * GB, 48 * GIB, 72,
               6 * 2**20, 1395, 1770, (300, 1770), 260),
        Device("RTX6000", "Quadro RTX 6000", "Turing", 16.3 * TERA, None, 130.5 * TERA, 672 * GB, 24 * GIB, 72,
               6 * 2**20, 1440, 1770, (300, 1770), 260),
        Device("P100", "Tesla P100-PCIE-16GB", "Pascal", 9.3 * TERA, None, 18.7 * TERA, 732 * GB, 16 * GIB, 56,
               4 * 2**20, 1126, 1303, (300, 1329), 250),
        # xdev: the GPUs NeuSight measured (T4, P4, A100 PCIe 40/80 GB) and the L4, so the cross-device
        # model can train and answer; the devices branch's fuller table supersedes these lines.
        # T4 datasheet (2019): 40 SMs, FP32 8.1 TF, FP16 tensor 65 TF, 320 GB/s, 16 GB, 70 W, 4 MB L2, 585/1590 MHz.
        Device("T4", "Tesla T4", "Turing", 8.1 * TERA, None, 65 * TERA, 320 * GB, 16 * GIB, 40, 4 * 2**20,
               585, 1590, (300, 1590), 70),
        # P4 datasheet (2016): 20 SMs, FP32 5.5 TF (no fast FP16), 192 GB/s, 8 GB, 75 W, 2 MB L2, 810/1063 MHz.
        Device("P4", "Tesla P4", "Pascal", 5.5 * TERA, None, 5.5 * TERA, 192 * GB, 8 * GIB, 20, 2 * 2**20,
               810, 1063, (300, 1114), 75),
        # A100 PCIe datasheet (2021): 40 GB HBM2 1555 GB/s, 250 W; 80 GB HBM2e 1935 GB/s, 300 W; base 765/1065.
        Device("A100_PCIe_40GB", "NVIDIA A100-PCIE-40GB", "Ampere", 19.5 * TERA, 156 * TERA, 312 * TERA, 1555 * GB,
               40 * GIB, 108, 40 * 2**20, 765, 1410, (210, 1410), 250),
        Device("A100_PCIe", "NVIDIA A100 80GB PCIe", "Ampere", 19.5 * TERA, 156 * TERA, 312 * TERA, 1935 * GB,
               80 * GIB, 108, 40 * 2**20, 1065, 1410, (210, 1410), 300),
        # L4 datasheet (2023): 58 SMs, FP32 30.3, TF32 60, FP16 121 TF dense; 300 GB/s; 24 GB; 72 W; 48 MB L2.
        Device("L4", "NVIDIA L4", "Ada", 30.3 * TERA, 60 * TERA, 121 * TERA, 300 * GB, 24 * GIB, 58, 48 * 2**20,
               795, 2040, (210, 2040), 72),
    )
}  # fmt: skip

NO_TF32_SUFFIX = "_no_tf32"


def device_config(config: str) -> tuple[Device, bool]:
    """`A30_no_tf32` -> (the A30, TF32 off); `RTX2080Ti` -> (the RTX 2080 Ti, TF32 on where it exists)."""
    name, tf32 = (config[: -len(NO_TF32_SUFFIX)], False) if config.endswith(NO_TF32_SUFFIX) else (config, True)
    if name not in DEVICES:
        raise OpcostError(f"unknown device {name!r}; the device table (opcost/devices.py) knows {', '.join(DEVICES)}")
    return DEVICES[name], tf32


def find_device(config: str) -> tuple[Device, bool] | None:
    """Like `device_config`, None for a device the table does not know (a CPU campaign's host)."""
    try:
        return device_config(config)
    except OpcostError:
        return None
