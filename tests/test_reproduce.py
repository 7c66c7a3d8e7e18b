"""`resprop reproduce`: Ctrl-C leaves the previous complete report or none (never a half-written one), no stray
temporary directories, and a directory that is not a report is never replaced."""
import json
import os
from pathlib import Path

import pytest
from interrupting import interrupt_at

from resprop import registry
from resprop.numeric.cli import main
from resprop.numeric.engine.output import write_manifest
from resprop.numeric.report.reproduce import GENERATOR, fmt, resolve_theories


def _strays(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _temp_dirs(out: Path) -> list[Path]:
    return [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.tmp-")]


def _interrupt(out: Path, theory: str = "all", at: str = "locked") -> int:
    """Start `reproduce` and send SIGINT where it pauses at the checkpoint ``at`` (tests/interrupting.py):
    "locked" (its temporary directory made, nothing built yet), "latex-exported" (the LaTeX sources written into
    the temporary report; PDFs, claims and figures to come)."""
    inside = {"locked": None, "latex-exported": "latex/*.tex"}[at]

    def temporary_report():  # what the signal meets: the temporary report (holding the LaTeX sources)
        temps = _temp_dirs(out)
        assert len(temps) == 1 and (inside is None or list(temps[0].glob(inside))), temps

    done = interrupt_at(["reproduce", theory, "--out", str(out), "--quick", "--quiet"], at, what="reproduce",
                        while_paused=temporary_report)
    assert "interrupted" in done.stderr, done.stderr[-2000:]
    return done.returncode


def test_ctrl_c_without_previous_report_leaves_none(tmp_path):
    out = tmp_path / "report"
    assert _interrupt(out) == 130
    assert not (out / "report.json").exists()
    assert not out.exists()
    assert _strays(out) == []


@pytest.mark.parametrize("at", ["locked", "latex-exported"], ids=["early", "while-writing"])
def test_ctrl_c_keeps_the_previous_complete_report(tmp_path, at):
    """'while-writing': interrupted after the LaTeX export, while PDFs, figures and rows are being produced."""
    out = tmp_path / "report"
    out.mkdir()
    previous = {"generator": GENERATOR, "summary": {"rows": 1, "fails": 0}, "theories": {}}
    (out / "report.json").write_text(json.dumps(previous))
    (out / "index.html").write_text("<!doctype html><title>previous</title>")
    write_manifest(out, "dir", GENERATOR)  # what a completed run writes last
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert _interrupt(out, at=at) == 130
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after == before  # byte for byte the previous complete report
    assert json.loads((out / "report.json").read_text()) == previous
    assert _strays(out) == []


def test_refuses_to_replace_a_directory_that_is_not_a_report(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert main(["reproduce", "fischer", "--out", str(out), "--quick", "--quiet"]) == 2
    assert "holds files that resprop did not write (notes.txt" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "keep me"
    assert _strays(out) == []


def test_refuses_a_previous_report_plus_the_users_own_files(tmp_path, capsys):
    """The issue's case: report.json written by resprop, and the user's files next to it."""
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"generator": GENERATOR}))
    write_manifest(out, "dir", GENERATOR)
    (out / "analysis.ipynb").write_text("mine")
    assert main(["reproduce", "fischer", "--out", str(out), "--quick", "--quiet"]) == 2
    assert "analysis.ipynb" in capsys.readouterr().err
    assert (out / "analysis.ipynb").read_text() == "mine" and (out / "report.json").exists()
    assert _strays(out) == []


def test_stale_temporary_directories_of_dead_runs_are_swept(tmp_path):
    from resprop.numeric.engine.output import sweep_stale_temps as _sweep_stale_temps

    out = tmp_path / "report"
    dead = tmp_path / ".report.tmp-999999999-abc"  # no such pid
    mine = tmp_path / f".report.tmp-{os.getpid()}-abc"
    other = tmp_path / ".unrelated.tmp-999999999-abc"
    for p in (dead, mine, other):
        p.mkdir()
    _sweep_stale_temps(out)
    assert not dead.exists() and mine.exists() and other.exists()


@pytest.mark.registry
def test_theory_names_and_formatting():
    slugs = list(registry.slugs())
    assert resolve_theories("all") == slugs
    assert resolve_theories([slugs[-1], slugs[0]]) == [slugs[0], slugs[-1]]  # in report order
    with pytest.raises(ValueError, match="^theory:"):
        resolve_theories("hayou")
    assert fmt(0.1234567891) == "0.123457" and fmt([1, 2.5]) == "[1, 2.5]" and fmt(None) == "-"
    assert fmt(list(range(10))).endswith("(10 values)")


def test_stale_generated_tree_is_a_failed_row_and_exit_1(tmp_path, monkeypatch, capsys):
    import resprop.derive.codegen as codegen

    pdlt, lognormal = "theories/pdlt/pdlt.py", "theories/lognormal/lognormal.py"  # generated_files keys
    monkeypatch.setattr(codegen, "stale_files", lambda **kw: {pdlt: "--- diff", lognormal: "x"})
    out = tmp_path / "report"
    assert main(["reproduce", "pdlt", "--out", str(out), "--quick", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "FAILS [shared] generated/ is fresh" in err
    assert "%|" not in err  # --quiet: no progress bars
    report = json.loads((out / "report.json").read_text())
    first = report["shared"]["rows"][0]  # one freshness row for the run; lognormal's file is not counted
    assert first["verdict"] == "FAILS" and first["details"]["stale_files"] == [pdlt]
    assert report["generated"]["fresh"] is False and report["summary"]["fails"] == 1
    # everything else still ran: the theory's rows, the figures, the documents and the cross-theory checks
    assert all(r["verdict"] != "FAILS" for r in report["theories"]["pdlt"]["rows"])
    assert report["theories"]["pdlt"]["figures"] and report["cross_theory"]["rows"]
    assert f"generated/: STALE: {lognormal}, {pdlt}" in (out / "index.html").read_text()
    assert _strays(out) == []


def test_progress_bars_on_stderr_without_quiet(tmp_path, monkeypatch, capsys):
    """Without --quiet the long steps show tqdm bars on stderr (stdout carries only the summary line).

    The freshness step runs (and shows its bar) against a stubbed stale_files(): the real check (fingerprints,
    re-deriving an owner whose fingerprint does not hold) is covered by test_codegen.py and by test_report_browser.py's unstubbed report."""
    import derive.codegen as codegen

    monkeypatch.setattr(codegen, "stale_files", lambda **kw: {})
    out = tmp_path / "report"
    assert main(["reproduce", "pdlt", "--out", str(out), "--quick"]) == 0
    captured = capsys.readouterr()
    for step in ("generated/ freshness", "LaTeX export", "pdlt", "cross-theory"):
        assert any(step in line and "%|" in line for line in captured.err.replace("\r", "\n").splitlines()), step
    assert "%|" not in captured.out and "report.json" in captured.out
