"""The atlas diagram draws the run's own numbers: every number on it, read back from its text, is the run's
derived value (or the driver's property it names), and every level the run lacks is drawn "not measured";
for the committed H200 run and for a simulated A100 run."""
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from gpuatlas.analysis import atlas  # noqa: E402
from gpuatlas.analysis.results import RunDir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: What each printed unit is in the base units derived.csv stores (bytes, B/s, Hz, s, cycles, counts).
SCALE = {"": 1, "cycles": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "B/s": 1, "kB/s": 1e3,
         "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12, "Hz": 1, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9, "s": 1, "ms": 1e-3,
         "µs": 1e-6, "ns": 1e-9, "B/cycle": 1, "per cycle": 1}
NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?: (.+))?$")
#: A printed number carries at least three significant digits: read back, it is within half its last digit.
TOLERANCE = 0.006


def read(text: str, unit: str | None = None) -> float:
    """A printed number with its unit in base units; a bare number takes ``unit`` (its value's)."""
    number, printed = NUMBER.match(text.strip()).groups()
    return float(number) * SCALE[printed if printed is not None else (unit or "")]


def numbers_of(text: str) -> dict:
    """{"value", "low", "high", "time"} read from "label: value [low, high], time" (the interval may be n/a)."""
    _, rest = text.split(": ", 1)
    value, _, tail = rest.partition(" [")
    unit = NUMBER.match(value).group(2) or ""
    out = {"value": read(value)}
    interval, _, time = tail.partition("]")
    if interval != "n/a":
        low, high = interval.split(", ")
        out.update(low=read(low, unit), high=read(high, unit))
    if time.startswith(", "):
        out["time"] = read(time[2:])
    return out


def close(shown: float, truth: float) -> bool:
    return abs(shown - truth) <= TOLERANCE * abs(truth)


def misdrawn(ax, meta: dict, derived: pd.DataFrame) -> list[str]:
    """Every way the drawn atlas departs from the run: a number with no source, a number not its source's
    value, a measured quantity drawn missing, a missing one drawn measured."""
    d = derived.set_index("quantity")
    clock = d["value"].get(atlas.CLOCK)
    problems, drawn = [], {}
    for text in ax.texts + [ax.title]:
        gid, content = text.get_gid() or "", text.get_text()
        kind, _, name = gid.partition(":")
        drawn[name] = kind
        if kind == "driver" and name == "name":
            problems += [] if content.startswith(meta["device"]["name"]) else [f"title {content!r}"]
        elif kind == "driver":
            problems += [] if close(read(content.split(": ", 1)[1]), meta["device"][name]) else [content]
        elif kind == "missing" and (name in d.index or not content.endswith(": not measured")):
            problems.append(f"{name} drawn missing: {content!r}")
        elif kind == "derived":
            shown, row = numbers_of(content), d.loc[name]
            truth = {"value": row["value"], "low": row["ci_low"], "high": row["ci_high"]}
            if row["unit"] == "cycles" and clock:
                truth["time"] = row["value"] / clock
            no_interval = not (np.isfinite(row["ci_low"]) and np.isfinite(row["ci_high"])) or row["ci_low"] == row["ci_high"]
            if set(shown) != set(truth) - ({"low", "high"} if no_interval else set()):
                problems.append(f"{name}: drew {sorted(shown)} of {content!r}")
            problems += [f"{name} {key}: {content!r}" for key in shown if not close(shown[key], truth[key])]
        elif re.search(r"(?<![A-Za-z\d])\d", content):  # a number, not the 1 of "L1"
            problems.append(f"a number with no source: {content!r}")
    for quantity in atlas.quantities():
        expected = "derived" if quantity in d.index else "missing"
        if drawn.get(quantity) != expected:
            problems.append(f"{quantity}: drawn {drawn.get(quantity)}, run has it {expected}")
    return problems


@pytest.fixture(scope="module")
def committed():
    run = RunDir(ROOT / "reports" / "h200")
    return run.read_meta(), run.read_derived()


@pytest.fixture(scope="module")
def simulated_a100(tmp_path_factory):
    """A quick run of a few simulated probes, links among them, on a node of two GPUs with an A100 40 GB's
    recorded properties."""
    import fakes

    from gpuatlas.analysis.derive import derive
    from gpuatlas.machinery import runner

    a100 = {k: v for k, v in json.loads((ROOT / "tests/fixtures/devices.json").read_text())["a100-40gb"].items()
            if not k.startswith("_")}
    device = {**fakes.DEVICE, **a100, "uuid": "GPU-sim-a100", "gpu_count": 2}  # a node of two: links measured
    probes = [p for p in fakes.simulated_probes()
              if p.id in ("clock.sm", "chase.latency", "chase.smem", "bw.onchip", "bw.dram", "bw.l2", "chase.miss",
                          "link.topology", "link.memcpy", "link.p2p_latency")]
    run, meta = runner.new_run(tmp_path_factory.mktemp("a100"), device, {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    return meta, derive(meta, run.read_measurements())


def test_the_committed_runs_atlas_draws_its_numbers(committed):
    meta, derived = committed
    ax = atlas.atlas(meta, derived)
    assert misdrawn(ax, meta, derived) == []
    d = set(derived["quantity"])
    assert {"l1.latency_cycles", "l2.latency_cycles", "dram.latency_cycles", "tlb.l1.reach_bytes"} <= d
    missing = [t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("missing:")]
    assert len(missing) == sum(q not in d for q in atlas.quantities())
    plt.close(ax.figure)


def test_a_simulated_a100s_atlas_draws_its_numbers_and_its_gaps(simulated_a100):
    meta, derived = simulated_a100
    ax = atlas.atlas(meta, derived)
    assert misdrawn(ax, meta, derived) == []
    assert ax.title.get_text().startswith("NVIDIA A100")
    texts = {t.get_gid(): t.get_text() for t in ax.texts}
    assert texts["driver:sm_count"] == f"SMs: {meta['device']['sm_count']}"
    assert texts["missing:tlb.l1.reach_bytes"].endswith("not measured")  # the run had no chase.tlb
    assert texts["missing:l1.capacity_bytes"].endswith("not measured")  # a quick chase resolves no capacity
    assert {"derived:nvlink.links", "derived:p2p.latency_cycles", "derived:p2p.memcpy_bandwidth_bytes_per_s"} <= set(texts)
    plt.close(ax.figure)


def test_the_check_sees_a_wrong_number_and_a_level_drawn_missing(committed):
    """Negative controls: a value 2% off what the atlas drew, and a quantity the atlas was not given."""
    meta, derived = committed
    ax = atlas.atlas(meta, derived)
    shifted = derived.copy()
    shifted.loc[shifted["quantity"] == "l2.latency_cycles", "value"] *= 1.02
    assert [p for p in misdrawn(ax, meta, shifted) if p.startswith("l2.latency_cycles value")]
    ax.text(0, 0, "HBM: 700 cycles")
    assert "a number with no source: 'HBM: 700 cycles'" in misdrawn(ax, meta, derived)
    plt.close(ax.figure)
    fewer = derived[derived["quantity"] != "dram.latency_cycles"]
    ax = atlas.atlas(meta, fewer)
    assert misdrawn(ax, meta, fewer) == []
    assert misdrawn(ax, meta, derived) == ["dram.latency_cycles drawn missing: 'latency: not measured'",
                                           "dram.latency_cycles: drawn missing, run has it derived"]
    plt.close(ax.figure)


def lines_outside_their_boxes(ax) -> list[str]:
    """Each line of text that runs past the right edge of the innermost box it starts in."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [p.get_window_extent(renderer) for p in ax.patches]
    out = []
    for text in ax.texts:
        if not text.get_text():
            continue  # an arrow between levels
        extent = text.get_window_extent(renderer)
        inside = [b for b in boxes if b.x0 <= extent.x0 <= b.x1 and b.y0 <= extent.y0 and extent.y1 <= b.y1]
        if inside and extent.x1 > min(inside, key=lambda b: b.width).x1:
            out.append(text.get_text())
    return out


def test_every_line_stays_inside_its_box(committed, simulated_a100):
    for meta, derived in (committed, simulated_a100):
        ax = atlas.atlas(meta, derived)
        ax.figure.tight_layout()  # as the report lays it out
        assert lines_outside_their_boxes(ax) == []
        line = next(t for t in ax.texts if t.get_gid() == "derived:l2.latency_cycles")  # in the near partition
        line.set_fontsize(14)  # negative control: a line grown past its box
        assert lines_outside_their_boxes(ax) == [line.get_text()]
        plt.close(ax.figure)
