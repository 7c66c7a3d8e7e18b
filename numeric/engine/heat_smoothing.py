"""Dual kernels near |rho| = 1 at large variance: windowed Mehler series of the heat-smoothed activation.

For (u, v) centred Gaussian with variances d_a, d_b and correlation rho >= 0, split the correlation at
rho0 = 1 - Delta (a window):

    u = sqrt(d_a rho0) w + sqrt(d_a Delta) a,     v = sqrt(d_b rho0) w + sqrt(d_b Delta) b,

w ~ N(0, 1) independent of (a, b), corr(a, b) = r, so that rho = rho0 + Delta r.  Given w, (a, b) is a standard
pair with correlation r and Mehler's formula gives

    f(rho) = E[phi(u) phi(v)] = sum_k C_k r^k,     C_k = E_w[b_k(x_a) b_k(x_b)],
    b_k(x) = E_z[phi(x + sigma z) h_k(z)]        (x_a = sqrt(d_a rho0) w, sigma_a = sqrt(d_a Delta); h_k the
                                                  normalised Hermite polynomials, as in `dual_tables`)

and likewise g with phi'.  For rho <= 0 the second factor uses phi(-x_b + sigma_b z)
(v = -sqrt(d_b rho0) w + sqrt(d_b Delta) b, corr(a, b) = -r), rho = -(rho0 + Delta r), and C_k gets the factor
(-1)^k.  b_0(x) = H(x, sigma^2) is the heat (Gaussian) smoothing of phi; the b_k are its Hermite coefficients in
the remaining variance sigma^2 = d Delta.  Parseval per x gives sum_k E_w[b_k(x_a)^2] = E[phi(u)^2]
= A^2, so the tail after K terms is bounded for |r| <= r_max by

    |f - f_K| <= r_max^(K+1) sqrt(T_a T_b),     T_a = A^2 - sum_{k<=K} E_w[b_k(x_a)^2]     (the same bound (*) as
                                                                                        the full series)

The point: the coefficients decay with the smoothness of phi(x + sigma z) in z, i.e. with sigma^2 = d Delta, not
with d.  A window with r_max = 3/4 needs K ~ 100 terms whatever d is; the window of the last Delta (r up to 1, i.e.
|rho| up to 1) needs d Delta small (tanh: <~ 0.5 for K = 128).  `windows` lays windows Delta_j = Delta_0 4^-j from
the edge 1 - rho_s of the certified full series down to that last one: log_4(d Delta_0) windows, each a matrix
product (n_x x n_z) @ (n_z x K) with n_x ~ 300-700 nodes of the graded Gauss--Legendre rule of
`resprop.generated.gauss_hermite` in x (the Gaussian's scale sqrt(d rho0) and the activation's features at 0,
any variance) and n_z ~ 100-500 nodes of the trapezoidal rule in z (`dual_tables._hermite_matrix`, bandwidth
Omega sigma + sqrt(K) + 8 as for the Hermite coefficients; error estimate from the interleaved coarse rule).

Checks: neighbouring windows overlap (window j at r = r_max is window j + 1 at r = 0), and the first window at
r = 0 is the full series at rho_s: the largest disagreement (relative to the scales) is returned and enters the
table's error bound; an activation the outer rule does not resolve (oscillating at large |x|, e.g. sin^2 at large
d) shows up there and the table is refused (`dual_tables.build_table`).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

Array = np.ndarray

#: r_max of the inner windows (each covers 1 - |rho| in [Delta (1 - R_WINDOW), Delta])
R_WINDOW = 0.75
#: terms per window
K_WINDOW = 128
#: at most this many windows per side
MAX_WINDOWS = 40
#: Gauss--Legendre points per panel of the outer rule (`gauss_hermite.rule`); tables with 12 and with 16 points
#: agree to <= 3e-15 (tanh, atan, SiLU at d = 30 .. 3000), with 8 they differ by up to 5e-11
OUTER_ORDER = 12


@dataclass(frozen=True)
class Window:
    """f = sum cf_k r^k and g = sum cg_k r^k for 1 - |rho| = Delta (1 - r), r in [0, r_max], on one side."""

    delta: float
    sign: int
    r_max: float
    cf: Array
    cg: Array
    err: float          # relative: tail bound at r_max + quadrature estimate (max of f and g)


def _coefficients(act, x: Array, sigma: float, K: int) -> tuple[Array, Array, Array, Array]:
    """b_k(x_i) = E_z[phi(x_i + sigma z) h_k(z)] (rows i, columns k = 0..K) for phi and phi', and the coarse-rule
    versions' differences (for the quadrature estimate) stacked as (fine_phi, fine_dphi, diff_phi, diff_dphi)."""
    from resprop.numeric.engine.dual_tables import L_HERMITE, _half_grid

    n, h = _half_grid(L_HERMITE, act.bandwidth * sigma + math.sqrt(K + 0.5) + 8.0)
    ge0, ge1, go0, go1 = _split_hermite(n, h, K)
    z = np.arange(n + 1) * h * sigma
    out = []
    for fn in (act.phi, act.dphi):
        p = fn(x[:, None] + z[None, :])
        m = fn(x[:, None] - z[None, :])
        ev, od = p + m, p - m
        b = np.empty((x.size, K + 1))
        e = np.empty((x.size, K + 1))
        # fine rule = even nodes + odd nodes; the coarse rule (even nodes, weights doubled) differs by even - odd
        for cols, mat, g0, g1 in ((slice(0, None, 2), ev, ge0, ge1), (slice(1, None, 2), od, go0, go1)):
            lo, hi = mat[:, 0::2] @ g0, mat[:, 1::2] @ g1
            b[:, cols] = lo + hi
            e[:, cols] = lo - hi
        out.append((b, e))
    return out[0][0], out[1][0], out[0][1], out[1][1]


@functools.lru_cache(maxsize=24)
def _split_hermite(n: int, h: float, K: int) -> tuple[Array, Array, Array, Array]:
    """`dual_tables._hermite_matrix` transposed and split into its even and odd nodes (contiguous)."""
    from resprop.numeric.engine.dual_tables import _hermite_matrix

    ge, go = _hermite_matrix(n, h, K)
    return tuple(np.ascontiguousarray(g[:, j::2].T) for g in (ge, go) for j in (0, 1))  # type: ignore[return-value]


def window(act, d_a: float, d_b: float, delta: float, moments: tuple[float, float, float, float],
           K: int | None = None) -> tuple[dict[int, tuple[Array, Array, float, float]], Array, Array]:
    """For the window rho0 = 1 - delta: per side (+1, -1) the coefficients C_k of f and g and the quadrature
    estimates (relative), and the tails sqrt(T_a T_b) / scale of f and g for every truncation K (the same on both
    sides: the outer rule is symmetric, so E_w[b_k(-x)^2] = E_w[b_k(x)^2])."""
    from resprop.generated.gauss_hermite import Z_MAX, levels, rule

    K = K_WINDOW if K is None else K
    A2, B2, Ap2, Bp2 = moments
    rho0 = 1.0 - delta
    d_max = max(d_a, d_b)
    s_max = math.sqrt(d_max * rho0)
    J = int(levels(np.array([Z_MAX * s_max]))[0])
    xm, wm = rule(np.zeros(1), np.array([s_max]), J, OUTER_ORDER)
    xm, w = xm[0], wm[0]                       # symmetric: xm[::-1] == -xm exactly
    xa = xm * math.sqrt(d_a / d_max)
    ba, bga, ea, ega = _coefficients(act, xa, math.sqrt(d_a * delta), K)
    if d_a == d_b:
        bb, bgb, eb, egb = ba, bga, ea, ega
    else:
        bb, bgb, eb, egb = _coefficients(act, xm * math.sqrt(d_b / d_max), math.sqrt(d_b * delta), K)
    scale_f, scale_g = math.sqrt(A2 * B2), math.sqrt(Ap2 * Bp2)
    sides = {}
    # rho = -(rho0 + delta r) on the negative side: v = -x_b + sigma_b b with corr(a, b) = -r, i.e. the b side's
    # rows reversed and the factor (-1)^k
    for sign, rev, alt in ((1, slice(None), 1.0), (-1, slice(None, None, -1), (-1.0) ** np.arange(K + 1))):
        b2, bg2, e2, eg2 = bb[rev], bgb[rev], eb[rev], egb[rev]
        cf = alt * (w @ (ba * b2))
        cg = alt * (w @ (bga * bg2))
        # quadrature: the coarse inner rule's change of every C_k, summed (|r| <= 1)
        qf = float(np.sum(np.abs(w @ (ea * b2 + ba * e2)))) / scale_f
        qg = float(np.sum(np.abs(w @ (ega * bg2 + bga * eg2)))) / scale_g
        sides[sign] = (cf, cg, qf, qg)
    sfa, sfb = np.cumsum(w @ (ba * ba)), np.cumsum(w @ (bb * bb))
    sga, sgb = np.cumsum(w @ (bga * bga)), np.cumsum(w @ (bgb * bgb))
    floor = 8 * 2.2e-16
    tf = np.sqrt(np.maximum(A2 - sfa, floor * A2) * np.maximum(B2 - sfb, floor * B2)) / scale_f
    tg = np.sqrt(np.maximum(Ap2 - sga, floor * Ap2) * np.maximum(Bp2 - sgb, floor * Bp2)) / scale_g
    return sides, tf, tg


def windows(act, d_a: float, d_b: float, delta0: float, moments: tuple[float, float, float, float], tol: float
            ) -> list[Window]:
    """Windows covering 0 <= 1 - |rho| <= delta0 on both sides (see the module docstring), certified to ``tol``
    (relative) by the tail bound; an empty list if MAX_WINDOWS do not reach |rho| = 1."""
    out: list[Window] = []
    delta = delta0
    for _ in range(MAX_WINDOWS):
        for K in (K_WINDOW, 4 * K_WINDOW):  # the longer series only if K_WINDOW terms do not certify r_max
            sides, tf, tg = window(act, d_a, d_b, delta, moments, K)
            # r up to 1 (the last window) if the tail allows it, else r up to R_WINDOW
            last = np.nonzero((tf <= tol) & (tg <= tol))[0]
            pw = R_WINDOW ** (np.arange(K + 1) + 1.0)
            ok = np.nonzero((pw * tf <= tol) & (pw * tg <= tol))[0]
            if last.size or ok.size:
                break
        else:
            return []
        if last.size:
            kc, r_max, tail = int(last[0]), 1.0, max(tf[last[0]], tg[last[0]])
        else:
            kc, r_max = int(ok[0]), R_WINDOW
            tail = max(pw[kc] * tf[kc], pw[kc] * tg[kc])
        for sign, (cf, cg, qf, qg) in sides.items():
            out.append(Window(delta, sign, r_max, cf[:kc + 1], cg[:kc + 1], tail + max(qf, qg)))
        if r_max >= 1.0:
            return sorted(out, key=lambda w: (-w.sign, -w.delta))
        delta *= 1.0 - R_WINDOW
    return []


def evaluate(wins: list[Window], rho: Array) -> tuple[Array, Array, Array]:
    """f, g at the elements of rho covered by the windows (|rho| >= 1 - delta0), and a mask of those covered."""
    rho = np.asarray(rho, dtype=float)
    f = np.full(rho.shape, np.nan)
    g = np.full(rho.shape, np.nan)
    done = np.zeros(rho.shape, dtype=bool)
    dist = 1.0 - np.abs(rho)
    for win in wins:
        side = (rho > 0) if win.sign == 1 else (rho < 0)
        lo = win.delta * (1.0 - win.r_max)
        sel = side & ~done & (dist <= win.delta) & (dist >= lo)
        if not sel.any():
            continue
        r = 1.0 - dist[sel] / win.delta
        f[sel] = np.polynomial.polynomial.polyval(r, win.cf)
        g[sel] = np.polynomial.polynomial.polyval(r, win.cg)
        done |= sel
    return f, g, done


def overlap_error(wins: list[Window], scale: tuple[float, float]) -> float:
    """Largest disagreement (relative) of neighbouring windows where both are certified (window j at r_max is
    window j + 1 at r = 0)."""
    worst = 0.0
    P = np.polynomial.polynomial.polyval
    for a, b in zip(wins[:-1], wins[1:]):
        if a.sign != b.sign or a.r_max >= 1.0:
            continue
        worst = max(worst, abs(P(a.r_max, a.cf) - b.cf[0]) / scale[0], abs(P(a.r_max, a.cg) - b.cg[0]) / scale[1])
    return worst
