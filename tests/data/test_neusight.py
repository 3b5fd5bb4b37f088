"""NeuSight's public measurements: parser on real excerpts (tests/data/neusight: the first lines of each
file kind, plus bad lines added by hand), specs and paper costs, ingest and evaluate."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from torch import nn

from opcost.data.neusight import METHOD, OP_FILES, Read, op_metrics_of, op_spec, parse_network, read_neusight
from opcost.errors import OpcostError
from opcost.ops.extract import trace_call
from opcost.ops.features import op_metrics
from opcost.ops.parts import has_parts
from opcost.params.load import load_params
from opcost.paths import Paths

DATA = Path(__file__).parents[1] / "fixtures" / "neusight"
V100 = DATA / "networks" / "Tesla_V100-PCIE-32GB"


def _csv_line(rel: str, number: int) -> list[str]:
    import csv

    text = gzip.decompress((DATA / rel).read_bytes()).decode().split("\n")[number - 1]
    return next(csv.reader([text]))


@pytest.fixture(scope="module")
def read():
    return read_neusight(DATA)


def test_op_lines_become_rows_under_the_table_key_and_the_project_spec(read):
    ops = pd.DataFrame(read.rows)
    # 2 good lines per T4 file, 2 per A100 file; the bad lines of the T4 bmm and conv files rejected
    assert len(ops) == 2 * 9 + 2 + 2
    assert set(ops["device_config"]) == {"T4", "A100_PCIe_40GB_no_tf32", "A100_PCIe_no_tf32"}
    a100 = ops[ops["device_config"] != "T4"].groupby("device_config")["kind"].agg(set).to_dict()
    assert a100 == {"A100_PCIe_40GB_no_tf32": {"bmm"}, "A100_PCIe_no_tf32": {"Conv2d"}}  # 40 GB bmm, 80 GB conv
    assert set(ops["kind"]) == {k for _, k in OP_FILES.values()}
    assert (ops["mode"] == "inference").all() and (ops["phase"] == "forward").all()
    first = ops[(ops["source_file"] == "ops/bmm/Tesla_T4.csv.gz") & (ops["line"] == 2)].iloc[0]
    assert first["t_s"] == float(_csv_line("ops/bmm/Tesla_T4.csv.gz", 2)[1]) / 1000  # ms in the file
    assert first["input_shape"] == [13, 27, 15]  # B x M x N of `B, M, N, K` = 13, 27, 15, 29
    spec, m = read.specs[first["op_id"]]
    assert [list(i.shape) for i in spec.inputs] == [[13, 27, 15], [13, 15, 29]]
    assert m.flops == 2 * 13 * 27 * 15 * 29 and m.output_shapes == ((13, 27, 29),)
    conv = ops[ops["source_file"] == "ops/conv/Tesla_T4.csv.gz"].iloc[0]  # 38, 893, 326, 3, 5, 1, 1
    cspec, cm = read.specs[conv["op_id"]]
    assert cspec.attrs["bias"] is False and cspec.attrs["kernel_size"] == [3, 3] and cspec.attrs["padding"] == [1, 1]
    assert cm.output_shapes == ((38, 326, 5, 5),) and cm.params == 326 * 893 * 9


def test_bad_lines_are_rejected_and_counted_by_reason(read):
    rej = pd.DataFrame(read.rejects)
    bmm = rej[rej["source_file"] == "ops/bmm/Tesla_T4.csv.gz"].sort_values("line")
    assert list(zip(bmm["line"], bmm["reason"])) == [
        (4, "bad_number"),  # Latency nan
        (5, "value_count"),  # a field short
        (6, "bad_value"),  # a P4 line in the T4 file
        (7, "out_of_range"),  # B = 0
        (8, "out_of_range"),  # negative time
    ]
    assert "Tesla P4" in bmm.iloc[2]["message"] and read.skipped["blank"] == 1
    conv = rej[rej["source_file"] == "ops/conv/Tesla_T4.csv.gz"]
    assert list(conv["reason"]) == ["bad_shape"] and "does not fit" in conv.iloc[0]["message"]
    node = rej[rej["source_file"].str.endswith("bert_large-train-512-2.csv.gz")]
    assert list(zip(node["line"], node["reason"])) == [(32, "bad_shape")]  # input_shapes [[2, -512, 1024]]
    assert len(rej) == 7
    assert read.files["ops/bmm/Tesla_T4.csv.gz"] == {"rows": 2, "rejected": 5}


def test_kernels_are_kept_beside_each_row(read):
    k = pd.DataFrame(read.kernels)
    assert len(k) == len(read.rows)
    first = k[(k["source_file"] == "ops/bmm/Tesla_T4.csv.gz") & (k["line"] == 2)].iloc[0]
    assert first["kernel_name"] == "volta_sgemm_64x64_nn" and first["n_kernels"] == 1
    assert (first["warps_per_sm"], first["blocks_per_sm"]) == (0.65, 0.325)
    assert [first[c] for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")] == [1, 1, 13, 64, 1, 1]
    soft = k[k["source_file"] == "ops/softmax/Tesla_T4.csv.gz"]
    assert soft["kernels"].isna().all()  # the softmax files record no kernel list


def test_networks_become_rows_with_their_phases(read):
    nets = pd.DataFrame(read.nets)
    train = json.loads((V100 / "bert_large-train-512-2.json").read_text())
    inf = json.loads((V100 / "bert_large-inf-512-8.json").read_text())
    switch = json.loads((V100 / "switchxl4-inf-512-1.json").read_text())
    got = {(r.set_id, r.mode, r.phase): r.t_s for r in nets.itertuples()}
    assert got == {
        ("bert_large:2x512", "training", "forward"): train["fw_latency"] / 1000,
        ("bert_large:2x512", "training", "forward_backward"): train["e2e_latency"] / 1000,
        ("bert_large:8x512", "inference", "forward"): inf["e2e_latency"] / 1000,
        ("switchxl4:1x512", "inference", "forward"): switch["e2e_latency"] / 1000,  # whole-model only
    }
    assert set(nets["device_config"]) == {"V100"}
    assert sorted(map(tuple, nets["input_shape"])) == [(1, 512), (2, 512), (2, 512), (8, 512)]  # batch x seqlen
    assert read.skipped["torch.compile (-fusion) network, end-to-end only"] == 1


@pytest.mark.parametrize("text", ["5", "null", "[]", '"e2e_latency fw_latency num_layer bwall_latency"'])
def test_a_network_file_that_is_not_a_json_object_is_a_one_line_error(tmp_path, text):
    path = tmp_path / "bert_large-inf-512-8.json"
    path.write_text(text)
    with pytest.raises(OpcostError, match=r"^networks/V100/bert_large-inf-512-8\.json: expected a JSON object") as e:
        parse_network(path, "networks/V100/bert_large-inf-512-8.json", "V100", Read())
    assert "\n" not in str(e.value) and text[:30] in str(e.value)  # what the file holds, clipped


@pytest.mark.parametrize("layers", ['"24"', "null", "2.5", "true", "-1"])
def test_a_network_with_nodes_and_no_layer_count_is_a_one_line_error(tmp_path, layers):
    name = "bert_large-train-512-2"
    doc = json.loads((V100 / f"{name}.json").read_text())
    (tmp_path / f"{name}.json").write_text(json.dumps({**doc, "num_layer": json.loads(layers)}))
    shutil.copy(V100 / f"{name}.csv.gz", tmp_path / f"{name}.csv.gz")
    rel = f"networks/V100/{name}.json"
    with pytest.raises(
        OpcostError, match=rf"^{re.escape(rel)}: num_layer {re.escape(layers)} is not a layer count"
    ) as e:
        parse_network(tmp_path / f"{name}.json", rel, "V100", Read())
    assert "\n" not in str(e.value)


def test_fx_nodes_keep_shapes_times_and_the_layer_repeat(read):
    nodes = pd.DataFrame(read.nodes)
    train = nodes[nodes["set_id"] == "bert_large:2x512"]
    assert len(train) == 31 and (train["num_layer"] == 24).all() and (train["mode"] == "training").all()
    assert list(train["node_index"]) == list(range(32))[:30] + [31]  # the rejected node keeps its place
    emb = train[train["name"] == "bert_embeddings_word_embeddings"].iloc[0]
    rec = _csv_line("networks/Tesla_V100-PCIE-32GB/bert_large-train-512-2.csv.gz", emb["line"])
    assert emb["module_class"] == "torch.nn.modules.sparse.Embedding" and emb["op"] == "call_module"
    assert (emb["fw_s"], emb["bw_s"], emb["acc_s"]) == tuple(float(rec[i]) / 1000 for i in (16, 17, 18))
    assert json.loads(emb["input_shapes"]) == [[2, 512]] and json.loads(emb["output_shape"]) == [2, 512, 1024]
    assert emb["dtype"] == "float32"
    inf = nodes[nodes["set_id"] == "bert_large:8x512"]
    assert inf["bw_s"].isna().all() and inf["acc_s"].isna().all()  # 0 in the file: not timed
    assert train.loc[train["op"] == "placeholder", "fw_s"].isna().all()
    assert train[train["op"] != "call_module"]["module_class"].isna().all()
    assert len(nodes[nodes["set_id"] == "bert_large:8x512"]) == 5 and not (nodes["set_id"] == "switchxl4:1x512").any()


SAMPLES = [
    ("bmm", (3, 5, 7, 11)),
    ("Linear", (2, 9, 16, 12)),
    ("Conv2d", (2, 3, 8, 3, 9, 2, 1)),
    ("Conv2d", (1, 4, 6, 5, 7, 1, 0)),
    ("LayerNorm", (4, 24)),
    ("Softmax", (4, 24)),
    ("GELU", (4, 24)),
    ("ReLU", (4, 24)),
    ("add", (4, 24)),
    ("mul", (4, 24)),
]


@pytest.mark.parametrize("kind, dims", SAMPLES)
def test_closed_form_costs_equal_torch_flop_counter_and_the_catalog(kind, dims):
    spec = op_spec(kind, dims)
    assert op_metrics_of(kind, dims) == op_metrics(spec)  # the meta-device run under FlopCounterMode
    assert not has_parts(spec)  # no composite parts to trace


def _traced(kind: str, dims: tuple[int, ...]) -> str:
    """The op_id `opcost extract` records for the NeuSight call, traced from a module that makes it."""
    meta = {"device": "meta"}

    class Call(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if kind == "Linear":
                self.m = nn.Linear(dims[2], dims[3], bias=True, **meta)
            elif kind == "Conv2d":
                b, cin, cout, k, s, st, p = dims
                self.m = nn.Conv2d(cin, cout, k, stride=st, padding=p, bias=False, **meta)
            elif kind == "LayerNorm":
                self.m = nn.LayerNorm(dims[1], **meta)
            elif kind in ("Softmax",):
                self.m = nn.Softmax(dim=-1)
            elif kind in ("GELU", "ReLU"):
                self.m = getattr(nn, kind)()
            else:  # a child never called: this module is not itself a leaf op, its functional call is
                self.unused = nn.Identity()

        def forward(self, *xs: torch.Tensor) -> torch.Tensor:
            if kind in ("bmm", "add", "mul"):
                return getattr(torch, kind)(*xs)
            return self.m(*xs)

    spec = op_spec(kind, dims)
    xs = tuple(torch.empty(i.shape, device="meta") for i in spec.inputs)
    calls = trace_call(Call(), xs, {}).calls
    assert len(calls) == 1
    return calls[0].spec.op_id


@pytest.mark.parametrize("kind, dims", SAMPLES)
def test_specs_are_those_extract_records(kind, dims):
    assert op_spec(kind, dims).op_id == _traced(kind, dims)


PARAMS = {
    "extract": {"sets": [{"model": "squeezenet1_1", "input_shape": [2, 3, 32, 32], "modes": ["inference"]}]},
    "ingest": {"sources": {"neusight": {"path": "data/external/neusight", "kind": "neusight"}}},
    "train": {"targets": []},
}


def test_ingest_records_the_method_and_evaluate_joins_without_new_targets(tmp_root):
    import shutil

    from opcost.schemas import EVALUATED_NETWORKS, EVALUATED_OPERATIONS, NETWORK_NODES, OP_KERNELS, OPERATIONS
    from opcost.stages.evaluate import run as run_evaluate
    from opcost.stages.extract import run as run_extract
    from opcost.stages.ingest import run as run_ingest_stage

    (tmp_root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    shutil.copytree(DATA, tmp_root / "data" / "external" / "neusight")
    paths = Paths(tmp_root)
    params = load_params(paths.params)
    run_extract(paths, params, show_progress=False)
    summary = run_ingest_stage(paths, params, "neusight")
    assert summary["method"] == METHOD and summary["method"]["statistic"] == "mean of the fastest 5 of 25 runs"
    assert summary["method"]["timer"] == "CUDA events" and summary["method"]["pytorch"] == "2.1.0"
    assert "TF32 off" in summary["method"]["numerics"]
    assert summary["rejected_lines"] == 7 and summary["rejected_by_reason"]["out_of_range"] == 2
    assert (summary["op_rows"], summary["network_rows"], summary["node_rows"]) == (22, 4, 36)
    d = paths.ingested_dir("neusight")
    assert json.loads((d / "summary.json").read_text())["method"] == METHOD
    OP_KERNELS.validate(pd.read_parquet(d / "op_kernels.parquet"))
    NETWORK_NODES.validate(pd.read_parquet(d / "network_nodes.parquet"))
    cat = OPERATIONS.validate(pd.read_parquet(d / "operations.parquet"))
    assert len(cat) == summary["unique_ops"] and (cat.loc[cat["kind"] == "Linear", "hp_in_features"] > 0).all()

    run_evaluate(paths, params)
    ops = EVALUATED_OPERATIONS.validate(pd.read_parquet(paths.evaluated_operations))
    nets = EVALUATED_NETWORKS.validate(pd.read_parquet(paths.evaluated_networks))
    assert len(ops) == 22 and (ops["method"] == "neusight-log").all() and ops["e_j"].isna().all()
    assert len(nets) == 4 and (nets["sources"] == "neusight").all()
    assert not paths.evaluated_targets_dir.exists() or not any(paths.evaluated_targets_dir.iterdir())


def test_the_real_neusight_data_joins_the_evaluated_tables(pipeline_root):
    """The whole public dataset, through ingest and evaluate as the pipeline runs them."""
    paths = pipeline_root
    summary = json.loads((paths.ingested_dir("neusight") / "summary.json").read_text())
    assert summary["rejected_lines"] == 0 and summary["op_rows"] == 195259 and summary["network_rows"] == 43
    raw = pd.read_parquet(paths.ingested_dir("neusight") / "op_measurements.parquet")
    ev = pd.read_parquet(paths.evaluated_operations)
    ns = ev[ev["method"] == "neusight-log"]
    configs = {"P4", "P100", "T4", "V100", "A100_PCIe_40GB_no_tf32", "A100_PCIe_no_tf32"}
    assert set(ns["device_config"]) == configs
    assert len(ns) == raw.groupby(["device_config", "op_id"]).ngroups  # re-measured shapes combined
    nets = pd.read_parquet(paths.evaluated_networks)
    assert (nets["method"] == "neusight-log").sum() == 43
    targets = {p.name.rpartition("-")[0] for p in paths.evaluated_targets_dir.iterdir()}
    assert not targets & configs  # public data trains no target of its own
