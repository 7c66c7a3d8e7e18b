"""O(1/N) kernel fluctuations of Fischer, Dahmen & Helias on P inputs: Cov(C^(l)_ab, C^(m)_cd), Cov(K^(l)_ab, K^(l)_cd)

The single-input route (C18-C20, `fluctuations.py`) carried over to P x P kernels (A21, C4, C6, C12-C13):

* the Hessian block S_{C~C~} (C4) holds, for layers k, n = 1..L, N w_k w_n kappa^(k-1, n-1)_{(ab),(cd)} with the
  cross-layer fourth cumulant kappa^(a, b)_{(ab),(cd)} = <phi(h^a_a) phi(h^a_b), phi(h^b_c) phi(h^b_d)>^c, where
  (h^a, h^b) is jointly Gaussian with Cov(h^a_a, h^b_c) = K^(min(a, b))_ac (independent residuals, B8), w_l = rho^2
  sigma_w^2;
* the response block S_{C~C} (C6) couples C^(k) to every C^(l), l < k, through the full Jacobian
  d<phi_c phi_d>/dK_ab of the NNGP map at K^(k-1) (Price's theorem C7, here computed as
  (1/2) sum K^{a5} K^{b6} <phi_c phi_d (z_5 z_6 - K_56)>).  The printed C13 keeps only its diagonal
  delta_{(ab),(cd)}; the off-diagonal entries (e.g. d<phi_a phi_b>/dK_aa != 0) are kept here -- the single-input
  theory is unaffected (one element), and dropping them changes the two-input covariances (tests);
* G_{CC~} = -S_{C~C}^{-1} by forward substitution: C^(l) responds to the sources xi_k (k <= l) with
  T[l, k] = delta_lk + w_l J^(l-1) sum_{j<l} T[j, k];  G_CC = T Xi T^T with Xi = S_{C~C~}/N^2 (C9, C18);
* K^(l) = sum_{k<=l} C^(k) (C20, summing the whole covariance block as `fluctuations.py` does; C^(0) is data).

At P = 1 this is `fluctuations.kernel_fluctuations` (tested).  ``derive/theories/fischer.py``'s symbolic action
(``build_action(L, inputs=P)``, ``propagator``) is the SymPy route of the same G_CC; tests compare the two at
P = 2.  The fluctuation recursion runs over matrices in pair space, which the elementwise recursion codegen does not
express, so this driver is plain NumPy.

Gaussian expectations: the quadratures of `resprop.numeric.theories.pdlt.multi_input` (orthant cones for relu /
linear, whitened trapezoid for tanh / erf) on the 2P-dimensional joint (h^a, h^b) for P <= 2, and on the at most four
distinct variables of each cumulant for P = 3, 4 (slower).  Accuracy: ~1e-5 relative for the cross-layer cumulants of
strongly correlated layers (cone / grid resolution of a near-degenerate covariance), far below the Monte Carlo error.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from resprop.numeric.engine import fluctuations as engine_fluctuations
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.pdlt import multi_input as Q
from resprop.numeric.theories.pdlt.residual_mlp import activation_class

__all__ = ["multi_input_fluctuations", "MultiInputFluctuations", "ACTIVATIONS", "MAX_DEPTH", "inputs_at_angle",
           "compare_with_simulation"]

ACTIVATIONS = ("erf", "tanh", "relu", "linear")
#: the covariance blocks are (L+1)^2 P^4 numbers and each layer pair needs one 2P-dimensional quadrature (P <= 2)
#: or up to P^4 four-dimensional ones (P = 3, 4)
MAX_DEPTH = 64
#: the engine route's channel ladder stops at this relative truncation estimate (pairs reach it at <= 64 channels;
#: 3 and 4 inputs usually end at their caps, 40 and 16, a few 1e-5 .. 1e-4 for strongly correlated inputs,
#: against the quadrature's ~1e-5 and an O(1/N) theory's O(1/N) relative corrections)
ENGINE_RTOL = 1e-10


def _rule(Sigma: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature nodes/weights for N(0, Sigma), Sigma m x m (m <= 4), with tiny jitter against exact degeneracy."""
    S = (Sigma + Sigma.T) / 2
    S = S + 1e-13 * np.max(np.diag(S)) * np.eye(S.shape[0])
    return Q._cone_rule(S) if kind == "scale_invariant" else Q._trapezoid_rule(S)


def _cumulants(Ka: np.ndarray, Kb: np.ndarray, Km: np.ndarray, ac) -> np.ndarray:
    """kappa[(a, b), (c, d)] = <phi(h_a) phi(h_b) phi(g_c) phi(g_d)> - <phi_a phi_b><phi_c phi_d>, (h, g) jointly
    Gaussian with Cov(h) = Ka, Cov(g) = Kb, Cov(h, g) = Km; shape (P, P, P, P)."""
    P = Ka.shape[0]
    if np.array_equal(Ka, Kb) and np.array_equal(Km, Ka):  # one layer: h = g, the P-dimensional moments
        g, f, _ = Q._moments(Ka, ac)
        return f - np.einsum("ab,cd->abcd", g, g)
    if 2 * P <= 4:
        z, w = _rule(np.block([[Ka, Km], [Km.T, Kb]]), ac.kind)
        s = ac.sigma(z)
        sh = (s[:, :P, None] * s[:, None, :P]).reshape(-1, P * P)
        sg = (s[:, P:, None] * s[:, None, P:]).reshape(-1, P * P)
        joint = ((sh * w[:, None]).T @ sg).reshape(P, P, P, P)
        return joint - np.einsum("ab,cd->abcd", (w @ sh).reshape(P, P), (w @ sg).reshape(P, P))
    big = np.block([[Ka, Km], [Km.T, Kb]])
    out = np.empty((P, P, P, P))
    ga = Q._moments(Ka, ac)[0]
    gb = Q._moments(Kb, ac)[0]
    for a, b, c, d in itertools.product(range(P), repeat=4):
        if (a, b, c, d) > (b, a, c, d) or (a, b, c, d) > (a, b, d, c):
            continue
        idx = [a, b, P + c, P + d]
        uniq = sorted(set(idx))
        z, w = _rule(big[np.ix_(uniq, uniq)], ac.kind)
        s = ac.sigma(z)
        col = {u: s[:, i] for i, u in enumerate(uniq)}
        val = w @ (col[idx[0]] * col[idx[1]] * col[idx[2]] * col[idx[3]]) - ga[a, b] * gb[c, d]
        for aa, bb in ((a, b), (b, a)):
            for cc, dd in ((c, d), (d, c)):
                out[aa, bb, cc, dd] = val
    return out


@dataclass(frozen=True)
class MultiInputFluctuations(ResultRecord):
    """:func:`multi_input_fluctuations`: for layers l = 0..L the NNGP kernels K (L+1, P, P) and residual kernels C,
    cov_C (L+1, L+1, P, P, P, P) = Cov(C^(l)_ab, C^(m)_cd) and cov_K (L+1, P, P, P, P) = Cov(K^(l)_ab, K^(l)_cd),
    both O(1/N) (divided by the width)."""

    depth: int
    width: int
    K: np.ndarray
    C: np.ndarray
    cov_C: np.ndarray
    cov_K: np.ndarray
    #: the route that computed it ("engine" or "quadrature")
    route: str = "quadrature"
    #: the engine route: its Hermite channels and the largest relative truncation estimate of the law covariance
    #: over the layers (|V(N) - V(N/2)| / max|V|); None on the quadrature route
    channels: int | None = None
    truncation: float | None = None


def multi_input_fluctuations(input_kernel, depth: int, width: int, rho, sigma_w2, sigma_b2,
                             activation: str = "erf", response: str = "full",
                             route: str = "auto") -> MultiInputFluctuations:
    """Cov of the P x P residual kernels C^(l) and kernels K^(l) = sum_{k<=l} C^(k), l = 0..depth, at width N (O(1/N))
    for the input kernel K^(0) = input_kernel (P x P, positive definite); see the module docstring.

    ``response="full"`` propagates with the whole Jacobian d<phi_c phi_d>/dK_ab (what the action gives);
    ``"c13"`` keeps only its diagonal, the delta_{(ab),(cd)} of C13 as printed (for comparison).

    ``route``: "engine" computes the full response with the finite-width kernel engine
    (`resprop.numeric.engine.fluctuations.trajectory(two_time=True)`: Fischer's auxiliary field is the engine's law
    kernel, Cov(K~^k, K~^l) its two-time covariance, C^(l) = K~^(l) - K~^(l-1)); "quadrature" the fourth cumulants
    and the forward substitution above; "auto" the engine for "full" on P <= 4 inputs and the quadrature for
    "c13" (which the engine, with its full Jacobian, does not express), for P > 4, and for P = 3, 4 when the
    engine's truncation estimate at its cap exceeds the engine's AUTO_RTOL (1e-4).  The engine's Hermite
    channels climb its ladders (pairs: to 1e-10; 3 inputs: 12..40, 4 inputs: 8..16 channels, to ENGINE_RTOL or
    the cap; ``channels`` and ``truncation`` of the result say where it ended).  At P = 3 (erf, K = 1.6, 45
    degrees) the engine ends at 40 channels within 2.4e-7 (depth 3) and 4.6e-5 (depth 6) of the quadrature, its
    estimates 5.6e-6 and 5.6e-5, in 9-14 s against the quadrature's 34 s and 160 s.  At P = 4 (depth 3) the
    16-channel cap ends 3-5.5e-4 from the quadrature (estimate 4.5e-4), so "auto" takes the quadrature there
    (81 s; the engine 9.5 s).  docs/fluctuations.md has the table."""
    if response not in ("full", "c13"):
        raise ParameterError("response", f"must be 'full' or 'c13', got {response!r}")
    if route not in ("auto", "engine", "quadrature"):
        raise ParameterError("route", f"must be 'auto', 'engine' or 'quadrature', got {route!r}")
    if route == "engine" and response != "full":
        raise ParameterError("route, response", "the engine propagates the full Jacobian: route='engine' needs "
                                                "response='full'")
    if activation not in ACTIVATIONS:
        raise ParameterError("activation", f"must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    ac = activation_class(activation)
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    N = V.integer("width", width, 1, 10**15)
    rho_ = V.scalar("rho", rho, V.nonnegative)
    sw = V.scalar("sigma_w2", sigma_w2, V.positive)
    sb = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    K0 = Q._kernel_matrix(input_kernel, None, 1.0, 0.0)
    P = K0.shape[0]
    # products overflow to inf (caught here), where ** would raise OverflowError
    w, s = rho_ * rho_ * sw, rho_ * rho_ * sb
    if not (math.isfinite(w) and math.isfinite(s)):
        raise ParameterError("rho, sigma_w2, sigma_b2", "rho^2 sigma_w2 or rho^2 sigma_b2 is not finite in float64")
    if route == "engine" or (route == "auto" and response == "full" and P <= 4):
        engine = _engine_route(K0, L, N, w, s, activation)
        if route == "engine" or P <= 2 or (engine.truncation is not None
                                           and engine.truncation <= engine_fluctuations.AUTO_RTOL):
            return engine
        # "auto" at 3-4 inputs whose channels ended above AUTO_RTOL (4 strongly correlated inputs: the 16-channel
        # cap leaves ~5e-4): the cumulant route, ~1e-5
    # NNGP (B9-B10) and the Jacobians J^(l) = d<phi phi>/dK at K^(l)
    Ks, Cs, Js = [K0], [K0.copy()], []
    for _ in range(L):
        g, _f, q = Q._moments(Ks[-1], ac)
        Js.append(Q._derivative(Ks[-1], g, q))
        C = w * g + s
        Cs.append(C)
        Ks.append(Ks[-1] + C)
    Ks_a, Cs_a = np.array(Ks), np.array(Cs)
    if not np.all(np.isfinite(Ks_a)):
        raise ParameterError("rho, sigma_w2, sigma_b2, input_kernel, depth", "the kernel leaves the float64 range")
    M2 = P * P
    # Xi[k, n] = Cov(xi_k, xi_n) * N = w^2 kappa^(k-1, n-1), k, n = 1..L
    Xi = np.zeros((L + 1, L + 1, M2, M2))
    for a in range(L):
        for b in range(a, L):
            kap = _cumulants(Ks[a], Ks[b], Ks[a], ac).reshape(M2, M2)
            Xi[a + 1, b + 1] = w * w * kap
            Xi[b + 1, a + 1] = w * w * kap.T
    # T[l, k]: response of C^(l) to the source xi_k (C13 with the full Jacobian); C^(0) is data (no source)
    T = np.zeros((L + 1, L + 1, M2, M2))
    for l in range(1, L + 1):
        T[l, l] = np.eye(M2)
        J = w * Js[l - 1].reshape(M2, M2)  # row (c, d), column (a, b)
        if response == "c13":  # the printed delta_{(ab),(cd)}: d<phi_a phi_b>/dK_ab alone (both orders of (a, b))
            J = np.diag(np.diag(J)) + np.diag(np.diag(J.reshape(P, P, P, P).transpose(0, 1, 3, 2)
                                                      .reshape(M2, M2))) * (1 - np.eye(P).ravel())
        prefix = T[:l, :l].sum(axis=0)  # coefficient of xi_k in K^(l-1) = sum_{j<l} C^(j)
        for k in range(1, l):
            T[l, k] = J @ prefix[k]
    Tf = T.transpose(0, 2, 1, 3).reshape((L + 1) * M2, (L + 1) * M2)
    Xf = Xi.transpose(0, 2, 1, 3).reshape((L + 1) * M2, (L + 1) * M2)
    cov = (Tf @ Xf @ Tf.T / N).reshape(L + 1, M2, L + 1, M2).transpose(0, 2, 1, 3)
    cum = np.cumsum(np.cumsum(cov, axis=0), axis=1)
    cov_K = np.array([cum[l, l] for l in range(L + 1)])
    shape = (P, P, P, P)
    return MultiInputFluctuations(depth=L, width=N, K=Ks_a, C=Cs_a,
                                  cov_C=cov.reshape(L + 1, L + 1, *shape), cov_K=cov_K.reshape(L + 1, *shape))


def _engine_route(K0: np.ndarray, L: int, N: int, w: float, s: float, activation: str) -> MultiInputFluctuations:
    """`multi_input_fluctuations` by the finite-width kernel engine: gamma = 1, lambda = rho (w = rho^2 sigma_w2,
    s = rho^2 sigma_b2), no readout; the law
    kernel's two-time covariance Y_kl = N Cov(K~^k, K~^l) gives Cov(C^k, C^l) = (Y_kl - Y_(k-1)l - Y_k(l-1) +
    Y_(k-1)(l-1)) / N (C^(0) = K^(0) is data) and Cov(K^l, K^l) = Y_ll / N."""
    from resprop.numeric.engine.fluctuations import trajectory

    if K0.shape[0] > 4:
        raise ParameterError("input_kernel", f"the engine route takes 1 to 4 inputs, got {K0.shape[0]}")
    name = "x" if activation == "linear" else activation
    names = "rho, sigma_w2, sigma_b2, input_kernel, depth"
    try:
        tr = trajectory(K0, np.ones(L), np.ones(L), np.full(L, w), np.full(L, s), name, rtol=ENGINE_RTOL,
                        mean_shift=False, two_time=True)
    except ParameterError as exc:  # the engine names its own arguments (K0, w, s): name this function's
        raise ParameterError(names, str(exc).split(": ", 1)[-1]) from None
    Y = tr.two_time
    assert Y is not None
    Yp = np.zeros((L + 2, L + 2) + Y.shape[2:])  # Y with a row and column of zeros before layer 0
    Yp[1:, 1:] = Y
    cov_C = (Yp[1:, 1:] - Yp[:-1, 1:] - Yp[1:, :-1] + Yp[:-1, :-1]) / N
    cov_C[0, :] = 0.0
    cov_C[:, 0] = 0.0
    Ks = tr.K
    Cs = np.concatenate([Ks[:1], np.diff(Ks, axis=0)])
    if not (np.all(np.isfinite(Ks)) and np.all(np.isfinite(cov_C))):
        raise ParameterError(names, "the kernel leaves the float64 range")
    cov_K = Y[np.arange(L + 1), np.arange(L + 1)] / N
    return MultiInputFluctuations(depth=L, width=N, K=Ks, C=Cs, cov_C=cov_C, cov_K=cov_K, route="engine",
                                  channels=int(tr.channels), truncation=float(tr.truncation.max()))


# --------------------------------------------------------------------------- theory vs simulation
def inputs_at_angle(P: int, theta: float, sigma_w2: float, sigma_b2: float) -> tuple[np.ndarray, np.ndarray]:
    """P unit-norm inputs at pairwise angle theta in d_in = P dimensions, and their input kernel
    K^(0) = sigma_w2 x.x' / d_in + sigma_b2 (eq. 16)."""
    X = np.linalg.cholesky(Q.equiangular_kernel(P, theta)) * np.sqrt(P)
    return X, sigma_w2 / P * X @ X.T + sigma_b2


def compare_with_simulation(P: int, theta: float, activation: str, width: int, samples: int, seed: int, *, depth: int,
                            rho, sigma_w2, sigma_b2, response: str = "full") -> dict:
    """Cov(C^(l)_ab, C^(l)_cd) and Cov(K^(l)_ab, K^(l)_cd), l = 1..depth, of simulated networks
    (:func:`resprop.numeric.engine.simulate.simulate_kernels`) against :func:`multi_input_fluctuations`:
    ``excess`` = max over layers and elements of |MC - theory| - 4 SE - (10/N)|theory| (the relative O(1/N)
    allowance of the Fischer checks), ``max_z`` = max |MC - theory|/SE, and ``diag`` = (MC, SE, theory) of
    Var K^(depth)_11."""
    from resprop.numeric.engine.simulate import simulate_kernels

    X, K0 = inputs_at_angle(P, theta, sigma_w2, sigma_b2)
    hyper = dict(rho=rho, sigma_w2=sigma_w2, sigma_b2=sigma_b2)
    sim = simulate_kernels(X, depth=depth, width=width, samples=samples, seed=seed, activation=activation, **hyper)
    th = multi_input_fluctuations(K0, depth, width, activation=activation, response=response, **hyper)
    excess, max_z, diag = -np.inf, 0.0, None
    for name, theory in (("C", lambda l: th.cov_C[l, l]), ("K", lambda l: th.cov_K[l])):
        for l in range(1, depth + 1):
            x = sim[name][:, l].reshape(samples, -1)
            xc = x - x.mean(axis=0)
            cov = xc.T @ xc / (samples - 1)
            se = (xc[:, :, None] * xc[:, None, :]).std(axis=0, ddof=1) / np.sqrt(samples)
            t = theory(l).reshape(P * P, P * P)
            excess = max(excess, float(np.max(np.abs(cov - t) - 4 * se - 10 / width * np.abs(t))))
            max_z = max(max_z, float(np.max(np.abs(cov - t) / se)))
            if name == "K" and l == depth:
                diag = (float(cov[0, 0]), float(se[0, 0]), float(t[0, 0]))
    return {"excess": excess, "max_z": max_z, "diag": diag}
