"""Innocenti, Achour & Bogacz (2025): the equilibrated predictive-coding energy of linear networks.

A predictive-coding network (PCN) with layer maps A_1 ... A_L (effective linear maps, all width and
depth scalings folded in: A_1 = N^{-a_1} W^(1)/sqrt(D), A_l = N^{-a_l} W^(l), A_L = N^{-a_L} w^(L)/gamma,
or A_l = I + W^(l)/(L^alpha sqrt(N)) for a residual block) has the per-sample energy (eq. 2)

    F_mu(z) = 1/2 sum_{l=1}^{L} || z_l - A_l z_{l-1} ||^2,    z_0 = x clamped, z_L = y clamped.

What is derived here rather than typed in:

* **Scalar-width chains** (``chain_energy_by_minimisation``): for width 1 and small L (1..5) SymPy
  solves grad_z F = 0 (a linear system), substitutes and proves the result equals
  (y - f)^2 / (2 s) with s = 1 + sum_{l=2}^{L} prod_{k=l}^{L} w_k^2 (eqs 5-6).
* **The general form** (``lagrange_minimum``): the change of variables z -> e, e_l = z_l - A_l z_{l-1},
  is unit lower-triangular (Jacobian 1), and clamping z_L = y becomes the single linear constraint
  sum_k B_k e_k = r with r = y - f(x) and B_k = A_L A_{L-1} ... A_{k+1} (B_L = I).  Minimising
  1/2 sum ||e_k||^2 under it (Lagrange, solved by SymPy with symbolic B_k) gives
  e_k* = B_k^T S^{-1} r and F* = 1/2 r^T S^{-1} r, S = I + sum_{k<L} B_k B_k^T.  For scalar output S is
  the scalar s(theta) of eqs 6, 25 and 104, so F* = MSE / s averaged over the data (eqs 5, 24).
  ``width2_L3_residual`` checks the matrix case independently: a width-2 network with L = 3 weight
  matrices (resprop depth 1) and 14 symbolic weights, activities eliminated by solving the 4x4 stationarity system.
* **Eq. 25 and eq. 104-105 are the same formula**: B_k with the scalings of eqs 20-23 gives
  gamma^{-2} N^{-2 sum a} ||W^(L:l)||^2 (eq. 25); with the residual maps of eqs 95-98 it gives
  ||p^(L:l)||^2 / (gamma_0^2 N^2) (eqs 104-105), the first-layer weights never entering.
* **Exact expectation of s - 1 at initialisation**: E||v (skip I + c W)||^2 = ||v||^2 (skip + c^2 n sigma^2)
  for W_ij iid N(0, sigma^2) independent of v (``row_norm_gain``, expanded for n = 2, 3 and matched to
  the general n), so E[s] - 1 is a geometric sum: (L - 1)/(gamma_0^2 N^{2d}) for MLPs satisfying
  Desideratum 1 (eqs 16, 45-47 with the constant) and
  L^{2 alpha} ((1 + L^{-2 alpha})^{L-1} - 1)/(gamma_0^2 N^{2d}) for residual networks (eqs 104-107);
  at alpha = 1/2 the large-depth limit is (e - 1) L/(gamma_0^2 N): eq. 19's Theta(L/N) with its
  constant e - 1.
* **PC vs BP gradient angle** (``pc_bp_cosine_expr``): the quotient rule on F* = L/s (eq. 26) makes
  the PC gradient (1/s) grad L - (L/s^2) grad s; with rho = L ||grad s|| / (s ||grad L||) and theta the
  angle between grad L and grad s, cos(PC, BP) = (1 - rho cos theta)/sqrt(1 - 2 rho cos theta + rho^2),
  and 1 - cos = rho^2 sin^2(theta)/2 + O(rho^3): the angle closes at second order in rho.

Discrepancies with the paper (each pinned by a test in tests/test_predictive_coding.py):

* Eq. 105 writes the product as prod_l^{L-1} with the running index equal to the fixed index l; the
  product meant is prod_{k=l}^{L-1} (I + W^(k)/(L^alpha sqrt N)), ordered with k = L-1 leftmost
  (``test_s_theta_is_eq104_for_resnets`` codes eq. 104 that way from raw weights).
* Eq. 107 (refined, not wrong) writes s - 1 = Theta(1/N + L/N) from Theta(N) per residual path (eq. 106);
  the exact expectation at alpha = 1/2 is L((1 + 1/L)^{L-1} - 1)/(gamma_0^2 N) -> (e - 1) L/(gamma_0^2 N),
  since path l has E||p^(L:l)||^2 = N (1 + 1/L)^{L-l}; at finite L the local exponent in L exceeds 1
  (about 1.2 over L = 4..64, 1.01 over L = 64..1024).
* Eqs 53-55 count the sum over N in M_ij = sum_k a_i b_k C_kj as a factor N; at initialisation its
  terms have random signs, so it is sqrt(N) and ds/dW_ij = Theta(L N^{-2d-a-1}) (N^{-5/2} under
  mean-field, N^{-1} under SP), not Theta(L N^{-2d-a-1/2}) (eq. 55).  Consequently the PC-specific
  terms r (eq. 72) and D (eq. 93) vanish relative to the BP terms as N^{-1} rather than N^{-1/2} under
  mean-field: numerically (L = 5) rho = L ||grad s|| / (s ||grad L||) = Theta(1/N) and 1 - cos = Theta(N^{-2}).
  Eq. 110 (residual networks, M_ij = Theta(1) since P ~ I) is consistent with this.

Depth: everything here is written in the paper's L, the number of weight matrices (read-in, L - 2 hidden or
residual layers, readout), as eqs 5-6, 16, 19, 25 and 104-107 are.  resprop's public ``depth`` (the layers after the
read-in, readout not counted) is L - 2; resprop.numeric.theories.abcd.predictive_coding converts at its boundary.
The width-1 chain helpers take ``n_weights`` = L (1..5; L = 1 has no hidden activity).

Notes (not errors): eqs 6 and 25 sum over l = 2..L, i.e. over the error layers k = l - 1 = 1..L-1 of the
derivation (the first layer's error is the l = 2 term); eq. 16's N^{-2} is gamma^{-2} N^{-2 a_L} with
gamma = gamma_0 sqrt(N) and a_L = 1/2.
"""
from __future__ import annotations

from functools import cache

import sympy as sp

from resprop.derive.results import Constraint, Derivation
from resprop.derive.symbols import Parameter

PAPER = "innocenti2025"

_P = Parameter
#: every input of the results below, declared once (symbol, domain, the paper's LaTeX, meaning)
PARAMETERS = (
    _P("mse_loss", "[0, inf)", r"\mathcal{L}", "MSE loss L(theta) of eq. 1"),
    _P("s", "[1, inf)", "s", "equilibrated-energy rescaling s(theta)"),
    _P("x", "real", "x", "scalar input"),
    _P("y", "real", "y", "scalar target"),
    _P("w_1", "real", r"w_{1}", "layer map of layer 1 (width-1 chain)"),
    _P("w_2", "real", r"w_{2}", "layer map of layer 2"),
    _P("w_3", "real", r"w_{3}", "layer map of layer 3"),
    _P(
        "L", "[2, inf)", "L", "number of weight matrices L (the paper's depth; resprop depth = L - 2)", integer=True
    ),  # same symbol as resprop.derive.theories.fischer.depth
    _P("N", "[1, inf)", "N", "width N"),  # same symbol as resprop.derive.theories.fischer.N
    _P("gamma_0", "(0, inf)", r"\gamma_{0}", "output-scale constant gamma_0 (gamma = gamma_0 N^d)"),
    _P("d", "[0, inf)", "d", "output-scale exponent d (1/2 mean-field and muP, 0 SP and NTK)"),
    _P("alpha_L", "[0, inf)", r"\alpha", "depth exponent alpha of the residual branches"),
    _P("rho_pc", "[0, inf)", r"\rho", "rho = L ||grad s|| / (s ||grad L||)"),
    _P("theta_gs", "[0, pi]", r"\theta", "angle between grad L and grad s"),
)
mse, s, x, y, w1, w2, w3, L, N, gamma0, d_exp, alpha, rho, theta = (p.symbol for p in PARAMETERS)


# --------------------------------------------------------------------------- equilibrated energy
def chain_weights(n_weights: int) -> list[sp.Symbol]:
    return list(sp.symbols(f"w_1:{n_weights + 1}", real=True))


def chain_energy_by_minimisation(n_weights: int, weights=None) -> sp.Expr:
    """Per-sample PC energy of a width-1 linear chain with L = ``n_weights`` weights, minimised over its L - 1
    hidden activities."""
    w = chain_weights(n_weights) if weights is None else list(weights)
    z = [x] + list(sp.symbols(f"z_1:{n_weights}", real=True)) + [y]
    energy = sum((z[l] - w[l - 1] * z[l - 1]) ** 2 for l in range(1, n_weights + 1)) / 2
    hidden = z[1:-1]
    if hidden:
        sol = sp.solve([sp.diff(energy, v) for v in hidden], hidden, dict=True)[0]
        energy = energy.subs(sol)
    return sp.factor(sp.cancel(sp.together(energy)))


def chain_rescaling(n_weights: int, weights=None) -> sp.Expr:
    """s = 1 + sum_{l=2}^{L} prod_{k=l}^{L} w_k^2 (eq. 6 for width 1), L = ``n_weights``."""
    w = chain_weights(n_weights) if weights is None else list(weights)
    return 1 + sum(sp.prod([w[k - 1] ** 2 for k in range(l, n_weights + 1)]) for l in range(2, n_weights + 1))


def chain_energy_closed_form(n_weights: int, weights=None) -> sp.Expr:
    w = chain_weights(n_weights) if weights is None else list(weights)
    return (y - sp.prod(w) * x) ** 2 / (2 * chain_rescaling(n_weights, w))


@cache
def chain_energy(n_weights: int) -> sp.Expr:
    """Eqs 5-6 for width 1 and L = ``n_weights``, emitted only after the minimisation reproduces the closed form."""
    w = chain_weights(n_weights)
    if sp.cancel(chain_energy_by_minimisation(n_weights, w) - chain_energy_closed_form(n_weights, w)) != 0:
        raise ArithmeticError(f"L = {n_weights} chain: minimised energy differs from (y - f)^2 / (2 s)")
    return chain_energy_closed_form(n_weights, w)


@cache
def lagrange_minimum(blocks: int = 4) -> tuple[sp.Expr, tuple[sp.Expr, ...]]:
    """min 1/2 sum_k e_k^2 subject to sum_k b_k e_k = r, for scalar blocks b_k: (F*, e*).

    Stationarity of 1/2 sum e^2 - lam (sum b e - r) with SymPy's solver; returns the minimum and the
    minimiser, to be compared with r^2 / (2 sum b^2) and e_k* = b_k r / sum b^2.
    """
    b = sp.symbols(f"b_1:{blocks + 1}", real=True)
    e = sp.symbols(f"e_1:{blocks + 1}", real=True)
    lam, r = sp.symbols("lambda r", real=True)
    lag = sum(ek**2 for ek in e) / 2 - lam * (sum(bk * ek for bk, ek in zip(b, e)) - r)
    sol = sp.solve([sp.diff(lag, v) for v in (*e, lam)], (*e, lam), dict=True)[0]
    fmin = sp.factor(sp.simplify(sum(ek**2 for ek in e).subs(sol) / 2))
    return fmin, tuple(sp.simplify(sol[ek]) for ek in e)


def lagrange_residual(blocks: int = 4) -> sp.Expr:
    """F* - r^2/(2 sum b^2) plus the squared minimiser mismatch; zero when the general form holds."""
    fmin, e_star = lagrange_minimum(blocks)
    b = sp.symbols(f"b_1:{blocks + 1}", real=True)
    r = sp.Symbol("r", real=True)
    norm = sum(bk**2 for bk in b)
    return sp.simplify(fmin - r**2 / (2 * norm)) + sum(sp.simplify(es - bk * r / norm) ** 2
                                                       for es, bk in zip(e_star, b))


@cache
def width2_L3_residual() -> sp.Expr:
    """Width-2 linear PCN with L = 3 weight matrices (one hidden layer after the read-in: resprop depth 1) and
    symbolic weights: minimised energy minus (y - f)^2/(2 s)."""
    A1 = sp.Matrix(2, 1, sp.symbols("p0:2", real=True))
    A2 = sp.Matrix(2, 2, sp.symbols("q0:4", real=True))
    A3 = sp.Matrix(1, 2, sp.symbols("u0:2", real=True))
    z1 = sp.Matrix(2, 1, sp.symbols("z1_0:2", real=True))
    z2 = sp.Matrix(2, 1, sp.symbols("z2_0:2", real=True))
    errs = (z1 - A1 * x, z2 - A2 * z1, sp.Matrix([y]) - A3 * z2)
    energy = sum((e.T * e)[0] for e in errs) / 2
    hidden = list(z1) + list(z2)
    sol = sp.solve([sp.diff(energy, v) for v in hidden], hidden, dict=True)[0]
    f = (A3 * A2 * A1)[0] * x
    B2, B1 = A3, A3 * A2  # B_k = A_L ... A_{k+1}
    s_mat = 1 + (B2 * B2.T)[0] + (B1 * B1.T)[0]
    return sp.cancel(sp.together(energy.subs(sol) - (y - f) ** 2 / (2 * s_mat)))


# --------------------------------------------------------------------------- expectation at init
def row_norm_gain(n: int, skip: bool) -> sp.Expr:
    """E||v (skip I + c W)||^2 / ||v||^2 for W_ij iid N(0, sigma^2), by expanding for explicit n."""
    c, sigma2 = sp.symbols("c sigma2", positive=True)
    v = sp.Matrix(1, n, sp.symbols(f"v0:{n}", real=True))
    W = sp.Matrix(n, n, sp.symbols(f"W0:{n * n}", real=True))
    out = v * ((sp.eye(n) if skip else sp.zeros(n)) + c * W)
    poly = sp.Poly(sp.expand((out * out.T)[0]), *W)
    expect = 0  # Gaussian moments: E W_ij = 0, E W_ij^2 = sigma^2, distinct entries independent
    for monom, coeff in poly.terms():
        powers = [p for p in monom if p]
        if all(p == 2 for p in powers):
            expect += coeff * sigma2 ** len(powers)
        elif not powers:
            expect += coeff
        elif any(p % 2 for p in powers):
            continue
        else:  # pragma: no cover - degree-2 forms have no other monomials
            raise ArithmeticError("unexpected monomial")
    return sp.simplify(expect / (v * v.T)[0])


@cache
def gain_formula(skip: bool) -> sp.Expr:
    """skip + c^2 n sigma^2, emitted after checking it against the explicit n = 2, 3 expansions."""
    c, sigma2 = sp.symbols("c sigma2", positive=True)
    n = sp.Symbol("n", positive=True, integer=True)
    general = (1 if skip else 0) + c**2 * n * sigma2
    for k in (2, 3):
        if sp.simplify(row_norm_gain(k, skip) - general.subs(n, k)) != 0:
            raise ArithmeticError(f"row-norm gain at n = {k} differs from skip + c^2 n sigma^2")
    return general


def expected_s_minus_one(out_gain: sp.Expr, layer_gain: sp.Expr, n_weights: sp.Expr = L) -> sp.Expr:
    """E[s] - 1 = sum_{k=1}^{L-1} E||B_k||^2 = out_gain sum_{j=0}^{L-2} layer_gain^j (independent layers), L =
    ``n_weights`` (the paper's L; the sum has resprop's depth + 1 = L - 1 terms)."""
    j = sp.Symbol("j", integer=True, nonnegative=True)
    return sp.simplify(sp.summation(out_gain * layer_gain**j, (j, 0, n_weights - 2)))


def output_gain() -> sp.Expr:
    """E||A_L||^2 = N * (N^{-a_L}/gamma)^2 N^{-b_L} = gamma_0^{-2} N^{-2d} under 2 a_L + b_L = 1."""
    a_L = sp.Symbol("a_L", real=True)
    g = gain_formula(False).subs({sp.Symbol("c", positive=True): N ** (-a_L) / (gamma0 * N**d_exp),
                                  sp.Symbol("sigma2", positive=True): N ** (-(1 - 2 * a_L)),
                                  sp.Symbol("n", positive=True, integer=True): N})
    return sp.simplify(sp.powsimp(g, force=True))


def hidden_gain(residual: bool) -> sp.Expr:
    """Per-layer gain of the backward row vector under Desideratum 1 (2a + b = 1)."""
    a = sp.Symbol("a", real=True)
    c = N ** (-a) * (L ** (-alpha) if residual else 1)
    g = gain_formula(residual).subs({sp.Symbol("c", positive=True): c, sp.Symbol("sigma2", positive=True):
                                     N ** (-(1 - 2 * a)), sp.Symbol("n", positive=True, integer=True): N})
    return sp.simplify(sp.powsimp(sp.expand(g), force=True))


@cache
def s_minus_one_mlp_mean() -> sp.Expr:
    return sp.simplify(expected_s_minus_one(output_gain(), hidden_gain(False)))


@cache
def s_minus_one_resnet_mean() -> sp.Expr:
    """The residual blocks are layers 2..L-1; layer 1 (embedding) never enters s.

    SymPy's geometric sum comes out as (-L^{2 alpha (L-1)} + (L^{2 alpha} + 1)^{L-1}) / L^{2 alpha (L-2)} ...,
    which overflows in floating point at large L; the emitted form q_out ((1 + q)^{L-1} - 1)/q with
    q = L^{-2 alpha} is checked equal to it first.
    """
    derived = expected_s_minus_one(output_gain(), hidden_gain(True))
    q = L ** (-2 * alpha)
    compact = output_gain() * ((1 + q) ** (L - 1) - 1) / q
    if sp.simplify(sp.powsimp(sp.expand_power_base(derived - compact, force=True), force=True)) != 0:
        pts = [{L: 3 + k, alpha: sp.Rational(k + 1, 3), N: 5, gamma0: sp.Rational(3, 2), d_exp: sp.Rational(1, 2)}
               for k in range(4)]
        if any(abs(sp.N((derived - compact).subs(p), 30)) > 1e-25 for p in pts):
            raise ArithmeticError("compact residual E[s] - 1 differs from the geometric sum")
    return compact


def s_minus_one_resnet_mean_stable() -> sp.Expr:
    """The emitted form q_out expm1((L - 1) log1p(q))/q: (1 + q)^{L-1} - 1 cancels to 0 in float64 when q is
    below the round-off of 1 (large L or alpha), while the exact value is about (L - 1) q."""
    q = L ** (-2 * alpha)
    stable = output_gain() * (sp.exp((L - 1) * sp.log(1 + q)) - 1) / q
    if sp.simplify(sp.powsimp(stable - s_minus_one_resnet_mean(), force=True)) != 0:
        raise ArithmeticError("log-space residual E[s] - 1 differs from the compact form")
    return stable


def log_s_minus_one_resnet() -> sp.Expr:
    """ln(E[s] - 1) = ln q_out + 2 alpha ln L + u + ln(1 - e^{-u}), u = (L - 1) log(1 + q), q = L^{-2 alpha}
    (printed with log1p and expm1): E[s] - 1 grows like (1 + q)^L and exceeds float64 at depth for alpha < 1/2
    (at L = 10^5 once alpha < 0.22); its logarithm does not.  Checked equal to the log of the compact form."""
    q = L ** (-2 * alpha)
    u = (L - 1) * sp.log(1 + q)
    stable = sp.expand_log(sp.log(output_gain()), force=True) + 2 * alpha * sp.log(L) + u + sp.log(1 - sp.exp(-u))
    exact = sp.log(s_minus_one_resnet_mean())
    for k in range(4):
        pt = {L: 3 + 5 * k, alpha: sp.Rational(k + 1, 4), N: 7 + k, gamma0: sp.Rational(3, 2 + k),
              d_exp: sp.Rational(k, 3)}
        if abs(sp.N((stable - exact).subs(pt), 40)) > 1e-30:
            raise ArithmeticError("log-space residual E[s] - 1 differs from the log of the compact form")
    return stable


@cache
def s_minus_one_resnet_large_depth() -> sp.Expr:
    """lim_{L->oo} E[s - 1] / L at alpha = 1/2, times L."""
    ratio = sp.limit(s_minus_one_resnet_mean().subs(alpha, sp.Rational(1, 2)) / L, L, sp.oo)
    return sp.simplify(ratio * L)


# --------------------------------------------------------------------------- gradient angle
def pc_gradient_coefficients() -> tuple[sp.Expr, sp.Expr]:
    """d(L/s)/dtheta = c_L dL/dtheta + c_s ds/dtheta (quotient rule, eq. 26): returns (c_L, c_s)."""
    t = sp.Symbol("t", real=True)
    Lf, sf = sp.Function("Lf")(t), sp.Function("sf")(t)
    grad = sp.diff(Lf / sf, t)
    dL, ds = sp.Symbol("dL"), sp.Symbol("ds")
    grad = grad.subs({sp.Derivative(Lf, t): dL, sp.Derivative(sf, t): ds}).subs({Lf: mse, sf: s})
    grad = sp.expand(grad)
    return sp.simplify(grad.coeff(dL)), sp.simplify(grad.coeff(ds))


@cache
def pc_bp_cosine_expr() -> sp.Expr:
    """cos(grad F*, grad L) from the Gram matrix of (grad L, grad s), written in rho and theta.

    With |grad L| = 1 (cosines are scale free), |grad s| = rho s / L_mse and <grad L, grad s> = |grad s| cos theta.
    """
    cL, cs = pc_gradient_coefficients()
    ds_norm = rho * s / mse
    gram = sp.Matrix([[1, ds_norm * sp.cos(theta)], [ds_norm * sp.cos(theta), ds_norm**2]])
    pc, bp = sp.Matrix([cL, cs]), sp.Matrix([1, 0])

    def dot(u, v):
        return (u.T * gram * v)[0]

    cos = dot(pc, bp) / sp.sqrt(dot(pc, pc) * dot(bp, bp))
    return sp.simplify(sp.factor(cos))


def pc_bp_cosine_stable() -> sp.Expr:
    """The emitted form N/sqrt(N^2 + rho^2 sin^2 theta), N = (1 - rho) + 2 rho sin^2(theta/2) = 1 - rho cos theta:
    no cancellation of 1 - cos theta near rho = 1, theta = 0 (checked equal to the derived cosine).  SymPy flattens
    N to 2 rho sin^2 - rho + 1; the kernel printer computes the 1 - rho of such a sum first
    (``KernelPrinter.explicit_forms``), or (2 rho sin^2 - rho) + 1 would cancel to 0 at rho = 1, theta = 1e-10."""
    num = (1 - rho) + 2 * rho * sp.sin(theta / 2) ** 2
    stable = num / sp.sqrt(num**2 + rho**2 * sp.sin(theta) ** 2)
    derived = pc_bp_cosine_expr()
    pts = [{rho: sp.Rational(k + 1, 3), theta: sp.Rational(2 * k + 1, 5)} for k in range(5)]
    if any(abs(sp.N((stable - derived).subs(p), 40)) > 1e-30 for p in pts) or \
            sp.simplify(sp.expand_trig(num - (1 - rho * sp.cos(theta)))) != 0:
        raise ArithmeticError("stable PC-BP cosine differs from the derived one")
    return stable


def pc_bp_one_minus_cosine_series() -> sp.Expr:
    return sp.simplify(sp.series(1 - pc_bp_cosine_expr(), rho, 0, 3).removeO())


# --------------------------------------------------------------------------- registry
def derive_predictive_coding() -> Derivation:
    dv = Derivation("predictive_coding", "Equilibrated predictive-coding energy of linear networks", PAPER)
    dv.declare(PARAMETERS)

    add = dv.adder()

    if lagrange_residual() != 0:
        raise ArithmeticError("Lagrange minimum differs from r^2 / (2 sum b^2)")
    add("equilibrated_energy", mse / s, [mse, s], "5, 24",
        "F* = L(theta)/s(theta): PC energy at the activity equilibrium of a linear network", r"\mathcal{F}^{*}")
    add(
        "chain_energy_L2",
        chain_energy(2).subs(dict(zip(chain_weights(2), (w1, w2)))),
        [x, y, w1, w2],
        "5-6",
        "per-sample F* of a width-1 chain with L = 2 weights (one hidden unit, resprop depth 0): "
        "(y - w2 w1 x)^2 / (2 (1 + w2^2))",
        r"\mathcal{F}^{*}_{2}",
        note="derived by minimising eq. 2",
    )
    add("chain_energy_L3", chain_energy(3).subs(dict(zip(chain_weights(3), (w1, w2, w3)))),
        [x, y, w1, w2, w3], "5-6", "per-sample F* of a width-1 chain with L = 3 weights (two hidden units, resprop "
        "depth 1)", r"\mathcal{F}^{*}_{3}",
        note="derived by minimising eq. 2")
    add("s_minus_one_mlp_init", s_minus_one_mlp_mean(), [L, N, gamma0, d_exp], "16, 45-47",
        "E[s] - 1 at initialisation for linear MLPs under Desideratum 1 (exact)", r"\mathbb{E}[s] - 1",
        note="exact expectation")
    add("s_minus_one_resnet_init", s_minus_one_resnet_mean_stable(), [L, N, gamma0, d_exp, alpha], "104-107",
        "E[s] - 1 at initialisation for linear residual networks (exact; exceeds float64 at depth for alpha < 1/2: "
        "log_s_minus_one_resnet_init gives its logarithm)", r"\mathbb{E}[s] - 1",
        note="exact expectation")
    add("log_s_minus_one_resnet_init", log_s_minus_one_resnet(), [L, N, gamma0, d_exp, alpha], "104-107",
        "ln(E[s] - 1) at initialisation for linear residual networks, in log space: returns the logarithm because "
        "E[s] - 1 overflows float64 at depth for alpha < 1/2", r"\ln(\mathbb{E}[s] - 1)", note="exact expectation")
    add("s_minus_one_resnet_large_depth", s_minus_one_resnet_large_depth(), [L, N, gamma0, d_exp], "19, 107",
        "(e - 1) L/(gamma_0^2 N^{2d}): large-depth limit of E[s] - 1 at alpha = 1/2 (d = 1/2: mean-field)",
        r"\mathbb{E}[s] - 1",
        note="constant e - 1 derived")
    add(
        "pc_bp_cosine",
        pc_bp_cosine_stable(),
        [rho, theta],
        "26",
        "cosine similarity of the PC (grad F*) and BP (grad L) weight gradients (cancellation-free: "
        "1 - rho cos theta as (1 - rho) + 2 rho sin^2(theta/2), exact near rho = 1, theta = 0)",
        r"\cos(\nabla \mathcal{F}^{*}, \nabla \mathcal{L})",
        note="law of cosines on eq. 26",
        constraints=[
            Constraint(
                sp.Or(sp.Ne(rho, 1), sp.Ne(theta, 0)),
                "rho_pc != 1 or theta_gs != 0 (the PC gradient vanishes there: no angle)",
            )
        ],
    )
    add(
        "pc_bp_one_minus_cosine_small_rho",
        pc_bp_one_minus_cosine_series(),
        [rho, theta],
        "26",
        "1 - cos(PC, BP) to second order in rho",
        r"1 - \cos(\nabla \mathcal{F}^{*}, \nabla \mathcal{L})",
        note="series in rho",
    )
    dv.state(STATEMENTS)
    return dv


STATEMENTS = {
    "equilibrated_energy": r"At the equilibrium of the activities, the predictive-coding energy of a linear network is "
    r"the loss rescaled by $s$.",
    "chain_energy_L2": r"Minimising the energy of eq.~(2) over the hidden unit of a width-one chain gives",
    "chain_energy_L3": r"Minimising over both hidden units of a width-one chain with two hidden units gives",
    "s_minus_one_mlp_init": r"At initialisation under Desideratum~1 the expected rescaling of a linear MLP "
    "exceeds one by",
    "s_minus_one_resnet_init": r"For a linear residual network with branches scaled by $L^{-\alpha}$, the expected "
    r"rescaling at initialisation exceeds one by",
    "log_s_minus_one_resnet_init": r"Its logarithm, finite in floating point at any depth, is",
    "s_minus_one_resnet_large_depth": r"At $\alpha = 1/2$ and large depth, $\mathbb{E}[s] - 1$ grows linearly in $L$ "
    r"with the constant $e - 1$.",
    "pc_bp_cosine": r"By the law of cosines on eq.~(26), the cosine similarity of the predictive-coding and "
    r"backpropagation gradients depends only on $\rho$ and $\theta$.",
    "pc_bp_one_minus_cosine_small_rho": r"For small $\rho$ the two gradients are aligned up to second order.",
}
