"""Reference datasets (published figures, ``ref:<name>``): schema, vocabulary, provenance, reproducibility."""
from pathlib import Path

import pandas as pd
import pytest

from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.references import (GPU_NAMES, PROBE, REFERENCE_COLUMNS, REFERENCE_DIR, is_reference,
                                 list_references, load_reference, problems, read_reference_csv)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference"
REQUIRED = ("a100-sxm4-80gb", "h100-sxm", "h100-pcie", "h200")
NAMES = list_references()


def value(frame, quantity):
    hit = frame.loc[frame["quantity"] == quantity, "value"]
    return float(hit.iat[0]) if len(hit) else None


def test_the_issue_s_references_exist():
    assert set(REQUIRED) <= set(NAMES), NAMES
    assert set(NAMES) <= set(GPU_NAMES), "every reference needs a GPU name for its label"


@pytest.mark.parametrize("name", NAMES)
def test_schema_vocabulary_units_and_provenance(name):
    frame = read_reference_csv(REFERENCE_DIR / f"{name}.csv")
    assert tuple(frame.columns) == REFERENCE_COLUMNS
    assert not frame.empty
    assert set(frame["quantity"]) <= set(QUANTITIES)
    assert (frame["unit"] == frame["quantity"].map(lambda q: QUANTITIES[q][0])).all()
    assert (frame["probe"] == PROBE).all()
    assert frame["source"].fillna("").str.strip().astype(bool).all()
    assert frame["method"].fillna("").str.strip().astype(bool).all()
    assert problems(frame) == []


@pytest.mark.parametrize("corrupt, expected", [
    (lambda f: f.assign(unit=f["unit"].where(f["quantity"] != "l1.latency_cycles", "ns")), "unit"),
    (lambda f: f.assign(quantity=f["quantity"].replace("l1.latency_cycles", "l1.latency")), "vocabulary"),
    (lambda f: f.assign(source=f["source"].where(f["quantity"] != "l1.latency_cycles", "")), "empty source"),
    (lambda f: f.assign(probe=f["probe"].where(f["quantity"] != "l1.latency_cycles", "chase.latency")), "probe"),
    (lambda f: f.assign(value=f["value"].where(f["quantity"] != "l1.latency_cycles", -1.0)), "positive"),
    (lambda f: pd.concat([f, f.iloc[:1]], ignore_index=True), "duplicate"),
    (lambda f: f.drop(columns="source"), "columns"),
])
def test_a_corrupted_reference_is_caught(tmp_path, monkeypatch, corrupt, expected):
    frame = corrupt(read_reference_csv(REFERENCE_DIR / "a100-sxm4-80gb.csv"))
    assert any(expected in p for p in problems(frame)), problems(frame)
    (tmp_path / "a100-sxm4-80gb.csv").write_text(frame.to_csv(index=False))
    monkeypatch.setattr("gpuatlas.analysis.references.REFERENCE_DIR", tmp_path)
    with pytest.raises(UsageError, match="damaged|columns"):
        load_reference("ref:a100-sxm4-80gb")


def test_load_reference_label_and_prefix():
    label, frame = load_reference("ref:h100-sxm")
    assert "H100" in label and "ref:h100-sxm" in label and "published" in label
    pd.testing.assert_frame_equal(frame, load_reference("h100-sxm")[1])
    assert is_reference("ref:h100-sxm") and not is_reference("reports/h200") and not is_reference(Path("ref:x"))


@pytest.mark.parametrize("arg", ["ref:nope", "ref:../reports/h200/derived", "ref:"])
def test_unknown_reference_names_the_available_ones(arg):
    with pytest.raises(UsageError) as info:
        load_reference(arg)
    message = str(info.value)
    assert "\n" not in message and "unknown reference" in message
    for name in REQUIRED:
        assert f"ref:{name}" in message


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"published reference files not found at {SHARED}")
def test_rebuild_reproduces_the_committed_csvs(tmp_path):
    from tools.reference_build import write_references

    written = write_references(tmp_path, SHARED)
    assert sorted(p.stem for p in written) == NAMES
    for path in written:
        assert path.read_text() == (REFERENCE_DIR / path.name).read_text(), (
            f"{path.name} differs from its rebuild: run `python -m tools.reference_build`")


@pytest.mark.parametrize("name", NAMES)
def test_latencies_increase_down_the_hierarchy(name):
    frame = load_reference(name)[1]
    levels = [value(frame, q) for q in ("smem.latency_cycles", "l1.latency_cycles", "l2.latency_cycles",
                                        "l2.far_latency_cycles", "dram.latency_cycles")]
    present = [v for v in levels if v is not None]
    if name == "h200":  # PUBLISHED.md §5: no L1/L2/DRAM latency found for the H200
        assert present == []
        return
    assert value(frame, "l1.latency_cycles") and value(frame, "l2.latency_cycles")
    assert value(frame, "dram.latency_cycles")
    assert present == sorted(present) and len(set(present)) == len(present), levels
    ns = value(frame, "dram.latency_ns")
    if ns is not None:  # cycles and seconds describe the same plateau at the stated clock
        assert ns == pytest.approx(value(frame, "dram.latency_cycles") / value(frame, "clock.sm_hz"), rel=0.05)


@pytest.mark.parametrize("name", NAMES)
def test_the_l2_capacity_is_a_bandwidth_fit_or_a_published_size_and_the_chase_knee_a_far_reach(name):
    frame = load_reference(name)[1].set_index("quantity")
    if "l2.capacity_bytes" in frame.index:
        r = frame.loc["l2.capacity_bytes"]
        assert "chase" not in r["method"]
        assert "gpu-l2-cache" in r["source"] or "size" in r["note"], r["note"]
    if "l2.far_reach_bytes" in frame.index:
        assert "pointer chase" in frame.loc["l2.far_reach_bytes", "method"]
    if name in ("a100-sxm4-80gb", "h100-pcie", "h200"):  # a gpu-l2-cache curve was published
        assert "gpu-l2-cache" in frame.loc["l2.capacity_bytes", "source"]


@pytest.mark.parametrize("name", NAMES)
def test_capacities_and_bandwidths_are_ordered(name):
    frame = load_reference(name)[1]
    l1, part, reach, l2 = (value(frame, q) for q in ("l1.capacity_bytes", "l2.partition_bytes",
                                                      "l2.far_reach_bytes", "l2.capacity_bytes"))
    if l1 and part:
        assert l1 < part
    for whole in (reach, l2):  # one partition holds less than the L2 one SM reaches or every SM fills
        if part and whole:
            assert part < whole
    l2_bw, read = value(frame, "l2.bandwidth_bytes_per_s"), value(frame, "dram.read_bandwidth_bytes_per_s")
    if l2_bw and read:
        assert l2_bw > read


def test_newer_gpus_are_faster_where_physics_says_so():
    a100, h100 = load_reference("a100-sxm4-80gb")[1], load_reference("h100-sxm")[1]
    for q in ("dram.copy_bandwidth_bytes_per_s", "dram.read_bandwidth_bytes_per_s", "tc.bf16.peak_flops",
              "fp32.peak_flops", "fp64.peak_flops"):
        assert value(h100, q) > value(a100, q), q
    h200 = load_reference("h200")[1]  # HBM3e (4.8 TB/s spec) against the H100 SXM's HBM3 (3.35 TB/s)
    for q in ("dram.copy_bandwidth_bytes_per_s", "dram.read_bandwidth_bytes_per_s"):
        assert value(h200, q) > value(h100, q), q
    pcie = load_reference("h100-pcie")[1]
    assert value(pcie, "l2.bandwidth_bytes_per_s") > value(a100, "l2.bandwidth_bytes_per_s")
    assert value(pcie, "clock.sm_hz") < value(h100, "clock.sm_hz")


#: Datasets with a gpu-l2-cache curve: the curve's file name and the published L2 size (PUBLISHED.md §1a, §3,
#: §5; the H100 PCIe's "50 MB" read as 50 MiB, as mt4g reads the H100 SXM's).
L2_CURVES = {"a100-sxm4-80gb": ("a100_80", 40 * 2**20), "h100-pcie": ("h100_pcie", 50 * 2**20),
             "h200": ("h200", 60 * 2**20)}


@pytest.mark.parametrize("name", sorted(L2_CURVES))
def test_the_fitted_l2_capacity_lies_between_one_partition_and_the_whole_l2(name):
    """These L2s are two partitions. Every SM reading a footprint keeps more than one partition's worth
    resident (the curves hold the L2 rate well past half the size), and the miss model (resident fraction
    min(1, C/F)) under-reads their cliff, so C lies below the whole L2: between half the size and the size,
    and above the chase's partition knee where the dataset has one."""
    frame = load_reference(name)[1]
    size = L2_CURVES[name][1]
    r = frame.set_index("quantity").loc["l2.capacity_bytes"]
    assert size / 2 < r["value"] < size
    assert r["ci_low"] < r["value"] < r["ci_high"], "one sample per size: the residual interval gives the CI"
    assert r["ci_high"] - r["ci_low"] < 0.2 * r["value"]
    partition = value(frame, "l2.partition_bytes")
    if partition:
        assert partition < r["ci_low"]


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"published reference files not found at {SHARED}")
@pytest.mark.parametrize("name", sorted(L2_CURVES))
def test_the_fit_of_a_published_l2_sweep_finds_the_l2_and_the_hbm_behind_it(name):
    """The fit's cache bandwidth is the curve's L2 plateau and its miss bandwidth the HBM's: within a factor
    of 1.5 of the dataset's HBM read bandwidth (other kernels: gpu-stream's read, BabelStream's Dot), far
    from the L2's 2.5-3.5x. A sweep cut at the fitted C never falls below its plateau: no capacity."""
    from gpuatlas.analysis.capacity import fit_capacity
    from tools.reference_build import read_bandwidth_sweep

    frame = load_reference(name)[1]
    gpu, size = L2_CURVES[name]
    sweep = read_bandwidth_sweep(SHARED / "gpu-benches" / f"gpu-l2-cache__{gpu}.txt")
    fit = fit_capacity(sweep["bytes"], sweep["bytes_per_s"], min_footprint_bytes=size / 8)
    assert fit.capacity_bytes == pytest.approx(value(frame, "l2.capacity_bytes"), rel=1e-5)
    assert fit.cache_bytes_per_s == pytest.approx(value(frame, "l2.bandwidth_bytes_per_s"), rel=0.05)
    assert fit.cache_bytes_per_s > 2 * fit.miss_bytes_per_s
    read = value(frame, "dram.read_bandwidth_bytes_per_s")
    if read:
        assert 1 / 1.5 < fit.miss_bytes_per_s / read < 1.5
    cut = sweep[sweep["bytes"] <= fit.capacity_bytes]
    assert fit_capacity(cut["bytes"], cut["bytes_per_s"], min_footprint_bytes=size / 8) is None


@pytest.mark.parametrize("name", NAMES)
def test_a_far_plateau_averages_far_hits_with_slower_misses(name):
    """A published staircase's plateau past one partition mixes far-partition hits with misses, so it lies
    above the far hits' own latency (Luo et al.'s per-access clusters) wherever both are published."""
    frame = load_reference(name)[1]
    hits, plateau = value(frame, "l2.far_latency_cycles"), value(frame, "l2.far_plateau_cycles")
    methods = frame.set_index("quantity")["method"]
    if plateau is not None:
        assert "staircase" in methods["l2.far_plateau_cycles"]
    if hits is not None:
        assert "per-access" in methods["l2.far_latency_cycles"]
    if hits is not None and plateau is not None:
        assert value(frame, "l2.latency_cycles") < hits < plateau < value(frame, "dram.latency_cycles")


#: Line (tag) ids and fill-block ids: a line is counted by capacity, a fill block by an address-order or cold
#: stride chase; the two must never share an id.
LINE_IDS, FILL_IDS = ("l1.line_bytes", "l2.line_bytes"), ("l1.fill_bytes", "l2.dram_fetch_bytes")


@pytest.mark.parametrize("name", NAMES)
def test_a_reference_line_is_a_line_and_a_fill_block_a_fill_block(name):
    frame = read_reference_csv(REFERENCE_DIR / f"{name}.csv").set_index("quantity")
    for q in set(LINE_IDS) & set(frame.index):
        method = frame.loc[q, "method"].lower()
        assert "capacity counted in lines" in method and "granularity" not in method, (name, q, method)
    for q in set(FILL_IDS) & set(frame.index):
        assert "granularity" in frame.loc[q, "method"].lower(), (name, q)


def test_a_schema_1_run_never_compares_its_fill_block_against_a_published_line():
    """A schema-1 run wrote its 32-byte L1 fill block as l1.line_bytes.  Compared with mt4g's H100 figures it
    must sit beside their fill block, and the published 128-byte line beside nothing."""
    from gpuatlas.analysis.compare import compare
    from conftest import SCHEMA1_RUN

    table = compare([SCHEMA1_RUN, "ref:h100-sxm"])
    run, ref = [c for c in table.columns if c != "unit" and not c.startswith("ratio")]
    assert pd.isna(table.loc["l1.line_bytes", run]) and table.loc["l1.line_bytes", ref] > 0
    assert table.loc["l1.fill_bytes", run] > 0 and table.loc["l1.fill_bytes", ref] > 0
    assert "mem.sector_bytes" not in table.index
