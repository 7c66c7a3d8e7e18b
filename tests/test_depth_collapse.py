"""Depth collapsed (issue 25, item 2): numeric/engine/depth_collapse.py.

The collapsed maps are checked against the layered run of the same engine (a different algorithm: L passes of the
recursion per element, not an interpolant) and against the textbook erf duals iterated in a plain NumPy loop, to
the certified 1e-13 of the largest entry; the end points u = +-1 (duplicate and antipodal inputs) exactly; and the
cases where it must not apply fall back to the layers.
"""
from __future__ import annotations

import numpy as np
import pytest

import resprop
from resprop.numeric.engine import depth_collapse as DC
from resprop.numeric.engine import residual_kernel as RK


def _sphere(P: int, d: int, seed: int, radii=(1.0,)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.asarray(radii)[np.arange(P) % len(radii)][:, None] * np.sqrt(d)


def _max_rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _runs(X, act, depth, ntk, lam=0.3, sw=1.0, sb=0.05):
    K0 = sw * X @ X.T / X.shape[1] + sb
    seq = (np.ones(depth), np.full(depth, lam**2 * sw), np.full(depth, lam**2 * sb))
    rec = RK.recursions(act)
    mode = "ntk" if ntk else "nngp"
    S0 = K0.copy() if ntk else None
    col = DC.build(np.diagonal(K0).copy(), None if S0 is None else np.diagonal(S0).copy(), seq, mode, rec,
                   P=10**6)
    a = RK.propagate(K0, None if S0 is None else S0.copy(), seq, mode, rec, collapse=True)
    b = RK.propagate(K0, None if S0 is None else S0.copy(), seq, mode, rec, collapse=False)
    return col, a, b


@pytest.mark.parametrize("act", ["erf", "gelu"])
@pytest.mark.parametrize("ntk", [False, True])
@pytest.mark.parametrize("radii", [(1.0,), (0.5, 1.0, 2.0)], ids=["one-norm", "three-norms"])
def test_collapsed_equals_layered(act, ntk, radii, monkeypatch):
    monkeypatch.setattr(RK, "COLLAPSE_MIN_P", 2)
    X = _sphere(300, 20, 1, radii)
    X[1] = X[0]        # u = 1: a duplicate
    X[4] = -X[len(radii) + 1]  # u = -1 when the two share a norm class
    col, a, b = _runs(X, act, 64, ntk, sb=0.0)  # no bias: antipodal inputs have u = -1
    assert col is not None and col.estimate <= DC.RTOL and col.values.size == len(radii)
    assert _max_rel(a.K, b.K) <= DC.RTOL
    if ntk:
        assert _max_rel(a.second, b.second) <= DC.RTOL
    # u = +-1 (the duplicate, the antipodal pair) take the layered values at the end points, not a sum: equal up to
    # the ulps by which the norms of one class differ (the class's representative diagonal is used), far below
    # the interpolation error allowed elsewhere
    for i, j in ((0, 1), (4, len(radii) + 1)):
        assert abs(a.K[i, j] - b.K[i, j]) <= 1e-14 * abs(b.K[i, j])


def test_collapsed_against_the_textbook_erf_duals():
    X = _sphere(400, 16, 2)
    K, T = resprop.kernel(X, "erf", 100, 1.0, 0.05, branch_scale=0.25, ntk=True)
    Kr = X @ X.T / X.shape[1] + 0.05
    Tr = Kr.copy()
    for _ in range(100):
        d = np.diagonal(Kr)
        sq = np.sqrt(np.outer(1 + 2 * d, 1 + 2 * d))
        ff, dd = 2 / np.pi * np.arcsin(2 * Kr / sq), 4 / np.pi / np.sqrt(sq * sq - 4 * Kr * Kr)
        Kr, Tr = Kr + 0.0625 * (ff + 0.05), Tr + 0.0625 * (ff + 0.05 + dd * Tr)
    K0 = X @ X.T / X.shape[1] + 0.05
    seq = (np.ones(100), np.full(100, 0.0625), np.full(100, 0.0625 * 0.05))
    assert RK.COLLAPSE_MIN_P <= 400 and DC.build(np.diagonal(K0).copy(), np.diagonal(K0).copy(), seq, "ntk",
                                                 RK.recursions("erf")) is not None  # this run is collapsed
    assert _max_rel(K, Kr) <= 2e-13 and _max_rel(T, Tr) <= 2e-13


def test_relu_nngp_collapsed_in_the_angle_equals_layered_and_the_textbook_arccos_kernel(monkeypatch):
    """ReLU's map is built in u = 1 - 2 arccos(rho) / pi: against the layered run (duplicates, antipodal pairs,
    three norm classes, and a depth past HOMOGENEOUS_BLOCK so that the sampling run rescales between blocks), and
    against the arc-cosine kernel (Cho & Saul 2009) iterated in a plain NumPy loop."""
    monkeypatch.setattr(RK, "COLLAPSE_MIN_P", 2)
    for radii, depth in (((1.0,), 64), ((0.5, 1.0, 2.0), 64), ((1.0,), RK.HOMOGENEOUS_BLOCK + 44)):
        X = _sphere(240, 20, 5, radii)
        X[1] = X[0]
        X[4] = -X[len(radii) + 1]
        col, a, b = _runs(X, "relu", depth, False, lam=0.5, sb=0.0)
        assert col is not None and col.angular and col.estimate <= DC.RTOL
        assert _max_rel(a.K * np.exp(a.log_scale_K), b.K * np.exp(b.log_scale_K)) <= DC.RTOL
        for i, j in ((0, 1), (4, len(radii) + 1)):
            assert abs(a.K[i, j] * np.exp(a.log_scale_K) - b.K[i, j] * np.exp(b.log_scale_K)) <= \
                1e-14 * abs(b.K[i, j] * np.exp(b.log_scale_K))
    X = _sphere(400, 16, 6)
    K = resprop.kernel(X, "relu", 120, 1.0, 0.05, branch_scale=0.3)
    Kr = X @ X.T / X.shape[1] + 0.05
    for _ in range(120):
        q = np.sqrt(np.outer(np.diagonal(Kr), np.diagonal(Kr)))
        t = np.arccos(np.clip(Kr / q, -1, 1))
        Kr = Kr + 0.09 * (q * (np.sin(t) + (np.pi - t) * np.cos(t)) / (2 * np.pi) + 0.05)
    K0 = X @ X.T / X.shape[1] + 0.05
    seq = (np.ones(120), np.full(120, 0.09), np.full(120, 0.09 * 0.05))
    assert DC.build(np.diagonal(K0).copy(), None, seq, "nngp", RK.recursions("relu")) is not None  # collapsed
    assert _max_rel(K, Kr) <= 2e-13


@pytest.mark.parametrize("why, act, mode, radii, depth", [
    ("relu NTK (the layered reference's arccos is noisy near u = 1)", "relu", "ntk", (1.0,), 64),
    ("the response (rescaled by its own diagonal)", "erf", "response", (1.0,), 64),
    ("more than MAX_CLASSES norms", "erf", "nngp", tuple(np.linspace(0.5, 2, DC.MAX_CLASSES + 1)), 64),
    ("shallow: the layers cost less", "erf", "nngp", (1.0,), DC.MIN_LAYERS - 1),
    ("tabulated activations", "tanh", "nngp", (1.0,), 64)])
def test_collapse_does_not_apply(why, act, mode, radii, depth):
    X = _sphere(60, 8, 3, radii)
    K0 = X @ X.T / 8 + 0.05
    seq = (np.ones(depth), np.full(depth, 0.09), np.full(depth, 0.0045))
    assert DC.build(np.diagonal(K0).copy(), np.diagonal(K0).copy(), seq, mode, RK.recursions(act), P=10**6) is None


def test_tiles_strips_and_threads_do_not_change_the_collapsed_result(monkeypatch):
    monkeypatch.setattr(RK, "COLLAPSE_MIN_P", 2)
    X = _sphere(700, 12, 4, (1.0, 1.5))
    ref = resprop.kernel(X, "gelu", 40, 1.0, 0.05, branch_scale=0.3, ntk=True)
    others = [resprop.kernel(X, "gelu", 40, 1.0, 0.05, branch_scale=0.3, ntk=True, tile=t) for t in (5, 333)]
    monkeypatch.setattr(RK, "STRIP", 1000)
    monkeypatch.setattr(RK, "workers", lambda: 2)
    others.append(resprop.kernel(X, "gelu", 40, 1.0, 0.05, branch_scale=0.3, ntk=True))
    for K, T in others:
        assert np.array_equal(K, ref[0]) and np.array_equal(T, ref[1])


def test_norm_classes():
    d = np.array([1.0, 2.0, 1.0 + 1e-15, 3.0, 2.0])
    labels, reps = DC.norm_classes(d, 1e-13)
    assert list(labels) == [0, 1, 0, 2, 1] and np.allclose(reps, [1, 2, 3])
    assert DC.norm_classes(np.arange(1.0, DC.MAX_CLASSES + 2), 1e-13) is None


def test_chebyshev_pieces_reproduce_a_known_function():
    """The DCT coefficients and Clenshaw's recurrence on their own: exp on the Lobatto points of [-1, 1]."""
    u = DC.lobatto(33)
    c = DC.chebyshev_coefficients(np.exp(u)[None])
    x = np.linspace(-1, 1, 101)
    assert np.max(np.abs(DC._clenshaw(c, x)[0] - np.exp(x))) <= 1e-15 * np.e


def test_truncation_bound_holds_and_drops_the_negligible_terms():
    """`truncated` against NumPy's chebval on a dense grid: the change is at most tol x ref for every function,
    terms are dropped only from the top, and a function whose terms all matter keeps them."""
    from numpy.polynomial import chebyshev as C

    rng = np.random.default_rng(11)
    k = np.arange(33)
    coef = rng.standard_normal((3, 33)) * np.array([1.0, 3.0, 0.2])[:, None] * 0.35**k
    ref = np.max(np.abs(coef), axis=1, keepdims=True) * 2
    x = np.linspace(-1, 1, 4001)
    for tol in (1e-13, 1e-8, 1e-3):
        t = DC.truncated(coef, ref, tol)
        kept = int(np.max(np.flatnonzero(np.any(t != 0, axis=0)))) + 1
        assert np.array_equal(t[:, :kept], coef[:, :kept]) and not np.any(t[:, kept:])
        assert kept < 33  # 0.35^k reaches 1e-13 near k = 28
        change = np.abs(np.stack([C.chebval(x, r) for r in coef - t]))
        assert np.all(np.max(change, axis=1) <= tol * ref[:, 0])
        # one more term dropped would break the bound for some function
        assert np.any(np.sum(np.abs(coef[:, kept - 1:]), axis=1) > tol * ref[:, 0])
    slow = np.ones((1, 9))  # no decay: nothing may go
    assert np.array_equal(DC.truncated(slow, np.ones((1, 1)), 1e-13), slow)


def test_times_u_is_chebyshev_multiplication_by_the_variable():
    from numpy.polynomial import chebyshev as C

    c = np.random.default_rng(5).standard_normal((3, 9))
    assert np.max(np.abs(DC.times_u(c) - np.stack([C.chebmulx(r) for r in c]))) <= 1e-15


@pytest.mark.parametrize("act", ["erf", "gelu"])
@pytest.mark.parametrize("radii", [(1.0,), (0.5, 1.0, 2.0)], ids=["one-norm", "three-norms"])
def test_ntk_from_the_input_kernel_is_one_series(act, radii, monkeypatch):
    """Theta^(0) = K^(0) passed as the same array (what resprop.kernel does): Theta^(L) = G(u) by one series
    (`with_theta_from_k`) against A(u) Theta^(0) + B(u) and against the layers, duplicates and antipodes
    included."""
    monkeypatch.setattr(RK, "COLLAPSE_MIN_P", 2)
    X = _sphere(300, 20, 2, radii)
    X[1] = X[0]
    X[4] = -X[len(radii) + 1]
    K0 = X @ X.T / X.shape[1]
    seq = (np.ones(64), np.full(64, 0.09), np.zeros(64))
    rec = RK.recursions(act)
    A = K0.copy()
    direct = RK.propagate(A, A, seq, "ntk", rec, collapse=True)
    affine = RK.propagate(K0.copy(), K0.copy(), seq, "ntk", rec, collapse=True)
    layered = RK.propagate(K0.copy(), K0.copy(), seq, "ntk", rec, collapse=False)
    assert direct.second is not A  # a new array for Theta
    assert _max_rel(direct.K, affine.K) == 0.0  # K's series padded with a zero coefficient: the same bits
    assert _max_rel(direct.second, affine.second) <= 1e-14
    assert _max_rel(direct.second, layered.second) <= DC.RTOL
    for i, j in ((0, 1), (4, len(radii) + 1)):
        assert abs(direct.second[i, j] - layered.second[i, j]) <= 1e-14 * abs(layered.second[i, j])
