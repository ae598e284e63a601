"""The hierarchy report in headless Chromium: the page loads with no errors, every figure is an image the
browser decodes, and the measured values are in the DOM."""
import base64
import re
import shutil
import subprocess

import pytest

from gpuatlas.analysis.report_figures import drawn_figures

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
    assert dom.index("Figure 1. The atlas") < dom.index("Memory hierarchy, reconstructed") < dom.index("Appendix A.")
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


def test_the_page_links_only_to_itself(page):
    """Self-contained: every link is to an anchor of the page, every image a data URI, and each anchor exists."""
    text = page[0].read_text()
    links = re.findall(r'href="([^"]*)"', text)
    assert links and all(link.startswith("#") for link in links), [x for x in links if not x.startswith("#")]
    ids = set(re.findall(r' id="([^"]+)"', text))
    assert {link[1:] for link in links} <= ids
    assert all(src.startswith("data:") for src in re.findall(r'src="([^"]*)"', text))


PDFTOTEXT = shutil.which("pdftotext")


@pytest.mark.skipif(PDFTOTEXT is None, reason="needs pdftotext (poppler-utils) to read the printed pages")
def test_printed_the_atlas_comes_first_and_every_figure_before_the_appendices(page, tmp_path):
    """Printed as a reader prints it: Figure 1 is the atlas, on page 1 or 2; every figure's caption is on a
    page before the first appendix's; the appendices (opened for print) hold the big tables."""
    html_path, derived, measurements = page
    pdf = tmp_path / "report.pdf"
    done = browse(tmp_path, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", html_path.as_uri())
    assert done.returncode == 0 and pdf.exists(), done.stderr[-2000:]
    text = subprocess.run([PDFTOTEXT, str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = [" ".join(p.split()) for p in text.split("\f")]

    def first_page(pattern: str) -> int:
        return next(i + 1 for i, p in enumerate(pages) if re.search(pattern, p))

    assert first_page(r"Figure 1\. The atlas") <= 2
    appendix = first_page(r"Appendix A\. Every derived quantity")
    figures = len(drawn_figures(measurements))
    assert max(first_page(rf"Figure {n}\. ") for n in range(1, figures + 1)) < appendix
    tail = " ".join(pages[appendix - 1:])
    unwrapped = "".join(tail.split())  # a narrow cell wraps a long name
    assert [q for q in derived["quantity"] if q not in unwrapped] == [], "every quantity printed in the appendix"
    assert "Instruction table" in tail and "Claims of §7.3" in tail


def test_pdf_without_weasyprint_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    import sys

    from gpuatlas.cli import main

    monkeypatch.setitem(sys.modules, "weasyprint", None)  # as if the pdf extra were not installed
    assert main(["report", "--pdf", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "gpuatlas: error: --pdf needs WeasyPrint (pip install 'gpuatlas[pdf]')" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_pdf_prints_the_page_as_a_paper(tmp_path):
    """With the pdf extra: a small run's report printed, the atlas on its first page, the appendices in it."""
    pytest.importorskip("weasyprint", reason="the pdf extra (pip install 'gpuatlas[pdf]')")
    if PDFTOTEXT is None:
        pytest.skip("needs pdftotext (poppler-utils) to read the printed pages")
    from tests_support import small_simulated_run

    from gpuatlas.cli import main

    run = small_simulated_run(tmp_path / "runs")
    assert main(["report", str(run), "--pdf", "--out", str(tmp_path / "out")]) == 0
    (pdf,) = (tmp_path / "out").glob("*/index.pdf")
    pages = subprocess.run([PDFTOTEXT, str(pdf), "-"], capture_output=True, text=True, check=True).stdout.split("\f")
    assert "Figure 1. The atlas" in " ".join(pages[0].split())
    assert "Appendix A. Every derived quantity" in " ".join(" ".join(pages).split())
