"""Gaussian quadrature and Hermite bases for the finite-width fluctuation engine (`fluctuations`).

Every same-layer expectation the O(1/width) theory needs is a projection ``E[f(u) h_alpha(u)]`` of a product of
activations onto the orthonormal Hermite polynomials ``h_alpha(u) = prod_i He_{alpha_i}(u_i) / sqrt(alpha_i!)`` of a
standard normal vector u of dimension p = 1..4 (the whitened coordinates of a pair or quadruple of inputs,
docs/design/fluctuations-engine.md section 4).  The rules here integrate such products:

* p = 1: the two half-lines, each with the Gauss rule of the weight exp(-r^2/2) on [0, inf) (`radial_rule`:
  Lanczos on a fine discretisation of the weight), so a kink at 0 is integrated piece by piece;
* p = 2: in whitened coordinates (A lower triangular) the first input's breakpoint is u0 = 0 (the half-line rules)
  and the second's is u1 = c(u0) (Gauss-Legendre on either side), so ReLU, leaky ReLU and |x| are integrated piece
  by piece with spectral accuracy; the product basis factorises and the projection is two contractions
  (`_pair_projection`);
* p = 3, 4: the pair rule in coordinates rotated onto each pair of inputs, moved back by the second quantisation
  of the rotation; fourth moments over three inputs add a split Gauss-Legendre rule in the third coordinate, over
  four a tensor Gauss-Hermite rule in rotated coordinates (`_rotated_projection`).

:class:`HermiteBasis` enumerates the multi-indices by total degree and evaluates the basis at the nodes.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import numba
import numpy as np

from resprop.generated.fluctuation_step import raising  # derived: derive/fluctuations.py

__all__ = ["HermiteBasis", "basis", "radial_rule", "line_rule", "tensor_rule", "project",
           "hermite_functions"]


@cache
def radial_rule(p: int, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights (summing to 1) of the Gauss rule of the weight r^(p-1) exp(-r^2/2) on [0, inf): exact for
    polynomials in r of degree < 2 nodes (to round-off).  The Jacobi matrix comes from Lanczos iteration with full
    reorthogonalisation on a discretisation of the weight fine enough to integrate r^(2 nodes + p) exp(-r^2/2)
    exactly to round-off (composite Gauss-Legendre on [0, R], R past the integrand's support)."""
    top = 2 * nodes + p
    R = math.sqrt(top) + 14.0  # r^top exp(-r^2/2) peaks at sqrt(top); e^(-(R - sqrt(top))^2 / 2) < 1e-40
    panels = max(40, int(R * 3))
    t, wt = np.polynomial.legendre.leggauss(40)
    edges = np.linspace(0.0, R, panels + 1)
    x = ((edges[:-1, None] + edges[1:, None]) / 2 + (edges[1:, None] - edges[:-1, None]) / 2 * t).ravel()
    w = ((edges[1:, None] - edges[:-1, None]) / 2 * wt).ravel() * x ** (p - 1) * np.exp(-x * x / 2)
    w /= w.sum()
    # Lanczos: q_0 = sqrt(w); T = Q^T diag(x) Q tridiagonal
    Qm = np.zeros((x.size, nodes))
    a, b = np.zeros(nodes), np.zeros(nodes)
    q = np.sqrt(w)
    for j in range(nodes):
        Qm[:, j] = q
        v = x * q
        a[j] = q @ v
        v -= Qm[:, :j + 1] @ (Qm[:, :j + 1].T @ v)
        v -= Qm[:, :j + 1] @ (Qm[:, :j + 1].T @ v)  # twice is enough
        b[j] = np.linalg.norm(v)
        q = v / b[j]
    E = np.linalg.eigvalsh(np.diag(a) + np.diag(b[:-1], 1) + np.diag(b[:-1], -1))
    # Christoffel numbers 1 / sum_k p_k(x)^2 with the orthonormal p_k by their recurrence: relative accuracy
    # also for the tiny weights of the outer nodes (the eigenvectors' first components have only absolute accuracy)
    pk_prev, pk = np.zeros_like(E), np.ones_like(E)
    total = pk * pk
    for k in range(nodes - 1):
        pk_prev, pk = pk, ((E - a[k]) * pk - (b[k - 1] if k else 0.0) * pk_prev) / b[k]
        total += pk * pk
    weights = 1.0 / total
    return E, weights / weights.sum()


def line_rule(radial: int) -> tuple[np.ndarray, np.ndarray]:
    """p = 1: nodes (Q, 1) and weights (Q,) of a standard normal, the two half-lines integrated separately."""
    r, w = radial_rule(1, radial)
    u = np.concatenate([r, -r])[:, None]
    return u, np.concatenate([w, w]) / 2.0


@cache
def tensor_rule(p: int, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """p-dimensional tensor Gauss-Hermite rule of N(0, I_p): nodes (nodes^p, p), weights summing to 1."""
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    grid = np.stack(np.meshgrid(*([x] * p), indexing="ij"), axis=-1).reshape(-1, p)
    weights = np.prod(np.stack(np.meshgrid(*([w] * p), indexing="ij"), axis=-1).reshape(-1, p), axis=1)
    return grid, weights


@dataclass(frozen=True)
class HermiteBasis:
    """Multi-indices alpha in N^p of total degree <= ``degree``, sorted by degree; ``index`` maps a tuple to its
    position, ``by_degree[m]`` is the slice of degree m, ``shift(beta)`` the positions of alpha + beta."""

    p: int
    degree: int
    alphas: np.ndarray
    index: dict = field(repr=False)
    by_degree: tuple = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.alphas)

    def position(self, alpha) -> int:
        return self.index[tuple(int(a) for a in alpha)]

    def shifted(self, beta, upto: int) -> tuple[np.ndarray, np.ndarray]:
        """For the multi-indices alpha of degree <= upto: the positions of alpha + beta and
        sqrt((alpha + beta)! / alpha!) (the factor of E[d^beta f h_alpha] = that * E[f h_(alpha+beta)])."""
        beta = np.asarray(beta)
        n = self.by_degree[upto].stop
        target = self.alphas[:n] + beta
        pos = np.array([self.index[tuple(t)] for t in target])
        fac = np.ones(n)
        for i in range(self.p):
            for k in range(int(beta[i])):
                fac *= raising(self.alphas[:n, i] + k + 0.0)
        return pos, fac

    def evaluate(self, u: np.ndarray) -> np.ndarray:
        """h_alpha(u) for nodes u (..., p): an array (..., size)."""
        he = hermite_functions(u, self.degree)  # (..., p, degree + 1)
        out = he[..., 0, self.alphas[:, 0]]
        for i in range(1, self.p):
            out = out * he[..., i, self.alphas[:, i]]
        return out


@cache
def basis(p: int, degree: int) -> HermiteBasis:
    alphas: list[tuple[int, ...]] = []
    slices = []
    for m in range(degree + 1):
        start = len(alphas)
        alphas.extend(sorted((a for a in itertools.product(range(m + 1), repeat=p) if sum(a) == m), reverse=True))
        slices.append(slice(start, len(alphas)))
    arr = np.array(alphas, dtype=np.int64).reshape(-1, p)
    return HermiteBasis(p, degree, arr, {a: i for i, a in enumerate(alphas)}, tuple(slices))


def second_quantization(Mmat: np.ndarray, hb: HermiteBasis, top: int) -> list[np.ndarray]:
    """Gamma(M) per degree m = 1..top for a batch of p x p matrices M (B, p, p): the (B, n_m, n_m) blocks with
    E[h_alpha(M u + (I - M M^T)^(1/2) eta) | u] = sum_beta Gamma_(alpha beta) h_beta(u) (Mehler's formula for a
    contraction M).  From the generating function: Gamma_(alpha beta) = sqrt(alpha!/beta!) [t^alpha] (M^T t)^beta."""
    B, p = Mmat.shape[0], hb.p
    if p == 1:
        return [(Mmat[:, 0, 0] ** m)[:, None, None] for m in range(1, top + 1)]
    if p == 2:
        return _second_quantization_pair(Mmat, hb, top)
    blocks = []
    prev = np.ones((B, 1, 1))
    for m in range(1, top + 1):
        rows, sqrt_alpha, last, lower, inv_sqrt_beta = _raising_indices(p, hb.degree, m)
        # Gamma_m[alpha, beta] = sum_i M[i, j] sqrt(alpha_i) Gamma_(m-1)[alpha - e_i, beta - e_j] / sqrt(beta_j),
        # j the last nonzero index of beta; row -1 (alpha_i = 0) reads the zero row appended to Gamma_(m-1)
        padded = np.concatenate([prev, np.zeros((B, 1, prev.shape[2]))], axis=1)[:, :, lower]
        block = np.zeros((B, len(last), len(last)))
        for i in range(p):
            block += padded[:, rows[i], :] * sqrt_alpha[i][None, :, None] * Mmat[:, i, last][:, None, :]
        block *= inv_sqrt_beta[None, None, :]
        blocks.append(block)
        prev = block
    return blocks


@cache
def _raising_indices(p: int, degree: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Index arrays of the degree-m step of `second_quantization` (p >= 3): per coordinate i, the position in
    degree m - 1 of alpha - e_i (-1 where alpha_i = 0) and sqrt(alpha_i); per beta, its last nonzero coordinate j,
    the position of beta - e_j in degree m - 1, and 1 / sqrt(beta_j).  With (M^T t)^beta = (M^T t)^(beta - e_j)
    sum_i M_ij t_i and Gamma_(alpha beta) = sqrt(alpha! / beta!) [t^alpha] (M^T t)^beta this is the recursion
    Gamma_m[alpha, beta] = sum_i M_ij sqrt(alpha_i / beta_j) Gamma_(m-1)[alpha - e_i, beta - e_j]."""
    hb = basis(p, degree)
    start = hb.by_degree[m - 1].start
    alphas = hb.alphas[hb.by_degree[m]]
    rows = np.full((hb.p, len(alphas)), -1, dtype=np.int64)
    for i in range(hb.p):
        has = alphas[:, i] > 0
        down = alphas[has].copy()
        down[:, i] -= 1
        rows[i, has] = [hb.index[tuple(d)] - start for d in down.tolist()]
    sqrt_alpha = np.sqrt(alphas.T.astype(float))
    last = np.array([int(np.nonzero(b)[0][-1]) for b in alphas], dtype=np.int64)
    lowered = alphas.copy()
    lowered[np.arange(len(alphas)), last] -= 1
    lower = np.array([hb.index[tuple(d)] - start for d in lowered.tolist()], dtype=np.int64)
    inv_sqrt_beta = 1.0 / np.sqrt(alphas[np.arange(len(alphas)), last].astype(float))
    for a in (rows, sqrt_alpha, last, lower, inv_sqrt_beta):
        a.setflags(write=False)
    return rows, sqrt_alpha, last, lower, inv_sqrt_beta


def hermite_functions(u: np.ndarray, degree: int) -> np.ndarray:
    """The orthonormal He_k(u) / sqrt(k!) for k = 0..degree at u (...): an array (..., degree + 1)."""
    he = [np.ones_like(u), u]
    for k in range(1, degree):
        he.append((u * he[k] - math.sqrt(k) * he[k - 1]) / math.sqrt(k + 1))
    return np.stack(he[:degree + 1], axis=-1)


#: the second coordinate of a pair is integrated on [-SPAN, SPAN] (the Gaussian tail beyond carries < 1e-36 of
#: the mass; h_alpha of degree <= 40 times it stays below round-off of O(1) coefficients)
SPAN = 13.0


@cache
def _split_legendre(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(nodes)


def _pair_projection(A: np.ndarray, phi, hb: HermiteBasis, radial: int, angular: int,
                     breakpoints: tuple[float, ...] = (0.0,)):
    """p = 2 in whitened coordinates u = A^-1 zeta with A lower triangular: zeta_0 = A00 u0 has its breakpoint
    at u0 = 0 (two half-line Gauss rules), zeta_1 = A10 u0 + A11 u1 at u1 = c(u0) = -A10 u0 / A11 (Gauss-Legendre
    on [-SPAN, c] and [c, SPAN], ``angular`` nodes each).  The product basis factorises, so the projection is two
    contractions: O(Q0 Q1 D) per function instead of O(Q0 Q1 D^2).  ``breakpoints`` other than (0,) (hardtanh,
    ReLU6, hard-swish, ...): `_pair_nodes_at` splits both coordinates at every breakpoint t (u0 = t / A00 and
    u1 = (t - A10 u0) / A11) with Gauss-Legendre pieces; the u0 nodes then differ from pair to pair, and the first
    contraction is a batched product."""
    B = A.shape[0]
    D = hb.degree
    breakpoints = tuple(breakpoints)
    if breakpoints == (0.0,):
        u0, w0, u1, w1 = _pair_nodes(A, radial, angular)  # (Q0,), (Q0,), (B, Q0, Q1), (B, Q0, Q1)
    else:
        u0, w0, u1, w1 = _pair_nodes_at(A, angular, breakpoints)  # (B, Q0), (B, Q0), (B, Q0, Q1), (B, Q0, Q1)
    z0 = A[:, 0, 0, None] * u0  # (B, Q0)
    z1 = A[:, 1, 0, None, None] * u0[..., None] + A[:, 1, 1, None, None] * u1
    p0 = phi(z0)
    p1 = phi(z1)
    # F_00 = p0^2, F_01 = F_10 = p0 p1, F_11 = p1^2: along u1 only w1, w1 p1 and w1 p1^2 are contracted
    stage, S = _line_moments(np.ascontiguousarray(w1), np.ascontiguousarray(p1, dtype=float),
                             np.ascontiguousarray(u1), D)  # (B, Q0, 3, D + 1), (B, Q0, 5)
    outer = np.stack([p0 * p0, p0, np.ones_like(p0)], axis=-1)[..., None] * stage  # times the u0-only factors
    Q0 = u0.shape[-1]
    if u0.ndim == 1:
        # one (D + 1, Q0) x (Q0, B 3 (D + 1)) product: a broadcast matmul against a transposed view is ~7x slower
        full = (_weighted_radial_basis(radial, D) @ outer.reshape(B, Q0, -1).transpose(1, 0, 2).reshape(Q0, -1))
        full = full.reshape(D + 1, B, 3, D + 1).transpose(1, 0, 2, 3)
    else:
        basis0 = hermite_functions(u0, D) * w0[..., None]  # (B, Q0, D + 1)
        full = np.matmul(basis0.transpose(0, 2, 1), outer.reshape(B, Q0, -1)).reshape(B, D + 1, 3, D + 1)
    full = full[:, :, [0, 1, 1, 2]].reshape(B, D + 1, 2, 2, D + 1)
    fhat = full[:, hb.alphas[:, 0], :, :, hb.alphas[:, 1]]  # (n, B, 2, 2): advanced indices first
    fhat = np.moveaxis(fhat, 0, -1)
    # E[F_cd F_ef] from S_r = sum_q1 w1 p1^r: the entries are p0^(4 - r) S_r, r the number of p1 factors
    moments = np.stack([(w0 * p0 ** (4 - r) * S[:, :, r]).sum(axis=1) for r in range(5)], axis=-1)  # (B, 5)
    count = np.array([0, 1, 1, 2])  # p1 factors of F_00, F_01, F_10, F_11
    covTT = moments[:, count[:, None] + count[None, :]].reshape(B, 2, 2, 2, 2)
    return fhat, covTT


def _split_line_at(m: np.ndarray, s: np.ndarray, breakpoints: tuple[float, ...], nodes: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Nodes v and weights (with the N(0, 1) density) for E_v[g(m + s v)], g with breakpoints t_i: Gauss-Legendre
    on the len(breakpoints) + 1 pieces of [-SPAN, SPAN] cut at (t_i - m) / s (sorted, clipped), ``nodes`` each;
    m (...), s broadcastable: (..., (len + 1) nodes).  A piece that the clipping empties gets zero weights."""
    t = np.asarray(breakpoints, dtype=float)
    safe = np.where(s > 0, s, 1.0)
    cuts = np.sort(np.clip((t - m[..., None]) / np.asarray(safe)[..., None], -SPAN, SPAN), axis=-1)
    edges = np.concatenate([np.full(cuts.shape[:-1] + (1,), -SPAN), cuts, np.full(cuts.shape[:-1] + (1,), SPAN)],
                           axis=-1)
    x, wt = _split_legendre(nodes)
    lo, hi = edges[..., :-1, None], edges[..., 1:, None]  # (..., pieces, 1)
    half = (hi - lo) / 2
    v = (lo + half * (x + 1)).reshape(cuts.shape[:-1] + (-1,))
    w = (half * wt).reshape(v.shape) * np.exp(-v * v / 2) / math.sqrt(2 * math.pi)
    return v, w


def _pair_nodes_at(A2: np.ndarray, angular: int, breakpoints: tuple[float, ...]):
    """The rule of `_pair_projection` at breakpoints: u0 (B, Q0) and its weights split at t / A00, u1 (B, Q0, Q1)
    and its weights split at (t - A10 u0) / A11, for every breakpoint t."""
    u0, w0 = _split_line_at(np.zeros(A2.shape[0]), A2[:, 0, 0], breakpoints, angular)
    u1, w1 = _split_line_at(A2[:, 1, 0, None] * u0, A2[:, 1, 1, None], breakpoints, angular)
    return u0, w0, u1, w1


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _line_moments(w: np.ndarray, p: np.ndarray, u: np.ndarray, degree: int
                  ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The inner contraction of `_pair_projection` along the second coordinate's nodes j, for the weights w, the
    activation p = phi(zeta_1) and the nodes u (B, Q0, Q1): out[b, q, c, k] = sum_j w p^c h_k(u) for c = 0, 1, 2
    and k = 0..degree (the Hermite recurrence run along j, vectorised, with no (..., degree + 1) array of basis
    values), and the power sums S[b, q, r] = sum_j w p^r, r = 0..4 (the same-layer fourth moments).  The weight
    rows w p^c are formed here, not as a stacked array."""
    B, Q0, Q1 = w.shape
    out = np.empty((B, Q0, 3, degree + 1))
    sums = np.empty((B, Q0, 5))
    a = np.empty(degree + 1)
    c = np.empty(degree + 1)
    for k in range(degree + 1):
        a[k] = 1.0 / np.sqrt(k + 1.0)
        c[k] = np.sqrt(k + 0.0) / np.sqrt(k + 1.0)
    g0 = np.empty(Q1)
    g1 = np.empty(Q1)
    g2 = np.empty(Q1)
    cur = np.empty(Q1)
    prev = np.empty(Q1)
    for b in range(B):
        for q in range(Q0):
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            s4 = 0.0
            for j in range(Q1):
                pj = p[b, q, j]
                g0[j] = w[b, q, j]
                g1[j] = g0[j] * pj
                g2[j] = g1[j] * pj
                s0 += g0[j]
                s1 += g1[j]
                s2 += g2[j]
                s3 += g2[j] * pj
                s4 += g2[j] * pj * pj
                cur[j] = 1.0
                prev[j] = 0.0
            sums[b, q, 0] = s0
            sums[b, q, 1] = s1
            sums[b, q, 2] = s2
            sums[b, q, 3] = s3
            sums[b, q, 4] = s4
            for k in range(degree + 1):
                t0 = 0.0
                t1 = 0.0
                t2 = 0.0
                for j in range(Q1):
                    h = cur[j]
                    t0 += g0[j] * h
                    t1 += g1[j] * h
                    t2 += g2[j] * h
                out[b, q, 0, k] = t0
                out[b, q, 1, k] = t1
                out[b, q, 2, k] = t2
                for j in range(Q1):
                    nxt = u[b, q, j] * cur[j] * a[k] - c[k] * prev[j]
                    prev[j] = cur[j]
                    cur[j] = nxt
    return out, sums


def project(A: np.ndarray, phi, hb: HermiteBasis, radial: int, angular: int, tensor: int, expansion=None,
            K: np.ndarray | None = None, breakpoints: tuple[float, ...] = (0.0,)):
    """For a batch of lower-triangular factors A (B, p, p) of the covariances K = A A^T: the Hermite projections
    fhat[b, c, d, alpha] = E[phi(zeta_c) phi(zeta_d) h_alpha(u)] (zeta = A u, u ~ N(0, I)) for the basis ``hb`` and
    the same-layer fourth moments E[phi_c phi_d phi_e phi_f] (B, p, p, p, p).  ``expansion`` (a
    `fluctuation_mehler.PairExpansion`, smooth phi) replaces the pair rule by certified Mehler sums; it reads the
    variances from ``K`` (B, p, p) when given.  ``breakpoints``: where a piecewise phi has its kinks (the rules
    split there); (0,) for a smooth phi and for ReLU-like ones."""
    B, p = A.shape[0], A.shape[-1]
    breakpoints = tuple(float(t) for t in breakpoints)
    pair: Callable | None = None
    if breakpoints != (0.0,):
        def pair_at(A2, phi, hb, radial, angular, rows=(0, 1)):
            return _pair_projection(A2, phi, hb, radial, angular, breakpoints)
        pair = pair_at
    elif expansion is not None:
        def pair_sums(A2, phi, hb, radial, angular, rows=(0, 1)):
            diagonal = None if K is None else np.stack([K[:, rows[0], rows[0]], K[:, rows[1], rows[1]]], axis=1)
            return expansion.pair_projection(A2, phi, hb, radial, angular, diagonal)
        pair = pair_sums
    if p == 2:
        return (_pair_projection if pair is None else pair)(A, phi, hb, radial, angular)
    if p >= 3:
        return _rotated_projection(A, phi, hb, radial, angular, tensor, pair, breakpoints)
    if breakpoints == (0.0,):  # p = 1
        u, w = line_rule(radial)
        z = np.einsum("qi,bci->bqc", u, A)
        H = _basis_at_nodes(hb.degree, radial)
        w = w[None, :]
    else:  # Gauss-Legendre pieces split at t / sqrt(K) for every breakpoint t
        v, w = _split_line_at(np.zeros(B), A[:, 0, 0], breakpoints, angular)  # (B, Q)
        z = A[:, None, :, 0] * v[:, :, None]
        H = hermite_functions(v, hb.degree)  # (B, Q, D + 1)
    ph = phi(z)
    F = ph[:, :, :, None] * ph[:, :, None, :]
    FW = F * w[:, :, None, None]
    fhat = np.matmul(FW.reshape(B, -1, p * p).transpose(0, 2, 1), H).reshape(B, p, p, -1)
    covTT = np.matmul(FW.reshape(B, -1, p * p).transpose(0, 2, 1), F.reshape(B, -1, p * p))
    return fhat, covTT.reshape((B,) + (p,) * 4)


@cache
def _basis_at_nodes(degree: int, nodes: int) -> np.ndarray:
    """The p = 1 basis at the nodes of ``line_rule(nodes)``."""
    return basis(1, degree).evaluate(line_rule(nodes)[0])


def _second_quantization_pair(Mmat: np.ndarray, hb: HermiteBasis, top: int) -> list[np.ndarray]:
    """`second_quantization` for p = 2, vectorised over the batch, built degree by degree in the orthonormal
    basis: with alpha = (m - i, i) and beta = (m - j, j) (the order of `basis`), multiplying (M^T t)^(beta - e)
    by one more linear form gives

        Gamma_m[i, j] = (M01 sqrt(m - i) Gamma_(m-1)[i, j-1] + M11 sqrt(i) Gamma_(m-1)[i-1, j-1]) / sqrt(j),  j >= 1
        Gamma_m[i, 0] = (M00 sqrt(m - i) Gamma_(m-1)[i, 0] + M10 sqrt(i) Gamma_(m-1)[i-1, 0]) / sqrt(m),

    O(m^2) per degree (the expanded sum over k is O(m^3)); the factors sqrt(alpha!/beta!) enter one ratio at a
    time, so no binomial or factorial is formed."""
    B = Mmat.shape[0]
    packed = _gamma_pair_packed(np.ascontiguousarray(Mmat, dtype=float), int(top))
    blocks, off = [], 1
    for m in range(1, top + 1):
        blocks.append(packed[:, off:off + (m + 1) ** 2].reshape(B, m + 1, m + 1))
        off += (m + 1) ** 2
    return blocks


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _gamma_pair_packed(M: np.ndarray, top: int) -> np.ndarray:  # pragma: no cover - compiled
    """The blocks of `_second_quantization_pair`, degree after degree, row-major in one (B, sum (m + 1)^2) array,
    compiled because the NumPy form spends its time on the 64 degrees' small temporaries."""
    B = M.shape[0]
    total = 1  # slot 0: the degree-0 block [[1]]
    for m in range(1, top + 1):
        total += (m + 1) * (m + 1)
    sq = np.sqrt(np.arange(top + 2.0))
    inv = np.zeros(top + 2)
    inv[1:] = 1.0 / sq[1:]
    out = np.empty((B, total))
    for b in range(B):
        row = out[b]
        row[0] = 1.0
        off, prev = 1, 0
        for m in range(1, top + 1):
            _gamma_step(row, prev, row, off, m, M[b, 0, 0], M[b, 1, 0], M[b, 0, 1], M[b, 1, 1], sq, inv)
            prev = off
            off += (m + 1) * (m + 1)
    return out


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _gamma_step(src, s_off, dst, d_off, m, m00, m10, m01, m11, sq, inv):  # pragma: no cover - compiled
    """One degree of the recurrence of `_second_quantization_pair`: the block of degree m (row-major, (m + 1)^2
    entries at dst[d_off:]) from that of degree m - 1 (at src[s_off:]); the divisions by sqrt(j) are
    multiplications by its reciprocal (a division costs several multiplications; round-off only)."""
    n = m + 1
    for i in range(n):
        row = d_off + i * n
        up = sq[m - i]
        down = sq[i]
        r_up = s_off + i * m  # row i of the degree m - 1 block (i < m)
        r_dn = s_off + (i - 1) * m  # row i - 1 (i >= 1)
        if 0 < i < m:
            dst[row] = (m00 * (up * src[r_up]) + m10 * (down * src[r_dn])) * inv[m]
            a, c = m01 * up, m11 * down
            for j in range(1, n):
                dst[row + j] = (a * src[r_up + j - 1] + c * src[r_dn + j - 1]) * inv[j]
        elif i == 0:
            dst[row] = m00 * (up * src[r_up]) * inv[m]
            a = m01 * up
            for j in range(1, n):
                dst[row + j] = a * src[r_up + j - 1] * inv[j]
        else:
            dst[row] = m10 * (down * src[r_dn]) * inv[m]
            c = m11 * down
            for j in range(1, n):
                dst[row + j] = c * src[r_dn + j - 1] * inv[j]


def carry_pair_channels(Mmat: np.ndarray, top: int, source: np.ndarray) -> np.ndarray:
    """Gamma(M) applied to channels of p = 2 without forming Gamma: ``source`` (B, q, nch) holds q columns of
    channels of degrees 1..top (nch = sum (m + 1), the order of `basis`), the result is (B, nch, q) with
    new[b, alpha, k] = sum_beta Gamma(M_b)_(alpha beta) source[b, k, beta].  Each degree's block is built by the
    recurrence of `_second_quantization_pair` in a small buffer and applied at once (one pair at a time, in
    cache), instead of a (B, sum (m + 1)^2) array of every block."""
    B, q, nch = source.shape
    return _gamma_pair_apply(np.ascontiguousarray(Mmat, dtype=float), int(top),
                             np.ascontiguousarray(source, dtype=float))


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _gamma_pair_apply(M: np.ndarray, top: int, src: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """`carry_pair_channels`: the recurrence of `_gamma_pair_packed`, each block applied as soon as it is built."""
    B, q, nch = src.shape
    sq = np.sqrt(np.arange(top + 2.0))
    inv = np.zeros(top + 2)
    inv[1:] = 1.0 / sq[1:]
    out = np.empty((B, nch, q))
    prev = np.empty((top + 1) * (top + 1))
    cur = np.empty((top + 1) * (top + 1))
    for b in range(B):
        prev[0] = 1.0
        col = 0
        for m in range(1, top + 1):
            n = m + 1
            _gamma_step(prev, 0, cur, 0, m, M[b, 0, 0], M[b, 1, 0], M[b, 0, 1], M[b, 1, 1], sq, inv)
            for i in range(n):
                for k in range(q):
                    acc = 0.0
                    for j in range(n):
                        acc += cur[i * n + j] * src[b, k, col + j]
                    out[b, col + i, k] = acc
            col += n
            prev, cur = cur, prev
    return out


def _rotation(A: np.ndarray, rows: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(Q (B, p, p) orthogonal, R (B, k, k) upper triangular with R_ii >= 0) with zeta_rows = R^T (v_1..v_k),
    v = Q^T u: the first k coordinates of v span the rows ``rows`` of A (zeta = A u)."""
    M = np.stack([A[:, r, :] for r in rows], axis=-1)  # (B, p, k): the rows as columns
    Q, R = np.linalg.qr(M, mode="complete")
    k = len(rows)
    sign = np.sign(np.diagonal(R[:, :k, :k], axis1=1, axis2=2))
    sign[sign == 0] = 1.0
    Q[:, :, :k] *= sign[:, None, :]
    R = R[:, :k, :k] * sign[:, :, None]
    return Q, R


def _split_line(m: np.ndarray, s: np.ndarray, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes v and weights (with the N(0, 1) density) for E_v[g(m + s v)], g with a breakpoint at 0: Gauss-Legendre
    on [-SPAN, b] and [b, SPAN], b = -m / s clipped (``nodes`` each): `_split_line_at` with the one breakpoint 0."""
    return _split_line_at(m, s, (0.0,), nodes)


@cache
def _first_coordinate_rule(radial: int) -> tuple[np.ndarray, np.ndarray]:
    """u0 (Q0,) ascending and its weights: the two half-line rules of a standard normal, breakpoint at 0."""
    r, wr = radial_rule(1, radial)
    u0, w0 = np.concatenate([-r[::-1], r]), np.concatenate([wr[::-1], wr]) / 2.0
    u0.flags.writeable = w0.flags.writeable = False  # cached: shared by every call
    return u0, w0


@cache
def _weighted_radial_basis(radial: int, degree: int) -> np.ndarray:
    """(degree + 1, Q0), C-contiguous: the orthonormal Hermite functions at the u0 nodes of `_pair_nodes` times
    their weights."""
    u0, w0 = _first_coordinate_rule(radial)
    return np.ascontiguousarray((hermite_functions(u0, degree) * w0[:, None]).T)


def _pair_nodes(A2: np.ndarray, radial: int, angular: int):
    """The rule of `_pair_projection` for a batch of 2 x 2 lower-triangular factors: u0 (Q0,) and its weights w0
    (the two half-line rules, breakpoint of zeta_0 at u0 = 0), u1 (B, Q0, Q1) and its weights w1 with the density
    (`_split_line` at zeta_1's breakpoint u1 = -A10 u0 / A11)."""
    u0, w0 = _first_coordinate_rule(radial)
    u1, w1 = _split_line(A2[:, 1, 0, None] * u0, A2[:, 1, 1, None], angular)
    return u0, w0, u1, w1


def _rotated_projection(A: np.ndarray, phi, hb: HermiteBasis, radial: int, angular: int, tensor: int,
                        pair=None, breakpoints: tuple[float, ...] = (0.0,)):
    """`project` for p = 3, 4 without a p-dimensional tensor rule (whose Gauss-Hermite nodes converge slowly for
    phi(zeta)^2 when Var zeta > 1/2: erf at K = 1.4 was 0.4% off with 14 nodes per dimension).

    fhat: phi_c phi_d depends on u only through a_c.u and a_d.u (rows of A).  In v = Q^T u, Q orthogonal with its
    first two columns spanning a_c, a_d (`_rotation`), it is a function of (v_1, v_2) with factor R^T: the pair rule
    gives E[phi_c phi_d h_beta(v)] for beta supported on the first two coordinates (the others vanish: E h_k = 0 for
    k > 0), and h_alpha(u) = h_alpha(Q v) = sum_beta Gamma(Q)_(alpha beta) h_beta(v) (`second_quantization` of the
    orthogonal Q, no noise).  The fourth moments E[phi_c phi_d phi_e phi_f]: those of at most two distinct inputs
    from the pair rule; three distinct inputs by the pair rule on the first two and a split Gauss-Legendre rule on
    the third coordinate, conditionally; four distinct inputs (p = 4) by the tensor rule with ``tensor`` + 6
    nodes per dimension in the rotated coordinates.  ``pair(A2, phi, hb, radial, angular, (c, d))``: the pair
    projection to use (default `_pair_projection`; the Mehler sums of `fluctuation_mehler` for a smooth phi)."""
    B, p = A.shape[0], A.shape[-1]
    D = hb.degree
    hb2 = basis(2, D)
    fhat = np.empty((B, p, p, hb.size))
    EFF = np.empty((B,) + (p,) * 4)
    known = np.zeros((p,) * 4, dtype=bool)
    cols = []  # per degree: positions (within the degree block) of alphas supported on the first two coordinates
    for m in range(D + 1):
        al = hb.alphas[hb.by_degree[m]]
        sel = np.array([i for i, a in enumerate(al) if not np.any(a[2:])], dtype=np.int64)
        cols.append((sel, np.array([hb2.index[(int(al[i][0]), int(al[i][1]))] for i in sel], dtype=np.int64)))
    for c in range(p):
        for d in range(c + 1, p):
            Q, R = _rotation(A, (c, d))
            R2 = np.transpose(R, (0, 2, 1))
            f2, eff2 = (_pair_projection(R2, phi, hb2, radial, angular) if pair is None
                        else pair(R2, phi, hb2, radial, angular, (c, d)))
            blocks = second_quantization(Q, hb, D)
            idx = (c, d)
            for i in range(2):
                for j in range(2):
                    out = np.empty((B, hb.size))
                    out[:, 0] = f2[:, i, j, 0]
                    for m in range(1, D + 1):
                        sel, pos2 = cols[m]
                        out[:, hb.by_degree[m]] = np.einsum("bay,by->ba", blocks[m - 1][:, :, sel], f2[:, i, j, pos2])
                    fhat[:, idx[i], idx[j]] = out
            for ijkl in np.ndindex(2, 2, 2, 2):
                key = tuple(idx[t] for t in ijkl)
                EFF[(slice(None),) + key] = eff2[(slice(None),) + ijkl]
                known[key] = True
    triples: dict[tuple[int, ...], tuple] = {}  # the nodes and phi values of each triple of inputs, built once
    for key in np.ndindex(*(p,) * 4):
        if known[key]:
            continue
        inputs = tuple(sorted(set(key)))
        counts = [key.count(i) for i in inputs]
        if len(inputs) == 3:
            # the first two inputs on the pair rule, the third conditionally: E[phi_3^k | v_1, v_2], k = 1, 2
            if inputs not in triples:
                _, R = _rotation(A, inputs)
                R2 = np.transpose(R[:, :2, :2], (0, 2, 1))
                if breakpoints == (0.0,):
                    u0, w0, u1, w1 = _pair_nodes(R2, radial, angular)
                    u0, w0 = np.broadcast_to(u0, (B, u0.size)), np.broadcast_to(w0, (B, w0.size))
                else:
                    u0, w0, u1, w1 = _pair_nodes_at(R2, angular, breakpoints)
                z0 = R[:, 0, 0, None, None] * u0[:, :, None]
                z1 = R[:, 0, 1, None, None] * u0[:, :, None] + R[:, 1, 1, None, None] * u1
                m3 = R[:, 0, 2, None, None] * u0[:, :, None] + R[:, 1, 2, None, None] * u1
                s3 = R[:, 2, 2, None, None]
                v3, w3 = (_split_line(m3, s3, angular) if breakpoints == (0.0,)
                          else _split_line_at(m3, s3, breakpoints, angular))
                p3 = phi(m3[..., None] + s3[..., None] * v3)
                triples[inputs] = (w0[:, :, None] * w1, phi(z0), phi(z1),
                                   {k: np.sum(w3 * p3 ** k, axis=-1) for k in (1, 2)})
            w, p0, p1, inner = triples[inputs]
            value = np.sum(w * p0 ** counts[0] * p1 ** counts[1] * inner[counts[2]], axis=(1, 2))
        else:  # four distinct inputs: the tensor rule in the rotated coordinates
            _, R = _rotation(A, inputs)
            u, wt = tensor_rule(p, tensor + 6)
            z = np.einsum("qi,bij->bqj", u, R)  # zeta_j = sum_i R_ij v_i
            value = np.einsum("q,bq->b", wt, np.prod(phi(z), axis=-1))
        for perm in set(itertools.permutations(key)):
            EFF[(slice(None),) + perm] = value
            known[perm] = True
    return fhat, EFF
