"""Every theory has a quickstart page with Python and command-line blocks, docs/reference/kernels.md is generated
(fresh, and flagged when stale), and every test that docs/disagreements.md names as pinning a finding exists.
The blocks of every page themselves run in tests/test_doc_blocks.py."""
import ast
import importlib
import re
from pathlib import Path

import pytest

from resprop import registry
from resprop.derive.codegen import KERNEL_REFERENCE, file_path, generated_files, stale_files, write_generated
from resprop.registry import derivations, generated_module

THEORIES = derivations()

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
QUICKSTARTS = sorted((DOCS / "quickstart").glob("*.md"))
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


@pytest.mark.registry
def test_every_theory_has_a_quickstart():
    """One page per theory shipped with resprop (registry.BUILTIN; a plugin documents itself), the one its entry
    declares."""
    builtin = [importlib.import_module(package).THEORY for package in registry.BUILTIN]
    assert {p.stem for p in QUICKSTARTS} == {th.slug for th in builtin}
    assert all(th.docs == f"docs/quickstart/{th.slug}.md" for th in builtin)
    for p in QUICKSTARTS:
        assert blocks(p, "python"), p.name
        assert cli_lines(p), p.name


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
    for theory, (_, owner) in THEORIES.items():  # each derivation in its owner's reference, and only there
        page = text if owner == "foundation" else file_path(f"theories/{owner}/kernels.md").read_text()
        assert page == rendered[KERNEL_REFERENCE if owner == "foundation" else f"theories/{owner}/kernels.md"]
        module = generated_module(theory)
        assert f"## {module.removeprefix('resprop.')}" in page
        assert (f"## {module.removeprefix('resprop.')}" in text) == (owner == "foundation")
        for name in importlib.import_module(module).RESULTS:  # every generated kernel
            assert f"### `{name}`" in page, (theory, name)
            assert f"- Signature: `{name}(" in page


def test_kernel_reference_staleness_is_detected(tmp_path, rendered, monkeypatch):
    import resprop.derive.codegen as codegen

    monkeypatch.setattr(codegen, "generated_files", lambda slugs=None: rendered)
    write_generated(tmp_path)
    doc = tmp_path / KERNEL_REFERENCE
    assert doc.exists() and stale_files(tmp_path) == {}
    doc.write_text(doc.read_text().replace("Signature", "Signatur", 1))
    stale = stale_files(tmp_path)
    assert list(stale) == [KERNEL_REFERENCE]
    assert "docs/reference/kernels.md (on disk)" in stale[KERNEL_REFERENCE]
    assert codegen.display_path(KERNEL_REFERENCE) == KERNEL_REFERENCE
    assert codegen.display_path("gaussian.py") == "generated/gaussian.py"
    assert codegen.display_path("theories/fischer/fischer.py") == "numeric/theories/fischer/generated/fischer.py"


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
