"""The theory registry is the one list of theories: every declaration is consistent with what the theory adds,
and no hand-typed list of theory names or per-theory if-chain remains in the engine."""
import importlib
import json
import re
from pathlib import Path

import pytest

from resprop import registry
from resprop.numeric.cli import build_parser, main

# the registry as a whole: run again with a plugin installed (`pytest --registry-only`, .ci/run)
pytestmark = pytest.mark.registry

ROOT = Path(__file__).resolve().parent.parent
#: the theories shipped with resprop, read from their own packages in BUILTIN order (plugins come after them)
BUILTIN = tuple(importlib.import_module(package).THEORY.slug for package in registry.BUILTIN)


def test_builtin_slugs_in_report_order():
    assert len(BUILTIN) == len(set(BUILTIN)) == len(registry.BUILTIN) > 0
    assert registry.slugs()[:len(BUILTIN)] == BUILTIN


def test_theories_json_lists_slug_title_citation_subcommands(capsys):
    assert main(["theories", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["slug"] for e in entries] == list(registry.slugs())
    for e in entries:
        assert e["title"] and e["citation"] and e["subcommands"], e


def test_theories_json_docs_paths_are_honest(capsys, tmp_path, monkeypatch):
    """The quickstart pages are not package data: --json gives their path in the source repository, labelled so,
    and a local file only where one exists (a checkout); from a wheel (no checkout around the package) none."""
    assert main(["theories", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    for e in entries:
        assert "docs" not in e
        if e["slug"] not in BUILTIN:  # a plugin's quickstart page is its own business
            continue
        assert e["docs_repository_path"] == f"docs/quickstart/{e['slug']}.md"
        assert e["docs_file"] == str(ROOT / e["docs_repository_path"]) and Path(e["docs_file"]).is_file()
    # the layout of a wheel install: site-packages/resprop/, nothing of the repository around it
    site = tmp_path / "site-packages" / "resprop"
    site.mkdir(parents=True)
    assert registry.source_root(site) is None
    (tmp_path / "site-packages" / "docs" / "quickstart").mkdir(parents=True)  # some other distribution's docs/
    assert registry.source_root(site) is None
    assert registry.source_root(ROOT / "resprop") == ROOT
    monkeypatch.setattr(registry, "source_root", lambda package_dir=None: None)
    assert main(["theories", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert all(e["docs_file"] is None for e in entries)
    assert all(e["docs_repository_path"].startswith("docs/") for e in entries if e["slug"] in BUILTIN)


def test_theories_plain_lists_every_slug(capsys):
    assert main(["theories"]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"^{s}: ", out, re.M) for s in registry.slugs())


def test_declared_subcommands_are_the_ones_added():
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    declared = [c for th in registry.theories().values() for c in th.subcommands]
    assert len(declared) == len(set(declared))
    assert set(declared) <= set(sub.choices)
    engine = set(sub.choices) - set(declared)
    assert engine == set(registry.CORE_SUBCOMMANDS), engine  # what the registry reserves is what the CLI has


def test_generated_files_of_each_theory_exist_and_are_named_by_derivation():
    from resprop.derive.codegen import file_path

    for th in registry.theories().values():
        for rel in th.generated_files:  # its own files in its own package, the shared ones in resprop's generated/
            path = file_path(rel)
            assert path.is_file(), (th.slug, rel)
            if not rel.startswith(registry.OWN_PREFIX):
                assert path.is_relative_to(ROOT / "generated"), (th.slug, rel)
            elif th.slug in BUILTIN:  # a plugin's are in its own package
                assert path.is_relative_to(ROOT / "numeric" / "theories" / th.slug / "generated"), (th.slug, rel)
    # each derivation's kernel module is named after it, in its owner's generated package
    for name, (_, owner) in registry.derivations().items():
        module = registry.generated_module(name)
        assert module.rpartition(".")[2] == name
        assert module.startswith("resprop.generated." if owner == "foundation"
                                 else registry.theory(owner).generated_package + "."), (name, module)


def test_each_theory_has_claims_figures_and_a_quickstart_page():
    for th in registry.theories().values():
        assert callable(th.load("claims")), th.slug
        assert th.figures is None or callable(th.load("figures"))
        if th.slug in BUILTIN:  # resprop's own theories have a quickstart page in its docs
            assert (ROOT / th.docs).is_file(), th.docs


def test_figure_names_start_with_the_slug():
    """resprop's own figure modules list their figures (FIGURE_NAMES); every theory's drawn figures are checked by
    the conformance suite (tests/test_conformance.py)."""
    drawing = [th for th in registry.theories().values() if th.figures is not None and th.slug in BUILTIN]
    assert drawing
    for th in drawing:
        module = importlib.import_module(th.figures.partition(":")[0])
        assert module.FIGURE_NAMES and all(n.startswith(th.slug + "_") for n in module.FIGURE_NAMES), th.slug


def test_unknown_theory_is_a_value_error_naming_the_allowed_slugs(tmp_path, capsys):
    with pytest.raises(ValueError, match=re.escape(f"theory: unknown theory 'nosuch'; allowed: "
                                                   f"{', '.join(registry.slugs())}")):
        registry.theory("nosuch")
    with pytest.raises(ValueError, match="derivation: unknown derivation"):
        registry.derivation("nosuch")
    assert main(["figures", "--out", str(tmp_path / "f"), "--only", "nosuch"]) == 2
    assert "only" in capsys.readouterr().err


def test_bad_declarations_are_refused():
    with pytest.raises(ValueError, match="slug"):
        registry.Theory(slug="Bad Slug", title="t", citation="c", paper="p", citation_tex="c",
                        derivations={"x": "m:f"})
    with pytest.raises(ValueError, match="derivations"):
        registry.Theory(slug="empty", title="t", citation="c", paper="p", citation_tex="c", derivations={})
    clash = registry.Theory(slug="clash", title="t", citation="c", paper="p", citation_tex="c",
                            derivations={"fischer": "m:f"})
    with pytest.raises(ValueError, match="already belong"):
        registry.register(clash)
    assert "clash" not in registry.slugs()


def _engine_sources():
    for top in ("numeric", "derive"):
        for path in (ROOT / top).rglob("*.py"):
            if "theories" not in path.relative_to(ROOT).parts:
                yield path


def test_engine_imports_no_theory():
    """The shared engine (everything outside */theories/) reaches theories only through the registry."""
    offenders = []
    for path in _engine_sources():
        for line in path.read_text().splitlines():
            if re.match(r"\s*(from|import)\s+resprop\.(numeric|derive)\.theories\b", line):
                offenders.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert not offenders, offenders


def test_no_hand_typed_theory_list_outside_the_registry():
    """No tuple/list/set/dict of two or more slugs, and no `== "slug"` test, outside the theory packages."""
    slug = "|".join(registry.slugs())
    listed = re.compile(rf"""["']({slug})["']\s*[,:]\s*["']({slug})["']""")
    branch = re.compile(rf"""(==|!=|\bin)\s*\(?["']({slug})["']""")
    offenders = []
    for path in _engine_sources():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if listed.search(line) or branch.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, offenders


READERS = {"theories", "slugs", "derivations", "papers", "broken"}


def _reads_the_registry(node) -> bool:
    import ast

    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in READERS
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "registry" for n in ast.walk(node))


def _marked_registry(decorators) -> bool:
    import ast

    return any("mark.registry" in ast.unparse(d) for d in decorators)


def test_tests_that_read_the_registry_are_marked():
    """A test whose body reads the registry as a whole (registry.theories(), slugs(), derivations(), ...) carries the
    `registry` mark (or its module does), so that `pytest --registry-only` (.ci/run, with the worked plugin
    installed) runs it; cases parametrized with a plugin's slug are selected by their ids."""
    import ast

    unmarked = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        module_marked = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                            and "mark.registry" in ast.unparse(n.value) for n in tree.body)
        for node in tree.body:
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and not module_marked
                    and not _marked_registry(node.decorator_list) and _reads_the_registry(node)
                    and not any("mark.slow" in ast.unparse(d) for d in node.decorator_list)):
                unmarked.append(f"{path.name}::{node.name}")
    assert not unmarked, f"read the registry without @pytest.mark.registry: {unmarked}"
