"""The O(1/width) recursion of the finite-width kernel, derived in SymPy and lowered to NumPy einsum terms.

Rendered by `derive/codegen.py` (`render_fluctuation_module`, template ``fluctuation_module.py.j2``) into
``generated/fluctuation_step.py``, whose per-layer step functions `numeric/engine/fluctuation_recursion.py` runs on
its batches of 1-4-input subproblems.  Theory: docs/design/fluctuations-engine.md, sections 2-4 (the P-input form of
PDLT App. B, eqs. B.23-B.26, with the same-neuron cross-layer terms that B.23's closure drops).

Each piece is derived, not typed in:

* `heat_coefficient` -- d E_K[f(z)] / dK_cd = c E[d_c d_d f] (ordered index pairs, K symmetric), from the moment
  generating function E_K[exp(t.z)] = exp(t.K.t / 2), a family whose span is dense, so the identity holds for every
  f it holds for; c = 1/2.  It is the factor of the susceptibility chi = g + w G' and of the same-neuron source.
* `mean_shift_coefficients` -- E over a random symmetric perturbation delta of E_(K+delta)[f] to second order:
  G + a sum_cd E[delta_cd] d_c d_d G + b sum_cdef E[delta_cd delta_ef] d_c d_d d_e d_f G, from the same generating
  function expanded in delta; (a, b) = (1/2, 1/8): the mean-shift source m = a d2G:M + b d4G:C.
* `wick_terms` -- width Cov[z_c z_d, z_e z_f] of Gaussian neurons, from the fourth derivative of the generating
  function (Isserlis) minus the product of the second moments: the pairings (c e)(d f) + (c f)(d e), each emitted as
  an einsum over the batch.
* `hermite_raising` -- in whitened coordinates, E[d f h_n] = r(n) E[f h_(n+1)] for the normalised probabilists'
  Hermite polynomials h_n = He_n / sqrt(n!), by integration by parts (x h_n - h_n' = r(n) h_(n+1)); r(n) =
  sqrt(n + 1), checked polynomial by polynomial up to ``HERMITE_CHECK_DEGREE``.  Hence E[d^beta f h_alpha] =
  sqrt((alpha + beta)! / alpha!) E[f h_(alpha + beta)] per coordinate.
* `covariance_terms` -- Cov(e', e') for the influence e' = chi[e] + w T, expanded bilinearly: chi C chi^T +
  w chi X + w (chi X)^T + w^2 Cov(T, T), X = Cov(e, T).
* `rotation_coefficient` / `rotation_step` -- the rotation formula h_k(r x + s y) = sum_m c(k, m) h_m(x) h_(k-m)(y)
  (r^2 + s^2 = 1) of the pair projections' Mehler sums (`numeric/engine/fluctuation_mehler.py`): c(k, m) =
  sqrt(binomial(k, m)) r^m s^(k-m), checked polynomial by polynomial (modulo r^2 + s^2 - 1) up to
  ``ROTATION_CHECK_DEGREE``, and the step of the sums' weights w_j(m) = c(m + j, m) along j,
  w_(j+1)(m) / w_j(m) = s sqrt((m + j + 1) / (j + 1)).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import sympy as sp
from sympy.printing.numpy import NumPyPrinter

#: the Hermite raising factor is checked on every degree up to this one
HERMITE_CHECK_DEGREE = 24
#: the rotation formula is checked on every degree up to this one
ROTATION_CHECK_DEGREE = 8


@dataclass(frozen=True)
class EinsumTerm:
    """coefficient x einsum(subscripts, *operands): one term of a generated update."""

    coefficient: str
    subscripts: str
    operands: tuple[str, ...]


def _mgf(p: int):
    """(t, K, exp(t.K.t / 2)) for a p-dimensional centred Gaussian with a symbolic symmetric covariance K."""
    t = sp.symbols(f"t0:{p}", real=True)
    K = sp.Matrix(p, p, lambda i, j: sp.Symbol(f"K{min(i, j)}{max(i, j)}", real=True))
    tv = sp.Matrix(t)
    return t, K, sp.exp((tv.T * K * tv)[0, 0] / 2)


@cache
def heat_coefficient() -> sp.Rational:
    """c with d E_K[f] / dK_cd = c E[d_c d_d f] summed over ordered (c, d) (K symmetric: dK_cd moves K_dc too).

    On f = exp(t.z): E[d_c d_d f] = t_c t_d E[f]; the derivative of exp(t.K.t / 2) along the symmetric direction
    E_cd + E_dc (c != d) is t_c t_d E[f], and along E_cc it is t_c^2 / 2 E[f].  Written as c sum over ordered pairs
    (c, d) and (d, c) of E[d_c d_d f] delta_cd, both give c = 1/2."""
    t, K, G = _mgf(2)
    off = sp.simplify(sp.diff(G, K[0, 1]) / (2 * t[0] * t[1] * G))  # K01 = K10: two ordered pairs
    on = sp.simplify(sp.diff(G, K[0, 0]) / (t[0] ** 2 * G))
    if off != on:
        raise AssertionError(f"heat coefficient: off-diagonal {off} != diagonal {on}")
    return sp.Rational(on)


@cache
def mean_shift_coefficients() -> tuple[sp.Rational, sp.Rational]:
    """(a, b) of E_delta[E_(K+delta) f] = G + a <delta> : d2G + b <delta delta> : d4G + O(delta^3), sums over
    ordered index pairs, from exp(t.(K + delta).t / 2) expanded to second order in a symmetric delta."""
    t, K, G = _mgf(2)
    eps = sp.Symbol("epsilon")
    D = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"d{min(i, j)}{max(i, j)}", real=True))
    tv = sp.Matrix(t)
    shifted = sp.exp((tv.T * (K + eps * D) * tv)[0, 0] / 2)
    series = sp.expand(sp.series(shifted, eps, 0, 3).removeO())
    quad = sp.expand((tv.T * D * tv)[0, 0])  # sum_cd delta_cd t_c t_d: d2 on exp(t.z) brings t_c t_d
    first = sp.simplify(series.coeff(eps, 1) / (quad * G))
    second = sp.simplify(series.coeff(eps, 2) / (quad ** 2 * G))
    return sp.Rational(first), sp.Rational(second)


@cache
def wick_terms() -> tuple[EinsumTerm, ...]:
    """width Cov[z_c z_d, z_e z_f] as einsum terms over a batch of covariances K (B, p, p): the fourth moment
    (fourth derivative of the generating function at t = 0) minus K_cd K_ef, its monomials read as index pairings."""
    t, K, G = _mgf(4)
    fourth = sp.expand(sp.diff(G, t[0], t[1], t[2], t[3]).subs({ti: 0 for ti in t}))
    cov = sp.expand(fourth - K[0, 1] * K[2, 3])
    letters = "cdef"  # z_c z_d against z_e z_f
    terms = []
    for monomial, coefficient in sorted(cov.as_coefficients_dict().items(), key=lambda kv: str(kv[0])):
        factors = []
        for sym, power in monomial.as_powers_dict().items():
            i, j = int(sym.name[1]), int(sym.name[2])
            factors += [letters[i] + letters[j]] * int(power)
        factors.sort()
        if len(factors) != 2:
            raise AssertionError(f"Isserlis: unexpected monomial {monomial}")
        terms.append(EinsumTerm(str(coefficient), f"b{factors[0]},b{factors[1]}->bcdef", ("K", "K")))
    return tuple(terms)


@cache
def hermite_raising() -> sp.Expr:
    """r(n) with x h_n - h_n' = r(n) h_(n+1), h_n = He_n / sqrt(n!) (so E[f' h_n] = r(n) E[f h_(n+1)] for z ~
    N(0, 1), by parts: the adjoint of d/dx in L2(N(0, 1)) is x - d/dx); r(n) = sqrt(n + 1), checked on every
    degree up to HERMITE_CHECK_DEGREE."""
    x = sp.Symbol("x")
    n = sp.Symbol("n", integer=True, nonnegative=True)
    r = sp.sqrt(n + 1)

    def h(k: int) -> sp.Expr:
        return sp.hermite_prob(k, x) / sp.sqrt(sp.factorial(k))

    for k in range(HERMITE_CHECK_DEGREE + 1):
        lhs = sp.expand(x * h(k) - sp.diff(h(k), x))
        if sp.simplify(lhs - r.subs(n, k) * h(k + 1)) != 0:
            raise AssertionError(f"Hermite raising factor fails at degree {k}")
    return r


@cache
def rotation_coefficient() -> tuple[sp.Expr, tuple[sp.Symbol, ...]]:
    """(c, (k, m, r, s)): h_k(r x + s y) = sum_(m=0..k) c(k, m) h_m(x) h_(k-m)(y) for r^2 + s^2 = 1, h_n = He_n /
    sqrt(n!).  From the generating function exp(t z - t^2 / 2) = sum_n He_n(z) t^n / n!: at z = r x + s y it is the
    product of the x-series at r t and the y-series at s t (the t^2 terms add up because r^2 + s^2 = 1), whose
    t^k coefficient gives c = sqrt(binomial(k, m)) r^m s^(k-m).  Checked for every k <= ROTATION_CHECK_DEGREE as
    polynomials in x, y whose coefficients vanish modulo r^2 + s^2 - 1."""
    x, y, r, s = sp.symbols("x y r s")
    k, m = sp.symbols("k m", integer=True, nonnegative=True)
    c = sp.sqrt(sp.binomial(k, m)) * r**m * s ** (k - m)

    def h(n: int, z: sp.Expr) -> sp.Expr:
        return sp.hermite_prob(n, z) / sp.sqrt(sp.factorial(n))

    for kk in range(ROTATION_CHECK_DEGREE + 1):
        diff = sp.expand(h(kk, r * x + s * y) - sum(c.subs({k: kk, m: mm}) * h(mm, x) * h(kk - mm, y)
                                                     for mm in range(kk + 1)))
        for coefficient in sp.Poly(diff, x, y).coeffs():
            if sp.reduced(sp.expand(coefficient), [r**2 + s**2 - 1], r, s)[1] != 0:
                raise AssertionError(f"rotation formula fails at degree {kk}")
    return c, (k, m, r, s)


@cache
def rotation_step() -> sp.Expr:
    """w_(j+1)(m) / w_j(m) for the Mehler weights w_j(m) = c(m + j, m) (`rotation_coefficient`), simplified: the
    weights are built along j from w_0(m) = r^m by this factor (no binomial or factorial is formed)."""
    c, (k, m, r, s) = rotation_coefficient()
    j = sp.Symbol("j", integer=True, nonnegative=True)
    ratio = sp.gammasimp(sp.expand_func(c.subs(k, m + j + 1) / c.subs(k, m + j)))
    ratio = sp.powsimp(sp.simplify(ratio), force=True)
    expected = s * sp.sqrt((m + j + 1) / (j + 1))
    for mm in range(6):
        for jj in range(6):
            if sp.simplify((ratio - expected).subs({m: mm, j: jj})) != 0:
                raise AssertionError("rotation step does not simplify to s sqrt((m + j + 1) / (j + 1))")
    return expected


@cache
def covariance_terms() -> tuple[tuple[str, str], ...]:
    """Cov(e', e') for e' = chi[e] + w T, as (coefficient in w, covariance) pairs, by bilinearity: the cross terms
    Cov(chi[e], T) = chi X and its transpose, X = Cov(e, T)."""
    w = sp.Symbol("w")
    parts = {"chi_e": sp.Integer(1), "T": w}  # e' = 1 chi[e] + w T
    names = {("chi_e", "chi_e"): "chiCchi", ("chi_e", "T"): "chiX", ("T", "chi_e"): "chiX_T", ("T", "T"): "covTT"}
    out = []
    for a, b in itertools.product(parts, repeat=2):
        out.append((_product_text(sp.expand(parts[a] * parts[b])), names[a, b]))
    return tuple(out)


def _product_text(monomial: sp.Expr) -> str:
    """A monomial printed as repeated products (w * w, not w**2: a Python float's ** raises OverflowError where a
    product overflows to inf, which the engine's range check then reports)."""
    coefficient, factors = monomial.as_coeff_mul()
    terms = [] if coefficient == 1 else [str(coefficient)]
    for f in factors:
        base, power = f.as_base_exp()
        terms += [str(base)] * int(power)
    return " * ".join(terms) or "1"


def context() -> dict:
    """What the template renders: every derived coefficient and term, printed as Python."""
    heat = heat_coefficient()
    first, second = mean_shift_coefficients()
    r = hermite_raising()
    n = next(iter(r.free_symbols))
    return {
        "heat": repr(float(heat)), "heat_exact": str(heat),
        "mean_shift_first": repr(float(first)), "mean_shift_first_exact": str(first),
        "mean_shift_second": repr(float(second)), "mean_shift_second_exact": str(second),
        "wick_terms": wick_terms(),
        "raising": NumPyPrinter().doprint(r.subs(n, sp.Symbol("k"))),
        "raising_exact": str(r), "hermite_check_degree": HERMITE_CHECK_DEGREE,
        "covariance_terms": covariance_terms(),
        "rotation_exact": str(rotation_coefficient()[0]), "rotation_check_degree": ROTATION_CHECK_DEGREE,
        "rotation_step": NumPyPrinter().doprint(rotation_step()), "rotation_step_exact": str(rotation_step()),
    }
