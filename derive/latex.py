"""LaTeX export: one document per theory, each result an equation tagged with the paper's number."""
from __future__ import annotations

from pathlib import Path

import sympy as sp

from . import abcd, field_theory, gaussian, log_gaussian, predictive_coding, residual_mlp, stable_resnet
from .registry import PAPERS, THEORIES, derivation
from .results import Derivation, Result

#: symbol -> LaTeX name; each name parses back (sympy.parsing.latex) to an expression of plain symbols
LATEX_NAMES: dict[sp.Symbol, str] = {**gaussian.LATEX_NAMES, **field_theory.LATEX_NAMES,
                                       **log_gaussian.LATEX_NAMES, **residual_mlp.LATEX_NAMES,
                                       **stable_resnet.LATEX_NAMES,
                                       **predictive_coding.LATEX_NAMES,
                                       **abcd.LATEX_NAMES}


def equation_tex(result: Result) -> str:
    names = {s: LATEX_NAMES.get(s, sp.latex(s)) for s in result.expr.free_symbols}
    rhs = sp.latex(result.expr, symbol_names=names, inv_trig_style="full", ln_notation=True, mul_symbol="dot")
    lhs = result.lhs.name if isinstance(result.lhs, sp.Symbol) else sp.latex(result.lhs)
    return f"{lhs} = {rhs}"


def equation_tag(result: Result) -> str:
    return result.source.equation.replace(",", ";")


def render_latex_document(d: Derivation, derivation_path: str) -> str:
    from .codegen import _render

    rows = [{"name": r.name, "description": r.description, "source": r.source.cite(), "kind": r.kind,
             "equation": equation_tex(r), "tag": equation_tag(r)} for r in d.results]
    return _render("theory.tex.j2", results=rows, theory=d.theory, title=d.title,
                   derivation_path=derivation_path, paper_tex=PAPERS.get(d.paper, d.paper))


def export_latex(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for theory, (path, _) in THEORIES.items():
        p = out / f"{theory}.tex"
        p.write_text(render_latex_document(derivation(theory), path))
        paths.append(p)
    return paths
