"""``resprop.kernel(..., readout=True)``: the dense readout y = W_out phi(h^(L)) + b_out (Fischer et al. 2025
eq. 1), and the conventions of docs/kernel.md (gamma = 0 is a plain MLP, depth counts residual blocks).

References are independent of the engine: the erf dual kernels written out here from their textbook closed forms
(Williams 1997: <erf(u) erf(v)> = (2/pi) asin(2 K_ab / sqrt((1 + 2 K_aa)(1 + 2 K_bb))) and
<erf'(u) erf'(v)> = (4/pi) / sqrt((1 + 2 K_aa)(1 + 2 K_bb) - 4 K_ab^2)), iterated by a plain NumPy loop.
"""
from __future__ import annotations

import numpy as np
import pytest

import resprop
from resprop.numeric.engine.validation import ParameterError


def _erf_duals(K):
    d = np.diagonal(K)
    s = np.sqrt(np.outer(1 + 2 * d, 1 + 2 * d))
    phiphi = 2 / np.pi * np.arcsin(2 * K / s)
    dphidphi = 4 / np.pi / np.sqrt(s * s - 4 * K * K)
    return phiphi, dphidphi


def _reference(X, depth, sw, sb, gamma, lam, readout):
    K = sw * X @ X.T / X.shape[1] + sb
    T = K.copy()
    layers = [(gamma, lam)] * depth + ([(0.0, 1.0)] if readout else [])
    for g, la in layers:
        ff, dd = _erf_duals(K)
        K, T = (g * g * K + la * la * (sw * ff + sb),
                g * g * T + la * la * (sw * ff + sb + sw * dd * T))
    return K, T


@pytest.mark.parametrize("gamma,lam,depth", [(1.0, 0.3, 7), (0.5, 1.0, 3), (0.0, 1.0, 4), (1.0, 1.0, 0)])
def test_readout_against_plain_loop(gamma, lam, depth):
    X = np.random.default_rng(3).standard_normal((9, 5)) * np.linspace(0.3, 2.0, 9)[:, None]  # unequal norms
    K, T = resprop.kernel(X, "erf", depth, 1.25, 0.05, gamma=gamma, branch_scale=lam, ntk=True, readout=True)
    Kr, Tr = _reference(X, depth, 1.25, 0.05, gamma, lam, readout=True)
    np.testing.assert_allclose(K, Kr, rtol=1e-12, atol=0)
    np.testing.assert_allclose(T, Tr, rtol=1e-12, atol=0)
    K0, T0 = resprop.kernel(X, "erf", depth, 1.25, 0.05, gamma=gamma, branch_scale=lam, ntk=True)
    Kn, Tn = _reference(X, depth, 1.25, 0.05, gamma, lam, readout=False)
    np.testing.assert_allclose(K0, Kn, rtol=1e-12, atol=0)
    np.testing.assert_allclose(T0, Tn, rtol=1e-12, atol=0)
    assert not np.allclose(K, K0)  # the readout changes the kernel


def test_gamma_zero_is_a_plain_mlp_and_readout_is_one_more_layer():
    """gamma = 0, lambda = 1: h^(l) = W phi(h^(l-1)) + b, so readout=True at depth L is depth L + 1."""
    X = np.random.default_rng(4).standard_normal((6, 3))
    for act in ("relu", "tanh", "erf"):
        a = resprop.kernel(X, act, 3, 2.0, 0.1, gamma=0.0, ntk=True, readout=True)
        b = resprop.kernel(X, act, 4, 2.0, 0.1, gamma=0.0, ntk=True)
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-13, atol=0)


def test_relu_mlp_matches_arc_cosine_loop():
    """The Lee et al. (2018) / Cho & Saul ReLU NNGP of an L-hidden-layer MLP, by the textbook arc-cosine formula."""
    X = np.random.default_rng(5).standard_normal((7, 4))
    sw, sb, L = 2.0, 0.1, 5
    K = sw * X @ X.T / 4 + sb
    for _ in range(L + 1):  # L hidden layers, then the readout
        d = np.sqrt(np.diagonal(K))
        c = np.clip(K / np.outer(d, d), -1, 1)
        th = np.arccos(c)
        K = sw * np.outer(d, d) * (np.sin(th) + (np.pi - th) * c) / (2 * np.pi) + sb
    got = resprop.kernel(X, "relu", L, sw, sb, gamma=0.0, readout=True)
    np.testing.assert_allclose(got, K, rtol=1e-12)


@pytest.mark.parametrize("bad", [1, 0, None, "yes", np.nan])
def test_readout_must_be_a_bool(bad):
    with pytest.raises(ParameterError, match="readout"):
        resprop.kernel(np.ones((2, 2)), "erf", 1, 1.0, 0.0, readout=bad)


def test_cli_readout_flag(tmp_path):
    from resprop.numeric.cli import main

    X = np.random.default_rng(6).standard_normal((5, 3))
    np.save(tmp_path / "X.npy", X)
    out = tmp_path / "K.npz"
    code = main(["kernel", "--inputs", str(tmp_path / "X.npy"), "--activation", "erf", "--depth", "2", "--sigma-w2",
                 "1.25", "--sigma-b2", "0.05", "--branch-scale", "0.5", "--ntk", "--readout", "--out", str(out)])
    assert code == 0
    with np.load(out) as f:
        Kr, Tr = _reference(X, 2, 1.25, 0.05, 1.0, 0.5, readout=True)
        np.testing.assert_allclose(f["nngp"], Kr, rtol=1e-12)
        np.testing.assert_allclose(f["ntk"], Tr, rtol=1e-12)
