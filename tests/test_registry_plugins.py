"""Broken and clashing theory plugins (issue 26, item 2): a plugin that fails to load is one warning line on stderr
and a ``broken`` entry in ``resprop theories [--json]``; every other command and theory keeps working; a slug,
derivation name or subcommand that is already taken is refused (``register(..., replace=True)`` replaces).

The plugins are real packages written into a temporary directory on sys.path, found through a stand-in for
``importlib.metadata.entry_points`` (the ``resprop.theories`` group), and the registry is reloaded from scratch."""
from __future__ import annotations

import importlib
import json
import sys
import textwrap
from types import SimpleNamespace

import pytest

from resprop import registry
from resprop.numeric import cli

# the registry as a whole: run again with a plugin installed (`pytest --registry-only`, .ci/run)
pytestmark = pytest.mark.registry

GOOD = '''
from resprop.registry import Theory

THEORY = Theory(slug="{slug}", title="A plugin", citation="Someone (2026)", paper="someone2026",
                citation_tex="Someone (2026)", derivations={{"{derivation}": "{module}.derive:derive"}},
                cli={cli}, subcommands={subcommands})
'''

CLI = '''
def add(sub):
    p = sub.add_parser("{command}", help="a plugin command")
    p.set_defaults(func=lambda args: 0)
'''


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Write plugin packages and make them the entry points of the resprop.theories group; the registry is
    reloaded with them, and restored afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    eps: list[SimpleNamespace] = []
    monkeypatch.setattr(registry, "entry_points", lambda group: list(eps) if group == "resprop.theories" else [])
    saved = (dict(registry._REGISTERED), registry._LOADED, dict(registry._BROKEN))

    def add(name: str, init: str | None, files: dict[str, str] | None = None, module: str | None = None):
        module = module or f"plugin_{name}"
        if init is not None:
            pkg = tmp_path / module
            pkg.mkdir()
            (pkg / "__init__.py").write_text(textwrap.dedent(init))
            for fname, text in (files or {}).items():
                (pkg / fname).write_text(textwrap.dedent(text))
        eps.append(SimpleNamespace(name=name, value=module))
        return module

    def reload():
        for mod in [m for m in sys.modules if m.startswith("plugin_")]:
            del sys.modules[mod]
        registry._REGISTERED.clear()
        registry._BROKEN.clear()
        registry._LOADED = False
        registry.theories()

    yield SimpleNamespace(add=add, reload=reload)
    registry._REGISTERED.clear()
    registry._REGISTERED.update(saved[0])
    registry._LOADED = saved[1]
    registry._BROKEN.clear()
    registry._BROKEN.update(saved[2])


def _good(slug, derivation=None, command=None, module=None):
    module = module or f"plugin_{slug}"
    return GOOD.format(slug=slug, derivation=derivation or f"{slug}_theory", module=module,
                       cli=f'"{module}.commands:add"' if command else None,
                       subcommands=f'("{command}",)' if command else "()")


BROKEN_CASES = {
    "import-raises": ("raise RuntimeError('boom at import')", {}, "boom at import"),
    "no-THEORY": ("X = 1", {}, "declares no THEORY"),
    "THEORY-is-a-dict": ("THEORY = {'slug': 'dicty'}", {}, "expected a resprop.registry.Theory"),
    "bad-field": ("from resprop.registry import Theory\n"
                  "THEORY = Theory(slug='badref', title='t', citation='c', paper='p', citation_tex='c', "
                  "derivations={'badref_d': 'not a reference'})", {}, "derivations"),
    "slug-fischer": (_good("fischer", derivation="fischer_again"), {}, "slug: 'fischer' is already registered"),
    "derivation-clash": (_good("clasher", derivation="fischer"), {}, "already belong"),
    "subcommand-kernel": (_good("kernelish", command="kernel"), {}, "kernel (of resprop)"),
    "subcommand-of-another": (_good("rhoish", command="rho-star"), {}, "rho-star (of fischer)"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_CASES))
def test_a_broken_plugin_is_reported_and_everything_else_works(plugins, case, capsys):
    fischer_title = registry.theory("fischer").title
    init, files, reason = BROKEN_CASES[case]
    plugins.add(case, init, files)
    plugins.add("fine", _good("fine", command="fine-cmd"), {"commands.py": CLI.format(command="fine-cmd")})
    plugins.reload()
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and f"plugin {case}" in err and reason in err, err
    assert f"plugin {case}" in registry.broken() and reason in registry.broken()[f"plugin {case}"]
    # resprop's own theories and the good plugin are all there, the built-in fischer untouched
    builtin = {importlib.import_module(package).THEORY.slug for package in registry.BUILTIN}
    assert builtin | {"fine"} <= set(registry.slugs())
    assert "rho-star" in registry.theory("fischer").subcommands
    assert registry.theory("fischer").title == fischer_title
    assert cli.main(["theories"]) == 0
    out = capsys.readouterr().out
    assert f"plugin {case}: BROKEN" in out and "fine: A plugin" in out
    assert cli.main(["theories", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert any(e.get("name") == f"plugin {case}" and reason in e["broken"] for e in entries)
    assert any(e.get("slug") == "fine" for e in entries)
    parser = cli.build_parser()  # every command still parses, the built-in theories' ones included
    assert parser.parse_args(["fine-cmd"]).command == "fine-cmd"
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert {"rho-star", "kernel", "theories", "fine-cmd"} <= set(sub.choices)


def test_a_missing_module_is_reported(plugins, capsys):
    plugins.add("ghost", None, module="plugin_does_not_exist")
    plugins.reload()
    assert "ModuleNotFoundError" in registry.broken()["plugin ghost"]
    assert cli.main(["theories"]) == 0
    assert "plugin ghost: BROKEN" in capsys.readouterr().out


def test_a_plugin_whose_cli_raises_is_dropped_not_fatal(plugins, capsys):
    plugins.add("badcli", _good("badcli", command="badcli-cmd"),
                {"commands.py": "def add(sub):\n    raise KeyError('no parser for you')\n"})
    plugins.reload()
    assert "badcli" in registry.slugs()
    parser = cli.build_parser()
    assert "badcli" not in registry.slugs() and "theory badcli" in registry.broken()
    assert parser.parse_args(["theories"]).command == "theories"
    assert "no parser for you" in capsys.readouterr().err
    assert cli.main(["theories"]) == 0


def test_register_refuses_a_taken_slug_unless_replace(plugins):
    plugins.reload()
    twin = registry.Theory(slug="fischer", title="Another", citation="c", paper="p", citation_tex="c",
                           derivations={"fischer_twin": "m:f"})
    with pytest.raises(ValueError, match="slug"):
        registry.register(twin)
    assert registry.theory("fischer").title != "Another"
    registry.register(twin, replace=True)
    assert registry.theory("fischer").title == "Another"


@pytest.mark.parametrize("field,value,match", [
    ("cli", "no colon", "cli"), ("claims", 3, "claims"), ("subcommands", "kernel", "subcommands"),
    ("steps", 0, "steps"), ("steps", True, "steps"), ("title", None, "title"),
    ("derivations", {"Bad Name": "m:f"}, "derivations"), ("derivations", {"ok": None}, "derivations"),
])
def test_theory_fields_are_validated_naming_the_field(field, value, match):
    kw = dict(slug="valid", title="t", citation="c", paper="p", citation_tex="c", derivations={"valid_d": "m:f"})
    kw[field] = value
    with pytest.raises(ValueError, match=match):
        registry.Theory(**kw)


def test_subcommands_need_a_cli():
    with pytest.raises(ValueError, match="cli"):
        registry.Theory(slug="valid", title="t", citation="c", paper="p", citation_tex="c",
                        derivations={"valid_d": "m:f"}, subcommands=("x",))


def test_core_subcommands_match_the_cli():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    own = set(sub.choices) - {c for th in registry.theories().values() for c in th.subcommands}
    assert own == set(registry.CORE_SUBCOMMANDS)


def test_derive_checks_and_writes_one_theory(tmp_path):
    """resprop derive [--check] SLUG: the theory's own generated files only (issue 26, item 1 in part)."""
    from resprop.derive.codegen import derivations_of, stale_files, write_generated

    names = derivations_of(["pdlt"])
    assert names and all(registry.derivations()[n][1] == "pdlt" for n in names)
    stale = stale_files(target=tmp_path, slugs=["pdlt"])  # nothing written yet: every own file is stale
    # all of them in its own package, and every derivation's kernels among them
    assert stale and all(rel.startswith("theories/pdlt/") for rel in stale)
    assert all(f"theories/pdlt/{name}.py" in stale and f"theories/pdlt/latex/{name}.tex" in stale for name in names)
    assert {"theories/pdlt/parameters.py", "theories/pdlt/kernels.md", "theories/pdlt/__init__.py"} <= set(stale)
    written = write_generated(target=tmp_path, slugs=["pdlt"])
    assert len(written) == len(stale)
    assert stale_files(target=tmp_path, slugs=["pdlt"]) == {}
    assert cli.main(["derive", "--check", "pdlt"]) == 0  # the checkout's own files are fresh


def test_derive_refuses_an_unknown_slug(capsys):
    assert cli.main(["derive", "--check", "nope"]) == 2
    assert "slug" in capsys.readouterr().err


@pytest.mark.parametrize("field,obj,ok", [
    ("figures", lambda out_dir, *, quick, seed, data=None, progress=False: [], True),
    ("figures", lambda out_dir, **kw: [], True),
    ("figures", lambda out_dir, *, quick, seed: [], False),  # no data=, progress=: what reproduce/figures pass
    ("claims", lambda quick, step, figures_dir=None: ([], None), True),
    ("claims", lambda quick: ([], None), False),
    ("cli", lambda: None, False),
    ("cli", lambda sub: None, True),
    ("sweep_kinds", {"k": object()}, True),
    ("sweep_kinds", ["k"], False),
    ("cross_claims", 42, False),
])
def test_loaded_fields_are_checked_against_their_signature(field, obj, ok):
    if ok:
        registry.check_signature(field, obj)
    else:
        with pytest.raises(ValueError, match=field):
            registry.check_signature(field, obj)


def test_every_builtin_field_fits_its_signature():
    for th in registry.theories().values():
        for name in registry.REFERENCE_FIELDS:
            if getattr(th, name) is not None:
                th.load(name)
