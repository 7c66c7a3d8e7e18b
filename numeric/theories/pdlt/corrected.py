"""The O(1/n) fluctuation of ||z^(d)||^2/n in a residual MLP: the corrected single-input theory and B.26.

Setting (PDLT App. B, B.3 with xi = 1, C_b = 0, the critical C_W(gamma) of B.20 / B.21): a single input with
K^(0) = 1 (z^0_i iid N(0, 1) over the width n neurons), then ``depth`` residual layers
z^(l+1) = gamma z^(l) + W^(l) phi(z^(l)), W^(l)_ij ~ N(0, C_W/n).  The quantity is

    R(d) = lim_{n -> oo} n Var[||z^(d)||^2/n] / E[||z^(d)||^2/n]^2.

B.26 predicts R = 2 + V/K^2 (V the four-point vertex of ``vertex_trajectory`` at the same depth d).  Depth
convention (docs/api-renames.md, "Depth: one convention"): ``depth`` d is the number of residual layers after the
input, the input z^0 is layer 0 and per-layer arrays have d + 1 entries; PDLT's own labels (B.3: z^(1) the first
layer, residual updates l = 2..L) are shifted by one, L = d + 1.  d = 0 is the input alone (R = 2).

The corrected theory (derived in ``derive/theories/pdlt_corrected.py``): W is fresh in each layer, so
z^(l+1)_i = gamma z^(l)_i + sigma_l xi^l_i exactly, sigma_l^2 = C_W (1/n) sum_j phi(z^(l)_j)^2, xi iid N(0, 1),
and each neuron keeps its identity along the skip path.  The delta method gives R(d) K_d^2 = E[psi^2] with the
single-neuron influence psi = (z_d^2 - K_d) + P_d, P_(l+1) = chi_l P_l + C_W (phi(z_l)^2 - Phi_l), chi_l = B.15.
Its second moments close into B.26 plus one source: with V_c = 2 E[P (z^2 - K)] + E[P^2] (the PDLT vertex),

    V_c^(l+1) = B.26(V_c^(l)) + 2 chi_l C_W Delta_l,     R(d) = 2 + V_c^(d)/K_d^2,

Delta_l = sum_(j<l) (prod_(j<i<l) chi_i) C_W [Cov(phi(z_j)^2, phi(z_l)^2) - its second Hermite component].
B.26 is exact except for Delta: it keeps only the rho^2 (second Hermite) part of the same-neuron cross-layer
covariance of phi^2 (the covariances Cov(z_d^2, phi(z_k)^2) are pure rho^2 and B.26 keeps them).  Delta is
carried by the Hermite channels c_(l,n) = E[P_l He_n(z_l/sqrt K_l)]/sqrt(n!), which obey the closed recursion
c_(l+1,n) = rho_l^n (chi_l c_(l,n) + C_W h_(l,n)), rho_l = gamma sqrt(K_l/K_(l+1)), h_(l,n) the normalised
Hermite coefficients of phi(z_l)^2, and Delta_l = sum_(n != 0, 2) c_(l,n) h_(l,n).

Scale-invariant class (relu, linear, leaky_relu:a): K is fixed and chi = 1 at criticality, and the closed form
uses the degree-2 arc-cosine kernel: R(d) = 2 + d nu_B26 + 2 C_W^2 sum_(t=1)^(d-1) (d - t) D(gamma^t),
D(rho) = E[phi(u)^2 phi(v)^2] - A_2^2 - 2 A_2^2 rho^2 (unit variances, correlation rho).
Smooth activations (tanh, erf, gelu): the Hermite-channel recursion, coefficients by composite Gauss--Legendre
quadrature.  GELU is a member of neither class of App. B (PDLT §5.3); its C_W here makes the input kernel a
fixed point, C_W = (1 - gamma^2)/<gelu^2>_(K=1), so that K_l = 1 at every layer (C_b = 0; chi_par != 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from scipy.special import erf

import resprop.numeric.theories.pdlt.generated.pdlt as pr
import resprop.numeric.theories.pdlt.generated.pdlt_corrected as pc
import resprop.numeric.theories.pdlt.generated.pdlt_corrected_recursions as pcr
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.pdlt import residual_mlp as rm

__all__ = ["ALLOWED_ACTIVATIONS", "MAX_DEPTH_SCALE_INVARIANT", "MAX_DEPTH_SMOOTH", "corrected_ratio", "b26_ratio",
           "output_kernel", "critical_C_W", "corrected_trajectory", "b26_trajectory", "arccos2_moment", "nu_corrected",
           "CorrectedTrajectory", "channel_trajectory", "r_star_corrected", "gamma_star_corrected",
           "nu_corrected_unit_slope", "li_nica_roy_ratio"]

ALLOWED_ACTIVATIONS = ("relu", "linear", "leaky_relu:<slope>", "tanh", "erf", "gelu")
#: the scale-invariant closed form is O(depth) vectorised work
MAX_DEPTH_SCALE_INVARIANT = 10**6
#: the Hermite-channel recursion of a smooth activation costs ~ channels x nodes per layer
MAX_DEPTH_SMOOTH = 2000
#: Hermite channels tracked for a smooth activation (the channel n of a lag-t covariance is damped by rho^(n t))
MAX_CHANNELS = 320


def _allowed() -> str:
    return ", ".join(ALLOWED_ACTIVATIONS)


def _gelu_mean_sq() -> float:
    """<gelu(z)^2> for z ~ N(0, 1) by the composite Gauss--Legendre rule below (checked against mpmath)."""
    z, w = _panel_rule(1.0, 14.0)
    return float(_gelu(z) ** 2 @ w)


def _gelu(u):
    return 0.5 * u * (1.0 + erf(u / math.sqrt(2.0)))


@dataclass(frozen=True)
class _Act:
    name: str
    kind: str  # "scale_invariant" or "smooth"
    a_plus: float = 1.0
    a_minus: float = 0.0

    def phi(self, u):
        if self.kind == "scale_invariant":
            return np.where(u > 0, self.a_plus * u, self.a_minus * u)
        if self.name == "tanh":
            return np.tanh(u)
        if self.name == "erf":
            return erf(u)
        return _gelu(u)


def _activation(activation) -> _Act:
    if activation == "gelu":
        return _Act("gelu", "smooth")
    try:
        ac = rm.activation_class(activation)
    except ParameterError:
        raise ParameterError("activation", f"unknown activation {activation!r}; allowed: {_allowed()}") from None
    if ac.kind == "scale_invariant":
        if ac.a_plus == 0 and ac.a_minus == 0:
            raise ParameterError("activation", f"{activation!r} is identically zero; allowed: {_allowed()}")
        return _Act(ac.name, "scale_invariant", ac.a_plus, ac.a_minus)
    return _Act(ac.name, "smooth")


def _gamma2(gamma2) -> float:
    g2 = V.scalar("gamma2", gamma2)
    if not 0.0 <= g2 < 1.0:
        raise ParameterError("gamma2", f"must lie in [0, 1) (criticality needs gamma^2 < 1), got {g2!r}")
    return g2


def _depth(depth, maximum: int) -> int:
    """Residual layers after the input; 0 (the input alone) is allowed."""
    return V.integer("depth", depth, minimum=0, maximum=maximum)


def critical_C_W(activation: str, gamma2: float) -> float:
    """C_W(gamma) at criticality, C_b = 0: B.20 (scale-invariant class), B.21 (tanh, erf); for GELU (in neither
    class) the C_W that keeps K = 1 fixed, (1 - gamma^2)/<gelu^2>_(K=1)."""
    ac, g2 = _activation(activation), _gamma2(gamma2)
    if ac.name == "gelu":
        return (1.0 - g2) / GELU_MEAN_SQ
    if ac.kind == "scale_invariant":
        float(rm.critical_C_W(math.sqrt(g2), activation))  # its float64-range check of the slopes
        return (1.0 - g2) / ((ac.a_plus**2 + ac.a_minus**2) / 2)
    return (1.0 - g2) / rm.activation_class(activation).sigma1 ** 2


# --------------------------------------------------------------------------- scale-invariant class
def arccos2_moment(rho, a_plus: float = 1.0, a_minus: float = 0.0):
    """E[phi(u)^2 phi(v)^2] for unit-variance (u, v) of correlation rho, phi = (a_+ z)_{z>0} + (a_- z)_{z<0}:
    (a_+^4 + a_-^4) J(rho) + 2 a_+^2 a_-^2 J(-rho), J(rho) = E[u^2 v^2; u > 0, v > 0], the degree-2 arc-cosine
    kernel [3 rho sqrt(1 - rho^2) + (pi - arccos rho)(1 + 2 rho^2)]/(2 pi) (Cho & Saul 2009), derived in
    ``derive/theories/pdlt_corrected.py`` by integrating over the wedge (the generated kernel)."""
    return pc.phi_sq_cross_moment_scale_invariant(rho, float(a_plus), float(a_minus))


def _excess(rho, ap: float, am: float) -> np.ndarray:
    """D(rho) = Cov(phi_u^2, phi_v^2) minus its rho^2 part (the generated kernel; unit variances)."""
    return pc.cross_layer_excess_scale_invariant(np.clip(rho, -1.0, 1.0), ap, am)


def _unit(ac: _Act) -> tuple[float, float]:
    m = max(abs(ac.a_plus), abs(ac.a_minus))
    return ac.a_plus / m, ac.a_minus / m


def _nu_b26(ac: _Act, g2: float) -> float:
    """B.29 (the generated kernel of ``derive/theories/pdlt.py``)."""
    return float(pr.nu_scale_invariant(math.sqrt(g2), *_unit(ac)))


def _scale_invariant_ratio(ac: _Act, g2: float, depth: int) -> tuple[float, float]:
    """(corrected R(d), B.26's R(d)) of the scale-invariant class at criticality (K fixed, chi = 1):
    R(d) = 2 + d nu_B29 + 2 C_W^2 sum_(t=1)^(d-1) (d - t) D(gamma^t), C_W = (1 - gamma^2)/A_2 (slopes scaled to
    max |a| = 1: R is homogeneous of degree 0 in them)."""
    ap, am = _unit(ac)
    C_W = (1 - g2) / ((ap**2 + am**2) / 2)
    b26 = 2.0 + depth * _nu_b26(ac, g2)
    t = np.arange(1, depth)
    if t.size == 0 or g2 == 0.0:
        return b26, b26
    with np.errstate(under="ignore"):
        rho = math.sqrt(g2) ** t
    return b26 + 2 * C_W**2 * float(np.sum((depth - t) * _excess(rho, ap, am))), b26


def nu_corrected(activation: str, gamma2: float, terms: int | None = None) -> float:
    """Corrected nu(gamma): R(d) = nu d + const + o(1) for the scale-invariant class,
    nu = nu_B29 + 2 C_W^2 sum_(t >= 1) D(gamma^t) (the series converges geometrically; summed until gamma^t
    underflows below 1e-17, or ``terms`` terms).  For tanh and erf (K* = 0) the correction to nu vanishes
    (Delta_l/K_l^2 = O(K_l^2) = O(1/l^2) is summable), so nu = B.35."""
    ac, g2 = _activation(activation), _gamma2(gamma2)
    if ac.kind != "scale_invariant":
        if ac.name == "gelu":
            raise ParameterError("activation", "nu(gamma) is defined for the scale-invariant and K* = 0 classes; "
                                               "gelu belongs to neither")
        return float(rm.nu(math.sqrt(g2), activation))
    ap, am = _unit(ac)
    C_W = (1 - g2) / ((ap**2 + am**2) / 2)
    nu_b = _nu_b26(ac, g2)
    if g2 == 0.0:
        return nu_b
    if terms is None:
        terms = int(math.ceil(math.log(1e-17) / (0.5 * math.log(g2)))) + 1
    terms = V.integer("terms", terms, minimum=1, maximum=10**9)
    total = 0.0
    for t0 in range(1, terms + 1, 10**6):  # chunks: gamma^2 -> 1 needs ~ 78/(1 - gamma^2) terms
        with np.errstate(under="ignore"):
            rho = math.sqrt(g2) ** np.arange(t0, min(terms, t0 + 10**6 - 1) + 1)
        total += float(np.sum(_excess(rho, ap, am)))
    return nu_b + 2 * C_W**2 * total


# --------------------------------------------------------------------------- smooth activations
def _panel_rule(K: float, L: float, order: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss--Legendre nodes on [-L, L] for the standard normal x, refined on |x| <= a where
    phi(sqrt(K) x) has its O(1) features (a = 8/sqrt(K) clipped into [1, 6]); weights include the density."""
    a = float(np.clip(8.0 / math.sqrt(K), 1.0, 6.0))
    coarse = int(math.ceil((L - 6.0) / 0.2)) + 30
    edges = np.concatenate([np.linspace(-L, -a, coarse + 1)[:-1], np.linspace(-a, a, 161)[:-1],
                            np.linspace(a, L, coarse + 1)])
    x, w = np.polynomial.legendre.leggauss(order)
    mid, half = (edges[1:] + edges[:-1]) / 2, (edges[1:] - edges[:-1]) / 2
    z = (mid[:, None] + half[:, None] * x).ravel()
    return z, (half[:, None] * w).ravel() * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def _hermite_coefficients(f: np.ndarray, z: np.ndarray, w: np.ndarray, channels: int) -> np.ndarray:
    """h_n = E[f(x) He_n(x)]/sqrt(n!), n = 0..channels, for quadrature weights w (density included).

    The orthonormal recurrence runs on the Hermite functions He_n(x) sqrt(pdf(x)/n!), which stay below ~1 at
    every node (He_n/sqrt(n!) alone overflows for n ~ 500 at |x| ~ 60); the other sqrt(pdf) goes to the weights."""
    root = np.exp(-z * z / 4) / (2 * math.pi) ** 0.25
    out = np.empty(channels + 1)
    fw = f * np.divide(w, root, out=np.zeros_like(w), where=root > 0)
    prev, cur = np.zeros_like(z), root
    for n in range(channels + 1):
        out[n] = fw @ cur
        prev, cur = cur, (z * cur - math.sqrt(n) * prev) / math.sqrt(n + 1)
    return out


GELU_MEAN_SQ = _gelu_mean_sq()


@dataclass(frozen=True)
class CorrectedTrajectory:
    """K_l, the corrected vertex V_c and B.26's V for l = 0..depth (l = 0 the input), R = 2 + V/K^2 of both,
    Delta_l, the C_W used and the number of Hermite channels (0 for the closed form)."""

    activation: str
    gamma2: float
    depth: int
    C_W: float
    K: np.ndarray
    V_corrected: np.ndarray
    V_b26: np.ndarray
    channels: int

    @property
    def ratio_corrected(self) -> np.ndarray:
        return 2.0 + self.V_corrected / self.K**2

    @property
    def ratio_b26(self) -> np.ndarray:
        return 2.0 + self.V_b26 / self.K**2


def _kernel_trajectory(ac: _Act, g2: float, depth: int, C_W: float) -> np.ndarray:
    """K_l, l = 0..depth, K_0 = 1 (B.12 with C_b = 0)."""
    K = np.empty(depth + 1)
    K[0] = 1.0
    for l in range(depth):
        Kl = K[l]
        z, w = _panel_rule(Kl, 12.0)
        # GELU's C_W makes K = 1 a fixed point: kept exactly (the fixed point is unstable, chi_par > 1, and a
        # recomputed K would amplify round-off by chi_par per layer)
        K[l + 1] = 1.0 if ac.name == "gelu" else g2 * Kl + C_W * float(ac.phi(math.sqrt(Kl) * z) ** 2 @ w)
        if not (np.isfinite(K[l + 1]) and 1e-150 < K[l + 1] < 1e150):
            raise ParameterError("depth", f"the kernel K^(l) of {ac.name} leaves [1e-150, 1e150] at layer {l + 1}; "
                                          f"use a depth below {l + 1}")
    return K


def _smooth_trajectory(ac: _Act, g2: float, depth: int, C_W: float) -> CorrectedTrajectory:
    """The finite-width kernel engine's trajectory (`resprop.numeric.engine.fluctuations.trajectory`: one input,
    K^(0) = 1, gamma = sqrt(gamma2), w = C_W, no bias), the corrected vertex V_c = V - 2 K^2 and B.26 as its
    closure; channels raised until the truncation estimate is below 1e-12.  :func:`channel_trajectory` is this
    module's own generated recursion, kept as the independent reference."""
    from resprop.numeric.engine.fluctuations import trajectory

    if depth == 0:  # the input alone: Gaussian, V = 0
        return CorrectedTrajectory(ac.name, g2, 0, C_W, np.ones(1), np.zeros(1), np.zeros(1), 0)
    tr = trajectory(np.ones((1, 1)), np.full(depth, math.sqrt(g2)), np.full(depth, g2), np.full(depth, C_W),
                    np.zeros(depth), ac.name, rtol=1e-12, mean_shift=False)
    K = tr.K[:, 0, 0]
    if ac.name == "gelu":  # C_W makes K = 1 a fixed point (to round-off of <gelu^2>)
        K = np.ones(depth + 1)
    wick = 2.0 * tr.K[:, 0, 0] ** 2
    return CorrectedTrajectory(ac.name, g2, depth, C_W, K, tr.V[:, 0, 0, 0, 0] - wick,
                               tr.V_closure[:, 0, 0, 0, 0] - wick, tr.channels)


def channel_trajectory(activation: str, gamma2: float, depth: int) -> CorrectedTrajectory:
    """The reference route for smooth activations: this module's generated Hermite-channel recursion
    (``hermite_channels``, composite Gauss-Legendre coefficients, up to MAX_CHANNELS) feeding Delta_l into the
    generated ``vertex_corrected``; B.26 is the same recursion with Delta = 0."""
    ac, g2 = _activation(activation), _gamma2(gamma2)
    if ac.kind == "scale_invariant":
        raise ParameterError("activation", "channel_trajectory is the smooth activations' route (tanh, erf, gelu)")
    return _channel_trajectory(ac, g2, _depth(depth, MAX_DEPTH_SMOOTH), critical_C_W(activation, g2))


def _channel_trajectory(ac: _Act, g2: float, depth: int, C_W: float) -> CorrectedTrajectory:
    gamma = math.sqrt(g2)
    K = _kernel_trajectory(ac, g2, depth, C_W)
    if depth == 0:  # the input alone: Gaussian, V = 0
        return CorrectedTrajectory(ac.name, g2, 0, C_W, K, np.zeros(1), np.zeros(1), 0)
    rho = np.asarray(pc.channel_correlation(gamma, K[:-1], K[1:]), dtype=float)
    rmax = float(rho.max())
    if rmax == 0.0:
        channels = 4
    elif rmax >= 1.0 - 1e-9:  # gamma -> 1 (rho_l rounds to 1): the cap; the h_n themselves decay
        channels = MAX_CHANNELS
    else:
        channels = int(min(MAX_CHANNELS, math.ceil(math.log(1e-18) / math.log(rmax)) + 4))
    L = 2.0 * math.sqrt(channels) + 10.0
    H = np.zeros((depth, channels + 1))  # Hermite coefficients of phi^2 - <phi^2> (h_0 = 0)
    Phi, q, phi4 = np.empty(depth), np.empty(depth), np.empty(depth)
    for l in range(depth):
        Kl = float(K[l])
        if l and Kl == K[l - 1]:  # a fixed kernel (GELU) needs the coefficients once
            H[l], Phi[l], q[l], phi4[l] = H[l - 1], Phi[l - 1], q[l - 1], phi4[l - 1]
            continue
        z, w = _panel_rule(Kl, L)
        f = ac.phi(math.sqrt(Kl) * z) ** 2
        h = _hermite_coefficients(f, z, w, channels)
        Phi[l], q[l], phi4[l] = h[0], float(f * Kl * z * z @ w), float(f * f @ w)
        H[l, 1:] = h[1:]
    chi = g2 + C_W * (q - K[:-1] * Phi) / (2 * K[:-1] ** 2)  # B.15
    shape = (depth, channels + 1)
    delta = np.zeros(depth)
    keep = np.ones(channels + 1, dtype=bool)
    keep[[0, 2]] = False  # n = 2 is Phi' Q, inside B.26; n = 0 vanishes

    def record(l, c):
        if l + 1 < depth:
            delta[l + 1] = float(c[keep] @ H[l + 1, keep])

    nn = np.arange(channels + 1, dtype=float)
    pcr.hermite_channels(np.zeros(channels + 1), np.broadcast_to(rho[:, None], shape),
                         np.broadcast_to(nn, shape), np.broadcast_to(chi[:, None], shape),
                         np.broadcast_to(np.full((depth, 1), C_W), shape), H, record=record)
    seqs = (K[:-1], np.full(depth, gamma), np.full(depth, C_W), Phi, q, phi4)
    Vc, Vb = np.zeros(depth + 1), np.zeros(depth + 1)

    def keep_c(l, v):
        Vc[l + 1] = v[0]

    def keep_b(l, v):
        Vb[l + 1] = v[0]

    pcr.vertex_corrected(np.zeros(1), *seqs, delta, record=keep_c)
    pcr.vertex_corrected(np.zeros(1), *seqs, np.zeros(depth), record=keep_b)
    return CorrectedTrajectory(ac.name, g2, depth, C_W, K, Vc, Vb, channels)


def corrected_trajectory(activation: str, gamma2: float, depth: int) -> CorrectedTrajectory:
    """The corrected and B.26 trajectories for l = 0..depth (see the module docstring)."""
    ac, g2 = _activation(activation), _gamma2(gamma2)
    C_W = critical_C_W(activation, g2)
    if ac.kind == "scale_invariant":
        d = _depth(depth, MAX_DEPTH_SCALE_INVARIANT)
        if d > 4096:
            raise ParameterError("depth", "the full trajectory is kept for depth <= 4096; corrected_ratio takes "
                                          f"depths up to {MAX_DEPTH_SCALE_INVARIANT}")
        rc = np.array([2.0] + [_scale_invariant_ratio(ac, g2, k)[0] for k in range(1, d + 1)])
        rb = np.array([2.0] + [_scale_invariant_ratio(ac, g2, k)[1] for k in range(1, d + 1)])
        return CorrectedTrajectory(ac.name, g2, d, C_W, np.ones(d + 1), rc - 2.0, rb - 2.0, 0)
    return _smooth_trajectory(ac, g2, _depth(depth, MAX_DEPTH_SMOOTH), C_W)


def output_kernel(activation: str, gamma2: float, depth: int) -> float:
    """K^(d) = E[||z^d||^2/n] at n -> oo (B.12, K^(0) = 1): 1 for the scale-invariant class and GELU."""
    ac, g2 = _activation(activation), _gamma2(gamma2)
    if ac.kind == "scale_invariant":
        _depth(depth, MAX_DEPTH_SCALE_INVARIANT)
        return 1.0
    return float(_kernel_trajectory(ac, g2, _depth(depth, MAX_DEPTH_SMOOTH), critical_C_W(activation, g2))[-1])


def corrected_ratio(activation: str, gamma2: float, depth: int) -> float:
    """R(d) = lim n Var[||z^d||^2/n]/E[||z^d||^2/n]^2 of the corrected theory (n -> oo, K^(0) = 1, C_b = 0,
    critical C_W): see the module docstring.  ``depth`` is the number of residual layers after the input."""
    ac, g2 = _activation(activation), _gamma2(gamma2)
    if ac.kind == "scale_invariant":
        return _scale_invariant_ratio(ac, g2, _depth(depth, MAX_DEPTH_SCALE_INVARIANT))[0]
    tr = _smooth_trajectory(ac, g2, _depth(depth, MAX_DEPTH_SMOOTH), critical_C_W(activation, g2))
    return float(tr.ratio_corrected[-1])


def b26_trajectory(activation: str, gamma2: float, depth: int):
    """PDLT's own trajectory (``vertex_trajectory``, B.12 with B.26) for ``depth`` residual layers: the returned
    arrays have depth + 1 entries, l = 0..depth (l = 0 the input, PDLT's layer 1)."""
    ac, g2 = _activation(activation), _gamma2(gamma2)
    d = _depth(depth, min(rm.MAX_TRAJECTORY_DEPTH,
                          MAX_DEPTH_SCALE_INVARIANT if ac.kind == "scale_invariant" else MAX_DEPTH_SMOOTH))
    if ac.name == "gelu":
        return _gelu_vertex_trajectory(g2, d)
    return rm.vertex_trajectory(activation, gamma=math.sqrt(g2), depth=d)


def _gelu_vertex_trajectory(g2: float, depth: int):
    """B.12 with B.26 for GELU: the generated ``kernel_vertex`` recursion with GELU's Gaussian moments."""
    import resprop.numeric.theories.pdlt.generated.pdlt_recursions as prr
    C_W = critical_C_W("gelu", g2)
    K = np.empty(depth + 1)
    Vv = np.empty(depth + 1)
    K[0], Vv[0] = 1.0, 0.0

    def keep(l, K_l, V_l):
        K[l + 1], Vv[l + 1] = K_l[0], V_l[0]

    seqs = (np.full(depth, math.sqrt(g2)), np.full(depth, C_W), np.zeros(depth))
    callbacks = rm._Moments(SimpleNamespace(sigma=_gelu)).callbacks()  # type: ignore[arg-type]
    with np.errstate(all="ignore"):
        prr.kernel_vertex(np.array([1.0]), np.zeros(1), *seqs, **callbacks, record=keep)
    if not (np.all(np.isfinite(K)) and np.all(np.isfinite(Vv)) and np.all(K > 0)):
        raise ParameterError("depth", "K^(l) or V^(l) of gelu leaves the float64 range; use a smaller depth")
    return SimpleNamespace(K=K, V=Vv, V_over_K2=Vv / K**2, C_W=C_W)


def b26_ratio(activation: str, gamma2: float, depth: int) -> float:
    """R(d) = 2 + V/K^2 of B.26 for ``depth`` residual layers after the input (the last layer of
    ``vertex_trajectory(depth=d)``, from K = 1, V = 0 at the input; PDLT's layer d + 1)."""
    return 2.0 + float(b26_trajectory(activation, gamma2, depth).V_over_K2[-1])


# --------------------------------------------------------------------------- r*, gamma*, deep asymptotics, LNR
#: gamma*(r) evaluates nu_corrected down to 1 - gamma^2 = this (the series needs ~ 78/(1 - gamma^2) terms)
MIN_ONE_MINUS_GAMMA2 = 1e-5


def r_star_corrected(activation: str, gamma2: float, n_out: int = 1) -> float:
    """Optimal aspect ratio with the corrected nu: r* = 4/((20 + 3 n_L) nu_corr) (B.36 with nu_corr)."""
    n_out = V.integer("n_out", n_out, minimum=1)
    return float(pr.r_star(nu_corrected(activation, gamma2), n_out))


def gamma_star_corrected(r: float, activation: str, n_out: int = 1) -> float:
    """gamma*(r) with the corrected nu (the scale-invariant class): the largest gamma with
    nu_corr(gamma) = 4/((20 + 3 n_L) r), the branch with gamma* -> 1 as r -> oo (mirrors ``gamma_star``).

    Unlike B.29, nu_corr is not monotone in gamma (ReLU: 5 at gamma = 0, 6.50 at gamma^2 = 1/4), so r*_corr(gamma)
    has a minimum; where the target exceeds max nu_corr the criterion cannot be met and gamma* = 0.  Roots are
    bracketed on a grid of gamma^2 (linear to 0.9, then logarithmic in 1 - gamma^2 down to
    ``MIN_ONE_MINUS_GAMMA2``) and refined by Brent's method to 1e-13."""
    from scipy.optimize import brentq
    r = float(V.scalar("r", r, V.positive))
    n_out = V.integer("n_out", n_out, minimum=1)
    ac = _activation(activation)
    if ac.kind != "scale_invariant":
        raise ParameterError("activation", f"gamma_star_corrected is for relu, linear, leaky_relu:<slope>; got "
                                           f"{activation!r} (the K* = 0 class keeps nu of B.35: use gamma_star)")
    target = 4.0 / ((20 + 3 * n_out) * r)
    grid = np.concatenate([np.linspace(0.0, 0.9, 91)[:-1], 1 - np.logspace(-1, math.log10(MIN_ONE_MINUS_GAMMA2), 41)])
    nus = np.array([nu_corrected(activation, g2) for g2 in grid])
    above = np.nonzero(nus >= target)[0]
    if above.size == 0:
        return 0.0
    i = int(above[-1])
    if i == grid.size - 1:
        raise ParameterError("r", f"gamma* has 1 - gamma*^2 < {MIN_ONE_MINUS_GAMMA2:g} at r = {r:g}; use a smaller r")
    g2 = brentq(lambda x: nu_corrected(activation, x) - target, grid[i], grid[i + 1], xtol=1e-15, rtol=1e-13)
    return math.sqrt(g2)


def nu_corrected_unit_slope(activation: str) -> float:
    """lim_(gamma -> 1) nu_corr/(1 - gamma^2) = 4 + 4 I_D/A_2^2, I_D = int_0^1 D(rho)/rho d rho (slopes scaled to
    max |a| = 1): sum_t D(gamma^t) ~ 2 I_D/(1 - gamma^2).  ReLU: 12 + 4 ln 2 = 14.77 (B.29: 4); so the
    footnote-8 asymptotics become 1 - gamma*^2 ~ 4/((20 + 3 n_L) r (4 + 4 I_D/A_2^2))."""
    from scipy.integrate import quad
    ac = _activation(activation)
    if ac.kind != "scale_invariant":
        raise ParameterError("activation", f"defined for relu, linear, leaky_relu:<slope>; got {activation!r}")
    ap, am = _unit(ac)
    A2 = (ap**2 + am**2) / 2

    def integrand(x):
        return float(_excess(x, ap, am)) / x if x > 0 else 0.0

    I_D, _ = quad(integrand, 0.0, 1.0, epsabs=1e-14, epsrel=1e-13, limit=200)
    return 4.0 + 4.0 * I_D / A2**2


def li_nica_roy_ratio(gamma2: float, depth: int, width: int = 10**9) -> float:
    """width x (beta + c^2 I_total) of Li, Nica & Roy (2021) Thm 1 at alpha = gamma, lambda^2 = 1 - gamma^2
    (ReLU): n Var[ln ||z^d||^2] -> R(d) at leading order; equal to the corrected ReLU R(d)."""
    from resprop.numeric.theories.lognormal import log_gaussian as LG
    g2 = _gamma2(gamma2)
    d = V.integer("depth", depth, minimum=1, maximum=10**6)  # Li, Nica & Roy's theorem needs a residual layer
    n = V.integer("width", width, minimum=2)
    return float(LG.theory(n, d, math.sqrt(g2), math.sqrt(1 - g2)).var_G * n)
