"""The documentation runs: every ```python block of docs/quickstart/*.md executes, every cheap `resprop ...` line of
its ```bash blocks exits 0, docs/reference/kernels.md is generated (fresh, and flagged when stale), and every test
that docs/disagreements.md names as pinning a finding exists."""
import ast
import contextlib
import importlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from resprop.derive.codegen import KERNEL_REFERENCE, file_path, generated_files, stale_files, write_generated
from resprop.numeric.cli import main
from resprop.registry import derivations

THEORIES = derivations()

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
QUICKSTARTS = sorted((DOCS / "quickstart").glob("*.md"))
#: subcommands that take minutes or write trees; the quickstarts show them but the test does not run them
EXPENSIVE = {"derive", "reproduce", "figures", "latex", "sweep"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(path: Path, lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(path.read_text()) if kind == lang]


def cli_lines(path: Path) -> list[str]:
    lines = []
    for body in blocks(path, "bash"):
        for line in body.splitlines():
            line = line.strip()
            if line.startswith("resprop "):
                lines.append(line)
    return lines


def test_every_theory_has_a_quickstart():
    assert {p.stem for p in QUICKSTARTS} == {"fischer", "lognormal", "pdlt", "stable", "abcd"}
    for p in QUICKSTARTS:
        assert blocks(p, "python"), p.name
        assert cli_lines(p), p.name


@pytest.mark.parametrize("path", QUICKSTARTS, ids=lambda p: p.stem)
def test_quickstart_python_blocks_run(path):
    """The blocks of one page run in order in one namespace (later blocks may use earlier names)."""
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    for i, code in enumerate(blocks(path, "python")):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"{path.name}[python block {i}]", "exec"), namespace)


@pytest.mark.parametrize("line", [(p.stem, line) for p in QUICKSTARTS for line in cli_lines(p)
                                  if shlex.split(line, comments=True)[1] not in EXPENSIVE],
                         ids=lambda v: f"{v[0]}:{v[1][8:60]}")
def test_quickstart_cli_lines_run(line, capsys):
    argv = shlex.split(line[1], comments=True)
    assert argv[0] == "resprop"
    code = main(argv[1:])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Traceback" not in out.err
    if "--json" in argv:
        data = json.loads(out.out)
        assert "nan" not in json.dumps(data).lower()


def test_sweeps_page_python_runs(tmp_path, monkeypatch):
    """docs/sweeps.md: its Python block runs (in a scratch directory: it writes a NetCDF file)."""
    monkeypatch.chdir(tmp_path)
    code = blocks(DOCS / "sweeps.md", "python")
    assert code
    namespace: dict = {"__name__": "docs_sweeps"}
    for i, body in enumerate(code):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(body, f"sweeps.md[python block {i}]", "exec"), namespace)
    assert (tmp_path / "docs_rho_star.nc").exists()


def test_index_links_resolve():
    text = (DOCS / "index.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert targets
    for t in targets:
        if "://" not in t:
            assert (DOCS / t).exists(), t
    for p in QUICKSTARTS + [DOCS / "disagreements.md", DOCS / "reference" / "kernels.md"]:
        assert str(p.relative_to(DOCS)) in text, p.name


# --------------------------------------------------------------------------- generated kernel reference
@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    """Everything `resprop derive` writes, rendered once for this module (rendering takes ~20 s)."""
    return generated_files()


def test_kernel_reference_is_generated_and_fresh(rendered):
    path = file_path(KERNEL_REFERENCE)
    assert path == ROOT / "docs" / "reference" / "kernels.md"
    assert KERNEL_REFERENCE in rendered
    text = path.read_text()
    assert text == rendered[KERNEL_REFERENCE], "docs/reference/kernels.md is stale: run `resprop derive`"
    for theory in THEORIES:
        assert f"## generated.{theory}" in text
        for name in importlib.import_module(f"generated.{theory}").RESULTS:  # every generated kernel
            assert f"### `{name}`" in text, (theory, name)
            assert f"- Signature: `{name}(" in text


def test_kernel_reference_staleness_is_detected(tmp_path, rendered, monkeypatch):
    import resprop.derive.codegen as codegen

    monkeypatch.setattr(codegen, "generated_files", lambda: rendered)
    write_generated(tmp_path)
    doc = tmp_path / KERNEL_REFERENCE
    assert doc.exists() and stale_files(tmp_path) == {}
    doc.write_text(doc.read_text().replace("Signature", "Signatur", 1))
    stale = stale_files(tmp_path)
    assert list(stale) == [KERNEL_REFERENCE]
    assert "docs/reference/kernels.md (on disk)" in stale[KERNEL_REFERENCE]
    assert codegen.display_path(KERNEL_REFERENCE) == KERNEL_REFERENCE
    assert codegen.display_path("fischer.py") == "generated/fischer.py"


# --------------------------------------------------------------------------- disagreements
def test_disagreements_name_existing_pinning_tests():
    text = (DOCS / "disagreements.md").read_text()
    named = set(re.findall(r"tests/(test_\w+\.py)::(test_\w+)", text))
    assert len(named) >= 25
    defined: dict[str, set[str]] = {}
    for fname, test in named:
        if fname not in defined:
            tree = ast.parse((ROOT / "tests" / fname).read_text())
            defined[fname] = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert test in defined[fname], f"{fname}::{test}"
