"""docs/adding-a-theory.md, executed: the worked example theory (tests/example_theory/) plugs in with one folder
plus one registry entry, and every part of resprop that iterates the registry picks it up: codegen, LaTeX export,
the CLI (its subcommand and `resprop theories`), the report and the claims."""
import importlib
import importlib.util
import json
import sys

import pytest
import sympy as sp

from resprop import registry
from resprop.derive import codegen
from resprop.derive.latex import export_latex
from resprop.numeric.cli import main

# the registry as a whole: run again with a plugin installed (`pytest --registry-only`, .ci/run)
pytestmark = pytest.mark.registry


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    from example_theory import THEORY

    registry.register(THEORY)
    # what `resprop derive linear` would write into its own package: render into a scratch tree and import it
    target = tmp_path_factory.mktemp("generated")
    written = codegen.write_generated(target=target, slugs=["linear"])
    own = target / "theories" / "linear"
    assert own / "linear.py" in written and own / "latex" / "linear.tex" in written
    assert all(path.is_relative_to(own) for path in written)  # nothing of resprop's own, nothing of another theory
    assert registry.generated_module("linear") == "example_theory.generated.linear"
    spec = importlib.util.spec_from_file_location("example_theory.generated.linear", own / "linear.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["example_theory.generated.linear"] = module
    yield THEORY
    del sys.modules["example_theory.generated.linear"]
    registry.unregister("linear")


def test_registry_lists_the_example_after_the_builtin_theories(example):
    builtin = tuple(importlib.import_module(package).THEORY.slug for package in registry.BUILTIN)
    assert registry.slugs()[:len(builtin)] == builtin and registry.slugs()[-1] == example.slug == "linear"
    assert "linear" in registry.derivations() and registry.derivations()["linear"][1] == "linear"


def test_theories_command_lists_it(example, capsys):
    assert main(["theories", "--json"]) == 0
    entries = {e["slug"]: e for e in json.loads(capsys.readouterr().out)}
    assert entries["linear"]["subcommands"] == ["linear-kernel"]
    assert set(entries) == set(registry.slugs())


def test_generated_kernel_matches_the_sympy_closed_form(example):
    from example_theory import derivation as D

    linear = sys.modules[registry.generated_module("linear")]

    expr = D.kernel_closed_form()
    for L in (0, 1, 7):
        point = {D.K0: sp.Rational(13, 10), D.rho: sp.Rational(1, 3), D.sigma_w2: sp.Rational(6, 5),
                 D.sigma_b2: sp.Rational(1, 10), D.depth: L}
        exact = float(expr.subs(point))
        assert linear.kernel_at_depth(1.3, 1 / 3, 1.2, 0.1, L) == pytest.approx(exact, rel=1e-13)
    # the closed form at L = 0 is the input, at L = 1 one step of the recursion
    assert sp.simplify(expr.subs(D.depth, 0) - D.K0) == 0
    assert sp.simplify(expr.subs(D.depth, 1) - D.kernel_update().subs(D.K, D.K0)) == 0


def test_latex_export_writes_its_document(example, tmp_path):
    paths = {p.stem: p for p in export_latex(tmp_path / "tex")}  # the real export, every registered derivation
    assert "linear" in paths and r"\rho" in paths["linear"].read_text() and r"K^{(\ell+1)}" in paths["linear"].read_text()


def test_its_subcommand_runs_and_rejects_bad_input(example, capsys):
    assert main(["linear-kernel", "--input-kernel", "1", "--depth", "3", "--rho", "0.5", "--sigma-w2", "1",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mean_kernel"] == pytest.approx(1.25**3, rel=1e-14)
    assert main(["linear-kernel", "--input-kernel", "1", "--depth", "-1", "--rho", "0.5", "--sigma-w2", "1"]) == 2
    assert "depth" in capsys.readouterr().err


def test_its_claims_run_in_the_report(example, tmp_path):
    from resprop.numeric.report.reproduce import reproduce

    report = reproduce(tmp_path / "report", "linear", quick=True, quiet=True, check_generated=False,
                       build_pdf=False)
    rows = report["theories"]["linear"]["rows"]
    assert len(rows) == 2 and all(r["verdict"] == "agrees" for r in rows), rows
    assert (tmp_path / "report" / "index.html").is_file()
