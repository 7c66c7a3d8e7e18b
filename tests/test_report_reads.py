"""The report reads right (issue 28, item 5): one word for a failed row (FAILS) on the page, in report.json and in
README; one freshness row for the run, at the top, counted once; counts in the right grammatical number; every file
of the report linked from index.html; the freshness step and the LaTeX export timed on their own lines.

One quick report of two cheap theories (fischer, stable) is shared by the module.  Its freshness check is a
stand-in (the real one re-derives every theory; tests/test_report_browser.py and tests/test_codegen.py run it), so
the report says "fresh" here whatever the state of the checkout."""
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

import resprop.derive.codegen as codegen
from resprop import registry
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.report.reproduce import DEPRECATED_KEYS, FRESH_QUANTITY, reproduce
from resprop.numeric.report.words import count_words, counts_text, plural

ROOT = Path(__file__).resolve().parents[1]
THEORIES = ("fischer", "stable")


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("reads") / "report"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(codegen, "stale_files", lambda target=None, slugs=None, progress=None, **kw: {})
        reproduce(out, list(THEORIES), quick=True, quiet=True)
    return out


@pytest.fixture(scope="module")
def report(report_dir):
    return json.loads((report_dir / "report.json").read_text())


def _sections(report: dict) -> list[tuple[str, list[dict]]]:
    """Every table of rows in report.json: the shared section, each theory (and its trained-network tables),
    the cross-theory checks."""
    out = [("shared", report["shared"]["rows"])]
    for name, th in report["theories"].items():
        out.append((name, th["rows"]))
        for e in (th.get("training") or {}).get("experiments", []):
            out.append((f"{name} training {e['name']}", e["rows"]))
    return out + [("cross-theory", report["cross_theory"]["rows"])]


# --------------------------------------------------------------------------- one freshness row
def test_one_freshness_row_at_the_top(report):
    where = [name for name, rows in _sections(report) for r in rows if r["quantity"] == FRESH_QUANTITY]
    assert where == ["shared"]
    assert report["shared"]["rows"][0]["quantity"] == FRESH_QUANTITY
    assert list(report)[list(report).index("shared") + 1] == "theories"  # the shared section comes first


def test_summary_counts_every_row_once(report):
    sections = [report["shared"], *report["theories"].values(), report["cross_theory"]]
    for key in ("rows", "agrees", "documented_disagreements", "fails"):
        assert report["summary"][key] == sum(s["counts"][key] for s in sections), key
    assert report["summary"]["rows"] == sum(len(rows) for name, rows in _sections(report) if "training" not in name)


def test_the_page_shows_the_freshness_row_once(report_dir):
    html = (report_dir / "index.html").read_text()
    assert html.count("generated/ is fresh") == 1
    assert html.index("id='shared'") < min(html.index(f"id='{t}'") for t in THEORIES)


# --------------------------------------------------------------------------- timings
def test_freshness_and_latex_export_are_timed_steps(report, report_dir):
    steps = [t["step"] for t in report["timings"]]
    assert steps == ["generated/ freshness", "LaTeX export", *THEORIES, "cross-theory"]
    assert all(t["seconds"] >= 0 for t in report["timings"])
    seconds = {t["step"]: t["seconds"] for t in report["timings"]}
    assert report["shared"]["seconds"] == pytest.approx(seconds["generated/ freshness"] + seconds["LaTeX export"],
                                                        abs=0.11)
    for t in THEORIES:
        assert report["theories"][t]["seconds"] == seconds[t]
    html = (report_dir / "index.html").read_text()
    assert re.search(r"Timings: generated/ freshness [\d.]+ s; LaTeX export [\d.]+ s; fischer", html)


# --------------------------------------------------------------------------- one word for a failed row
def test_one_word_for_a_failed_row(report, report_dir):
    html = (report_dir / "index.html").read_text()
    assert re.search(r"<span>0 FAILS</span>", html)
    assert not re.search(r"\bFAIL\b", html)
    assert "fails" in report["summary"] and all("fails" in s["counts"] for s in report["theories"].values())
    # the old key, kept for one release and documented
    assert report["summary"]["failed"] == report["summary"]["fails"]
    assert report["deprecated_keys"] == DEPRECATED_KEYS == {"summary.failed": "summary.fails"}
    renames = (ROOT / "docs" / "api-renames.md").read_text()
    assert "`summary.failed`" in renames and "`summary.fails`" in renames


def test_readme_and_docs_say_fails():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text()
        assert not re.search(r"\bFAIL\b", text), path
        assert not re.search(r"\b1 (rows|documented disagreements)\b", text), path


# --------------------------------------------------------------------------- plural forms
def test_plural():
    assert plural(1, "row") == "1 row" and plural(0, "row") == "0 rows" and plural(2, "row") == "2 rows"
    assert plural(1, "agrees", "agree") == "1 agrees" and plural(84, "agrees", "agree") == "84 agree"
    assert plural(1, "documented disagreement") == "1 documented disagreement"
    assert plural(3, "documented disagreement") == "3 documented disagreements"
    for bad in (1.0, True, "1", None):
        with pytest.raises(ParameterError, match="^n:"):
            plural(bad, "row")


def test_counts_words():
    one = {"rows": 1, "agrees": 1, "documented_disagreements": 1, "fails": 1}
    assert counts_text(one) == "1 row, 1 agrees, 1 documented disagreement, 1 FAILS"
    many = {"rows": 84, "agrees": 80, "documented_disagreements": 2, "fails": 2}
    assert count_words(many) == ["84 rows", "80 agree", "2 documented disagreements", "2 FAILS"]


#: count words of the page and the words they must agree with: (singular, plural)
_FORMS = {"row": "rows", "documented disagreement": "documented disagreements", "page": "pages",
          "stale file": "stale files"}


def test_every_count_on_the_page_agrees_with_its_number(report_dir):
    html = (report_dir / "index.html").read_text()
    words = "|".join(re.escape(w) for pair in _FORMS.items() for w in pair)
    found = re.findall(rf"\b(\d+) ({words})\b", html)
    assert found, "no counts found on the page"
    for n, word in found:
        singular = word in _FORMS
        assert (int(n) == 1) == singular, f"{n} {word}"
    json_text = (report_dir / "report.json").read_text()
    for n, word in re.findall(rf"\b(\d+) ({words})\b", json_text):
        assert (int(n) == 1) == (word in _FORMS), f"report.json: {n} {word}"


def test_the_summary_line_of_reproduce(tmp_path, monkeypatch, capsys):
    """The command's last line uses the same words as the page."""
    import resprop.numeric.report.reproduce as R
    from resprop.numeric.cli import main

    counts = {"rows": 1, "agrees": 0, "documented_disagreements": 1, "fails": 0}
    monkeypatch.setattr(R, "reproduce", lambda out, theory, **kw: {
        "summary": {**counts, "seconds": 1.0}, "shared": {"rows": []}, "theories": {}, "cross_theory": {"rows": []}})
    assert main(["reproduce", "fischer", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert "1 row, 0 agree, 1 documented disagreement, 0 FAILS (1.0 s)" in capsys.readouterr().out


# --------------------------------------------------------------------------- every file linked
class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.targets: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("href", "src") and value and not value.startswith(("#", "http:", "https:", "data:")):
                self.targets.add(value)


def test_every_file_of_the_report_is_linked_from_the_page(report_dir):
    links = _Links()
    links.feed((report_dir / "index.html").read_text())
    files = {p.relative_to(report_dir).as_posix() for p in report_dir.rglob("*") if p.is_file()}
    files -= {"index.html"}
    files = {f for f in files if not Path(f).name.startswith(".")}  # the output manifest (.resprop-manifest.json)
    assert files - links.targets == set(), "written but not linked"
    assert links.targets - files == set(), "linked but not written"


@pytest.mark.registry
def test_only_the_run_theories_latex_is_written(report, report_dir):
    owners = registry.derivations()
    expected = {f"{name}.tex" for name, (_, owner) in owners.items() if owner in ("foundation", *THEORIES)}
    assert {p.name for p in (report_dir / "latex").glob("*.tex")} == expected
    assert {d["name"] for d in report["shared"]["latex"]} == {n for n, (_, o) in owners.items() if o == "foundation"}
