"""The general path's certified Mehler series, compiled (Numba): the same arithmetic as
`dual_tables._series_rho` / `dual_tables._horner`, one pass per element instead of ~10 NumPy passes, gathers and a
sort.

For an element with diagonal indices (a, b) and correlation r, the series

    p = sum_{k <= K_e} c_k(a) c_k(b) r^k,        q = dp/dr

is summed by Horner from k = K_e down, where K_e is the smallest level of the ladder ``levels`` certified by the
tail bound (*) of `dual_tables` for f and g:

    (K + 1) log|r| + logtail_f[a] + logtail_f[b] <= log tol  and  K log|r| + logtail_g[a] + logtail_g[b] <= log tol.

The series itself is the generated `mehler_row` (`resprop.generated.residual_compiled`, from
templates/compiled_module.py.j2): a row's elements are sorted by level and summed in groups of one level, so each
element's result is bit for bit the one of the NumPy path (no ``fastmath``: LLVM does not contract or reorder the
float operations), whatever the grouping (``GROUP`` here).  Elements no ladder level certifies get level
``len(levels)`` and are left to the caller (the pair quadrature), NaN correlations give NaN.  The kernel engine's
fused general-path kernels (`tabulated_*_series_run`) call the same `mehler_row` with the update inside; this module
serves `dual_tables.mean_phi_phi_strip` and `mean_phi_phi_general`.

The functions are compiled on first use (``cache=True``: once per machine, in Numba's cache directory) and release
the GIL, so the kernel engine's strip threads run them in parallel.  `available()` says whether Numba imports;
without it `dual_tables` uses the NumPy path (the reference; tests/test_mehler_compiled.py compares the two).
"""
from __future__ import annotations

import math
from types import ModuleType

import numpy as np

numba: ModuleType | None
try:  # optional at run time: the NumPy path is the reference and the fallback
    import numba

    from resprop.generated.residual_compiled import mehler_buffers, mehler_row, mehler_thresholds
except ImportError:  # pragma: no cover - exercised only where numba is not installed
    numba = None

#: elements summed together (the largest K_e of the group is used for all of them); results do not depend on it
GROUP = 64


def available() -> bool:
    """True when the compiled series can run (Numba imports)."""
    return numba is not None


def _series_strip_py(coefT, logtail_f, logtail_g, levels, ltol, ia, ib, rho, sa, want_g, out_f, out_g, level,
                     group):
    """f (into out_f) and g = q / (sa[a] sa[b]) (into out_g) on an (h, n) block rho, rows with diagonal indices
    ia, columns ib; ``level``: (h, n) int8 output, len(levels) where no level certifies the element (out_f/out_g
    untouched there), len(levels) + 1 for NaN.  Row by row through the generated `mehler_row` (the one
    implementation of the series, `resprop.generated.residual_compiled`; the kernel engine's fused general-path
    kernels call it too)."""
    h, n = rho.shape
    nl = levels.shape[0]
    thr = mehler_thresholds(logtail_f, logtail_g, levels)
    rr, pf, pg, lev, order, scratch, count, start, grp, grp_b = mehler_buffers(n, nl, group)
    for i in range(h):
        for j in range(n):
            rr[j] = rho[i, j]
        mehler_row(coefT, logtail_f, logtail_g, levels, ltol, thr, ia[i], ib, rr, n, want_g, sa, pf, pg, lev, order,
                   scratch, count, start, grp, grp_b)
        for j in range(n):
            t = lev[j]
            level[i, j] = t
            if t < nl:
                out_f[i, j] = pf[j]
                if want_g:
                    out_g[i, j] = pg[j]
    return 0


def _tails_py(coefT, m_phi, m_dphi, values, slack_f, slack_g, eps8, cols, worst, lf, lg):
    """The relative tails of `dual_tables._relative_tails` value by value (the same operations in the same order:
    the same bits), without the (K + 1) x n arrays: their maximum over the values per k into ``worst`` (k = 0 from
    f only; k >= 1 the larger of f's and g's) and 0.5 log of them at the rows ``cols`` into lf, lg (if cols is
    not empty; the log taken by the caller, in NumPy, whose log may differ from libm's by an ulp)."""
    K1, n = coefT.shape
    nc = cols.shape[0]
    rf_row = np.empty(K1)
    rg_row = np.empty(K1)
    for v in range(n):
        mf = m_phi[v]
        mg = m_dphi[v] * values[v]
        df = max(m_phi[v], 1e-300)
        dg = max(mg, 1e-300)
        sf = 0.0
        sg = 0.0
        for k in range(K1):
            c = coefT[k, v]
            sf += c * c
            r = max(mf - sf, 0.0)
            r += eps8 * mf
            r /= df
            r += slack_f[v]
            rf_row[k] = r
            if r > worst[k]:
                worst[k] = r
            if k >= 1:
                sg += (c * c) * k
                r = max(mg - sg, 0.0)
                r += eps8 * mg
                r /= dg
                r += slack_g[v]
                rg_row[k - 1] = r
                if r > worst[k]:
                    worst[k] = r
        for j in range(nc):
            lf[j, v] = rf_row[cols[j]]
            lg[j, v] = rg_row[cols[j] - 1]
    return 0


_compiled = None
_compiled_tails = None


def relative_tails(coefT: np.ndarray, m_phi: np.ndarray, m_dphi: np.ndarray, values: np.ndarray,
                   slack_f: np.ndarray, slack_g: np.ndarray, eps8: float, cols: np.ndarray,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(worst per k, lf, lg at ``cols``) of the relative tails (see `_tails_py`); compiled."""
    global _compiled_tails
    if _compiled_tails is None:
        assert numba is not None
        _compiled_tails = numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)(_tails_py)
    worst = np.full(coefT.shape[0], -np.inf)
    cols = np.asarray(cols, dtype=np.int64)
    lf = np.empty((cols.size, coefT.shape[1]))
    lg = np.empty((cols.size, coefT.shape[1]))
    _compiled_tails(np.ascontiguousarray(coefT), m_phi, m_dphi, values, slack_f, slack_g, float(eps8), cols, worst,
                    lf, lg)
    np.log(lf, out=lf)
    lf *= 0.5
    np.log(lg, out=lg)
    lg *= 0.5
    return worst, lf, lg


def _kernel():
    global _compiled
    if _compiled is None:
        assert numba is not None
        _compiled = numba.njit(cache=True, nogil=True, fastmath=False, boundscheck=False)(_series_strip_py)
    return _compiled


def series_strip(coefT: np.ndarray, logtail_f: np.ndarray, logtail_g: np.ndarray, levels: np.ndarray, tol: float,
                 ia: np.ndarray, ib: np.ndarray, rho: np.ndarray, sa: np.ndarray, want_g: bool, out_f: np.ndarray,
                 out_g: np.ndarray, group: int | None = None) -> np.ndarray:
    """Run the compiled series on an (h, n) block (see the module docstring); returns the (h, n) int8 level array
    (``len(levels)``: not certified by any level, the caller's pair quadrature; ``len(levels) + 1``: NaN)."""
    level = np.empty(rho.shape, dtype=np.int8)
    _kernel()(coefT, logtail_f, logtail_g, np.asarray(levels, dtype=np.int64), math.log(tol),
              np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64), rho, sa, bool(want_g), out_f, out_g,
              level, max(1, int(GROUP if group is None else group)))
    return level
