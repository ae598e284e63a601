"""`gpuatlas export accel-sim`: the committed run's and a simulated A100 run's configs parse under GPGPU-Sim's
option grammar, name only options the simulator knows, cover every option Accel-Sim's tuner sets, and every
measured option's value traces to the run's derived.csv."""
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from gpuatlas.analysis.accelsim import options, render
from gpuatlas.analysis.accelsim_options import KNOWN, ConfigError, cache_fields, parse
from gpuatlas.analysis.results import RunDir
from gpuatlas.cli import main

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "reports" / "h200"
TUNER_LIST = REPO.parent / "shared" / "reference" / "accel-sim-tuner-options.txt"
#: A citation in a measured option's comment: ``id = value unit [low, high]``.
CITED = re.compile(r"([a-z0-9_]+(?:\.[a-z0-9_]+)+) = (\S+) (\S+) \[(\S+), (\S+)\]")


def _committed():
    run = RunDir(COMMITTED)
    return run.read_meta(), run.read_derived()


def untraced(text: str, derived: pd.DataFrame) -> list[str]:
    """Measured options whose cited quantities are not the run's (id absent, or value or CI not the
    derived.csv's to the printed six digits), or that cite nothing."""
    rows = derived.set_index("quantity")
    bad = []
    for line in text.splitlines():
        if line.startswith("#") or "# measured:" not in line:
            continue
        cited = CITED.findall(line.split("#", 1)[1])
        if not cited:
            bad.append(f"{line.split()[0]} cites nothing")
        for quantity, value, unit, low, high in cited:
            if quantity not in rows.index:
                bad.append(f"{quantity}: not in derived.csv")
                continue
            row = rows.loc[quantity]
            for got, want in ((value, row["value"]), (low, row["ci_low"]), (high, row["ci_high"])):
                both_na = math.isnan(float(got)) and math.isnan(float(want))  # an interval n/a on both sides
                if not (both_na or math.isclose(float(got), float(want), rel_tol=1e-5)):
                    bad.append(f"{quantity}: {got} is not {want}")
            if unit != row["unit"]:
                bad.append(f"{quantity}: unit {unit} is not {row['unit']}")
    return bad


@pytest.fixture(scope="module")
def committed_files():
    meta, derived = _committed()
    return render(meta, derived), derived


def test_the_committed_runs_export_parses_and_names_only_known_options(committed_files):
    files, _ = committed_files
    names = [name for text in files.values() for name, _ in parse(text)]
    assert names and set(names) <= set(KNOWN)
    assert all(n.startswith("-trace_opcode_") for n, _ in parse(files["trace.config"]))


def test_every_tuner_option_is_set_or_says_why_not(committed_files):
    files, _ = committed_files
    text = "\n".join(files.values())
    set_names = {name for name, _ in parse(text)}
    why_not = dict(re.findall(r"^# (-\S+): not set: (.+)$", text, re.MULTILINE))
    assert set_names | set(why_not) == set(KNOWN) and not set_names & set(why_not)
    assert all(len(reason) > 10 for reason in why_not.values())
    assert len(set_names) > len(why_not)  # most of the config comes from the run


def test_every_option_line_says_where_its_value_comes_from(committed_files):
    files, _ = committed_files
    for line in "\n".join(files.values()).splitlines():
        if line.startswith("-"):
            assert re.search(r"  # (measured|driver|default): \S", line), line


def test_every_measured_option_traces_to_derived_csv(committed_files):
    files, derived = committed_files
    text = "\n".join(files.values())
    assert text.count("# measured:") >= 20
    assert untraced(text, derived) == []
    # negative control: a derived.csv with one cited value moved no longer traces
    moved = derived.copy()
    moved.loc[moved["quantity"] == "l1.latency_cycles", "value"] *= 1.01
    assert any(b.startswith("l1.latency_cycles") for b in untraced(text, moved))


def _value(text: str, name: str) -> str:
    return dict(parse(text))[name]


def test_latencies_follow_accel_sims_definitions(committed_files):
    files, derived = committed_files
    text = files["gpgpusim.config"]
    v = derived.set_index("quantity")["value"]
    assert int(_value(text, "-gpgpu_l1_latency")) == round(v["l1.latency_cycles"])
    assert int(_value(text, "-gpgpu_smem_latency")) == round(v["smem.latency_cycles"])
    assert int(_value(text, "-gpgpu_l2_rop_latency")) == round(v["l2.latency_cycles"] - v["l1.latency_cycles"])
    assert int(_value(text, "-dram_latency")) == round(v["dram.latency_cycles"] - v["l2.latency_cycles"])
    lat, init = map(int, _value(files["trace.config"], "-trace_opcode_latency_initiation_sp").split(","))
    assert lat == round(v["inst.ffma.latency_cycles"])
    assert init == max(1, round(32 / (v["inst.ffma.ops_per_clk_sm"] / round(v["sm.schedulers"]))))


def test_the_caches_fields_sit_in_their_positions(committed_files):
    files, derived = committed_files
    meta, _ = _committed()
    v = derived.set_index("quantity")["value"]
    text = files["gpgpusim.config"]
    dl1 = cache_fields(_value(text, "-gpgpu_cache:dl1"))
    assert dl1["line_bytes"] == v["l1.line_bytes"] and dl1["kind"] == "S"  # 32-byte sectors in 128-byte lines
    assert dl1["sets"] * dl1["ways"] * dl1["line_bytes"] == pytest.approx(v["l1.capacity_bytes"], rel=0.01)
    assert (dl1["write"], dl1["mshr_kind"]) == ("T", "A") and dl1["mshr_entries"] > 0
    dl2 = cache_fields(_value(text, "-gpgpu_cache:dl2"))
    slices = int(_value(text, "-gpgpu_n_mem")) * int(_value(text, "-gpgpu_n_sub_partition_per_mchannel"))
    held = dl2["sets"] * dl2["ways"] * dl2["line_bytes"] * slices
    assert held == pytest.approx(meta["device"]["l2_bytes"], rel=0.05)
    assert dl2["sets"] & (dl2["sets"] - 1) == 0 and dl2["write"] == "B"
    # the channels times their width is the driver's bus
    assert int(_value(text, "-gpgpu_n_mem")) * int(_value(text, "-gpgpu_dram_buswidth")) * 8 == \
        meta["device"]["memory_bus_bits"]


@pytest.mark.parametrize("text, fault", [
    ("-gpgpu_l1_latency 32\n-gpgpu_l1_latenzy 33", "unknown option"),
    ("-gpgpu_l1_latency", "without a value"),
    ("-gpgpu_l1_latency 32 # a comment\n-gpgpu_l1_latency 33", "set twice"),
    ("-gpgpu_l1_latency 3.5", "not a int"),
    ("-gpgpu_cache:dl1 S:4:128:64,T:L:m:L:L,A:512:8,16:0,32", "not a cache"),  # write and replacement swapped
    ("-gpgpu_cache:dl1 S:4:128,L:T:m:L:L,A:512:8,16:0,32", "not a cache"),  # no ways
    ("-ptx_opcode_latency_int 4,13,4,5,145", "not a ptx_int"),  # five of six positions
    ("-gpgpu_clock_domains 1980:1980:1980", "not a clocks"),
])
def test_the_grammar_refuses_what_the_simulator_would(text, fault):
    with pytest.raises(ConfigError, match=fault):
        parse(text)


def test_the_grammar_reads_a_config_of_the_simulators_own_form():
    text = ("# comment line\n-gpgpu_cache:dl2 S:32:128:24,L:B:m:L:P,A:192:4,32:0,32  # trailing\n"
            "-gpgpu_clock_domains 1447.0:1447.0:1447.0:850.0\n-ptx_opcode_latency_fp 4,13,4,5,39\n")
    parsed = parse(text)
    assert [n for n, _ in parsed] == ["-gpgpu_cache:dl2", "-gpgpu_clock_domains", "-ptx_opcode_latency_fp"]
    fields = cache_fields(parsed[0][1])
    assert (fields["sets"], fields["line_bytes"], fields["ways"], fields["set_index"], fields["mshr_entries"],
            fields["data_port_width"]) == (32, 128, 24, "P", 192, 32)


@pytest.mark.skipif(not TUNER_LIST.is_file(), reason="../shared/reference is optional")
def test_the_known_options_are_the_tuners_list():
    listed = {line.strip() for line in TUNER_LIST.read_text().splitlines() if line.startswith("-")}
    assert set(KNOWN) == listed


def test_a_run_missing_quantities_leaves_those_options_not_set(committed_files):
    meta, derived = _committed()
    without = derived[~derived["quantity"].isin(["l1.latency_cycles", "sm.schedulers"])]
    made = {o.name: o for o in options(meta, without)}
    assert made["-gpgpu_l1_latency"].value is None and "l1.latency_cycles" in made["-gpgpu_l1_latency"].why
    assert made["-gpgpu_num_sched_per_core"].value is None
    assert made["-gpgpu_l2_rop_latency"].value is None  # it needs the L1 hit too
    parse("\n".join(render(meta, without).values()))


@pytest.fixture(scope="module")
def simulated_a100(tmp_path_factory):
    """A quick simulated run (tests/fakes/) of the probes the export reads, on an A100's device properties."""
    import fakes

    from gpuatlas.machinery import runner

    devices = json.loads((REPO / "tests" / "fixtures" / "devices.json").read_text())
    device = {k: v for k, v in devices["a100-40gb"].items() if not k.startswith("_")}
    ids = {"clock.sm", "launch.overhead", "chase.latency", "chase.miss", "chase.smem", "chase.line", "exec.inst",
           "exec.schedule", "exec.mma_latency", "compute.mma_sync", "bw.dram", "geometry.l1", "geometry.l2_sets"}
    probes = [p for p in fakes.simulated_probes() if p.id in ids]
    run, meta = runner.new_run(tmp_path_factory.mktemp("a100"), device, {}, probes, "quick", {}, 0, ["test"])
    runner.execute(run, meta, probes, isolate=False)
    return run.path


def test_a_simulated_a100_run_exports_a_config_of_its_own(simulated_a100, tmp_path, capsys):
    assert main(["export", "accel-sim", str(simulated_a100), "-o", str(tmp_path / "cfg")]) == 0
    assert capsys.readouterr().out.count("export: ") == 2
    text = (tmp_path / "cfg" / "gpgpusim.config").read_text()
    trace = (tmp_path / "cfg" / "trace.config").read_text()
    parsed = dict(parse(text))
    assert parse(trace)
    assert (parsed["-gpgpu_n_clusters"], parsed["-gpgpu_compute_capability_major"], parsed["-gpgpu_n_mem"]) == \
        ("108", "8", "40")
    assert parsed["-gpgpu_shmem_option"].endswith(",164")
    derived = RunDir(simulated_a100).read_derived()
    assert untraced(text + trace, derived) == []
    assert int(parsed["-gpgpu_l1_latency"]) == round(derived.set_index("quantity")["value"]["l1.latency_cycles"])


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    def error(argv):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("gpuatlas: error: ") and "\n" not in err and "Traceback" not in err
        return err

    assert "not a gpuatlas run" in error(["export", "accel-sim", str(tmp_path)])
    (tmp_path / "file").write_text("x")
    assert "is a file" in error(["export", "accel-sim", str(COMMITTED), "-o", str(tmp_path / "file")])
    assert "cannot make" in error(["export", "accel-sim", str(COMMITTED), "-o", str(tmp_path / "file" / "sub")])
    assert "invalid choice" in error(["export", "gem5", str(COMMITTED)])
    assert not (tmp_path / "file" / "sub").exists()
