"""Parameters and symbols declared once: name, domain, LaTeX, meaning, convention.

A theory module declares each of its inputs with :class:`Parameter`; the declaration builds the SymPy
symbol (assumptions from the domain), the :class:`~derive.results.Input` of every result that uses it
(domain and one-line meaning, which the generated kernels validate and document), and the LaTeX the
export prints for it.  ``Derivation.symbols`` maps each symbol of a theory to its declaration, so the
LaTeX printer, the docs (``docs/reference/parameters.md``), the hypothesis strategies (``tests/strategies.py``),
the drivers' checks (:meth:`Parameter.validate`) and the CLI options (``resprop.numeric.cli_support.
add_parameter_option``) need no theory-specific table.

LaTeX conventions: a per-layer quantity declares the layer it is read at (``layer``, e.g. ``\\ell`` or
``\\ell-1``) and prints with that layer as a superscript, ``K^{(\\ell)}``; a Gaussian expectation is
written ``\\langle \\sigma^{2} \\rangle_{K^{(\\ell)}}``, with the token ``LAYER`` in ``latex`` standing for
the layer so that :meth:`Parameter.tex` can move it (the readout reads the same expectation at ``L``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import sympy as sp

from resprop.derive.results import Input, parse_domain

#: placeholder in ``Parameter.latex`` for the layer index
LAYER = "LAYER"


def assumptions_for(domain: str, integer: bool = False) -> dict[str, bool]:
    """SymPy assumptions matching a domain: positive on (0, inf) (or any lower bound > 0), nonnegative on
    [0, ...), negative/nonpositive for intervals below zero, real otherwise; ``integer`` adds integer=True."""
    d = parse_domain(domain)
    if d.kind != "interval":
        out = {"real": True}
    elif d.lo > 0 or (d.lo == 0 and not d.lo_closed):
        out = {"positive": True}
    elif d.lo == 0:
        out = {"nonnegative": True}
    elif d.hi < 0 or (d.hi == 0 and not d.hi_closed):
        out = {"negative": True}
    elif d.hi == 0:
        out = {"nonpositive": True}
    else:
        out = {"real": True}
    if integer:
        out["integer"] = True
    return out


@dataclass(frozen=True)
class Parameter:
    """One declared input of the derivations.

    ``name`` is the SymPy symbol name and the argument name of the generated kernels; ``domain`` an interval
    string of :func:`~derive.results.parse_domain`; ``latex`` the paper's symbol (``LAYER`` marks where the
    layer index goes inside it); ``meaning`` the one-line description shown in kernel docstrings and docs;
    ``convention`` units or the convention that fixes the normalisation; ``layer`` the layer index the input
    is read at in a recursion (empty for a non-layered quantity); ``assumptions`` overrides the assumptions
    derived from the domain where a derivation needs a wider symbol (e.g. real for a linear solve).
    """

    name: str
    domain: str
    latex: str
    meaning: str
    convention: str = ""
    layer: str = ""
    integer: bool = False
    assumptions: tuple[tuple[str, bool], ...] = ()
    symbol: sp.Symbol = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parse_domain(self.domain)  # fail at declaration time
        assume = dict(self.assumptions) if self.assumptions else assumptions_for(self.domain, self.integer)
        object.__setattr__(self, "symbol", sp.Symbol(self.name, **assume))

    @property
    def layered(self) -> bool:
        return bool(self.layer)

    @property
    def interval(self) -> tuple[float, float]:
        d = parse_domain(self.domain)
        return (d.lo, d.hi) if d.kind == "interval" else (-math.inf, math.inf)

    def tex(self, layer: str | None = None) -> str:
        """The LaTeX of this parameter read at ``layer`` (default: its declared layer)."""
        layer = self.layer if layer is None else layer
        if LAYER in self.latex:
            return self.latex.replace(LAYER, layer)
        if not layer:
            return self.latex
        base = f"{{{self.latex}}}" if "^" in self.latex else self.latex
        return f"{base}^{{({layer})}}"

    def input(self) -> Input:
        return Input(self.symbol, self.domain, self.meaning)

    def validate(self, value, name: str | None = None):
        """``value`` checked against this declaration by the one validation layer
        (:func:`resprop.numeric.engine.validation.check`): a ParameterError naming ``name`` (default this
        parameter's name) and the domain for NaN, inf, booleans, non-numeric, out-of-domain values and, for an
        integer parameter, non-integers and int64 overflow.  Returns a float (int) or a float64 (int64) array."""
        from resprop.numeric.engine.validation import check

        return check(self, value, name)

    def describe(self) -> str:
        """One line for help texts and docs: meaning, allowed range and convention."""
        from resprop.numeric.engine.validation import describe

        text = f"{self.meaning}; {describe(self)}"
        return f"{text} ({self.convention})" if self.convention else text


def by_symbol(params: Iterable[Parameter]) -> dict[sp.Symbol, Parameter]:
    """symbol -> declaration; two declarations of one symbol must agree on domain and LaTeX."""
    out: dict[sp.Symbol, Parameter] = {}
    for p in params:
        if p.symbol in out and (out[p.symbol].domain, out[p.symbol].tex()) != (p.domain, p.tex()):
            raise ValueError(f"parameter {p.name!r} declared twice with different domain or LaTeX")
        out[p.symbol] = p
    return out


def inputs(params: Iterable[Parameter]) -> dict[sp.Symbol, Input]:
    """symbol -> Input, the ``domains`` mapping of :meth:`Derivation.adder`."""
    return {p.symbol: p.input() for p in params}


def latex_names(params: Mapping[sp.Symbol, Parameter]) -> dict[sp.Symbol, str]:
    return {s: p.tex() for s, p in params.items()}
