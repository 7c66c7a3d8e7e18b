"""Fischer, Dahmen & Helias (2025): field theory of residual networks, derived in SymPy.

The route follows the paper, but each step is computed rather than typed in:

1. Action S(C, C~) (eqs 21-22, A30-A31).  W(C~|C) is the cumulant-generating
   function of the observables X_l = w_l phi(h_{l-1})^2 + b_l under the
   Gaussian measure fixed by C, so to second order in C~ it is
   sum_l C~_l <X_l> + 1/2 sum_kn C~_k C~_n <X_k, X_n>^c, exactly, and
   W(0|C) = 0 (normalisation, B7).
2. Saddle point dS/dC~ = 0 gives the NNGP recursion (29-30, B9-B10).
3. Hessian blocks at the saddle: S_CC = 0 (34), S_{C~C} lower triangular (37),
   S_{C~C~} the fourth cumulants (35, C4).
4. Propagator G = -(S^(2))^{-1}: G_{CC~} = -S_{C~C}^{-1} by forward
   substitution (41, 43, C10, C13), G_CC = G_{CC~} S_{C~C~} G_{C~C} (40, C9,
   C18), G_{C~C~} = 0 (42).
5. The response eta^(l) = N G_{CC~}^{l0} (44); its one-step recursion (45, C15)
   is read off the inverted matrix, and chi^(l), chi_out follow (47-48).
6. Linearised optimum rho* (56-62) by solving the linear recursion with rsolve;
   the maximum-entropy variance (E4-E5).

Single-input (diagonal) and two-input (off-diagonal element) versions of the
action are built; a test checks the eta recursion against the linear-response
route (50-55).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from resprop.derive.results import Constraint, Derivation
from resprop.derive.symbols import Parameter

PAPER = "fischer2025"

_E = r"\rangle_{K^{(LAYER)}}"  # a Gaussian expectation under N(0, K^(l-1))
_P = Parameter

#: every input of the results below, declared once (symbol, domain, the paper's LaTeX, meaning)
PARAMETERS = (
    # hyperparameters
    _P("rho", "[0, inf)", r"\rho", "residual scaling"),
    _P("sigma_w2", "(0, inf)", r"\sigma_{w}^{2}", "residual weight variance", "Var W = sigma_w^2 / N"),
    _P("sigma_b2", "[0, inf)", r"\sigma_{b}^{2}", "residual bias variance"),
    _P("sigma_w2_out", "(0, inf)", r"\sigma_{w,\mathrm{out}}^{2}", "readout weight variance"),
    _P("sigma_b2_out", "[0, inf)", r"\sigma_{b,\mathrm{out}}^{2}", "readout bias variance"),
    _P("sigma_w2_in", "(0, inf)", r"\sigma_{w,\mathrm{in}}^{2}", "readin weight variance"),
    _P("sigma_b2_in", "[0, inf)", r"\sigma_{b,\mathrm{in}}^{2}", "readin bias variance"),
    _P("d_in", "[1, inf)", r"d_{\mathrm{in}}", "input dimension"),
    _P("N", "[1, inf)", "N", "network width"),
    _P("overlap", "real", r"x_{a}^{\top} x_{b}", "input overlap x_a . x_b"),
    # per-layer quantities of the one-step updates
    _P("mean_phi_phi", "real", r"\langle \phi_{a} \phi_{b} " + _E, "<phi_a phi_b> under N(0, K^(l-1))",
       layer=r"\ell-1"),
    _P("price_factor", "real", r"\langle \phi'^{2} + \phi \phi'' " + _E,
       "<phi'^2 + phi phi''> (diagonal) or <phi'_a phi'_b> (off-diagonal) under N(0, K^(l-1))", layer=r"\ell-1"),
    _P("chi_prev", "real", r"\chi", "chi^(l-1) = sum_{k<l} eta^(k)", layer=r"\ell-1"),
    _P("eta_new", "real", r"\eta", "eta^(l)", layer=r"\ell"),
    _P("K_prev", "(0, inf)", "K", "K^(l-1)", layer=r"\ell-1"),
    _P("C_new", "[0, inf)", "C", "C^(l)", layer=r"\ell"),
    _P("L", "[1, inf)", "L", "depth L", integer=True),
    _P("dphi0_sq", "(0, inf)", r"\phi'(0)^{2}", "phi'(0)^2"),
    _P("target_variance", "(0, inf)", r"(\mathcal{V}/2)^{2}", "target variance (V/2)^2 of h^(L)"),
    _P("K0", "(0, inf)", r"K^{(0)}", "input kernel K^(0)"),
    _P("sigma2", "(0, inf)", r"\sigma^{2}", "pre-activation variance"),
    _P("mean_phi_sq_a", "[0, inf)", r"\langle \phi_{a}^{2} \rangle", "<phi(h_a)^2>"),
    _P("mean_phi_sq_b", "[0, inf)", r"\langle \phi_{b}^{2} \rangle", "<phi(h_b)^2>"),
    _P("mean_phi_sq_phi_sq", "[0, inf)", r"\langle \phi_{a}^{2} \phi_{b}^{2} \rangle", "<phi(h_a)^2 phi(h_b)^2>"),
)
DECLARED = {p.name: p for p in PARAMETERS}

(rho, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, sigma_w2_in, sigma_b2_in, d_in, N, overlap,  # x_a . x_b
 mean_phi_phi, price_factor, chi_prev, eta_new, K_prev, C_new, depth, dphi0_sq, target_variance, K0, sigma2,
 mean_phi_sq_a, mean_phi_sq_b, mean_phi_sq_phi_sq) = (p.symbol for p in PARAMETERS)


# --------------------------------------------------------------------------- action
@dataclass
class Action:
    """Second-order expansion of S(C, C~) for a network of depth L.

    ``C`` and ``Ct`` are lists over layers 0..L+1 of lists over kernel elements
    (one element for a single input, three -- (aa, bb, ab) -- for two inputs).
    """

    L: int
    elements: tuple[str, ...]
    C: list[list[sp.Symbol]]
    Ct: list[list[sp.Symbol]]
    S: sp.Expr
    F: dict[str, sp.Function]

    def flat(self, which: str) -> list[sp.Symbol]:
        v = self.C if which == "C" else self.Ct
        return [s for layer in v for s in layer]


def kernel_elements(inputs: int) -> tuple[str, ...]:
    """Independent elements of a symmetric P x P kernel, named by input letters: aa, bb, ..., ab, ac, ..."""
    if not 1 <= inputs <= 26:
        raise ValueError(f"inputs: must be between 1 and 26, got {inputs}")
    letters = "abcdefghijklmnopqrstuvwxyz"[:inputs]
    return tuple(c + c for c in letters) + tuple(a + b for i, a in enumerate(letters) for b in letters[i + 1:])


def _is_diagonal(element: str) -> bool:
    return element[0] == element[1]


def _mean_arguments(element: str, kernel: dict[str, sp.Expr]) -> tuple[sp.Expr, ...]:
    """<phi_a^2> depends on K_aa alone; <phi_a phi_b> on K_aa, K_bb and K_ab (and on no other element)."""
    a, b = tuple(element)
    if a == b:
        return (kernel[element],)
    return (kernel[a + a], kernel[b + b], kernel[element])


def _layer_weight(l: int, L: int) -> tuple[sp.Expr, sp.Expr]:
    """(w_l, b_l) multiplying <phi phi> in C^(l): rho^2 sigma^2 inside, sigma^2_out at L+1 (eq. 25)."""
    if l == L + 1:
        return sigma_w2_out, sigma_b2_out
    return rho**2 * sigma_w2, rho**2 * sigma_b2


def build_action(L: int, inputs: int = 1) -> Action:
    """The action (21)/(A30) to second order in C~, with the mean <phi_a phi_b> an
    undefined function F_ab of the layer kernel and the cumulant kappa undefined.

    ``inputs`` = P; the variables are the P(P+1)/2 independent elements of each
    symmetric layer kernel (A21).  An off-diagonal element is one symmetric
    variable: the sums over (alpha, beta) in A27 count it twice, so its terms
    carry a factor 2.
    """
    elements = kernel_elements(inputs)
    mult = {e: 1 if _is_diagonal(e) else 2 for e in elements}
    C = [[sp.Symbol(f"C{l}_{e}") for e in elements] for l in range(L + 2)]
    Ct = [[sp.Symbol(f"Ct{l}_{e}") for e in elements] for l in range(L + 2)]
    F = {e: sp.Function(f"F_{e}") for e in elements}
    kappa = sp.Function("kappa")
    nu = [d_in / N] + [sp.Integer(1)] * (L + 1)

    def K(l: int) -> dict[str, sp.Expr]:
        return {e: sum(C[k][i] for k in range(l + 1)) for i, e in enumerate(elements)}

    def mean(l: int, e: str) -> sp.Expr:
        return F[e](*_mean_arguments(e, K(l - 1)))

    S = 0
    for l in range(L + 2):
        for i, e in enumerate(elements):
            S += -N * nu[l] * mult[e] * C[l][i] * Ct[l][i]
    # W to first order: sum_l C~_l <X_l>
    for i, e in enumerate(elements):
        S += N * nu[0] * mult[e] * Ct[0][i] * (
            sigma_w2_in / d_in * sp.Symbol(f"xx_{e}") + sigma_b2_in)
        for l in range(1, L + 2):
            w, b = _layer_weight(l, L)
            S += N * mult[e] * Ct[l][i] * (w * mean(l, e) + b)
    # W to second order: 1/2 sum_kn C~_k C~_n <X_k, X_n>^c
    for l in range(1, L + 2):
        for m in range(1, L + 2):
            for i, e in enumerate(elements):
                for j, f in enumerate(elements):
                    wl, _ = _layer_weight(l, L)
                    wm, _ = _layer_weight(m, L)
                    S += (N / 2) * mult[e] * mult[f] * Ct[l][i] * Ct[m][j] * wl * wm * kappa(
                        sp.Symbol(f"{e}{l - 1}"), sp.Symbol(f"{f}{m - 1}"))
    return Action(L, elements, C, Ct, sp.expand(S), F)


def saddle_point(action: Action) -> dict[sp.Symbol, sp.Expr]:
    """Solve dS/dC~ = 0 at C~ = 0 layer by layer (eq. 24 -> 25, B2)."""
    zero = {s: 0 for s in action.flat("Ct")}
    sol: dict[sp.Symbol, sp.Expr] = {}
    for l in range(action.L + 2):
        for i in range(len(action.elements)):
            eq = sp.diff(action.S, action.Ct[l][i]).subs(zero)
            c = action.C[l][i]
            (val,) = sp.solve(eq, c)
            sol[c] = val
    return sol


def conjugate_saddle_vanishes(action: Action) -> bool:
    """dS/dC at C~ = 0 is identically zero, so C~_* = 0 solves the saddle point (26, B3)."""
    zero = {s: 0 for s in action.flat("Ct")}
    return all(sp.simplify(sp.diff(action.S, c).subs(zero)) == 0 for c in action.flat("C"))


def hessian_blocks(action: Action) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """(S_CC, S_{C~C}, S_{C~C~}) at C~ = 0 (eqs 33-37, C3-C6); rows of S_{C~C} are C~."""
    zero = {s: 0 for s in action.flat("Ct")}
    C, Ct = action.flat("C"), action.flat("Ct")
    S_CC = sp.Matrix([[sp.diff(action.S, a, b).subs(zero) for b in C] for a in C])
    S_tC = sp.Matrix([[sp.diff(action.S, a, b).subs(zero) for b in C] for a in Ct])
    S_tt = sp.Matrix([[sp.diff(action.S, a, b).subs(zero) for b in Ct] for a in Ct])
    return S_CC, S_tC, S_tt


def propagator(action: Action) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """(G_CC, G_{CC~}, G_{C~C~}) with G = -(S^(2))^{-1}, using S_CC = 0.

    G_{CC~} = -S_{C~C}^{-1} is obtained by forward substitution (S_{C~C} is lower
    triangular), G_CC = G_{CC~} S_{C~C~} G_{CC~}^T.  The caller may verify
    S^(2) G = -1 with :func:`check_propagator`.
    """
    S_CC, S_tC, S_tt = hessian_blocks(action)
    if S_CC != sp.zeros(*S_CC.shape):
        raise AssertionError("S_CC must vanish at the saddle point (eq. 34)")
    n = S_tC.shape[0]
    G_Ct = -S_tC.lower_triangular_solve(sp.eye(n))
    G_CC = G_Ct * S_tt * G_Ct.T
    return G_CC, G_Ct, sp.zeros(n, n)


def check_propagator(action: Action) -> sp.Matrix:
    """S^(2) G + 1 (must be the zero matrix), with blocks ordered (C, C~)."""
    S_CC, S_tC, S_tt = hessian_blocks(action)
    G_CC, G_Ct, G_tt = propagator(action)
    S2 = sp.BlockMatrix([[S_CC, S_tC.T], [S_tC, S_tt]]).as_explicit()
    G = sp.BlockMatrix([[G_CC, G_Ct], [G_Ct.T, G_tt]]).as_explicit()
    return sp.simplify(S2 * G + sp.eye(S2.shape[0]))


# --------------------------------------------------------------------------- response
def response_from_propagator(action: Action, element: str = "aa") -> list[sp.Expr]:
    """eta^(l) = N G_{CC~}^{(l, element), (0, element)} for l = 0..L+1 (eqs 32, 44, C12, C14)."""
    _, G_Ct, _ = propagator(action)
    ne = len(action.elements)
    i = action.elements.index(element)
    col = 0 * ne + i
    mult = 1 if _is_diagonal(element) else 2  # the symmetric source couples with weight 2
    return [sp.simplify(mult * N * G_Ct[l * ne + i, col]) for l in range(action.L + 2)]


def cross_response(action: Action, element: str, source: str) -> list[sp.Expr]:
    """N G_{CC~}^{(l, element), (0, source)}: response of one kernel element to another element's input.

    The propagator is diagonal in the element index (the delta_{(ab),(cd)} of C13) whenever
    ``element`` is off-diagonal and differs from ``source``."""
    _, G_Ct, _ = propagator(action)
    ne = len(action.elements)
    i, j = action.elements.index(element), action.elements.index(source)
    return [sp.simplify(N * G_Ct[l * ne + i, j]) for l in range(action.L + 2)]


def response_update_from_propagator(action: Action, element: str = "aa") -> list[sp.Expr]:
    """The factor eta^(l) / sum_{k<l} eta^(k) for l = 1..L+1, read off the propagator.

    It must be layer independent up to the layer kernel it is evaluated at; the
    caller extracts the one-step update (45, C15) from it.
    """
    eta = response_from_propagator(action, element)
    return [sp.simplify(eta[l] / sum(eta[:l])) for l in range(1, action.L + 2)]


def response_by_linear_response(L: int, element: str = "aa") -> list[sp.Expr]:
    """Route of Sec. II D (50-55): eta^(l) = dC^(l)/dK^(0) by the chain rule through the NNGP map."""
    k0 = {e: sp.Symbol(f"k0_{e}") for e in ("aa", "bb", "ab")}
    F = {e: sp.Function(f"F_{e}") for e in ("aa", "bb", "ab")}
    elements = ("aa",) if element == "aa" else ("aa", "bb", "ab")
    Kl = {e: k0[e] for e in elements}
    Cs = [dict(Kl)]
    for l in range(1, L + 2):
        w, b = _layer_weight(l, L)
        Cl = {e: w * F[e](*_mean_arguments(e, Kl)) + b for e in elements}
        Cs.append(Cl)
        Kl = {e: Kl[e] + Cl[e] for e in elements}
    # K^(L+1) is the readout kernel itself, not accumulated; C^(L+1) is what we return
    return [sp.diff(Cl[element], k0[element]) for Cl in Cs]


# --------------------------------------------------------------------------- fluctuations
def kernel_fluctuations(action: Action) -> sp.Matrix:
    """G_CC = G_{CC~} S_{C~C~} G_{C~C}: covariance of the residual kernels (C18-C19), O(1/N)."""
    return propagator(action)[0]


# --------------------------------------------------------------------------- rho*
@cache
def linearised_kernel() -> sp.Expr:
    """K^(L) of the linearised network (56-60), solved with rsolve.

    With phi(h) ~ phi'(0) h the update is K_l = (1 + a) K_{l-1} + rho^2 sigma_b^2,
    a = rho^2 sigma_w^2 phi'(0)^2.
    """
    k = sp.Function("k")
    l = sp.Symbol("l", integer=True, nonnegative=True)
    a = rho**2 * sigma_w2 * dphi0_sq
    sol = sp.rsolve(k(l) - (1 + a) * k(l - 1) - rho**2 * sigma_b2, k(l), {k(0): K0})
    return sp.simplify(sol.subs(l, depth))


@cache
def rho_star_linearised() -> sp.Expr:
    """rho* from K^(L) = target variance (V/2)^2 (eq. 61), solved for rho."""
    r2 = sp.Symbol("r2", positive=True)
    eq = sp.Eq(linearised_kernel().subs(rho, sp.sqrt(r2)), target_variance)
    sols = sp.solve(eq, r2)
    real = [s for s in sols if s.is_real is not False]
    return sp.sqrt(sp.simplify(real[0]))


def _check_equal(stable: sp.Expr, derived: sp.Expr, what: str) -> sp.Expr:
    """``stable`` after checking it equals ``derived`` at generic rational points (40 digits)."""
    syms = sorted(derived.free_symbols | stable.free_symbols, key=str)
    for k in range(4):
        pt = {s: sp.Rational(3 + k + 2 * j, 5 + j) + (4 if s == target_variance else 0) for j, s in enumerate(syms)}
        s_diff = abs(sp.N((stable - derived).subs(pt), 40))
        if s_diff > 1e-30 * max(1, abs(sp.N(derived.subs(pt), 40))):
            raise ArithmeticError(f"stable form of {what} differs from the derived one ({s_diff})")
    return stable


def _log_ratio() -> sp.Expr:
    """ln((a V + sb)/(a K0 + sb)), a = sigma_w^2 phi'(0)^2, as log(1 + a (V - K0)/(a K0 + sb)) (printed log1p)."""
    a = sigma_w2 * dphi0_sq
    return sp.log(1 + a * (target_variance - K0) / (a * K0 + sigma_b2))


def linearised_kernel_stable() -> sp.Expr:
    """The emitted K^(L) = K0 g + (sb/a)(g - 1), g = exp(L log(1 + rho^2 a)) (printed with expm1 and log1p):
    no cancellation of (1 + rho^2 a)^L - 1 at small rho and no intermediate overflow of the power."""
    a = sigma_w2 * dphi0_sq
    g = sp.exp(depth * sp.log(1 + rho**2 * a))
    return _check_equal(K0 * g + sigma_b2 / a * (g - 1), linearised_kernel(), "K^(L)")


def log_linearised_kernel_stable() -> sp.Expr:
    """ln K^(L) = u + ln(K0 + (sb/a)(1 - e^{-u})), u = L ln(1 + rho^2 a), a = sigma_w^2 phi'(0)^2 (printed with
    log1p and expm1): K^(L) itself exceeds float64 once u > 709.78 (e.g. rho^2 a = 0.0072 at L = 10^5); its
    logarithm is finite at any depth, and 1 - e^{-u} as -expm1(-u) does not cancel at small rho."""
    a = sigma_w2 * dphi0_sq
    u = depth * sp.log(1 + rho**2 * a)
    return _check_equal(u + sp.log(K0 + sigma_b2 / a * (1 - sp.exp(-u))), sp.log(linearised_kernel()), "ln K^(L)")


def rho_star_linearised_stable() -> sp.Expr:
    """The emitted rho* = sqrt((exp(ln(ratio)/L) - 1)/a) (printed with expm1, log1p): the printed
    ratio^(1/L) - 1 cancels at large L and V near K0."""
    a = sigma_w2 * dphi0_sq
    return _check_equal(sp.sqrt((sp.exp(_log_ratio() / depth) - 1) / a), rho_star_linearised(), "rho*")


def rho_star_large_depth_stable() -> sp.Expr:
    a = sigma_w2 * dphi0_sq
    return _check_equal(sp.sqrt(_log_ratio() / (depth * a)), rho_star_large_depth(), "rho*_inf")


@cache
def rho_star_large_depth() -> sp.Expr:
    """Leading large-L form of :func:`rho_star_linearised` (eq. 62): rho* ~ sqrt(log(ratio) / (L sigma_w^2
    phi'(0)^2))."""
    eps = sp.Symbol("epsilon", positive=True)  # 1/L
    r2 = sp.simplify(rho_star_linearised() ** 2).subs(depth, 1 / eps)
    lead = sp.series(r2, eps, 0, 2).removeO()
    return sp.sqrt(sp.simplify(lead.subs(eps, 1 / depth)))


# --------------------------------------------------------------------------- max entropy
@cache
def uniform_kl_erf() -> sp.Expr:
    """D_KL(p_uni || p_phi) for y = erf(h), h ~ N(0, sigma^2), y uniform on [-1, 1] (E4).

    -ln p_phi(y) = ln(sqrt(2 pi sigma^2)) + h^2/(2 sigma^2) + ln erf'(h) at h = erf^{-1}(y);
    E_uni[h^2] = 1/2 int h^2 erf'(h) dh is computed, not assumed.
    """
    h = sp.Symbol("h", real=True)
    dphi = sp.diff(sp.erf(h), h)
    mean_h2 = sp.integrate(h**2 * dphi, (h, -sp.oo, sp.oo)) / 2
    # E_uni[ln erf'(h)] = ln(2/sqrt(pi)) - E_uni[h^2]
    mean_log_dphi = sp.log(2 / sp.sqrt(sp.pi)) - mean_h2
    kl = sp.log(sp.Rational(1, 2)) + sp.log(sp.sqrt(2 * sp.pi * sigma2)) + mean_h2 / (2 * sigma2) + mean_log_dphi
    return sp.simplify(sp.expand_log(kl, force=True))


@cache
def max_entropy_variance() -> sp.Expr:
    """The stationary point of :func:`uniform_kl_erf` in sigma^2 (E5).

    It is a minimum of the divergence (the closest to uniform), at sigma^2 = 1/2,
    where erf(h) is exactly uniform.  The paper's E5 differentiates (1/2) ln sigma^2
    to 1/sigma^2 and so reports 1/4; see docs and tests.
    """
    (s,) = sp.solve(sp.diff(uniform_kl_erf(), sigma2), sigma2)
    if not sp.diff(uniform_kl_erf(), sigma2, 2).subs(sigma2, s) > 0:
        raise AssertionError("stationary point is not a minimum")
    return s


# --------------------------------------------------------------------------- fused recursions
#: state and per-element inputs of the fused recursions (vector mode: every array has the batch shape)
_K, _Ka, _Kb = sp.symbols("K K_a K_b", positive=True)
_Kab, _C, _chi, _eta, _Cab, _chiab, _etaab = sp.symbols("K_ab C chi eta C_ab chi_ab eta_ab", real=True)
_clip_lo, _clip_hi = sp.symbols("clip_lo clip_hi", real=True)
#: activations whose dual kernels are written into the recursions (the rest are evaluated by callbacks)
RECURSION_KINDS = ("erf", "relu", "callback")
_VECTOR = ("Vector mode: every state array and every row has the batch shape (a row constant over the layers "
           "is numpy.broadcast_to(x, (L,) + x.shape)); the number of layers is the length of the rows.")


def _diagonal_means(kind: str, K: sp.Symbol) -> tuple[sp.Expr, sp.Expr]:
    """(<phi^2>_K, <phi'^2 + phi phi''>_K) of an activation kind at the variance K: the symbolic expectation and its
    derivative in K (Price's theorem), resolved to the foundation's closed forms for erf and ReLU; for any other
    activation the two are callbacks (tabulated by the engine)."""
    from resprop.derive.expectation import mean, phi, resolve, z

    if kind in ("erf", "relu"):
        second_moment = mean(phi(z) ** 2, K)
        return resolve(second_moment, kind), resolve(sp.diff(second_moment, K), kind)
    return sp.Function("mean_phi_sq")(K), sp.Function("price_diag")(K)


def _pair_means(kind: str, Ka: sp.Symbol, Kb: sp.Symbol, Kab: sp.Symbol):
    """(<phi_a phi_b>, <phi'_a phi'_b>, definitions) at the kernel [[Ka, Kab], [Kab, Kb]] (Ka is Kb for two inputs
    of equal variance).  The definitions fix the evaluated forms to those of the generated closed forms
    (`resprop.generated.gaussian`): one division by sqrt(K_a) sqrt(K_b), so that a correlation pinned to the
    boundary K_ab = sqrt(K_a) sqrt(K_b) is exactly 1."""
    from resprop.derive import gaussian

    defs: tuple[tuple[sp.Symbol, sp.Expr], ...] = ()
    if kind == "erf":
        a, t = sp.Symbol("a", positive=True), sp.Symbol("t", real=True)
        defs = ((a, sp.sqrt(2 * Ka + 1) * sp.sqrt(2 * Kb + 1)), (t, 2 * Kab / a))
        dd = gaussian.erf_mean_dphi_dphi().subs({gaussian.K_aa: Ka, gaussian.K_bb: Kb, gaussian.K_ab: Kab})
        return 2 * sp.asin(t) / sp.pi, dd, defs
    if kind == "relu":
        sa, sb_, R, Pab = sp.symbols("s_a s_b R P_ab", positive=True)
        c = sp.Symbol("c", real=True)
        defs = ((sa, sp.sqrt(Ka)), (sb_, sp.sqrt(Kb)), (R, sa * sb_), (c, Kab / R), (Pab, Ka * Kb))
        arcsin = sp.asin(c)
        return (R * (2 * c * arcsin + sp.pi * c + 2 * sp.sqrt(1 - Kab**2 / Pab)) / (4 * sp.pi),
                (2 * arcsin + sp.pi) / (4 * sp.pi), defs)
    return sp.Function("mean_phi_phi")(Ka, Kb, Kab), sp.Function("mean_dphi_dphi")(Ka, Kb, Kab), defs


def field_theory_recursions(u: dict[str, sp.Expr] | None = None) -> list:
    """The fused depth recursions of the field theory (vector mode; :mod:`resprop.derive.recursion`).

    Built from the one-step updates read off the action (:func:`_one_step_updates`): C^(l) = residual(<phi phi>)
    (29, B9), K^(l) = K^(l-1) + C^(l) (30, B10), eta^(l) = rho^2 sigma_w^2 g chi^(l-1) (45, C15) and
    chi^(l) = chi^(l-1) + eta^(l) (47, C16), with the dual kernels of erf and ReLU written in and, for every other
    activation, evaluated by callbacks.  Per kind three recursions:

    * ``<kind>_diagonal``: K, C, chi, eta of one input (g = <phi'^2 + phi phi''>);
    * ``<kind>_pair``: the diagonal and the off-diagonal element of two inputs of equal variance
      [[K, K_ab], [K_ab, K]] (g = <phi'_a phi'_b> off the diagonal);
    * ``<kind>_two_inputs``: the off-diagonal element of two inputs of any variances, carrying both diagonals.

    The off-diagonal K_ab is clipped into [clip_lo, clip_hi] times the new bound sqrt(K_a^(l)) sqrt(K_b^(l)) (as
    evaluated, so that a pinned correlation K_ab / (sqrt(K_a) sqrt(K_b)) is exactly 1): clip_lo = -1, clip_hi = 1
    is the round-off guard |K_ab| <= bound (the correlation-one manifold is unstable, so last-ulp excursions would
    grow with depth), and clip_lo = clip_hi = +-1 pins an element that stays on the boundary exactly (identical
    inputs; collinear inputs of a positively homogeneous activation without bias).

    Last, ``kernel_fluctuations``: the O(depth) prefix-sum form of G_CC = G_{CC~} S_{C~C~} G_{C~C} (C18-C20) for
    one input, with the fourth cumulants of earlier layers summed by a callback.
    """
    from resprop.derive.recursion import Recursion
    from resprop.derive.results import Source

    u = _one_step_updates() if u is None else u

    def residual(mean):
        return u["residual"].subs(mean_phi_phi, mean)

    def eta_of(factor, chi):
        return (u["eta_factor"] * chi_prev).subs({price_factor: factor, chi_prev: chi})

    src = Source(PAPER, "29-30, 45, 47, B9-B10, C15-C16", "one-step updates read off the action")
    rows = (rho, sigma_w2, sigma_b2)
    pin_rows = rows + (_clip_lo, _clip_hi)
    out = []
    for kind in RECURSION_KINDS:
        callbacks = ("mean_phi_sq", "price_diag", "mean_phi_phi", "mean_dphi_dphi") if kind == "callback" else ()
        note = (("Callbacks f(l, K, out) (mean_phi_sq, price_diag) and f(l, K_aa, K_bb, K_ab, out) (mean_phi_phi, "
                 "mean_dphi_dphi) fill out with the activation's Gaussian expectations (the bare kernels of "
                 "resprop.numeric.engine.expectations).",) if callbacks else ()) + (_VECTOR,)
        what = "the activation's" if kind == "callback" else f"the {kind}"
        Cn, etan, Kn = sp.symbols("C_n eta_n K_n", real=True)
        E2, g2 = _diagonal_means(kind, _K)
        diag_defs = ((Cn, residual(E2)), (etan, eta_of(g2, _chi)), (Kn, _K + Cn))
        diag_state = ((_K, Kn), (_C, Cn), (_chi, _chi + etan), (_eta, etan))
        out.append(Recursion(
            f"{kind}_diagonal", f"K^(l), C^(l), chi^(l), eta^(l) of one input, {what} dual kernels", src,
            diag_state, rows=rows, callbacks=callbacks, definitions=diag_defs, notes=note,
            domain="K > 0, C, chi, eta real: arrays of the batch shape (C, eta: the last increments); rho, "
                   "sigma_w2, sigma_b2: rows (L, batch) >= 0 (sigma_w2 > 0)"))
        E, g, defs = _pair_means(kind, _K, _K, _Kab)
        Co, etao = sp.symbols("C_o eta_o", real=True)
        sn = sp.Symbol("s_n", positive=True)  # sqrt(K^(l)); the bound sqrt(K) sqrt(K), not K (see above)
        pair_defs = diag_defs + defs + ((Co, residual(E)), (etao, eta_of(g, _chiab)), (sn, sp.sqrt(Kn)))
        K_ab_new = sp.Min(sp.Max(_Kab + Co, _clip_lo * sn**2), _clip_hi * sn**2)
        out.append(Recursion(
            f"{kind}_pair", f"K, C, chi, eta of the diagonal and K_ab, C_ab, chi_ab, eta_ab of two inputs of equal "
                            f"variance, {what} dual kernels", src,
            diag_state + ((_Kab, K_ab_new), (_Cab, Co), (_chiab, _chiab + etao), (_etaab, etao)),
            rows=pin_rows, callbacks=callbacks, definitions=pair_defs, notes=note,
            domain="K > 0, |K_ab| <= K, C, chi, eta, C_ab, chi_ab, eta_ab real: arrays of the batch shape; rho, "
                   "sigma_w2, sigma_b2, clip_lo, clip_hi: rows (L, batch) (clip_lo, clip_hi = -1, 1, or +-1, +-1 "
                   "to pin K_ab = +-sqrt(K) sqrt(K))"))
        Ea, ga = _diagonal_means(kind, _Ka)
        Eb, gb = _diagonal_means(kind, _Kb)
        Kan, Kbn = sp.symbols("K_an K_bn", positive=True)
        E, g, defs = _pair_means(kind, _Ka, _Kb, _Kab)
        gen_defs = ((Kan, _Ka + residual(Ea)), (Kbn, _Kb + residual(Eb))) + defs + (
            (Co, residual(E)), (etao, eta_of(g, _chiab)))
        bound = sp.sqrt(Kan) * sp.sqrt(Kbn)
        K_ab_new = sp.Min(sp.Max(_Kab + Co, _clip_lo * bound), _clip_hi * bound)
        out.append(Recursion(
            f"{kind}_two_inputs", f"K_a, K_b and K_ab, C_ab, chi_ab, eta_ab of two inputs, {what} dual kernels",
            src, ((_Ka, Kan), (_Kb, Kbn), (_Kab, K_ab_new), (_Cab, Co), (_chiab, _chiab + etao),
                  (_etaab, etao)),
            rows=pin_rows, callbacks=callbacks, definitions=gen_defs, notes=note,
            domain="K_a, K_b > 0, |K_ab| <= sqrt(K_a K_b), C_ab, chi_ab, eta_ab real: arrays of the batch shape; "
                   "rho, sigma_w2, sigma_b2, clip_lo, clip_hi: rows (L, batch) (clip_lo, clip_hi = -1, 1, or "
                   "+-1, +-1 to pin K_ab = +-sqrt(K_a K_b))"))
    out.append(fluctuation_recursion())
    return out


def fluctuation_recursion():
    """Var C^(l) and Var K^(l) (C18-C20) for one input as a recursion over l = 1..L+1, times the width N.

    With w_l the weight of <phi^2> in C^(l) and c_l = w_l g_l (g_l = <phi'^2 + phi phi''> at K^(l-1)), the
    propagator G_{CC~} (43, C13) has the prefix sums S_l[k] = P_l / (N P_k), P_l = prod_(j<=l) (1 + c_j), so with
    u_k = w_k / P_k and the fourth cumulants kappa_(a,b) (35, C4)

        N Var K^(l) = P_l^2 Q_l,   Q_l = Q_(l-1) + 2 u_l R_l + u_l^2 kappa_(l-1,l-1),
        N Var C^(l) = w_l^2 kappa_(l-1,l-1) + 2 c_l w_l P_(l-1) R_l + c_l^2 P_(l-1)^2 Q_(l-1),
        R_l = sum_(k<l) u_k kappa_(k-1,l-1),

    the dense G12 B G12^T of the (L+2) x (L+2) matrices summed in closed form.  R_l is the one quantity that
    reaches back over all earlier layers: the callback ``cumulant_row_sum(l, u_l, out)`` returns it from the
    weights u_k it was passed at the earlier layers."""
    from resprop.derive.recursion import Recursion
    from resprop.derive.results import Source

    P, Q, vC, vK = sp.symbols("P Q var_C var_K", real=True)
    w, c, kappa = sp.symbols("w c kappa", real=True)
    Pn, uu, R, dQ, Qn = sp.symbols("P_n u R dQ Q_n", real=True)
    defs = ((Pn, P * (1 + c)), (uu, w / Pn), (R, sp.Function("cumulant_row_sum")(uu)),
            (dQ, 2 * uu * R + uu**2 * kappa), (Qn, Q + dQ))
    state = ((P, Pn), (Q, Qn), (vC, w**2 * kappa + 2 * c * w * P * R + c**2 * P**2 * Q), (vK, Pn**2 * Qn))
    return Recursion(
        "kernel_fluctuations", "N Var C^(l) and N Var K^(l) of one input from the prefix-sum form of G_CC",
        Source(PAPER, "C18-C20", "G_CC = G_{CC~} S_{C~C~} G_{C~C} summed in closed form"), state,
        sequences=(w, c, kappa), callbacks=("cumulant_row_sum",), definitions=defs,
        domain="P = 1, Q = var_C = var_K = 0 at l = 0: arrays (shape (1,) for one input); w (weight of <phi^2> in "
               "C^(l)), c = w g (g = <phi'^2 + phi phi''> at K^(l-1)), kappa = kappa_(l-1,l-1): (L+1,) arrays "
               "for l = 1..L+1",
        notes=("Callback cumulant_row_sum(l, u, out): out = sum_(k<l) u_k kappa_(k-1,l-1) over the u_k passed at "
               "the earlier layers (the caller keeps them; layer index l = 0 is layer 1).",))


# --------------------------------------------------------------------------- registry
def _one_step_updates() -> dict[str, sp.Expr]:
    """Extract the layer-independent one-step updates from a small symbolic network."""
    L = 3
    act1 = build_action(L, inputs=1)
    sol = saddle_point(act1)
    # residual kernel update: C^(l) = rho^2 (sigma_w^2 F(K^(l-1)) + sigma_b^2), any 1 <= l <= L
    updates = set()
    for l in range(1, L + 1):
        c = act1.C[l][0]
        Kl = sum(act1.C[k][0] for k in range(l))
        expr = sol[c].subs(act1.F["aa"](Kl), mean_phi_phi)
        updates.add(sp.simplify(expr))
    if len(updates) != 1:
        raise AssertionError(f"saddle point is not a layer-independent update: {updates}")
    residual = updates.pop()
    Kl = sum(act1.C[k][0] for k in range(L + 1))
    readout = sp.simplify(sol[act1.C[L + 1][0]].subs(act1.F["aa"](Kl), mean_phi_phi))
    input_k = sp.simplify(sol[act1.C[0][0]].subs(sp.Symbol("xx_aa"), overlap))

    def to_update(factors):
        # replace dF/dK at the layer kernel by the Price factor g; keep which layer kind it is
        return {(l <= L, sp.simplify(fac.doit().replace(
            lambda e: isinstance(e, (sp.Derivative, sp.Subs)), lambda e: price_factor)))
            for l, fac in enumerate(factors, start=1)}

    diag = to_update(response_update_from_propagator(act1, "aa"))
    offdiag = to_update(response_update_from_propagator(build_action(2, inputs=2), "ab"))
    if {f for _, f in offdiag} != {f for _, f in diag}:
        raise AssertionError(f"off-diagonal update differs in form from the diagonal one: {offdiag}")
    hidden = {f for inner, f in diag if inner}
    outer = {f for inner, f in diag if not inner}
    if len(hidden) != 1 or len(outer) != 1:
        raise AssertionError(f"response update not layer independent: {diag}")
    return {
        "residual": residual, "readout": readout, "input": input_k,
        "eta_factor": hidden.pop(), "out_factor": outer.pop(),
        "eta0_field": response_from_propagator(act1)[0],
    }


@cache
def derive_field_theory() -> Derivation:
    d = Derivation("fischer", "Field theory of residual networks", PAPER)
    u = _one_step_updates()
    d.declare(PARAMETERS)

    add = d.adder()

    at_L = {mean_phi_phi: DECLARED["mean_phi_phi"].tex("L"), price_factor: DECLARED["price_factor"].tex("L"),
            chi_prev: DECLARED["chi_prev"].tex("L")}
    add("input_kernel", u["input"], [sigma_w2_in, sigma_b2_in, d_in, overlap], "B10",
        "K^(0)_ab = sigma_w,in^2 / d_in x_a.x_b + sigma_b,in^2", sp.Symbol(r"K^{(0)}_{ab}"),
        statement=r"The input kernel is set by the read-in weights and biases and the overlap of the two inputs.")
    add("residual_kernel", u["residual"], [rho, sigma_w2, sigma_b2, mean_phi_phi], "29, B9",
        "C^(l) = rho^2 (sigma_w^2 <phi phi>_{K^(l-1)} + sigma_b^2)", sp.Symbol(DECLARED["C_new"].tex()), "recursion",
        statement=r"At the saddle point of the action, the kernel added by residual block $\ell$ is the "
                  r"Gaussian expectation of the activations under the previous layer's kernel, scaled by $\rho^{2}$.")
    add("kernel_update", K_prev + C_new, [K_prev, C_new], "30, B10",
        "K^(l) = K^(l-1) + C^(l)", sp.Symbol(DECLARED["K_prev"].tex(r"\ell")), "recursion",
        statement=r"The skip connections accumulate the residual kernels from layer to layer.")
    add("readout_kernel", u["readout"], [sigma_w2_out, sigma_b2_out, mean_phi_phi], "30, B10",
        "K^(L+1) = sigma_w,out^2 <phi phi>_{K^(L)} + sigma_b,out^2", sp.Symbol(r"K^{(L+1)}"), tex=at_L,
        statement=r"The readout kernel is the read-out layer's expectation of the activations under the last "
                  r"hidden kernel $K^{(L)}$.")
    add("residual_response", u["eta_factor"] * chi_prev,
        [rho, sigma_w2, price_factor, chi_prev], "45, C15",
        "eta^(l) = rho^2 sigma_w^2 g(K^(l-1)) chi^(l-1), read off G_{CC~} = -S_{C~C}^{-1}",
        sp.Symbol(DECLARED["eta_new"].tex()), "recursion",
        statement=r"The response $\eta^{(\ell)}$ of residual block $\ell$ to a perturbation of the input kernel, "
                  r"read off the propagator, is the accumulated response $\chi^{(\ell-1)}$ times the "
                  r"Price-theorem derivative (for two inputs, $\langle \phi'_{a} \phi'_{b} \rangle$ off the diagonal).")
    add("kernel_response", chi_prev + eta_new, [chi_prev, eta_new], "47, C16",
        "chi^(l) = chi^(l-1) + eta^(l)", sp.Symbol(DECLARED["chi_prev"].tex(r"\ell")), "recursion",
        statement=r"The response of the kernel $K^{(\ell)}$ is the sum of the residual blocks' responses.")
    add("output_response", u["out_factor"] * chi_prev, [sigma_w2_out, price_factor, chi_prev], "48, C17",
        "chi_out = sigma_w,out^2 g(K^(L)) chi^(L)", sp.Symbol(r"\chi^{\mathrm{out}}"), tex=at_L,
        statement=r"The response of the readout kernel is the last hidden response times the readout's "
                  r"Price-theorem derivative at $K^{(L)}$.")
    add("input_response_field", u["eta0_field"], [N, d_in], "C15",
        "eta^(0) = N/d_in in the field-theory normalisation (nu_0 = d_in/N); linear response gives 1",
        sp.Symbol(r"\eta^{(0)}"),
        statement=r"In the field-theory normalisation ($\nu_{0} = d_{\mathrm{in}}/N$) the input layer's response "
                  r"is $N/d_{\mathrm{in}}$; the linear-response route gives $1$.")
    add("fourth_cumulant", mean_phi_sq_phi_sq - mean_phi_sq_a * mean_phi_sq_b,
        [mean_phi_sq_phi_sq, mean_phi_sq_a, mean_phi_sq_b], "36, C5",
        "<phi_a^2, phi_b^2>^c, the entries of S_{C~C~}/(N w_k w_n)", sp.Symbol(r"\kappa_{ab}"),
        statement=r"The entries of the action's $\tilde{C}\tilde{C}$ block, divided by $N w_{k} w_{n}$, are the "
                  r"connected fourth moments of the activations.")
    add("linearised_kernel", linearised_kernel_stable(), [depth, rho, sigma_w2, sigma_b2, dphi0_sq, K0], "60",
        "K^(L) of the linearised network (exceeds float64 once L ln(1 + rho^2 sigma_w^2 phi'(0)^2) > 709.78: "
        "log_linearised_kernel gives its logarithm)", sp.Symbol(r"K^{(L)}"),
        statement=r"Linearising the activation at the origin, the kernel recursion is solved in closed form at "
                  r"depth $L$.")
    add("log_linearised_kernel", log_linearised_kernel_stable(), [depth, rho, sigma_w2, sigma_b2, dphi0_sq, K0],
        "60", "ln K^(L) of the linearised network, in log space: returns the logarithm because K^(L) itself "
        "overflows float64 at depth (finite at L = 10^5 and beyond)", sp.Symbol(r"\ln K^{(L)}"),
        statement=r"Its logarithm, finite in floating point at any depth although the kernel grows "
                  r"geometrically, is")
    grows = [Constraint(sp.Ge(target_variance, K0), "target_variance >= K0 (K^(L) only grows with depth)")]
    add("rho_star_linearised", rho_star_linearised_stable(),
        [depth, sigma_w2, sigma_b2, dphi0_sq, K0, target_variance], "61",
        "rho* from K^(L) = (V/2)^2", sp.Symbol(r"\rho^{*}"), constraints=grows,
        statement=r"The residual scaling that brings the linearised kernel at depth $L$ to the target "
                  r"$(\mathcal{V}/2)^{2}$ is")
    add("rho_star_large_depth", rho_star_large_depth_stable(),
        [depth, sigma_w2, sigma_b2, dphi0_sq, K0, target_variance], "62",
        "leading large-L form of rho*", sp.Symbol(r"\rho^{*}_{\infty}"), constraints=grows,
        statement=r"At large depth the optimal residual scaling decays as $L^{-1/2}$:")
    add("uniform_kl_erf", uniform_kl_erf(), [sigma2], "E4",
        "D_KL(uniform || law of erf(h)), h ~ N(0, sigma^2)", sp.Symbol(r"D_{\mathrm{KL}}"),
        statement=r"The Kullback--Leibler divergence of the uniform law on $[-1, 1]$ from the law of "
                  r"$\operatorname{erf}(h)$, $h \sim \mathcal{N}(0, \sigma^{2})$, is")
    add("max_entropy_variance", max_entropy_variance(), [], "E5",
        "minimiser of D_KL: sigma^2 = 1/2 (paper: 1/4 from a slip in E5)", sp.Symbol(r"\sigma_{*}^{2}"),
        note="corrected",
        statement=r"The divergence is minimal, and $\operatorname{erf}(h)$ exactly uniform, at the variance below "
                  r"(the paper's E5 reports $1/4$ after a slip in differentiating $\tfrac{1}{2}\ln\sigma^{2}$).")
    d.recursions = field_theory_recursions(u)
    return d


def erf_target_variance_check() -> sp.Expr:
    """<erf(h)^2> at the max-entropy variance equals 1/3, the second moment of U[-1, 1]."""
    from resprop.derive.expectation import mean, phi, resolve, z

    variance = sp.Symbol("variance", positive=True)
    return sp.nsimplify(resolve(mean(phi(z) ** 2, variance), "erf").subs(variance, max_entropy_variance()))
