"""The shapes of what measuring writes and returns: campaign.json, run records, shard results, power samples,
the visit's and the energy check's records, what landing a campaign reports.

Each is a TypedDict because each is a JSON object (written as is, keys sorted by opcost.io.write_json, or read
back and indexed by key). Table rows (timings, networks, power samples as Parquet columns) are typed by their
schemas (opcost.schemas), not here.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, final


class PeriodRecord(TypedDict):
    """An energy counter's update period, as campaign.json and the power log keep it (counter.CounterPeriod)."""

    median_s: float | None
    p10_s: float | None
    p90_s: float | None
    max_s: float | None
    jitter_s: float
    read_s: float
    updates: int


class PowerSample(TypedDict):
    """One raw power-log row from an energy source: which columns a source fills depends on the source (NVML,
    nvidia-smi, RAPL); the counter's period is added where the campaign probed it."""

    timestamp: float
    source: NotRequired[str]
    power_w: NotRequired[float | None]
    power_kind: NotRequired[str]
    energy_j: NotRequired[float | None]
    sm_clock_mhz: NotRequired[float | None]
    mem_clock_mhz: NotRequired[float | None]
    temperature_c: NotRequired[float | None]
    utilization_pct: NotRequired[float | None]
    throttle_reasons: NotRequired[int]
    smi_timestamp: NotRequired[str]
    counter_period_s: NotRequired[float | None]
    counter_jitter_s: NotRequired[float]


class Environment(TypedDict):
    """What decides what a campaign's numbers mean (campaign.environment): host, versions, math flags, device."""

    host: str
    platform: str
    python: str
    torch: str
    cuda_runtime: str | None
    cudnn: int | None
    tf32_matmul: bool
    tf32_cudnn: bool
    float32_matmul_precision: str
    cudnn_benchmark: bool
    cudnn_deterministic: bool
    cpu_threads: int
    cpu: str
    energy_source: str
    energy_counter: bool | None
    torchvision: str | None
    device_name: str | None
    nvml_device_name: NotRequired[str]
    nvml_uuid: NotRequired[str]
    driver: NotRequired[str]


class RecordExtra(TypedDict, total=False):
    """What a run record holds beyond its base: a shard's place, the environment it measured in."""

    shard: int
    shards: int
    parts_total: int
    environment: Environment


class RunRecord(RecordExtra):
    """`<name>.run.json` beside the parts: one measuring run (local or a shard), its host and state."""

    name: str
    campaign: str
    fingerprint: str
    host: str
    pid: int
    started_at: float
    error: str | None
    status: NotRequired[str]
    energy_counter: NotRequired[dict[str, PeriodRecord | None]]
    ended_at: NotRequired[float]


class PartsRecord(TypedDict):
    """A plan's parts: how many, and a digest of their names (the same plan has the same digest)."""

    count: int
    digest: str


class PlanCounts(TypedDict):
    """A plan in numbers: what it measures, how often, how long it should take."""

    campaign: str
    device: str
    ops_per_mode: dict[str, int]
    networks_per_mode: dict[str, int]
    settings: list[str]
    trials: int
    cpu_threads: int | None
    parts: int
    measurements: int
    estimated_seconds: float


@final
class PlanSummary(PlanCounts):
    """A plan in numbers (`--dry-run`, campaign.json's `plan`)."""


@final
class ShardPlanSummary(PlanCounts):
    """A shard's plan in numbers (`--shard I/N --dry-run`)."""

    shard: int
    shards: int


class PartRows(TypedDict):
    """Rows of op timings and of whole networks."""

    timings: int
    networks: int


class RowCounts(PartRows):
    """Rows of each of a campaign's tables."""

    power_samples: int


class ErrorCount(TypedDict):
    """An error of failed rows and how many rows failed with it."""

    error: str
    rows: int


class EnergyRows(TypedDict):
    """Of the rows with an energy source: how many, how many flagged, the window a flagged one needed."""

    target_bound: float
    rows: int
    flagged: int
    needed_window_s: float | None


# `from` is a keyword: the functional form
Landed = TypedDict(
    "Landed",
    {
        "from": str,
        "digest": str,
        "at": float,
        "measured_as": object,  # the name the archive's campaign.json gave it (untrusted JSON)
        "parameters_fingerprint": str,
        "rederived": list[str],
    },
)


class CampaignJson(TypedDict):
    """campaign.json, as a run or a merge writes it (`landed`: as `opcost land` rewrites it)."""

    campaign: str
    parameters: dict[str, Any]  # the CampaignParams fields (dataclasses.asdict)
    fingerprint: str
    code_hash: str
    plan: PlanSummary
    planned_parts: PartsRecord
    environment: Environment
    runs: list[RunRecord]  # without their environment
    started_at: float
    ended_at: float
    parts_resumed: int
    rows: RowCounts
    failed_rows: int
    errors: list[ErrorCount]
    energy_counter: dict[str, PeriodRecord | None]
    energy_rows: EnergyRows
    energy_note: str | None
    landed: NotRequired[Landed]


@final
class CampaignMeta(CampaignJson):
    """What a local run or a merge returns: campaign.json, with `complete` where it held the plan already and
    nothing was measured."""

    complete: NotRequired[bool]


class PartStats(TypedDict):
    """Counts over a shard's finished parts."""

    parts_done: int
    rows: PartRows
    failed_rows: int
    last_error: str | None
    errors: list[ErrorCount]


@final
class ShardResult(PartStats):
    """What a shard run returns: its place, its parts, and the counts over its finished parts."""

    campaign: str
    shard: int
    shards: int
    parts: int
    parts_resumed: int
    parts_dir: str


class ShardProgress(TypedDict):
    """One shard's line in `opcost status`."""

    shard: int
    parts_total: int
    parts_done: int
    failed_rows: int
    last_error: str | None
    state: str | None
    host: str | None
    merged: bool


class VisitEnvironment(TypedDict):
    """What a GPU visit found on its machine (visit.json's `environment`)."""

    python: str
    torch: str
    cuda_runtime: str | None
    device: str
    device_name: str
    device_memory_gib: float
    host_cpu: str
    host_cpu_count: int | None
    platform: str
    present: dict[str, bool]
    free_disk_gib: float


class VisitRecord(TypedDict):
    """visit.json: the visit's environment, its span and its command line."""

    campaign: str
    environment: VisitEnvironment
    started_at: float
    ended_at: float
    plan_estimated_seconds: float
    argv: list[str]


@final
class VisitResult(CampaignJson):
    """What a visit returns: its campaign's result and the archive it packed."""

    complete: NotRequired[bool]
    archive: str
    archive_bytes: int
    visit_seconds: float


class ShortWindows(TypedDict):
    """Short counter-aligned windows against the long one (energy_counter_check.json's `short_windows`)."""

    short_s: float
    windows: int
    median_abs_deviation: float | None
    p90_abs_deviation: float | None
    median_bound: float | None
    bound_held_share: float | None


class EnergyCheck(TypedDict):
    """energy_counter_check.json: a GPU's energy counter against its integrated power and short windows."""

    device: str
    device_name: str
    driver: str
    matmul_size: int
    matmuls: int
    seconds: float
    counter_energy_j: float | None
    integrated_energy_j: float | None
    relative_difference: float | None
    counter_power_w: float | None
    samples: int
    power_kind: str | None
    median_sample_interval_s: float | None
    counter_period: PeriodRecord
    aligned_power_w: float | None
    aligned_bound: float | None
    short_windows: ShortWindows | None


class LandResult(EnergyRows):
    """What `opcost land` reports: where the campaign landed, its energy rows, and its `landed` record."""

    campaign: str
    folder: str
    landed: Landed
