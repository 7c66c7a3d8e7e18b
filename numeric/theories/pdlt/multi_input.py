"""PDLT App. B on P inputs: the kernel K_ab (B.11) and four-point vertex V_(ab)(cd) (B.24-B.25) of the residual MLP
z^(l+1) = b + W sigma(z^(l)) + gamma z^(l), W ~ N(0, C_W/n), b ~ N(0, C_b), and a Monte Carlo of the empirical kernel.

The recursion is the generated ``multi_input_kernel_vertex`` of `generated.pdlt_vertex_recursions` (this theory's)
(derived in `derive/theories/pdlt_vertex.py` from the forward equation B.3; at P = 1 it is B.26).  This module
supplies its callbacks: the P-dimensional Gaussian expectations <sigma_a sigma_b>, <sigma_a sigma_b sigma_c sigma_d>,
<sigma_a sigma_b z_c z_d> under N(0, K^(l)) and the contractions of V with the kernel derivative
D_ef g_ab = (1/2) sum K^{e5} K^{f6} <sigma_a sigma_b (z_5 z_6 - K_56)> (PDLT 4.64; B.25's raised indices).

Gaussian expectations (:func:`gaussian_rule`):

* scale-invariant activations (relu, linear, leaky_relu:s): sigma is linear on each orthant of z, so the
  integrand is a polynomial there.  z = r L u (L the Cholesky factor, u uniform on the sphere); the cone
  {s_a (L u)_a > 0} is the image of the positive orthant y > 0 of the sphere under y -> M y / |M y|, M = L^-1 diag(s),
  whose Jacobian is |det M| / |M y|^P.  Each of the 2^P cones gets a tensor Gauss-Legendre rule in the P - 1
  hyperspherical angles of y (the integrand is analytic there: exponential convergence, no kinks) and a
  generalised Gauss-Laguerre rule in t = r^2/2 (exact for the degree-2 and degree-4 homogeneous integrands);
* smooth activations (tanh, erf, gelu): a tensor trapezoidal rule in the P whitened coordinates (see
  _trapezoid_rule).  GELU is in neither class of App. B; its default C_W keeps K_aa = 1 fixed (default_C_W).

Accuracy is tested against closed forms (arc-cosine kernels) and mpmath (tests/test_multi_input_vertex.py).

What n Cov(G_ab, G_cd) of the empirical kernel G = z^T z / n is at leading order: K_ac K_bd + K_ad K_bc + V_(ab)(cd)
(``empirical_kernel_covariance`` of `resprop.numeric.theories.pdlt.generated.pdlt_vertex`).  The Monte Carlo
(:func:`simulate_empirical_kernels`) uses the exact reduction: given layer l the block output b + W sigma(z) has
iid rows N(0, C_b + C_W sigma^T sigma / n), so each layer costs O(n P^2) per network, not O(n^2 P).

Caveat: B.25 closes the hierarchy with conditionally Gaussian layers (the kernel fluctuating by V/n).  With the
skip connection (gamma > 0) neuron i of layer l + 1 keeps gamma z_i^(l) while the shared block covariance contains
sigma(z_i^(l))^2 / n: a same-neuron cross-layer correlation that B.25 (and B.26) drop.  For gamma = 0 the closure is
exact at O(1/n); for gamma > 0 it misses the same-neuron source (small for tanh, sizeable for ReLU at depth >= 2).
The corrected vertex, B.25 plus that source, is `resprop.numeric.theories.pdlt.multi_input_corrected`.

Depth convention (docs/api-renames.md, "Depth: one convention"): ``depth`` is the number of residual layers after
the input; the input kernel (PDLT's K^(1), B.3's z^(1) the first layer, residual updates l = 2..L) is layer 0 of the
returned arrays, so they have depth + 1 layers l = 0..depth and PDLT's L is depth + 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.special import erf, gammaln, roots_genlaguerre, roots_legendre

import resprop.numeric.theories.pdlt.generated.pdlt_vertex as gen
import resprop.numeric.theories.pdlt.generated.pdlt_vertex_recursions as rec
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.pdlt.residual_mlp import ActivationClass, activation_class, check_gamma, critical_C_W

__all__ = ["resolve_activation", "default_C_W", "equiangular_kernel", "MAX_INPUTS", "MAX_DEPTH", "gaussian_rule",
           "gaussian_moments", "multi_input_vertex", "simulate_empirical_kernels", "empirical_kernel_covariance",
           "MultiInputVertex", "KernelCovarianceMC"]

#: the vertex has P^4 entries and the quadratures grow like 2^P n^(P-1) (cones) or n^P (Gauss-Hermite)
MAX_INPUTS = 4
#: per layer the callbacks rebuild the quadrature (~ms): 10^4 layers take seconds (the largest ``depth``, residual
#: layers after the input)
MAX_DEPTH = 10_000
#: Gauss-Legendre nodes per hyperspherical angle of a cone (by P)
CONE_NODES = {2: 48, 3: 48, 4: 28}
RADIAL_NODES = 4
#: trapezoidal rule of a smooth activation: relative error ~ exp(-2 TRAPEZOID_EXPONENT) while the step is not capped
TRAPEZOID_EXPONENT = 20.0
MAX_STEP = 0.35
TRUNCATION = 8.6  # exp(-TRUNCATION^2 / 2) ~ 1e-16
TRUNCATION_4D = 7.0  # the ball |x| <= 7 in four dimensions misses ~1e-9 of the Gaussian mass
#: cap of nodes per whitened coordinate (one side) by P: beyond K_aa ~ 4 (P = 3) the step is capped and the accuracy
#: falls below 1e-12 gradually
MAX_TRAPEZOID_HALF_NODES = {1: 2000, 2: 400, 3: 60, 4: 20}


# --------------------------------------------------------------------------- activations
@dataclass(frozen=True)
class _Gelu(ActivationClass):
    """GELU, x Phi(x): in neither class of App. B (PDLT 5.3); smooth, so the trapezoidal rule applies."""

    def sigma(self, z: np.ndarray) -> np.ndarray:
        return 0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))


def resolve_activation(activation) -> ActivationClass:
    """App. B's activation classes (``residual_mlp.activation_class``) and ``gelu``."""
    if activation == "gelu":
        return _Gelu("gelu", "smooth")
    try:
        return activation_class(activation)
    except ParameterError:
        raise ParameterError("activation", f"unknown activation {activation!r}; allowed: relu, linear, "
                                           "leaky_relu:<slope>, tanh, erf, gelu") from None


def default_C_W(activation: str, gamma: float) -> float:
    """The critical C_W(gamma) of B.20 / B.21; for GELU the C_W that keeps K_aa = 1 a fixed point,
    (1 - gamma^2)/<gelu^2>_(K=1) (``corrected.critical_C_W``)."""
    if activation == "gelu":
        from resprop.numeric.theories.pdlt import corrected

        return float(corrected.critical_C_W("gelu", gamma * gamma))
    return float(critical_C_W(gamma, activation))


# --------------------------------------------------------------------------- input kernel
def equiangular_kernel(P: int, theta: float) -> np.ndarray:
    """The Gram matrix of P unit inputs at pairwise angle theta."""
    c = math.cos(theta)
    return (1 - c) * np.eye(P) + c * np.ones((P, P))


def _kernel_matrix(input_kernel, X, C_W_in: float, C_b: float) -> np.ndarray:
    if (input_kernel is None) == (X is None):
        raise ParameterError("input_kernel, X", "give exactly one: a P x P input kernel K^(1) or inputs X (P x n_0)")
    if X is not None:
        Xa = np.asarray(X, dtype=float)
        if Xa.ndim != 2 or Xa.shape[0] < 1 or Xa.shape[1] < 1:
            raise ParameterError("X", f"must be a P x n_0 array of inputs (one row per input), got shape {Xa.shape}")
        if not np.all(np.isfinite(Xa)):
            raise ParameterError("X", "must be finite")
        K = C_b + C_W_in * (Xa @ Xa.T) / Xa.shape[1]
    else:
        K = np.atleast_2d(np.asarray(input_kernel, dtype=float))
        if K.ndim != 2 or K.shape[0] != K.shape[1]:
            raise ParameterError("input_kernel", f"must be a square P x P matrix, got shape {K.shape}")
        if not np.all(np.isfinite(K)):
            raise ParameterError("input_kernel", "must be finite")
        if not np.allclose(K, K.T, rtol=1e-12, atol=0.0):
            raise ParameterError("input_kernel", "must be symmetric")
        K = (K + K.T) / 2
    P = K.shape[0]
    if P > MAX_INPUTS:
        raise ParameterError("input_kernel, X", f"at most {MAX_INPUTS} inputs (the vertex has P^4 entries), got {P}")
    try:
        np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        raise ParameterError("input_kernel, X", "the input kernel must be positive definite (linearly independent "
                                                "inputs; B.25 contracts with the inverse kernel)") from None
    if np.linalg.cond(K) > 1e8:
        raise ParameterError("input_kernel, X", f"the input kernel is too close to singular (condition number "
                                                f"{np.linalg.cond(K):.3g} > 1e8): use inputs at larger angles")
    return K


# --------------------------------------------------------------------------- quadrature
@cache
def _orthant_rule(P: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes y (N, P) on the positive orthant of S^(P-1) and weights of the surface measure (sum = |S^(P-1)|/2^P)."""
    if P == 1:
        return np.ones((1, 1)), np.ones(1)
    x, w = roots_legendre(CONE_NODES[P])
    th, wt = (x + 1) * np.pi / 4, w * np.pi / 4  # [0, pi/2]
    grids = np.meshgrid(*([th] * (P - 1)), indexing="ij")
    wgrid = np.meshgrid(*([wt] * (P - 1)), indexing="ij")
    angles = [g.ravel() for g in grids]
    weight = np.prod([g.ravel() for g in wgrid], axis=0)
    y = np.empty((angles[0].size, P))
    sin_prod = np.ones(angles[0].size)
    for k in range(P - 1):
        y[:, k] = sin_prod * np.cos(angles[k])
        weight = weight * np.sin(angles[k]) ** (P - 2 - k)
        sin_prod = sin_prod * np.sin(angles[k])
    y[:, P - 1] = sin_prod
    return y, weight


@cache
def _radial_rule(P: int) -> tuple[np.ndarray, np.ndarray]:
    """r nodes and weights for E over the chi distribution with P degrees of freedom (t = r^2/2, Laguerre
    weight t^(P/2 - 1) e^-t): exact for polynomials in r^2 of degree < 2 RADIAL_NODES."""
    t, w = roots_genlaguerre(RADIAL_NODES, P / 2 - 1)
    return np.sqrt(2 * t), w / math.exp(gammaln(P / 2))


def _cone_rule(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    P = K.shape[0]
    L = np.linalg.cholesky(K)
    y, wy = _orthant_rule(P)
    r, wr = _radial_rule(P)
    log_area = math.log(2.0) + (P / 2) * math.log(math.pi) - gammaln(P / 2)
    Linv = np.linalg.inv(L)
    det_M = 1.0 / abs(np.prod(np.diag(L)))
    nodes, weights = [], []
    for signs in np.array(np.meshgrid(*([[1.0, -1.0]] * P), indexing="ij")).reshape(P, -1).T:
        My = (y * signs) @ Linv.T  # rows: M y, M = L^-1 diag(s)
        norm = np.linalg.norm(My, axis=1)
        zhat = (y * signs) / norm[:, None]  # z / r = L u on the cone
        w = wy * det_M / norm**P / math.exp(log_area)
        nodes.append((zhat[:, None, :] * r[None, :, None]).reshape(-1, P))
        weights.append((w[:, None] * wr[None, :]).ravel())
    return np.concatenate(nodes), np.concatenate(weights)


def _trapezoid_rule(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tensor trapezoidal rule in the whitened coordinates x (z = L x), truncated to the ball |x| <= TRUNCATION.

    For an integrand analytic in the strip |Im x| < d the trapezoidal rule with Gaussian weight converges like
    exp(-2 pi d / h) (faster than Gauss-Hermite at equal node count when poles are near the real axis).  tanh(L_a x)
    has its nearest poles at distance d = pi / (2 sqrt(K_aa)); the step h = pi d / TRAPEZOID_EXPONENT makes the
    error ~ exp(-2 TRAPEZOID_EXPONENT) relative (erf, entire, converges at least as fast)."""
    P = K.shape[0]
    d = np.pi / (2 * np.sqrt(np.max(np.diag(K))))
    h = min(MAX_STEP, np.pi * d / TRAPEZOID_EXPONENT)
    radius = TRUNCATION if P < 4 else TRUNCATION_4D
    m = min(int(np.ceil(radius / h)), MAX_TRAPEZOID_HALF_NODES[P])
    h = max(h, radius / m)
    x = h * np.arange(-m, m + 1)
    X = np.array(np.meshgrid(*([x] * P), indexing="ij")).reshape(P, -1).T
    r2 = np.einsum("ka,ka->k", X, X)
    keep = r2 <= radius**2
    X, r2 = X[keep], r2[keep]
    W = np.exp(-r2 / 2) * (h / math.sqrt(2 * math.pi)) ** P
    return X @ np.linalg.cholesky(K).T, W


def gaussian_rule(K, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """Nodes z (N, P) and weights (N,) with sum w F(z) ~ E F(z), z ~ N(0, K): the orthant-cone rule for a
    scale-invariant activation (exact in r for homogeneous integrands of degree 2 and 4), the trapezoidal rule
    otherwise."""
    ac = resolve_activation(activation)
    Km = _kernel_matrix(K, None, 1.0, 0.0)
    return _cone_rule(Km) if ac.kind == "scale_invariant" else _trapezoid_rule(Km)


def _moments(Km: np.ndarray, ac: ActivationClass) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z, w = _cone_rule(Km) if ac.kind == "scale_invariant" else _trapezoid_rule(Km)
    P = Km.shape[0]
    s = ac.sigma(z)
    ss = (s[:, :, None] * s[:, None, :]).reshape(-1, P * P)
    zz = (z[:, :, None] * z[:, None, :]).reshape(-1, P * P)
    wss = ss * w[:, None]
    g = (w @ ss).reshape(P, P)
    f = (wss.T @ ss).reshape(P, P, P, P)
    q = (wss.T @ zz).reshape(P, P, P, P)
    return g, f, q


def gaussian_moments(K, activation: str) -> dict[str, np.ndarray]:
    """<sigma_a sigma_b> (P, P), <sigma_a sigma_b sigma_c sigma_d> and <sigma_a sigma_b z_c z_d> (P, P, P, P) under
    N(0, K), and the kernel derivative D[a, b, e, f] = d<sigma_a sigma_b>/dK_ef (symmetric split, PDLT 4.64)."""
    ac = resolve_activation(activation)
    Km = _kernel_matrix(K, None, 1.0, 0.0)
    g, f, q = _moments(Km, ac)
    return {"g": g, "f": f, "q": q, "D": _derivative(Km, g, q)}


def _derivative(Km: np.ndarray, g: np.ndarray, q: np.ndarray) -> np.ndarray:
    Kinv = np.linalg.inv(Km)
    c = q - g[:, :, None, None] * Km[None, None, :, :]
    return 0.5 * np.einsum("ei,fj,abij->abef", Kinv, Kinv, c)


class _Callbacks:
    """The callbacks of the generated recursion, the moments of layer l computed once from K[:, :, 0, 0]."""

    def __init__(self, ac: ActivationClass) -> None:
        self.ac = ac
        self.layer = -1

    def _at(self, l: int, K4: np.ndarray) -> None:
        if l == self.layer:
            return
        Km = np.array(K4[:, :, 0, 0])
        Km = (Km + Km.T) / 2
        try:
            np.linalg.cholesky(Km)
        except np.linalg.LinAlgError:
            raise ParameterError("input_kernel, C_W, C_b, gamma, depth",
                                 f"the kernel of layer {l} is not positive definite") from None
        g, f, q = _moments(Km, self.ac)
        self.g, self.D = g, _derivative(Km, g, q)
        c = q - g[:, :, None, None] * Km[None, None, :, :]
        self.cum = f - g[:, :, None, None] * g[None, None, :, :]
        self.intra = c + c.transpose(2, 3, 0, 1)
        self.layer = l

    def callbacks(self) -> dict:
        def pair_mean(l, K4, out):
            self._at(l, K4)
            out[...] = self.g[:, :, None, None]

        def four_point_cumulant(l, K4, out):
            self._at(l, K4)
            out[...] = self.cum

        def intralayer_sum(l, K4, out):
            self._at(l, K4)
            out[...] = self.intra

        def vertex_quadratic(l, K4, V4, out):
            self._at(l, K4)
            out[...] = np.einsum("abef,efgh,cdgh->abcd", self.D, V4, self.D)

        def vertex_linear(l, K4, V4, out):
            self._at(l, K4)
            lin = np.einsum("efcd,abef->abcd", V4, self.D)
            out[...] = lin + lin.transpose(2, 3, 0, 1)

        return {"pair_mean": pair_mean, "four_point_cumulant": four_point_cumulant,
                "intralayer_sum": intralayer_sum, "vertex_quadratic": vertex_quadratic, "vertex_linear": vertex_linear}


@dataclass(frozen=True)
class MultiInputVertex(ResultRecord):
    """:func:`multi_input_vertex`: per layer l = 0..depth (``layers``; 0 the input) the kernel K (depth + 1, P, P),
    the vertex V (depth + 1, P, P, P, P), and the leading-order n Cov(G_ab, G_cd) = K_ac K_bd + K_ad K_bc + V_(ab)(cd)
    of the empirical kernel."""

    depth: int
    layers: np.ndarray
    K: np.ndarray
    V: np.ndarray
    covariance: np.ndarray
    C_W: float
    C_b: float
    gamma: float


def multi_input_vertex(input_kernel=None, activation: str = "relu", gamma: float = 0.0, depth: int = 1,
                       C_W: float | None = None, C_b: float = 0.0, *, X=None,
                       C_W_in: float = 1.0) -> MultiInputVertex:
    """Iterate B.11 and B.25 over ``depth`` residual layers from the input kernel K^(0) = input_kernel (PDLT's
    K^(1); or C_b + C_W_in X X^T / n_0 for inputs X, P x n_0) and V^(0) = 0: layers l = 0..depth, depth + 1 entries
    (PDLT's layers 1..depth + 1); depth = 0 is the input alone.  C_W defaults to the critical C_W(gamma)
    (B.20 / B.21)."""
    ac = resolve_activation(activation)
    g_arr = check_gamma(gamma)
    if g_arr.ndim:
        raise ParameterError("gamma", f"must be a scalar here, got shape {g_arr.shape}")
    g = float(g_arr)
    depth = V.integer("depth", depth, minimum=0, maximum=MAX_DEPTH)
    C_b = float(V.nonnegative("C_b", C_b))
    C_W = default_C_W(activation, g) if C_W is None else float(V.positive("C_W", C_W))
    C_W_in = float(V.positive("C_W_in", C_W_in))
    K1 = _kernel_matrix(input_kernel, X, C_W_in, C_b)
    P = K1.shape[0]
    Ks = np.empty((depth + 1, P, P))
    Vs = np.zeros((depth + 1, P, P, P, P))
    Ks[0] = K1

    def keep(l, K4, V4):
        Ks[l + 1], Vs[l + 1] = K4[:, :, 0, 0], V4

    n = depth
    K4 = np.broadcast_to(K1[:, :, None, None], (P,) * 4).copy()
    with np.errstate(all="ignore"):
        rec.multi_input_kernel_vertex(K4, np.zeros((P,) * 4), np.full(n, g), np.full(n, C_W), np.full(n, C_b),
                                      **_Callbacks(ac).callbacks(), record=keep)
    if not (np.all(np.isfinite(Ks)) and np.all(np.isfinite(Vs))):
        raise ParameterError("input_kernel, C_W, C_b, gamma, depth",
                             "K^(l) or V^(l) leaves the float64 range; use values of moderate size")
    return MultiInputVertex(depth=depth, layers=np.arange(depth + 1), K=Ks, V=Vs, covariance=_covariance(Ks, Vs),
                            C_W=C_W, C_b=C_b, gamma=g)


def _covariance(Ks: np.ndarray, Vs: np.ndarray) -> np.ndarray:
    Kac = Ks[:, :, None, :, None]
    Kbd = Ks[:, None, :, None, :]
    Kad = Ks[:, :, None, None, :]
    Kbc = Ks[:, None, :, :, None]
    return gen.empirical_kernel_covariance(Kac, Kbd, Kad, Kbc, Vs)


# --------------------------------------------------------------------------- Monte Carlo
def simulate_empirical_kernels(input_kernel, activation: str, gamma: float, depth: int, width: int, samples: int,
                               seed: int, C_W: float | None = None, C_b: float = 0.0,
                               chunk: int | None = None) -> np.ndarray:
    """Empirical kernels G^(l)_ab = z^(l)_a . z^(l)_b / n of ``samples`` independent residual MLPs (B.3, xi = 1),
    shape (samples, depth + 1, P, P) for the layers l = 0..depth: the input z^(0) (PDLT's z^(1)) has iid rows
    N(0, input_kernel), then ``depth`` residual layers each draw the block output exactly as iid rows
    N(0, C_b + C_W sigma(z)^T sigma(z) / n) (the law of b + W sigma(z) given z)."""
    ac = resolve_activation(activation)
    g = float(check_gamma(gamma))
    depth = V.integer("depth", depth, minimum=0, maximum=MAX_DEPTH)
    n = V.integer("width", width, minimum=2, maximum=10**6)
    samples = V.integer("samples", samples, minimum=2, maximum=10**9)
    seed = V.integer("seed", seed, minimum=0)
    C_b = float(V.nonnegative("C_b", C_b))
    C_W = default_C_W(activation, g) if C_W is None else float(V.positive("C_W", C_W))
    K1 = _kernel_matrix(input_kernel, None, 1.0, 0.0)
    P = K1.shape[0]
    m = chunk or max(1, min(samples, 2_000_000 // (n * P)))
    rng = np.random.default_rng(seed)
    L1 = np.linalg.cholesky(K1)
    out = np.empty((samples, depth + 1, P, P))
    eye = np.eye(P)
    for lo in range(0, samples, m):
        k = min(m, samples - lo)
        z = rng.standard_normal((k, n, P)) @ L1.T
        out[lo:lo + k, 0] = np.einsum("mia,mib->mab", z, z) / n
        for layer in range(1, depth + 1):
            s = ac.sigma(z)
            A = C_b + C_W * np.einsum("mia,mib->mab", s, s) / n
            chol = np.linalg.cholesky(A + 1e-300 * eye)
            z = g * z + rng.standard_normal((k, n, P)) @ chol.transpose(0, 2, 1)
            out[lo:lo + k, layer] = np.einsum("mia,mib->mab", z, z) / n
    return out


@dataclass(frozen=True)
class KernelCovarianceMC(ResultRecord):
    """:func:`empirical_kernel_covariance`: n Cov(G_ab, G_cd) per layer (layers, P, P, P, P), its standard error,
    and the mean empirical kernel (layers, P, P); layers = depth + 1 for :func:`simulate_empirical_kernels`."""

    covariance: np.ndarray
    se: np.ndarray
    mean: np.ndarray
    width: int
    samples: int


def empirical_kernel_covariance(G: np.ndarray, width: int) -> KernelCovarianceMC:
    """n Cov(G_ab, G_cd) over the samples of :func:`simulate_empirical_kernels` with standard errors
    (std of the centred products / sqrt(samples))."""
    G = np.asarray(G, dtype=float)
    N, nl, P, _ = G.shape
    mean = G.mean(axis=0)
    d = (G - mean).reshape(N, nl, P * P)
    cov = np.empty((nl, P * P, P * P))
    se = np.empty_like(cov)
    for l in range(nl):
        prod = d[:, l, :, None] * d[:, l, None, :]
        cov[l] = prod.sum(axis=0) / (N - 1)
        se[l] = prod.std(axis=0, ddof=1) / math.sqrt(N)
    shape = (nl, P, P, P, P)
    return KernelCovarianceMC(covariance=width * cov.reshape(shape), se=width * se.reshape(shape), mean=mean,
                              width=int(width), samples=N)
