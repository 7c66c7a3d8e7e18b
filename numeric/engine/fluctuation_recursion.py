"""The O(1/width) recursion of the finite-width kernel for a batch of small input sets (p = 1..4 inputs each).

Theory: docs/design/fluctuations-engine.md, sections 2-4 (derived there; the P-input generalisation of
``pdlt.corrected``'s influence/Hermite-channel recursion and of PDLT App. B, eqs. B.23-B.26, without B.23's
conditionally Gaussian closure).  For one neuron's mean-field trajectory zeta^l (a Gaussian Markov process,
zeta^(l+1) = gamma zeta^l + lambda_(l+1) xi, Cov xi = sigma_w2 G(K^l) + sigma_b2 J) and its influence e^l on the law
kernel (e^0 = 0, e^(l+1) = chi^l[e^l] + w_(l+1) T^l, T = phi phi^T - G, chi = g + w G'), with S = zeta zeta^T - K:

    width Cov[K^_ab, K^_cd] -> V = Wick(K) + Q + Q^T + C,  Q = Cov(e, S),  C = Cov(e, e)             (3.2)
    C^(l+1) = chi C chi^T + w (chi X + (chi X)^T) + w^2 Cov(T, T),   X = Cov(e, T)                    (3.4)
    M^(l+1) = g M^l + w m^l,  m = 1/2 d2G:M + 1/8 d4G:C + 1/2 sum_cd E[d_c d_d (phi phi^T)(zeta) e_cd]  (3.7)-(3.8)

with E[K^] = K + M / width + O(width^-2).  The cross-layer correlators X and the last term of m are carried by the
Hermite channels ch_alpha = E[e h_alpha(u)] in the whitened coordinates u = A^-1 zeta (A A^T = K, Cholesky), which
propagate with the second quantisation Gamma(gamma A_(l+1)^-1 A_l) (`fluctuation_quadrature.second_quantization`).
Every derivative of a Gaussian expectation is a Hermite projection by integration by parts:
E[d^beta f h_alpha] = sqrt((alpha + beta)!/alpha!) E[f h_(alpha+beta)] (derivatives in u).

The update terms (Wick, chi, the covariance and mean-shift updates, the Hermite raising factors) are derived in
SymPy by `derive/fluctuations.py` and emitted into `resprop.generated.fluctuation_step`; this module supplies the
Gaussian projections and the channels and runs the layers.

Functionals are stored as full symmetric p x p matrices (index pairs ordered), C, Q, V as (p, p, p, p).
Channels of degree 1..N are kept; ``V`` uses all of them, ``V_low`` only degrees <= N - 2 (the truncation
estimate |V - V_low|) and ``V_closure`` only degree 2 (B.23's closure: B.25 / B.26 in resprop's variables).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from resprop.generated import fluctuation_step as step
from resprop.numeric.engine import fluctuation_quadrature as fq

__all__ = ["Rule", "SubproblemResult", "propagate_subproblems", "wick"]

#: the three uses of the channels: all degrees 1..N, degrees 1..N-2 (the truncation estimate), degree 2 (closure)
VARIANTS = ("full", "low", "closure")


@dataclass(frozen=True)
class Rule:
    """Quadrature orders (`fluctuation_quadrature.project`): ``radial`` nodes of each half-line rule (the first
    coordinate; the only one for p = 1), ``angular`` Gauss-Legendre nodes on each side of the second coordinate's
    breakpoint (p = 2), ``tensor`` Gauss-Hermite nodes per dimension for p = 3, 4; ``breakpoints`` of a piecewise
    phi (other than (0,): Gauss-Legendre pieces in both coordinates, ``angular`` nodes each)."""

    radial: int = 40
    angular: int = 64
    tensor: int = 14
    #: where a piecewise phi has its kinks: the rules split there ((0,): smooth phi, ReLU, leaky ReLU, |x|)
    breakpoints: tuple[float, ...] = (0.0,)


@dataclass(frozen=True)
class SubproblemResult:
    """Per subproblem (batch axis first): the final K (B, p, p), V / C / M of the three variants."""

    K: np.ndarray
    V: dict
    C: dict
    M: dict
    #: width Cov of the previous layer's G^ (the neuron's whole influence U = T + G'[e] on it), all channels;
    #: None at layer 0
    U: np.ndarray | None = None
    #: Delta of the previous layer: Cov(e, T_perp), T_perp the part of T outside the second chaos (the
    #: same-neuron cross-layer source the closure drops; PDLT multi_input_corrected's Delta); None at layer 0
    Delta: np.ndarray | None = None
    #: with ``two_time``: Cov(e^k, e^l) for l = 0..k (B, k + 1, p, p, p, p), k this layer (all channels); the
    #: law kernel's two-time covariance width Cov[K~^k, K~^l]
    two_time: np.ndarray | None = None


#: width Cov of the empirical kernel of n iid Gaussian neurons (generated: Isserlis' pairings)
wick = step.wick
_chi = step.chi
_transpose_pairs = step.transpose_pairs


def propagate_subproblems(K0: np.ndarray, gammas: np.ndarray, g: np.ndarray, w: np.ndarray, s: np.ndarray,
                          phi: Callable[[np.ndarray], np.ndarray], channels: int, rule: Rule,
                          mean_shift: bool = True,
                          record: Callable[[int, SubproblemResult], None] | None = None,
                          two_time: bool = False, expansion=None) -> SubproblemResult:
    """Run the recursion for a batch of input kernels K0 (B, p, p) through the layers given by the signed skip
    gains ``gammas``, g = gamma^2, w = lambda^2 sigma_w2 and s = lambda^2 sigma_b2 (one entry per layer).
    ``record(l, result)`` is called with the state of every layer l = 0..L (a trajectory; O(1) extra work).

    ``two_time``: also the two-time covariances Y_kl = Cov(e^k, e^l), l <= k (``SubproblemResult.two_time``):
    Y_(k+1)l = chi^k[Y_kl] + w_(k+1) Cov(T^k, e^l), where Cov(T^k, e^l) = sum_alpha E[T^k h_alpha(u^k)]
    E[e^l h_alpha(u^k)] and the channels of a past influence e^l are carried to layer k by the second quantisation
    alone (zeta^(k+1) = gamma zeta^k + lambda xi with xi independent of the past).  O(depth^2) work.

    ``expansion``: a `fluctuation_mehler.PairExpansion` (smooth phi) computes the pair projections by certified
    Mehler sums; None: the 2-D rule of ``rule``."""
    B, p, _ = K0.shape
    N = int(channels)
    top = max(N + 2, 4) if mean_shift else max(N, 2)
    hb = fq.basis(p, top)
    lo, hi = hb.by_degree[1].start, hb.by_degree[N].stop  # channel positions (degrees 1..N)
    nch = hi - lo
    degree_of = np.repeat(np.arange(top + 1), [s_.stop - s_.start for s_ in hb.by_degree])[lo:hi]
    # the channels are ordered by degree, so each variant's degrees are one contiguous run (a view, not a copy)
    masks = {"full": slice(0, nch), "low": slice(0, int(np.count_nonzero(degree_of <= N // 2))),
             "closure": slice(int(np.count_nonzero(degree_of < 2)), int(np.count_nonzero(degree_of <= 2)))}
    pairs = [(i, j) for i in range(p) for j in range(p)]
    e2 = {(i, j): _unit(p, i) + _unit(p, j) for i, j in pairs}
    pos2 = np.array([[hb.position(e2[i, j]) for j in range(p)] for i in range(p)])
    zero = np.zeros(p, np.int64)
    fac2 = np.array([[step.hermite_shift_factor(zero, e2[i, j]) for j in range(p)] for i in range(p)])
    if mean_shift:
        shifts = {ij: hb.shifted(e2[ij], N) for ij in pairs}  # alpha (deg <= N) -> alpha + e_i + e_j
        idx4 = np.empty((p,) * 4, dtype=np.int64)
        fac4 = np.empty((p,) * 4)
        for ijkl in np.ndindex(*(p,) * 4):
            beta = sum((_unit(p, t) for t in ijkl), np.zeros(p, np.int64))
            idx4[ijkl] = hb.position(beta)
            fac4[ijkl] = step.hermite_shift_factor(np.zeros(p, np.int64), beta)  # sqrt(beta!)

    K = np.array(K0, dtype=float)
    ch = np.zeros((B, nch, p, p))
    C = {v: np.zeros((B,) + (p,) * 4) for v in VARIANTS}
    M = {v: np.zeros((B, p, p)) for v in VARIANTS}
    A = np.linalg.cholesky(K)
    if record is not None:
        record(0, _result(K, A, ch, C, M, pos2, fac2, lo, two_time=np.stack([C["full"]], axis=1) if two_time
                          else None))
    U = Delta = None
    frozen: list[np.ndarray] = []  # the channels of e^l, l < layer, carried to the current layer (two_time)
    Y = [C["full"].copy()] if two_time else []  # Cov(e^layer, e^l), l = 0..layer
    for layer in range(len(g)):
        Binv = np.linalg.inv(A)
        fhat, EFF = fq.project(A, phi, hb, rule.radial, rule.angular, rule.tensor, expansion, K, rule.breakpoints)
        G = fhat[..., 0]
        covTT = EFF - G[:, :, :, None, None] * G[:, None, None, :, :]
        D2 = fhat[..., pos2] * fac2  # E[d_ui d_uj f_cd]: (B, p, p, p, p)
        J2 = np.einsum("bic,bjd,bxyij->bxycd", Binv, Binv, D2)  # E[d_zc d_zd f_xy]
        fch = fhat[..., lo:hi]  # (B, p, p, nch)
        gl, wl, sl = float(g[layer]), float(w[layer]), float(s[layer])
        # mean shift source m^l (uses e^l, C^l, M^l)
        if mean_shift:
            # channels of A^-1 e A^-T: one (B, nch, p p) x (B, p p, p p) product with kron(A^-1, A^-1)
            kron = np.einsum("bic,bjd->bijcd", Binv, Binv).reshape(B, p * p, p * p)
            cht = np.matmul(ch.reshape(B, nch, p * p), kron.transpose(0, 2, 1)).reshape(B, nch, p, p)
            D4 = fhat[..., idx4] * fac4  # (B, p, p, p, p, p, p)
            for v in VARIANTS:
                Ct = np.einsum("bie,bjf,bkg,blh,befgh->bijkl", Binv, Binv, Binv, Binv, C[v])
                m = step.mean_shift_source(J2, M[v], D4, Ct)
                for (i, j) in pairs:
                    pos, fac = shifts[i, j]
                    sel = masks[v]
                    m = m + step.same_neuron_source(cht[:, sel, i, j] * fac[lo:hi][sel], fhat[..., pos[lo:hi][sel]])
                M[v] = step.mean_shift_update(M[v], m, gl, wl)
        X = {v: _channel_product(ch[:, masks[v]], fch[..., masks[v]]) for v in VARIANTS}  # Cov(e, T)
        if record is not None:  # Var U = Cov(T, T) + G'X + (G'X)^T + G' C G'^T; Delta = X minus its chaos-2 part
            GX = _chi(J2, 0.0, 1.0, X["full"])
            U = covTT + GX + _transpose_pairs(GX) + _chi(J2, 0.0, 1.0, _transpose_pairs(_chi(J2, 0.0, 1.0,
                                                                                               C["full"])))
            Delta = X["full"] - X["closure"]
        if two_time:  # Y_(layer+1) l = chi[Y_layer l] + w Cov(T, e^l), l <= layer; then Y_(layer+1)(layer+1) = C
            cross = [_channel_product(f, fch) for f in frozen] + [X["full"]]  # Cov(e^l, T), l <= layer
            Y = [_chi(J2, gl, wl, y) + wl * _transpose_pairs(x) for y, x in zip(Y, cross)]
        for v in VARIANTS:
            C[v] = step.covariance_update(J2, gl, wl, C[v], X[v], covTT)
        if two_time:
            Y.append(C["full"].copy())
        Knext = step.kernel_update(K, G, gl, wl, sl)
        # channels: v = chi[ch] + w fhat, then Gamma(gamma A_next^-1 A)
        src = _chi(J2, gl, wl, ch.transpose(0, 2, 3, 1)) + wl * fch  # (B, p, p, nch)
        gam = float(gammas[layer])
        A_next = np.linalg.cholesky(Knext)
        if two_time:
            frozen = frozen + [ch]
        if gam == 0.0:
            ch = np.zeros_like(ch)
            frozen = [np.zeros_like(f) for f in frozen]
        else:
            Mmat = gam * np.linalg.solve(A_next, A)
            if p == 2:  # built and applied degree by degree, in cache (no array of all of Gamma's blocks)
                def carried(source):
                    return fq.carry_pair_channels(Mmat, N, source.reshape(B, p * p, nch)).reshape(B, nch, p, p)
            else:
                blocks = fq.second_quantization(Mmat, hb, N)

                def carried(source):  # Gamma(gamma A_next^-1 A) on channels laid out (B, p, p, nch)
                    new = np.empty((B, nch, p, p))
                    for m_deg, block in enumerate(blocks, start=1):
                        sl_m = slice(hb.by_degree[m_deg].start - lo, hb.by_degree[m_deg].stop - lo)
                        part = source[..., sl_m].reshape(B, p * p, -1).transpose(0, 2, 1)  # (B, n_m, p p)
                        new[:, sl_m] = np.matmul(block, part).reshape(B, -1, p, p)
                    return new

            ch = carried(src)
            frozen = [carried(f.transpose(0, 2, 3, 1)) for f in frozen]
        K, A = Knext, A_next
        if record is not None:
            record(layer + 1, _result(K, A, ch, C, M, pos2, fac2, lo, U, Delta,
                                      np.stack(Y, axis=1) if two_time else None))
    return _result(K, A, ch, C, M, pos2, fac2, lo, U, Delta, np.stack(Y, axis=1) if two_time else None)


def _result(K, A, ch, C, M, pos2, fac2, lo, U=None, Delta=None, two_time=None) -> SubproblemResult:
    """V = Wick + Q + Q^T + C at the current layer (A its Cholesky factor); Q = Cov(e, S) from the degree-2
    channels, with S_ef = sum_ij A_ei A_fj (u_i u_j - delta_ij)."""
    c2 = ch[:, pos2 - lo] * fac2[None, :, :, None, None]  # (B, i, j, c, d) = E[e_cd (u_i u_j - delta_ij)]
    Q = np.einsum("bei,bfj,bijcd->bcdef", A, A, c2)
    W = wick(K)
    V = {v: W + Q + _transpose_pairs(Q) + C[v] for v in VARIANTS}
    return SubproblemResult(K=K.copy(), V=V, C={v: c.copy() for v, c in C.items()},
                            M={v: m.copy() for v, m in M.items()}, U=U, Delta=Delta, two_time=two_time)


def _channel_product(ch: np.ndarray, fch: np.ndarray) -> np.ndarray:
    """Cov(e, T)_(cd)(xy) = sum_a ch[b, a, c, d] fch[b, x, y, a]: ch (B, n, p, p), fch (B, p, p, n) -> (B, p, p, p, p),
    one batched matrix product."""
    B, n, p, _ = ch.shape
    out = np.matmul(ch.reshape(B, n, p * p).transpose(0, 2, 1), fch.reshape(B, p * p, n).transpose(0, 2, 1))
    return out.reshape(B, p, p, p, p)


def _unit(p: int, i: int) -> np.ndarray:
    e = np.zeros(p, np.int64)
    e[i] = 1
    return e
