"""Named results: the unit that flows derive -> templates -> generated -> numeric -> LaTeX.

A derivation produces :class:`Result` objects.  Each carries a SymPy expression
(a closed form, or the right-hand side of a one-step recursion update), its
inputs with their domains, and the paper and equation it reproduces.  Codegen
turns a result into a vectorised NumPy function, the LaTeX export into a
labelled equation, and tests check it against mpmath and simulation.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import sympy as sp

#: relative round-off allowed on the covariance constraint |K_ab| <= sqrt(K_aa K_bb) before it is an error
COVARIANCE_RTOL = 1e-12

_BOUND = {"inf": math.inf, "-inf": -math.inf, "pi": math.pi, "-pi": -math.pi}
_INTERVAL = re.compile(r"^([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])$")
_COVARIANCE = re.compile(r"^\|(\w+)\| <= sqrt\((\w+) (\w+)\)$")


@dataclass(frozen=True)
class Domain:
    """A parsed domain: an interval (``lo``, ``hi`` with closed flags) or the covariance constraint
    ``|x| <= sqrt(var_a var_b)`` on the named variances (``kind == "covariance"``)."""

    text: str
    kind: str = "interval"
    lo: float = -math.inf
    hi: float = math.inf
    lo_closed: bool = False
    hi_closed: bool = False
    var_a: str = ""
    var_b: str = ""

    @property
    def correlation_type(self) -> bool:
        """A correlation or covariance: 1 - rho^2 (or K_aa K_bb - K_ab^2) may reach 0 on the boundary."""
        return self.kind == "covariance" or (self.lo, self.hi) == (-1.0, 1.0)


def _bound(token: str, text: str) -> float:
    if token in _BOUND:
        return _BOUND[token]
    try:
        return float(int(token)) if re.fullmatch(r"-?\d+", token) else float(token)
    except ValueError:
        raise ValueError(f"unparseable domain {text!r}: bound {token!r} is not a number, inf or pi") from None


def parse_domain(text: str) -> Domain:
    """'real', '[a, b]', '(a, b)', '[a, b)', '(a, b]' (a, b numbers, +-inf or +-pi) or '|x| <= sqrt(a b)'."""
    if text == "real":
        return Domain(text)
    m = _INTERVAL.match(text)
    if m:
        lo, hi = _bound(m.group(2), text), _bound(m.group(3), text)
        lo_closed, hi_closed = m.group(1) == "[", m.group(4) == "]"
        if not lo < hi or (lo_closed and math.isinf(lo)) or (hi_closed and math.isinf(hi)):
            raise ValueError(f"unparseable domain {text!r}: need lo < hi and open infinite ends")
        return Domain(text, "interval", lo, hi, lo_closed, hi_closed)
    m = _COVARIANCE.match(text)
    if m:
        return Domain(text, "covariance", var_a=m.group(2), var_b=m.group(3))
    raise ValueError(f"unparseable domain {text!r}; expected 'real', an interval such as '[0, inf)' "
                     "or '|K_ab| <= sqrt(K_aa K_bb)'")


@dataclass(frozen=True)
class Input:
    """An argument of a generated function, with the domain it must lie in (parsed at derive time)."""

    symbol: sp.Symbol
    domain: str  # human-readable, e.g. "(0, inf)", "[0, inf)", "real", "[-1, 1]"
    description: str

    def __post_init__(self) -> None:
        parsed = parse_domain(self.domain)
        if parsed.kind == "covariance" and not self.domain.startswith(f"|{self.name}|"):
            raise ValueError(f"input {self.name!r}: covariance domain {self.domain!r} constrains another symbol")
        object.__setattr__(self, "parsed", parsed)

    @property
    def name(self) -> str:
        return self.symbol.name


@dataclass(frozen=True)
class Constraint:
    """A compound condition on several inputs that their intervals do not express (e.g. alpha^2 + lam^2 > 0);
    ``condition`` is a SymPy relational (or And/Or of them), ``text`` the message shown when it fails."""

    condition: sp.Basic
    text: str


@dataclass(frozen=True)
class Source:
    """Where a result comes from: paper key and equation label(s)."""

    paper: str
    equation: str
    note: str = ""

    def cite(self) -> str:
        text = f"{self.paper}, eq. {self.equation}"
        return f"{text} ({self.note})" if self.note else text


@dataclass(frozen=True)
class Result:
    """A named symbolic result.

    ``kind`` is ``"expression"`` for a closed form ``name = expr(inputs)`` and
    ``"recursion"`` for a one-step update ``state_{l} = expr(state_{l-1}, ...)``.
    ``lhs`` is the symbol printed on the left of the LaTeX equation.
    """

    name: str
    expr: sp.Expr
    inputs: tuple[Input, ...]
    source: Source
    description: str
    lhs: sp.Expr
    kind: str = "expression"
    constraints: tuple[Constraint, ...] = ()
    #: one English sentence stating the result for a paper (LaTeX text, inline math in $...$)
    statement: str = ""
    #: per-result LaTeX of inputs read at another layer than declared, e.g. <phi phi> at K^(L) in the readout
    tex: tuple[tuple[sp.Symbol, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("expression", "recursion"):
            raise ValueError(f"kind must be 'expression' or 'recursion', got {self.kind!r}")
        free = {s.name for s in self.expr.free_symbols}
        declared = {i.name for i in self.inputs}
        missing = free - declared
        if missing:
            raise ValueError(f"result {self.name!r}: undeclared free symbols {sorted(missing)}")
        for i in self.inputs:
            if i.parsed.kind == "covariance" and not {i.parsed.var_a, i.parsed.var_b} <= declared:
                raise ValueError(f"result {self.name!r}: {i.name} is constrained by undeclared variances "
                                 f"{i.parsed.var_a}, {i.parsed.var_b}")
        for c in self.constraints:
            extra = {s.name for s in c.condition.free_symbols} - declared
            if extra:
                raise ValueError(f"result {self.name!r}: constraint {c.text!r} uses undeclared {sorted(extra)}")

    @property
    def argnames(self) -> list[str]:
        return [i.name for i in self.inputs]


@dataclass
class Derivation:
    """All results of one theory, in the order they are derived."""

    theory: str
    title: str
    paper: str
    results: list[Result] = field(default_factory=list)
    #: symbol -> its declaration (a :class:`derive.symbols.Parameter`): domain, LaTeX, meaning
    symbols: dict = field(default_factory=dict)

    def declare(self, params) -> dict[sp.Symbol, Input]:
        """Register parameter declarations; returns symbol -> Input (the ``domains`` of :meth:`adder`)."""
        from .symbols import by_symbol
        self.symbols = by_symbol([*self.symbols.values(), *params])
        return {p.symbol: p.input() for p in params}

    @property
    def parameters(self) -> tuple:
        """The declarations of this theory's inputs, in declaration order."""
        return tuple(self.symbols.values())

    def add(self, result: Result) -> Result:
        if any(r.name == result.name for r in self.results):
            raise ValueError(f"duplicate result name {result.name!r} in {self.theory}")
        self.results.append(result)
        return result

    def adder(self, domains: Mapping[sp.Symbol, Input] | None = None):
        """``add(name, expr, order, eq, desc, lhs, kind="expression", note="", constraints=(), statement="",
        tex={})``: add a Result of this theory's paper at equation ``eq``, whose inputs are the domains of the
        symbols of ``order`` that occur in ``expr`` (in that order; by default the declared :attr:`symbols`);
        ``lhs`` is a symbol or its LaTeX; ``constraints`` are compound :class:`Constraint`s; ``statement`` the
        one-sentence prose of the LaTeX export; ``tex`` LaTeX overrides of inputs for this result only."""
        if domains is None:
            domains = {s: p.input() for s, p in self.symbols.items()}

        def add(name, expr, order, eq, desc, lhs, kind="expression", note="", constraints=(), statement="",
                tex=None):
            inputs = tuple(domains[s] for s in order if s in expr.free_symbols)
            lhs = sp.Symbol(lhs) if isinstance(lhs, str) else lhs
            return self.add(Result(name, expr, inputs, Source(self.paper, eq, note), desc, lhs, kind,
                                   tuple(constraints), statement, tuple((tex or {}).items())))
        return add

    def state(self, statements: Mapping[str, str]) -> None:
        """Set the one-sentence prose statement of each named result (every result must get one)."""
        from dataclasses import replace
        unknown = set(statements) - set(self.names())
        missing = set(self.names()) - set(statements) - {r.name for r in self.results if r.statement}
        if unknown or missing:
            raise ValueError(f"{self.theory}: statements for unknown results {sorted(unknown)}, "
                             f"none for {sorted(missing)}")
        self.results = [replace(r, statement=statements[r.name]) if r.name in statements else r
                        for r in self.results]

    def __getitem__(self, name: str) -> Result:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def names(self) -> Sequence[str]:
        return [r.name for r in self.results]
