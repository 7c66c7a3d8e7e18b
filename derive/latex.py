"""LaTeX export: one document per theory, each result an equation tagged with the paper's number.

The printer takes every symbol's LaTeX from the declarations the derivation carries (``Derivation.symbols``,
see :mod:`resprop.derive.symbols`), so this module knows no theory: Gaussian expectations print as
``\\langle \\sigma^{2} \\rangle_{K^{(\\ell)}}``, per-layer inputs with their layer as a superscript, and
products by juxtaposition (``\\cdot`` only between two numbers).
"""
from __future__ import annotations

import re
from pathlib import Path

import sympy as sp
from sympy.printing.latex import LatexPrinter

from resprop import registry
from resprop.derive.results import Derivation, Result
from resprop.derive.templating import render

#: a LaTeX name that takes a power without parentheses: one letter or command, primes, one subscript
_SIMPLE = re.compile(r"^\\?[A-Za-z]+'*(_\{[^{}]*\})?$")


class _PaperPrinter(LatexPrinter):
    """SymPy's printer with implicit multiplication and the declared symbol names.

    A power of a composite name (``K^{(\\ell)}``, ``\\cos\\theta``, an expectation) is parenthesised, so that
    it cannot be read as a power of its last token; a name already in ``\\left(...\\right)`` is not wrapped twice.
    """

    def __init__(self, names: dict[sp.Symbol, str]):
        super().__init__({"symbol_names": names, "mul_symbol": None, "inv_trig_style": "full",
                          "ln_notation": True})
        self._names = names

    def _print_Pow(self, expr):
        base, exp = expr.base, expr.exp
        if base.is_Symbol and base in self._names and (exp.is_Integer and exp > 1 or not exp.is_number):
            name = self._names[base]
            if not _SIMPLE.match(name):
                if not (name.startswith(r"\left(") and name.endswith(r"\right)")):
                    name = rf"\left({name}\right)"
                return f"{name}^{{{self._print(exp)}}}"
        return super()._print_Pow(expr)


def symbol_tex(result: Result, d: Derivation) -> dict[sp.Symbol, str]:
    """symbol -> LaTeX for every free symbol of ``result``: its declaration, or the result's override."""
    names = {s: p.tex() for s, p in d.symbols.items() if s in result.expr.free_symbols}
    names.update(dict(result.tex))
    missing = sorted(s.name for s in result.expr.free_symbols if s not in names)
    if missing:
        raise ValueError(f"result {result.name!r}: no LaTeX declaration for {missing}")
    return names


def expression_tex(expr: sp.Expr, names: dict) -> str:
    """``expr`` as the LaTeX export prints it, with ``names`` (symbol -> LaTeX, `symbol_tex`)."""
    return _PaperPrinter(names).doprint(expr)


def equation_tex(result: Result, d: Derivation) -> str:
    rhs = _PaperPrinter(symbol_tex(result, d)).doprint(result.expr)
    lhs = result.lhs.name if isinstance(result.lhs, sp.Symbol) else sp.latex(result.lhs)
    return f"{lhs} = {rhs}"


def equation_tag(result: Result) -> str:
    return result.source.equation.replace(",", ";")


def render_latex_document(d: Derivation, derivation_path: str) -> str:
    rows = [{"name": r.name, "statement": r.statement, "source": r.source.cite(), "kind": r.kind,
             "equation": equation_tex(r, d), "tag": equation_tag(r)} for r in d.results]
    return render("theory.tex.j2", results=rows, theory=d.theory, title=d.title,
                  derivation_path=derivation_path, paper_tex=registry.papers().get(d.paper, d.paper))


def export_latex(out: Path, names=None, progress=None) -> list[Path]:
    """Write ``<derivation>.tex`` for every registered derivation (foundation first), or for the derivations
    ``names`` only (in registry order), into ``out``.  ``progress(done, total, name)``, when given, is called with
    ``done = 0`` first and then after each document (the derivation behind it is most of the time)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = registry.derivations()
    if names is not None:
        unknown = sorted(set(names) - set(table))
        if unknown:
            from resprop.numeric.engine.validation import ParameterError

            raise ParameterError("names", f"unknown derivation(s) {unknown}; allowed: {', '.join(table)}")
    chosen = [name for name in table if names is None or name in names]
    if progress is not None:
        progress(0, len(chosen), "")
    paths = []
    for i, name in enumerate(chosen, 1):
        p = out / f"{name}.tex"
        p.write_text(render_latex_document(registry.derivation(name), registry.derivation_source(name)))
        paths.append(p)
        if progress is not None:
            progress(i, len(chosen), name)
    return paths
