"""The report page in a real browser: headless Debian chromium loads DIR/index.html, every figure loads, the console
stays silent, and a screenshot is saved as DIR/screenshot.png.

One quick report of a cheap theory subset (fischer, pdlt, stable: the three figure sources other than the
predictive-coding one, all LaTeX links, the cross-theory section) is shared by the module.  Broken images are
detected by the page's own load-time script (it sets body[data-images-ok]) read back with --dump-dom; console
messages (errors, uncaught exceptions) by chromium's --enable-logging=stderr "CONSOLE" lines: the page logs
nothing when it works.  Without chromium the browser tests are skipped, unless CI is set (then they fail).
"""
import json
import math
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from resprop.numeric.report.reproduce import reproduce

THEORIES = ("fischer", "pdlt", "stable")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync"]


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / "report"
    reproduce(out, list(THEORIES), quick=True, quiet=True)
    return out


def _chromium() -> str:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium not found; required when CI is set (Debian package: chromium)")
    pytest.skip("chromium not found (Debian package: chromium)")


def _run_chromium(report_dir: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args,
           (report_dir / "index.html").as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=180)


class _Body(HTMLParser):
    def __init__(self):
        super().__init__()
        self.body, self.imgs = {}, []

    def handle_starttag(self, tag, attrs):
        if tag == "body":
            self.body = dict(attrs)
        elif tag == "img":
            self.imgs.append(dict(attrs)["src"])


def test_report_loads_in_chromium_with_every_image_and_no_console_message(report_dir, tmp_path):
    res = _run_chromium(report_dir, tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom")
    assert res.returncode == 0, res.stderr[-3000:]
    dom = _Body()
    dom.feed(res.stdout)
    report = json.loads((report_dir / "report.json").read_text())
    n_figures = sum(len(t["figures"]) for t in report["theories"].values())
    assert n_figures >= 1 + 2 + 5 and len(dom.imgs) == n_figures
    assert dom.body.get("data-images-checked") == str(n_figures), dom.body
    assert dom.body.get("data-images-ok") == "true", f"images that did not load: {dom.body.get('data-images-failed')}"
    console = [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == [], "console messages:\n" + "\n".join(console)


def test_screenshot(report_dir, tmp_path):
    shot = report_dir / "screenshot.png"
    res = _run_chromium(report_dir, tmp_path, f"--screenshot={shot}", "--window-size=1400,3000",
                        "--hide-scrollbars")
    assert res.returncode == 0, res.stderr[-3000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 3000)


# --------------------------------------------------------------------------- the page itself (no browser)
def _json_numbers(obj, acc):
    if isinstance(obj, bool):
        return acc
    if isinstance(obj, (int, float)):
        acc.append(float(obj))
    elif isinstance(obj, str):
        acc.extend(float(t) for t in NUMBER.findall(obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _json_numbers(k, acc)
            _json_numbers(v, acc)
    elif isinstance(obj, list):
        for v in obj:
            _json_numbers(v, acc)
    return acc


NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


class _Cells(HTMLParser):
    """Visible text of every table cell and of the summary paragraphs."""

    def __init__(self):
        super().__init__()
        self.depth, self.texts, self.buf = 0, [], []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        if tag in ("td", "p") and self.depth == 0:
            self.depth, self.buf = 1, []
        elif tag in ("td", "p"):
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.skip -= 1
        if tag in ("td", "p") and self.depth:
            self.depth -= 1
            if self.depth == 0:
                self.texts.append(" ".join(self.buf))

    def handle_data(self, data):
        if self.depth and not self.skip:
            self.buf.append(data)


def test_every_number_on_the_page_is_in_report_json(report_dir):
    """Each number shown (rounded for display) is a number of report.json, to the displayed precision."""
    report = json.loads((report_dir / "report.json").read_text())
    known = sorted(set(_json_numbers(report, [])))
    cells = _Cells()
    cells.feed((report_dir / "index.html").read_text())
    assert len(cells.texts) > 40
    missing = []
    for text in cells.texts:
        text = re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "", text)  # the creation time
        for tok in NUMBER.findall(text):
            mant, _, exp = tok.lower().partition("e")
            decimals = len(mant.split(".")[1]) if "." in mant else 0
            half_ulp = 0.5 * 10.0 ** (int(exp or 0) - decimals) * (1 + 1e-9)
            x = float(tok)
            if not any(math.isclose(abs(x), abs(k), rel_tol=0, abs_tol=half_ulp) for k in known):
                missing.append((tok, text[:120]))
    assert missing == []


def test_report_structure(report_dir):
    report = json.loads((report_dir / "report.json").read_text())
    assert list(report["theories"]) == list(THEORIES)
    assert report["generated"]["checked"]
    assert report["shared"]["rows"][0]["quantity"].startswith("generated/ is fresh")  # one row, at the top
    for th in report["theories"].values():
        assert th["rows"] and all(r["verdict"] in ("agrees", "documented disagreement", "FAILS") for r in th["rows"])
        assert not any(r["quantity"].startswith("generated/ is fresh") for r in th["rows"])
        for f in th["figures"]:
            assert (report_dir / f["path"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        for d in th["latex"]:
            assert (report_dir / d["tex"]).exists()
            if d["pdf"]:
                assert (report_dir / d["pdf"]).read_bytes()[:5] == b"%PDF-"
    assert report["cross_theory"]["rows"]
    counts = report["summary"]
    assert counts["rows"] == counts["agrees"] + counts["documented_disagreements"] + counts["fails"]
    assert counts["fails"] == 0, [r["quantity"] for t in [report["shared"], *report["theories"].values()]
                                  for r in t["rows"] if r["verdict"] == "FAILS"]
