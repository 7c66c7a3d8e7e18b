"""The residual kernel recursions every theory runs: NNGP, NTK and response of z <- gamma z + lambda (W phi(z) + b).

Architecture (Fischer et al. 2025 B9-B10 with gamma = 1, lambda = rho; Hayou et al. 2021 eq. 9 for the NTK with
lambda = lambda_{l,L}): a read-in K^(0) = Theta^(0), then L blocks z <- gamma z + lambda_l (W phi(z) + b) with
W ~ N(0, sigma_w^2 / n), b ~ N(0, sigma_b^2).  At infinite width, elementwise over pairs of inputs (a, b),

    K^(l)     = g_l K^(l-1)     + w_l <phi_a phi_b>_{K^(l-1)} + s_l
    Theta^(l) = g_l Theta^(l-1) + w_l <phi_a phi_b>_{K^(l-1)} + s_l + w_l <phi'_a phi'_b>_{K^(l-1)} Theta^(l-1)
    chi^(l)   = g_l chi^(l-1)   + w_l <phi'_a phi'_b>_{K^(l-1)} chi^(l-1)          (Fischer et al. 45, 47)

with the per-layer sequences g_l = gamma^2 (``skip_gain``), w_l = lambda_l^2 sigma_w^2 (``branch_weight``) and
s_l = lambda_l^2 sigma_b^2 (``branch_bias``).  Writing the recursion with per-layer sequences is what lets a
driver rescale the state by a per-layer factor without new code: for a positively homogeneous activation
(ReLU), K = S_l K~ gives the same recursion for K~ with g_l S_(l-1)/S_l, w_l S_(l-1)/S_l and s_l / S_l, which
is how an unscaled ResNet of depth 10^5 stays in float64 range.  On the diagonal (a = b) the same updates hold
with <phi^2>_K, <phi'^2>_K and, for the response, <phi'^2 + phi phi''>_K (the derivative of <phi^2>_K, Price's
theorem; Fischer et al. 45 with D4).

Each activation's dual kernels are written in a *separable* form: factors of K_aa alone and of K_bb alone stay
separate (erf: w_a = (1 + 2 K_aa)^(-1/2); ReLU: sqrt(K_aa)), so that the generated kernel evaluates them on the
diagonal once per layer and the elementwise work is a handful of array passes.  Tests check each separable
form against the closed forms of :mod:`resprop.derive.gaussian` and against quadrature.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from resprop.derive import gaussian
from resprop.derive.recursion import Recursion, UnitClip
from resprop.derive.results import Derivation, Source
from resprop.derive.symbols import Parameter

PAPER = "fischer2025"

PARAMETERS = (
    Parameter("K_ab", "real", r"K_{ab}^{(\ell-1)}", "kernel element of a pair of inputs at the previous layer"),
    Parameter("Theta_ab", "real", r"\Theta_{ab}^{(\ell-1)}", "NTK element of a pair of inputs at the previous layer"),
    Parameter("chi_ab", "real", r"\chi_{ab}^{(\ell-1)}", "response of the kernel element to the input kernel"),
    Parameter("skip_gain", "[0, inf)", r"g_{\ell}", "gain of the skip branch, gamma^2"),
    Parameter("branch_weight", "[0, inf)", r"w_{\ell}", "weight of the residual branch, lambda_l^2 sigma_w^2"),
    Parameter("branch_bias", "[0, inf)", r"s_{\ell}", "bias of the residual branch, lambda_l^2 sigma_b^2"),
    Parameter("mean_phi_phi", "real", r"\langle \phi_a \phi_b \rangle", "<phi(u) phi(v)> at the previous layer"),
    Parameter("mean_dphi_dphi", "real", r"\langle \phi'_a \phi'_b \rangle",
              "<phi'(u) phi'(v)> at the previous layer"),
)
K_ab, Theta_ab, chi_ab, skip_gain, branch_weight, branch_bias, E_phiphi, E_dphidphi = (p.symbol for p in PARAMETERS)
#: the network's own hyperparameters, from which a driver builds the sequences g_l = gamma^2, w_l = lambda_l^2
#: sigma_w^2 and s_l = lambda_l^2 sigma_b^2 (and the read-in K^(0) = sigma_w^2 x.x'/d_in + sigma_b^2): no result takes
#: them, but ``resprop.kernel`` and ``resprop kernel`` (``--sigma-w2``, ``--sigma-b2``, ``--gamma``) do, and the
#: command line builds those options (help text and checks) from these declarations
NETWORK_PARAMETERS = (
    Parameter("sigma_w2", "(0, inf)", r"\sigma_{w}^{2}", "weight variance of every layer (read-in, residual branches, "
              "readout)", "W ~ N(0, sigma_w^2 / fan-in)"),
    Parameter("sigma_b2", "[0, inf)", r"\sigma_{b}^{2}", "bias variance of every layer", "b ~ N(0, sigma_b^2)"),
    Parameter("gamma", "real", r"\gamma", "skip gain gamma of the blocks z <- gamma z + lambda_l (W phi(z) + b); "
              "0 is a plain fully connected network"),
)
K_aa, K_bb, K = gaussian.K_aa, gaussian.K_bb, gaussian.K
SEQUENCES = (skip_gain, branch_weight, branch_bias)


@dataclass(frozen=True)
class DualKernel:
    """The Gaussian expectations an activation contributes to the recursions, in separable form.

    ``mean_phi_phi`` and ``mean_dphi_dphi`` in (K_aa, K_bb, K_ab); ``mean_phi_sq``, ``mean_dphi_sq`` and
    ``price_diag`` (= d<phi^2>/dK) in K.  ``callbacks`` names undefined functions the caller evaluates.
    """

    name: str
    mean_phi_phi: sp.Expr
    mean_dphi_dphi: sp.Expr
    mean_phi_sq: sp.Expr
    mean_dphi_sq: sp.Expr
    price_diag: sp.Expr
    source: Source
    callbacks: tuple[str, ...] = ()
    #: intermediate elementwise or diagonal quantities of the pair forms (see Recursion.definitions)
    definitions: tuple[tuple[sp.Symbol, sp.Expr], ...] = ()
    pair_domain: str = "K_aa, K_bb > 0 and |K_ab| <= sqrt(K_aa K_bb)"


def erf_dual() -> DualKernel:
    """erf: <phi phi> = (2/pi) asin(t), <phi' phi'> = (2/pi) W / sqrt(1 - t^2), t = K_ab W, W = u_a w_b,
    u_a = 2 (1 + 2K_aa)^(-1/2), w_b = (1 + 2K_bb)^(-1/2) (Fischer et al. 29 and D4; equal to
    gaussian.erf_mean_phi_phi and erf_mean_dphi_dphi)."""
    w_b, W, t = sp.symbols("w_b W t", real=True)
    u_a = sp.Symbol("u_a", real=True)
    definitions = ((u_a, 2 / sp.sqrt(1 + 2 * K_aa)), (w_b, 1 / sp.sqrt(1 + 2 * K_bb)), (W, u_a * w_b),
                   (t, K_ab * W))
    return DualKernel(
        "erf", 2 / sp.pi * sp.asin(t), 2 / sp.pi * W / sp.sqrt(1 - t**2),
        2 / sp.pi * sp.asin(2 * K / (1 + 2 * K)), 4 / sp.pi / sp.sqrt(1 + 4 * K),
        gaussian.erf_price_diag(), Source(PAPER, "29, D4", "erf dual kernels, separable form"),
        definitions=definitions)


def relu_dual() -> DualKernel:
    """ReLU: with c = K_ab / (sqrt(K_aa) sqrt(K_bb)) and Y = pi - arccos c (Cho & Saul 2009, arc-cosine degrees
    1 and 0): <phi phi> = sqrt(K_aa) sqrt(K_bb) (c Y + sqrt(1 - c^2)) / (2 pi), <phi' phi'> = Y / (2 pi);
    diagonal <phi^2> = K/2, <phi'^2> = 1/2, <phi'^2 + phi phi''> = 1/2."""
    s_a, s_b, R, c, Y = sp.symbols("s_a s_b R c Y", real=True)
    definitions = ((s_a, sp.sqrt(K_aa)), (s_b, sp.sqrt(K_bb)), (R, s_a * s_b), (c, UnitClip(K_ab / R)),
                   (Y, sp.pi - sp.acos(c)))
    half = sp.Rational(1, 2)
    return DualKernel(
        "relu", R * (c * Y + sp.sqrt(1 - c**2)) / (2 * sp.pi), Y / (2 * sp.pi), K / 2, half, half,
        Source("cho_saul2009", "arc-cosine degrees 1, 0", "separable form"), definitions=definitions)


def gelu_dual() -> DualKernel:
    """GELU, x Phi(x): the Price-integrated dual kernels of :func:`resprop.derive.closed_forms.gelu_dual` in a
    separable form written for few array passes: with i_a = (1 + K_aa)^(-1/2), i_b = (1 + K_bb)^(-1/2),
    U = i_a i_b, t = K_ab U and r = sqrt(1 - t^2),

        <phi phi>   = K_ab/4 + (K_ab asin t + r (K_aa i_a)(K_bb i_b) + t^2 U / r) / (2 pi)
        <phi' phi'> = 1/4 + (asin t + t (i_a^2 + i_b^2 + U^2 / r^2) / r) / (2 pi),

    checked symbolically against the (K_aa, K_bb, t) forms of ``closed_forms`` (K_ab = t / U there)."""
    from resprop.derive import closed_forms as cf

    forms = cf.gelu_dual()  # derives and checks the separable forms against the Price-integrated ones
    dd_t, pp_t = cf._gelu_separable_t()
    i_a, i_b, U, t, r = sp.symbols("i_a i_b U t r", positive=True)
    definitions = ((i_a, 1 / sp.sqrt(1 + K_aa)), (i_b, 1 / sp.sqrt(1 + K_bb)), (U, i_a * i_b), (t, K_ab * U),
                   (r, sp.sqrt(1 - t**2)))
    pp = K_ab / 4 + (K_ab * sp.asin(t) + r * (K_aa * i_a) * (K_bb * i_b) + t**2 * U / r) / (2 * sp.pi)
    dd = sp.Rational(1, 4) + (sp.asin(t) + t * (i_a**2 + i_b**2 + U**2 / r**2) / r) / (2 * sp.pi)
    # the same functions: substitute the definitions (K_ab = t / U) and compare with the t-forms
    back = {r: sp.sqrt(1 - cf._t**2), i_a: 1 / sp.sqrt(1 + K_aa), i_b: 1 / sp.sqrt(1 + K_bb)}
    for mine, theirs in ((pp, pp_t), (dd, dd_t)):
        e = mine.xreplace({t: cf._t}).xreplace({K_ab: cf._t / U}).xreplace({U: back[i_a] * back[i_b]}).xreplace(back)
        if sp.simplify(e - theirs) != 0:
            raise RuntimeError("gelu_dual: the pass-saving form differs from closed_forms._gelu_separable_t")
    return DualKernel(
        "gelu", pp, dd, forms["mean_phi_sq"], forms["mean_dphi_sq"], forms["price_diag"],
        Source("hendrycks2016", "GELU", "dual kernels by Price's theorem, separable form"),
        definitions=definitions)


def from_closed_form(name: str, forms: dict[str, sp.Expr]) -> DualKernel:
    """A DualKernel from the five expressions of :func:`resprop.derive.closed_forms.closed_form_dual`."""
    return DualKernel(name, forms["mean_phi_phi"], forms["mean_dphi_dphi"], forms["mean_phi_sq"],
                      forms["mean_dphi_sq"], forms["price_diag"], Source(PAPER, "B9", "closed form by SymPy"))


def tabulated_dual() -> DualKernel:
    """An activation without a closed form: the caller evaluates <phi phi> and <phi' phi'> as functions of the
    correlation rho = K_ab / sqrt(K_aa K_bb) (a tabulated interpolant per layer), and the diagonal expectations
    as functions of K."""
    r_a, r_b, rho = sp.symbols("r_a r_b rho", real=True)
    definitions = ((r_a, 1 / sp.sqrt(K_aa)), (r_b, 1 / sp.sqrt(K_bb)), (rho, K_ab * r_a * r_b))
    f = {name: sp.Function(name) for name in ("mean_phi_phi", "mean_dphi_dphi", "mean_phi_sq", "mean_dphi_sq",
                                               "price_diag")}
    return DualKernel(
        "tabulated", f["mean_phi_phi"](rho), f["mean_dphi_dphi"](rho), f["mean_phi_sq"](K), f["mean_dphi_sq"](K),
        f["price_diag"](K), Source(PAPER, "B9", "expectations evaluated by the caller"), tuple(f),
        definitions=definitions)


def closed_form_duals() -> dict[str, DualKernel]:
    """The activations whose recursions are generated with their closed-form dual kernels."""
    return {"erf": erf_dual(), "relu": relu_dual(), "gelu": gelu_dual()}


# --------------------------------------------------------------------------- the recursions
def recursions_for(dual: DualKernel, prefix: str | None = None) -> list[Recursion]:
    """The six fused recursions of one activation: pairs (NNGP; NNGP + NTK; NNGP + response) and the diagonal
    (the same three)."""
    name = prefix or dual.name
    E, Ed = dual.mean_phi_phi, dual.mean_dphi_dphi
    src = Source(PAPER, "B9-B10, 45, 47", f"with Hayou et al. (2021) eq. 9; {dual.name} dual kernels")
    nngp = skip_gain * K_ab + branch_weight * E + branch_bias
    # factored so that the NTK costs one multiplication by Theta: (g + w <phi' phi'>) Theta + (w <phi phi> + s)
    ntk = (skip_gain + branch_weight * Ed) * Theta_ab + (branch_weight * E + branch_bias)
    chi = (skip_gain + branch_weight * Ed) * chi_ab
    Kd, Td, Xd = sp.Symbol("K", positive=True), sp.Symbol("Theta", real=True), sp.Symbol("chi", real=True)
    Es = dual.mean_phi_sq.subs(K, Kd)
    nngp_d = skip_gain * Kd + branch_weight * Es + branch_bias
    ntk_d = (skip_gain + branch_weight * dual.mean_dphi_sq.subs(K, Kd)) * Td + (branch_weight * Es + branch_bias)
    chi_d = (skip_gain + branch_weight * dual.price_diag.subs(K, Kd)) * Xd
    pair = dict(rows=(K_aa,), cols=(K_bb,), sequences=SEQUENCES, callbacks=dual.callbacks,
                definitions=dual.definitions)
    diag = dict(sequences=SEQUENCES, callbacks=dual.callbacks)
    pair_domain = (f"K_ab, Theta_ab, chi_ab: strips of the previous layer's pair elements; K_aa (L, h, 1), K_bb "
                   f"(L, 1, n): the diagonal at the layer before each step ({dual.pair_domain}); skip_gain, "
                   f"branch_weight, branch_bias: (L,) arrays >= 0")
    diag_domain = "K > 0, Theta and chi real: arrays of diagonal elements; skip_gain, branch_weight, branch_bias: " \
                  "(L,) arrays >= 0"
    what = f"{dual.name} residual network"
    return [
        Recursion(f"{name}_nngp", f"K^(L) of the {what} for pairs of inputs", src, ((K_ab, nngp),),
                  domain=pair_domain, **pair),
        Recursion(f"{name}_nngp_ntk", f"K^(L) and Theta^(L) of the {what} for pairs of inputs", src,
                  ((K_ab, nngp), (Theta_ab, ntk)), domain=pair_domain, **pair),
        Recursion(f"{name}_nngp_response", f"K^(L) and the response chi^(L) of the {what} for pairs of inputs",
                  src, ((K_ab, nngp), (chi_ab, chi)), domain=pair_domain, **pair),
        Recursion(f"{name}_diagonal", f"K^(L) of the {what} on the diagonal", src, ((Kd, nngp_d),),
                  domain=diag_domain, **diag),
        Recursion(f"{name}_diagonal_ntk", f"K^(L) and Theta^(L) of the {what} on the diagonal", src,
                  ((Kd, nngp_d), (Td, ntk_d)), domain=diag_domain, **diag),
        Recursion(f"{name}_diagonal_response", f"K^(L) and chi^(L) of the {what} on the diagonal", src,
                  ((Kd, nngp_d), (Xd, chi_d)), domain=diag_domain, **diag),
    ]


def derive_residual() -> Derivation:
    """The one-step updates (for the LaTeX export and the elementwise kernels) and the fused recursions of every
    closed-form activation and of the tabulated one (``Derivation.recursions``)."""
    d = Derivation("residual", "Residual network kernels: NNGP, NTK and response recursions", PAPER)
    domains = d.declare(PARAMETERS)
    d.declare(NETWORK_PARAMETERS)  # declared (parameters.py, the reference), taken by no result
    add = d.adder(domains)
    order = [p.symbol for p in PARAMETERS]
    add("nngp_update", skip_gain * K_ab + branch_weight * E_phiphi + branch_bias, order, "B9-B10",
        "K^(l) from K^(l-1) and <phi phi>", r"K_{ab}^{(\ell)}", kind="recursion",
        statement=r"A residual block $z \to \gamma z + \lambda_\ell (W \phi(z) + b)$ with $g_\ell = \gamma^2$, "
                  r"$w_\ell = \lambda_\ell^2 \sigma_w^2$ and $s_\ell = \lambda_\ell^2 \sigma_b^2$ updates the "
                  r"kernel as")
    add("ntk_update", skip_gain * Theta_ab + branch_weight * (E_phiphi + E_dphidphi * Theta_ab) + branch_bias,
        order, "9", "Theta^(l) from Theta^(l-1), <phi phi> and <phi' phi'>", r"\Theta_{ab}^{(\ell)}",
        kind="recursion", note="Hayou et al. (2021)",
        statement=r"The neural tangent kernel adds the backward term of the same block:")
    add("response_update", (skip_gain + branch_weight * E_dphidphi) * chi_ab, order, "45, 47",
        "chi^(l) = dK^(l)/dK^(0) from chi^(l-1) and <phi' phi'>", r"\chi_{ab}^{(\ell)}", kind="recursion",
        statement=r"The linear response of the kernel to the input kernel obeys")
    recursions = []
    for dual in (*closed_form_duals().values(), tabulated_dual()):
        recursions.extend(recursions_for(dual))
    d.recursions = recursions
    return d
