"""The engine's upper-triangle plumbing: `mirror.mirror_tile` (the lower triangle from the upper tiles, with a
finiteness flag), `kernel._input_kernel_upper` (K^(0) by BLAS syrk, upper triangle only) and `kernel._bounded`
(K^(0) finite from the row norms).  References are independent: NumPy's triu/transpose, `input_kernel` (X X^T by
GEMM), and np.isfinite on the values."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import resprop
from resprop.numeric.engine import kernel as kmod
from resprop.numeric.engine import mirror
from resprop.numeric.engine.residual_kernel import band_tiles, tile_grid


def _symmetrised_upper(M: np.ndarray) -> np.ndarray:
    U = np.triu(M, 1)
    return U + U.T + np.diag(np.diagonal(M))


@settings(max_examples=40, deadline=None)
@given(P=st.integers(1, 90), square=st.booleans(), side=st.integers(1, 40), target=st.integers(1, 3000),
       block=st.integers(1, 70), seed=st.integers(0, 2**31 - 1))
def test_mirror_tiles_make_the_matrix_symmetric_from_its_upper_triangle(P, square, side, target, block, seed):
    M = np.random.default_rng(seed).standard_normal((P, P))
    expected = _symmetrised_upper(M)
    tiles = tile_grid(P, side) if square else band_tiles(P, target)
    flags = [mirror.mirror_tile(M, *t, block=block) for t in tiles]
    assert all(flags)
    assert np.array_equal(M, expected)  # a copy: bit for bit, whatever the tiles and the block


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_mirror_flags_exactly_the_tiles_holding_a_non_finite_value(bad):
    P = 50
    rng = np.random.default_rng(1)
    M = rng.standard_normal((P, P))
    M[7, 31] = bad  # above the diagonal: copied, and reported
    M[20, 20] = bad  # on the diagonal: not the mirror's (the engine sets the diagonal itself)
    M[40, 3] = bad  # below the diagonal: overwritten
    tiles = tile_grid(P, 10)
    flags = {t: mirror.mirror_tile(M, *t) for t in tiles}
    holding = [t for t in tiles if t[0] <= 7 < t[1] and t[2] <= 31 < t[3]]
    assert [t for t, ok in flags.items() if not ok] == holding
    assert np.isnan(M[31, 7]) if np.isnan(bad) else M[31, 7] == bad
    assert np.isfinite(M[40, 3])


@settings(max_examples=25, deadline=None)
@given(P=st.integers(1, 60), d=st.integers(1, 40), sw=st.floats(1e-3, 1e3), sb=st.floats(0, 10),
       scale=st.floats(1e-3, 1e3), seed=st.integers(0, 2**31 - 1))
def test_upper_input_kernel_matches_the_gemm_route(P, d, sw, sb, scale, seed):
    X = scale * np.random.default_rng(seed).standard_normal((P, d))
    ref = kmod.input_kernel(X, sw, sb)
    up = kmod._input_kernel_upper(X, sw, sb)
    iu = np.triu_indices(P)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    bound = sw / d * np.outer(norms, norms) + sb  # |K0_ab| <= this (Cauchy-Schwarz): the round-off scale
    eps = np.finfo(float).eps
    assert np.all(np.abs(up[iu] - ref[iu]) <= (d + 4) * eps * bound[iu])


@pytest.mark.parametrize("P, d, workers", [(700, 30, 1), (700, 30, 2), (1500, 8, 2)])
def test_banded_input_kernel_matches_the_gemm_route_and_not_the_thread_count(P, d, workers, monkeypatch):
    """Above SYRK_ONE_THREAD products K^(0) is computed in fixed row bands (`_input_kernel_bands`): its upper triangle
    within the same round-off bound of `input_kernel`, and the same bits on one or two threads."""
    from resprop.numeric.engine import residual_kernel as RK

    assert P * P * d >= kmod.SYRK_ONE_THREAD
    X = np.random.default_rng(P + d).standard_normal((P, d)) * 1.7
    sw, sb = 1.3, 0.07
    ref = kmod.input_kernel(X, sw, sb)
    monkeypatch.setattr(RK, "workers", lambda: workers)
    up = kmod._input_kernel_upper(X, sw, sb)
    monkeypatch.setattr(RK, "workers", lambda: 1)
    one = kmod._input_kernel_upper(X, sw, sb)
    iu = np.triu_indices(P)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    bound = sw / d * np.outer(norms, norms) + sb
    assert np.all(np.abs(up[iu] - ref[iu]) <= (d + 5) * np.finfo(float).eps * bound[iu])
    assert np.array_equal(up[iu], one[iu])


def test_bounded_is_the_cauchy_schwarz_bound():
    X = np.random.default_rng(0).standard_normal((5, 3))
    assert kmod._bounded(X, 1.0, 0.1)
    assert not kmod._bounded(X * 1e155, 1.0, 0.1)  # |x|^2 ~ 1e310: beyond the float64 range
    assert not kmod._bounded(X, 1e300, 0.1)
    assert not kmod._bounded(X * 1e200, 1.0, 0.0)  # the norms themselves overflow


@pytest.mark.parametrize("collapse", [True, False])
def test_kernel_output_is_symmetric_and_matches_the_full_input_kernel_route(collapse):
    """resprop.kernel (syrk K^(0), mirrored per tile) against the engine run on the full GEMM K^(0)."""
    from resprop.numeric.engine.residual_kernel import propagate, recursions

    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 12))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    K, T = resprop.kernel(X, "erf", 40, 1.5, 0.1, branch_scale=0.3, ntk=True, collapse=collapse)
    assert np.array_equal(K, K.T) and np.array_equal(T, T.T)
    K0 = kmod.input_kernel(X, 1.5, 0.1)
    seq = kmod._sequences(40, 1.0, np.full(40, 0.3), 1.5, 0.1, False)
    ref = propagate(K0, K0.copy(), seq, "ntk", recursions("erf"), collapse=collapse)
    assert np.max(np.abs(K - ref.K)) <= 1e-13 * np.max(np.abs(ref.K))
    assert np.max(np.abs(T - ref.second)) <= 1e-13 * np.max(np.abs(ref.second))


def test_depth_zero_returns_the_full_symmetric_input_kernel():
    X = np.random.default_rng(4).standard_normal((30, 5))
    K, T = resprop.kernel(X, "tanh", 0, 2.0, 0.3, ntk=True)
    ref = kmod.input_kernel(X, 2.0, 0.3)
    assert np.array_equal(K, K.T) and np.array_equal(T, K)
    assert np.max(np.abs(K - ref)) <= 1e-14 * np.max(np.abs(ref))
