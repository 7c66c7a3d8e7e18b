"""Random finite-width networks with explicit weights: the Monte Carlo evidence for the maps.

Two inputs x_a, x_b in R^N0 with |x|^2 / N0 = q^(0) and x_a . x_b / N0 = c^(0) q^(0) exactly; per network fresh
weights W^(l) (N x N0, then N x N) with entries N(0, sigma_w^2 / fan-in) and biases N(0, sigma_b^2), shared by the
two inputs; z^(1) = W^(0) x + b^(0), z^(l+1) = W^(l) phi(z^(l)) + b^(l).  Per layer the empirical statistics
q_aa = z_a . z_a / N, q_bb, q_ab and c = q_ab / sqrt(q_aa q_bb).

Finite width.  Given layer l, the units of layer l+1 are i.i.d. Gaussian with the covariance
S^(l+1) = sigma_w^2 (1/N) sum_j phi(z_j) phi(z_j)^T + sigma_b^2, whose mean given S^(l) is exactly the map F(S^(l)).
So E[q^(l)] differs from the map only through the spread of S: to first order in 1/N the bias obeys
b^(l+1) = J b^(l) + (1/2) tr(H Cov S^(l)) (J, H the Jacobian and Hessians of F; the delta method), and the mean of c
gets grad g . b + (1/2) tr(Hess g Cov) on top (g the correlation).  :func:`first_order_bias` evaluates this with the
between-network covariance measured in the sample (which also holds the layer's own sampling noise, so it is an
upper estimate of Cov S); the claims allow twice it, for the O(1/N^2) remainder and the noise of the estimate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord

__all__ = ["NetworkSample", "numpy_activation", "simulate", "first_order_bias"]


def numpy_activation(activation):
    """phi as a NumPy function, from resprop's parse of the name or SymPy expression."""
    from resprop.numeric.engine.activation_check import parse

    expr = parse(activation)
    (x,) = expr.free_symbols
    return sp.lambdify(x, expr, modules=["scipy", "numpy"])


@dataclass(frozen=True)
class NetworkSample(ResultRecord):
    """Per network (rows) and layer l = 1..depth (columns): ``q_aa``, ``q_bb``, ``q_ab`` and ``c``."""

    width: int
    networks: int
    seed: int
    q_aa: np.ndarray
    q_bb: np.ndarray
    q_ab: np.ndarray
    c: np.ndarray

    def mean_se(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Per layer: the mean over networks and its standard error."""
        values = getattr(self, name)
        return values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])

    def length(self) -> np.ndarray:
        """q^(l) per network: (q_aa + q_bb) / 2 (the two inputs have the same length)."""
        return 0.5 * (self.q_aa + self.q_bb)


def simulate(activation, sigma_w2, sigma_b2, input_kernel, input_correlation, depth, width, networks, seed,
             chunk: int = 16) -> NetworkSample:
    """Sample ``networks`` random networks of ``width`` units and ``depth`` layers (see the module docstring);
    the input dimension is ``width``.  Deterministic for a given ``seed``."""
    sw = V.scalar("sigma_w2", sigma_w2, V.positive)
    sb = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    q0 = V.scalar("input_kernel", input_kernel, V.positive)
    c0 = V.scalar("input_correlation", input_correlation)
    if not -1.0 <= c0 <= 1.0:
        raise V.ParameterError("input_correlation", f"must lie in [-1, 1], got {c0!r}")
    depth, width = V.integer("depth", depth, 1, 1000), V.integer("width", width, 2, 4096)
    networks, seed = V.integer("networks", networks, 2), V.integer("seed", seed, 0)
    phi = numpy_activation(activation)
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((width, 2)))  # two orthonormal directions
    scale = np.sqrt(width * q0)
    x = scale * np.stack([basis[:, 0], c0 * basis[:, 0] + np.sqrt(1.0 - c0 * c0) * basis[:, 1]], axis=1)
    stats = np.empty((networks, depth, 3))
    for start in range(0, networks, chunk):
        n = min(chunk, networks - start)
        w = rng.standard_normal((n, width, width)) * np.sqrt(sw / width)
        z = w @ x + rng.standard_normal((n, width, 1)) * np.sqrt(sb)
        for layer in range(depth):
            stats[start:start + n, layer] = np.stack(
                [np.mean(z[:, :, 0] ** 2, axis=1), np.mean(z[:, :, 1] ** 2, axis=1),
                 np.mean(z[:, :, 0] * z[:, :, 1], axis=1)], axis=1)
            if layer + 1 < depth:
                w = rng.standard_normal((n, width, width)) * np.sqrt(sw / width)
                z = w @ phi(z) + rng.standard_normal((n, width, 1)) * np.sqrt(sb)
    qa, qb, qab = stats[..., 0], stats[..., 1], stats[..., 2]
    return NetworkSample(width, networks, seed, qa, qb, qab, qab / np.sqrt(qa * qb))


def _map(m, sw, sb):
    """F(q_aa, q_bb, q_ab): the infinite-width covariance map (the driver's :class:`~resprop_schoenholz.driver.Maps`:
    the generated kernels)."""
    def F(s):
        a, b, ab = s
        return np.array([m.length(a, sw, sb), m.length(b, sw, sb), m.covariance(a, b, ab, sw, sb)])
    return F


def _jacobian_hessians(F, s, rel=1e-3):
    """Central differences of F at s: the 3 x 3 Jacobian and the three 3 x 3 Hessians (steps rel * |s|)."""
    h = rel * max(np.max(np.abs(s)), 1e-3)
    e = np.eye(3) * h
    f0 = F(s)
    J = np.empty((3, 3))
    H = np.empty((3, 3, 3))
    for i in range(3):
        fp, fm = F(s + e[i]), F(s - e[i])
        J[:, i] = (fp - fm) / (2 * h)
        H[:, i, i] = (fp - 2 * f0 + fm) / h**2
        for j in range(i):
            H[:, i, j] = H[:, j, i] = (F(s + e[i] + e[j]) - F(s + e[i] - e[j]) - F(s - e[i] + e[j])
                                       + F(s - e[i] - e[j])) / (4 * h * h)
    return J, H


def _wishart(s) -> np.ndarray:
    """N times the covariance of (q_aa, q_bb, q_ab) = z z^T / N for N i.i.d. Gaussian units of covariance s."""
    S = np.array([[s[0], s[2]], [s[2], s[1]]])
    idx = [(0, 0), (1, 1), (0, 1)]
    return np.array([[S[i, k] * S[j, l] + S[i, l] * S[j, k] for (k, l) in idx] for (i, j) in idx])


def first_order_bias(activation, sigma_w2, sigma_b2, trajectory, sample: NetworkSample) -> dict:
    """The first-order (1/N) finite-width bias of the sample means of q^(l) = (q_aa + q_bb)/2 and of c^(l), per
    layer, by the delta method around the map's ``trajectory`` (:func:`resprop_schoenholz.driver.trajectory`) with
    the covariance of (q_aa, q_bb, q_ab) measured across the sample's networks (see the module docstring)."""
    from resprop_schoenholz.driver import maps

    F = _map(maps(activation), float(sigma_w2), float(sigma_b2))
    stats = np.stack([sample.q_aa, sample.q_bb, sample.q_ab], axis=2)
    depth = stats.shape[1]
    b = np.zeros(3)  # layer 1 is linear in the fixed inputs: its mean is exact
    bias_q, bias_c = np.zeros(depth), np.zeros(depth)
    for layer in range(depth):
        s = np.array([trajectory.q_aa[layer], trajectory.q_aa[layer], trajectory.q_ab[layer]])
        cov = np.cov(stats[:, layer, :], rowvar=False)  # Cov of the empirical statistics (for c)
        bias_q[layer] = 0.5 * (b[0] + b[1])
        a, bb, ab = s
        root = np.sqrt(a * bb)
        grad = np.array([-0.5 * ab / (a * root), -0.5 * ab / (bb * root), 1.0 / root])
        hess = np.array([[0.75 * ab / (a * a * root), 0.25 * ab / (a * bb * root), -0.5 / (a * root)],
                         [0.25 * ab / (a * bb * root), 0.75 * ab / (bb * bb * root), -0.5 / (bb * root)],
                         [-0.5 / (a * root), -0.5 / (bb * root), 0.0]])
        bias_c[layer] = grad @ b + 0.5 * np.sum(hess * cov)
        if layer + 1 < depth:
            J, H = _jacobian_hessians(F, s)
            # Cov S = Cov(statistics) - the layer's own Wishart noise, Cov(S_ij, S_kl | S) = (S_ik S_jl + S_il S_jk)/N
            spread = cov - _wishart(s) / sample.width
            b = J @ b + 0.5 * np.einsum("kij,ij->k", H, spread)
    return {"q": bias_q, "c": bias_c}
