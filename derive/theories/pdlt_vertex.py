"""Roberts, Yaida & Hanin, PDLT Appendix B: the multi-input kernel and four-point vertex (B.11, B.24-B.25).

The residual MLP z' = b + W sigma(z) + gamma z (B.3 with xi = 1), W ~ N(0, C_W/n), b ~ N(0, C_b), on P inputs
delta = 1..P.  What is derived here rather than typed in:

* ``multi_input_update_from_forward(P)``: the recursion of the P x P kernel K_{ab} and of the four-point vertex
  V_{(ab)(cd)} (defined by B.23) from the forward equation.  Conditional on layer l, the next-layer neurons are
  independent, neuron i Gaussian over the inputs with mean gamma z_{i;a} and covariance
  A_{ab} = C_b + C_W (1/n) sum_k sigma_{k;a} sigma_{k;b}; so for i != j
  Cov(z'_{ia} z'_{ib}, z'_{jc} z'_{jd}) = Cov(A_ab + gamma^2 z_ia z_ib, A_cd + gamma^2 z_jc z_jd).  Layer l enters
  through its leading-order 1/n law, the one B.23 encodes: neurons conditionally iid N(0, K + delta) with a
  random symmetric P x P delta, E delta = 0, E delta_{ab} delta_{cd} = V_{(ab)(cd)}/n.  The Gaussian moments
  g_ab = <sigma_a sigma_b>, f_abcd = <sigma_a sigma_b sigma_c sigma_d>, q_{ab;cd} = <sigma_a sigma_b z_c z_d> are
  undefined functions of the independent kernel entries, Taylor-expanded to second order in delta; the average
  is expanded to O(1/n);
* ``contracted_update(P)``: the same recursion written with the kernel derivative
  D_{ef} g_ab = d<sigma_a sigma_b>/dK_{ef} (a symmetric-matrix derivative: the off-diagonal entry split equally
  between (e, f) and (f, e)),

      V'_{(12)(34)} = C_W^2 [f_1234 - g_12 g_34] + C_W^2 sum_{efgh} D_ef g_12 V_{(ef)(gh)} D_gh g_34
                      + C_W gamma^2 [c_{12;34} + c_{34;12} + sum_ef V_{(ef)(34)} D_ef g_12
                                     + sum_ef V_{(12)(ef)} D_ef g_34] + gamma^4 V_{(12)(34)},
      c_{12;34} = <sigma_1 sigma_2 (z_3 z_4 - K_34)>,

  checked identical to the derived one for every index tuple (P = 1, 2);
* ``kernel_derivative_identity(P)``: d<F>_K/dK_{ef} = (1/2) sum_{56} K^{e5} K^{f6} <F (z_5 z_6 - K_56)>_K for every
  polynomial F of degree <= 4 (Isserlis moments), the multi-input form of PDLT's (4.64) that turns the display
  above into B.25 as printed (raised indices: contraction with the inverse kernel, the 1/4 and 1/2 factors);
* ``single_input_reduction()``: at P = 1 the derived update is B.26 (``pdlt.four_point_recursion_from_forward``);
* ``vertex_recursions()``: the kernel (B.11) and vertex (B.25) trajectory as a generated depth recursion over
  the elements of the P x P x P x P vertex, the Gaussian moments and the two contractions with V as callbacks.

Caveat (documented, not hidden): for gamma > 0 the conditional-Gaussian closure of B.23 misses the same-neuron
cross-layer covariances the skip connection creates (z_i^(l+1) keeps gamma z_i^(l) while A^(l) contains
sigma(z_i^(l))^2 / n), so B.25 is exact at O(1/n) for gamma = 0 only.  The delta method over one neuron's
trajectory (``multi_input_influence_recursion``, ``corrected_update_from_influence``) closes the recursion up to
that source, Delta = E[Pi X^perp]; ``vertex_update_corrected`` is B.25 plus it, emitted as the generated
recursion ``multi_input_kernel_vertex_corrected`` (driver: numeric/theories/pdlt/multi_input_corrected.py).
"""
from __future__ import annotations

import itertools
from functools import cache

import sympy as sp

from resprop.derive.recursion import Recursion
from resprop.derive.results import Derivation, Source
from resprop.derive.symbols import Parameter
from resprop.derive.theories import pdlt as single

PAPER = "pdlt_appB"

_eps = sp.Symbol("epsilon", positive=True)  # 1/n

# --------------------------------------------------------------------------- symbols of the generated results
P_K = Parameter("K", "real", r"K_{\delta_1 \delta_2}", "kernel entry K_(ab)^(l), broadcast over (c, d)",
                layer=r"\ell")
P_V = Parameter("V", "real", r"V_{(\delta_1 \delta_2)(\delta_3 \delta_4)}", "four-point vertex entry V_(ab)(cd)^(l)",
                layer=r"\ell")
P_C_W = Parameter("C_W", "(0, inf)", r"C_{W}", "rescaled weight variance", "Var W = C_W / n")
P_C_b = Parameter("C_b", "[0, inf)", r"C_{b}", "bias variance")
P_gamma = Parameter("gamma", "[0, 1)", r"\gamma", "residual hyperparameter gamma",
                    "xi = 1, z' = b + W sigma(z) + gamma z")
P_g = Parameter("pair_mean", "real", r"\langle \sigma_{\delta_1} \sigma_{\delta_2} \rangle_{K^{(\ell)}}",
                "<sigma_a sigma_b>_K", layer=r"\ell")
P_cum = Parameter("four_point_cumulant", "real",
                  r"\left[\langle \sigma_{\delta_1} \sigma_{\delta_2} \sigma_{\delta_3} \sigma_{\delta_4}\rangle"
                  r" - \langle \sigma_{\delta_1} \sigma_{\delta_2}\rangle \langle \sigma_{\delta_3} \sigma_{\delta_4}"
                  r"\rangle\right]_{K^{(\ell)}}",
                  "<sigma_a sigma_b sigma_c sigma_d> - <sigma_a sigma_b><sigma_c sigma_d>",
                  layer=r"\ell")
P_intra = Parameter("intralayer_sum", "real",
                    r"\left[\langle \sigma_{\delta_1} \sigma_{\delta_2} (z_{\delta_3} z_{\delta_4} - K_{\delta_3"
                    r" \delta_4}) \rangle + (12 \leftrightarrow 34)\right]_{K^{(\ell)}}",
                    "c_(ab;cd) + c_(cd;ab), c_(ab;cd) = <sigma_a sigma_b (z_c z_d - K_cd)>", layer=r"\ell")
P_vq = Parameter("vertex_quadratic", "real",
                 r"\sum_{\delta_5 \ldots \delta_8} \frac{\partial \langle \sigma_{\delta_1} \sigma_{\delta_2}\rangle}"
                 r"{\partial K_{\delta_5 \delta_6}} V_{(\delta_5 \delta_6)(\delta_7 \delta_8)} \frac{\partial \langle"
                 r" \sigma_{\delta_3} \sigma_{\delta_4}\rangle}{\partial K_{\delta_7 \delta_8}}",
                 "sum D_ef g_ab V_(ef)(gh) D_gh g_cd", layer=r"\ell")
P_vl = Parameter("vertex_linear", "real",
                 r"\sum_{\delta_5 \delta_6} \left[ V_{(\delta_5 \delta_6)(\delta_3 \delta_4)} \frac{\partial \langle"
                 r" \sigma_{\delta_1} \sigma_{\delta_2}\rangle}{\partial K_{\delta_5 \delta_6}} + (12 \leftrightarrow"
                 r" 34) \right]", "sum_ef [V_(ef)(cd) D_ef g_ab + V_(ab)(ef) D_ef g_cd]", layer=r"\ell")
P_cls = Parameter("cross_layer_sum", "real",
                  r"\left[\Delta_{(\delta_1 \delta_2)(\delta_3 \delta_4)} + \Delta_{(\delta_3 \delta_4)(\delta_1 "
                  r"\delta_2)}\right]^{(\ell)}",
                  "Delta_(ab)(cd) + Delta_(cd)(ab), Delta = E[Pi_ab X_cd] beyond its second-chaos part", layer=r"\ell")
P_cll = Parameter("cross_layer_linear", "real",
                  r"\sum_{\delta_5 \delta_6} \left[ \frac{\partial \langle \sigma_{\delta_1} \sigma_{\delta_2}"
                  r"\rangle}{\partial K_{\delta_5 \delta_6}} \Delta_{(\delta_5 \delta_6)(\delta_3 \delta_4)} + "
                  r"(12 \leftrightarrow 34) \right]^{(\ell)}",
                  "sum_ef [D_ef g_ab Delta_(ef)(cd) + D_ef g_cd Delta_(ef)(ab)]", layer=r"\ell")
P_K13 = Parameter("K_ac", "real", r"K_{\delta_1 \delta_3}", "K_(ac)", layer=r"\ell")
P_K24 = Parameter("K_bd", "real", r"K_{\delta_2 \delta_4}", "K_(bd)", layer=r"\ell")
P_K14 = Parameter("K_ad", "real", r"K_{\delta_1 \delta_4}", "K_(ad)", layer=r"\ell")
P_K23 = Parameter("K_bc", "real", r"K_{\delta_2 \delta_3}", "K_(bc)", layer=r"\ell")
PARAMETERS = (P_K, P_V, P_C_W, P_C_b, P_gamma, P_g, P_cum, P_intra, P_vq, P_vl, P_cls, P_cll, P_K13, P_K24, P_K14,
              P_K23)
(K, V, C_W, C_b, gamma, pair_mean, four_point_cumulant, intralayer_sum, vertex_quadratic, vertex_linear,
 cross_layer_sum, cross_layer_linear, K_ac, K_bd, K_ad, K_bc) = (p.symbol for p in PARAMETERS)

#: the callbacks of the generated recursion, in the order of the numeric driver
CALLBACKS = ("pair_mean", "four_point_cumulant", "intralayer_sum", "vertex_quadratic", "vertex_linear")
#: the corrected recursion's extra callbacks (the same-neuron cross-layer source, precomputed per layer)
CORRECTION_CALLBACKS = ("cross_layer_sum", "cross_layer_linear")


# --------------------------------------------------------------------------- index bookkeeping
def _key(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a <= b else (b, a)


class _Model:
    """Symbols of one P: kernel entries, their fluctuations delta, vertex entries, undefined Gaussian moments."""

    def __init__(self, P: int) -> None:
        self.P = P
        self.pairs = [(a, b) for a in range(P) for b in range(a, P)]
        self.Kv = {p: sp.Symbol(f"K_{p[0]}{p[1]}", real=True) for p in self.pairs}
        self.dv = {p: sp.Symbol(f"delta_{p[0]}{p[1]}", real=True) for p in self.pairs}
        self.args = tuple(self.Kv[p] for p in self.pairs)
        self.Vv: dict[tuple, sp.Symbol] = {}
        for p1 in self.pairs:
            for p2 in self.pairs:
                k = tuple(sorted((p1, p2)))
                self.Vv.setdefault(k, sp.Symbol(f"V_{k[0][0]}{k[0][1]}_{k[1][0]}{k[1][1]}", real=True))

    def K(self, a, b):
        return self.Kv[_key(a, b)]

    def V(self, a, b, c, d):
        return self.Vv[tuple(sorted((_key(a, b), _key(c, d))))]

    def g(self, a, b):
        k = _key(a, b)
        return sp.Function(f"g_{k[0]}{k[1]}")(*self.args)

    def f(self, a, b, c, d):
        k = "".join(map(str, sorted((a, b, c, d))))
        return sp.Function(f"f_{k}")(*self.args)

    def q(self, a, b, c, d):
        """<sigma_a sigma_b z_c z_d>."""
        k1, k2 = _key(a, b), _key(c, d)
        return sp.Function(f"q_{k1[0]}{k1[1]}_{k2[0]}{k2[1]}")(*self.args)

    def D(self, a, b, e, f):
        """d<sigma_a sigma_b>/dK_ef with the off-diagonal derivative split between (e, f) and (f, e)."""
        d = sp.diff(self.g(a, b), self.K(e, f))
        return d if e == f else d / 2


# --------------------------------------------------------------------------- B.25 from B.3
def _taylor(m: _Model, expr: sp.Expr) -> sp.Expr:
    """expr(K + delta) to second order in delta (expr a function of the independent kernel entries)."""
    first = sum(sp.diff(expr, m.Kv[p]) * m.dv[p] for p in m.pairs)
    second = sum(sp.diff(expr, m.Kv[p1], m.Kv[p2]) * m.dv[p1] * m.dv[p2] for p1 in m.pairs for p2 in m.pairs)
    return expr + first + second / 2


def _average(m: _Model, expr: sp.Expr) -> sp.Expr:
    """E over delta: E delta = 0, E delta_e delta_f = V_(e)(f)/n, higher moments O(1/n^2) (dropped)."""
    deltas = [m.dv[p] for p in m.pairs]
    poly = sp.Poly(sp.expand(expr), *deltas)
    out = sp.Integer(0)
    for mon, coef in poly.terms():
        deg = sum(mon)
        if deg == 0:
            out += coef
        elif deg == 2:
            idx = [p for p, e in zip(m.pairs, mon) for _ in range(e)]
            out += coef * m.V(*idx[0], *idx[1]) * _eps
    return sp.expand(out)


@cache
def multi_input_update_from_forward(P: int) -> tuple[dict, dict]:
    """(K', V') derived from the forward equation B.3: dicts keyed by (a, b) and (a, b, c, d) (canonical)."""
    m = _Model(P)
    n_inv = _eps
    Kd = {p: m.Kv[p] + m.dv[p] for p in m.pairs}

    def kd(a, b):
        return Kd[_key(a, b)]

    def T(expr):
        return _taylor(m, expr)

    k_next, v_next = {}, {}
    for a, b in m.pairs:
        k_next[(a, b)] = C_b + C_W * m.g(a, b) + gamma**2 * m.K(a, b)
    quads = sorted({tuple(sorted((p1, p2))) for p1 in m.pairs for p2 in m.pairs})
    for (a, b), (c, d) in quads:
        gab, gcd = T(m.g(a, b)), T(m.g(c, d))
        e_A_ab, e_A_cd = C_b + C_W * gab, C_b + C_W * gcd
        # E[A_ab A_cd | delta]: the k-sums of sigma products, the k = k' terms giving the 1/n cumulant
        e_AA = e_A_ab * e_A_cd + C_W**2 * n_inv * (m.f(a, b, c, d) - m.g(a, b) * m.g(c, d))
        # E[z_ia z_ib A_cd | delta]: neuron i inside A (1/n) or not
        e_zA = C_b * kd(a, b) + C_W * (n_inv * m.q(c, d, a, b) + (1 - n_inv) * kd(a, b) * gcd)
        e_Az = C_b * kd(c, d) + C_W * (n_inv * m.q(a, b, c, d) + (1 - n_inv) * kd(c, d) * gab)
        e_zz = kd(a, b) * kd(c, d)  # neurons i != j, conditionally independent
        second = e_AA + gamma**2 * (e_zA + e_Az) + gamma**4 * e_zz
        first_ab = e_A_ab + gamma**2 * kd(a, b)
        first_cd = e_A_cd + gamma**2 * kd(c, d)
        cov = _average(m, second) - _average(m, first_ab) * _average(m, first_cd)
        cov = sp.expand(cov)
        v_next[(a, b, c, d)] = sp.expand(sp.series(cov, _eps, 0, 2).removeO().coeff(_eps, 1))
        if sp.expand(cov).subs(_eps, 0) != 0:
            raise ArithmeticError("the O(1) part of the connected four-point correlator does not vanish")
    return k_next, v_next


def contracted_update(P: int) -> dict:
    """V' of the module docstring (B.25 with the derivative identity applied), per canonical index tuple."""
    m = _Model(P)
    rng = range(P)
    out = {}
    for (a, b, c, d) in multi_input_update_from_forward(P)[1]:
        S = sum(m.D(a, b, e, f) * m.V(e, f, g, h) * m.D(c, d, g, h)
                for e, f, g, h in itertools.product(rng, repeat=4))
        Tl = sum(m.V(e, f, c, d) * m.D(a, b, e, f) + m.V(a, b, e, f) * m.D(c, d, e, f)
                 for e, f in itertools.product(rng, repeat=2))
        c1 = m.q(a, b, c, d) - m.K(c, d) * m.g(a, b)
        c2 = m.q(c, d, a, b) - m.K(a, b) * m.g(c, d)
        out[(a, b, c, d)] = (C_W**2 * (m.f(a, b, c, d) - m.g(a, b) * m.g(c, d)) + C_W**2 * S
                             + C_W * gamma**2 * (c1 + c2 + Tl) + gamma**4 * m.V(a, b, c, d))
    return out


def check_contracted(P: int) -> None:
    """Raise unless the contracted form equals the derivation for every index tuple."""
    derived = multi_input_update_from_forward(P)[1]
    for key, expr in contracted_update(P).items():
        if sp.expand(expr - derived[key]) != 0:
            raise ArithmeticError(f"B.25 (contracted) differs from the forward derivation at {key}")


# --------------------------------------------------------------------------- corrected: the delta method on P inputs
@cache
def multi_input_influence_recursion(P: int) -> dict:
    """Pi'_ab of one neuron (its influence on the conditional kernel of the next layer), per pair (a, b).

    The kernel of layer l seen by the other neurons is K + eps Pi (eps = n^(-1/2)); the block covariance
    C_b + C_W (1/n) sum_k sigma_k,a sigma_k,b is C_b + C_W g_ab(K + eps Pi) + eps C_W X_ab, X_ab = sigma_a sigma_b -
    g_ab of the neuron itself.  First order in eps, the kernel derivative split as in :meth:`_Model.D`:
    Pi'_ab = gamma^2 Pi_ab + C_W (sum_ef D_ef g_ab Pi_ef + X_ab) -- the P-input form of
    ``pdlt_corrected.influence_recursion``.  Checked here, returned with Pi and X as symbols Pi_ab, X_ab."""
    m = _Model(P)
    Pi = {p: sp.Symbol(f"Pi_{p[0]}{p[1]}", real=True) for p in m.pairs}
    X = {p: sp.Symbol(f"X_{p[0]}{p[1]}", real=True) for p in m.pairs}
    eps = sp.Symbol("eps_half", positive=True)
    shift = {m.Kv[p]: m.Kv[p] + eps * Pi[p] for p in m.pairs}
    out = {}
    for a, b in m.pairs:
        k_next = C_b + C_W * m.g(a, b) + gamma**2 * m.K(a, b)
        perturbed = k_next.subs(shift, simultaneous=True) + eps * C_W * X[(a, b)]
        first = sp.diff(perturbed, eps).subs(eps, 0).doit()
        target = gamma**2 * Pi[(a, b)] + C_W * (X[(a, b)] + sum(m.D(a, b, e, f) * Pi[_key(e, f)]
                                                                 for e, f in itertools.product(range(P), repeat=2)))
        if sp.expand(first - target) != 0:
            raise ArithmeticError(f"the P = {P} influence recursion differs from gamma^2 Pi + C_W (D Pi + X)")
        out[(a, b)] = target
    return out


@cache
def corrected_update_from_influence(P: int) -> dict:
    """V' of the delta method on P inputs minus the contracted B.25, per canonical index tuple: it must equal
    C_W gamma^2 [Delta_(ab)(cd) + Delta_(cd)(ab)] + C_W^2 sum_ef [D_ef g_ab Delta_(ef)(cd) + D_ef g_cd Delta_(ef)(ab)].

    The delta method: n Cov(G_ab, G_cd) = E[psi_ab psi_cd], psi = (z z^T - K) + Pi over one neuron's trajectory,
    so V = Q + Q^T + E[Pi Pi], Q_(ab)(cd) = E[Pi_ab (z_c z_d - K_cd)].  Layer l + 1: z' = gamma z + xi, xi ~ N(0, A)
    independent of the neuron's past (odd moments of xi vanish and E[Pi'] = 0, so E[Pi' (z'z'^T - K')] =
    gamma^2 E[Pi' (z z^T - K)]); Pi' from :func:`multi_input_influence_recursion`.  The one correlator that is not
    a Gaussian moment of layer l, E[Pi_ab X_cd], is split into its second-chaos part sum_ef D_ef g_cd Q_(ab)(ef)
    (the projection of X_cd on span{z_e z_f - K_ef}; E[Pi h] for h in that span is Q) and the remainder
    Delta_(ab)(cd).  Every Q and E[Pi Pi] cancels into V: the recursion is closed up to Delta, and B.25 is Delta = 0.
    """
    m = _Model(P)
    pairs = m.pairs
    rng = range(P)
    sym = {(p1, p2): sp.Symbol(f"Q_{p1[0]}{p1[1]}_{p2[0]}{p2[1]}", real=True) for p1 in pairs for p2 in pairs}
    Dl = {(p1, p2): sp.Symbol(f"Delta_{p1[0]}{p1[1]}_{p2[0]}{p2[1]}", real=True) for p1 in pairs for p2 in pairs}

    def Q(a, b, c, d):
        return sym[(_key(a, b), _key(c, d))]

    def Delta(a, b, c, d):
        return Dl[(_key(a, b), _key(c, d))]

    def E_PiPi(a, b, c, d):  # eliminated through V = Q + Q^T + E[Pi Pi]
        return m.V(a, b, c, d) - Q(a, b, c, d) - Q(c, d, a, b)

    def E_PiX(a, b, c, d):
        return sum(m.D(c, d, e, f) * Q(a, b, e, f) for e, f in itertools.product(rng, repeat=2)) + Delta(a, b, c, d)

    def E_XY(a, b, c, d):  # <sigma_a sigma_b (z_c z_d - K_cd)>
        return m.q(a, b, c, d) - m.K(c, d) * m.g(a, b)

    def E_XX(a, b, c, d):
        return m.f(a, b, c, d) - m.g(a, b) * m.g(c, d)

    Pi = {p: sp.Symbol(f"Pi_{p[0]}{p[1]}", real=True) for p in pairs}
    X = {p: sp.Symbol(f"X_{p[0]}{p[1]}", real=True) for p in pairs}
    Y = {p: sp.Symbol(f"Y_{p[0]}{p[1]}", real=True) for p in pairs}
    table = {}
    for p1, p2 in itertools.product(pairs, repeat=2):
        table[Pi[p1] * Pi[p2]] = E_PiPi(*p1, *p2)
        table[Pi[p1] * X[p2]] = E_PiX(*p1, *p2)
        table[Pi[p1] * Y[p2]] = Q(*p1, *p2)
        table[X[p1] * X[p2]] = E_XX(*p1, *p2)
        table[X[p1] * Y[p2]] = E_XY(*p1, *p2)

    def expect(expr):
        out = sp.Integer(0)
        for term in sp.Add.make_args(sp.expand(expr)):
            coef, rest = term.as_independent(*Pi.values(), *X.values(), *Y.values())
            out += coef * table[rest]
        return out

    Pi_next = multi_input_influence_recursion(P)
    contracted = contracted_update(P)
    out = {}
    for (a, b, c, d), b25 in contracted.items():
        Q_abcd = expect(Pi_next[_key(a, b)] * gamma**2 * Y[_key(c, d)])
        Q_cdab = expect(Pi_next[_key(c, d)] * gamma**2 * Y[_key(a, b)])
        v_next = Q_abcd + Q_cdab + expect(Pi_next[_key(a, b)] * Pi_next[_key(c, d)])
        correction = sp.expand(v_next - b25)
        target = (C_W * gamma**2 * (Delta(a, b, c, d) + Delta(c, d, a, b))
                  + C_W**2 * sum(m.D(a, b, e, f) * Delta(e, f, c, d) + m.D(c, d, e, f) * Delta(e, f, a, b)
                                 for e, f in itertools.product(rng, repeat=2)))
        if sp.expand(correction - target) != 0:
            raise ArithmeticError(f"the delta-method vertex differs from B.25 + the Delta source at {(a, b, c, d)}")
        out[(a, b, c, d)] = correction
    return out


# --------------------------------------------------------------------------- (4.64): derivative identity
def _gaussian_moment(m: _Model, powers: tuple[int, ...]) -> sp.Expr:
    """E prod z_a^{p_a} for z ~ N(0, K) from the moment-generating function exp(t K t / 2)."""
    t = sp.symbols(f"t0:{m.P}")
    mgf = sp.exp(sum(t[a] * m.K(a, b) * t[b] for a in range(m.P) for b in range(m.P)) / 2)
    expr = mgf
    for a, p in enumerate(powers):
        if p:
            expr = sp.diff(expr, t[a], p)
    return sp.expand(expr.subs({ti: 0 for ti in t}))


def kernel_derivative_identity(P: int = 2, degree: int = 4) -> sp.Expr:
    """Sum of squared residuals of d<F>/dK_ef - (1/2) sum K^{e5} K^{f6} <F (z5 z6 - K56)> over monomials F of
    degree <= ``degree`` and all (e, f) (0 when the identity holds)."""
    m = _Model(P)
    Kmat = sp.Matrix(P, P, lambda a, b: m.K(a, b))
    Kinv = Kmat.inv()
    total = sp.Integer(0)
    for powers in itertools.product(range(degree + 1), repeat=P):
        if sum(powers) > degree:
            continue
        mean_F = _gaussian_moment(m, powers)
        for e, f in itertools.product(range(P), repeat=2):
            lhs = sp.diff(mean_F, m.K(e, f)) * (1 if e == f else sp.Rational(1, 2))
            rhs = sp.Integer(0)
            for i5, i6 in itertools.product(range(P), repeat=2):
                pw = list(powers)
                pw[i5] += 1
                pw[i6] += 1
                rhs += Kinv[e, i5] * Kinv[f, i6] * (_gaussian_moment(m, tuple(pw)) - m.K(i5, i6) * mean_F)
            total += sp.simplify(lhs - rhs / 2) ** 2
    return sp.simplify(total)


# --------------------------------------------------------------------------- P = 1: B.26
def single_input_reduction() -> sp.Expr:
    """The P = 1 derived update minus B.26 (``pdlt.four_point_recursion_from_forward``), 0 if they agree."""
    m = _Model(1)
    k0 = m.Kv[(0, 0)]
    v_multi = multi_input_update_from_forward(1)[1][(0, 0, 0, 0)]
    g, q, f = m.g(0, 0), m.q(0, 0, 0, 0), m.f(0, 0, 0, 0)
    v_multi = v_multi.subs(sp.Derivative(g, k0), (q - k0 * g) / (2 * k0**2))
    v_multi = v_multi.subs({g: single.mean_sigma_sq, q: single.mean_sigma_sq_z_sq, f: single.mean_sigma_4})
    v_multi = v_multi.subs({k0: single.K, m.V(0, 0, 0, 0): single.V})
    return sp.simplify(v_multi - single.four_point_recursion_from_forward()[1])


# --------------------------------------------------------------------------- the generated recursion
def kernel_update() -> sp.Expr:
    """B.11: K'_ab = C_b + C_W <sigma_a sigma_b>_K + gamma^2 K_ab."""
    return C_b + C_W * pair_mean + gamma**2 * K


def vertex_update() -> sp.Expr:
    """B.25 in terms of its five per-element pieces (see the module docstring), checked against the derivation:
    each piece replaced by its explicit index sum reproduces :func:`multi_input_update_from_forward` (P = 1, 2)."""
    expr = (C_W**2 * (four_point_cumulant + vertex_quadratic) + C_W * gamma**2 * (intralayer_sum + vertex_linear)
            + gamma**4 * V)
    for P in (1, 2):
        check_contracted(P)
        m = _Model(P)
        rng = range(P)
        derived = multi_input_update_from_forward(P)[1]
        for (a, b, c, d), target in derived.items():
            pieces = {
                four_point_cumulant: m.f(a, b, c, d) - m.g(a, b) * m.g(c, d),
                vertex_quadratic: sum(m.D(a, b, e, f) * m.V(e, f, g, h) * m.D(c, d, g, h)
                                      for e, f, g, h in itertools.product(rng, repeat=4)),
                intralayer_sum: (m.q(a, b, c, d) - m.K(c, d) * m.g(a, b) + m.q(c, d, a, b)
                                 - m.K(a, b) * m.g(c, d)),
                vertex_linear: sum(m.V(e, f, c, d) * m.D(a, b, e, f) + m.V(a, b, e, f) * m.D(c, d, e, f)
                                   for e, f in itertools.product(rng, repeat=2)),
                V: m.V(a, b, c, d),
            }
            if sp.expand(expr.subs(pieces) - target) != 0:
                raise ArithmeticError(f"B.25 pieces do not reproduce the derivation at P = {P}, {(a, b, c, d)}")
    return expr


def vertex_update_corrected() -> sp.Expr:
    """B.25 plus the same-neuron cross-layer source of the delta method (:func:`corrected_update_from_influence`,
    checked for P = 1, 2): C_W gamma^2 [Delta + Delta^T] + C_W^2 [D Delta + (D Delta)^T]; at P = 1 it is
    2 chi_par C_W Delta, the corrected single-input recursion of ``pdlt_corrected``."""
    correction = C_W * gamma**2 * cross_layer_sum + C_W**2 * cross_layer_linear
    for P in (1, 2):
        m = _Model(P)
        rng = range(P)
        for (a, b, c, d), target in corrected_update_from_influence(P).items():
            def Delta(*idx):
                return sp.Symbol("Delta_{}{}_{}{}".format(*_key(*idx[:2]), *_key(*idx[2:])), real=True)
            pieces = {cross_layer_sum: Delta(a, b, c, d) + Delta(c, d, a, b),
                      cross_layer_linear: sum(m.D(a, b, e, f) * Delta(e, f, c, d) + m.D(c, d, e, f) * Delta(e, f, a, b)
                                              for e, f in itertools.product(rng, repeat=2))}
            if sp.expand(correction.subs(pieces) - target) != 0:
                raise ArithmeticError(f"the corrected pieces do not reproduce the delta method at P = {P}")
    return vertex_update() + correction


def four_point_covariance() -> sp.Expr:
    """n Cov(G_ab, G_cd) of the empirical kernel G_ab = z_a . z_b / n at leading order: the same-neuron (Wick)
    part K_ac K_bd + K_ad K_bc plus the vertex (B.23 summed over neuron pairs)."""
    return K_ac * K_bd + K_ad * K_bc + V


def vertex_recursions() -> list[Recursion]:
    """K_ab (B.11) and V_(ab)(cd) (B.25) iterated together over the elements of a P x P x P x P array (K stored
    broadcast over (c, d)), the Gaussian moments and the contractions with V as callbacks of (K, V)."""
    f = {name: sp.Function(name) for name in CALLBACKS}
    subs = {pair_mean: f["pair_mean"](K), four_point_cumulant: f["four_point_cumulant"](K),
            intralayer_sum: f["intralayer_sum"](K), vertex_quadratic: f["vertex_quadratic"](K, V),
            vertex_linear: f["vertex_linear"](K, V)}
    f.update({name: sp.Function(name) for name in CORRECTION_CALLBACKS})
    subs.update({cross_layer_sum: f["cross_layer_sum"](K), cross_layer_linear: f["cross_layer_linear"](K)})
    src_c = Source(PAPER, "B.3, B.11, B.24-B.25",
                   "corrected: the delta method over one neuron's trajectory, derived from the forward equation B.3")
    src = Source(PAPER, "B.11, B.24-B.25", "derived from the forward equation B.3 (conditionally Gaussian layers)")
    domain = ("K, V: float64 arrays of shape (P, P, P, P), K[a, b, c, d] = K_ab, V[a, b, c, d] = V_(ab)(cd); "
              "gamma in [0, 1), C_W > 0, C_b >= 0: (L,) arrays, one entry per layer")
    return [Recursion("multi_input_kernel_vertex",
                      "K_ab^(l) and V_(ab)(cd)^(l) of the residual MLP on P inputs; Gaussian moments and vertex "
                      "contractions by callbacks", src,
                      ((K, kernel_update().subs(subs)), (V, vertex_update().subs(subs))),
                      sequences=(gamma, C_W, C_b), callbacks=CALLBACKS, domain=domain),
            Recursion("multi_input_kernel_vertex_corrected",
                      "K_ab^(l) and the corrected V_(ab)(cd)^(l) (delta method: B.25 plus the same-neuron cross-layer "
                      "source) of the residual MLP on P inputs; Gaussian moments, vertex contractions and the "
                      "precomputed Delta terms by callbacks", src_c,
                      ((K, kernel_update().subs(subs)), (V, vertex_update_corrected().subs(subs))),
                      sequences=(gamma, C_W, C_b), callbacks=CALLBACKS + CORRECTION_CALLBACKS, domain=domain)]


# --------------------------------------------------------------------------- registry
def derive_multi_input_vertex() -> Derivation:
    dv = Derivation("pdlt_vertex", "Residual MLPs on P inputs: kernel and four-point vertex (PDLT B.24-B.25)",
                    PAPER)
    dv.declare(PARAMETERS)
    add = dv.adder()
    if single_input_reduction() != 0:
        raise ArithmeticError("the P = 1 multi-input update is not B.26")
    if kernel_derivative_identity(2) != 0:
        raise ArithmeticError("the Gaussian kernel-derivative identity (4.64) fails")
    nxt = r"\ell+1"
    add("multi_kernel_update", kernel_update(), [C_b, C_W, pair_mean, gamma, K], "B.11",
        "K_ab^(l+1) = C_b + C_W <sigma_a sigma_b>_K + gamma^2 K_ab", P_K.tex(nxt), "recursion",
        statement=r"The kernel of a residual MLP on several inputs obeys, at leading order in $1/n$, the "
                  r"entrywise recursion below.")
    add("multi_vertex_update", vertex_update(),
        [C_W, four_point_cumulant, vertex_quadratic, gamma, intralayer_sum, vertex_linear, V], "B.25",
        "V_(ab)(cd)^(l+1) derived from the forward equation B.3", P_V.tex(nxt), "recursion",
        statement=r"The multi-input four-point vertex obeys the recursion below, derived here from the forward "
                  r"equation (B.3) with conditionally Gaussian layers; the kernel derivatives are B.25's "
                  r"contractions with the inverse kernel.")
    add("empirical_kernel_covariance", four_point_covariance(), [K_ac, K_bd, K_ad, K_bc, V], "B.23",
        "n Cov(G_ab, G_cd) of the empirical kernel G = z z^T / n at leading order",
        r"n \operatorname{Cov}(\hat{G}_{\delta_1 \delta_2}, \hat{G}_{\delta_3 \delta_4})",
        statement=r"The covariance of two entries of the empirical kernel $\hat{G} = z z^{\top}/n$ is, times the "
                  r"width, the Wick part plus the four-point vertex.")
    add("multi_vertex_update_corrected", vertex_update_corrected(),
        [C_W, four_point_cumulant, vertex_quadratic, gamma, intralayer_sum, vertex_linear, cross_layer_sum,
         cross_layer_linear, V], "B.3",
        "V_(ab)(cd)^(l+1): B.25 plus the same-neuron cross-layer source (delta method over one neuron's trajectory)",
        P_V.tex(nxt), "recursion",
        statement=r"With the skip connection a neuron keeps its identity across layers. Propagating one neuron's "
                  r"influence $\Pi_{ab}$ on the kernel of the next layer, $\Pi' = \gamma^{2}\Pi + C_{W}(D\Pi + "
                  r"\sigma\sigma^{\top} - g)$, and expanding to $O(1/n)$ gives B.25 plus the source below, where "
                  r"$\Delta_{(ab)(cd)} = E[\Pi_{ab} X^{\perp}_{cd}]$ is the correlation of the influence with the "
                  r"part of $\sigma_{c}\sigma_{d}$ outside the second Wiener chaos of $z$; B.25 is $\Delta = 0$.")
    dv.recursions = vertex_recursions()
    return dv
