"""LaTeX export: every exported equation parses back into SymPy and equals its source result."""
import re

import pytest
import sympy as sp
from sympy.parsing.latex import parse_latex

from resprop.derive.latex import LATEX_NAMES, export_latex
from resprop.derive.registry import THEORIES, derivation

EQUATION = re.compile(r"\\begin\{equation\}\n(.*?)\n\\label\{eq:(\w+):(\w+)\}\\tag\{([^}]*)\}\n\\end\{equation\}", re.S)


def _parse(tex: str) -> sp.Expr:
    # the parser reads \Gamma(...) as an undefined function named Gamma: map it to the gamma function
    expr = parse_latex(tex).subs(sp.Symbol("pi"), sp.pi).subs(sp.Symbol("e"), sp.E)
    return expr.replace(sp.Function("Gamma"), sp.gamma)


@pytest.mark.parametrize("theory", list(THEORIES))
def test_latex_roundtrip(tmp_path, theory):
    (path,) = [p for p in export_latex(tmp_path) if p.stem == theory]
    text = path.read_text()
    found = EQUATION.findall(text)
    results = {r.name: r for r in derivation(theory).results}
    assert {name for _, _, name, _ in found} == set(results)
    for body, th, name, tag in found:
        res = results[name]
        assert th == theory
        assert tag == res.source.equation.replace(",", ";")  # the paper's equation number
        rhs_tex = body.split(" = ", 1)[1]
        parsed = _parse(rhs_tex)
        # each input's LaTeX name parses to an expression in plain symbols; map the source onto it
        subs = {s: _parse(LATEX_NAMES[s]) for s in res.expr.free_symbols}
        source = res.expr.subs(subs, simultaneous=True)
        diff = sp.simplify(parsed - source)
        if diff != 0:  # fall back to numbers at a generic point when simplify cannot close it
            pt = {s: sp.Rational(3 + k, 7) for k, s in enumerate(sorted(diff.free_symbols, key=str))}
            assert abs(complex(sp.N(diff.subs(pt), 30))) < 1e-25, (name, parsed, source)


def test_documents_compile_structure(tmp_path):
    for p in export_latex(tmp_path):
        t = p.read_text()
        assert t.count(r"\begin{equation}") == t.count(r"\end{equation}") > 0
        assert r"\end{document}" in t
