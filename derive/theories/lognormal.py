"""Li, Nica & Roy (2021), "The future is log-Gaussian": ReLU ResNets at finite depth-to-width ratio.

Every result here is derived, not typed in:

* ``j2bar_from_definition`` integrates eq. (23), 2 E[relu(Z)^2 relu(cos t Z + sin t W)^2], in polar
  coordinates and shows it equals the Cho--Saul closed form quoted below eq. (23);
* ``lemma16_identity`` shows 2 J2(t) - 2 E[Z^2 relu(cos t Z + sin t W)^2] = J2(t) - J2(pi - t), the
  covariance numerator of Lemma 16 (eq. 24), and that at t = 0 it gives Lemma 10's 3/n;
* ``remark18_series`` expands J2(t) - J2(pi - t) in cos t: 8 cos t / pi + 4 cos^3 t / (3 pi) + ...,
  so the correction to Remark 18's 8 alpha^k / pi is O(cos^3 theta_k), not O(alpha^{2k});
* ``layer_variance`` derives Var X_l = (5 lam^4 + 4 alpha^2 lam^2) / n exactly (Lemmas 9-10, for
  alpha^2 + lam^2 = 1) from chi-square and half-Gaussian moments, and ``beta_from_lemmas`` assembles
  beta of eq. (5) from it by the delta method for ln X and ln chi^2_n / n;
* ``lognormal_output_moments`` derives the output moments of §3.1-3.2 from the Gaussian moment
  generating function of G;
* ``log_chi2_density`` changes variables in the chi-square density (App. C.3).

Typos found while deriving (each pinned by a test): Prop. 6 writes cos(theta_{l,l'}) with alpha_i^2 in the
numerator (it is alpha_i), and weighs the layer pair (l, l') by lam_l^4 / (alpha_l^2 + lam_l^2)^2 where
c_l c_l' is meant; Lemma 21 writes E[ln X_l] = 1 + ... where 0 + ... (ln 1) is meant; the proof of
Theorem 1 writes the mean of ln(chi^2_n/n) as "-1/n . 2/n" for mean -1/n, variance 2/n; the last line of
Lemma 16 has J2 where J2-bar is meant.
"""
from __future__ import annotations

from functools import cache

import sympy as sp

from resprop.derive.results import Constraint, Derivation
from resprop.derive.symbols import Parameter

PAPER = "li_nica_roy2021"

_P = Parameter
#: every input of the results below, declared once (symbol, domain, the paper's LaTeX, meaning)
PARAMETERS = (
    _P("theta", "[0, pi]", r"\theta", "angle between the two arguments"),
    _P("cos_theta", "[-1, 1]", r"\cos\theta", "cos(theta)"),
    _P("alpha", "real", r"\alpha", "skip-connection coefficient alpha"),
    _P("lam", "[0, inf)", r"\lambda", "residual-branch coefficient lambda"),
    _P("n", "[2, inf)", "n", "hidden width n"),
    _P("d", "[1, inf)", "d", "number of hidden residual layers d"),
    _P("k", "[1, inf)", "k", "layer lag k = |l' - l|"),
    _P("beta", "(0, inf)", r"\beta", "beta of eq. (5)"),
    _P("c", "[0, 1]", "c", "c = lam^2/(alpha^2 + lam^2)"),
    _P("h_total", "real", r"h_{\mathrm{tot}}", "total hypoactivation sum_l h_l"),
    _P("I_total", "real", r"I_{\mathrm{tot}}", "total interlayer covariance"),
    _P("C_hypo", "real", r"C_{\alpha,\lambda}", "hypoactivation constant C_{alpha,lambda}"),
    _P("mean_G", "real", r"\mathbb{E}[G]", "E[G]"),
    _P("var_G", "[0, inf)", r"\operatorname{Var}[G]", "Var[G]"),
    _P("scale2", "(0, inf)", r"\left(\alpha^{2} + \lambda^{2}\right)", "alpha^2 + lam^2"),
    _P("n_out", "[1, inf)", r"n_{\mathrm{out}}", "output dimension"),
    _P("y", "real", "y", "value of ln ||Z||^2"),
    _P(
        "odd_part",
        "real",
        r"\left(\bar{J}_{2}(\theta) - \bar{J}_{2}(\pi - \theta)\right)",
        "J2(theta) - J2(pi - theta)",
    ),
)
(theta, cos_theta, alpha, lam, n, d, k, beta, c, h_total, I_total, hypo_constant, mean_G, var_G, scale2, n_out,
 y, odd_part) = (p.symbol for p in PARAMETERS)

_psi = sp.Symbol("psi", real=True)
_r = sp.Symbol("r", positive=True)
_x = sp.Symbol("x", real=True)


def cho_saul_j2bar(t: sp.Expr = theta) -> sp.Expr:
    """J2-bar(t) = J2(t) / pi as printed below eq. (23) (Cho & Saul 2009)."""
    return (3 * sp.sin(t) * sp.cos(t) + (sp.pi - t) * (1 + 2 * sp.cos(t) ** 2)) / sp.pi


@cache
def j2bar_from_definition() -> sp.Expr:
    """Eq. (23) integrated exactly.

    With Z = r cos(psi), W = r sin(psi), cos(t) Z + sin(t) W = r cos(psi - t); both ReLUs are open on
    psi in (t - pi/2, pi/2) for t in [0, pi].  The radial integral is int r^5 e^{-r^2/2} dr = 8.
    """
    radial = sp.integrate(_r**5 * sp.exp(-_r**2 / 2), (_r, 0, sp.oo))
    angular = sp.integrate(sp.expand_trig(sp.cos(_psi) ** 2 * sp.cos(_psi - theta) ** 2),
                           (_psi, theta - sp.pi / 2, sp.pi / 2))
    return sp.simplify(2 * radial * angular / (2 * sp.pi))


def j2bar_closed_form() -> sp.Expr:
    """The compact form of the derived J2-bar, emitted only after SymPy proves it equal to the integral.

    3 sin t cos t is written (3/2) sin 2t, which the LaTeX export cannot misread as sin(t cos t).
    """
    derived = j2bar_from_definition()
    compact = (3 * sp.sin(2 * theta) / 2 + (sp.pi - theta) * (1 + 2 * sp.cos(theta) ** 2)) / sp.pi
    if sp.simplify(sp.expand_trig(derived - compact)) != 0:
        raise ArithmeticError("eq. (23) does not integrate to the Cho-Saul form")
    return compact


def j2bar_odd_part_closed_form() -> sp.Expr:
    """J2(t) - J2(pi - t) = (3 sin 2t + (pi - 2 t)(1 + 2 cos^2 t)) / pi, checked against the integral."""
    compact = (3 * sp.sin(2 * theta) + (sp.pi - 2 * theta) * (1 + 2 * sp.cos(theta) ** 2)) / sp.pi
    if sp.simplify(sp.expand_trig(j2bar_odd_part() - compact)) != 0:
        raise ArithmeticError("J2(t) - J2(pi - t) does not reduce to the compact form")
    return compact


@cache
def cross_moment_from_definition() -> sp.Expr:
    """E[Z^2 relu(cos t Z + sin t W)^2], the off-diagonal term of Lemma 16's proof (same polar route)."""
    radial = sp.integrate(_r**5 * sp.exp(-_r**2 / 2), (_r, 0, sp.oo))
    angular = sp.integrate(sp.expand_trig(sp.cos(_psi) ** 2 * sp.cos(_psi - theta) ** 2),
                           (_psi, theta - sp.pi / 2, theta + sp.pi / 2))
    return sp.simplify(radial * angular / (2 * sp.pi))


def j2bar_odd_part() -> sp.Expr:
    """J2-bar(t) - J2-bar(pi - t), simplified (Lemma 16, eq. 24)."""
    J = j2bar_from_definition()
    return sp.simplify(sp.expand_trig(J - J.subs(theta, sp.pi - theta)))


def lemma16_identity() -> sp.Expr:
    """Residual of 2 J2(t) - 2 E[Z^2 relu(Y)^2] = J2(t) - J2(pi - t); zero when Lemma 16's last step holds."""
    J = j2bar_from_definition()
    return sp.simplify(sp.expand_trig(2 * J - 2 * cross_moment_from_definition() - j2bar_odd_part()))


def remark18_series(order: int = 5) -> sp.Expr:
    """J2(t) - J2(pi - t) as a series in x = cos t (Remark 18), through x^order."""
    return sp.series(j2bar_odd_part().subs(theta, sp.acos(_x)), _x, 0, order + 1).removeO()


# --------------------------------------------------------------------------- Lemmas 9-10 and beta
def _chi2_moment(p: int) -> sp.Expr:
    """E ||g||^{2p} for g ~ N(0, I_n): n (n+2) ... (n+2p-2)."""
    return sp.prod([n + 2 * i for i in range(p)])


def sphere_relu_moments() -> tuple[sp.Expr, sp.Expr]:
    """Lemma 10: E and Var of 2||relu(u)||^2 for u uniform on S^{n-1}, from relu(u)||g|| =d relu(g).

    E[relu(g_i)^2] = 1/2 and E[relu(g_i)^4] = 3/2; the n(n-1) off-diagonal pairs are independent.
    """
    e2_gauss = 2 * n * sp.Rational(1, 2)
    e4_gauss = 4 * (n * sp.Rational(3, 2) + n * (n - 1) * sp.Rational(1, 4))
    mean = sp.simplify(e2_gauss / _chi2_moment(1))
    second = sp.simplify(e4_gauss / _chi2_moment(2))
    return mean, sp.factor(sp.simplify(second - mean**2))


def layer_variance() -> sp.Expr:
    """Var X_l of eq. (22) for u uniform (Lemma 9 with Lemma 10), alpha^2 + lam^2 = 1 imposed at the end.

    X = alpha^2 + lam^2 A ||g||^2/n + 2 alpha lam sqrt(A/n) g_1 with A = 2||relu(u)||^2 independent of g;
    the two random terms are uncorrelated (odd moment of g_1).
    """
    mA, vA = sphere_relu_moments()
    eA2 = vA + mA**2
    second_term = lam**4 * eA2 * _chi2_moment(2) / n**2 - (lam**2 * mA) ** 2
    cross_term = 4 * alpha**2 * lam**2 * mA / n
    var = sp.simplify(second_term + cross_term)
    return sp.factor(sp.simplify(var.subs(alpha**2, 1 - lam**2)))


def beta_from_lemmas() -> sp.Expr:
    """beta = Var ln(chi^2_n/n) + d Var ln X to leading order, written for general alpha^2 + lam^2.

    ln(chi^2_n / n) has variance 2/n + O(1/n^2); Var ln X = Var X / (E X)^2 + O(1/n^2) with E X = 1 after
    dividing each layer by alpha^2 + lam^2 (App. B's reduction).
    """
    a_hat, l_hat = sp.symbols("a_hat l_hat", positive=True)
    per_layer = layer_variance() * n  # n Var X in the normalised parameters
    per_layer = per_layer.subs(lam, l_hat)
    per_layer = sp.expand(per_layer.subs(l_hat**2, lam**2 / (alpha**2 + lam**2)))
    # write 4 alpha^2 lam^2 explicitly: 1 - l_hat^2 = a_hat^2
    per_layer = sp.factor(sp.simplify(per_layer))
    return 2 / n + d / n * per_layer


def beta_paper() -> sp.Expr:
    """Eq. (5) as printed."""
    return 2 / n + d / n * (5 * lam**4 + 4 * alpha**2 * lam**2) / (alpha**2 + lam**2) ** 2


def layer_beta_term() -> sp.Expr:
    """Per-layer contribution to n beta for layer-dependent coefficients (Prop. 6).

    Printed (5 lam^4 + 4 alpha^2 lam^2)/(alpha^2 + lam^2)^2 = 4 s^2 + s^4 with s = lam/sqrt(alpha^2 + lam^2)
    (lam/hypot): alpha^4 and lam^4 underflow long before the value does (0/0 at alpha = 1e-106, lam = 0)."""
    printed = (5 * lam**4 + 4 * alpha**2 * lam**2) / (alpha**2 + lam**2) ** 2
    s = sp.UnevaluatedExpr(lam / sp.sqrt(alpha**2 + lam**2))
    form = (4 + s**2) * s**2
    if sp.simplify(form.doit() - printed) != 0:
        raise ArithmeticError("layer_beta_term rewritten wrongly")
    return form


def c_coefficient() -> sp.Expr:
    return lam**2 / (alpha**2 + lam**2)


def cos_theta_k() -> sp.Expr:
    """cos(theta_k) = alpha^k / (alpha^2 + lam^2)^{k/2} (Prop. 2 / Conjecture 5)."""
    return (alpha / sp.sqrt(alpha**2 + lam**2)) ** k


# --------------------------------------------------------------------------- output moments and density
def lognormal_output_moments() -> dict[str, sp.Expr]:
    """§3.1-3.2 from E exp(t G) for G ~ N(mu, s^2) and z_i = scale^{d/2} exp(G/2) Z_i, Z_i iid N(0,1).

    E z_i^2 = scale^d E e^G; E z_i^4 = 3 scale^{2d} E e^{2G}; E z_i^2 z_j^2 = scale^{2d} E e^{2G}.
    """
    G = sp.Symbol("G", real=True)
    density = sp.exp(-(G - mean_G) ** 2 / (2 * var_G)) / sp.sqrt(2 * sp.pi * var_G)

    def mgf(t):
        return sp.simplify(sp.integrate(sp.exp(t * G) * density, (G, -sp.oo, sp.oo), conds="none"))

    e1, e2 = (sp.simplify(mgf(t).rewrite(sp.erf)) for t in (1, 2))
    s = scale2**d
    mean_sq = s * e1
    var_sq = sp.simplify(3 * s**2 * e2 - mean_sq**2)
    cov_sq = sp.simplify(s**2 * e2 - mean_sq**2)
    corr = sp.simplify(cov_sq / var_sq)
    return {"mean": sp.simplify(mean_sq), "variance": sp.factor(var_sq), "correlation": sp.factor(corr)}


def log_chi2_density() -> sp.Expr:
    """Density of ln ||Z||^2, ||Z||^2 ~ chi^2(n_out), by the change of variables q = e^y (App. C.3).

    Emitted in log space, exp(n y/2 - e^y/2 - (n/2) ln 2 - ln Gamma(n/2)) with ln Gamma printed as gammaln:
    Gamma(n/2) and e^{n y/2} overflow float64 for n_out >= 344 although the density is of order one."""
    q = sp.Symbol("q", positive=True)
    chi2 = q ** (n_out / 2 - 1) * sp.exp(-q / 2) / (2 ** (n_out / 2) * sp.gamma(n_out / 2))
    density = sp.simplify(sp.powsimp(chi2.subs(q, sp.exp(y)) * sp.exp(y), force=True))
    log_density = n_out * y / 2 - sp.exp(y) / 2 - n_out / 2 * sp.log(2) - sp.log(sp.gamma(n_out / 2))
    if sp.simplify(sp.expand_log(sp.log(density), force=True) - log_density) != 0:
        raise ArithmeticError("log-space chi^2 density differs from the change of variables")
    return sp.exp(log_density, evaluate=False)  # unevaluated: exp(a - ln Gamma) would become e^a/Gamma


def output_corr_sq_stable(corr: sp.Expr) -> sp.Expr:
    """Corr((z_i^out)^2, (z_j^out)^2) = (e^v - 1)/(3 e^v - 1) as u/(2 + u), u = 1 - e^{-v} (printed -expm1(-v)):
    the printed ratio is inf/inf = NaN for v > 709 and cancels for small v; this form is exact for all v >= 0."""
    u = 1 - sp.exp(-var_G)
    stable = u / (2 + u)
    if sp.simplify(stable - corr) != 0:
        raise ArithmeticError("stable output correlation differs from the derived one")
    return stable


def log_output_moments(moments: dict[str, sp.Expr]) -> dict[str, sp.Expr]:
    """ln E z_i^2 = d ln(scale) + E G + Var G/2 and ln Var z_i^2 = 2 d ln(scale) + 2 E G + 2 Var G + ln(3 - e^{-Var G})
    (log space): the moments themselves exceed float64 once d ln(scale) or Var G is a few hundred (scale^d at
    scale = 1.01 and d = 10^5 is e^995), their logarithms do not.  Checked equal to the logs of ``moments`` at
    rational points (40 digits)."""
    log_mean = d * sp.log(scale2) + mean_G + var_G / 2
    log_var = 2 * d * sp.log(scale2) + 2 * mean_G + 2 * var_G + sp.log(3 - sp.exp(-var_G))
    for k in range(4):
        pt = {scale2: sp.Rational(k + 2, 3), d: 1 + 2 * k, mean_G: sp.Rational(1 - 2 * k, 5), var_G: sp.Rational(k, 4)}
        for stable, exact in ((log_mean, moments["mean"]), (log_var, moments["variance"])):
            if abs(sp.N((stable - sp.log(exact)).subs(pt), 40)) > 1e-30:
                raise ArithmeticError("log-space output moment differs from the log of the derived one")
    return {"mean": log_mean, "variance": log_var}


# --------------------------------------------------------------------------- registry
def derive_log_gaussian() -> Derivation:
    dv = Derivation("lognormal", "Log-Gaussian ResNets at finite depth-to-width ratio", PAPER)
    dv.declare(PARAMETERS)

    add = dv.adder()
    nonzero = [Constraint(sp.Gt(alpha**2 + lam**2, 0), "alpha^2 + lam^2 > 0 (alpha = lam = 0 is a zero network)")]

    J = j2bar_closed_form()
    D = j2bar_odd_part_closed_form()
    series = remark18_series(3).subs(_x, cos_theta)
    moments = lognormal_output_moments()
    add("j2bar", J, [theta], "23", "J2-bar(theta) = 2 E[relu(Z)^2 relu(cos(theta) Z + sin(theta) W)^2]",
        r"\bar{J}_{2}(\theta)")
    add("j2bar_odd_part", D, [theta], "24",
        "J2-bar(theta) - J2-bar(pi - theta): n Cov(2||relu(u)||^2, 2||relu(cos u + sin g/sqrt(n))||^2)",
        r"\bar{J}_{2}(\theta) - \bar{J}_{2}(\pi - \theta)")
    add("sphere_relu_norm_cov", odd_part / n, [odd_part, n], "24",
        "Lemma 16: Cov(2||relu(u)||^2, 2||relu(cos(theta) u + sin(theta) g/sqrt(n))||^2), leading order",
        r"\operatorname{Cov}_{16}")
    add("j2bar_odd_part_asymptotic", series, [cos_theta], "Remark 18",
        "large-lag series 8 cos/pi + 4 cos^3/(3 pi); the next term is O(cos^3), not O(alpha^{2k})",
        r"\bar{J}_{2}(\theta) - \bar{J}_{2}(\pi - \theta)", note="next order added")
    add("cos_theta_k", cos_theta_k(), [alpha, lam, k], "8, 13", "cos(theta_k) = alpha^k/(alpha^2+lam^2)^{k/2}",
        r"\cos\theta_{k}", constraints=[*nonzero, Constraint(sp.Or(sp.Ge(alpha, 0), sp.Eq(k, sp.floor(k))),
                                                    "k integer when alpha < 0 (alpha^k is real)")])
    add("layer_cos_factor", alpha / sp.sqrt(alpha**2 + lam**2), [alpha, lam], "21",
        "one layer's factor of cos(theta_{l,l'}) (Prop. 6 prints alpha_i^2 for alpha_i)", r"\cos\theta_{\ell,\ell+1}",
        note="corrected", constraints=nonzero)
    add(
        "beta",
        beta_from_lemmas(),
        [n, d, alpha, lam],
        "5",
        "beta = 2/n + d/n (5 lam^4 + 4 alpha^2 lam^2)/(alpha^2+lam^2)^2",
        r"\beta",
        constraints=nonzero,
    )
    add("layer_beta_term", layer_beta_term(), [alpha, lam], "21",
        "one layer's contribution to n beta (Prop. 6)", r"b_{l}", constraints=nonzero)
    add("c_coefficient", c_coefficient(), [alpha, lam], "5", "c = lam^2/(alpha^2+lam^2)", "c", constraints=nonzero)
    add("hypoactivation_total", hypo_constant * d / n, [hypo_constant, d, n], "8",
        "h_total = C_{alpha,lambda} d/n (Prop. 2)", r"h_{\mathrm{tot}}")
    add("interlayer_cov_term", 2 * (d - k) * odd_part / n, [d, k, odd_part, n], "8",
        "contribution of lag k to I_total: 2 (d - k) ordered layer pairs times (J2(theta_k) - J2(pi-theta_k))/n",
        r"I_{k}")
    add("mean_G", -beta / 2 + 2 * c * h_total, [beta, c, h_total], "7", "E[G] = -beta/2 + 2 c h_total",
        r"\mathbb{E}[G]")
    add(
        "var_G", beta + c**2 * I_total, [beta, c, I_total], "7", "Var[G] = beta + c^2 I_total", r"\operatorname{Var}[G]"
    )
    add("mean_G_balanced", -beta / 2, [beta], "9", "E[G] = -beta/2 (balanced ResNet, Thm 4)", r"\mathbb{E}[G]")
    add("var_G_balanced", beta, [beta], "9", "Var[G] = beta (balanced ResNet, Thm 4)", r"\operatorname{Var}[G]")
    add("output_mean_sq", moments["mean"], [scale2, d, mean_G, var_G], "3.1",
        "E[(z_i^out)^2] for ||x||^2 = n_in", r"\mathbb{E}[(z_{i}^{\mathrm{out}})^{2}]")
    add("output_var_sq", moments["variance"], [scale2, d, mean_G, var_G], "3.1",
        "Var[(z_i^out)^2] for ||x||^2 = n_in", r"\operatorname{Var}[(z_{i}^{\mathrm{out}})^{2}]")
    log_moments = log_output_moments(moments)
    add("log_output_mean_sq", log_moments["mean"], [scale2, d, mean_G, var_G], "3.1",
        "ln E[(z_i^out)^2] for ||x||^2 = n_in, in log space: returns the logarithm because the moment overflows "
        "float64 at depth (scale2^d) or large Var[G]", r"\ln \mathbb{E}[(z_{i}^{\mathrm{out}})^{2}]")
    add("log_output_var_sq", log_moments["variance"], [scale2, d, mean_G, var_G], "3.1",
        "ln Var[(z_i^out)^2] for ||x||^2 = n_in, in log space: returns the logarithm because the variance overflows "
        "float64 at depth (scale2^2d) or large Var[G]", r"\ln \operatorname{Var}[(z_{i}^{\mathrm{out}})^{2}]")
    add(
        "output_corr_sq",
        output_corr_sq_stable(moments["correlation"]),
        [var_G],
        "3.2",
        "Corr((z_i^out)^2, (z_j^out)^2), i != j",
        r"\operatorname{Corr}[(z_{i}^{\mathrm{out}})^{2}, (z_{j}^{\mathrm{out}})^{2}]",
    )
    add("log_chi2_density", log_chi2_density(), [y, n_out], "C.3", "density of ln ||Z||^2, ||Z||^2 ~ chi^2(n_out)",
        r"p_{\ln \|Z\|^{2}}(y)")
    dv.state(STATEMENTS)
    return dv


STATEMENTS = {
    "j2bar": r"Integrating eq.~(23) in polar coordinates gives the Cho--Saul closed form of $\bar{J}_{2}$.",
    "j2bar_odd_part": r"The covariance numerator of Lemma~16 is the odd part of $\bar{J}_{2}$ about $\theta = \pi/2$.",
    "sphere_relu_norm_cov": r"To leading order in $1/n$, the covariance of the rescaled ReLU norms of Lemma~16 is the "
                            r"odd part of $\bar{J}_{2}$ divided by the width.",
    "j2bar_odd_part_asymptotic": r"At large layer lag the odd part of $\bar{J}_{2}$ is a series in $\cos\theta$ "
                                 r"whose next term is of order $\cos^{3}\theta$, not $\alpha^{2k}$.",
    "cos_theta_k": r"The cosine of the angle between layers $k$ apart decays geometrically in $k$.",
    "layer_cos_factor": r"Each layer multiplies the inter-layer cosine by the factor below (Prop.~6 prints "
                        r"$\alpha_{i}^{2}$ for $\alpha_{i}$).",
    "beta": r"The log-variance rate $\beta$ is the sum of the chi-square term $2/n$ and $d$ per-layer variances "
            r"derived from Lemmas~9 and~10.",
    "layer_beta_term": r"One residual layer contributes to $n \beta$ the term below.",
    "c_coefficient": r"The weight of the residual branch in the normalised layer is",
    "hypoactivation_total": r"The total hypoactivation grows linearly in the depth-to-width ratio $d/n$.",
    "interlayer_cov_term": r"Layers at lag $k$ contribute $2(d - k)$ ordered pairs, each with covariance "
                           r"$(\bar{J}_{2}(\theta_{k}) - \bar{J}_{2}(\pi - \theta_{k}))/n$.",
    "mean_G": r"The mean of the log-norm $G$ is $-\beta/2$ shifted by the hypoactivation.",
    "var_G": r"The variance of $G$ is $\beta$ plus the inter-layer covariance weighted by $c^{2}$.",
    "mean_G_balanced": r"For the balanced ResNet of Theorem~4 the mean of $G$ is $-\beta/2$.",
    "var_G_balanced": r"For the balanced ResNet the variance of $G$ is $\beta$.",
    "output_mean_sq": r"For $\|x\|^{2} = n_{\mathrm{in}}$ the second moment of an output follows from the "
                      r"moment-generating function of the Gaussian $G$.",
    "output_var_sq": r"The variance of a squared output is log-normal in $G$.",
    "log_output_mean_sq": r"In log space, finite at any depth, the second moment of an output is",
    "log_output_var_sq": r"In log space, finite at any depth, the variance of a squared output is",
    "output_corr_sq": r"Two squared outputs are correlated through the shared $G$ alone, written here in a form "
                      r"exact for every $\operatorname{Var}[G] \geq 0$.",
    "log_chi2_density": r"Changing variables in the $\chi^{2}(n_{\mathrm{out}})$ density gives the density of "
                        r"$\ln \|Z\|^{2}$.",
}
