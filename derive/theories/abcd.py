"""Innocenti, Achour & Bogacz (2025): the abcd(alpha) parameterisations of linear BP and PC networks, solved exactly.

Notation (the paper's §2.2 and Table 1): ``a_1, b_1`` scale the first (input) layer, ``a_l, b_l`` every
further layer l = 2..L *including the output layer* (the paper's eq. 15 and Table 2 use one a_l, b_l for
l in {2, ..., L}), ``c`` the learning rate eta = eta_0 gamma^2 N^-c, ``d`` the output scale gamma = gamma_0 N^d,
``alpha`` the residual-branch scale L^-alpha (eq. 18).  For the joint width-depth limit of §4 the width is
written N = L^nu (``nu`` > 0; nu >= 1 is the paper's "N >> L" regime of Corollary 4.2).

Depth: L here is the paper's, the number of weight matrices (read-in, L - 2 hidden or residual layers, readout;
eqs. 7-10, 18), in which every result below is stated.  resprop's public ``depth`` (layers after the read-in, the
readout not counted) is L - 2; resprop.numeric.theories.abcd.abcd.rates and ``resprop abcd --depth`` convert.

How the desiderata become linear constraints
--------------------------------------------
Every quantity of the paper's power counting is written as a product of powers of N (of L in depth) --
exactly the factors of the cited equations -- and ``growth_exponent`` turns it into its exponent: products add,
powers multiply, and a *sum* of positive terms has the exponent of its largest term, a ``Max``.  The
equilibrated-energy rescaling s = 1 + gamma^-2 Theta(1) (eqs. 25, 46-47) therefore contributes
``Max(0, -2 d)``: this is where the max(.) of eqs. 66-67 comes from.  A desideratum "X = Theta(1)" with X a sum of
terms becomes ``Eq(Max(exponents), 0)``.  Two readings are encoded:

* ``"paper"`` (the maximal-update reading the paper actually computes, eqs. 66-67, 83, 89-90, 124): every
  layer's own weight update must move what it drives at order one.  D2 is eq. 67 for the first layer and
  max(q, r) = 0 for the layers l >= 2 (eqs. 66, 73); D3 is eq. 83 for the first layer and max(BP term,
  PC D-term) = 0 for l >= 2 (eqs. 90, 94); D5 asks the residual branches' summed update to be Theta_L(1).
* ``"literal"``: the desideratum's own quantity (df/dt, dh^(l)/dt including what earlier layers propagate)
  must be Theta(1): D2 is max over *all* contributions of df/dt = 0, D3 at layer l >= 2 includes the first
  layer's propagated change, D5 includes the first layer's Theta_L(1) change.

``split_cases`` enumerates which argument attains every max (first maximiser, so cases are disjoint);
inside a case everything is linear: ``sympy.linsolve`` solves the equalities, an exact rational
Fourier--Motzkin elimination (``fm_feasible``) decides the remaining inequalities and prunes redundant ones,
and ``sympy.reduce_inequalities`` states one-parameter ranges.  ``lp_case_feasible`` re-decides every case
with ``scipy.optimize.linprog`` (strict inequalities through a maximised slack) as an independent check.

Results (pinned by tests/test_abcd.py)
--------------------------------------
* Paper reading, BP and PC alike (Theorem 1): the family is (a_1, b_1, a_l, b_l, c, d) =
  (-c/2, c, (1 - c)/2, c, c, 1/2), c free -- eq. 15 with d = 1/2 (mean-field c = 0, muP c = 1).
* Depth: D4 alone gives alpha >= 1/2 (eq. 103); D5 (paper reading) alone gives alpha = 1/2 for BP (eq. 124);
  for PC the rescaling s = 1 + Theta(L/N) (eq. 107) enters, and D4 and D5 together give alpha = 1/2 exactly
  when nu >= 1 (width growing at least as fast as depth); for nu < 1 no alpha satisfies both.
* PC-specific terms on the family (paper's counting): r = Theta(N^-1/2) (eq. 72), the D-term
  Theta(N^-1/2) (eq. 93), the depth term Theta(L/N^2) at alpha = 1/2 (eq. 123).

Discrepancies with the paper (each pinned by a test)
----------------------------------------------------
1. Eqs. 73 and 94 are boxed as equalities; imposed together with eq. 66 they force d = 0 (eq. 73) or
   are contradictory (eq. 94: c + 2a_l would equal both 1 + min(0, 2d) and 1/2 + ...).  The text after eq. 83
   treats them correctly as "this PC term must not dominate": encoded as max(q, r) = 0, max(BP, D) = 0.
   In the paper's counting the PC terms never dominate: r - q = D - e = -d - max(0, -2d) <= 0 for every d.
2. Eqs. 72-73 and 93-94 carry the rescaling squared, (1 + N^-2d)^2, so the right-hand side of the
   boxed eqs. 73 and 94 is 2 min(0, 2d), not min(0, 2d); eq. 92 prints (1 + N^{2d})^2 for (1 + N^{-2d})^2.
3. The paper's counting of the PC terms is an upper bound, not a Theta: eqs. 53-55 and 69-70 sum the
   N (resp. N^2) entries of the Frobenius products coherently.  For a linear network the inner products
   reduce to h^(L) N^-2a_l (``sharp_pc_exponents``): at initialisation r and the D-term are
   Theta(N^-(c + d + 2a_l)) and Theta(N^-(c + 2a_l + 1/2)), i.e. N^-3/2 on the family, and N^-1 once the
   readout has aligned (h^(L) ~ gamma).  resprop.numeric.theories.abcd.abcd.mlp_pc_terms measures slopes -3/2 and -1.
    The
   classification is unaffected (the terms are dominated either way).
4. Eq. 122 divides by (1 + N^-1) and (1 + N^-1)^2, the fixed-depth rescaling, where eq. 107 gives
   s = 1 + Theta(L/N).  With the correct s the PC feature updates carry a factor 1/s ~ N/L when L >> N,
   which is why PC's D4 + D5 need nu >= 1 (not stated in Theorem 2, implicit in Corollary 4.2's N >> L).
5. Read literally (the total dh/dt is Theta(1)), D3 and D5 are weaker: features still move at order one
   when the hidden layers are lazy and only the first layer's update propagates.  The literal family is
   2a_1 + b_1 = 0, 2a_l + b_l = 1, c + 2a_1 = 0, d = 1/2 and c + 2a_l >= 1 (two parameters), and D5 gives
   alpha >= 1/2 instead of alpha = 1/2.  Eq. 15's equality 2a_l + c = 1 needs the per-layer reading of eq. 90.
6. §2.3 says the SP (Table 2: c = d = 0, a_l = 0, b_l = 1) "has stable initialisation as well as evolving
   features".  With the Table-2 exponents the hidden features move as N^{1/2} (eq. 89 exponent
   d - c - 2a_l + 1/2 = 1/2) and the first layer's as N^-1/2 (eq. 82): D3 fails for the SP in both readings.

Semantics of a verdict for one parameterisation (``classify``): each desideratum is decided on its own
constraints.  D2 and D3 use the kernel scalings that D1 guarantees (the paper's standing assumption,
"under the previous forward pass constraint", A.4.3), and D4-D5 the depth exponents of A.5 (mean-field
width), so for a parameterisation failing D1 "D2 holds" means "its c, d, a would give Theta(1) prediction
updates given a stable forward pass".
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache

import sympy as sp

from resprop.derive.results import Derivation, Result, Source
from resprop.derive.symbols import Parameter

PAPER = "innocenti2025"
ALGORITHMS = ("bp", "pc")
READINGS = ("paper", "literal")
WIDTH_DESIDERATA = (1, 2, 3)
DEPTH_DESIDERATA = (4, 5)

# --------------------------------------------------------------------------- symbols
_P = Parameter
#: the inputs of the results below, declared once (symbol, domain, the paper's LaTeX, meaning)
PARAMETERS = (
    _P("a_1", "real", r"a_{1}", "first-layer preactivation exponent a_1"),
    _P("a_l", "real", r"a_{l}", "preactivation exponent a_l of layers l = 2..L"),  # every l in {2, ..., L}
    _P("c", "real", "c", "learning-rate exponent c (eta = eta_0 gamma^2 N^-c)"),
    # real, not nonnegative: the width power counting solves for d on both branches
    _P("d", "[0, inf)", "d", "output exponent d (gamma = gamma_0 N^d); the d >= 0 branch, where s -> 1",
       assumptions=(("real", True),)),
    _P("alpha", "real", r"\alpha", "residual-branch depth exponent alpha (L^-alpha)"),
    _P("N", "[1, inf)", "N", "width N"),  # same symbol as resprop.derive.theories.fischer.N
    # same symbol as resprop.derive.theories.fischer.depth
    _P("L", "[2, inf)", "L", "number of weight matrices L (the paper's depth; resprop depth = L - 2)", integer=True),
    _P("gamma_0", "(0, inf)", r"\gamma_{0}", "output-scale constant gamma_0"),
)
a1, a, c, d, alpha, N, L, gamma0 = (p.symbol for p in PARAMETERS)
b1 = sp.Symbol("b_1", real=True)
b = sp.Symbol("b_l", real=True)
nu = sp.Symbol("nu", positive=True)  # N = L^nu (same symbol as resprop.derive.theories.pdlt.nu)

#: linsolve order: the pivots come first, so eq. 15's free parameter is c
WIDTH_VARS = (a1, b1, b, d, a, c)
#: public key -> symbol (resprop.numeric.theories.abcd.abcd parses these keys)
KEYS = {"a1": a1, "b1": b1, "a": a, "b": b, "c": c, "d": d}

HALF = sp.Rational(1, 2)


# --------------------------------------------------------------------------- power counting
def growth_exponent(expr: sp.Expr, var: sp.Symbol = N) -> sp.Expr:
    """Exponent e with expr = Theta(var^e) for a product/quotient/sum of positive powers of ``var``.

    Products add exponents, ``base**k`` multiplies by k, and a sum of positive terms grows like its largest
    term, which is where every ``Max`` of the constraints comes from.  N-independent factors have exponent 0.
    """
    expr = sp.sympify(expr)
    if not expr.has(var):
        return sp.Integer(0)
    if expr == var:
        return sp.Integer(1)
    if expr.is_Pow:
        base, e = expr.args
        if e.has(var):
            raise ValueError(f"exponent depends on {var}: {expr}")
        return sp.expand(e * growth_exponent(base, var))
    if expr.is_Mul:
        return sp.expand(sp.Add(*[growth_exponent(f, var) for f in expr.args]))
    if expr.is_Add:
        return sp.Max(*[growth_exponent(t, var) for t in expr.args])
    raise ValueError(f"cannot power-count {expr!r}")


@dataclass(frozen=True)
class Term:
    name: str
    scale: sp.Expr  # product of powers (constants dropped)
    exponent: sp.Expr
    equations: str
    description: str


def width_terms(algorithm: str) -> dict[str, Term]:
    """The width power counting of A.4, term by term, for BP (s = 1) or PC (s = 1 + gamma^-2 Theta(1)).

    Factors (constants eta_0, gamma_0, P, Delta, the kernels Phi and G, all Theta_N(1) under D1, dropped):
    gamma = N^d (eq. 11), eta = gamma^2 N^-c (eq. 14), s = 1 + N^-2d (eqs. 25, 46-47), an entry of
    df/dW^(l) = N^{-d - a_l - 1/2} (eq. 44) and of ds/dW^(l) = gamma^-2 N^{1 - 3/2} N^{-a_l} (eqs. 52-55).
    """
    _check(algorithm, ALGORITHMS, "algorithm")
    pc = algorithm == "pc"
    gamma = N**d
    eta = gamma**2 * N**(-c)
    s = 1 + gamma**-2 if pc else sp.Integer(1)
    df_dw = gamma**-1 * N**(-a) * N**(-HALF)
    ds_dw = gamma**-2 * N**(1 - 3 * HALF) * N**(-a)
    spec = [
        ("h1_variance", N**(-2 * a1 - b1), "30", "Var h^(1) at initialisation"),
        ("layer_variance_gain", N**(1 - 2 * a - b), "35", "Var h^(l) / Var h^(l-1) at initialisation, l >= 2"),
        ("q_first", eta / s * gamma**-2 * N**(-2 * a1), "64, 67", "first layer's NTK term of df/dt"),
        ("q_hidden", eta / s * gamma**-2 * N**(1 - 2 * a), "64, 66", "layer-l NTK term of df/dt, l >= 2"),
        ("e_first", eta / s * gamma**-1 * N**(-2 * a1 - HALF), "82, 83", "dh^(1)/dt (first layer's own update)"),
        ("e_hidden", eta / s * gamma**-1 * N**(HALF - 2 * a), "89, 90", "BP term of dh^(l)/dt, l >= 2"),
    ]
    if pc:
        spec += [
            ("r_hidden", eta / s**2 * N**2 * df_dw * ds_dw, "69-73", "PC energy-gradient term r of df/dt"),
            ("D_hidden", N**(-a) * eta / s**2 * N * ds_dw, "91-94", "PC D-term of dh^(l)/dt, l >= 2"),
        ]
    return {name: Term(name, scale, growth_exponent(scale, N), eq, desc) for name, scale, eq, desc in spec}


def depth_terms(algorithm: str) -> dict[str, Term]:
    """The depth power counting of A.5 (mean-field width, N = L^nu), exponents in L.

    ``log_variance``: ln of eq. 102's (1 + L^-2alpha)^{L-2} is Theta(L^{1 - 2 alpha}); the 1 stands for the
    data kernel Phi^(0).  ``first_layer``: dh^(1)/dt = Theta_L(1), divided by s for PC.  ``residual_bp``:
    the L - 2 residual blocks' own updates, L^-2alpha each (eqs. 117-120).  ``residual_pc``: the D-term summed
    over blocks, prefactor eta_0 gamma_0^2 N^{1/2} L^-alpha / s^2 (eq. 119) times an entry of ds/dW^(l),
    L^{1 - alpha} N^{-5/2} (eq. 110).  PC's s = 1 + Theta(L/N) (eq. 107).
    """
    _check(algorithm, ALGORITHMS, "algorithm")
    pc = algorithm == "pc"
    width = L**nu
    s = 1 + L / width if pc else sp.Integer(1)
    spec = [
        ("log_variance", 1 + L * L**(-2 * alpha), "101-103", "ln of the residual-stream variance factor"),
        ("first_layer", 1 / s, "120", "first layer's feature update"),
        ("residual_bp", L * L**(-2 * alpha) / s, "117-123", "residual blocks' own (BP) updates"),
    ]
    if pc:
        spec.append(("residual_pc", L * (width**HALF * L**(-alpha) / s**2) * (L**(1 - alpha) * width**(-5 * HALF)),
                     "110, 119-123", "residual blocks' PC D-terms"))
    return {name: Term(name, scale, growth_exponent(scale, L), eq, desc) for name, scale, eq, desc in spec}


# --------------------------------------------------------------------------- desiderata
@dataclass(frozen=True)
class Desideratum:
    number: int
    algorithm: str
    reading: str
    relations: tuple  # SymPy relations (Eq / Le / Lt / Ge / Gt), possibly with Max
    variables: tuple
    domain: tuple  # relations the variables always satisfy (nu > 0)
    equations: str
    statement: str


def _eq0(expr: sp.Expr) -> sp.Eq:
    return sp.Eq(expr, 0, evaluate=False)


@cache
def desiderata(algorithm: str, reading: str = "paper") -> dict[int, Desideratum]:
    """Desiderata 1-5 (§2.3, §4) as exponent constraints for ``algorithm`` under ``reading``.

    Each is a tuple of SymPy relations in growth exponents (Eq(e, 0): Theta(1); Eq(Max(e_1, ..), 0): the
    largest of several contributions is Theta(1)).  D1: eqs. 30, 35-36.  D2: eqs. 64-67 (q) and 69-73 (PC's r).
    D3: eqs. 82-83 (first layer), 89-90 (layers l >= 2) and 91-94 (PC's D-term); the literal D3 at l >= 2 assumes
    a hidden layer exists (L >= 3).  D4: eqs. 101-103.  D5: eqs. 117-124, with PC's rescaling s = 1 + L/N
    (eq. 107) and N = L^nu.
    """
    _check(algorithm, ALGORITHMS, "algorithm")
    _check(reading, READINGS, "reading")
    pc = algorithm == "pc"
    W = {k: t.exponent for k, t in width_terms(algorithm).items()}
    D = {k: t.exponent for k, t in depth_terms(algorithm).items()}
    wvars = WIDTH_VARS
    dvars = (alpha, nu) if pc else (alpha,)
    ddom = (sp.StrictGreaterThan(nu, 0, evaluate=False),) if pc else ()
    hidden_q = [W["q_hidden"]] + ([W["r_hidden"]] if pc else [])
    hidden_e = [W["e_hidden"]] + ([W["D_hidden"]] if pc else [])
    residual = [D["residual_bp"]] + ([D["residual_pc"]] if pc else [])
    d2: tuple[sp.Eq, ...]
    d3: tuple[sp.Eq, ...]
    d5: tuple[sp.Eq, ...]
    if reading == "paper":
        d2 = (_eq0(W["q_first"]), _eq0(sp.Max(*hidden_q)))
        d3 = (_eq0(W["e_first"]), _eq0(sp.Max(*hidden_e)))
        d5 = (_eq0(sp.Max(*residual)),)
    else:
        d2 = (_eq0(sp.Max(W["q_first"], *hidden_q)),)
        d3 = (_eq0(W["e_first"]), _eq0(sp.Max(W["e_first"], *hidden_e)))
        d5 = (_eq0(sp.Max(D["first_layer"], *residual)),)
    return {
        1: Desideratum(1, algorithm, reading, (_eq0(W["h1_variance"]), _eq0(W["layer_variance_gain"])), wvars, (),
                       "27-36", "layer preactivations are Theta_N(1) at initialisation"),
        2: Desideratum(2, algorithm, reading, d2, wvars, (), "56-73" if pc else "56-67",
                       "network predictions evolve in Theta_N(1) time: df/dt = Theta_N(1)"),
        3: Desideratum(3, algorithm, reading, d3, wvars, (), "74-94" if pc else "74-90",
                       "features evolve in Theta_N(1) time: dh^(l)/dt = Theta_N(1)"),
        4: Desideratum(4, algorithm, reading, (_eq0(D["log_variance"]),), dvars, ddom, "99-103",
                       "residual preactivations are Theta_L(1) at initialisation"),
        5: Desideratum(5, algorithm, reading, d5, dvars, ddom, "111-124",
                       "residual features evolve in Theta_L(1) time"),
    }


def system(algorithm: str, reading: str, numbers: Sequence[int]) -> tuple[tuple, tuple, tuple]:
    """(relations, variables, domain) of the conjunction of the given desiderata (all width or all depth)."""
    ds = desiderata(algorithm, reading)
    chosen = [ds[k] for k in numbers]
    if len({x.variables for x in chosen}) != 1:
        raise ValueError("numbers: mix width (1-3) and depth (4-5) desiderata separately")
    rels = tuple(r for x in chosen for r in x.relations)
    return rels, chosen[0].variables, chosen[0].domain


# --------------------------------------------------------------------------- case analysis
@dataclass(frozen=True)
class Case:
    """One choice of maximiser for every max(.): linear equalities (== 0) and inequalities (< 0 / <= 0)."""

    label: tuple[str, ...]
    equalities: tuple[sp.Expr, ...]
    inequalities: tuple[tuple[sp.Expr, bool], ...]  # (expr, strict): expr < 0 if strict else expr <= 0


def _normalise(rel) -> tuple[str, sp.Expr]:
    lhs, rhs = rel.args
    if isinstance(rel, sp.Equality):
        return "eq", lhs - rhs
    if isinstance(rel, sp.LessThan):
        return "le", lhs - rhs
    if isinstance(rel, sp.StrictLessThan):
        return "lt", lhs - rhs
    if isinstance(rel, sp.GreaterThan):
        return "le", rhs - lhs
    if isinstance(rel, sp.StrictGreaterThan):
        return "lt", rhs - lhs
    raise TypeError(f"not a relation: {rel!r}")


def _innermost_max(items) -> sp.Max | None:
    atoms = set()
    for _, e in items:
        atoms |= e.atoms(sp.Max)
    inner = [m for m in atoms if not any(arg.has(sp.Max) for arg in m.args)]
    return min(inner, key=sp.default_sort_key) if inner else None


def split_cases(relations: Iterable, domain: Iterable = ()) -> list[Case]:
    """Enumerate which argument attains every Max (the first maximiser, so the cases are disjoint).

    Choosing argument k of Max(x_0, ..., x_m) adds x_j < x_k for j < k and x_j <= x_k for j > k and replaces
    the Max by x_k; innermost maxima are split first (s's Max(0, -2d) sits inside the desiderata's max).
    """
    start = [_normalise(r) for r in (*relations, *domain)]
    queue: list[tuple[tuple[str, ...], list]] = [((), start)]
    out: list[Case] = []
    while queue:
        label, items = queue.pop(0)
        m = _innermost_max(items)
        if m is None:
            eqs = tuple(sp.expand(e) for k, e in items if k == "eq")
            ineqs = tuple((sp.expand(e), k == "lt") for k, e in items if k != "eq")
            out.append(Case(label, eqs, ineqs))
            continue
        args = m.args
        for k, xk in enumerate(args):
            cond = [("lt", args[j] - xk) for j in range(k)] + [("le", args[j] - xk) for j in range(k + 1, len(args))]
            new = [(kind, e.xreplace({m: xk})) for kind, e in items] + cond
            queue.append((label + (f"max({', '.join(map(str, args))}) = {xk}",), new))
    return out


# --------------------------------------------------------------------------- exact linear algebra
Row = tuple[tuple[Fraction, ...], Fraction, bool]  # sum coeffs*x + const (< if strict else <=) 0


def _frac(x) -> Fraction:
    x = sp.nsimplify(x) if not isinstance(x, sp.Rational) else x
    if not isinstance(x, sp.Rational):
        raise ValueError(f"coefficient {x} is not rational")
    return Fraction(int(x.p), int(x.q))


def _row(expr: sp.Expr, variables: Sequence[sp.Symbol], strict: bool) -> Row:
    expr = sp.expand(expr)
    coeffs = tuple(_frac(expr.coeff(v)) for v in variables)
    const = expr.xreplace({v: 0 for v in variables})
    linear = sum(sp.Rational(q.numerator, q.denominator) * v for q, v in zip(coeffs, variables))
    if sp.expand(expr - linear - const) != 0:
        raise ValueError(f"constraint is not linear in {variables}: {expr}")
    return coeffs, _frac(const), strict


def _canon(row: Row) -> Row:
    coeffs, const, strict = row
    scale = max((abs(q) for q in coeffs), default=Fraction(0))
    if scale == 0:
        return coeffs, const, strict
    return tuple(q / scale for q in coeffs), const / scale, strict


def _dedupe(rows: list[Row]) -> list[Row]:
    """Keep the tightest row per direction (larger constant; strict wins ties)."""
    best: dict[tuple, Row] = {}
    for r in map(_canon, rows):
        key = r[0]
        old = best.get(key)
        if old is None or r[1] > old[1] or (r[1] == old[1] and r[2] and not old[2]):
            best[key] = r
    return list(best.values())


def fm_feasible(rows: Sequence[Row]) -> bool:
    """Exact Fourier--Motzkin feasibility of {sum coeffs x + const (<, <=) 0} over the rationals."""
    rows = _dedupe(list(rows))
    nvar = len(rows[0][0]) if rows else 0
    for j in range(nvar):
        pos = [r for r in rows if r[0][j] > 0]
        neg = [r for r in rows if r[0][j] < 0]
        new = [r for r in rows if r[0][j] == 0]
        for p, n in itertools.product(pos, neg):
            sp_, sn = p[0][j], -n[0][j]
            coeffs = tuple(x / sp_ + y / sn for x, y in zip(p[0], n[0]))
            new.append((coeffs, p[1] / sp_ + n[1] / sn, p[2] or n[2]))
        rows = _dedupe(new)
    return all((const < 0) if strict else (const <= 0) for _, const, strict in rows)


def _negate(row: Row) -> Row:
    coeffs, const, strict = row
    return tuple(-q for q in coeffs), -const, not strict


def irredundant(rows: Sequence[Row]) -> list[Row]:
    """Drop every row implied by the others (exactly: the others plus its negation are infeasible)."""
    kept = _dedupe(list(rows))
    i = 0
    while i < len(kept):
        others = kept[:i] + kept[i + 1:]
        if not fm_feasible(others + [_negate(kept[i])]):
            kept = others
        else:
            i += 1
    return kept


def _row_relation(row: Row, variables: Sequence[sp.Symbol]):
    """A readable relation: positive leading coefficient on the left, constant on the right."""
    coeffs, const, strict = row
    nz = [q for q in coeffs if q != 0]
    if nz:  # integer coefficients with gcd 1
        den = math.lcm(*(q.denominator for q in nz))
        g = math.gcd(*(int(q * den) for q in nz))
        coeffs, const = tuple(q * den / g for q in coeffs), const * den / g
    lhs = sum(sp.Rational(q.numerator, q.denominator) * v for q, v in zip(coeffs, variables))
    rhs = -sp.Rational(const.numerator, const.denominator)
    lead = next((q for q in coeffs if q != 0), Fraction(1))
    if lead < 0:
        return (sp.Gt if strict else sp.Ge)(-lhs, -rhs, evaluate=False)
    return (sp.Lt if strict else sp.Le)(lhs, rhs, evaluate=False)


@dataclass
class Piece:
    """One case of a system, solved: feasible or not, and if so its parametric description."""

    case: Case
    feasible: bool
    solution: dict = field(default_factory=dict)  # variable -> expression in the free variables
    free: tuple = ()
    inequalities: tuple = ()  # irredundant relations in the free variables
    interval: sp.Set | None = None  # reduce_inequalities(...).as_set() for a single constrained free variable

    def describe(self) -> dict:
        return {
            "case": list(self.case.label),
            "solution": {str(k): str(v) for k, v in self.solution.items()},
            "free": [str(v) for v in self.free],
            "inequalities": [str(r) for r in self.inequalities],
            **({"interval": f"{self.interval}"} if self.interval is not None else {}),
        }


def solve_case(case: Case, variables: Sequence[sp.Symbol]) -> Piece:
    """linsolve the equalities, substitute, decide and simplify the inequalities exactly."""
    variables = tuple(variables)
    if case.equalities:
        sols = sp.linsolve(list(case.equalities), variables)
        if sols == sp.EmptySet:
            return Piece(case, False)
        (tup,) = tuple(sols)
    else:
        tup = variables
    subs = dict(zip(variables, tup))
    free = tuple(v for v in variables if any(t.has(v) for t in tup))
    rows = [_row(e.xreplace(subs), free, strict) for e, strict in case.inequalities]
    if not fm_feasible(rows):
        return Piece(case, False)
    rows = [r for r in irredundant(rows) if any(q != 0 for q in r[0])]
    rels = tuple(_row_relation(r, free) for r in rows)
    solution = {v: sp.simplify(subs[v]) for v in variables if subs[v] != v}
    interval = None
    constrained = sorted({s for r in rels for s in r.free_symbols}, key=sp.default_sort_key)
    if len(constrained) == 1:
        x = constrained[0]
        interval = sp.reduce_inequalities(list(rels), x).as_set()
        if x.is_positive:  # reduce_inequalities answers within the symbol's own domain; state it
            interval = interval.intersect(sp.Interval.open(0, sp.oo))
    return Piece(case, True, solution, free, rels, interval)


def solve_system(relations: Iterable, variables: Sequence[sp.Symbol], domain: Iterable = ()) -> list[Piece]:
    """Every case of the system, solved (feasible and infeasible alike)."""
    return [solve_case(cs, variables) for cs in split_cases(relations, domain)]


@cache
def solution(algorithm: str, reading: str, numbers: tuple[int, ...]) -> tuple[Piece, ...]:
    """The feasible pieces of the conjunction of desiderata ``numbers`` (cached)."""
    rels, variables, domain = system(algorithm, reading, numbers)
    return tuple(p for p in solve_system(rels, variables, domain) if p.feasible)


def eq15_family(algorithm: str = "pc") -> dict[sp.Symbol, sp.Expr]:
    """The one-parameter family of D1-D3 (paper reading), as variable -> expression in c."""
    (piece,) = solution(algorithm, "paper", WIDTH_DESIDERATA)
    if piece.free != (c,) or piece.inequalities:
        raise ArithmeticError(f"D1-D3 do not reduce to a one-parameter family in c: {piece.describe()}")
    return {v: piece.solution.get(v, v) for v in (a1, b1, a, b, c, d)}


# --------------------------------------------------------------------------- LP cross-check
def lp_case_feasible(case: Case, variables: Sequence[sp.Symbol], fixed: Mapping | None = None,
                     tol: float = 1e-9) -> bool:
    """Decide a case with scipy.optimize.linprog (HiGHS): strict rows get a slack t in [0, 1], max t > tol."""
    import numpy as np
    from scipy.optimize import linprog

    variables = tuple(variables)
    n = len(variables)
    a_eq, b_eq, a_ub, b_ub = [], [], [], []
    for e in case.equalities:
        coeffs, const, _ = _row(e, variables, False)
        a_eq.append([float(q) for q in coeffs] + [0.0])
        b_eq.append(-float(const))
    strict_any = False
    for e, strict in case.inequalities:
        coeffs, const, _ = _row(e, variables, strict)
        a_ub.append([float(q) for q in coeffs] + [1.0 if strict else 0.0])
        b_ub.append(-float(const))
        strict_any |= strict
    fixed = fixed or {}
    bounds = [(float(fixed[v]), float(fixed[v])) if v in fixed else (None, None) for v in variables] + [(0.0, 1.0)]
    cost = np.zeros(n + 1)
    cost[-1] = -1.0
    res = linprog(cost, A_ub=np.array(a_ub) if a_ub else None, b_ub=np.array(b_ub) if b_ub else None,
                  A_eq=np.array(a_eq) if a_eq else None, b_eq=np.array(b_eq) if b_eq else None,
                  bounds=bounds, method="highs")
    if res.status != 0:
        return False
    return (not strict_any) or (-res.fun > tol)


@cache
def desideratum_cases(algorithm: str, reading: str, number: int) -> tuple[Case, ...]:
    dz = desiderata(algorithm, reading)[number]
    return tuple(split_cases(dz.relations, dz.domain))


def lp_cross_check_cases(algorithm: str, reading: str, numbers: tuple[int, ...]) -> list[dict]:
    """For every case of the system: the exact verdict (linsolve + Fourier--Motzkin) and the LP's."""
    rels, variables, domain = system(algorithm, reading, numbers)
    out = []
    for piece in solve_system(rels, variables, domain):
        lp = lp_case_feasible(piece.case, variables)
        out.append({"case": list(piece.case.label), "exact": piece.feasible, "lp": lp, "agree": lp == piece.feasible})
    return out


# --------------------------------------------------------------------------- classification
def _values(params: Mapping, alpha_value=None, nu_value=None) -> dict:
    vals = {}
    for key, sym in KEYS.items():
        v = params.get(key, params.get(sym))
        if v is None:
            raise ValueError(f"{key}: missing exponent")
        vals[sym] = sp.Rational(v) if not isinstance(v, Fraction) else sp.Rational(v.numerator, v.denominator)
    if alpha_value is not None:
        vals[alpha] = sp.Rational(alpha_value) if not isinstance(alpha_value, Fraction) else \
            sp.Rational(alpha_value.numerator, alpha_value.denominator)
    vals[nu] = sp.oo if nu_value is None else (
        sp.Rational(nu_value) if not isinstance(nu_value, Fraction) else sp.Rational(nu_value.numerator,
                                                                                     nu_value.denominator))
    return vals


def _holds(dz: Desideratum, vals: dict) -> bool:
    out = True
    for rel in dz.relations:
        v = rel.xreplace(vals)
        if v not in (sp.true, sp.false):
            raise ArithmeticError(f"desideratum {dz.number}: could not decide {rel} at {vals}: {v}")
        out &= bool(v)
    return out


def classify(params: Mapping, alpha_value=None, nu_value=None, reading: str = "paper") -> dict:
    """Which of Desiderata 1-5 the parameterisation meets, for BP and for PC, decided in exact arithmetic.

    ``params``: a1, b1, a, b, c, d (keys or the symbols) as rationals; ``alpha_value`` adds Desiderata 4-5;
    ``nu_value`` (N = L^nu, > 0) only matters for PC's D5; None means the width limit is taken first (nu -> oo,
    the N >> L regime of Corollary 4.2), where PC's rescaling s -> 1.
    """
    vals = _values(params, alpha_value, nu_value)
    numbers = WIDTH_DESIDERATA + (DEPTH_DESIDERATA if alpha_value is not None else ())
    return {alg: {k: _holds(desiderata(alg, reading)[k], vals) for k in numbers} for alg in ALGORITHMS}


def term_exponents(params: Mapping, alpha_value=None, nu_value=None) -> dict:
    """Every power-counting exponent at a parameterisation (width terms in N, depth terms in L)."""
    vals = _values(params, alpha_value, nu_value)
    out = {}
    for alg in ALGORITHMS:
        out[alg] = {k: str(t.exponent.xreplace(vals)) for k, t in width_terms(alg).items()}
        if alpha_value is not None:
            out[alg].update({k: str(t.exponent.xreplace(vals)) for k, t in depth_terms(alg).items()})
    return out


def lp_classify(params: Mapping, alpha_value=None, nu_value=None, reading: str = "paper") -> dict:
    """``classify`` decided instead by linprog: a desideratum holds iff one of its cases is LP-feasible at the point."""
    vals = _values(params, alpha_value, nu_value)
    numbers = WIDTH_DESIDERATA + (DEPTH_DESIDERATA if alpha_value is not None else ())
    out: dict[str, dict[int, bool]] = {}
    for alg in ALGORITHMS:
        out[alg] = {}
        for k in numbers:
            dz = desiderata(alg, reading)[k]
            cases: Sequence[Case]
            if k in DEPTH_DESIDERATA and alg == "pc" and nu_value is None:
                # nu -> oo: take the limit symbolically first (s -> 1, the PC depth term drops), then LP in alpha
                rels = tuple(r.xreplace({nu: sp.oo}) for r in dz.relations)
                cases, variables = split_cases(rels), (alpha,)
            else:
                cases, variables = desideratum_cases(alg, reading, k), dz.variables
            fixed = {v: vals[v] for v in variables}
            out[alg][k] = any(lp_case_feasible(cs, variables, fixed) for cs in cases)
    return out


# --------------------------------------------------------------------------- Table 2
R = sp.Rational
#: Table 2 of the paper (A.3): (a_1, b_1, a_l, b_l, c, d) for l in {2, ..., L}
TABLE2 = {
    "SP": {"a1": R(0), "b1": R(0), "a": R(0), "b": R(1), "c": R(0), "d": R(0)},
    "NTK": {"a1": R(0), "b1": R(0), "a": HALF, "b": R(0), "c": R(0), "d": R(0)},
    "mean-field": {"a1": R(0), "b1": R(0), "a": HALF, "b": R(0), "c": R(0), "d": HALF},
    "muP": {"a1": -HALF, "b1": R(1), "a": R(0), "b": R(1), "c": R(1), "d": HALF},
}
#: what §2.3 states about each (SP: "stable initialisation as well as evolving features", predictions explode;
#: NTK: "fully stable", feature updates vanish; mean-field and muP satisfy all three)
TABLE2_PAPER_CLAIMS = {
    "SP": {1: True, 2: False, 3: True},
    "NTK": {1: True, 2: True, 3: False},
    "mean-field": {1: True, 2: True, 3: True},
    "muP": {1: True, 2: True, 3: True},
}


# --------------------------------------------------------------------------- sharp PC exponents (discrepancy 3)
def sharp_pc_exponents(state: str = "init") -> dict[str, sp.Expr]:
    """N-exponents of PC's r and D terms without the paper's coherent-sum counting (d >= 0, under D1).

    For a linear MLP, S = gamma^2 (s - 1) = sum_j ||u_j||^2 with u_j = dh^(L)/dh^(j), and the Frobenius products
    collapse: <dh^(L)/dW^(l), dS/dW^(l)> = 2 N^-2a_l ||u_l||^2 (h_{l-1} . M u_j) = Theta(N^-2a_l h^(L)) (for a
    linear net u_j . h^(j) = h^(L)), and N^-a_l dS/dW^(l) h^(l-1) has entries Theta(N^{-2a_l - 1/2} h^(L)).
    With eta = N^{2d - c}, f = h^(L)/gamma and h^(L) = Theta(1) at initialisation ("init") or Theta(gamma) once the
    readout has aligned ("aligned"): r = eta gamma^-3 N^-2a_l h^(L), D = eta gamma^-2 N^{-2a_l - 1/2} h^(L).
    """
    _check(state, ("init", "aligned"), "state")
    gamma = N**d
    hL = sp.Integer(1) if state == "init" else gamma
    eta = gamma**2 * N**(-c)
    return {"r_hidden": growth_exponent(eta * gamma**-3 * N**(-2 * a) * hL),
            "D_hidden": growth_exponent(eta * gamma**-2 * N**(-2 * a - HALF) * hL)}


# --------------------------------------------------------------------------- exported results
def residual_variance_factor() -> sp.Expr:
    """Eq. 102: the covariance recursion of eq. 101, K_l = (1 + L^-2alpha) K_{l-1}, unrolled over l = 2..L-1."""
    ell = sp.Symbol("ell", integer=True, positive=True)
    factor = sp.product(1 + L**(-2 * alpha), (ell, 2, L - 1))
    if sp.simplify(factor - (1 + L**(-2 * alpha))**(L - 2)) != 0:
        raise ArithmeticError("eq. 101 does not unroll to eq. 102")
    return (1 + L**(-2 * alpha))**(L - 2)


def log_residual_variance_factor() -> sp.Expr:
    """ln of eq. 102, (L - 2) ln(1 + L^-2alpha): the factor exceeds float64 at depth for alpha < 1/2 (at L = 10^5
    once alpha < 0.22), its logarithm does not.  (Printed with logaddexp(0, -2 alpha ln L): L^-2alpha itself
    overflows for alpha << 0, e.g. alpha = -512 at L = 2, where 0 * inf would be NaN although the factor is 1.)"""
    return (L - 2) * sp.log(1 + L**(-2 * alpha))


def residual_variance_factor_stable() -> sp.Expr:
    """The emitted eq. 102, exp((L - 2) ln(1 + L^-2alpha)): the power (1 + L^-2alpha)^(L-2) rounds 1 + L^-2alpha
    first, an error of 1e-16 that the power multiplies by L (relative error 8e-8 at L = 10^9, alpha = 1/2, against
    1e-17 here).  Checked equal to eq. 102."""
    stable = sp.exp(log_residual_variance_factor())
    if sp.simplify(sp.powsimp(stable - residual_variance_factor(), force=True)) != 0:
        raise ArithmeticError("log-space eq. 102 differs from the unrolled recursion")
    return stable


def derive_abcd() -> Derivation:
    dv = Derivation("abcd", "abcd parameterisations of linear BP and PC networks (Innocenti et al. 2025)", PAPER)
    dom = dv.declare(PARAMETERS)

    def add(name, expr, eq, desc, lhs, note=""):
        expr = sp.sympify(expr)
        order = [a1, a, c, d, alpha, N, L, gamma0]
        inputs = tuple(dom[s] for s in order if s in expr.free_symbols)
        dv.add(Result(name, expr, inputs, Source(PAPER, eq, note), desc, sp.Symbol(lhs)))

    fam = eq15_family("pc")
    if eq15_family("bp") != fam:
        raise ArithmeticError("BP and PC families differ (Theorem 1 fails)")
    add("family_a1", fam[a1], "15", "a_1 on the D1-D3 family, free parameter c (2 a_1 + c = 0)", r"a_{1}^{\star}")
    add("family_b1", fam[b1], "15", "b_1 on the family (2 a_1 + b_1 = 0)", r"b_{1}^{\star}")
    add("family_a_l", fam[a], "15", "a_l, l >= 2, on the family (2 a_l + c = 1)", r"a_{l}^{\star}")
    add("family_b_l", fam[b], "15", "b_l, l >= 2, on the family (2 a_l + b_l = 1)", r"b_{l}^{\star}")
    add("family_d", fam[d], "83", "the output exponent d forced by D3 (with D2)", r"d^{\star}")

    # exponents of the width power counting on the d >= 0 branch (s -> 1), PC terms included
    branch = {sp.Max(0, -2 * d): sp.Integer(0)}
    pcw = width_terms("pc")
    for key, lhs in (("q_first", r"e_{q1}"), ("q_hidden", r"e_{q}"), ("r_hidden", r"e_{r}"), ("e_first", r"e_{h1}"),
                     ("e_hidden", r"e_{h}"), ("D_hidden", r"e_{D}")):
        t = pcw[key]
        add(f"exponent_{key}", sp.expand(t.exponent.xreplace(branch)), t.equations,
            f"N-exponent of the {t.description} (PC, d >= 0; BP is the same without the PC terms)", lhs)

    # PC-specific rates on the family, from the paper's scale factors with the constants kept (eqs. 72, 93)
    on_family = {a: fam[a], d: fam[d]}
    eta_over_s2 = gamma0**2 * N**(2 * d - c) / (1 + N**(-2 * d))**2  # eq. 71: gamma^2 N^-c / s^2
    r_scale = eta_over_s2 * L**2 * N**2 * N**(-d - a - HALF) * N**(-2 * d - a - HALF)  # eqs. 69-70
    D_scale = N**(-a) * N**(2 * d - c) / (1 + N**(-2 * d))**2 * N * N**(-2 * d - a - HALF)
    r_fam = sp.simplify(sp.powsimp(r_scale.xreplace(on_family), force=True))
    D_fam = sp.simplify(sp.powsimp(D_scale.xreplace(on_family), force=True))
    if r_fam.has(c) or D_fam.has(c):
        raise ArithmeticError("PC rates depend on the free parameter c")
    add("pc_r_scale", r_fam, "72", "PC term r of df/dt on the family: gamma_0^2 L^2 N^-1/2 / (1 + 1/N)^2", r"r_{N}",
        note="paper's counting; an upper bound")
    add("pc_D_scale", D_fam, "93", "PC D-term of dh/dt on the family: N^-1/2 / (1 + 1/N)^2", r"D_{N}",
        note="paper's counting; an upper bound")
    sharp = sharp_pc_exponents("init")
    add("sharp_r_exponent_init", sharp["r_hidden"], "72", "N-exponent of r at initialisation without coherent sums",
        r"e_{r}^{0}", note="corrected")
    add("sharp_D_exponent_init", sharp["D_hidden"], "93", "N-exponent of the D-term at initialisation, sharp",
        r"e_{D}^{0}", note="corrected")

    # depth
    add("residual_variance_factor", residual_variance_factor_stable(), "102",
        "residual-stream variance over the data kernel, (1 + L^-2alpha)^(L-2) (exceeds float64 at depth for "
        "alpha < 1/2: log_residual_variance_factor gives its logarithm)", r"K_{L}")
    add("log_residual_variance_factor", log_residual_variance_factor(), "102",
        "ln of the residual-stream variance factor, (L - 2) ln(1 + L^-2alpha), in log space: returns the logarithm "
        "because the factor overflows float64 at depth", r"\ln K_{L}")
    d4 = solution("bp", "paper", (4,))
    d5 = solution("bp", "paper", (5,))
    (p4,), (p5,) = d4, d5
    assert p4.interval is not None  # one constrained variable, alpha
    add("alpha_min_D4", p4.interval.inf, "103", "smallest alpha meeting Desideratum 4 (alpha >= 1/2)", r"\alpha_{4}")
    add("alpha_D5", p5.solution[alpha], "124", "the alpha meeting Desideratum 5 (paper reading)", r"\alpha_{5}")
    s_depth = 1 + L / N  # eq. 107
    add("bp_depth_feature_scale", L**(1 - 2 * alpha), "123", "residual blocks' summed BP feature update, L^(1-2alpha)",
        r"F_{B}")
    pc_depth = L * (N**HALF * L**(-alpha) / s_depth**2) * (L**(1 - alpha) * N**(-5 * HALF))
    add("pc_depth_feature_scale", sp.simplify(pc_depth), "122-123",
        "residual blocks' summed PC D-terms, L^(2-2alpha) N^-2 / (1 + L/N)^2", r"F_{P}", note="s from eq. 107")
    add("pc_depth_term_alpha_half", sp.simplify(pc_depth.xreplace({alpha: p5.solution[alpha]})), "124",
        "the PC depth term at alpha = 1/2: (L/N^2) / (1 + L/N)^2 = Theta(L/N^2) for N >> L", r"F_{P}^{\star}",
        note="s from eq. 107")
    what = {
        "q_first": r"the first layer's NTK term of $df/dt$",
        "q_hidden": r"the NTK term of $df/dt$ of a layer $l \geq 2$",
        "r_hidden": r"the PC energy-gradient term $r$ of $df/dt$",
        "e_first": r"$dh^{(1)}/dt$, the first layer's own update",
        "e_hidden": r"the backpropagation term of $dh^{(l)}/dt$, $l \geq 2$",
        "D_hidden": r"the PC $D$-term of $dh^{(l)}/dt$, $l \geq 2$",
    }
    exponents = {f"exponent_{key}": rf"The width power counting gives the $N$-exponent of {text} (predictive "
                                    rf"coding, $d \geq 0$; backpropagation is the same without the PC terms)."
                 for key, text in what.items()}
    dv.state({**STATEMENTS, **exponents})
    return dv


def _check(value: str, allowed: Iterable[str], name: str) -> None:
    if value not in tuple(allowed):
        raise ValueError(f"{name}: unknown value {value!r}; allowed: {', '.join(allowed)}")


STATEMENTS = {
    "family_a1": r"On the family of parameterisations meeting Desiderata 1--3, with $c$ free, the first-layer "
                 r"preactivation exponent is",
    "family_b1": r"On the same family the first-layer weight exponent is",
    "family_a_l": r"For the layers $l \geq 2$ the preactivation exponent on the family is",
    "family_b_l": r"For the layers $l \geq 2$ the weight exponent on the family is",
    "family_d": r"Desideratum 3, with Desideratum 2, forces the output exponent.",
    "pc_r_scale": r"With the paper's counting (an upper bound), the predictive-coding term $r$ of $df/dt$ on the "
                  r"family scales as",
    "pc_D_scale": r"With the paper's counting, the predictive-coding $D$-term of $dh/dt$ on the family scales as",
    "sharp_r_exponent_init": r"Without coherent sums at initialisation, the sharp $N$-exponent of $r$ is",
    "sharp_D_exponent_init": r"Without coherent sums at initialisation, the sharp $N$-exponent of the $D$-term is",
    "residual_variance_factor": r"Unrolling the covariance recursion of eq.~(101) over the hidden layers gives the "
                                r"residual-stream variance relative to the data kernel.",
    "log_residual_variance_factor": r"Its logarithm, finite in floating point at any depth, is",
    "alpha_min_D4": r"Desideratum 4 holds for every $\alpha$ at or above",
    "alpha_D5": r"Desideratum 5 (in the paper's reading) holds at",
    "bp_depth_feature_scale": r"The residual blocks' summed backpropagation feature update scales with depth as",
    "pc_depth_feature_scale": r"The residual blocks' summed predictive-coding $D$-terms, with $s$ from eq.~(107), "
                              r"scale as",
    "pc_depth_term_alpha_half": r"At $\alpha = 1/2$ the predictive-coding depth term is $\Theta(L/N^{2})$ for "
                                r"$N \gg L$.",
}
