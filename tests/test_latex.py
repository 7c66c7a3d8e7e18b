"""LaTeX export: every exported equation parses back into SymPy and equals its source result, and the
documents use the papers' notation (expectations, layer superscripts, chi_parallel, implicit products)."""
import re

import pytest
import sympy as sp
from sympy.core.function import AppliedUndef
from sympy.parsing.latex import parse_latex

from resprop.derive.latex import export_latex, symbol_tex
from resprop.derive.symbols import Parameter, assumptions_for
from resprop.registry import derivation, derivations

THEORIES = derivations()  # every derivation (foundation first), by name

EQUATION = re.compile(r"\\begin\{equation\}\n(.*?)\n\\label\{eq:(\w+):(\w+)\}\\tag\{([^}]*)\}\n\\end\{equation\}", re.S)


def _parse(tex: str) -> sp.Expr:
    expr = parse_latex(tex)
    # the parser reads a letter followed by parentheses, ``\pi \left(2 K + 1\right)``, as a function call: in the
    # exported equations that juxtaposition is a product (\Gamma(...) excepted, the gamma function)
    expr = expr.replace(lambda e: isinstance(e, AppliedUndef) and e.func.__name__ != "Gamma" and len(e.args) == 1,
                        lambda e: sp.Symbol(e.func.__name__) * e.args[0])
    expr = expr.subs(sp.Symbol("pi"), sp.pi).subs(sp.Symbol("e"), sp.E)
    return expr.replace(sp.Function("Gamma"), sp.gamma)


def _placeholders(rhs: str, names: dict[sp.Symbol, str]) -> tuple[str, dict[sp.Symbol, sp.Symbol]]:
    """Replace each input's rendered LaTeX by a parenthesised placeholder Z_{k}.

    SymPy's LaTeX parser cannot read \\langle ... \\rangle, \\mathbb{E}[G] or K^{(\\ell)} as one symbol, so every
    declared name is swapped for ``\\left(Z_{k}\\right)`` (the parentheses stop the parser reading
    ``Z_{k} \\left(...\\right)`` as a function call), longest name first; a name is only matched as a whole
    token (not inside a longer command or subscripted name).  A name the printer did not emit verbatim
    stays in the text and makes the comparison fail."""
    back = {}
    for k, (sym, tex) in enumerate(sorted(names.items(), key=lambda kv: -len(kv[1]))):
        ph = sp.Symbol(f"Z_{{{k}}}")
        pattern = (r"(?<![\\A-Za-z])" if tex[0].isalpha() else "") + re.escape(tex) + \
                  (r"(?![A-Za-z_'])" if tex[-1].isalnum() or tex[-1] == "}" else "")
        rhs = re.sub(pattern, lambda _: rf"\left(Z_{{{k}}}\right)", rhs)
        back[ph] = sym
    return rhs, back


def _check_equal(parsed: sp.Expr, source: sp.Expr, name: str) -> None:
    diff = sp.simplify(parsed - source)
    if diff != 0:  # fall back to numbers at a generic point when simplify cannot close it
        pt = {s: sp.Rational(3 + k, 7) for k, s in enumerate(sorted(diff.free_symbols, key=str))}
        assert abs(complex(sp.N(diff.subs(pt), 30))) < 1e-25, (name, parsed, source)


@pytest.mark.parametrize("theory", list(THEORIES))
def test_latex_roundtrip(tmp_path, theory):
    (path,) = [p for p in export_latex(tmp_path) if p.stem == theory]
    text = path.read_text()
    found = EQUATION.findall(text)
    d = derivation(theory)
    results = {r.name: r for r in d.results}
    assert {name for _, _, name, _ in found} == set(results)
    for body, th, name, tag in found:
        res = results[name]
        assert th == theory
        assert tag == res.source.equation.replace(",", ";")  # the paper's equation number
        names = symbol_tex(res, d)
        assert len(set(names.values())) == len(names), (name, names)  # distinct symbols print distinctly
        rhs_tex, back = _placeholders(body.split(" = ", 1)[1], names)
        parsed = _parse(rhs_tex).xreplace(back)
        assert parsed.free_symbols <= res.expr.free_symbols, (name, rhs_tex, parsed)
        _check_equal(parsed, res.expr, name)


def test_roundtrip_can_fail():
    """The comparison rejects a wrong equation: C_W and C_b swapped in B.12."""
    d = derivation("pdlt")
    res = d["kernel_update"]
    names = symbol_tex(res, d)
    wrong = r"C_{b} \langle \sigma^{2} \rangle_{K^{(\ell)}} + C_{W} + K^{(\ell)} \gamma^{2}"
    rhs_tex, back = _placeholders(wrong, names)
    with pytest.raises(AssertionError):
        _check_equal(_parse(rhs_tex).xreplace(back), res.expr, "kernel_update")


def _equation(theory: str, name: str, tmp_path) -> str:
    (path,) = [p for p in export_latex(tmp_path) if p.stem == theory]
    bodies = {n: body for body, _, n, _ in EQUATION.findall(path.read_text())}
    return bodies[name]


def test_b12_layer_superscripts_and_expectation(tmp_path):
    lhs, rhs = _equation("pdlt", "kernel_update", tmp_path).split(" = ", 1)
    assert lhs == r"K^{(\ell+1)}"
    assert r"K^{(\ell)}" in rhs and r"\ell+1" not in rhs
    assert r"\langle \sigma^{2} \rangle_{K^{(\ell)}}" in rhs
    assert r"\cdot" not in rhs and "g_{2}" not in rhs
    assert r"C_{W} \langle" in rhs  # implicit multiplication, separated by a space


def test_b13_recursion_keeps_its_layer_index(tmp_path):
    lhs, rhs = _equation("pdlt", "delta_K1_update", tmp_path).split(" = ", 1)
    assert lhs == r"\delta K_{[1]}^{(\ell+1)}"
    assert rhs == r"\chi_{\parallel}^{(\ell)} \delta K_{[1]}^{(\ell)}"


def test_papers_symbols(tmp_path):
    paths = {p.stem: p.read_text() for p in export_latex(tmp_path)}
    pdlt = paths["pdlt"]
    assert r"\chi_{\parallel}" in pdlt and r"\chi_{\perp}" in pdlt
    assert r"\chi_{p}" not in pdlt and r"\chi_{t}" not in pdlt
    for opaque in ("g_{2}", "q_{2}", "g_{d}", "q_{d}", "g_{4}"):
        assert opaque not in pdlt
    assert r"\langle \sigma'^{2} \rangle_{K^{(\ell)}}" in pdlt
    assert r"\bar{J}_{2}" in paths["lognormal"]
    assert r"\nu" in pdlt
    fischer = paths["fischer"]
    assert r"\langle \phi_{a} \phi_{b} \rangle_{K^{(\ell-1)}}" in fischer
    assert r"\langle \phi_{a} \phi_{b} \rangle_{K^{(L)}}" in fischer  # the readout reads it at K^(L)
    assert r"\eta^{(\ell)} = \chi^{(\ell-1)}" in fischer


def test_no_escaped_ascii_and_a_statement_per_result(tmp_path):
    for p in export_latex(tmp_path):
        t = p.read_text()
        assert r"\^{}" not in t and "$<$" not in t and "$>$" not in t, p.name
        assert r"\cdot" not in re.sub(r"\d \\cdot \d", "", t), p.name  # only between two numbers
        paragraphs = re.findall(r"^\\paragraph\{[^}]*\} (.*)$", t, re.M)
        assert paragraphs and all(len(s.split()) >= 5 for s in paragraphs), p.name
    for theory in THEORIES:
        for r in derivation(theory).results:
            assert r.statement and r.statement[0].isupper(), (theory, r.name)


def test_every_input_is_declared_once():
    for theory in THEORIES:
        d = derivation(theory)
        for r in d.results:
            for i in r.inputs:
                p = d.symbols[i.symbol]
                assert (p.domain, p.meaning) == (i.domain, i.description), (theory, r.name, i.name)


def test_parameter_assumptions_follow_the_domain():
    assert assumptions_for("(0, inf)") == {"positive": True}
    assert assumptions_for("[1, inf)") == {"positive": True}
    assert assumptions_for("[0, 1)") == {"nonnegative": True}
    assert assumptions_for("[-1, 1]") == {"real": True}
    assert assumptions_for("real") == {"real": True}
    p = Parameter("L", "[1, inf)", "L", "depth", integer=True)
    assert p.symbol == sp.Symbol("L", positive=True, integer=True)
    k = Parameter("K", "(0, inf)", "K", "kernel", layer=r"\ell")
    assert (k.tex(), k.tex(r"\ell+1")) == (r"K^{(\ell)}", r"K^{(\ell+1)}")
    e = Parameter("m", "[0, inf)", r"\langle \sigma^{2} \rangle_{K^{(LAYER)}}", "mean", layer=r"\ell")
    assert e.tex("L") == r"\langle \sigma^{2} \rangle_{K^{(L)}}"
    with pytest.raises(ValueError):
        Parameter("x", "[0, oops)", "x", "bad")


def test_documents_compile_structure(tmp_path):
    for p in export_latex(tmp_path):
        t = p.read_text()
        assert t.count(r"\begin{equation}") == t.count(r"\end{equation}") > 0
        assert r"\end{document}" in t
