"""The fused compiled kernels (issue 25, item 1): generated/residual_compiled.py from derive/compiled.py.

* the polynomial arcsine and arccosine the compiled code uses, against mpmath at points other than those of the
  derive-time bound (<= 4 ulp, the issue's bound; derive measured < 2);
* the compiled pair kernels against the NumPy kernels of the same recursions (the reference and fallback) over
  hypothesis-drawn inputs, through ``resprop.kernel`` (1e-14 of the largest entry at depth <= 8: a few ulp per
  layer; the two evaluate the same formulas with different roundings);
* against an independent reference (the textbook dual kernels iterated by a plain NumPy loop, not generated);
* tiles, strips and thread counts do not change the compiled result;
* ``backend`` is validated and "auto" falls back to NumPy where no compiled kernel exists.
"""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import resprop
import resprop.generated.residual_compiled as C
from resprop.derive import approximations as A
from resprop.numeric.engine import dual_tables as dt
from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine.validation import ParameterError


def _ulps(got: float, ref) -> float:
    return A.ulp_error(got, ref)


def _points(seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    pts = np.concatenate([rng.uniform(-1, 1, 1500), 1 - np.exp(rng.uniform(np.log(1e-16), np.log(0.5), 400)),
                          0.5 + rng.uniform(-1e-6, 1e-6, 100), np.exp(rng.uniform(np.log(1e-300), 0, 100))])
    return [float(v) for v in np.concatenate([pts, -pts])]


@pytest.mark.parametrize("name", ["asin", "acos"])
def test_polynomial_arcsine_and_arccosine_within_4_ulp_of_mpmath(name):
    fn = C._asin if name == "asin" else C._acos
    ref = mp.asin if name == "asin" else mp.acos
    worst = 0.0
    with mp.workdps(30):
        for x in _points(12345):  # not the derive-time points (seed 0)
            worst = max(worst, _ulps(fn(x), ref(mp.mpf(x))))
    assert worst <= 4.0, worst


def test_polynomial_arcsine_special_values():
    assert C._asin(0.0) == 0.0 and math.copysign(1.0, C._asin(-0.0)) == -1.0
    assert C._asin(1.0) == math.asin(1.0) and C._asin(-1.0) == -math.asin(1.0)
    assert C._acos(1.0) == 0.0 and C._acos(-1.0) == math.pi and C._acos(0.0) == math.pi / 2
    assert math.isnan(C._asin(math.nan)) and math.isnan(C._acos(math.nan))
    # near 1 the arccosine keeps its relative accuracy (pi/2 - asin(x) would lose it)
    x = 1 - 2.0**-40
    with mp.workdps(40):
        assert _ulps(C._acos(x), mp.acos(mp.mpf(x))) <= 4


def test_the_derive_time_bound_is_what_the_generated_module_records():
    assert C.MAX_ULP["asin"] <= 4 and C.MAX_ULP["acos"] <= 4
    assert C.ASIN_COEFFICIENTS == A.asin_coefficients()


def _inputs(seed: int, P: int, d: int, spread: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((P, d)) * np.exp(spread * rng.uniform(-1, 1, (P, 1)))


def _max_rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), P=st.integers(2, 40), d=st.integers(1, 12), spread=st.floats(0, 2),
       depth=st.integers(1, 8), act=st.sampled_from(["erf", "relu", "gelu"]),
       mode=st.sampled_from(["nngp", "ntk", "response"]), sw=st.floats(0.1, 3), sb=st.floats(0, 1),
       gamma=st.floats(0, 1.2), lam=st.floats(0.05, 1.5))
def test_compiled_and_numpy_kernels_agree(seed, P, d, spread, depth, act, mode, sw, sb, gamma, lam):
    X = _inputs(seed, P, d, spread)
    K0 = sw * X @ X.T / d + sb
    diag = np.diagonal(K0)
    c = K0 / np.sqrt(np.outer(diag, diag))
    # ReLU's arccosine has an infinite condition number at correlation 1: near-duplicate inputs differ at ~sqrt(ulp)
    # in ANY two float64 evaluations (tests of that: test_relu_condition_at_correlation_one)
    assume(act != "relu" or np.max(np.abs(c[~np.eye(P, dtype=bool)]), initial=0) < 1 - 1e-6)
    g = np.full(depth, gamma**2)
    w = np.full(depth, lam**2 * sw)
    s = np.full(depth, lam**2 * sb)
    second = None if mode == "nngp" else (K0.copy() if mode == "ntk" else np.ones_like(K0))
    out = {}
    for be in ("compiled", "numpy"):
        rec = RK.recursions(act, be)
        assert rec.backend == be
        out[be] = RK.propagate(K0, None if second is None else second.copy(), (g, w, s), mode, rec)
    a, b = out["compiled"], out["numpy"]
    assert a.log_scale_K == b.log_scale_K
    tol = 1e-14
    if act == "relu":
        # d acos(c)/dc = -1/sqrt(1 - c^2): a rounding of c (a few ulp) moves the arccosine by that factor; the
        # correlations grow with depth, so allow depth x 4 ulp x the condition at the largest correlation reached
        dg = np.diagonal(b.K)
        cL = b.K / np.sqrt(np.outer(dg, dg))
        c_max = max(np.max(np.abs(m[~np.eye(P, dtype=bool)]), initial=0) for m in (c, cL))
        tol += depth * 4 * 2.2e-16 / math.sqrt(max(1 - min(c_max, 1.0) ** 2, 1e-300))
    else:
        # erf and GELU: the arcsine's argument rho and the NTK / response factor 1/sqrt(det), det = (1 - rho^2) x
        # its diagonal scale, amplify a few-ulp rounding of K by at most 1/(1 - rho^2) per layer, with rho erf's
        # 2 K_ab / sqrt((1 + 2 K_aa)(1 + 2 K_bb)) (GELU: the plain correlation, the larger of the two); allow
        # depth x 4 ulp x that condition at the largest rho of any layer (a hypothesis example, erf NTK, depth 7,
        # lambda^2 sigma_w2 = 6.75: rho -> 0.93, 1.1e-14 between the backends)
        rho_max = 0.0
        off = ~np.eye(P, dtype=bool)
        numpy_rec = RK.recursions(act, "numpy")
        for k in range(depth + 1):  # the kernel of every layer (depth <= 8: cheap)
            Kl = K0 if k == 0 else RK.propagate(K0, None, (g[:k], w[:k], s[:k]), "nngp", numpy_rec).K
            dl = np.diagonal(Kl)
            rho_erf = 2 * Kl / np.sqrt(np.outer(1 + 2 * dl, 1 + 2 * dl))
            corr = Kl / np.sqrt(np.outer(dl, dl))
            rho_max = max(rho_max, float(np.max(np.abs(rho_erf[off]))), float(np.max(np.abs(corr[off]))))
        tol += depth * 4 * 2.2e-16 / max(1 - min(rho_max, 1.0) ** 2, 1e-300)
    assert _max_rel(a.K, b.K) <= tol
    if second is not None:
        assert _max_rel(a.second, b.second) <= tol


def test_relu_condition_at_correlation_one():
    """Duplicate inputs: c = K_ab / (sqrt(K_aa) sqrt(K_bb)) is 1 to an ulp, and acos(1 - ulp) = 1.5e-8: the NTK's
    (pi - acos c) / (2 pi) term moves by ~1e-9 relative.  Both backends stay within that of the exact value
    (mpmath on the same recursion with c = 1 exactly)."""
    X = np.array([[1.0, 0.3, -0.2], [1.0, 0.3, -0.2], [0.1, 1.0, 0.4]])
    K, T = resprop.kernel(X, "relu", 3, 1.0, 0.1, branch_scale=0.5, ntk=True, backend="numpy")
    Kc, Tc = resprop.kernel(X, "relu", 3, 1.0, 0.1, branch_scale=0.5, ntk=True, backend="compiled")
    # the duplicate pair equals the diagonal (c = 1 exactly in exact arithmetic)
    for T_ in (T, Tc):
        assert abs(T_[0, 1] - T_[0, 0]) <= 1e-7 * T_[0, 0]
    assert _max_rel(Kc, K) <= 1e-14


def _reference(X, act, depth, sw, sb, lam, ntk):
    """The textbook dual kernels in a plain loop (Williams 1997 for erf, Cho & Saul 2009 for ReLU)."""
    K = sw * X @ X.T / X.shape[1] + sb
    T = K.copy()
    for _ in range(depth):
        dg = np.diagonal(K)
        if act == "erf":
            sq = np.sqrt(np.outer(1 + 2 * dg, 1 + 2 * dg))
            ff, dd = 2 / np.pi * np.arcsin(2 * K / sq), 4 / np.pi / np.sqrt(sq * sq - 4 * K * K)
        else:
            r = np.sqrt(np.outer(dg, dg))
            cc = np.clip(K / r, -1, 1)
            th = np.arccos(cc)
            ff, dd = r * (np.sin(th) + (np.pi - th) * cc) / (2 * np.pi), (np.pi - th) / (2 * np.pi)
        K, T = K + lam**2 * (sw * ff + sb), T + lam**2 * (sw * ff + sb + sw * dd * T)
    return K, T


@pytest.mark.parametrize("act", ["erf", "relu"])
def test_compiled_kernel_against_the_textbook_duals(act):
    X = _inputs(3, 60, 7, 1.0)
    K, T = resprop.kernel(X, act, 12, 1.3, 0.05, branch_scale=0.4, ntk=True, backend="compiled")
    Kr, Tr = _reference(X, act, 12, 1.3, 0.05, 0.4, True)
    assert _max_rel(K, Kr) <= 1e-13 and _max_rel(T, Tr) <= 1e-13


@pytest.mark.parametrize("act", ["erf", "relu", "gelu"])
def test_tiles_strips_and_threads_do_not_change_the_compiled_result(act, monkeypatch):
    X = _inputs(5, 130, 9, 1.0)
    ref = resprop.kernel(X, act, 20, 1.0, 0.05, branch_scale=0.3, ntk=True, backend="compiled")
    runs = [resprop.kernel(X, act, 20, 1.0, 0.05, branch_scale=0.3, ntk=True, backend="compiled", tile=t)
            for t in (1, 17, 64)]
    monkeypatch.setattr(RK, "STRIP", 300)
    monkeypatch.setattr(RK, "THREAD_MIN", 1)
    monkeypatch.setattr(RK, "workers", lambda: 2)
    runs.append(resprop.kernel(X, act, 20, 1.0, 0.05, branch_scale=0.3, ntk=True, backend="compiled"))
    for K, T in runs:
        assert _max_rel(K, ref[0]) <= 1e-15 and _max_rel(T, ref[1]) <= 1e-15


def test_backend_is_validated_and_auto_falls_back():
    X = _inputs(1, 6, 3, 0.5)
    with pytest.raises(ParameterError, match="backend"):
        resprop.kernel(X, "erf", 2, 1.0, 0.1, backend="fast")
    with pytest.raises(ParameterError, match="backend"):
        resprop.kernel(X, "sin(x)", 2, 1.0, 0.1, backend="compiled")  # closed form generated at run time
    assert RK.recursions("erf", "auto").backend == "compiled"
    assert RK.recursions("Max(x, 0)", "auto").backend == "compiled"  # the closed-form ReLU
    assert RK.recursions("tanh", "auto").backend == "compiled"  # tables: where a layer's norms are equal
    assert RK.recursions("sin(x)", "auto").backend == "numpy"
    # six unequal norms (36 pairs > MAX_TABLE_PAIRS): the general path, on its fused kernels under "auto"
    a = resprop.kernel(X, "tanh", 2, 1.0, 0.1, backend="auto")
    b = resprop.kernel(X, "tanh", 2, 1.0, 0.1, backend="numpy")
    assert _max_rel(a, b) <= 1e-14


@pytest.mark.parametrize("act", ["tanh", "x*exp(-x**2/2)"])
@pytest.mark.parametrize("ntk", [False, True])
def test_tabulated_activations_on_the_compiled_tables(act, ntk):
    """Equal norms: one rho table per layer, read by the compiled kernel (its own arccosine and interval lookup)
    instead of the NumPy callbacks; the same tables, so the two agree to round-off."""
    X = _inputs(11, 80, 6, 0.0)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    rec = RK.recursions(act, "compiled")
    K0 = X @ X.T + 0.05
    seq = (np.ones(12), np.full(12, 0.2), np.full(12, 0.01))
    sched = RK.Schedule(np.diagonal(K0).copy(), None, seq, "nngp", rec, 64)
    assert all(b.prepared is not None for b in sched.blocks())  # the compiled tables are used
    a = resprop.kernel(X, act, 12, 1.0, 0.05, branch_scale=math.sqrt(0.2), ntk=ntk, backend="compiled")
    b = resprop.kernel(X, act, 12, 1.0, 0.05, branch_scale=math.sqrt(0.2), ntk=ntk, backend="numpy")
    for x, y in zip(a if ntk else (a,), b if ntk else (b,)):
        assert _max_rel(x, y) <= 1e-14


def test_symmetric_row_values_are_read_from_the_column_values():
    """A row value that is the same function of K_aa as a column value of K_bb is stored once (`_row_sources`):
    the tabulated kernels' 1/sqrt(K) and ReLU's pair; erf's row and column values differ, and stay apart.  Checked
    on the derivation (SymPy) and on what the generated module records."""
    from resprop.derive.compiled import compiled_spec
    from resprop.derive.recursion import recursions_of
    from resprop.derive.residual import derive_residual

    specs = {r.name: compiled_spec(r) for r in recursions_of(derive_residual()) if r.name in
             ("tabulated_nngp", "relu_nngp", "erf_nngp")}
    assert specs["tabulated_nngp"].row_stored == [] and \
        specs["tabulated_nngp"].row_source == [("r_a", "cols", 0)]
    assert specs["relu_nngp"].row_stored == []
    assert specs["erf_nngp"].row_stored == ["u_a"]
    for name, spec in specs.items():
        meta = C.RECURSIONS[name]
        assert meta["rows"] == spec.row_stored
        assert meta["rows_from_cols"] == [n for n, where, _ in spec.row_source if where == "cols"]
    # the prepared per-layer data holds no row array for the tabulated kernel
    diag = np.full((3, 5), 0.7)
    layer, rows, cols, *_ = C.tabulated_nngp_prepare(diag, np.ones(3), np.ones(3), np.zeros(3),
                                                     np.zeros((3, 2, 2)), np.zeros((3, 2, 2)), np.zeros((3, 5)))
    assert rows.shape == (0, 3, 5) and np.allclose(cols[0, :, :5], 1 / np.sqrt(0.7))


def _general_run(X, act, depth, mode, backend, sw=1.2, sb=0.05, lam=0.4, block=None):
    K0 = sw * X @ X.T / X.shape[1] + sb
    seq = (np.ones(depth), np.full(depth, lam**2 * sw), np.full(depth, lam**2 * sb))
    second = None if mode == "nngp" else (K0.copy() if mode == "ntk" else np.ones_like(K0))
    return RK.propagate(K0, second, seq, mode, RK.recursions(act, backend), block=block)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), P=st.integers(5, 40), spread=st.floats(0.05, 1.5),
       depth=st.integers(1, 6), act=st.sampled_from(["tanh", "x*exp(-x**2/2)"]),
       mode=st.sampled_from(["nngp", "ntk", "response"]), sw=st.floats(0.3, 3), lam=st.floats(0.05, 1.5))
def test_general_path_fused_and_numpy_kernels_agree(seed, P, spread, depth, act, mode, sw, lam):
    """Unequal norms (more than MAX_TABLE_PAIRS pairs of diagonal values): the fused series kernels
    (`tabulated_*_series_run`) and the NumPy recursion with the series callbacks.  The series is the same
    arithmetic in both (`mehler_row`, no fast-math); the update may contract into fused multiply-adds."""
    X = _inputs(seed, P, 4, spread)
    a = _general_run(X, act, depth, mode, "compiled", sw=sw, lam=lam)
    b = _general_run(X, act, depth, mode, "numpy", sw=sw, lam=lam)
    assert a.log_scale_K == b.log_scale_K and a.log_scale_second == b.log_scale_second
    assert _max_rel(a.K, b.K) <= 1e-14
    if mode != "nngp":
        assert _max_rel(a.second, b.second) <= 1e-14


def test_general_path_blocks_use_the_fused_series_kernels():
    X = _inputs(2, 30, 4, 1.0)
    K0 = X @ X.T / 4 + 0.05
    seq = (np.ones(5), np.full(5, 0.2), np.full(5, 0.01))
    for act, fused in (("tanh", True), ("sign(x)", False)):  # piecewise_duals has no series: the NumPy kernels
        rec = RK.recursions(act, "compiled")
        blocks = list(RK.Schedule(np.diagonal(K0).copy(), None, seq, "nngp", rec,
                                  RK.default_block(np.diagonal(K0), 5, "nngp", rec)).blocks())
        assert all((b.series is not None) == fused for b in blocks)


@pytest.mark.parametrize("mode", ["nngp", "ntk", "response"])
def test_uncertified_elements_take_the_pair_quadrature(monkeypatch, mode):
    """With a series tolerance no level can meet (1e-300), every off-diagonal element is uncertified: the fused
    kernels leave it to the pair quadrature and the generated patch (`tabulated_*_series_patch`), the NumPy route
    to the same quadrature.  The two agree to round-off, and so do hand-overs of a row at a time (the smallest
    capacity) and of all at once (the quadrature's matrix products may round differently by batch size)."""
    monkeypatch.setattr(dt, "series_tolerance", lambda data: 1e-300)
    X = _inputs(4, 24, 3, 0.8)
    calls = []
    quad = dt._pair_quadrature
    monkeypatch.setattr(dt, "_pair_quadrature", lambda *a: calls.append(a[3].size) or quad(*a))
    ref = _general_run(X, "tanh", 3, mode, "numpy")
    runs, handed = [], []
    for bad in (1, 10**6):
        monkeypatch.setattr(RK, "SERIES_BAD", bad)
        calls.clear()
        runs.append(_general_run(X, "tanh", 3, mode, "compiled"))
        handed.append(sum(calls))
    # most of the 3 x 276 elements above the diagonal (those of small |rho| between small variances, whose
    # coefficients' tails underflow, are certified even at 1e-300), the same ones whatever the capacity
    assert handed[0] == handed[1] >= 3 * 24 * 23 // 4
    assert _max_rel(runs[0].K, runs[1].K) <= 1e-15
    assert _max_rel(runs[0].K, ref.K) <= 1e-14
    if mode != "nngp":
        assert _max_rel(runs[0].second, runs[1].second) <= 1e-15
        assert _max_rel(runs[0].second, ref.second) <= 1e-14
