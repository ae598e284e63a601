"""The lecture walked number by number: every number of its "Numbers worth memorizing" table, and at least 60
numbers of §7.1-7.13, sit inside the exact words a claim quotes; the few that are not claims say why."""
import re
from pathlib import Path

import pytest

from gpuatlas.analysis.claims import CLAIMS

LECTURE = Path(__file__).resolve().parents[1] / ".." / "shared" / "lecture" / "gpu-hardware-lecture.txt"

#: A number: digits not glued to a letter, a section sign or another number (H100, L2, bf16, §7.3, 0.7e9's 9).
NUMBER = re.compile(r"(?<![\w§.,/^])\d+(?:,\d{3})*(?:\.\d+)?")

#: Table numbers that are no claim, each with its reason, keyed by (the row's quantity cell, the number).
EXCEPTIONS = {
    ("On-chip total vs 7B weights", "7"): "the model's name (the reference 7B); its 13.5 GB of weights is the "
                                          "118x claim's input",
}


def lines(text: str, start: str, end: str) -> list[str]:
    body = text[text.index(start):text.index(end, text.index(start))]
    return [line for line in body.splitlines() if line.strip()]


def numbers(line: str):
    """(number, start, end) of each number in ``line``."""
    return [(m.group(), m.start(), m.end()) for m in NUMBER.finditer(line)]


def covered(line: str, claims=CLAIMS) -> list[tuple[str, list[str]]]:
    """Each number of ``line`` with the ids of the claims whose quoted words contain it there."""
    spans = []
    for claim in claims:
        for quote in claim.quote:
            start = line.find(quote)
            while start >= 0:
                spans.append((start, start + len(quote), claim.id))
                start = line.find(quote, start + 1)
    return [(n, [i for a, b, i in spans if a <= s and e <= b]) for n, s, e in numbers(line)]


@pytest.fixture(scope="module")
def text():
    if not LECTURE.exists():
        pytest.skip("the lecture (../shared/lecture) is not beside this checkout")
    return LECTURE.read_text()


def test_the_number_pattern_reads_the_lectures_numbers():
    assert [n for n, *_ in numbers("H100 keeps 2,048 threads, 33.8 MB at 1/32 in §7.3 of L2, bf16 0.7e9")] == [
        "2,048", "33.8", "1", "0.7"]


def test_every_quote_is_the_lectures_exact_wording(text):
    for claim in CLAIMS:
        assert claim.quote, claim.id
        for quote in claim.quote:
            assert quote in text, (claim.id, quote)


def test_every_number_of_the_numbers_worth_memorizing_table_maps_to_a_claim(text):
    table = lines(text, "Numbers worth memorizing\n", "Self-check")[1:]
    assert len(table) == 16  # the header and its 15 rows
    unmapped = [(line, n) for line in table for n, ids in covered(line) if not ids
                and (line.split("\t")[0], n) not in EXCEPTIONS]
    assert unmapped == []
    mapped = {i for line in table for _, ids in covered(line) for i in ids}
    assert len(mapped) >= 30


def test_at_least_60_numbers_of_sections_7_1_to_7_13_map_to_claims(text):
    body = lines(text, "7.1 The bet", "Discussion seeds")
    found = [(n, ids) for line in body for n, ids in covered(line)]
    mapped = [n for n, ids in found if ids]
    assert len(mapped) >= 60, len(mapped)
    assert len({i for _, ids in found for i in ids}) >= 60


def test_a_claim_without_its_quote_leaves_its_numbers_unmapped(text):
    """Negative control: drop the claims quoting the table's FP8 row and its numbers are no longer mapped."""
    row = next(line for line in lines(text, "Numbers worth memorizing\n", "Self-check") if "591 fp8" in line)
    fewer = [c for c in CLAIMS if not any(q in row for q in c.quote)]
    assert any(not ids for _, ids in covered(row, fewer))
