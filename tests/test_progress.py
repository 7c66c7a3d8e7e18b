"""Progress on the long commands (issue 28, item 3): `derive`, `derive --check`, `latex` (and `--pdf`) and
`figures` show a tqdm bar on stderr, shown after PROGRESS_DELAY seconds and hidden by --quiet; the derivation
functions report their steps through ``progress(done, total, label)``.

The bars are made visible at once (PROGRESS_DELAY = 0) so that no test depends on how long a step takes, and the
slow builders are replaced by stand-ins that report a fixed number of steps."""
from pathlib import Path

import pytest

import resprop.derive.codegen as codegen
import resprop.derive.latex as latex
import resprop.numeric.cli_support as cli_support
from resprop.numeric.cli import main


@pytest.fixture
def instant_bars(monkeypatch):
    monkeypatch.setattr(cli_support, "PROGRESS_DELAY", 0.0)


def _bar_lines(err: str, desc: str) -> list[str]:
    return [ln for ln in err.replace("\r", "\n").splitlines() if ln.startswith(f"{desc}:") and "%|" in ln]


def _steps(n: int):
    """A stand-in for a function that reports ``n`` steps to ``progress`` and returns ``result``."""
    def run(result, progress):
        if progress is not None:
            progress(0, n, "")
            for i in range(1, n + 1):
                progress(i, n, f"step{i}")
        return result
    return run


# --------------------------------------------------------------------------- the callbacks of derive/
def test_derive_with_progress_reports_every_derivation_then_the_rendering():
    calls = []
    total = codegen.derive_with_progress(["foundation"], lambda *a: calls.append(a))
    names = codegen.derivations_of(["foundation"])
    assert names and total == len(names) + 1
    assert calls == [(0, total, "")] + [(i, total, n) for i, n in enumerate(names, 1)]
    assert codegen.derive_with_progress(["foundation"]) == total  # without a callback: only the count


def test_export_latex_reports_each_document(tmp_path):
    calls = []
    paths = latex.export_latex(tmp_path, names=["gaussian"], progress=lambda *a: calls.append(a))
    assert [p.name for p in paths] == ["gaussian.tex"] and sorted(p.name for p in tmp_path.iterdir()) == ["gaussian.tex"]
    assert calls == [(0, 1, ""), (1, 1, "gaussian")]


def test_export_latex_names_an_unknown_derivation(tmp_path):
    from resprop.numeric.engine.validation import ParameterError

    with pytest.raises(ParameterError, match="^names: unknown derivation.*'nosuch'"):
        latex.export_latex(tmp_path, names=["gaussian", "nosuch"])
    assert not list(tmp_path.iterdir())


def test_stale_files_and_write_generated_pass_progress_on(tmp_path, monkeypatch):
    """The two entry points hand ``progress`` to generated_files, whose last step is the rendering."""
    seen = []

    def fake(slugs=None, progress=None):
        seen.append(progress)
        if progress is not None:
            progress(0, 1, "")
            progress(1, 1, "rendered")
        return {"x.py": "x = 1\n"}

    monkeypatch.setattr(codegen, "generated_files", fake)
    calls = []
    assert codegen.write_generated(tmp_path, progress=lambda *a: calls.append(a)) == [tmp_path / "x.py"]
    assert codegen.stale_files(tmp_path, progress=lambda *a: calls.append(a)) == {}
    assert calls == [(0, 1, ""), (1, 1, "rendered")] * 2 and seen[0] is not None
    codegen.stale_files(tmp_path)
    assert seen[-1] is None  # no callback: generated_files is called as before


# --------------------------------------------------------------------------- the command line
@pytest.mark.parametrize("check", [False, True], ids=["derive", "derive --check"])
def test_derive_shows_a_bar_unless_quiet(tmp_path, monkeypatch, capsys, instant_bars, check):
    step = _steps(3)
    if check:
        monkeypatch.setattr(codegen, "stale_files", lambda slugs=None, progress=None, **kw: step({}, progress))
    else:
        monkeypatch.setattr(codegen, "write_generated", lambda slugs=None, progress=None, **kw: step([], progress))
    argv = ["derive", "--check"] if check else ["derive"]
    desc = "derive --check" if check else "derive"
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert any("3/3" in ln for ln in _bar_lines(err, desc)), err
    assert main([*argv, "--quiet"]) == 0
    assert "%|" not in capsys.readouterr().err


def test_latex_shows_a_bar_unless_quiet(tmp_path, monkeypatch, capsys, instant_bars):
    def fake_export(out, names=None, progress=None):
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "a.tex").write_text("a")
        return _steps(2)([out / "a.tex"], progress)

    monkeypatch.setattr(latex, "export_latex", fake_export)
    assert main(["latex", "--out", str(tmp_path / "tex")]) == 0
    captured = capsys.readouterr()
    assert any("2/2" in ln for ln in _bar_lines(captured.err, "latex")), captured.err
    assert "%|" not in captured.out and "a.tex" in captured.out
    assert main(["latex", "--out", str(tmp_path / "tex"), "--quiet"]) == 0
    assert "%|" not in capsys.readouterr().err


def test_figures_shows_a_bar_over_theories_unless_quiet(tmp_path, monkeypatch, capsys, instant_bars):
    import resprop.numeric.theories.lognormal.figures as lognormal_figures

    def fake_figures(out, **kw):
        (Path(out) / "lognormal_x.png").write_bytes(b"\x89PNG fake")
        return [Path(out) / "lognormal_x.png"]

    monkeypatch.setattr(lognormal_figures, "make_figures", fake_figures)
    assert main(["figures", "--out", str(tmp_path / "f"), "--only", "lognormal"]) == 0
    err = capsys.readouterr().err
    assert any("1/1" in ln and "lognormal" in ln for ln in _bar_lines(err, "figures")), err
    assert main(["figures", "--out", str(tmp_path / "f"), "--only", "lognormal", "--quiet"]) == 0
    assert "%|" not in capsys.readouterr().err


def test_a_bar_waits_for_the_delay(capsys, monkeypatch):
    """Short steps print nothing: the bar appears only once PROGRESS_DELAY seconds have passed (tqdm's delay,
    read when the bar is made)."""
    monkeypatch.setattr(cli_support, "PROGRESS_DELAY", 3600.0)
    with cli_support.progress_bar("slow", total=2) as bar:
        bar.step("a")
        bar.step("b")
    assert "slow" not in capsys.readouterr().err
    monkeypatch.setattr(cli_support, "PROGRESS_DELAY", 0.0)
    with cli_support.progress_bar("fast", total=2) as bar:
        bar.step("a")
    assert "fast:" in capsys.readouterr().err
