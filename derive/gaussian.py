"""Shared Gaussian toolbox: moments, Price's theorem, closed-form dual kernels.

Every closed form here is *derived*: the erf kernel by integrating Price's
theorem along the covariance from the independent point, the ReLU arc-cosine
kernels of degree 0, 1, 2 (Cho & Saul 2009) the same way starting from the
orthant density.  Tests compare the derived forms with the textbook forms and
with quadrature.

Notation: a centred bivariate Gaussian (u, v) with Var u = K_aa, Var v = K_bb,
Cov(u, v) = K_ab.
"""
from __future__ import annotations

from functools import cache
from itertools import product

import sympy as sp

from resprop.derive.results import Derivation, Result, Source
from resprop.derive.symbols import Parameter

#: the inputs of the closed forms, declared once (symbol, domain, LaTeX, meaning)
PARAMETERS = (
    Parameter("K_aa", "(0, inf)", r"K_{aa}", "variance of the first Gaussian argument"),
    Parameter("K_bb", "(0, inf)", r"K_{bb}", "variance of the second Gaussian argument"),
    Parameter("K_ab", "|K_ab| <= sqrt(K_aa K_bb)", r"K_{ab}", "covariance of the two arguments"),
    Parameter("K", "(0, inf)", "K", "variance of the Gaussian argument"),
)
K_aa, K_bb, K_ab, K = (p.symbol for p in PARAMETERS)
_r = sp.Symbol("r", real=True)  # correlation coefficient
_u = sp.Symbol("u", real=True)

PAIR_INPUTS = tuple(p.input() for p in PARAMETERS[:3])
DIAG_INPUTS = (PARAMETERS[3].input(),)


# --------------------------------------------------------------------------- moments
def gaussian_moment(px: int, py: int, kxx: sp.Expr, kyy: sp.Expr, kxy: sp.Expr) -> sp.Expr:
    """E[x^px y^py] for centred (x, y) with covariance [[kxx, kxy], [kxy, kyy]].

    Obtained by differentiating the moment-generating function exp(t^T K t / 2).
    """
    t1, t2 = sp.symbols("t1 t2")
    mgf = sp.exp((kxx * t1**2 + 2 * kxy * t1 * t2 + kyy * t2**2) / 2)
    return sp.expand(sp.diff(mgf, t1, px, t2, py).subs({t1: 0, t2: 0}))


def polynomial_expectation(f: sp.Expr, xs: tuple[sp.Symbol, sp.Symbol], kxx, kyy, kxy) -> sp.Expr:
    """E[f(x, y)] for a polynomial f, term by term with :func:`gaussian_moment`."""
    poly = sp.Poly(sp.expand(f), *xs)
    return sp.expand(sum(coeff * gaussian_moment(i, j, kxx, kyy, kxy) for (i, j), coeff in poly.terms()))


def price_theorem_residuals(degree: int) -> dict[str, sp.Expr]:
    """Prove Price's theorem (Fischer et al. App. D, eq. D4) for every polynomial of a degree.

    f is the general bivariate polynomial of total degree ``degree`` with
    symbolic coefficients.  Returns the three residuals

      dE[f]/dK_xx - 1/2 E[f_xx],  dE[f]/dK_yy - 1/2 E[f_yy],  dE[f]/dK_xy - E[f_xy],

    which are identically zero.  The last has no 1/2 because K_xy = K_yx enter
    together; per independent matrix entry it is 1/2 E[f_xy], as D4 states.
    (Eq. 38 of the paper omits the 1/2 of D4.)
    """
    x, y = sp.symbols("x y", real=True)
    kxx, kyy = sp.symbols("k_xx k_yy", positive=True)
    kxy = sp.Symbol("k_xy", real=True)
    coeffs = {}
    f = 0
    for i, j in product(range(degree + 1), repeat=2):
        if i + j <= degree:
            a = sp.Symbol(f"a_{i}_{j}")
            coeffs[(i, j)] = a
            f += a * x**i * y**j
    mean = lambda g: polynomial_expectation(g, (x, y), kxx, kyy, kxy)  # noqa: E731
    ef = mean(f)
    return {
        "K_xx": sp.expand(sp.diff(ef, kxx) - mean(sp.diff(f, x, 2)) / 2),
        "K_yy": sp.expand(sp.diff(ef, kyy) - mean(sp.diff(f, y, 2)) / 2),
        "K_xy": sp.expand(sp.diff(ef, kxy) - mean(sp.diff(f, x, y))),
    }


# --------------------------------------------------------------------------- erf
def _erf_scale() -> sp.Expr:
    return sp.sqrt(1 + 2 * K_aa) * sp.sqrt(1 + 2 * K_bb)


@cache
def erf_mean_dphi_dphi() -> sp.Expr:
    """<erf'(u) erf'(v)> = (4/pi) E[exp(-u^2 - v^2)] = (4/pi) / sqrt(det(I + 2K)).

    The Gaussian integral int exp(-w^T A w / 2) dw = 2 pi / sqrt(det A) with
    A = K^{-1} + 2 I, divided by the normalisation 2 pi sqrt(det K).
    """
    Kmat = sp.Matrix([[K_aa, K_ab], [K_ab, K_bb]])
    A = Kmat.inv() + 2 * sp.eye(2)
    e = 1 / sp.sqrt(sp.factor(A.det() * Kmat.det()))
    return sp.simplify((sp.Integer(4) / sp.pi) * e)


@cache
def erf_mean_phi_phi() -> sp.Expr:
    """<erf(u) erf(v)> by integrating Price's theorem d<phi phi>/dK_ab = <phi' phi'>
    from K_ab = 0, where <phi phi> = <phi>^2 = 0 because erf is odd.

    The substitution K_ab = a q / 2, a = sqrt((1+2K_aa)(1+2K_bb)), makes the
    integrand (2/pi)/sqrt(1 - q^2); the result is (2/pi) asin(2 K_ab / a).
    """
    a = _erf_scale()
    q = sp.Symbol("q", real=True)
    integrand = sp.factor(erf_mean_dphi_dphi().subs(K_ab, a * q / 2) * a / 2, deep=True)
    integrand = sp.simplify(sp.powsimp(sp.powdenest(integrand, force=True), force=True))
    antiderivative = sp.integrate(integrand, q)
    return antiderivative.subs(q, 2 * K_ab / a) - antiderivative.subs(q, 0)


@cache
def erf_mean_phi_sq() -> sp.Expr:
    """<erf(u)^2> for u ~ N(0, K): the diagonal of :func:`erf_mean_phi_phi`."""
    return sp.factor(erf_mean_phi_phi().subs({K_aa: K, K_bb: K, K_ab: K}), deep=True)


@cache
def erf_price_diag() -> sp.Expr:
    """<erf'^2 + erf erf''> = d<erf^2>/dK  (Price's theorem, D4, for f = phi^2)."""
    return sp.simplify(sp.diff(erf_mean_phi_sq(), K))


# --------------------------------------------------------------------------- ReLU
@cache
def relu_arccos_normalised() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """Arc-cosine kernels k_n(r) = E[relu(u)^n relu(v)^n] / (K_aa K_bb)^{n/2}, n = 0, 1, 2.

    Degree 0 is the orthant probability: d/dr P(u>0, v>0) = density at the origin
    = 1/(2 pi sqrt(1 - r^2)), from 1/4 at r = 0.  Each higher degree integrates
    Price's theorem: d/dr k_1 = k_0 (from k_1(0) = E[relu]^2 = 1/(2 pi)) and
    d/dr k_2 = 4 k_1 (from k_2(0) = E[relu^2]^2 = 1/4).
    """
    k0 = sp.Rational(1, 4) + sp.integrate(1 / (2 * sp.pi * sp.sqrt(1 - _u**2)), (_u, 0, _r))
    k1 = 1 / (2 * sp.pi) + sp.integrate(k0.subs(_r, _u), (_u, 0, _r))
    k2 = sp.Rational(1, 4) + 4 * sp.integrate(k1.subs(_r, _u), (_u, 0, _r))
    return tuple(sp.simplify(k) for k in (k0, k1, k2))


def cho_saul_arccos(n: int) -> sp.Expr:
    """Textbook arc-cosine kernels J_n(theta)/(2 pi) (Cho & Saul 2009), as functions of r = cos(theta)."""
    th = sp.acos(_r)
    J = {
        0: sp.pi - th,
        1: sp.sin(th) + (sp.pi - th) * sp.cos(th),
        2: 3 * sp.sin(th) * sp.cos(th) + (sp.pi - th) * (1 + 2 * sp.cos(th) ** 2),
    }[n]
    return J / (2 * sp.pi)


def _relu_kernel(n: int) -> sp.Expr:
    k = relu_arccos_normalised()[n]
    return sp.sqrt(K_aa * K_bb) ** n * k.subs(_r, K_ab / sp.sqrt(K_aa * K_bb))


# --------------------------------------------------------------------------- registry
PAPER = "fischer2025"


def derive_gaussian() -> Derivation:
    """Closed-form Gaussian expectations used by every theory."""
    d = Derivation("gaussian", "Gaussian toolbox: closed-form dual kernels", PAPER)
    d.declare(PARAMETERS)
    pair = (
        r"$(u, v) \sim \mathcal{N}(0, K)$ with $K = \begin{pmatrix} K_{aa} & K_{ab} \\ K_{ab} & K_{bb} \end{pmatrix}$"
    )
    src_d4 = Source(PAPER, "D4", "Price's theorem")
    d.add(
        Result(
            "erf_mean_phi_phi",
            erf_mean_phi_phi(),
            PAIR_INPUTS,
            Source(PAPER, "29", "erf dual kernel, Price-integrated"),
            "<erf(u) erf(v)> for (u, v) ~ N(0, [[K_aa, K_ab], [K_ab, K_bb]])",
            sp.Symbol(r"\langle \operatorname{erf}(u) \operatorname{erf}(v) \rangle"),
            statement=r"For " + pair + r", integrating Price's theorem from $K_{ab} = 0$ gives the erf dual kernel.",
        )
    )
    d.add(
        Result(
            "erf_mean_dphi_dphi",
            erf_mean_dphi_dphi(),
            PAIR_INPUTS,
            src_d4,
            "<erf'(u) erf'(v)>",
            sp.Symbol(r"\langle \operatorname{erf}'(u) \operatorname{erf}'(v) \rangle"),
            statement=r"For " + pair + r", the expectation of the product of the derivatives is a Gaussian integral.",
        )
    )
    d.add(Result("erf_mean_phi_sq", erf_mean_phi_sq(), DIAG_INPUTS, Source(PAPER, "29"),
                 "<erf(u)^2> for u ~ N(0, K)", sp.Symbol(r"\langle \operatorname{erf}(u)^{2} \rangle_{K}"),
                 statement=r"On the diagonal, $u \sim \mathcal{N}(0, K)$, the erf kernel reduces to"))
    d.add(
        Result(
            "erf_price_diag",
            erf_price_diag(),
            DIAG_INPUTS,
            Source(PAPER, "45", "via D4"),
            "<erf'(u)^2 + erf(u) erf''(u)> for u ~ N(0, K)",
            sp.Symbol(r"\langle \operatorname{erf}'^{2} + \operatorname{erf} \operatorname{erf}'' \rangle_{K}"),
            statement=r"By Price's theorem the derivative of $\langle \operatorname{erf}(u)^{2} \rangle_{K}$ "
                      r"with respect to $K$ is",
        )
    )
    for n in range(3):
        d.add(
            Result(
                f"relu_arccos{n}",
                _relu_kernel(n),
                PAIR_INPUTS,
                Source("cho_saul2009", f"arc-cosine degree {n}", "Price-integrated"),
                f"E[relu(u)^{n} relu(v)^{n}]" if n else "E[H(u) H(v)] (Heaviside)",
                sp.Symbol(rf"k_{{{n}}}"),
                statement=(
                    rf"For {pair}, the degree-{n} arc-cosine kernel, integrated from the orthant probability "
                    rf"with Price's theorem, is"
                    if n
                    else rf"For {pair}, the probability that both arguments are positive (the degree-0 "
                         rf"arc-cosine kernel) is"
                ),
            )
        )
    d.add(
        Result(
            "relu_price_diag",
            sp.diff(_relu_kernel(1).subs({K_aa: K, K_bb: K, K_ab: K}), K),
            DIAG_INPUTS,
            Source(PAPER, "45", "via D4"),
            "<relu'(u)^2 + relu(u) relu''(u)> = d<relu^2>/dK",
            sp.Symbol(r"\langle \mathrm{relu}'^{2} + \mathrm{relu}\, \mathrm{relu}'' \rangle_{K}"),
            statement=r"For the ReLU the Price-theorem derivative of $\langle \mathrm{relu}(u)^{2} \rangle_{K}$ "
                      r"is a constant.",
        )
    )
    return d
