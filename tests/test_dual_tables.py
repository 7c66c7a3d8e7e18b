"""Dual kernels of arbitrary activations (numeric/engine/dual_tables.py) against independent mpmath routes.

References (mpmath, dps 25), none of which uses the Hermite series or the trapezoidal rules of the module:
closed forms for erf, sin(x) + x^2/10 and x exp(-x^2/2) (Gaussian integrals), one-dimensional mp.quad for the
diagonal moments and for rho = 0, +-1, and a two-dimensional composite Gauss--Legendre rule in mpmath for tanh,
SiLU and GELU.  Errors are relative to sqrt(E phi(u)^2 E phi(v)^2) (resp. with phi').
"""
from __future__ import annotations

import functools
import math
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

from resprop.derive.activations import x
from resprop.numeric.engine import dual_tables as dt
from resprop.numeric.engine.validation import ParameterError

#: minutes under load: run with `pytest -m slow` (the default suite checks the engine through test_kernel_engine)
pytestmark = pytest.mark.slow

EXPR = {
    "erf": sp.erf(x),
    "tanh": sp.tanh(x),
    "silu": x / (1 + sp.exp(-x)),
    "gelu": x * (1 + sp.erf(x / sp.sqrt(2))) / 2,
    "sin": sp.sin(x) + x**2 / 10,
    "xexp": x * sp.exp(-x**2 / 2),
}
ULP = 2.0**-52
RHO_EDGE = np.array([-1.0, 1.0, -1.0 - ULP, 1.0 + ULP, 0.0, 1 - 1e-9, -1 + 1e-9])


# --------------------------------------------------------------------------- mpmath references
def closed(name: str, da: float, db: float, rho: float) -> tuple[mp.mpf, mp.mpf]:
    """(E[phi(u) phi(v)], E[phi'(u) phi'(v)]) in closed form, in mpmath at dps 25."""
    with mp.workdps(25):
        da, db, rho = mp.mpf(da), mp.mpf(db), mp.mpf(max(-1.0, min(1.0, rho)))
        c = rho * mp.sqrt(da * db)
        if name == "erf":
            q = (1 + 2 * da) * (1 + 2 * db)
            return 2 / mp.pi * mp.asin(2 * c / mp.sqrt(q)), 4 / mp.pi / mp.sqrt(q - 4 * c * c)
        if name == "sin":  # E[sin u sin v] = e^{-(da+db)/2} sinh c, E[u^2 v^2] = da db + 2 c^2, odd terms vanish
            e = mp.exp(-(da + db) / 2)
            return e * mp.sinh(c) + (da * db + 2 * c * c) / 100, e * mp.cosh(c) + 4 * c / 100
        if name == "xexp":  # Gaussian integral: S = Sigma (I + Sigma)^-1, weight det(I + Sigma)^-1/2
            S = mp.matrix([[da, c], [c, db]])
            M = mp.eye(2) + S
            T = S * mp.inverse(M)
            w = 1 / mp.sqrt(mp.det(M))
            return T[0, 1] * w, (1 - T[0, 0] - T[1, 1] + T[0, 0] * T[1, 1] + 2 * T[0, 1] ** 2) * w
    raise KeyError(name)


@functools.cache
def _mp_fns(name: str):
    e = EXPR[name]
    return tuple(sp.lambdify(x, f, "mpmath") for f in (e, sp.diff(e, x)))


@functools.cache
def _gauss_rule(panels: int, L: int = 9) -> tuple[tuple[mp.mpf, mp.mpf], ...]:
    """Composite 12-point Gauss--Legendre on [-L, L] with the N(0, 1) density folded into the weights."""
    from mpmath.calculus.quadrature import GaussLegendre

    with mp.workdps(25):
        nodes = GaussLegendre(mp.mp).calc_nodes(3, mp.mp.prec)
        h = mp.mpf(2 * L) / panels
        c = 1 / mp.sqrt(2 * mp.pi)
        out = []
        for p in range(panels):
            lo = -L + p * h
            for z, w in nodes:
                zz = lo + (z + 1) * h / 2
                out.append((zz, w * h / 2 * mp.exp(-zz * zz / 2) * c))
        return tuple(out)


def mp_pair(name: str, da: float, db: float, rho: float, panels: int = 12) -> tuple[mp.mpf, mp.mpf]:
    """E[phi(u) phi(v)] and E[phi'(u) phi'(v)] by the conditional two-dimensional rule in mpmath."""
    with mp.workdps(25):
        a, b, r = mp.sqrt(da), mp.sqrt(db), mp.mpf(rho)
        s = mp.sqrt(1 - r * r)
        rule = _gauss_rule(panels)
        res = []
        for fn in _mp_fns(name):
            total = mp.mpf(0)
            for z1, w1 in rule:
                m = b * r * z1
                total += w1 * fn(a * z1) * mp.fsum(w2 * fn(m + b * s * z2) for z2, w2 in rule)
            res.append(total)
        return res[0], res[1]


@functools.cache
def mp_moments(name: str, d: float) -> tuple[mp.mpf, mp.mpf]:
    """E[phi(u)^2], E[phi'(u)^2] by mp.quad."""
    with mp.workdps(25):
        s, c = mp.sqrt(d), 1 / mp.sqrt(2 * mp.pi)
        m_phi, m_dphi = (mp.quad(lambda z, fn=fn: fn(s * z) ** 2 * mp.exp(-z * z / 2), [-mp.inf, -3, 0, 3, mp.inf])
                         * c for fn in _mp_fns(name))
        return m_phi, m_dphi


def mp_mean(name: str, d: float, sign: int = 1, which: int = 0) -> mp.mpf:
    """E[phi(u) phi(sign u)] (which = 0) or with phi' (which = 1), u ~ N(0, d): rho = +-1 at equal diagonals."""
    fn = _mp_fns(name)[which]
    with mp.workdps(25):
        s, c = mp.sqrt(d), 1 / mp.sqrt(2 * mp.pi)
        return mp.quad(lambda z: fn(s * z) * fn(sign * s * z) * mp.exp(-z * z / 2), [-mp.inf, -3, 0, 3, mp.inf]) * c


def rel_errors(name: str, da: float, db: float, rho: np.ndarray, f: np.ndarray, g: np.ndarray,
               ref=closed) -> tuple[float, float]:
    A2, Ap2 = mp_moments(name, float(da))
    B2, Bp2 = mp_moments(name, float(db))
    sf, sg = mp.sqrt(A2 * B2), mp.sqrt(Ap2 * Bp2)
    ef = eg = 0.0
    for r, fv, gv in zip(np.ravel(rho), np.ravel(f), np.ravel(g)):
        F, G = ref(name, da, db, float(r))
        ef = max(ef, float(abs(fv - F) / sf))
        eg = max(eg, float(abs(gv - G) / sg))
    return ef, eg


# --------------------------------------------------------------------------- tables (A)
@pytest.mark.parametrize("da, db", [(1e-3, 1e-3), (0.3, 0.3), (1.0, 2.5), (5.0, 5.0), (20.0, 20.0), (20.0, 7.0)])
def test_erf_table_matches_closed_form_to_1e12(da, db):
    table = dt.build_table(EXPR["erf"], da, db, rtol=1e-12)
    rng = np.random.default_rng(0)
    rho = np.concatenate([RHO_EDGE, rng.uniform(-1, 1, 400), 1 - rng.uniform(0, 1e-3, 50)])
    f, g = table.both(rho)
    r = np.clip(rho, -1, 1)
    q = (1 + 2 * da) * (1 + 2 * db)
    c = r * math.sqrt(da * db)
    F = 2 / np.pi * np.arcsin(2 * c / np.sqrt(q))
    G = 4 / np.pi / np.sqrt(q - 4 * c * c)
    sf = 2 / np.pi * math.sqrt(math.asin(2 * da / (1 + 2 * da)) * math.asin(2 * db / (1 + 2 * db)))
    sg = 4 / np.pi / ((1 + 4 * da) * (1 + 4 * db)) ** 0.25
    assert np.max(np.abs(f - F)) / sf <= 1e-12
    assert np.max(np.abs(g - G)) / sg <= 1e-12
    assert table.error_bound <= 1e-12


@pytest.mark.parametrize("name", ["erf", "sin", "xexp"])
@pytest.mark.parametrize("da, db", [(1e-3, 1e-3), (1.0, 1.0), (0.5, 1.7), (20.0, 20.0), (12.0, 20.0)])
def test_table_against_mpmath_closed_forms(name, da, db):
    table = dt.build_table(EXPR[name], da, db)
    rng = np.random.default_rng(1)
    rho = np.concatenate([RHO_EDGE, rng.uniform(-1, 1, 12), [0.999, -0.9995, 0.99999]])
    f, g = table.both(rho)
    ef, eg = rel_errors(name, da, db, rho, f, g)
    assert max(ef, eg) <= 1e-10
    assert ef <= table.error_bound_phi and eg <= table.error_bound_dphi
    assert table.error_bound <= 1e-10


@pytest.mark.parametrize("name", ["tanh", "silu", "gelu"])
@pytest.mark.parametrize("d", [1e-3, 1.0, 20.0])
def test_table_at_rho_pm1_and_0_against_mpmath_1d(name, d):
    """rho = +-1 (and one ulp outside, clipped) and rho = 0 reduce to one-dimensional integrals."""
    table = dt.build_table(EXPR[name], d, d)
    rho = np.array([1.0, 1.0 + ULP, -1.0, -1.0 - ULP, 0.0])
    f, g = table.both(rho)
    A2, Ap2 = mp_moments(name, d)
    with mp.workdps(25):
        s, c = mp.sqrt(d), 1 / mp.sqrt(2 * mp.pi)
        means = [mp.quad(lambda z, fn=fn: fn(s * z) * mp.exp(-z * z / 2), [-mp.inf, 0, mp.inf]) * c
                 for fn in _mp_fns(name)]
    ref_f = [A2, A2, mp_mean(name, d, -1), mp_mean(name, d, -1), means[0] ** 2]
    ref_g = [Ap2, Ap2, mp_mean(name, d, -1, 1), mp_mean(name, d, -1, 1), means[1] ** 2]
    ef = max(float(abs(v - r) / A2) for v, r in zip(f, ref_f))
    eg = max(float(abs(v - r) / Ap2) for v, r in zip(g, ref_g))
    assert ef <= 1e-10 and eg <= 1e-10
    assert f[0] == f[1] and f[2] == f[3] and g[0] == g[1] and g[2] == g[3]


@pytest.mark.parametrize("name, da, db, rhos", [
    ("tanh", 0.25, 0.25, (-0.85,)),
    ("tanh", 1.0, 0.6, (0.97,)),
    ("silu", 1.0, 1.0, (-0.99,)),
    ("gelu", 0.5, 1.0, (0.8,)),
])
def test_table_against_mpmath_2d(name, da, db, rhos):
    table = dt.build_table(EXPR[name], da, db)
    rho = np.array(rhos)
    f, g = table.both(rho)
    ef, eg = rel_errors(name, da, db, rho, f, g, ref=mp_pair)
    assert ef <= 1e-10 and eg <= 1e-10
    assert ef <= table.error_bound_phi and eg <= table.error_bound_dphi


def test_table_methods_agree_any_shape_and_noncontiguous():
    table = dt.build_table(EXPR["tanh"], 1.3, 1.3)
    rng = np.random.default_rng(2)
    rho = rng.uniform(-1, 1, (70, 50, 3))
    f, g = table.both(rho, np.empty(rho.shape), np.empty(rho.shape))
    assert np.array_equal(f, table.mean_phi_phi(rho, np.empty(rho.shape)))
    np.testing.assert_allclose(g, table.mean_dphi_dphi(rho), rtol=0, atol=1e-15)
    out = np.empty((50, 70)).T  # Fortran-ordered output
    table.mean_phi_phi(rho[:, :, 0], out)
    assert np.array_equal(out, f[:, :, 0])
    strided = rho[::2, ::3, 1]
    assert np.array_equal(table.mean_phi_phi(strided), f[::2, ::3, 1])
    assert table.mean_phi_phi(np.float64(1.0)).shape == ()
    with pytest.raises(ParameterError):
        table.mean_phi_phi(rho, np.empty(3))


def test_nan_correlations_give_nan():
    table = dt.build_table(EXPR["tanh"], 1.0, 1.0)
    f, g = table.both(np.array([0.5, np.nan]))
    assert np.isfinite(f[0]) and np.isnan(f[1]) and np.isnan(g[1])
    d = np.array([0.5, 1.0, 2.0, 3.0, 4.0])
    Kab = np.full((5, 5), 0.2)
    Kab[1, 2] = np.nan
    out_f, out_g = np.empty((5, 5)), np.empty((5, 5))
    K_aa, K_bb = np.broadcast_to(d[:, None], Kab.shape).copy(), np.broadcast_to(d[None, :], Kab.shape).copy()
    dt.mean_phi_phi_general(EXPR["tanh"], K_aa, K_bb, Kab, out_f, out_g)  # the diagonals finite, one K_ab NaN
    assert np.isnan(out_f[1, 2]) and np.isnan(out_g[1, 2]) and np.isfinite(np.delete(out_f.ravel(), 7)).all()


def test_table_threads_share_a_table():
    table = dt.build_table(EXPR["silu"], 2.0, 2.0)
    rng = np.random.default_rng(3)
    strips = [rng.uniform(-1, 1, 50_000) for _ in range(8)]
    serial = [table.both(r) for r in strips]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(table.both, strips))
    for (f1, g1), (f2, g2) in zip(serial, parallel):
        assert np.array_equal(f1, f2) and np.array_equal(g1, g2)


def test_table_cache_and_validation():
    a = dt.build_table(EXPR["tanh"], 0.7, 0.7)
    assert dt.build_table(sp.tanh(sp.Symbol("x")), 0.7, 0.7) is a  # plain Symbol('x') is the same activation
    assert dt.build_table("tanh(x)", 0.7, 0.7) is a
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ParameterError):
            dt.build_table(EXPR["tanh"], bad, 1.0)
    with pytest.raises(ParameterError):
        dt.build_table(sp.Symbol("y") * x, 1.0, 1.0)


def test_table_fallback_quadrature_beyond_rho_s(monkeypatch):
    """With the series capped at 64 terms, tanh at d = 4 is certified only for |rho| <= rho_s < 1; the nodes
    beyond use the pair quadrature and must still meet the tolerance (against the uncapped table)."""
    ref = dt.build_table(EXPR["tanh"], 4.0, 3.0)
    monkeypatch.setattr(dt, "K_LADDER", (16, 32, 64))
    dt._table.cache_clear()
    capped = dt.build_table(EXPR["tanh"], 4.0, 3.0)
    monkeypatch.undo()
    dt._table.cache_clear()
    assert capped.series.rho_s < 0.99 and capped.n_terms <= 65
    rho = np.linspace(-1, 1, 4001)
    f1, g1 = ref.both(rho)
    f2, g2 = capped.both(rho)
    assert np.max(np.abs(f1 - f2)) / ref.scale_phi <= 1e-10
    assert np.max(np.abs(g1 - g2)) / ref.scale_dphi <= 1e-10
    assert capped.error_bound <= 1e-10


# --------------------------------------------------------------------------- diagonal (B)
@pytest.mark.parametrize("name", ["tanh", "silu", "gelu", "sin", "xexp"])
def test_diagonal_against_mpmath(name):
    d = np.array([[1e-3, 0.5, 20.0], [0.5, 3.0, 1e-3]])
    m_phi, m_dphi = dt.diagonal(EXPR[name], d)
    assert m_phi.shape == d.shape and m_phi[0, 1] == m_phi[1, 0]
    for v, vp, dd in zip(m_phi.ravel(), m_dphi.ravel(), d.ravel()):
        A2, Ap2 = mp_moments(name, float(dd))
        assert abs(v - A2) / A2 <= 1e-12 and abs(vp - Ap2) / Ap2 <= 1e-12
    with pytest.raises(ParameterError):
        dt.diagonal(EXPR[name], [1.0, 0.0])


# --------------------------------------------------------------------------- general path (C)
def _pairs(P: int, lo: float, hi: float, seed: int, squeeze: float = 1.0):
    rng = np.random.default_rng(seed)
    d = rng.uniform(lo, hi, P)
    X = rng.standard_normal((P, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    rho = np.clip(X @ X.T, -1, 1)
    rho = np.sign(rho) * (1 - (1 - np.abs(rho)) * squeeze)  # push toward +-1
    np.fill_diagonal(rho, 1.0)
    K_ab = rho * np.sqrt(d[:, None] * d[None, :])
    return d, np.broadcast_to(d[:, None], (P, P)), np.broadcast_to(d[None, :], (P, P)), K_ab, rho


@pytest.mark.parametrize("name", ["erf", "sin", "xexp"])
@pytest.mark.parametrize("lo, hi, squeeze", [(1e-3, 3e-3, 1.0), (0.5, 2.0, 0.05), (8.0, 20.0, 1.0)])
def test_general_against_mpmath_closed_forms(name, lo, hi, squeeze):
    P = 40
    d, Kaa, Kbb, Kab, rho = _pairs(P, lo, hi, seed=4, squeeze=squeeze)
    f, g = np.empty((P, P)), np.empty((P, P))
    dt.mean_phi_phi_general(EXPR[name], Kaa, Kbb, Kab, f, g)
    rng = np.random.default_rng(5)
    for i, j in [(0, 0), (3, 7)] + [tuple(v) for v in rng.integers(0, P, (5, 2))]:
        ef, eg = rel_errors(name, d[i], d[j], np.array([rho[i, j]]), f[i:i + 1, j], g[i:i + 1, j])
        assert ef <= 1e-10 and eg <= 1e-10, (i, j, ef, eg)


def test_general_tanh_against_mpmath_2d_and_tables():
    P = 30
    d, Kaa, Kbb, Kab, rho = _pairs(P, 0.3, 1.2, seed=6, squeeze=0.1)
    f, g = np.empty((P, P)), np.empty((P, P))
    dt.mean_phi_phi_general(EXPR["tanh"], Kaa, Kbb, Kab, f, g)
    i, j = 2, 11
    ef, eg = rel_errors("tanh", d[i], d[j], np.array([rho[i, j]]), f[i:i + 1, j], g[i:i + 1, j], ref=mp_pair)
    assert ef <= 1e-10 and eg <= 1e-10
    for i, j in [(0, 1), (5, 9), (4, 4)]:  # against the (independently built) table of the pair
        table = dt.build_table(EXPR["tanh"], d[i], d[j])
        tf, tg = table.both(np.array([rho[i, j]]))
        assert abs(tf[0] - f[i, j]) <= 2e-11 * table.scale_phi
        assert abs(tg[0] - g[i, j]) <= 2e-11 * table.scale_dphi


def test_general_few_pairs_use_tables_and_no_dphi():
    rng = np.random.default_rng(7)
    Kaa = rng.choice([0.5, 2.0], (60, 70))
    Kbb = rng.choice([0.5, 2.0], (60, 70))
    rho = rng.uniform(-1, 1, (60, 70))
    f = np.empty(rho.shape)
    assert dt.mean_phi_phi_general(EXPR["xexp"], Kaa, Kbb, rho * np.sqrt(Kaa * Kbb), f)[1] is None
    for idx in [(0, 0), (10, 3), (59, 69)]:
        F, _ = closed("xexp", Kaa[idx], Kbb[idx], rho[idx])
        A2, _ = mp_moments("xexp", Kaa[idx])
        B2, _ = mp_moments("xexp", Kbb[idx])
        assert float(abs(f[idx] - F) / mp.sqrt(A2 * B2)) <= 1e-10


def test_general_fallback_quadrature(monkeypatch):
    """Elements the capped series cannot certify take the conditional quadrature."""
    monkeypatch.setattr(dt, "K_LADDER", (16, 32, 64))
    P = 12
    d, Kaa, Kbb, Kab, rho = _pairs(P, 6.0, 12.0, seed=8, squeeze=0.02)
    f, g = np.empty((P, P)), np.empty((P, P))
    dt.mean_phi_phi_general(EXPR["erf"], Kaa, Kbb, Kab, f, g)
    for i, j in [(0, 0), (1, 2), (5, 11), (7, 3)]:
        ef, eg = rel_errors("erf", d[i], d[j], np.array([rho[i, j]]), f[i:i + 1, j], g[i:i + 1, j])
        assert ef <= 1e-10 and eg <= 1e-10


def test_general_chunking_is_exact():
    P = 90
    d, Kaa, Kbb, Kab, _ = _pairs(P, 0.2, 3.0, seed=9, squeeze=0.3)
    f1, g1, f2, g2 = (np.empty((P, P)) for _ in range(4))
    dt.mean_phi_phi_general(EXPR["silu"], Kaa, Kbb, Kab, f1, g1)
    dt.mean_phi_phi_general(EXPR["silu"], Kaa, Kbb, Kab, f2, g2, byte_budget=1 << 16)
    assert np.array_equal(f1, f2) and np.array_equal(g1, g2)
    # any shape, including 1-D and 3-D
    f3 = np.empty(P * P)
    dt.mean_phi_phi_general(EXPR["silu"], Kaa.ravel(), Kbb.ravel(), Kab.ravel(), f3, byte_budget=1 << 16)
    assert np.array_equal(f3, f1.ravel())
    f4 = np.empty((P, 9, 10))
    dt.mean_phi_phi_general(EXPR["silu"], Kaa.reshape(P, 9, 10), Kbb.reshape(P, 9, 10), Kab.reshape(P, 9, 10), f4)
    assert np.array_equal(f4.reshape(P, P), f1)


def test_general_memory_stays_O_P2():
    """P = 2000 with an 8 MiB budget: the peak of new allocations stays below two P x P float arrays."""
    P = 2000
    d, Kaa, Kbb, Kab, _ = _pairs(P, 0.5, 1.5, seed=10)
    f, g = np.empty((P, P)), np.empty((P, P))
    tracemalloc.start()
    try:
        dt.mean_phi_phi_general(EXPR["tanh"], Kaa, Kbb, Kab, f, g, byte_budget=8 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 2 * P * P * 8, peak / 2**20
    assert np.all(np.isfinite(f)) and np.all(np.isfinite(g))
    np.testing.assert_allclose(np.diagonal(f), dt.diagonal(EXPR["tanh"], d)[0], rtol=1e-10)


# --------------------------------------------------------------------------- slow: full sweeps
@pytest.mark.slow
@pytest.mark.parametrize("name", ["tanh", "silu", "gelu"])
@pytest.mark.parametrize("d", [1e-3, 1.0, 5.0, 20.0])
def test_slow_table_sweep_against_mpmath_2d(name, d):
    tau = {"tanh": math.pi / 2, "silu": math.pi, "gelu": 1.5}[name]
    cases = [((d, d), (-0.999, 0.6, 0.9999)), ((d, 1.6 * d), (-0.7, 0.95))] if d < 10 else [((d, d), (0.95,))]
    for (da, db), rhos in cases:
        panels = max(12, math.ceil(1.1 * 18 * math.sqrt(max(da, db)) / tau))
        table = dt.build_table(EXPR[name], da, db)
        rho = np.array(rhos)
        f, g = table.both(rho)
        ef, eg = rel_errors(name, da, db, rho, f, g, ref=functools.partial(mp_pair, panels=panels))
        assert ef <= 1e-10 and eg <= 1e-10


@pytest.mark.slow
def test_slow_general_large_P_agrees_with_its_rows():
    """P = 1000 in one call gives, bit for bit up to round-off, what the same rows give alone: the work split of a
    large call changes no result (its time is benchmarks/' business)."""
    P = 1000
    d, Kaa, Kbb, Kab, _ = _pairs(P, 0.5, 2.0, seed=11, squeeze=0.1)
    f, g = np.empty((P, P)), np.empty((P, P))
    dt.mean_phi_phi_general(EXPR["tanh"], Kaa, Kbb, Kab, f, g)
    assert np.isfinite(f).all() and np.isfinite(g).all()
    rows = [0, 17, 999]
    f_rows, g_rows = np.empty((len(rows), P)), np.empty((len(rows), P))
    dt.mean_phi_phi_general(EXPR["tanh"], Kaa[rows], Kbb[rows], Kab[rows], f_rows, g_rows)
    np.testing.assert_allclose(f_rows, f[rows], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(g_rows, g[rows], rtol=1e-13, atol=1e-15)


def test_the_activation_is_checked_once_per_expression_and_bad_ones_still_fail():
    """`activation` is cached on its argument (the engine asks once per layer): the same expression, as text or
    SymPy, gives the same compiled activation; a bad one raises the ParameterError every time (not cached), and an
    unhashable argument gets the uncached route's error, not a TypeError."""
    assert dt.activation("tanh(x)") is dt.activation("tanh(x)")
    assert dt.activation(sp.tanh(x)) is dt.activation("tanh(x)")
    for _ in range(2):
        with pytest.raises(ParameterError, match="activation"):
            dt.activation("x + y")
        with pytest.raises(ParameterError, match="activation"):
            dt.activation("__import__('os')")
    with pytest.raises(ParameterError, match="activation"):
        dt.activation([x])  # type: ignore[arg-type]
    # piecewise activations are refused (they belong to piecewise_duals), every time
    for _ in range(2):
        with pytest.raises(ParameterError, match="piecewise"):
            dt.activation("Abs(x)")
