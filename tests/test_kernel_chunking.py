"""One answer whatever the chunking (issue 23, item 1; issue 24, item 1): the kernel engine's internal settings --
strips or square tiles, blocks of layers, thread count, the table/series caches and their budgets -- change no result beyond round-off.

Every case is compared with the single-block, single-strip, single-thread run of the same inputs with the default
settings: max |difference| <= 1e-13 max |reference| for K and Theta.  Activations: closed forms (erf, relu, gelu),
a closed-form user expression (sin(x)), the tabulated tanh and a tabulated user expression (x exp(-x^2/2)); inputs
of equal norm (one table per layer) and of unequal norm (the general path: per-layer Hermite coefficients of
every diagonal value, built once per layer before the strips run).  The large test runs the general path with
threads at P = 1000 with unequal norms (the case that raised KeyError when a shared per-variance LRU evicted an
entry another strip's thread still needed).
"""
from __future__ import annotations

import functools
import math
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import resprop
from resprop.numeric.engine import dual_tables as dt
from resprop.numeric.engine import mehler_compiled, variance_interpolation
from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine.kernel import input_kernel

SW, SB, LAM = 1.0, 0.05, 0.3
ACTIVATIONS = ("erf", "relu", "gelu", "sin(x)", "tanh", "x*exp(-x**2/2)")
TABULATED = ("tanh", "x*exp(-x**2/2)")


def _inputs(P: int, equal: bool, seed: int = 0) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((P, 5))
    if equal:
        X *= math.sqrt(5) / np.linalg.norm(X, axis=1, keepdims=True)
    return X


def _run(X: np.ndarray, act: str, L: int, mode: str, strip: int, block: int | None, sw=SW, sb=SB, lam=LAM,
         tile: int | None = None):
    K0 = input_kernel(X, sw, sb)
    seq = (np.ones(L), np.full(L, lam**2 * sw), np.full(L, lam**2 * sb))
    out = RK.propagate(K0, K0.copy() if mode == "ntk" else None, seq, mode, RK.recursions(act), strip=strip,
                       block=block, tile=tile)
    return out.K * math.exp(out.log_scale_K), (None if out.second is None
                                               else out.second * math.exp(out.log_scale_second))


def _reference(X, act, L, mode):
    """Single block, single strip, single thread, default caches."""
    saved = RK.THREAD_MIN
    RK.THREAD_MIN = 10**18
    try:
        return _run(X, act, L, mode, strip=10**12, block=L)
    finally:
        RK.THREAD_MIN = saved


def _close(a: np.ndarray, ref: np.ndarray, what: str) -> None:
    scale = float(np.max(np.abs(ref)))
    err = float(np.max(np.abs(a - ref)))
    assert err <= 1e-13 * scale, f"{what}: max |diff| = {err:.3e} > 1e-13 x {scale:.3e}"


@functools.cache
def _cached_reference(act: str, P: int, equal: bool, L: int, mode: str):
    return _reference(_inputs(P, equal), act, L, mode)


def _fresh_table_cache(monkeypatch, size: int) -> None:
    """``_table`` rewrapped with an empty LRU of ``size`` bytes (`bytes_lru`)."""
    from resprop.numeric.engine.bytes_lru import BytesLRU, cached

    monkeypatch.setattr(dt, "TABLE_CACHE_BYTES", size)
    monkeypatch.setattr(dt, "_table", cached(BytesLRU(lambda: size))(dt._table.__wrapped__))


settings_strategy = st.fixed_dictionaries({
    "strip": st.sampled_from([16, 64, 300, 2000, 65536]),
    "block": st.sampled_from([1, 2, 3, None]),
    "workers": st.integers(1, 4),
    "thread_min": st.sampled_from([0, 20_000, 10**18]),
    "table_cache": st.sampled_from([0, 40_000, 64 << 20]),  # bytes: none, about one table, all
    "diag_cache_bytes": st.sampled_from([0, 4096, 64 << 20]),
    "strip_bytes": st.sampled_from([1 << 10, 1 << 16, 16 << 20]),
    "series_block": st.sampled_from([7, 256, 8192]),
    "block_eval": st.sampled_from([5, 1000, 32768]),
    "max_table_pairs": st.sampled_from([1, 16, 64]),
    "equal_rtol": st.sampled_from([1e-13, 1e-11]),
    "general_bytes": st.sampled_from([1, 1 << 16, 64 << 20]),
    "general_share": st.sampled_from([0.0, 0.05, 1.0]),
    "general_piece": st.sampled_from([1, 40, 16384]),
    "series_backend": st.sampled_from(["auto", "numpy", "compiled"]),
    "group": st.sampled_from([1, 3, 64, 1000]),
    "tail_rows": st.sampled_from([1, 5, 512]),
    "direct_chunk": st.sampled_from([1, 7, 512]),
    "k_probe": st.sampled_from([2, 5, 17]),
    "tile": st.sampled_from([None, 1, 4, 9, 64]),  # square tiles instead of the strips
    "ufunc_buffer": st.sampled_from([16, 1024, 8192]),  # NumPy's ufunc buffer while the NumPy kernels run
    "general_share_fused": st.sampled_from([0.0, 0.01, 1.0]),
    "series_bad": st.sampled_from([1, 7, 1024]),  # elements handed to the pair quadrature at once (>= a row)
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(act=st.sampled_from(ACTIVATIONS), equal=st.booleans(), mode=st.sampled_from(["nngp", "ntk"]),
       cfg=settings_strategy)
def test_internal_settings_do_not_change_the_kernel(monkeypatch, act, equal, mode, cfg):
    P, L = 23, 3  # 23 distinct diagonal values: 529 pairs > every MAX_TABLE_PAIRS tried (the route is fixed)
    ref = _cached_reference(act, P, equal, L, mode)
    with monkeypatch.context() as m:
        m.setattr(RK, "workers", lambda: cfg["workers"])
        m.setattr(RK, "THREAD_MIN", cfg["thread_min"])
        m.setattr(RK, "GENERAL_BYTES", cfg["general_bytes"])
        m.setattr(RK, "GENERAL_SHARE", cfg["general_share"])
        m.setattr(RK, "GENERAL_PIECE", cfg["general_piece"])
        m.setattr(RK, "EQUAL_DIAGONAL_RTOL", cfg["equal_rtol"])
        _fresh_table_cache(m, cfg["table_cache"])
        m.setattr(dt, "_DIAG_CACHE_BYTES", cfg["diag_cache_bytes"])
        m.setattr(dt, "STRIP_BYTE_BUDGET", cfg["strip_bytes"])
        m.setattr(dt, "SERIES_BLOCK", cfg["series_block"])
        m.setattr(dt, "BLOCK", cfg["block_eval"])
        m.setattr(dt, "_TLS", threading.local())  # per-thread scratch buffers of BLOCK elements
        m.setattr(dt, "MAX_TABLE_PAIRS", cfg["max_table_pairs"])
        m.setattr(dt, "SERIES_BACKEND", cfg["series_backend"])
        m.setattr(mehler_compiled, "GROUP", cfg["group"])
        m.setattr(dt, "TAIL_ROWS", cfg["tail_rows"])
        m.setattr(variance_interpolation, "DIRECT_CHUNK", cfg["direct_chunk"])
        m.setattr(dt, "K_PROBE", cfg["k_probe"])
        m.setattr(RK, "UFUNC_BUFFER", cfg["ufunc_buffer"])
        m.setattr(RK, "GENERAL_SHARE_FUSED", cfg["general_share_fused"])
        m.setattr(RK, "SERIES_BAD", cfg["series_bad"])
        before = np.getbufsize()
        K, T = _run(_inputs(P, equal), act, L, mode, cfg["strip"], cfg["block"], tile=cfg["tile"])
        assert np.getbufsize() == before  # the engine's ufunc buffer size is restored
    _close(K, ref[0], f"{act} K")
    if mode == "ntk":
        _close(T, ref[1], f"{act} Theta")


@pytest.mark.parametrize("act", TABULATED)
def test_few_diagonal_values_use_pair_tables_whatever_the_chunking(monkeypatch, act):
    """Two distinct norms (4 pairs <= MAX_TABLE_PAIRS): the general path's table route, per layer."""
    X = _inputs(12, True)
    X[::2] *= 1.3
    ref = _reference(X, act, 3, "ntk")
    for strip, block, n in ((16, 1, 3), (40, 2, 2), (65536, None, 1)):
        with monkeypatch.context() as m:
            m.setattr(RK, "workers", lambda n=n: n)
            m.setattr(RK, "THREAD_MIN", 0)
            K, T = _run(X, act, 3, "ntk", strip, block)
        _close(K, ref[0], "K")
        _close(T, ref[1], "Theta")


def test_general_path_large_P_unequal_norms_threads(monkeypatch):
    """P = 1000 Gaussian inputs (unequal norms, every diagonal value distinct), tanh NNGP + NTK on the thread pool
    with a tiny diagonal cache: no race, the same kernels as one strip on one thread, and entries of the first
    layer equal to the general path called directly."""
    X = np.random.default_rng(1).standard_normal((1000, 10))
    monkeypatch.setattr(dt, "_DIAG_CACHE_BYTES", 1024)
    monkeypatch.setattr(RK, "workers", lambda: 4)
    K, T = resprop.kernel(X, "tanh", 2, 1.0, 0.05, branch_scale=0.2, ntk=True)
    assert np.all(np.isfinite(K)) and np.all(np.isfinite(T))
    assert np.array_equal(K, K.T) and np.array_equal(T, T.T)
    with monkeypatch.context() as m:
        m.setattr(RK, "THREAD_MIN", 10**18)
        K1, T1 = _run(X, "tanh", 2, "ntk", strip=10**12, block=None, sw=1.0, sb=0.05, lam=0.2)
    _close(K, K1, "K")
    _close(T, T1, "Theta")
    # one layer against mean_phi_phi_general on the whole matrix (an independent chunking)
    K0 = input_kernel(X, 1.0, 0.05)
    d = np.diagonal(K0)
    f, g = np.empty(K0.shape), np.empty(K0.shape)
    dt.mean_phi_phi_general("tanh(x)", d[:, None], d[None, :], K0, f, g)
    K_1 = resprop.kernel(X, "tanh", 1, 1.0, 0.05, branch_scale=0.2)
    expect = K0 + 0.04 * (f + 0.05)
    off = ~np.eye(1000, dtype=bool)
    assert np.max(np.abs(K_1 - expect)[off]) <= 1e-13 * np.max(np.abs(expect))


@pytest.mark.parametrize("act", TABULATED)
def test_interpolation_in_variance_and_series_backend_do_not_change_the_kernel(monkeypatch, act):
    """P = 300 distinct diagonal values: the per-layer Hermite coefficients and E[phi^2], E[phi'^2] interpolated
    in log d (the default) against evaluated at every value, and the compiled series against NumPy's, in every
    combination: the same kernels to 1e-13 of the largest entry (interpolation) and to 1e-14 (backend).  The
    node counts of the interpolation (N_START), its chunks and the probe for the series length vary too."""
    X = _inputs(300, False, seed=3)
    runs = {}
    for min_values in (2, 10**9):
        for backend in ("numpy", "compiled"):
            with monkeypatch.context() as m:
                m.setattr(variance_interpolation, "MIN_VALUES", min_values)
                m.setattr(dt, "SERIES_BACKEND", backend)
                runs[min_values, backend] = _run(X, act, 4, "ntk", 65536, None)
    for n_start, k_probe, chunk in ((5, 3, 64), (33, 40, 1)):
        with monkeypatch.context() as m:
            m.setattr(variance_interpolation, "MIN_VALUES", 2)
            m.setattr(variance_interpolation, "N_START", n_start)
            m.setattr(variance_interpolation, "DIRECT_CHUNK", chunk)
            m.setattr(variance_interpolation, "INTERPOLATION_CHUNK", chunk)
            m.setattr(dt, "K_PROBE", k_probe)
            K, T = _run(X, act, 4, "ntk", 65536, None)
        _close(K, runs[2, "compiled"][0], f"{act} K, N_START {n_start}")
        _close(T, runs[2, "compiled"][1], f"{act} Theta, N_START {n_start}")
    for min_values in (2, 10**9):  # the same series bits (tests/test_mehler_compiled.py); the compiled backend's
        # fused kernels may contract the update into fused multiply-adds: round-off
        a, b = runs[min_values, "numpy"], runs[min_values, "compiled"]
        for x, y in zip(a, b):
            assert np.max(np.abs(x - y)) <= 1e-14 * np.max(np.abs(y))
    _close(runs[2, "compiled"][0], runs[10**9, "compiled"][0], f"{act} K interpolated")
    _close(runs[2, "compiled"][1], runs[10**9, "compiled"][1], f"{act} Theta interpolated")


def test_progress_bar_on_stderr_only_when_asked(monkeypatch, capsys):
    X = _inputs(30, False)
    monkeypatch.setattr(RK, "PROGRESS_DELAY", 0.0)
    quiet = resprop.kernel(X, "tanh", 2, SW, SB, ntk=True)  # default: auto, and stderr is not a TTY here
    assert capsys.readouterr().err == ""
    loud = resprop.kernel(X, "tanh", 2, SW, SB, ntk=True, progress=True)
    captured = capsys.readouterr()
    assert "kernel" in captured.err and captured.out == ""
    assert np.array_equal(quiet[0], loud[0]) and np.array_equal(quiet[1], loud[1])
