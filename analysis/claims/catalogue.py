"""Every claim, in the lecture's order: the "Numbers worth memorizing" table, then §7.1-7.5 and §7.6-7.13."""
from analysis.claims.lecture_a import SECTIONS_1_TO_5
from analysis.claims.lecture_b import SECTIONS_6_TO_13
from analysis.claims.numbers import NUMBERS

CLAIMS = NUMBERS + SECTIONS_1_TO_5 + SECTIONS_6_TO_13
