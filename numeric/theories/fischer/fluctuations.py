"""O(1/N) kernel fluctuations G_CC = G_{CC~} S_{C~C~} G_{C~C} (Fischer et al. C18-C20), single input.

The propagator column G_{CC~}^{.m} obeys the same forward recursion as the
response (43, C13) with a source delta_{lm}/N; S_{C~C~} holds the fourth
cumulants <phi^2(h^(k-1)), phi^2(h^(n-1))>^c (35, C4), where h^(a), h^(b) are
jointly Gaussian with covariance K^(min(a, b)) because the residuals f^(l)
are independent (B8).  Var K^(l) sums the whole covariance block: the
residual kernels of different layers are correlated, which (C20) omits.

O(depth) memory.  With c_l = w_l g_l (w_l the weight of <phi^2> in C^(l), g_l = <phi'^2 + phi phi''> at
K^(l-1)) the propagator is G12[l, k] = (delta_lk + c_l P_(l-1)/P_k [k < l]) / N with P_l = prod_(j<=l)
(1 + c_j), so its prefix sums are S_l[k] = P_l / (N P_k) (k <= l) and, with u_k = w_k / P_k and the
fourth cumulants kappa_(a,b),

    Var K^(l) = S_l B S_l^T = P_l^2 Q_l / N,   Q_l = sum_(k,m=1..l) u_k u_m kappa_(k-1,m-1),
    Var C^(l) = (w_l^2 kappa_(l-1,l-1) + 2 c_l w_l P_(l-1) R_l + c_l^2 P_(l-1)^2 Q_(l-1)) / N,
    R_l = sum_(k<l) u_k kappa_(k-1,l-1),

which is the dense G12 B G12^T of the (L+2) x (L+2) matrices summed in closed form (tests compare the two).
That recursion over l is generated (``kernel_fluctuations`` of `generated.fischer_recursions` (this theory's), from
`derive/theories/fischer.py`); this module prepares its inputs (w_l, c_l, the diagonal cumulants
kappa_(l-1,l-1)) and evaluates R_l, the one term that reaches back over all earlier layers, as its callback:
row l-1 of the fourth cumulants kappa_(k-1,l-1), k < l, dotted with the weights u_k of the earlier layers.
The (L+1)(L+2)/2 fourth cumulants are evaluated row by row in chunks (bounded memory); their number is the
cost, so depths whose cumulants would take too long are refused up front.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import resprop.numeric.theories.fischer.generated.fischer as gen
import resprop.numeric.theories.fischer.generated.fischer_recursions as frec
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.expectations import kernels
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.theories.fischer.field_theory import MAX_DEPTH, response

#: fourth-cumulant pairs per chunk (the erf/tanh quadratures hold ~5k-16k nodes per pair)
_CHUNK_PAIRS = 128
#: most fourth-cumulant pairs computed, by activation kind, ~1 minute on one core each: closed forms (linear,
#: ReLU: ~1 us per pair), erf (1-D Owen's-T reduction, ~1 ms per pair) and the 2-D Gauss-Hermite quadratures
#: (tanh, GELU, custom: ~1.6 ms per evaluation, two per pair: they are symmetrised, see below)
MAX_PAIRS_CLOSED = 20_000_000
MAX_PAIRS_QUADRATURE = 60_000
MAX_PAIRS_QUADRATURE_2D = 20_000
#: the dense (L+2) x (L+2) matrices cov_C and G12 are returned (full=True) only up to this many bytes
MAX_FULL_BYTES = 256 * 2**20


def _fourth_cumulant(kern, K: np.ndarray, m2: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    Ka, Kb = K[a], K[b]
    return gen.fourth_cumulant(kern.mean_phi_sq_phi_sq(Ka, Kb, np.minimum(Ka, Kb)), m2[a], m2[b])


def _symmetric_only(kern) -> bool:
    """kappa(a, b) = kappa(b, a) to round-off: closed forms and the erf reduction; a 2-D quadrature is
    symmetric only to its accuracy (~1e-6), so there both orders are evaluated and averaged -- which is what
    the quadratic forms of the dense route (G12 B G12^T with both B[k, m] and B[m, k]) sum."""
    return kern.name in ("linear", "relu", "erf")


def _budget(kern) -> int:
    if kern.name in ("linear", "relu"):
        return MAX_PAIRS_CLOSED
    return MAX_PAIRS_QUADRATURE if kern.name == "erf" else MAX_PAIRS_QUADRATURE_2D


def max_depth(activation="erf") -> int:
    """The largest depth kernel_fluctuations accepts for ``activation`` (its fourth-cumulant budget)."""
    budget = _budget(kernels(activation))
    L = int((np.sqrt(8 * budget + 1) - 3) / 2)  # (L+1)(L+2)/2 <= budget
    while (L + 2) * (L + 3) // 2 <= budget:
        L += 1
    return min(L, MAX_DEPTH)


@dataclass(frozen=True)
class KernelFluctuations(ResultRecord):
    """:func:`kernel_fluctuations`: var_C (l = 0..L+1), var_K, var_K_diagonal_sum and K (l = 0..L); with
    ``full`` also the dense cov_C and G12 ((L+2) x (L+2); None otherwise)."""

    depth: int
    width: int
    var_C: np.ndarray
    var_K: np.ndarray
    var_K_diagonal_sum: np.ndarray
    K: np.ndarray
    cov_C: np.ndarray | None = None
    G12: np.ndarray | None = None


def kernel_fluctuations(input_kernel, depth: int, width: int, rho, sigma_w2, sigma_b2, sigma_w2_out=None,
                        sigma_b2_out=None, activation="erf", full: bool = False) -> KernelFluctuations:
    """Covariance of the residual kernels C^(0..L+1) at width N for the input kernel K^(0) = input_kernel.

    Returns (:class:`KernelFluctuations`) ``var_C`` (Var C^(l), l = 0..L+1), ``var_K`` (Var K^(l) = sum_{k, m <= l}
    G_CC^{km}, l = 0..L),
    ``var_K_diagonal_sum`` (the C20 form sum_k G_CC^{kk}) and ``K``, in O(depth) memory.  With ``full`` also
    the dense ``cov_C`` ((L+2) x (L+2), G_CC) and ``G12`` (the propagator block), refused when they would
    exceed MAX_FULL_BYTES.  Depths beyond :func:`max_depth` (the number of fourth cumulants, which grows
    like depth^2) are refused up front with the work and memory they would need -- except for smooth activations
    without ``full``, which go to the finite-width kernel engine beyond that depth (O(depth); `_engine_route`).
    """
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    N = V.integer("width", width, 1, 10**15)
    full = V.flag("full", full)
    kern = kernels(activation)
    limit = max_depth(activation)
    pairs = (L + 1) * (L + 2) // 2
    if L > limit and not full and kern.name not in ("linear", "relu"):
        return _engine_route(input_kernel, L, N, rho, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, activation)
    if L > limit:
        dense = 3 * (L + 2) ** 2 * 8
        raise V.ParameterError("depth", f"must be <= {limit} for activation {kern.name!r}: Var K needs "
                                        f"(L+1)(L+2)/2 = {pairs:,} fourth cumulants at depth {L} (limit "
                                        f"{limit}; the dense matrices would need {dense / 2**30:.3g} GiB)")
    if full and 2 * (L + 2) ** 2 * 8 > MAX_FULL_BYTES:
        raise V.ParameterError("depth", f"full=True returns two (L+2) x (L+2) float64 matrices, "
                                        f"{2 * (L + 2) ** 2 * 8 / 2**20:.0f} MiB at depth {L} (limit "
                                        f"{MAX_FULL_BYTES / 2**20:.0f} MiB); use full=False (O(depth) memory)")
    r = response(input_kernel, L, rho, sigma_w2, sigma_b2, sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out,
                 activation=activation)
    K = r.K  # K^(0..L)
    rho_, sw = float(rho), float(sigma_w2)
    swo = sw if sigma_w2_out is None else float(sigma_w2_out)
    w = np.concatenate([[0.0], np.full(L, rho_**2 * sw), [swo]])  # weight of <phi^2> in C^(l); C^(0) is data
    g = np.concatenate([[0.0], kern.price_diag(K)])  # g_l = <phi'^2 + phi phi''> at K^(l-1), l = 1..L+1
    m2 = kern.mean_phi_sq(K)
    chunk = _CHUNK_PAIRS if kern.name not in ("linear", "relu") else 65_536

    def cumulants(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """kappa(a, b) in chunks (symmetrised where the quadrature is symmetric only to its accuracy)."""
        out = np.empty(a.size)
        for lo in range(0, a.size, chunk):
            aa, bb = a[lo:lo + chunk], b[lo:lo + chunk]
            kap = _fourth_cumulant(kern, K, m2, aa, bb)
            out[lo:lo + chunk] = kap if _symmetric_only(kern) else (kap + _fourth_cumulant(kern, K, m2, bb, aa)) / 2
        return out

    u = np.zeros(L + 2)  # u_k = w_k / P_k, as passed by the recursion (u_0 = 0: C^(0) is data)

    def cumulant_row_sum(l, u_l, out):  # layer l + 1: R = sum_(k <= l) u_k kappa(k - 1, l)
        row = cumulants(np.arange(l), np.full(l, l))
        out[...] = u[1:l + 1] @ row
        u[l + 1] = u_l[0]

    with np.errstate(all="ignore"):
        c = w * g
        kap_diag = np.zeros(L + 2)
        kap_diag[1:] = cumulants(np.arange(L + 1), np.arange(L + 1))
        var_C, var_K = np.zeros(L + 2), np.zeros(L + 2)

        def record(l, P, Q, vC, vK):
            var_C[l + 1], var_K[l + 1] = vC[0], vK[0]

        try:
            frec.kernel_fluctuations(np.ones(1), np.zeros(1), np.zeros(1), np.zeros(1), w[1:], c[1:],
                                     kap_diag[1:], cumulant_row_sum=cumulant_row_sum, record=record)
        except OverflowError:  # a per-layer factor (w^2 kappa, ...) beyond float64: reported as not finite below
            var_C[:], var_K[:] = np.inf, np.inf
        var_C /= N
        var_K = var_K[: L + 1] / N
    out = {"var_C": var_C, "var_K": var_K, "var_K_diagonal_sum": np.cumsum(var_C[: L + 1]), "K": K}
    for name in ("var_C", "var_K"):
        V.finite_result("rho, sigma_w2, sigma_b2, input_kernel, depth, activation", out[name], name)
    if full:
        out.update(_dense(K, L, N, w, g, kern))
    return KernelFluctuations(depth=L, width=N, **out)


def _engine_route(input_kernel, L, N, rho, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out,
                  activation) -> KernelFluctuations:
    """Depths beyond the fourth-cumulant budget (smooth activations): the finite-width kernel engine
    (`resprop.numeric.engine.fluctuations.trajectory`, O(depth) work) on the same network -- gamma = 1,
    lambda = rho, one readout layer (0, sigma_w2_out, sigma_b2_out).  N Var K^(l) is the engine's law-kernel
    covariance C^(l), N Var C^(l) = w_l^2 Var U^(l-1) (U the neuron's influence on the post-activation kernel);
    tests compare both routes where the cumulants are affordable."""
    from resprop.numeric.engine.fluctuations import MAX_DEPTH as ENGINE_MAX_DEPTH
    from resprop.numeric.engine.fluctuations import trajectory

    if L > ENGINE_MAX_DEPTH:
        raise V.ParameterError("depth", f"must be <= {ENGINE_MAX_DEPTH} for activation {activation!r} (the "
                                        f"finite-width kernel engine's O(depth) route beyond {max_depth(activation)} "
                                        f"layers; the fourth-cumulant route stops there), got {L}")
    r = response(input_kernel, L, rho, sigma_w2, sigma_b2, sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out,
                 activation=activation)
    sw, sb, lam2 = float(sigma_w2), float(sigma_b2), float(rho) ** 2
    swo = sw if sigma_w2_out is None else float(sigma_w2_out)
    sbo = sb if sigma_b2_out is None else float(sigma_b2_out)
    gam = np.append(np.ones(L), 0.0)
    w = np.append(np.full(L, lam2 * sw), swo)
    s = np.append(np.full(L, lam2 * sb), sbo)
    name = activation if isinstance(activation, str) else str(activation)
    tr = trajectory(np.array([[float(r.K[0])]]), gam, gam * gam, w, s, name, rtol=1e-9, mean_shift=False)
    var_C = np.concatenate([[0.0], w**2 * tr.U[1:, 0, 0, 0, 0]]) / N
    var_K = tr.C[: L + 1, 0, 0, 0, 0] / N
    for label, value in (("var_C", var_C), ("var_K", var_K)):
        V.finite_result("rho, sigma_w2, sigma_b2, input_kernel, depth, activation", value, label)
    return KernelFluctuations(depth=L, width=N, var_C=var_C, var_K=var_K,
                              var_K_diagonal_sum=np.cumsum(var_C[: L + 1]), K=r.K)


def _dense(K, L, N, w, g, kern) -> dict[str, np.ndarray]:
    """The (L+2) x (L+2) propagator block G12 and G_CC = G12 B G12^T (small depths only)."""
    n = L + 2
    G12 = np.zeros((n, n))
    for l in range(n):
        G12[l] = (np.arange(n) == l) / N
        if l > 0:
            G12[l] += w[l] * g[l] * G12[:l].sum(axis=0)
    m2 = kern.mean_phi_sq(K)
    B = np.zeros((n, n))
    for b in range(L + 1):  # kappa(a, b) for every a, as evaluated (not symmetrised)
        B[1:, b + 1] = N * w[1:L + 2] * w[b + 1] * _fourth_cumulant(kern, K, m2, np.arange(L + 1), np.full(L + 1, b))
    return {"cov_C": G12 @ B @ G12.T, "G12": G12}
