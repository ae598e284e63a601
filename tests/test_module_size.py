"""No Python module outside the tests is over 400 lines: one that grows past it is split by role
(the parser from the commands, the raw-file readers from the fits)."""
from conftest import REPO

MAX_LINES = 400
PACKAGES = ("analysis", "gpuatlas", "probes", "tools")


def test_no_module_is_over_400_lines():
    long = {str(path.relative_to(REPO)): n for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split by role: {long}"
