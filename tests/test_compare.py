"""compare: the long form, ratios only between figures of one kind, a text view that never cuts a value,
footnotes alike in text, CSV and HTML, and one derived source shared with report."""
import math
import re
import shutil

import pandas as pd
import pytest

from gpuatlas.analysis.compare import (common_only, comparison, format_value, kind, left_out, level, ratios,
                                       resolve_baseline)
from gpuatlas.analysis.compare_text import csv_table, display, render_text
from gpuatlas.analysis.errors import UsageError
from gpuatlas.cli import main

from conftest import COMMITTED_RUN

CAVEAT = "[R] NVIDIA datasheet theoretical peak, not a measurement"


def _derived(rows):
    """A derived table (with source/note) from (quantity, value, unit, ci_low, ci_high, method, note) rows."""
    frame = pd.DataFrame(rows, columns=["quantity", "value", "unit", "ci_low", "ci_high", "method", "note"])
    return frame.assign(probe="p", source="a synthetic source")


@pytest.fixture
def synthetic():
    """Three GPUs with known numbers: B's HBM bandwidth is twice A's, its FP32 peak a datasheet figure."""
    a = _derived([("dram.read_bandwidth_bytes_per_s", 2e12, "B/s", 1.9e12, 2.1e12, "stream", ""),
                  ("fp32.peak_flops", 50e12, "FLOP/s", 49e12, 51e12, "FFMA chains", ""),
                  ("l2.capacity_bytes", 40 * 2**20, "B", 39 * 2**20, 41 * 2**20, "miss model fit", ""),
                  ("newlevel.thing", 3.0, "1", math.nan, math.nan, "counted", "")])
    b = _derived([("dram.read_bandwidth_bytes_per_s", 4e12, "B/s", math.nan, math.nan, "stream", "[R] from a table"),
                  ("fp32.peak_flops", 60e12, "FLOP/s", math.nan, math.nan, "datasheet FP32 peak", CAVEAT),
                  ("l2.capacity_bytes", 50 * 2**20, "B", math.nan, math.nan, "miss model fit", "[I] a fit")])
    c = _derived([("dram.read_bandwidth_bytes_per_s", 1e12, "B/s", math.nan, math.nan, "stream", "[R] slow"),
                  ("fp32.peak_flops", 30e12, "FLOP/s", math.nan, math.nan, "FFMA chains", "[R] measured")])
    loaded = {"run-a": ("GPU A [run-a]", a), "ref:b": ("GPU B [ref:b, published]", b),
              "ref:c": ("GPU C [ref:c, published]", c)}
    # the ref: prefix marks b and c as references: their notes are caveats, footnoted
    return comparison(list(loaded), loaded=loaded)


def test_long_form_has_the_promised_columns_grouped_by_level(synthetic):
    assert list(synthetic.columns) == ["id", "gpu", "quantity", "level", "value", "ci_low", "ci_high", "unit",
                                       "method", "kind", "source", "caveat"]
    assert list(dict.fromkeys(synthetic["id"])) == ["run-a", "ref:b", "ref:c"]  # the short id of each source
    assert len(synthetic) == 9
    assert list(dict.fromkeys(synthetic["level"])) == ["L2", "HBM", "compute", "newlevel"]
    row = synthetic[(synthetic.gpu == "GPU A [run-a]") & (synthetic.quantity == "fp32.peak_flops")].iloc[0]
    assert (row.value, row.ci_low, row.ci_high, row.unit) == (50e12, 49e12, 51e12, "FLOP/s")
    assert synthetic.loc[synthetic.gpu == "GPU B [ref:b, published]", "caveat"].str.len().gt(0).all()
    assert synthetic.loc[synthetic.gpu == "GPU A [run-a]", "caveat"].isna().all()


def test_levels_come_from_the_prefix_only():
    assert level("l2.dram_fetch_bytes") == level("l2.capacity_bytes") == "L2"
    assert level("l1.fill_bytes") == "L1" and level("tc.bf16.peak_flops") == "tensor"
    assert level("brand_new.quantity") == "brand_new"


def test_kind_reads_method_and_caveat():
    assert kind("datasheet FP32 peak", "") == "datasheet figure"
    assert kind("mt4g l2.size", "[R] the L2 size, not a fitted capacity") == "reported size"
    assert kind("SM clock the benchmark reported", "(not a measured busy-SM clock)") == "reported clock"
    assert kind("BabelStream Copy", "[R] 87% of the 3.35 TB/s datasheet") == "measurement"  # a mention is not a kind
    assert kind("miss model fit", None) == "measurement"


def test_ratios_against_the_baseline_and_pairwise(synthetic):
    r = ratios(synthetic).set_index(["numerator", "quantity"])
    assert r.at[("GPU B [ref:b, published]", "dram.read_bandwidth_bytes_per_s"), "ratio"] == pytest.approx(2.0)
    assert r.at[("GPU C [ref:c, published]", "fp32.peak_flops"), "ratio"] == pytest.approx(0.6)
    based = ratios(synthetic, "ref:c").set_index(["numerator", "quantity"])
    assert set(based.index.get_level_values(0)) == {"GPU A [run-a]", "GPU B [ref:b, published]"}
    assert based.at[("GPU B [ref:b, published]", "dram.read_bandwidth_bytes_per_s"), "ratio"] == pytest.approx(4.0)
    pairs = ratios(synthetic, pairwise=True)
    assert len(pairs[pairs.quantity == "dram.read_bandwidth_bytes_per_s"]) == 3
    with pytest.raises(UsageError, match="matches 3"):
        resolve_baseline(synthetic, "GPU")
    with pytest.raises(UsageError, match="matches 0"):
        resolve_baseline(synthetic, "ref:nope")


def test_different_kinds_get_no_ratio_but_a_footnote(synthetic):
    r = ratios(synthetic).set_index(["numerator", "quantity"])
    nc = r.loc[("GPU B [ref:b, published]", "fp32.peak_flops")]
    assert not nc["comparable"] and math.isnan(nc["ratio"])
    assert nc["why"] == "not comparable: datasheet figure against measurement"
    assert r.at[("GPU B [ref:b, published]", "l2.capacity_bytes"), "comparable"]  # same kind: a number
    text = render_text(synthetic, 200)
    (fp32,) = [line for line in text.splitlines() if line.startswith("fp32.peak_flops")]
    mark = re.search(r"n/c(\[\d+\])", fp32).group(1)
    assert f"{mark} not comparable: datasheet figure against measurement" in text
    assert "0.600" in fp32  # C against A is a measurement against a measurement


def test_common_keeps_what_every_gpu_has(synthetic):
    loaded = {"x": ("X", _derived([("a.q", 1.0, "1", math.nan, math.nan, "m", ""),
                                   ("b.q", 2.0, "1", math.nan, math.nan, "m", "")])),
              "y": ("Y", _derived([("a.q", 3.0, "1", math.nan, math.nan, "m", "")]))}
    assert set(comparison(list(loaded), loaded=loaded)["quantity"]) == {"a.q", "b.q"}
    assert set(comparison(list(loaded), common=True, loaded=loaded)["quantity"]) == {"a.q"}


def test_values_have_si_units_and_their_ci():
    assert format_value(4.7869e12, "B/s") == "4.79 TB/s"
    assert format_value(60 * 2**20, "B") == "60 MiB" and format_value(60.5 * 2**20, "B") == "60.5 MiB"
    assert format_value(32.0, "1", 32.0, 32.0) == "32 (n/a)"  # an integer as one; a zero-width CI is none
    assert format_value(222.0, "cycles", math.nan, math.nan) == "222 cycles (n/a)"
    assert format_value(4.0, "1", 3.0, 4.0) == "4 (3..4)"
    assert format_value(989.4e12, "FLOP/s") == "989 TFLOP/s"
    assert format_value(4.78e-6, "s", 4.72e-6, 4.89e-6) == "4.78 µs (4.72..4.89)"
    assert format_value(280.6, "cycles") == "281 cycles"
    assert format_value(0.0625, "1") == "0.0625"


def _value_strings(long):
    return [format_value(r.value, r.unit, r.ci_low, r.ci_high) for r in long.itertuples()]


def test_narrow_view_never_cuts_a_value(synthetic):
    for width in (80, 50):
        text = render_text(synthetic, width)
        lines = text.splitlines()
        assert max(map(len, lines)) <= width
        for value in _value_strings(synthetic):
            number = value.split(" (")[0]
            assert any(number in line for line in lines), (width, value)
    wide = render_text(synthetic, 250)
    assert "quantity" in wide and all(v in wide for v in _value_strings(synthetic))


@pytest.fixture
def real(committed_derive_shared):
    return comparison([str(COMMITTED_RUN), "ref:h100-sxm", "ref:a100-sxm4-80gb"])


def test_the_readme_command_at_80_columns_shows_every_value_whole(real):
    lines = render_text(real, 80).splitlines()
    assert max(map(len, lines)) <= 80
    for value in _value_strings(real):
        head, _, ci = value.partition(" (")
        assert any(head in line for line in lines), value
        if ci:
            assert any(f"({ci}" in line for line in lines), value


def test_footnotes_are_numbered_alike_in_text_csv_and_html(synthetic):
    text = render_text(synthetic, 80)
    table = csv_table(synthetic)
    shown, legend, notes = display(synthetic)
    caveat_note = next(n for n in notes if CAVEAT in n)
    number = caveat_note.split(" ")[0]
    assert caveat_note in text.replace("\n    ", " ")
    row = table[(table.gpu == "GPU B [ref:b, published]") & (table.quantity == "fp32.peak_flops")].iloc[0]
    assert number in row.footnotes and math.isnan(row.ratio) and row.ratio_note.startswith("not comparable")
    assert number in shown.set_index("quantity").at["fp32.peak_flops", "B"]
    assert any("GPU A [run-a]" in line for line in legend)
    # the run's rows carry no caveat, so no footnote
    run_row = table[(table.gpu == "GPU A [run-a]") & (table.quantity == "fp32.peak_flops")].iloc[0]
    assert run_row.footnotes == ""


def one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuatlas: error: ") and "\n" not in err
    return err


def test_compare_needs_two_sources(capsys):
    assert "two or more" in one_line_error(capsys, ["compare", "ref:h100-sxm"])


@pytest.fixture
def run_copy(tmp_path):
    dest = tmp_path / "run"
    shutil.copytree(COMMITTED_RUN, dest, ignore=shutil.ignore_patterns("report"))
    return dest


def test_compare_refuses_a_derived_csv_cut_mid_row(run_copy, capsys):
    data = (run_copy / "derived.csv").read_bytes()
    cut = data.index(b"\n", len(data) // 2) - 5
    (run_copy / "derived.csv").write_bytes(data[:cut])
    err = one_line_error(capsys, ["compare", str(run_copy), "ref:h100-sxm"])
    assert "derived.csv" in err
    assert "derived.csv" in one_line_error(capsys, ["report", str(run_copy), "--out", str(run_copy / "o")])


def test_compare_refuses_a_parquet_cut_in_half(run_copy, capsys):
    data = (run_copy / "measurements.parquet").read_bytes()
    (run_copy / "measurements.parquet").write_bytes(data[: len(data) // 2])
    assert "parquet" in one_line_error(capsys, ["compare", str(run_copy), "ref:h100-sxm"])


def test_compare_and_report_read_the_runs_measurements_not_its_stored_numbers(tmp_path):
    """A whole but edited derived.csv changes nothing: both commands derive from the measurements (of a small
    simulated run: the committed run's derived.csv is checked against a fresh derive in test_committed_run)."""
    from gpuatlas.analysis.derive import derive, derived_for
    from gpuatlas.analysis.results import RunDir, load_run
    from fakes import DEVICE
    from tests_support import small_simulated_run

    run_copy = small_simulated_run(tmp_path)
    stored = pd.read_csv(run_copy / "derived.csv")
    assert stored.loc[stored.quantity == "clock.sm_hz", "value"].item() != 1.0
    stored.loc[stored.quantity == "clock.sm_hz", "value"] = 1.0
    stored.to_csv(run_copy / "derived.csv", index=False)
    _, _, derived = derived_for(RunDir(run_copy))
    fresh = derive(*load_run(run_copy))
    pd.testing.assert_frame_equal(derived, fresh)
    long = comparison([str(run_copy), "ref:h100-sxm"], loaded={})
    clock = long[(long.quantity == "clock.sm_hz") & long.gpu.str.contains(DEVICE["name"])]["value"].iat[0]
    assert clock == fresh.set_index("quantity").at["clock.sm_hz", "value"] != 1.0


def test_cli_baseline_common_csv_and_plot(tmp_path, capsys):
    figure = tmp_path / "ratios.png"
    argv = ["compare", "ref:a100-sxm4-80gb", "ref:h100-sxm", "--baseline", "ref:h100-sxm", "--common"]
    assert main(argv + ["--plot", str(figure)]) == 0
    out = capsys.readouterr().out
    assert "B/A" not in out and "A/B" in out
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(argv + ["--csv"]) == 0
    table = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert (table.groupby("quantity")["gpu"].nunique() == 2).all()
    assert set(table["baseline"]) == {"NVIDIA H100 80GB HBM3 (SXM5) [ref:h100-sxm, published]"}
    assert "--plot" in one_line_error(capsys, argv + ["--plot", str(tmp_path / "missing" / "x.png")])
    assert "matches 0" in one_line_error(capsys, ["compare", "ref:a100-sxm4-80gb", "ref:h100-sxm",
                                                  "--baseline", "nope"])


def test_the_methods_excerpt_is_what_the_command_prints():
    from conftest import REPO

    methods = (REPO / "docs" / "methods.md").read_text()
    (excerpt,) = re.findall(r"`gpuatlas compare ref:a100-sxm4-80gb ref:h100-sxm` in an 80-column.*?```text\n(.*?)```",
                            methods, re.S)

    def norm(line):  # footnote numbers follow the reference files, which other rows may renumber
        return " ".join(re.sub(r"\[\d+\]", "[n]", line).split())

    every = comparison(["ref:a100-sxm4-80gb", "ref:h100-sxm"])
    common = common_only(every)
    printed = {norm(line) for line in render_text(common, 80, left_out=left_out(every, common)).splitlines()}
    shown = [line for line in excerpt.splitlines() if line.strip() and line != "..."]
    assert len(shown) > 5
    missing = [line for line in shown if norm(line) not in printed]
    assert not missing, f"docs/methods.md's compare excerpt is stale (rerun the command): {missing}"


def _chases(index: bool):
    """A run with the pure-LDS chase (and, with ``index``, the index-computing one) against a reference whose
    shared-memory latency is a published index-computing chase."""
    run = [("smem.latency_cycles", 23.0, "cycles", 23.0, 23.0, "pure LDS chase", "")]
    if index:
        run.append(("smem.index_latency_cycles", 34.0, "cycles", 34.0, 34.0, "index chase", ""))
    ref = [("smem.latency_cycles", 30.0, "cycles", math.nan, math.nan, "p-chase median", "[R] a chase")]
    loaded = {"run": ("GPU A [run]", _derived(run)), "ref:b": ("GPU B [ref:b, published]", _derived(ref))}
    return comparison(list(loaded), loaded=loaded)


def test_the_shared_memory_chase_is_set_against_a_published_chase_like_for_like():
    """A published chase computes each index; gpuatlas's like one is smem.index_latency_cycles, so the ratio
    takes it (30 / 34, not 30 / 23) and says so; without it there is no ratio, and the note says why."""
    long = _chases(index=True)
    row = ratios(long).set_index("quantity").loc["smem.latency_cycles"]
    assert row["ratio"] == pytest.approx(30 / 34) and row["comparable"] and "smem.index_latency_cycles" in row["why"]
    text = render_text(long, 100)
    assert "0.882[3]" in text and "[3] like for like" in text
    default = common_only(long)  # the default view: quantities both sides have, the like one kept for the ratio
    assert "0.882[3]" in render_text(default, 100) and "smem.index_latency_cycles  " not in render_text(default, 100)
    alone = ratios(_chases(index=False)).set_index("quantity").loc["smem.latency_cycles"]
    assert math.isnan(alone["ratio"]) and not alone["comparable"] and "did not measure" in alone["why"]
    # negative control: two runs (or two references) use one method, and keep their own numbers
    same = ratios(_chases(index=True).assign(caveat=None)).set_index("quantity").loc["smem.latency_cycles"]
    assert same["ratio"] == pytest.approx(30 / 23) and same["why"] == ""


def test_every_marker_printed_is_explained_where_it_is_printed():
    """The references' provenance markers ([R], [R2], [I]) appear in caveats; each one the text and HTML views
    print is explained among their notes, and a marker not printed is not."""
    from gpuatlas.analysis.compare_text import MARKERS

    long = comparison(["ref:a100-pcie", "ref:h100-sxm", "ref:h800-pcie"])
    text = render_text(long, 100)
    _, _, notes = display(long)
    printed = set(re.findall(r"\[[A-Z]\d?\]", text))
    assert printed >= {"[R]", "[I]", "[R2]"}
    for marker in printed:
        assert any(line.startswith(f"{marker} ") for line in notes), marker
        assert re.search(rf"^{re.escape(marker)} \(in a caveat\)", text, re.M), marker
    assert set(MARKERS) >= printed
    plain = render_text(_chases(index=True).assign(caveat=None), 100)
    assert not any(f"{m} (in a caveat)" in plain for m in MARKERS)
