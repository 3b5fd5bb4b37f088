"""The `recommend` table: settings (device config x clock) with their 90 % intervals, ties and marks.

Why a module of its own: a ranking that hides its uncertainty misleads. Two clocks 0.1 % apart in
predicted energy, each with a 20-35 % interval, are not a choice the model can make; the table says
so. Each setting carries the interval its prediction carries (whatever form the composition layer
gives it), and, per objective, the settings whose interval overlaps the best setting's interval are
a tie with it. Answers that stand on less are marked: `uncalibrated` (the device config's
composition layer was fitted on no measured network), `clock transferred` (the clock behaviour
comes from the cross-clock model) and `device transferred` (the device's op costs come from the
cross-device model, source `transferred`), `device fitted` (the same model on a GPU whose own measured ops
it was trained on, source `fitted`: NeuSight's GPUs), or `device partly measured` where our campaigns
measured some of its ops (model/crossdevice/measured.py) and the cross-device model gives the rest and the composition.
The labels' home: model/composition/costing.py.

The table logic (`settings_table` and below) is plain data in, plain data out, and can be checked on
known predictions; `recommend` above it chooses the settings to ask a `Predictor` about (own bundles
over their measured clocks or a grid, transferred GPUs over the grid) and drops those the step's
memory does not fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence

from opcost.errors import OpcostError
from opcost.model.composition.costing import FITTED, MEASURED, TRANSFERRED
from opcost.model.prediction.answer import Request
from opcost.model.records.integrity import locked_models
from opcost.modes import check_mode

if TYPE_CHECKING:
    import pandas as pd

    from opcost.devices import DeviceConfig
    from opcost.model.prediction.answer import NetworkPrediction
    from opcost.paths import Paths

# objective -> (value column, interval low column, interval high column, rank column)
OBJECTIVES: dict[str, tuple[str, str, str, str]] = {
    "time": ("time_s", "time_lo_s", "time_hi_s", "rank_time"),
    "energy": ("energy_j", "energy_lo_j", "energy_hi_j", "rank_energy"),
    "EDP": ("edp_js", "edp_lo_js", "edp_hi_js", "rank_edp"),
}


class Asks(Protocol):
    """What `recommend` asks of a predictor (model/prediction/predict.py's `Predictor` answers it), written down here
    so this module, below the predictor, needs nothing from it."""

    paths: Paths

    def targets(self) -> list[str]: ...

    def transfer(self, device: str, mode: str, own: list[str] | None = None) -> tuple[str, DeviceConfig | None]: ...

    def sweep_clocks(self, device: str, mode: str) -> tuple[float | None, ...]: ...

    def transferred_clocks(self, found: DeviceConfig) -> tuple[float | None, ...]: ...

    def check_checkout(self, own: list[str], configs: Sequence[str], mode: str) -> None: ...

    def predict_many(
        self, requests: Sequence[Request], dtype: str = "float32", optimizer: str = "sgd"
    ) -> list[NetworkPrediction]: ...


def recommend(
    pr: Asks,
    model: Any,
    input_shape: Any = None,
    mode: str = "inference",
    max_slowdown: float | None = None,
    optimizer: str = "sgd",
    devices: str | None = None,
) -> pd.DataFrame:
    """Device configs (and clocks, where a model knows them) ranked by time, energy and EDP.

    Configs whose device is too small for the step's memory are dropped; `df.attrs["dropped"]`
    lists them with what the step needs and what the device has. Configs the device table does
    not know (a CPU host) are kept with `fits_memory` empty. Intervals, ties and marks: below.
    """
    if max_slowdown is not None and not max_slowdown >= 1:  # NaN too: it would keep no row
        raise OpcostError(f"--max-slowdown {max_slowdown} must be >= 1 (1.2 = at most 20 % slower than the fastest)")
    check_mode(mode)
    own = [t.rpartition("-")[0] for t in pr.targets() if t.endswith(f"-{mode}")]
    if devices is not None:  # `--devices H100,A100,L4,T4`: own bundles where they exist, else transferred
        from opcost.model.prediction.xdevice_predict import table_configs

        chosen = [pr.transfer(d, mode) for d in table_configs(devices)]
        requests = [
            Request(model, input_shape, d, mode, c)
            for d, found in chosen
            for c in (pr.sweep_clocks(d, mode) if d in own or found is None else pr.transferred_clocks(found))
        ]
    else:
        locked = [t.rpartition("-")[0] for t in sorted(locked_models(pr.paths.root)) if t.endswith(f"-{mode}")]
        pr.check_checkout(pr.targets(), locked, mode)  # a model dvc.lock records is not left out unsaid
        if not own:
            raise OpcostError(f"no trained model in mode {mode}; trained: {', '.join(pr.targets()) or 'none'}")
        requests = [Request(model, input_shape, d, mode, c) for d in own for c in pr.sweep_clocks(d, mode)]
    preds = pr.predict_many(requests, optimizer=optimizer)
    dropped = []
    kept = []
    for p in preds:
        if p.fits is False and p.memory is not None:
            dropped.append(
                {
                    "device_config": p.device_config,
                    "clock_mhz": p.clock_mhz,
                    "needed_bytes": p.memory["needed_bytes"],
                    "device_memory_bytes": device_memory(p.device),
                }
            )
        else:
            kept.append(p)
    if not kept:
        need = preds[0].memory["needed_bytes"] if preds[0].memory is not None else float("nan")
        raise OpcostError(
            f"{preds[0].model} ({mode}) fits on none of the trained device configs: it needs "
            f"{need / 2**30:.2f} GiB; dropped " + ", ".join(dict.fromkeys(d["device_config"] for d in dropped))
        )
    return settings_table(kept, max_slowdown, dropped)


def device_memory(device: DeviceConfig | None) -> float | None:
    """The resolved device's memory in bytes, None for a device the table lacks."""
    return None if device is None else device.device.memory_bytes


def marks(p: "NetworkPrediction") -> list[str]:
    """What a setting's answer stands on beyond measured, calibrated data (empty: nothing to flag)."""
    out = []
    comp = p.composition_source()
    if comp == "uncalibrated":
        out.append("uncalibrated")
    elif comp == "transferred":
        out.append("composition transferred")
    if p.clock_source == TRANSFERRED:
        out.append("clock transferred")
    if set(p.sources) == {TRANSFERRED}:
        out.append("device transferred")
    elif set(p.sources) == {FITTED}:
        out.append("device fitted")
    elif p.measured is not None:
        out.append("device partly measured")
    return out


def setting_row(p: "NetworkPrediction") -> dict[str, Any]:
    """One setting as a row: value and 90 % interval per objective, where it comes from, memory."""
    t_lo, t_hi = (float(x) for x in p.time_interval_s)
    e = p.energy_j
    e_lo, e_hi = (None, None) if p.energy_interval_j is None else (float(x) for x in p.energy_interval_j)
    has_e = e is not None and e_lo is not None
    return {
        "device_config": p.device_config,
        "clock_mhz": p.clock_mhz,
        "clock_source": p.clock_source,
        "time_s": p.time_s,
        "time_lo_s": t_lo,
        "time_hi_s": t_hi,
        "avg_power_w": p.avg_power_w,
        "energy_j": e,
        "energy_lo_j": e_lo,
        "energy_hi_j": e_hi,
        # EDP's interval: the product of the bounds (time and energy errors are not independent, so the
        # product is the honest envelope rather than a narrower combination)
        "edp_js": p.time_s * e if e is not None else None,
        "edp_lo_js": t_lo * e_lo if has_e and e_lo is not None else None,
        "edp_hi_js": t_hi * e_hi if has_e and e_hi is not None else None,
        "calibrated": p.calibrated,
        "composition": p.composition_source(),
        "source": source_of(p),
        "marks": ", ".join(marks(p)),
        "summary": p.summary,  # the answer's basis in one sentence
        "note": p.note,  # its derivation (`recommend --explain`)
        "measured_time_share": p.coverage()["time"].get(MEASURED, 0.0),
        "memory_needed_bytes": None if p.memory is None else p.memory["needed_bytes"],
        "fits_memory": p.fits,
    }


def source_of(p: "NetworkPrediction") -> str:
    """A setting's op costs in one word: `fitted` (the cross-device model on a GPU it was trained on),
    `transferred` (on a GPU it never saw, or partly measured on it), else `own models`."""
    if set(p.sources) == {FITTED}:
        return FITTED
    return TRANSFERRED if set(p.sources) == {TRANSFERRED} or p.measured is not None else "own models"


def dropped_once(dropped: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per device config (the step's memory does not depend on the clock), with the clocks dropped."""
    out: dict[str, dict[str, Any]] = {}
    for d in dropped:
        e = out.setdefault(d["device_config"], {**{k: v for k, v in d.items() if k != "clock_mhz"}, "settings": 0})
        e["settings"] += 1
    return list(out.values())


def settings_table(
    preds: Sequence["NetworkPrediction"], max_slowdown: float | None = None, dropped: Sequence[dict[str, Any]] = ()
) -> "pd.DataFrame":
    """The ranked settings table. attrs: `dropped` (once per device config), `removed_by_max_slowdown`
    (how many settings `--max-slowdown` removed) and `ties` (per objective, the settings tied with the best)."""
    import pandas as pd

    df = pd.DataFrame([setting_row(p) for p in preds])
    df["slowdown"] = df["time_s"] / df["time_s"].min()
    removed = 0
    if max_slowdown is not None:
        keep = df["slowdown"] <= max_slowdown + 1e-12
        removed = int((~keep).sum())
        df = df[keep].reset_index(drop=True)
    for col, _, _, rank in OBJECTIVES.values():
        df[rank] = df[col].rank(method="min", na_option="bottom").astype(int)
    df = df.sort_values(["rank_energy", "rank_time"], ignore_index=True)
    ties = mark_ties(df)
    df.attrs["dropped"] = dropped_once(dropped)
    df.attrs["removed_by_max_slowdown"] = removed
    df.attrs["ties"] = ties
    return df


def mark_ties(df: "pd.DataFrame") -> dict[str, list[dict[str, Any]]]:
    """Per objective, add a `tie_<objective>` column (the setting's 90 % interval overlaps the best
    setting's) and return the tied settings other than the best, as plain JSON values."""
    ties: dict[str, list[dict[str, Any]]] = {}
    for objective, (col, lo, hi, rank) in OBJECTIVES.items():
        name = f"tie_{objective.lower()}"
        valid = df[col].notna() & df[lo].notna() & df[hi].notna() if not df.empty else df[col].notna()
        if not valid.any():
            df[name] = False
            continue
        best = df[valid].sort_values([rank, "time_s"]).iloc[0]
        overlap = valid & (df[lo] <= float(best[hi])) & (df[hi] >= float(best[lo]))
        df[name] = overlap.astype(bool)
        others = df[overlap & ~((df["device_config"] == best["device_config"]) & _same_clock(df, best["clock_mhz"]))]
        ties[objective] = [
            {"device_config": str(r["device_config"]), "clock_mhz": _clock(r["clock_mhz"]), col: float(r[col])}
            for _, r in others.iterrows()
        ]
    return ties


def _clock(c: Any) -> float | None:
    return None if c is None or c != c else float(c)


def _same_clock(df: "pd.DataFrame", clock: Any) -> "pd.Series":
    c = _clock(clock)
    if c is None:
        return df["clock_mhz"].isna()
    return df["clock_mhz"] == c


def setting_label(device_config: str, clock_mhz: float | None) -> str:
    return device_config + ("" if clock_mhz is None else f" at {clock_mhz:g} MHz")


TIE_COLUMNS = {"time": "tie_time", "energy": "tie_energy", "EDP": "tie_edp"}
RANK_KEYS = {"time": "t", "energy": "E", "EDP": "EDP"}  # the ranks column's t/E/EDP
MARK_MEANINGS = {
    "uncalibrated": "the device config's composition layer was fitted on no measured network",
    "composition transferred": "the composition layer is transferred from other device configs (no network "
    "measured on this one)",
    "clock transferred": "clock behaviour from the cross-clock model, not measured on the device",
    "device transferred": "op costs from the cross-device model, not measured on the device",
    "device fitted": "op costs from the cross-device model, which was trained on this GPU's own measured ops "
    "(NeuSight's): an in-sample fit, no bundle of its own",
    "device partly measured": "the ops measured on the device take their measured time (measured_time_share), "
    "the others and the composition come from the cross-device model",
}


def all_tied(df: "pd.DataFrame") -> list[str]:
    """The objectives on which every setting ties with the best (so with every other): said once, not per row."""
    if len(df) < 2:
        return []
    return [o for o, col in TIE_COLUMNS.items() if col in df and bool(df[col].astype(bool).all())]


def row_marks(value: Any) -> list[str]:
    return [m for m in str(value or "").split(", ") if m]


def common_marks(df: "pd.DataFrame") -> list[str]:
    """The marks every setting carries: said once under the table instead of on each row."""
    rows = [row_marks(v) for v in df.get("marks", [])]
    if not rows:
        return []
    return [m for m in rows[0] if all(m in r for r in rows[1:])]


def summary_lines(df: "pd.DataFrame") -> list[str]:
    """The lines printed under the table: ties, marks explained, settings removed and dropped (once each)."""
    lines = []
    everywhere = all_tied(df)
    if everywhere:
        lines.append(
            f"every setting ties with the best on {' and '.join(everywhere)} (90 % intervals overlap): "
            "the model cannot tell them apart"
        )
    for objective, tied in df.attrs.get("ties", {}).items():
        if tied and objective not in everywhere:
            lines.append(
                f"tie for best {objective}: {len(tied)} of the {len(df) - 1} other settings overlap the best's 90 % "
                f"interval ({RANK_KEYS[objective]}* in ranks; --json lists them)"
            )
    common = common_marks(df)
    marked = dict.fromkeys(m for v in df.get("marks", []) for m in row_marks(v))
    for m in marked:
        if m in MARK_MEANINGS:
            lines.append(f"{m}{' (every setting)' if m in common else ''}: {MARK_MEANINGS[m]}")
    removed = df.attrs.get("removed_by_max_slowdown", 0)
    if removed:
        lines.append(f"--max-slowdown removed {removed} setting(s) slower than allowed")
    for d in df.attrs.get("dropped", []):
        need, have = d.get("needed_bytes"), d.get("device_memory_bytes")
        lines.append(
            f"dropped {d['device_config']}: the step needs {_gib(need)}, the device has {_gib(have)} "
            f"({d['settings']} setting(s))"
        )
    return lines


def _gib(n: float | None) -> str:
    if n is None:
        return "unknown"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
