"""The fast paths of gpuatlas.analysis.stats give what the plain code gives: select inside split_by_probe equals a
boolean-mask select, and the bootstrap medians equal np.median over the same resamples."""
import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.stats import BLOCK_DRAWS, median_ci, of_probe, one_chunk, ratio_ci, select, split_by_probe


def _frame(rng, n: int = 600, contiguous: bool = True) -> pd.DataFrame:
    """A measurements-like frame: string and nullable-integer parameters with gaps, an all-missing column,
    flagged samples; probes in runs (as a run writes them) or shuffled."""
    probes = np.sort(rng.choice(["a", "b", "c"], n)) if contiguous else rng.choice(["a", "b", "c"], n)
    frame = pd.DataFrame({
        "probe": pd.array(probes, dtype="str"),
        "metric": pd.array(rng.choice(["latency", "bandwidth"], n), dtype="str"),
        "value": rng.normal(size=n),
        "flag": pd.array(rng.choice(["", "", "", "throttled", None], n), dtype="str"),
        "stride_bytes": pd.array(rng.choice([4, 128, None], n), dtype="Int64"),
        "flavour": pd.array(rng.choice(["default", "cg", None], n), dtype="str"),
        "empty": pd.array([None] * n, dtype="Int64"),
    })
    return frame.set_index(pd.RangeIndex(1000, 1000 + n))


def _plain_select(m: pd.DataFrame, probe: str, metric: str, **params) -> pd.DataFrame:
    """The reference: mask the whole frame, parameter by parameter, then drop flagged samples."""
    if any(name not in m for name in params):
        return m.iloc[:0]
    frame = m[(m["probe"] == probe) & (m["metric"] == metric)]
    for name, value in params.items():
        frame = frame[frame[name] == value]
    return frame[frame["flag"].fillna("") == ""]


QUERIES = [("a", "latency", {}), ("b", "bandwidth", {"stride_bytes": 128}), ("c", "latency", {"flavour": "cg"}),
           ("a", "latency", {"flavour": "default", "stride_bytes": 4}), ("b", "latency", {"empty": 4}),
           ("a", "latency", {"absent": 1}), ("zzz", "latency", {}), ("a", "nothing", {"stride_bytes": 4}),
           ("c", "bandwidth", {"stride_bytes": 64})]


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.index) == list(want.index)
    pd.testing.assert_frame_equal(got, want, check_index_type=False)


@pytest.mark.parametrize("contiguous", [True, False])
def test_select_in_a_split_is_the_plain_select(contiguous):
    m = _frame(np.random.default_rng(3), contiguous=contiguous)
    plain = [_plain_select(m, p, x, **kw) for p, x, kw in QUERIES]
    assert sum(len(f) for f in plain) > 100 and any(f.empty for f in plain)  # the queries hit and miss
    with split_by_probe(m):
        for (probe, metric, params), want in zip(QUERIES, plain):
            _same(select(m, probe, metric, **params), want)
            _same(select(m, probe, metric, **params), want)  # the second time, from the split
        for probe in ("a", "c", "zzz"):
            _same(of_probe(m, probe), m[m["probe"] == probe])
    for (probe, metric, params), want in zip(QUERIES, plain):  # and outside a split
        _same(select(m, probe, metric, **params), want)


def test_the_comparison_catches_a_select_that_keeps_flagged_samples():
    """Negative control: a select that forgets the flag fails the comparison above."""
    m = _frame(np.random.default_rng(3))
    unfiltered = m[(m["probe"] == "a") & (m["metric"] == "latency")]
    with pytest.raises(AssertionError):
        _same(unfiltered, _plain_select(m, "a", "latency"))


def test_a_split_inside_another_reads_the_outer_one_and_lasts_with_it():
    m = _frame(np.random.default_rng(4))
    with split_by_probe(m):
        first = select(m, "a", "latency")
        with split_by_probe(m):
            assert select(m, "a", "latency") is first  # the outer block's part
        assert select(m, "a", "latency") is first  # the inner block's end left the outer split in place
    m.loc[m["probe"] == "a", "flag"] = "throttled"
    assert len(first) and select(m, "a", "latency").empty


def _chunked(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a parquet of two row groups reads back: its string columns in two chunks."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame)
    half = len(frame) // 2
    return pa.concat_tables([table.slice(0, half), table.slice(half)]).to_pandas()


def test_one_chunk_keeps_every_value_and_dtype_in_one_chunk():
    m = _chunked(_frame(np.random.default_rng(5)))
    assert m["probe"].array.__arrow_array__().num_chunks == 2  # the case one_chunk is for
    joined = one_chunk(m)
    pd.testing.assert_frame_equal(joined, m)
    assert list(joined.dtypes) == list(m.dtypes) and joined.index.equals(m.index)
    for name in ("probe", "metric", "flag", "flavour"):
        assert joined[name].array.__arrow_array__().num_chunks == 1
    mask = (m["metric"] == "latency") & (m["flag"].fillna("") == "")
    pd.testing.assert_frame_equal(joined[mask], m[mask])
    assert one_chunk(joined) is joined  # nothing left to join


def test_a_split_lasts_only_its_block():
    m = _frame(np.random.default_rng(4))
    with split_by_probe(m):
        before = len(select(m, "a", "latency"))
    m.loc[m["probe"] == "a", "flag"] = "throttled"
    assert before and select(m, "a", "latency").empty


def _plain_median_ci(values, confidence=0.95, resamples=2000, seed=0):
    """The reference: np.median of every resample, drawn all at once."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (np.nan, np.nan, np.nan)
    rng = np.random.default_rng(seed)
    medians = np.median(values[rng.integers(0, values.size, (resamples, values.size))], axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(medians, [tail, 100 - tail])
    return float(np.median(values)), float(lo), float(hi)


def _samples(rng, n: int, kind: str) -> np.ndarray:
    if kind == "continuous":
        return rng.normal(300, 20, n)
    if kind == "duplicates":  # integer cycle counts: many ties
        return rng.integers(280, 290, n).astype(float)
    values = rng.normal(300, 20, n)  # with gaps the fit must skip
    values[:: 7] = np.nan
    values[1:: 11] = np.inf
    return values


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 31, 64, 999, 1000, 4097])
@pytest.mark.parametrize("kind", ["continuous", "duplicates", "gaps"])
def test_median_ci_is_the_plain_bootstrap(n, kind):
    values = _samples(np.random.default_rng(n), n, kind)
    assert median_ci(values) == _plain_median_ci(values)
    assert median_ci(values, seed=5, resamples=333) == _plain_median_ci(values, seed=5, resamples=333)


def test_median_ci_is_the_plain_bootstrap_over_many_blocks_and_wide_ranks():
    """Resamples drawn a block at a time with a partial last block, and more values than 16-bit ranks hold."""
    rng = np.random.default_rng(9)
    n = BLOCK_DRAWS // 3 + 1  # 2 resamples a block, 7 resamples: a partial block last
    values = rng.integers(0, 500, n).astype(float)
    assert median_ci(values, resamples=7) == _plain_median_ci(values, resamples=7)
    values = rng.normal(size=(1 << 16) + 2)
    assert median_ci(values, resamples=5) == _plain_median_ci(values, resamples=5)


def test_the_comparison_catches_an_even_count_read_off_one_middle_value():
    """Negative control: with an even count, the upper middle value alone is not the median np.median takes,
    so a bootstrap that read only it would fail the comparisons above."""
    values = np.random.default_rng(2).normal(size=10)
    rng = np.random.default_rng(0)
    upper = np.sort(values[rng.integers(0, 10, (2000, 10))], axis=1)[:, 5]
    tail = (1 - 0.95) / 2 * 100
    lo, hi = np.percentile(upper, [tail, 100 - tail])
    assert (float(np.median(values)), float(lo), float(hi)) != _plain_median_ci(values)


@pytest.mark.parametrize("sizes", [(5, 8), (30, 31), (1, 2)])
def test_ratio_ci_is_the_plain_bootstrap_of_both(sizes):
    rng = np.random.default_rng(sum(sizes))
    num, den = rng.normal(10, 1, sizes[0]), rng.normal(5, 1, sizes[1])
    draw = np.random.default_rng(0)
    ratios = (np.median(num[draw.integers(0, num.size, (2000, num.size))], axis=1)
              / np.median(den[draw.integers(0, den.size, (2000, den.size))], axis=1))
    tail = (1 - 0.95) / 2 * 100  # as ratio_ci computes it (not quite 2.5)
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    assert ratio_ci(num, den) == (float(np.median(num) / np.median(den)), float(lo), float(hi))
