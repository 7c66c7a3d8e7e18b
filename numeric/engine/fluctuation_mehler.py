"""The pair projections of the fluctuation engine by Mehler sums over per-input Hermite tables (smooth activations).

`fluctuation_quadrature._pair_projection` integrates fhat_cd,alpha = E[phi(zeta_c) phi(zeta_d) h_alpha(u)] and the
fourth moments E[phi_0^(4-q) phi_1^q] of every pair on a 2-D rule.  For a smooth activation they follow from 1-D
data of each input instead (docs/design/fluctuations-engine.md section 5.4).  With zeta_0 = sqrt(d0) u0,
zeta_1 = sqrt(d1) (r u0 + s u1), r^2 + s^2 = 1 (the Cholesky factor: r = A10 / sqrt(d1), s = A11 / sqrt(d1)), the
rotation formula h_k(r x + s y) = sum_m sqrt(C(k, m)) r^m s^(k-m) h_m(x) h_(k-m)(y) (Mehler; checked exactly in
SymPy by tests/test_fluctuation_mehler.py) gives

    fhat_01[i, j] = sum_m P_mi(d0) w_j(m) b_(m+j)(d1),   w_j(m) = sqrt(C(m + j, m)) r^m s^j
    fhat_00[i, j] = delta_j0 c_i(d0),                    fhat_11[i, j] = sqrt(C(i + j, i)) r^i s^j c_(i+j)(d1)
    E[phi_0^(4-q) phi_1^q] = sum_k r^k g_k(phi^(4-q), d0) g_k(phi^q, d1)

with the tables of one variance d: b_k = E[phi(sqrt(d) x) h_k(x)] (the Hermite coefficients of the expectation
engine, `dual_tables`), c_k and g_k(phi^q) those of phi^2 and phi^q, and P_mi = E[phi(sqrt(d) x) h_m(x) h_i(x)].

*Truncation, certified.*  The m-sum stops at a level K of ``LADDER`` chosen per pair.  By Cauchy-Schwarz the tail
obeys |sum_(m>K) P_mi w_j(m) b_(m+j)| <= sup_(m>K) w_j(m) sqrt(sum_(m>K) P_mi^2) sqrt(sum_(k>K+j) b_k^2), and by
Parseval sum_m P_mi^2 = E[phi^2 h_i^2], sum_k b_k^2 = E[phi^2] (the same tail bound as `dual_tables` (*)); the
fourth-moment tails obey |r|^(K+1) sqrt(T_(4-q) T_q).  A pair takes the first level at which every bound is below
``TOL`` times its scale (sqrt(E phi_0^2 E phi_1^2), resp. sqrt(E phi_0^4 E phi_1^4)); a pair that no level
certifies (|r| near 1 with slowly decaying coefficients: tanh at large variance) goes to the 2-D rule.  Each pair's
level depends on that pair alone, and the terms beyond it are zeroed, so batching does not change a result.

*Tables.*  The trapezoidal rule on a uniform z-grid (geometric convergence for integrands analytic in a strip, the
step set by the activation's bandwidth as in `dual_tables`); the two interleaved coarse rules estimate the error,
and the step is halved until the estimate is below ``TABLE_TOL``.  One variance's tables cost one
(K + 1) x n x (D + 1) product; they are cached (bytes-bounded) because a layer's pairs share few diagonals
(`fluctuations._collapsed`: two; `_collapsed_norms`: the norm grid's nodes).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import cache

import numba
import numpy as np
from scipy.special import gammaln

from resprop.generated import fluctuation_step as step  # derived: derive/fluctuations.py (rotation formula)
from resprop.numeric.engine import dual_tables
from resprop.numeric.engine import fluctuation_quadrature as fq
from resprop.numeric.engine.bytes_lru import BytesLRU

__all__ = ["PairExpansion", "LADDER", "TOL"]

#: variances the tables are built for (those of `dual_tables`, whose grids grow like sqrt(d)); pairs with a
#: variance outside take the 2-D rule
VARIANCE_RANGE = (1e-8, dual_tables.D_TABLE_MAX)
#: truncation levels of the m-sum tried per pair (the largest bounds the tables' size)
LADDER = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
#: certified truncation error of each projection and fourth moment, relative to the pair's scale
TOL = 1e-13
#: estimated quadrature error of the tables, relative to sqrt(E phi^2) (resp. sqrt(E phi^(2q)))
TABLE_TOL = 1e-14
#: bytes of cached tables (one variance at 66 degrees: ~0.6 MiB)
TABLE_CACHE_BYTES = 96 << 20
#: half-width in z of the grid of the tables that carry h_i unweighted (P, E[phi^2 h_i^2]): psi_i = h_i e^(-z^2/4)
#: extends to 2 sqrt(i), then decays
_MARGIN_Z = 10.0
_SQRT_2PI = math.sqrt(2 * math.pi)
_TABLES = BytesLRU(lambda: TABLE_CACHE_BYTES)


@dataclass(frozen=True)
class DiagonalTables:
    """The 1-D data of one input of variance d (degree D, K = LADDER[-1]); see the module docstring."""

    P: np.ndarray  # (K + 1, D + 1): E[phi h_m h_i]
    b: np.ndarray  # (K + D + 1,): E[phi h_k]  (D: the tables' degree, >= TABLE_DEGREE)
    c: np.ndarray  # (D + 1,): E[phi^2 h_k]
    g: np.ndarray  # (4, K + 1): E[phi^q h_k], q = 0..3 (row 0: delta_k0)
    moments: np.ndarray  # (5,): E[phi^q], q = 0..4 ... used: E[phi^2], E[phi^4]
    tail_P: np.ndarray  # (len(LADDER), D + 1): sqrt(sum_(m > K_l) P_mi^2)
    tail_b: np.ndarray  # (K + D + 1,): sqrt(sum_(k' > k) b_k'^2)
    tail_g: np.ndarray  # (4, len(LADDER)): sqrt(sum_(k > K_l) g_k(phi^q)^2)
    trusted: bool

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.P, self.b, self.c, self.g, self.moments, self.tail_P, self.tail_b,
                                      self.tail_g))


def _rule(L: float, omega: float, refine: int, top: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(z, w, G_even, G_odd) of the folded trapezoidal rule sum_j w_j (F(z_j) + F(-z_j)) for E[F] on z_j = j h,
    j = 0..n: the node count of `dual_tables._half_grid` for the bandwidth ``omega`` (on its ladder, so nearby
    variances share a grid), the step halved ``refine`` times, and G[k, j] = w_j h_k(z_j), k = 0..top, split by
    the parity of k (`dual_tables._hermite_matrix`, cached there)."""
    n0 = dual_tables._half_grid(L, omega)[0]
    n, h = n0 << refine, L / n0 / (1 << refine)
    ge, go = dual_tables._hermite_matrix(n, h, top)
    return np.arange(n + 1) * h, ge[0], ge, go


def _rows(ge: np.ndarray, go: np.ndarray, ks) -> np.ndarray:
    """The rows k of G from its even and odd parts."""
    return np.stack([(go if k % 2 else ge)[k // 2] for k in ks])


def _coefficients(ge: np.ndarray, go: np.ndarray, plus: np.ndarray, minus: np.ndarray, top: int
                  ) -> tuple[np.ndarray, float]:
    """E[F h_k], k = 0..top, for F(+-z_j) = plus, minus on the folded rule (G's even and odd rows), and the
    coarse-rule error estimate (every second node, weights doubled; the difference is the leading aliasing term)."""
    ge, go = ge[:top // 2 + 1], go[:(top + 1) // 2]
    ev, od = plus + minus, plus - minus
    out = np.empty(top + 1)
    out[0::2] = ge @ ev
    out[1::2] = go @ od
    ev2, od2 = ev.copy(), od.copy()
    ev2[1::2] = od2[1::2] = 0.0
    coarse = np.empty(top + 1)
    coarse[0::2] = ge @ (2 * ev2)
    coarse[1::2] = go @ (2 * od2)
    return out, float(np.sqrt(np.sum((coarse - out) ** 2)))


#: Parseval's tails are known only to a few ulps of the total: each is floored there (as `dual_tables._tails`)
_FLOOR = 8 * float(np.finfo(float).eps)


def _tail(c: np.ndarray, total) -> np.ndarray:
    """sqrt(total - sum_(k' <= k) c_k'^2) along the first axis (Parseval's tail), floored at a few ulps of the
    total: below that the difference is round-off, and a tail taken as 0 would certify any truncation."""
    total = np.asarray(total, dtype=float)
    return np.sqrt(np.maximum(total - np.cumsum(c * c, axis=0), 0.0) + _FLOOR * np.abs(total))


def _coefficient_half_width(act: dual_tables.Activation, scale: float) -> float:
    """Half-width L of the grid of the Hermite coefficients of phi^q (q <= 3): w h_k = e^(-z^2/4) psi_k with
    |psi_k| = O(1) out to 2 sqrt(k), so the integrand at the cut is ~ e^(-L^2/4) |phi(scale L)|^3.  The smallest
    L >= L_HERMITE of a short ladder where that is below 1e-17 of E[phi^6]^(1/2) (bounded phi: 13; a cubic
    activation needs ~16)."""
    z = np.linspace(-8.0, 8.0, 161)
    norm = math.sqrt(float(np.mean(act.phi(scale * z) ** 6 * np.exp(-z * z / 2)) * 16 / _SQRT_2PI)) + 1e-300
    for L in (dual_tables.L_HERMITE, 16.0, 20.0, 24.0, 28.0, 32.0):
        edge = float(np.max(np.abs(act.phi(np.array([scale * L, -scale * L])))))
        if math.exp(-L * L / 4) * edge**3 <= 1e-17 * norm:
            return L
    return 32.0


def _build(act: dual_tables.Activation, d: float, degree: int) -> DiagonalTables:
    K, D = LADDER[-1], degree
    scale = math.sqrt(d)
    L_a = _coefficient_half_width(act, scale)
    for refine in range(3):
        # grid A: the coefficients of phi^q (q <= 3; k <= K + D for phi); E[phi^(2q)] on a plain rule of twice
        # the bandwidth (no Hermite rows)
        zA, _, ge_a, go_a = _rule(L_a, 3 * act.bandwidth * scale + math.sqrt(K + D + 0.5)
                                  + dual_tables.OMEGA_GAUSS, refine, K + D)
        pp, pm = act.phi(scale * zA), act.phi(-scale * zA)
        rows, errs = [], []
        for q in range(1, 4):
            coef, err = _coefficients(ge_a, go_a, pp ** q, pm ** q, K + D if q == 1 else K)
            rows.append(coef)
            errs.append(err)
        zM, wM = _rule(dual_tables.L_HERMITE, 6 * act.bandwidth * scale + dual_tables.OMEGA_GAUSS, refine, 0)[:2]
        mp, mm = act.phi(scale * zM), act.phi(-scale * zM)
        moments = np.array([float(wM @ (mp ** q + mm ** q)) for q in range(7)])
        norms = [math.sqrt(max(moments[2 * q], 1e-300)) for q in range(1, 4)]
        # grid B: P and E[phi^2 h_i^2], which carry h_i (i <= D) unweighted; P_mi takes the even part of phi
        # where m + i is even, the odd part where it is odd: four products by the parities of m and i
        omega_b = act.bandwidth * scale + math.sqrt(K + 0.5) + math.sqrt(D + 0.5) + dual_tables.OMEGA_GAUSS
        L_b = max(dual_tables.L_HERMITE, 2 * math.sqrt(D + 1) + _MARGIN_Z)
        zB, wB, ge_b, go_b = _rule(L_b, omega_b, refine, K)
        H = np.ascontiguousarray(fq.hermite_functions(zB, D).T)  # (D + 1, n + 1), unweighted
        qp, qm = act.phi(scale * zB), act.phi(-scale * zB)
        even, odd = qp + qm, qp - qm
        P = np.empty((K + 1, D + 1))
        for pm_, G in ((0, ge_b), (1, go_b)):
            for pi_ in (0, 1):
                part = even if pm_ == pi_ else odd
                P[pm_::2, pi_::2] = (G * part) @ H[pi_::2].T
        parity = (np.arange(K - 1, K + 1)[:, None] + np.arange(D + 1)[None, :]) % 2
        diag = (H * H) @ (wB * (qp * qp + qm * qm))  # E[phi^2 h_i^2]
        # the coarse rule on the highest rows of P (the largest bandwidth): their error estimate
        top_rows = _rows(ge_b, go_b, (K - 1, K))[:, ::2]
        coarse = np.where(parity == 0, (top_rows * even[::2]) @ H[:, ::2].T,
                          (top_rows * odd[::2]) @ H[:, ::2].T) * 2
        errs.append(float(np.max(np.abs(coarse - P[-2:]) / np.sqrt(np.maximum(diag, 1e-300)))))
        norms.append(1.0)
        if all(e <= TABLE_TOL * n for e, n in zip(errs, norms)):
            break
    trusted = all(e <= TABLE_TOL * n for e, n in zip(errs, norms))
    levels = np.array(LADDER)
    tail_P = np.ascontiguousarray(_tail(P, diag[None, :])[levels])  # (L, D + 1)
    b = rows[0]
    g = np.vstack([np.eye(1, K + 1)[0], b[:K + 1], rows[1], rows[2]])
    tail_g = np.vstack([np.zeros(len(levels))] + [_tail(g[q], moments[2 * q])[levels] for q in range(1, 4)])
    for arr in (P, b, g, moments, tail_P, tail_g):
        arr.setflags(write=False)
    c = rows[1][:D + 1].copy()
    tail_b = _tail(b, moments[2])
    c.setflags(write=False)
    tail_b.setflags(write=False)
    return DiagonalTables(P=P, b=b, c=c, g=g, moments=moments, tail_P=tail_P, tail_b=tail_b, tail_g=tail_g,
                          trusted=trusted)


#: the tables are built for at least this degree (the largest basis of a pair: 64 channels + 2), so the rungs of
#: the channel ladder share them
TABLE_DEGREE = 66


def _tables(act: dual_tables.Activation, d: float, degree: int) -> DiagonalTables:
    key = (act.key, float(d), max(int(degree), TABLE_DEGREE))
    hit = _TABLES.get(key)
    if hit is None:
        hit = _build(act, float(d), key[2])
        _TABLES.put(key, hit)
    return hit


def _widest_tails(tab: DiagonalTables, degree: int) -> np.ndarray:
    """(degree + 1, L): row j is the largest tail over i <= degree - j (the entries fhat_01[i, j] of the basis)."""
    widest = np.maximum.accumulate(tab.tail_P[:, :degree + 1], axis=1)
    return widest[:, ::-1].T


def _half_log_binomial_at(m, j):
    """log sqrt(C(m + j, m)) for (broadcast) arrays of m and j (floats)."""
    return 0.5 * (gammaln(m + j + 1) - gammaln(m + 1) - gammaln(j + 1))


@cache
def _half_log_binomial(degree: int) -> np.ndarray:
    """(K + 1, degree + 1): log sqrt(C(m + j, m)), m = 0..K."""
    out = _half_log_binomial_at(np.arange(LADDER[-1] + 1.0)[:, None], np.arange(degree + 1.0)[None, :])
    out.setflags(write=False)
    return out


class PairExpansion:
    """The pair projections of a smooth activation by certified Mehler sums (module docstring); pairs that no
    level of ``LADDER`` certifies go to `fluctuation_quadrature._pair_projection`.  ``used`` / ``fallback`` count
    the pairs of each route (for the benchmark)."""

    def __init__(self, act: dual_tables.Activation) -> None:
        self.act = act
        self.used = 0
        self.fallback = 0
        self._lock = threading.Lock()

    def __eq__(self, other) -> bool:  # the same activation gives the same sums (the counters are diagnostics)
        return isinstance(other, PairExpansion) and other.act.key == self.act.key

    def __hash__(self) -> int:
        return hash(("PairExpansion", self.act.key))

    def __repr__(self) -> str:
        return f"PairExpansion({self.act.expr})"

    def pair_projection(self, A: np.ndarray, phi, hb, radial: int, angular: int, diagonal=None):
        """Same result layout as `fluctuation_quadrature._pair_projection`: fhat (B, 2, 2, size), E[F F]
        (B, 2, 2, 2, 2).  ``diagonal`` (B, 2): the variances K_00, K_11 themselves (A A^T's diagonal agrees to
        round-off, which would make equal variances distinct tables)."""
        B, D = A.shape[0], hb.degree
        if diagonal is None:
            d0, d1 = A[:, 0, 0] ** 2, A[:, 1, 0] ** 2 + A[:, 1, 1] ** 2
        else:
            d0, d1 = diagonal[:, 0], diagonal[:, 1]
        # variances outside the tables' range (and non-finite ones) go to the rule
        usable = ((d0 >= VARIANCE_RANGE[0]) & (d0 <= VARIANCE_RANGE[1]) & (d1 >= VARIANCE_RANGE[0])
                  & (d1 <= VARIANCE_RANGE[1]))
        ok = np.zeros(B, dtype=bool)
        if np.any(usable):
            values, inverse = np.unique(np.concatenate([d0[usable], d1[usable]]), return_inverse=True)
            tabs = [_tables(self.act, v, D) for v in values]
            n_use = int(np.count_nonzero(usable))
            i0 = np.zeros(B, dtype=np.int64)
            i1 = np.zeros(B, dtype=np.int64)
            i0[usable], i1[usable] = inverse[:n_use], inverse[n_use:]
            root1 = np.sqrt(np.where(usable, d1, 1.0))
            r = np.where(usable, A[:, 1, 0] / root1, 0.0)
            s = np.where(usable, A[:, 1, 1] / root1, 1.0)
            level = np.full(B, len(LADDER))
            level[usable] = self._levels(tabs, i0[usable], i1[usable], r[usable], s[usable], D)
            ok = level < len(LADDER)
        fhat = np.empty((B, 2, 2, hb.size))
        EFF = np.empty((B, 2, 2, 2, 2))
        if np.any(ok):
            f, e = self._sums(tabs, i0[ok], i1[ok], r[ok], s[ok], level[ok], hb)
            fhat[ok], EFF[ok] = f, e
        if not np.all(ok):
            bad = ~ok
            f, e = fq._pair_projection(A[bad], phi, hb, radial, angular)
            fhat[bad], EFF[bad] = f, e
        with self._lock:
            self.used += int(np.count_nonzero(ok))
            self.fallback += int(np.count_nonzero(~ok))
        return fhat, EFF

    @staticmethod
    def _levels(tabs, i0, i1, r, s, D: int) -> np.ndarray:
        """Per pair, the index in LADDER of the first certified level (len(LADDER) where none is)."""
        levels = np.array(LADDER)
        n_l = len(levels)
        tail_P = np.stack([_widest_tails(t, D) for t in tabs])[i0]  # (B, D + 1, L)
        tail_b = np.stack([t.tail_b for t in tabs])[i1]  # (B, K + D + 1)
        j = np.arange(D + 1)
        tb = tail_b[:, levels[None, :] + j[:, None]]  # (B, D + 1, L): sqrt(sum_(k > K + j) b_k^2)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_r = np.log(np.abs(r))[:, None, None]
            log_s = np.log(s)[:, None, None]
            r2 = (r * r)[:, None, None]
            mode = ((j[None, :, None] + 1) * r2 - 1) / np.maximum(1 - r2, 1e-300)  # w_j(m) grows below it
            best = np.full(tb.shape, -np.inf)
            for cand in (levels[None, None, :] + 1.0, np.floor(mode), np.ceil(mode)):
                m = np.maximum(cand, levels[None, None, :] + 1.0)  # the sup is over m > K
                m = np.minimum(m, 1e15)
                lw = (_half_log_binomial_at(m, j[None, :, None] + 0.0) + np.where(m > 0, m * log_r, 0.0)
                      + j[None, :, None] * log_s)
                best = np.maximum(best, np.nan_to_num(lw, nan=np.inf, neginf=-np.inf))
            bound = np.max(tail_P * np.exp(best) * tb, axis=1)  # (B, L)
            moments = np.stack([t.moments for t in tabs])  # (T, 7): E[phi^q]
            scale = np.sqrt(moments[i0, 2] * moments[i1, 2])
            tail_g = np.stack([t.tail_g for t in tabs])  # (T, 4, L)
            fourth = np.maximum.reduce([tail_g[i0, 4 - q] * tail_g[i1, q] for q in (1, 2, 3)])  # (B, L)
            fourth = fourth * np.abs(r)[:, None] ** (levels[None, :] + 1.0)
            scale4 = np.sqrt(moments[i0, 4] * moments[i1, 4])
        good = (bound <= TOL * scale[:, None]) & (fourth <= TOL * scale4[:, None])
        trusted = np.array([t.trusted for t in tabs])
        good &= (trusted[i0] & trusted[i1])[:, None]
        return np.where(good.any(axis=1), np.argmax(good, axis=1), n_l)

    @staticmethod
    def _sums(tabs, i0, i1, r, s, level, hb):
        """The projections and fourth moments of certified pairs (grouped by their first input's tables: one
        (K + 1) x (D + 1) x n (D + 1) product per group)."""
        B, D = r.size, hb.degree
        K = np.array(LADDER)[level]  # (B,)
        F01 = np.empty((B, D + 1, D + 1))
        LC = _half_log_binomial(D)
        sign = np.where(r < 0, -1.0, 1.0)
        with np.errstate(divide="ignore"):
            log_r, log_s = np.log(np.abs(r)), np.log(s)
        log_r = np.where(r == 0.0, -np.inf, log_r)
        btab = np.stack([t.b for t in tabs])  # (T, K + D + 1)
        for t0 in np.unique(i0):
            for lv in np.unique(level[i0 == t0]):
                sel = np.nonzero((i0 == t0) & (level == lv))[0]
                top = LADDER[lv]
                V = _weighted_coefficients(btab, i1[sel], r[sel], s[sel], _rotation_steps(top, D))  # (top+1, b, D+1)
                F01[sel] = (tabs[t0].P[:top + 1, :D + 1].T @ V.reshape(top + 1, -1)).reshape(D + 1, sel.size, D + 1
                                                                                      ).transpose(1, 0, 2)
        a0, a1 = hb.alphas[:, 0], hb.alphas[:, 1]
        c0 = np.stack([tabs[t].c for t in i0])  # (B, D + 1)
        c1 = np.stack([tabs[t].c for t in i1])
        fhat = np.empty((B, 2, 2, hb.size))
        fhat[:, 0, 0] = np.where(a1[None, :] == 0, c0[:, a0], 0.0)
        fhat[:, 0, 1] = fhat[:, 1, 0] = F01[:, a0, a1]
        with np.errstate(divide="ignore", invalid="ignore"):
            pw = (np.exp(LC[a0, a1][None, :] + np.where(a0 > 0, a0 * log_r[:, None], 0.0)
                         + np.where(a1 > 0, a1 * log_s[:, None], 0.0)) * sign[:, None] ** a0)
        fhat[:, 1, 1] = pw * c1[:, a0 + a1]
        # fourth moments: E[phi0^(4-q) phi1^q], the k-sum to each pair's level
        g0 = np.stack([tabs[t].g for t in i0])  # (B, 4, K + 1)
        g1 = np.stack([tabs[t].g for t in i1])
        k = np.arange(LADDER[-1] + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            rk = np.where(k[None, :] > 0, np.exp(k[None, :] * log_r[:, None]), 1.0) * sign[:, None] ** k
        rk[k[None, :] > K[:, None]] = 0.0
        mom = np.empty((B, 5))
        mom[:, 0] = [tabs[t].moments[4] for t in i0]
        mom[:, 4] = [tabs[t].moments[4] for t in i1]
        for q in (1, 2, 3):
            mom[:, q] = np.sum(rk * g0[:, 4 - q] * g1[:, q], axis=1)
        count = np.array([0, 1, 1, 2])
        EFF = mom[:, count[:, None] + count[None, :]].reshape(B, 2, 2, 2, 2)
        return fhat, EFF


@cache
def _rotation_steps(top: int, degree: int) -> np.ndarray:
    """(top + 1, degree + 1): the generated step w_(j+1)(m) / w_j(m) of the Mehler weights at s = 1
    (`fluctuation_step.rotation_step`, derived from the rotation formula)."""
    m = np.arange(top + 1.0)[:, None]
    j = np.arange(degree + 1.0)[None, :]
    out = np.ascontiguousarray(np.broadcast_to(step.rotation_step(m, j, 1.0), (top + 1, degree + 1)), dtype=float)
    out.setflags(write=False)
    return out


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _weighted_coefficients(btab: np.ndarray, rows: np.ndarray, r: np.ndarray, s: np.ndarray, steps: np.ndarray
                           ) -> np.ndarray:  # pragma: no cover - compiled
    """V[m, b, j] = w_j(m) b_(m+j) for m = 0..top, j = 0..degree (``steps`` is (top + 1, degree + 1)), with
    w_j(m) = sqrt(C(m + j, m)) r^m s^j of pair b and b_k the row ``rows[b]`` of ``btab``: laid out (m, pair, j) for
    one product with P^T.  Along j by w_(j+1)(m) = w_j(m) s steps[m, j] from w_0(m) = r^m (the generated step of
    the rotation formula; a product that underflows is below 1e-220 of the scale)."""
    top, degree = steps.shape[0] - 1, steps.shape[1] - 1
    nb = rows.size
    V = np.empty((top + 1, nb, degree + 1))
    for b in range(nb):
        bt = btab[rows[b]]
        rm = 1.0
        for m in range(top + 1):
            w = rm
            for j in range(degree + 1):
                V[m, b, j] = w * bt[m + j]
                w *= s[b] * steps[m, j]
            rm *= r[b]
    return V
