"""Tables of E[phi(u) phi(v)] for equal variances d > D_MIN = 5, interpolated across the variance.

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
measured difference.  Anchors and window checks are kept in the per-machine cache (`disk_cache`, keyed by the
activation, the variance, the sha256 of the source that computes them and the library versions), so a new
process does not build them again.  Measured (tests/test_table_family.py) against direct tables and mpmath, for
tanh, SiLU, softplus and atan at d = 21 .. 4000: the value difference from a direct table is <= 7e-13 of the scale
(f) and <= 1e-12 (g) with 10 points at 4 per octave; 8 points give 3e-11, 6 give 2e-9.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from resprop.numeric.engine import disk_cache
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


_SCALARS = ("scale_f", "scale_g", "tail_f", "tail_g", "quad_f", "quad_g", "rho_s")
_ARRAYS = ("ser_cf", "ser_cg", "cf", "cg", "scalars")


def _cache_key(key: str, j: int | float, rtol: float) -> dict:
    import sympy

    return {"activation": key, "at": j, "rtol": rtol, "M": M_ANCHOR, "per_octave": ANCHORS_PER_OCTAVE,
            "d0": D_ANCHOR0, "sympy": sympy.__version__,
            "source": disk_cache.source_hash("resprop.numeric.engine.dual_tables",
                                             "resprop.numeric.engine.heat_smoothing",
                                             "resprop.numeric.engine.table_family",
                                             "resprop.generated.gauss_hermite")}


@functools.lru_cache(maxsize=128)
def _anchor(key: str, j: int, rtol: float) -> _Anchor:
    """Anchor j: from the per-machine cache (`disk_cache`) when it holds it, else built and kept there."""
    ck = _cache_key(key, j, rtol)
    hit = disk_cache.load("table-anchors", ck, _ARRAYS)
    if hit is not None and hit["scalars"].shape == (len(_SCALARS) + 6,):
        sc = hit["scalars"].tolist()
        m = sc[len(_SCALARS):len(_SCALARS) + 4]
        ser = dt._Series(cf=hit["ser_cf"], cg=hit["ser_cg"], **dict(zip(_SCALARS, sc[:len(_SCALARS)])),
                         moments=(m[0], m[1], m[2], m[3]))
        return _Anchor(ser, hit["cf"], hit["cg"], sc[-2], sc[-1])
    a = _parts(key, _anchor_d(j), rtol)
    ser = a.ser
    scalars = np.array([getattr(ser, n) for n in _SCALARS] + list(ser.moments) + [a.err_f, a.err_g], dtype=float)
    disk_cache.store("table-anchors", ck, {"ser_cf": ser.cf, "ser_cg": ser.cg, "cf": a.cf, "cg": a.cg,
                                           "scalars": scalars})
    return a


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
    """The interpolant at the midpoint of window j0 against a table built there (relative to the scales); kept in
    the per-machine cache like the anchors."""
    ck = _cache_key(key, j0 + 0.5, rtol) | {"points": POINTS}
    hit = disk_cache.load("table-windows", ck, ("error",))
    if hit is not None and hit["error"].shape == ():
        return float(hit["error"])
    err = _measure_window(key, j0, rtol)
    disk_cache.store("table-windows", ck, {"error": np.array(err)})
    return err


def _measure_window(key: str, j0: int, rtol: float) -> float:
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


#: the smallest variance whose table is interpolated: below ~5 the window checks of SiLU reach 2-4e-11 (> rtol/4)
#: and direct tables cost only ~3-10 ms
D_MIN = 5.0


def applies(d: float) -> bool:
    """Whether an equal-variance table at d is interpolated (D_MIN < d <= D_TABLE_MAX)."""
    return D_MIN < d <= dt.D_TABLE_MAX


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
