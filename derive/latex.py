"""LaTeX export: one document per derivation, each result an equation tagged with the paper's number.

The symbol names come from the derivation modules' declarations (``LATEX_NAMES`` of each module that defines a
derivation), found through the theory registry: this module imports no theory.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import sympy as sp

from resprop import registry
from resprop.derive.results import Derivation, Result
from resprop.derive.templating import render


def latex_names() -> dict[sp.Symbol, str]:
    """symbol -> LaTeX name, merged over every registered derivation module; each name parses back
    (sympy.parsing.latex) to an expression of plain symbols."""
    names: dict[sp.Symbol, str] = {}
    for ref, _ in registry.derivations().values():
        module = importlib.import_module(ref.partition(":")[0])
        names.update(getattr(module, "LATEX_NAMES", {}))
    return names


def equation_tex(result: Result, names: dict[sp.Symbol, str] | None = None) -> str:
    table = latex_names() if names is None else names
    symbol_names = {s: table.get(s, sp.latex(s)) for s in result.expr.free_symbols}
    rhs = sp.latex(result.expr, symbol_names=symbol_names, inv_trig_style="full", ln_notation=True,
                   mul_symbol="dot")
    lhs = result.lhs.name if isinstance(result.lhs, sp.Symbol) else sp.latex(result.lhs)
    return f"{lhs} = {rhs}"


def equation_tag(result: Result) -> str:
    return result.source.equation.replace(",", ";")


def render_latex_document(d: Derivation, derivation_path: str) -> str:
    names = latex_names()
    rows = [{"name": r.name, "description": r.description, "source": r.source.cite(), "kind": r.kind,
             "equation": equation_tex(r, names), "tag": equation_tag(r)} for r in d.results]
    return render("theory.tex.j2", results=rows, theory=d.theory, title=d.title,
                  derivation_path=derivation_path, paper_tex=registry.papers().get(d.paper, d.paper))


def export_latex(out: Path) -> list[Path]:
    """Write ``<derivation>.tex`` for every registered derivation (foundation first) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in registry.derivations():
        p = out / f"{name}.tex"
        p.write_text(render_latex_document(registry.derivation(name), registry.derivation_source(name)))
        paths.append(p)
    return paths


def __getattr__(name: str):
    if name == "LATEX_NAMES":  # the merged table, built on first use (theories are found through the registry)
        return latex_names()
    raise AttributeError(name)
