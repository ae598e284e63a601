"""Link and collective quantities from the link probes: NVLink facts, the P2P matrices and latency, NCCL bus
bandwidth.  A node-wide figure is the median over the GPU pairs of each pair's median."""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.collectives import COLLECTIVES
from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select


def _of(measurements: pd.DataFrame, probe: str, metric: str) -> pd.DataFrame:
    if "probe" not in measurements or not len(measurements):
        return measurements.iloc[:0]
    return select(measurements, probe, metric)


def pair_medians(frame: pd.DataFrame, by=("src", "dst")) -> pd.Series:
    if frame.empty:
        return pd.Series(dtype=float)
    return frame.groupby(list(by))["value"].median()


def matrix(measurements: pd.DataFrame, probe: str, metric: str, **params) -> pd.DataFrame:
    """src x dst table of each pair's median ``metric`` (rows: the GPU issuing, columns: the peer)."""
    frame = _of(measurements, probe, metric)
    for name, value in params.items():
        frame = frame[frame[name] == value] if name in frame else frame.iloc[:0]
    if frame.empty:
        return pd.DataFrame()
    table = pair_medians(frame).unstack("dst")
    table.index.name, table.columns.name = "src", "dst"
    return table


def pair_link_rate(measurements: pd.DataFrame) -> pd.Series:
    """(src, dst) -> bytes/s one way the NVLinks between them carry as NVML rates them: the links from src
    that end at dst, or through NVSwitches every active link of src, times the per-link speed.  Ordered
    pairs both ways (NVML lists each unordered pair once, from the lower index)."""
    facts = {m: pair_medians(_of(measurements, "link.topology", m)) for m in
             ("nvlink_links_to_peer", "nvlink_links_to_switch", "nvlink_link_bytes_per_s")}
    if any(v.empty for v in facts.values()):
        return pd.Series(dtype=float)
    links = facts["nvlink_links_to_peer"].where(facts["nvlink_links_to_peer"] > 0, facts["nvlink_links_to_switch"])
    rate = (links * facts["nvlink_link_bytes_per_s"]).dropna()
    rate = rate[rate > 0]
    swapped = rate.copy()
    swapped.index = swapped.index.swaplevel()
    return pd.concat([rate, swapped]).rename_axis(["src", "dst"])


def _pair_row(quantity, frame, method, probe):
    """Median over pairs of the pairs' medians, with the bootstrap CI of that median."""
    medians = pair_medians(frame)
    return derived_row(quantity, *median_ci(medians.values), f"{method}; median over {len(medians)} GPU pairs",
                       probe)


def link_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    topo = "link.topology"
    for metric, quantity, pick in (("nvlink_active_links", "nvlink.links", "median"),
                                   ("nvlink_version", "nvlink.version", "max"),
                                   ("nvlink_link_bytes_per_s", "nvlink.link_bandwidth_bytes_per_s", "median")):
        values = _of(measurements, topo, metric)["value"]
        if len(values):
            v = getattr(values, pick)()
            rows.append(derived_row(quantity, v, values.min(), values.max(), f"NVML, {pick} over GPU pairs", topo))
    rate = pair_link_rate(measurements)
    if len(rate):
        rows.append(_pair_row("nvlink.pair_bandwidth_bytes_per_s", rate.rename("value").reset_index(),
                              "NVML: links a pair's traffic can use (direct links to the peer, else every link to "
                              "the NVSwitches) x the per-link speed", topo))
    copies = _of(measurements, "link.memcpy", "bandwidth")
    for direction, quantity in (("one_way", "p2p.memcpy_bandwidth_bytes_per_s"),
                                ("both_ways", "p2p.memcpy_bidirectional_bandwidth_bytes_per_s")):
        frame = copies[copies["direction"] == direction] if len(copies) else copies
        if len(frame):
            largest = frame[frame["message_bytes"] == frame["message_bytes"].max()]
            rows.append(_pair_row(quantity, largest, f"cudaMemcpyPeerAsync of {int(largest['message_bytes'].iat[0])} B "
                                  f"({direction.replace('_', ' ')}, both directions' bytes counted)", "link.memcpy"))
    kernels = _of(measurements, "link.p2p_bandwidth", "bandwidth")
    for op in ("read", "write"):
        frame = kernels[kernels["op"] == op] if len(kernels) else kernels
        if len(frame):
            rows.append(_pair_row(f"p2p.{op}_bandwidth_bytes_per_s", frame,
                                  f"16-byte {op}s from every SM through a peer pointer", "link.p2p_bandwidth"))
    reads = kernels[kernels["op"] == "read"] if len(kernels) else kernels
    if len(reads) and len(rate):
        fraction = (pair_medians(reads) / rate).dropna()
        if len(fraction):
            rows.append(derived_row("p2p.read_fraction_of_nvlink", *median_ci(fraction.values),
                                    f"each pair's peer-read bandwidth over its NVML link rate; median over "
                                    f"{len(fraction)} GPU pairs", "link.p2p_bandwidth"))
    for metric, suffix in (("latency", "cycles"), ("latency_time", "ns")):
        chase = _of(measurements, "link.p2p_latency", metric)
        if len(chase):
            for footprint, name in ((chase["footprint_bytes"].max(), "p2p.latency"),
                                    (chase["footprint_bytes"].min(), "p2p.l2_latency")):
                if name == "p2p.l2_latency" and suffix == "ns":
                    continue
                frame = chase[chase["footprint_bytes"] == footprint]
                rows.append(_pair_row(f"{name}_{suffix}", frame, f"dependent ld.global.cg chase over a "
                                      f"{int(footprint)} B chain in the peer's memory", "link.p2p_latency"))
    busbw = _of(measurements, "nccl.collectives", "busbw")
    for collective in COLLECTIVES:
        frame = busbw[busbw["collective"] == collective] if len(busbw) else busbw
        if len(frame):
            largest = frame[frame["message_bytes"] == frame["message_bytes"].max()]["value"]
            rows.append(derived_row(f"nccl.{collective}_busbw_bytes_per_s", *median_ci(largest),
                                    f"nccl-tests busbw at the largest message ({int(frame['message_bytes'].max())} B)",
                                    "nccl.collectives"))
    return rows


def collective_curves(measurements: pd.DataFrame) -> pd.DataFrame:
    """(collective, message_bytes, busbw median, algbw median): the bus-bandwidth curves."""
    frames = [_of(measurements, "nccl.collectives", m).groupby(["collective", "message_bytes"])["value"].median()
              .rename(m) for m in ("busbw", "algbw")] if len(_of(measurements, "nccl.collectives", "busbw")) else []
    return pd.concat(frames, axis=1).reset_index() if frames else pd.DataFrame()


def link_sections(run) -> list:
    """The node page's link sections from the run (a RunDir) of the link probes: skipped probes with their reason, the
    P2P matrices, the latency, the NCCL curves and the derived link quantities."""
    from gpuatlas.analysis.derive import derive
    from gpuatlas.analysis.units import fmt_value

    meta = run.read_meta()
    states = {pid: s for pid, s in meta["probes"].items() if pid.startswith(("link.", "nccl."))}
    sections = []
    skipped = [f"{pid}: skipped: {s['error']}" for pid, s in states.items() if s["status"] == "skipped"]
    failed = [f"{pid}: {s['status']}: {s['error']}" for pid, s in states.items()
              if s["status"] not in ("ok", "skipped")]
    if skipped or failed:
        sections.append(("Link and collective probes not measured", skipped + failed))
    if not any(s["configs_done"] for s in states.values()):
        return sections
    measurements = run.read_measurements()
    copies = _of(measurements, "link.memcpy", "bandwidth")
    largest = copies["message_bytes"].max() if len(copies) else None
    for title, probe, metric, params, unit in (
            ("cudaMemcpyPeer one way", "link.memcpy", "bandwidth",
             {"direction": "one_way", "message_bytes": largest}, "B/s"),
            ("cudaMemcpyPeer both ways", "link.memcpy", "bandwidth",
             {"direction": "both_ways", "message_bytes": largest}, "B/s"),
            ("kernel reads through a peer pointer", "link.p2p_bandwidth", "bandwidth", {"op": "read"}, "B/s"),
            ("kernel writes through a peer pointer", "link.p2p_bandwidth", "bandwidth", {"op": "write"}, "B/s"),
            ("remote load latency (peer HBM chain)", "link.p2p_latency", "latency_time", {}, "s")):
        if probe == "link.p2p_latency":
            chase = _of(measurements, probe, metric)
            params = {"footprint_bytes": chase["footprint_bytes"].max()} if len(chase) else {}
        table = matrix(measurements, probe, metric, **params)
        if len(table):
            shown = table.map(lambda v: "" if pd.isna(v) else fmt_value(v, unit)).reset_index()
            shown.columns = ["src \\ dst"] + [str(c) for c in table.columns]
            sections.append((f"P2P matrix: {title}", shown))
    curves = collective_curves(measurements)
    if len(curves):
        sections.append(("NCCL bus bandwidth against message size (nccl-tests busbw; NVLS off)", pd.DataFrame({
            "collective": curves["collective"], "message": [fmt_value(v, "B") for v in curves["message_bytes"]],
            "busbw": [fmt_value(v, "B/s") for v in curves["busbw"]],
            "algbw": [fmt_value(v, "B/s") for v in curves["algbw"]]})))
    derived = derive(meta, measurements)
    if len(derived):
        sections.append(("Link quantities", pd.DataFrame({
            "quantity": derived["quantity"],
            "value": [fmt_value(v, u) for v, u in zip(derived["value"], derived["unit"])],
            "method": derived["method"]})))
    return sections


FAMILY = Family(order=110, probe_modules=("links", "collectives"), rows=lambda m, device: link_rows(m), quantities={
    "nvlink.links": ("1", "active NVLinks of a GPU (NVML), median over the GPUs of the run"),
    "nvlink.version": ("1", "NVLink generation the links run (NVML)"),
    "nvlink.link_bandwidth_bytes_per_s": ("B/s", "speed of one NVLink as NVML reports it (its common link speed)"),
    "nvlink.pair_bandwidth_bytes_per_s": ("B/s", "NVLink rate between two GPUs one way as NVML rates it: the "
                                                 "links their traffic can use x the per-link speed, median over "
                                                 "pairs"),
    "p2p.read_fraction_of_nvlink": ("1", "peer-read bandwidth of a kernel over the pair's NVML link rate, median "
                                         "over GPU pairs"),
    "p2p.memcpy_bandwidth_bytes_per_s": ("B/s", "cudaMemcpyPeerAsync bandwidth one way, largest message, median "
                                                "over GPU pairs"),
    "p2p.memcpy_bidirectional_bandwidth_bytes_per_s": ("B/s", "cudaMemcpyPeerAsync both ways at once (bytes of "
                                                              "both directions), median over GPU pairs"),
    "p2p.read_bandwidth_bytes_per_s": ("B/s", "a kernel's 16-byte loads from a peer GPU's memory through a peer "
                                              "pointer, median over GPU pairs"),
    "p2p.write_bandwidth_bytes_per_s": ("B/s", "a kernel's 16-byte stores into a peer GPU's memory, median over "
                                               "GPU pairs"),
    "p2p.latency_cycles": ("cycles", "dependent load from a peer GPU's HBM (chain of 4x L2), link both ways "
                                     "included, in the issuing GPU's cycles"),
    "p2p.latency_ns": ("s", "the same remote latency in seconds (globaltimer)"),
    "p2p.l2_latency_cycles": ("cycles", "dependent load that hits the peer GPU's L2 (a chain of L2/4, walked "
                                        "once before timing)"),
    "nccl.all_reduce_busbw_bytes_per_s": ("B/s", "NCCL all-reduce bus bandwidth (nccl-tests busbw: algbw x "
                                                 "2(n-1)/n), largest message, NVLS off"),
    "nccl.all_gather_busbw_bytes_per_s": ("B/s", "NCCL all-gather bus bandwidth (algbw x (n-1)/n), largest "
                                                 "message, NVLS off"),
    "nccl.reduce_scatter_busbw_bytes_per_s": ("B/s", "NCCL reduce-scatter bus bandwidth (algbw x (n-1)/n), "
                                                     "largest message, NVLS off"),
    "nccl.broadcast_busbw_bytes_per_s": ("B/s", "NCCL broadcast bus bandwidth (algbw x 1), largest message, "
                                                "NVLS off"),
})
