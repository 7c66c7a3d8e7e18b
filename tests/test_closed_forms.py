"""derive/closed_forms.py: GELU dual kernels (Price-integrated) and exponential-type dual kernels.

Independent references: 30-digit two-dimensional quadrature over the Cholesky-mapped standard normals
u = sqrt(K_aa) z1, v = c z1 + s z2 (c = K_ab / sqrt(K_aa), s = sqrt(K_bb - c^2)) -- composite Gauss-Legendre graded
towards the kinks of GELU (u = 0 and v = 0), tensor Gauss-Hermite for the entire exponential-type activations --
one-dimensional mpmath.quad on the diagonal, finite differences for Price's theorem, and the neural-tangents
formulas for GELU.
"""
from __future__ import annotations

from functools import cache

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

from resprop.derive import closed_forms as C
from resprop.derive.activations import x
from resprop.derive.gaussian import K, K_aa, K_ab, K_bb

RHO = mp.mpf("0.999999")
PAIR = ("mean_phi_phi", "mean_dphi_dphi")
DIAG = ("mean_phi_sq", "mean_dphi_sq", "price_diag")


@pytest.fixture(autouse=True)
def _dps30():
    """Every mpmath computation of this module at 30 digits, without changing the global precision."""
    with mp.workdps(30):
        yield


def _point(Ka, Kb, rho) -> tuple[mp.mpf, mp.mpf, mp.mpf]:
    Ka, Kb = mp.mpf(Ka), mp.mpf(Kb)
    return Ka, Kb, mp.mpf(rho) * mp.sqrt(Ka * Kb)


def _mp_functions(dual: dict[str, sp.Expr]) -> dict:
    """The five expressions as mpmath functions of (K_aa, K_bb, K_ab) and of K."""
    out = {k: sp.lambdify((K_aa, K_bb, K_ab), dual[k], "mpmath") for k in PAIR}
    out.update({k: sp.lambdify((K,), dual[k], "mpmath") for k in DIAG})
    return out


@cache
def _gelu_mp() -> dict:
    return _mp_functions(C.gelu_dual())


def _rel(value, ref, scale=0) -> mp.mpf:
    return abs(value - ref) / max(abs(ref), abs(scale))


# --------------------------------------------------------------------------- 2-D quadrature
@cache
def _legendre(n: int) -> tuple[tuple[mp.mpf, mp.mpf], ...]:
    X, W = mp.gauss_quadrature(n, "legendre")
    return tuple((X[i], W[i]) for i in range(n))


@cache
def _hermite(n: int) -> tuple[tuple[mp.mpf, mp.mpf], ...]:
    """Nodes and weights for E[f(Z)], Z ~ N(0, 1)."""
    X, W = mp.gauss_quadrature(n, "hermite")
    return tuple((mp.sqrt(2) * X[i], W[i] / mp.sqrt(mp.pi)) for i in range(n))


def _graded_edges(b, w, L, wmax) -> list:
    """Panel edges on [-L, L]: width w at the breakpoint b, doubling outwards up to wmax."""
    edges = [b]
    for sign in (1, -1):
        d, e = w, b
        while True:
            e = e + sign * d
            if abs(e) >= L:
                edges.append(sign * L)
                break
            edges.append(e)
            d = min(2 * d, wmax)
    return sorted(edges)


def _normal_rule(edges, n) -> list:
    """Composite Gauss-Legendre nodes and weights (times the standard normal density) on the panels."""
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        h, m = (b - a) / 2, (b + a) / 2
        out += [(m + h * z, h * w * mp.npdf(m + h * z)) for z, w in _legendre(n)]
    return out


def bivariate_gelu_quad(fg, Ka, Kb, Kab, n=12, L=9, wmax=4):
    """(E[f_i(u) f_i(v)])_i for fg(h) = (f_0(h), f_1(h), ...) with kinks at 0: the z1 panels are graded towards
    z1 = 0 (the kink of f(u) and, smoothed over z2, of f(v)), the z2 panels towards the kink z2 = -c z1 / s of f(v)."""
    sa = mp.sqrt(Ka)
    c = Kab / sa
    s = mp.sqrt(Kb - c * c)
    one = mp.mpf(1)
    w_outer = min(one, 1 / sa, s / abs(c) if c else one)
    far = _normal_rule(_graded_edges(mp.mpf(0), one, L, wmax), n)
    total = None
    for z1, w1 in _normal_rule(_graded_edges(mp.mpf(0), w_outer, L, wmax), n):
        cut = -c * z1 / s
        rule = _normal_rule(_graded_edges(cut, min(one, 1 / s), L, wmax), n) if abs(cut) < L else far
        inner = None
        for z2, w2 in rule:
            g = fg(c * z1 + s * z2)
            inner = [w2 * gi for gi in g] if inner is None else [a + w2 * gi for a, gi in zip(inner, g)]
        term = [w1 * fi * gi for fi, gi in zip(fg(sa * z1), inner)]
        total = term if total is None else [a + b for a, b in zip(total, term)]
    return total


def bivariate_hermite_quad(fg, Ka, Kb, Kab, n=40):
    """The same expectations by a tensor Gauss-Hermite rule (for entire activations of exponential type)."""
    sa = mp.sqrt(Ka)
    c = Kab / sa
    s = mp.sqrt(Kb - c * c)
    rule = _hermite(n)
    total = None
    for z1, w1 in rule:
        inner = None
        for z2, w2 in rule:
            g = fg(c * z1 + s * z2)
            inner = [w2 * gi for gi in g] if inner is None else [a + w2 * gi for a, gi in zip(inner, g)]
        term = [w1 * fi * gi for fi, gi in zip(fg(sa * z1), inner)]
        total = term if total is None else [a + b for a, b in zip(total, term)]
    return total


def univariate_quad(f, var) -> mp.mpf:
    """E[f(u)], u ~ N(0, var), by mpmath.quad split at the kink u = 0."""
    sd = mp.sqrt(var)
    return mp.quad(lambda z: f(sd * z) * mp.npdf(z), [-mp.inf, 0, mp.inf])


def univariate_hermite(f, var, n=60) -> mp.mpf:
    """E[f(u)], u ~ N(0, var), by Gauss-Hermite (entire activations)."""
    sd = mp.sqrt(var)
    return mp.fsum(w * f(sd * z) for z, w in _hermite(n))


with mp.workdps(40):
    _SQRT2, _SQRT2PI = mp.sqrt(2), mp.sqrt(2 * mp.pi)


def _gelu_fg(h):
    """(phi, phi') of GELU with one erf."""
    P = (1 + mp.erf(h / _SQRT2)) / 2
    return h * P, P + h * mp.exp(-h * h / 2) / _SQRT2PI


def _gelu_mp_activation():
    phi = lambda h: h * mp.ncdf(h)  # noqa: E731
    dphi = lambda h: mp.ncdf(h) + h * mp.npdf(h)  # noqa: E731
    ddphi = lambda h: (2 - h * h) * mp.npdf(h)  # noqa: E731
    return phi, dphi, ddphi


def _pair_scales(F, Ka, Kb):
    """Cauchy-Schwarz bounds sqrt(<phi(u)^2><phi(v)^2>) and sqrt(<phi'(u)^2><phi'(v)^2>) of the pair values."""
    return (mp.sqrt(F["mean_phi_sq"](Ka) * F["mean_phi_sq"](Kb)),
            mp.sqrt(F["mean_dphi_sq"](Ka) * F["mean_dphi_sq"](Kb)))


# --------------------------------------------------------------------------- GELU: derivation and structure
def test_gelu_keys_and_derivation_cached():
    """The GELU derivation runs once per process (its speed is a benchmark's business, not a test's)."""
    C._gelu_dual.cache_clear()
    C._gelu_price_integrated_t.cache_clear()
    d = C.gelu_dual()
    assert C._gelu_dual.cache_info().misses == 1
    assert tuple(d) == C.KEYS
    for k in PAIR:
        assert d[k].free_symbols <= {K_aa, K_bb, K_ab}
    for k in DIAG:
        assert d[k].free_symbols == {K}
    again = C.gelu_dual()
    info = C._gelu_dual.cache_info()
    assert info.misses == 1 and info.hits >= 1 and again == d and again is not d  # cached, returned as a new dict


def _transcendental_arguments(expr: sp.Expr):
    """(kind, argument) of every non-integer power (kind "pow") and function call in expr."""
    for node in sp.preorder_traversal(expr):
        if isinstance(node, sp.Pow) and not node.exp.is_integer:
            yield "pow", node.base
        elif isinstance(node, sp.Function):
            yield node.func.__name__, node.args[0]


def test_gelu_pair_forms_are_separable():
    """Every sqrt / asin argument depends on K_aa alone, on K_bb alone, or (with K_ab = T sqrt(1+K_aa) sqrt(1+K_bb))
    on T alone; the per-element transcendental work is one asin and one sqrt, like erf."""
    T = sp.Symbol("T", real=True)
    d = C.gelu_dual()
    assert C.GELU_T == K_ab / (sp.sqrt(1 + K_aa) * sp.sqrt(1 + K_bb))
    for k in PAIR:
        elementwise = set()
        for kind, arg in _transcendental_arguments(d[k]):
            free = arg.free_symbols
            if K_ab in free:
                in_t = sp.simplify(arg.subs(K_ab, T * sp.sqrt(1 + K_aa) * sp.sqrt(1 + K_bb)))
                assert in_t.free_symbols == {T}, (k, kind, arg)
                elementwise.add((kind, in_t))
            else:
                assert free in ({K_aa}, {K_bb}, set()), (k, kind, arg)
        assert elementwise == {("asin", T), ("pow", 1 - T**2)}, (k, elementwise)
        # no square root of a product of the two diagonals
        for node in sp.preorder_traversal(d[k]):
            if isinstance(node, sp.Pow) and not node.exp.is_integer and K_ab not in node.base.free_symbols:
                assert not {K_aa, K_bb} <= node.base.free_symbols, node


def _random_points(n, seed=0, kmin=1e-3, kmax=50.0):
    rng = np.random.default_rng(seed)
    pts = []
    for _ in range(n):
        Ka, Kb = np.exp(rng.uniform(np.log(kmin), np.log(kmax), 2))
        pts.append(_point(str(float(Ka)), str(float(Kb)), str(float(rng.uniform(-0.999999, 0.999999)))))
    return pts


def test_gelu_separable_equals_raw_integrated_50_digits():
    """The separable forms equal the raw Price-integrated expressions (gelu_dual also checks this symbolically)."""
    raw = C.gelu_price_integrated()
    d = C.gelu_dual()
    with mp.workdps(50):
        pts = _random_points(12, seed=1) + [_point(50, "1e-3", RHO), _point("1e-3", "1e-3", -RHO), _point(50, 50, RHO)]
        for k in PAIR:
            f_raw = sp.lambdify((K_aa, K_bb, K_ab), raw[k], "mpmath")
            f_sep = sp.lambdify((K_aa, K_bb, K_ab), d[k], "mpmath")
            for p in pts:
                assert _rel(f_sep(*p), f_raw(*p), 1e-30) < mp.mpf("1e-40"), (k, p)


def test_gelu_equals_neural_tangents():
    """neural-tangents stax.Gelu (neural_tangents/_src/stax/elementwise.py), written here as formulas: with
    delta = sqrt((1+K_aa)(1+K_bb) - K_ab^2) and angle = atan2(K_ab, delta),
    nngp = K_ab/4 + ((K_ab^2 + K_aa K_bb delta^2) / ((1+K_aa)(1+K_bb) delta) + K_ab angle) / (2 pi),
    dot_sigma = 1/4 + angle/(2 pi) + K_ab (1/delta^2 + (1 - K_aa K_bb)/((1+K_aa)(1+K_bb)) + 1) / (2 pi delta),
    diagonal nngp = K (1/4 + (K / ((K+1) sqrt(1+2K)) + atan2(K, sqrt(1+2K)) / 2) / pi)."""
    d = C.gelu_dual()
    prod, prod1 = K_aa * K_bb, (1 + K_aa) * (1 + K_bb)
    delta = sp.sqrt(prod1 - K_ab**2)
    angle = sp.atan2(K_ab, delta)
    nngp = K_ab / 4 + ((K_ab**2 + prod * delta**2) / (prod1 * delta) + K_ab * angle) / (2 * sp.pi)
    dot = sp.Rational(1, 4) + angle / (2 * sp.pi) + K_ab * (1 / delta**2 + (1 - prod) / prod1 + 1) / (2 * sp.pi * delta)
    diag = K * (sp.Rational(1, 4) + (K / ((K + 1) * sp.sqrt(1 + 2 * K)) + sp.atan2(K, sp.sqrt(1 + 2 * K)) / 2) / sp.pi)
    with mp.workdps(50):
        f, g = sp.lambdify((K,), d["mean_phi_sq"], "mpmath"), sp.lambdify((K,), diag, "mpmath")
        for Kv in ("1e-3", "0.37", 1, 12, 50):
            assert _rel(f(mp.mpf(Kv)), g(mp.mpf(Kv))) < mp.mpf("1e-40")
        for ours, theirs in ((d["mean_phi_phi"], nngp), (d["mean_dphi_dphi"], dot)):
            f = sp.lambdify((K_aa, K_bb, K_ab), ours, "mpmath")
            g = sp.lambdify((K_aa, K_bb, K_ab), theirs, "mpmath")
            for p in _random_points(10, seed=2) + [_point(50, 50, -RHO), _point("1e-3", 50, RHO)]:
                assert _rel(f(*p), g(*p), 1e-30) < mp.mpf("1e-40")


# --------------------------------------------------------------------------- GELU vs quadrature
GELU_POINTS = [
    (1, 1, "0.5"),
    (50, "1e-3", RHO),
    ("1e-3", 50, -RHO),
    (50, 50, -RHO),
    ("1e-3", "1e-3", RHO),
]


@pytest.mark.parametrize("Ka, Kb, rho", GELU_POINTS)
def test_gelu_pair_vs_2d_quadrature(Ka, Kb, rho):
    F = _gelu_mp()
    p = _point(Ka, Kb, rho)
    q_pp, q_dd = bivariate_gelu_quad(_gelu_fg, *p)
    s_pp, s_dd = _pair_scales(F, p[0], p[1])
    assert _rel(F["mean_phi_phi"](*p), q_pp, s_pp) <= 1e-12
    assert _rel(F["mean_dphi_dphi"](*p), q_dd, s_dd) <= 1e-12


def test_gelu_independent_point():
    """At K_ab = 0, u and v are independent: <phi phi> = <phi(u)> <phi(v)> and <phi' phi'> = <phi'(u)> <phi'(v)>."""
    F = _gelu_mp()
    phi, dphi, _ = _gelu_mp_activation()
    for Ka, Kb in (("1e-3", 50), ("0.5", 2), (7, 7)):
        Ka, Kb = mp.mpf(Ka), mp.mpf(Kb)
        ref = univariate_quad(phi, Ka) * univariate_quad(phi, Kb)
        assert _rel(F["mean_phi_phi"](Ka, Kb, 0), ref) <= 1e-20
        ref = univariate_quad(dphi, Ka) * univariate_quad(dphi, Kb)
        assert _rel(F["mean_dphi_dphi"](Ka, Kb, 0), ref) <= 1e-20


@pytest.mark.slow
def test_gelu_pair_vs_2d_quadrature_sweep():
    F = _gelu_mp()
    for p in _random_points(30, seed=3) + [_point(3, "0.2", "-0.3"), _point("0.5", 2, 0)]:
        q_pp, q_dd = bivariate_gelu_quad(_gelu_fg, *p, n=14)
        s_pp, s_dd = _pair_scales(F, p[0], p[1])
        assert _rel(F["mean_phi_phi"](*p), q_pp, s_pp) <= 1e-12, p
        assert _rel(F["mean_dphi_dphi"](*p), q_dd, s_dd) <= 1e-12, p


@pytest.mark.parametrize("Kv", ["1e-3", "0.1", 1, 7, 50])
def test_gelu_diagonal_vs_1d_quadrature(Kv):
    """<phi^2>, <phi'^2> and <phi'^2 + phi phi''> (the Price-theorem derivative of <phi^2>) by mpmath.quad."""
    F = _gelu_mp()
    phi, dphi, ddphi = _gelu_mp_activation()
    Kv = mp.mpf(Kv)
    assert _rel(F["mean_phi_sq"](Kv), univariate_quad(lambda h: phi(h) ** 2, Kv)) <= 1e-20
    assert _rel(F["mean_dphi_sq"](Kv), univariate_quad(lambda h: dphi(h) ** 2, Kv)) <= 1e-20
    assert _rel(F["price_diag"](Kv), univariate_quad(lambda h: dphi(h) ** 2 + phi(h) * ddphi(h), Kv)) <= 1e-20


def _check_price_and_diagonal(F, points, diag_values):
    """Price's theorem d<phi phi>/dK_ab = <phi' phi'> by a central difference, d<phi^2>/dK = price_diag, and the
    diagonal keys equal the pair keys at K_aa = K_bb = K_ab = K."""
    h = mp.mpf("1e-9")
    for Ka, Kb, Kab in points:
        fd = (F["mean_phi_phi"](Ka, Kb, Kab + h) - F["mean_phi_phi"](Ka, Kb, Kab - h)) / (2 * h)
        assert _rel(fd, F["mean_dphi_dphi"](Ka, Kb, Kab), _pair_scales(F, Ka, Kb)[1]) <= 1e-12
    for Kv in diag_values:
        Kv = mp.mpf(Kv)
        fd = (F["mean_phi_sq"](Kv + h * Kv) - F["mean_phi_sq"](Kv - h * Kv)) / (2 * h * Kv)
        assert _rel(fd, F["price_diag"](Kv)) <= 1e-12
        assert _rel(F["mean_phi_phi"](Kv, Kv, Kv), F["mean_phi_sq"](Kv)) <= 1e-25
        assert _rel(F["mean_dphi_dphi"](Kv, Kv, Kv), F["mean_dphi_sq"](Kv)) <= 1e-25


def test_gelu_price_theorem_and_diagonal():
    pts = [_point(1, 1, "0.5"), _point(3, "0.2", "-0.3"), _point("0.5", 2, 0), _point(50, "1e-3", "0.99"),
           _point("1e-3", 50, "-0.99")]
    _check_price_and_diagonal(_gelu_mp(), pts, ["1e-3", "0.3", 1, 10, 50])


def test_gelu_float64_evaluation():
    """Evaluated in float64 with NumPy (as the generated kernels do), the separable forms keep 1e-12 relative accuracy
    up to |rho| = 0.999999 and from K = 1e-3 to 50."""
    d = C.gelu_dual()
    F = _gelu_mp()
    pts = _random_points(200, seed=4) + [_point(a, b, r) for a in ("1e-3", 1, 50) for b in ("1e-3", 1, 50)
                                         for r in (RHO, -RHO, 1, -1, 0)]
    arr = np.array([[float(v) for v in p] for p in pts])
    for k in PAIR:
        f = sp.lambdify((K_aa, K_bb, K_ab), d[k], "numpy")
        got = f(arr[:, 0], arr[:, 1], arr[:, 2])
        for g, p in zip(got, pts):
            p = tuple(mp.mpf(float(v)) for v in p)  # the float64 inputs, exactly
            scale = _pair_scales(F, p[0], p[1])[PAIR.index(k)]
            assert _rel(mp.mpf(g), F[k](*p), scale) <= 1e-12, (k, p)
    Ks = np.geomspace(1e-3, 50, 40)
    for k in DIAG:
        f = sp.lambdify((K,), d[k], "numpy")
        for g, Kv in zip(f(Ks), Ks):
            assert _rel(mp.mpf(g), F[k](mp.mpf(Kv))) <= 1e-12, (k, Kv)


# --------------------------------------------------------------------------- exponential type
def test_sin_cos_closed_forms():
    E_a, E_b = sp.exp(-K_aa / 2), sp.exp(-K_bb / 2)
    s = C.exponential_type_dual(sp.sin(x))
    c = C.exponential_type_dual(sp.cos(x))
    assert s["mean_phi_phi"] == E_a * E_b * sp.sinh(K_ab)
    assert s["mean_dphi_dphi"] == E_a * E_b * sp.cosh(K_ab)
    assert c["mean_phi_phi"] == E_a * E_b * sp.cosh(K_ab)
    assert c["mean_dphi_dphi"] == E_a * E_b * sp.sinh(K_ab)
    assert E_a in s["mean_phi_phi"].args and E_b in s["mean_phi_phi"].args  # separate factors
    assert sp.simplify(s["mean_phi_sq"] - (1 - sp.exp(-2 * K)) / 2) == 0
    assert sp.simplify(c["mean_dphi_sq"] - (1 - sp.exp(-2 * K)) / 2) == 0
    assert sp.simplify(s["price_diag"] - sp.exp(-2 * K)) == 0
    e = C.exponential_type_dual(sp.exp(x))
    assert e["mean_phi_phi"] == sp.exp(K_aa / 2) * sp.exp(K_bb / 2) * sp.exp(K_ab)
    # symbolic phase and frequency: sin(a x + b) gives sin^2 b cosh + cos^2 b sinh
    a, b = sp.symbols("a b", real=True)
    g = C.exponential_type_dual(sp.sin(a * x + b))["mean_phi_phi"]
    expected = sp.exp(-a**2 * K_aa / 2) * sp.exp(-a**2 * K_bb / 2) * (
        sp.sin(b) ** 2 * sp.cosh(a**2 * K_ab) + sp.cos(b) ** 2 * sp.sinh(a**2 * K_ab))
    assert sp.simplify(g - expected) == 0


EXPONENTIAL = {
    "sin": (sp.sin(x), 8),
    "cos": (sp.cos(x), 8),
    "sinh": (sp.sinh(x), 2),
    "cosh": (sp.cosh(x), 2),
    "exp": (sp.exp(x), 2),
    "sin(2x+3/10)": (sp.sin(2 * x + sp.Rational(3, 10)), 1),
    "2sin(x)+cos(3x)": (2 * sp.sin(x) + sp.cos(3 * x), 1),
    "sin(x)^2": (sp.sin(x) ** 2, 1),
    "exp(x)cos(x)": (sp.exp(x) * sp.cos(x), 1),
}


def _is_separable_exponential(expr: sp.Expr) -> bool:
    return all(len(arg.free_symbols & {K_aa, K_bb, K_ab}) <= 1 for _, arg in _transcendental_arguments(expr))


@pytest.mark.parametrize("name", list(EXPONENTIAL))
def test_exponential_type_vs_quadrature(name):
    expr, kmax = EXPONENTIAL[name]
    d = C.exponential_type_dual(expr)
    assert d is not None and tuple(d) == C.KEYS
    for k in PAIR:
        assert _is_separable_exponential(d[k]), (k, d[k])
        assert not d[k].has(sp.I)
    F = _mp_functions(d)
    phi = sp.lambdify(x, expr, "mpmath")
    dphi = sp.lambdify(x, sp.diff(expr, x), "mpmath")
    ddphi = sp.lambdify(x, sp.diff(expr, x, 2), "mpmath")
    kmax = mp.mpf(kmax)
    pts = [_point("0.5", "0.3", "0.4"), _point(kmax, "1e-3", RHO), _point(kmax, kmax, -RHO)]
    for p in pts:
        q_pp, q_dd = bivariate_hermite_quad(lambda h: (phi(h), dphi(h)), *p)
        s_pp, s_dd = _pair_scales(F, p[0], p[1])
        assert _rel(F["mean_phi_phi"](*p), q_pp, s_pp) <= 1e-12, p
        assert _rel(F["mean_dphi_dphi"](*p), q_dd, s_dd) <= 1e-12, p
    for Kv in (mp.mpf("1e-3"), mp.mpf("0.7"), kmax):
        assert _rel(F["mean_phi_sq"](Kv), univariate_hermite(lambda h: phi(h) ** 2, Kv)) <= 1e-20
        assert _rel(F["mean_dphi_sq"](Kv), univariate_hermite(lambda h: dphi(h) ** 2, Kv)) <= 1e-20
        price = univariate_hermite(lambda h: dphi(h) ** 2 + phi(h) * ddphi(h), Kv)
        assert _rel(F["price_diag"](Kv), price, F["mean_dphi_sq"](Kv)) <= 1e-20
    _check_price_and_diagonal(F, pts[:1] + [_point(kmax, "0.5", "0.99")], ["1e-3", "0.5", kmax])


@pytest.mark.parametrize("expr", [
    x, x**2 + 1, x * sp.exp(-x**2 / 2), sp.exp(-x**2 / 2), sp.tanh(x), sp.erf(x), C.GELU, sp.Max(x, 0),
    x * sp.sin(x), sp.sin(x) / x, 1 / (1 + sp.exp(-x)), 1 / sp.cosh(x), sp.exp(sp.I * x), sp.sin(x) + sp.I * sp.cos(x),
    sp.sqrt(1 + sp.exp(x)), sp.Integer(3), sp.Abs(sp.sin(x)),
])
def test_not_exponential_type(expr):
    assert C.exponential_type_dual(expr) is None


def test_exponential_type_accepts_plain_symbol_and_constants():
    y = sp.Symbol("x")
    assert C.exponential_type_dual(sp.sin(y)) == C.exponential_type_dual(sp.sin(x))
    d = C.exponential_type_dual(1 + sp.cos(x))  # a constant term is exp(0 x)
    assert sp.simplify(d["mean_phi_sq"] - (sp.Rational(3, 2) + 2 * sp.exp(-K / 2) + sp.exp(-2 * K) / 2)) == 0


def test_closed_form_dual_dispatch():
    g = C.gelu_dual()
    assert C.closed_form_dual("gelu") == g
    assert C.closed_form_dual("GELU") == g
    assert C.closed_form_dual(x / 2 + x * sp.erf(x / sp.sqrt(2)) / 2) == g
    assert C.closed_form_dual(x * sp.erfc(-x / sp.sqrt(2)) / 2) == g
    assert C.closed_form_dual(sp.sin(x)) == C.exponential_type_dual(sp.sin(x))
    for name in ("tanh", "silu", "relu", "erf", "linear", "nonsense"):
        assert C.closed_form_dual(name) is None
    assert C.closed_form_dual(sp.tanh(x)) is None
    assert C.closed_form_dual(x * sp.erf(x)) is None
