"""Tables of E[phi(u) phi(v)] for equal variances d > D_SERIES, interpolated across the variance.

A deep network with ``branch_scale = 1`` grows the variance every layer, so the kernel engine needs one table per
layer at a new d (tanh at L = 200: d from ~1 to ~200). At large d, a table costs 20-60 ms
(`dual_tables`: the series, the heat-smoothing windows near |rho| = 1, the fit on M graded intervals). Consecutive
layers differ little in d, however, and a table built on intervals uniform in the graded variable
s = log((eps + theta) / (eps + pi - theta)), eps = 1/sqrt(d), has cubic coefficients that are smooth functions of
log d at a fixed interval. The boundary layers at theta = 0 and pi scale with eps, and so does the grading.

So tables are built once, on the anchor grid d_j = D_SERIES 2^(j / ANCHORS_PER_OCTAVE), all on M_ANCHOR intervals,
and cached. The table at any d is the barycentric interpolant, in log d, of the POINTS anchors around it:
coefficients normalised by sqrt(E phi(u)^2 E phi(v)^2), resp. with phi', times the layer's own scale. A table's
result depends only on its d, never on which other layers or blocks a run has.

The check that can fail: the first time a window (between anchors j0 and j0 + 1) is used, the interpolant at its
midpoint is compared with a table built directly there, on a grid of 4,801 correlations (uniform, plus the last
1e-12 .. 1e-1 at both ends). When they differ by more than rtol / 4 of the scale, the window's layers get direct
tables instead. An interpolated table's error bound is the largest bound of its anchors plus twice the window's
measured difference. Measured (tests/test_table_family.py) against direct tables and mpmath, for tanh, SiLU,
softplus and atan at d = 21 .. 4000: the value difference from a direct table is <= 7e-13 of the scale (f) and
<= 1e-12 (g) with 10 points at 4 per octave; 8 points give 3e-11, 6 give 2e-9.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from resprop.numeric.engine import dual_tables as dt

ANCHORS_PER_OCTAVE = 4
POINTS = 10
M_ANCHOR = 2048
D_ANCHOR0 = dt.D_SERIES
#: correlations of the window check: uniform, and the boundary layers 1 - |rho| in 1e-12 .. 1e-1
_CHECK_RHO = np.concatenate([np.linspace(-1.0, 1.0, 4001), 1 - np.logspace(-12, -1, 400),
                             -1 + np.logspace(-12, -1, 400)])


@dataclasses.dataclass(frozen=True)
class _Anchor:
    ser: dt._Series
    cf: np.ndarray      # cubic coefficients of f / scale_f, (M_ANCHOR + 1, DEGREE + 1)
    cg: np.ndarray
    err_f: float
    err_g: float


def _anchor_d(j: int) -> float:
    return D_ANCHOR0 * 2.0 ** (j / ANCHORS_PER_OCTAVE)


@functools.lru_cache(maxsize=128)
def _anchor(key: str, j: int, rtol: float) -> _Anchor:
    return _parts(key, _anchor_d(j), rtol)


def _parts(key: str, d: float, rtol: float) -> _Anchor:
    act = dt._activation(key)
    ser, cf, cg, err_f, err_g = dt.large_variance_parts(act, d, M_ANCHOR, rtol)
    return _Anchor(ser, cf / ser.scale_f, cg / ser.scale_g, err_f, err_g)


def _weights(x: float, js: np.ndarray) -> np.ndarray:
    """Barycentric weights of the equispaced nodes js (in units of the anchor step) at x."""
    n = js.size
    w = np.array([(-1.0) ** i * math.comb(n - 1, i) for i in range(n)])
    diff = x - js
    if np.any(diff == 0):
        return (diff == 0).astype(float)
    c = w / diff
    return c / c.sum()


def _window(x: float) -> np.ndarray:
    j0 = math.floor(x)
    return np.arange(j0 - POINTS // 2 + 1, j0 + POINTS // 2 + 1)


def _combine(key: str, x: float, rtol: float) -> tuple[np.ndarray, np.ndarray, float, float, _Anchor]:
    js = _window(x)
    anchors = [_anchor(key, int(j), rtol) for j in js]
    c = _weights(x, js.astype(float))
    cf = sum(ci * a.cf for ci, a in zip(c, anchors))
    cg = sum(ci * a.cg for ci, a in zip(c, anchors))
    nearest = anchors[int(np.argmax(np.abs(c)))]
    return cf, cg, max(a.err_f for a in anchors), max(a.err_g for a in anchors), nearest


@functools.lru_cache(maxsize=256)
def _window_error(key: str, j0: int, rtol: float) -> float:
    """The interpolant at the midpoint of window j0 against a table built there (relative to the scales)."""
    act = dt._activation(key)
    x = j0 + 0.5
    d = _anchor_d(0) * 2.0 ** (x / ANCHORS_PER_OCTAVE)
    cf, cg, _, _, _ = _combine(key, x, rtol)
    direct = _parts(key, d, rtol)
    eps = 1.0 / math.sqrt(d)
    ser = direct.ser
    t_i = dt.DualTable(act, d, d, ser, cf * ser.scale_f, cg * ser.scale_g, 0.0, 0.0, eps)
    t_d = dt.DualTable(act, d, d, ser, direct.cf * ser.scale_f, direct.cg * ser.scale_g, 0.0, 0.0, eps)
    fi, gi = t_i.both(_CHECK_RHO)
    fd, gd = t_d.both(_CHECK_RHO)
    return max(float(np.max(np.abs(fi - fd))) / ser.scale_f, float(np.max(np.abs(gi - gd))) / ser.scale_g)


def applies(d: float) -> bool:
    """Whether an equal-variance table at d is interpolated (D_SERIES < d <= D_TABLE_MAX)."""
    return dt.D_SERIES < d <= dt.D_TABLE_MAX


def prepare(expr, ds, rtol: float = 1e-10, pool=None) -> None:
    """Build (and cache) the anchors and window checks that the tables at the variances ``ds`` need, each once,
    in parallel on ``pool`` (a concurrent.futures executor) if given: layers built in parallel would otherwise
    compute a shared anchor twice."""
    key = dt.activation(expr).key
    xs = [ANCHORS_PER_OCTAVE * math.log2(float(d) / D_ANCHOR0) for d in ds if applies(float(d))]
    if not xs:
        return
    windows = sorted({math.floor(x) for x in xs})
    anchors = sorted({int(j) for x in xs for j in _window(x)} | {int(j) for j0 in windows for j in _window(j0 + 0.5)})
    rtol = float(rtol)
    run = pool.map if pool is not None else map
    list(run(lambda j: _anchor(key, j, rtol), anchors))
    list(run(lambda j0: _window_error(key, j0, rtol), windows))


def table(expr, d: float, rtol: float = 1e-10) -> dt.DualTable:
    """The table of the equal pair (d, d): interpolated from the anchors when ``applies(d)`` and the window checks,
    else `dual_tables.build_table`."""
    act = dt.activation(expr)
    d = float(d)
    if not applies(d):
        return dt.build_table(act.expr, d, d, rtol)
    x = ANCHORS_PER_OCTAVE * math.log2(d / D_ANCHOR0)
    j0 = math.floor(x)
    window_err = _window_error(act.key, j0, float(rtol))
    if not window_err <= rtol / 4:
        return dt.build_table(act.expr, d, d, rtol)
    cf, cg, err_f, err_g, nearest = _combine(act.key, x, float(rtol))
    m_phi, m_dphi = dt.diagonal(act.expr, d)
    scale_f, scale_g = float(m_phi), float(m_dphi)
    ser = dataclasses.replace(nearest.ser, scale_f=scale_f, scale_g=scale_g)
    return dt.DualTable(act, d, d, ser, cf * scale_f, cg * scale_g, err_f + 2 * window_err,
                        err_g + 2 * window_err, 1.0 / math.sqrt(d))


__all__ = ["table", "prepare", "applies", "ANCHORS_PER_OCTAVE", "POINTS", "M_ANCHOR"]
