"""The hierarchy report in headless Chromium: the page loads with no errors, every figure is an image the
browser decodes, and the measured values are in the DOM."""
import base64
import re
import shutil
import subprocess

import pytest

from analysis.render import drawn_figures

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (the README's test set-up installs it)")


@pytest.fixture(scope="module")
def page(committed_run, committed_report):
    _, measurements = committed_run
    html, derived = committed_report
    return html, derived, measurements


def browse(tmp_path, *args):
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def test_report_loads_with_figures_and_measured_values(page, tmp_path):
    html_path, derived, measurements = page
    done = browse(tmp_path, "--virtual-time-budget=5000", "--dump-dom", html_path.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "Memory hierarchy, reconstructed" in dom and "The lecture's claims, judged" in dom
    assert not re.search(r"Uncaught|CONSOLE\(\d+\).*[Ee]rror", done.stderr), done.stderr[-2000:]
    images = re.findall(r'<img alt="[^"]*" src="data:image/svg\+xml;base64,([^"]+)"', dom)
    expected = drawn_figures(measurements)
    assert len(images) == len(expected) >= 5
    assert all(base64.b64decode(data).lstrip().startswith(b"<?xml") and b"<svg" in base64.b64decode(data)
               for data in images)
    d = derived.set_index("quantity")
    for quantity in ("l1.latency_cycles", "l2.latency_cycles", "dram.latency_cycles", "smem.banks"):
        assert f"{d.loc[quantity, 'value']:.4g}" in dom, quantity


def test_report_renders_to_a_non_blank_screenshot(page, tmp_path):
    html_path, _, _ = page
    shot = tmp_path / "shot.png"
    done = browse(tmp_path, "--window-size=1200,3000", f"--screenshot={shot}", html_path.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    assert shot.stat().st_size > 50_000, "a rendered page with tables and figures, not a blank one"
