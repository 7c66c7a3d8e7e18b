"""resprop.numeric.theories.stable.residual_ntk: NNGP + NTK of the residual erf / ReLU network.

(i)   ReLU equals resprop.numeric.theories.stable.stable_resnet.kernels (Hayou eqs. 5, 9) with the constant scaling lambda_l = rho;
(ii)  erf: the NTK recursion against the empirical NTK of wide finite residual networks (explicit NumPy
      backprop of a random projection of the last layer, averaged over seeds), within 4 standard errors;
(iii) the NNGP part equals resprop.numeric.theories.fischer.field_theory.nngp;
plus the generated recursions run by residual_kernel.propagate equal a plain full-matrix loop of the generated
elementwise closed forms, and input validation.
"""
import functools

import numpy as np
import pytest
from scipy.special import erf

import resprop.generated.gaussian as gg
import resprop.numeric.theories.stable.generated.stable as gs
from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.fischer import field_theory as ft
from resprop.numeric.theories.stable import residual_ntk as R
from resprop.numeric.theories.stable import stable_resnet as S

RHO, SW2, SB2 = 0.3, 1.25, 0.05


def _k0(P, d=6, seed=0, sw_in=0.8, sb_in=0.1):
    X = np.random.default_rng(seed).standard_normal((P, d))
    return ft.input_kernel(X, sw_in, sb_in)


def _scaled_err(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.fixture
def many_strips(monkeypatch):
    """Force several strips and the thread pool even for small P."""
    monkeypatch.setattr(RK, "propagate", functools.partial(RK.propagate, strip=40))
    monkeypatch.setattr(RK, "THREAD_MIN", 0)


def test_relu_equals_stable_resnet_with_constant_scaling(many_strips):
    K0, L = _k0(9), 25
    k = S.kernels(K0, L, np.full(L, RHO), SW2, SB2)
    scale = np.exp(k["log_scale"])
    r = R.nngp_ntk(K0, L, RHO, SW2, SB2, activation="relu")
    assert _scaled_err(r["K"], scale * k["Q_normalised"]) < 1e-12
    assert _scaled_err(r["Theta"], scale * k["ntk_normalised"]) < 1e-12
    assert np.array_equal(r["Theta"], r["Theta"].T) and np.array_equal(r["K"], r["K"].T)


@pytest.mark.parametrize("activation", R.ACTIVATIONS)
def test_nngp_part_equals_field_theory(activation, many_strips):
    K0, L = _k0(11, seed=1), 30
    ref = ft.nngp(K0, L, RHO, SW2, SB2, activation=activation)["K"]
    both = R.nngp_ntk(K0, L, RHO, SW2, SB2, activation=activation)
    alone = R.nngp_ntk(K0, L, RHO, SW2, SB2, activation=activation, ntk=False)
    assert alone.Theta is None and alone.fields() == ("depth", "K")
    assert _scaled_err(both["K"], ref) < 1e-13
    # the generated NNGP and NNGP + NTK recursions sum the same terms in different orders: equal to round-off
    assert _scaled_err(alone["K"], both["K"]) < 1e-14


def _closed_form_loop(activation, K0, T0, L, r2, sw, sb):
    """B9-B10 and Hayou eq. 9 on full matrices with the generated elementwise closed forms (erf:
    resprop.generated.gaussian; ReLU: resprop.numeric.theories.stable.generated.stable), the diagonal with its own forms."""
    K, T = np.array(K0, float), np.array(T0, float)
    for _ in range(L):
        d = np.diagonal(K).copy()
        da, db = d[:, None], d[None, :]
        if activation == "erf":
            C = r2 * (sw * gg.erf_mean_phi_phi(da, db, K) + sb)
            D = r2 * sw * gg.erf_mean_dphi_dphi(da, db, K)
            np.fill_diagonal(C, r2 * (sw * gg.erf_mean_phi_sq(d) + sb))
            np.fill_diagonal(D, r2 * sw * gg.erf_mean_dphi_dphi(d, d, d))
        else:
            root = np.sqrt(da * db)
            c = np.clip(K / root, -1.0, 1.0)
            np.fill_diagonal(c, 1.0)
            C = r2 * gs.psi_relu(c, root, sb, sw)
            D = r2 * sw * gs.mean_dphi_dphi(c)
        K, T = K + C, T + C + D * T
    return K, T


@pytest.mark.parametrize("P", [1, 2, 5, 40])
@pytest.mark.parametrize("activation", R.ACTIVATIONS)
def test_generated_recursion_equals_closed_form_loop(P, activation, many_strips):
    K0 = _k0(P, seed=P)
    T0 = K0 + 0.3 * np.eye(P)  # a Theta0 different from K0
    f = R.nngp_ntk(K0, 17, 0.5, SW2, SB2, activation=activation, Theta0=T0)
    for key, ref in zip(("K", "Theta"), _closed_form_loop(activation, K0, T0, 17, 0.25, SW2, SB2)):
        assert _scaled_err(f[key], ref) < 1e-14


def test_relu_deep_rescaled_blocks_equal_closed_form_loop():
    """Depth 600 > one block of residual_kernel.propagate: the ReLU state is rescaled between blocks."""
    K0 = _k0(6, seed=4)
    f = R.nngp_ntk(K0, 600, 0.8, SW2, SB2, activation="relu")
    for key, ref in zip(("K", "Theta"), _closed_form_loop("relu", K0, K0, 600, 0.64, SW2, SB2)):
        assert _scaled_err(f[key], ref) < 1e-12


def test_strip_layout_covers_the_triangle():
    for P, target in [(1, 10), (7, 10), (100, 64), (1000, RK.STRIP), (333, 5000)]:
        bands = RK.strips(P, target)
        assert bands[0][0] == 0 and bands[-1][1] == P
        assert all(a[1] == b[0] for a, b in zip(bands, bands[1:]))


# ----------------------------------------------------------------------------------- (ii) empirical NTK
def _empirical(X, N, L, rho, sw, sb, sw_in, sb_in, seed):
    """K = h^(L) h^(L)T / N and the NTK of f = u . h^(L) / sqrt(N) (u fixed, untrained) w.r.t. all weights and
    biases, NTK parameterisation, by explicit backprop: d f / d h^(l-1) = g + rho a phi'(h^(l-1)) (W^T g)."""
    rng = np.random.default_rng(seed)
    P, d = X.shape
    a_in, c_in, a, c = np.sqrt(sw_in / d), np.sqrt(sb_in), np.sqrt(sw / N), np.sqrt(sb)
    h = a_in * X @ rng.standard_normal((N, d)).T + c_in * rng.standard_normal(N)
    hs, Ws = [h], []
    for _ in range(L):
        W, b = rng.standard_normal((N, N)), rng.standard_normal(N)
        h = h + rho * (a * erf(h) @ W.T + c * b)
        hs.append(h)
        Ws.append(W)
    g = np.tile(rng.standard_normal(N) / np.sqrt(N), (P, 1))  # d f / d h^(L), one row per input
    theta = np.zeros((P, P))
    for layer in reversed(range(L)):
        h_prev = hs[layer]
        gg = g @ g.T
        phi = erf(h_prev)
        theta += rho**2 * (a**2 * gg * (phi @ phi.T) + c**2 * gg)
        g = g + rho * a * (2 / np.sqrt(np.pi)) * np.exp(-h_prev**2) * (g @ Ws[layer])
    gg = g @ g.T
    theta += a_in**2 * gg * (X @ X.T) + c_in**2 * gg
    return hs[-1] @ hs[-1].T / N, theta


def test_erf_ntk_matches_wide_finite_networks():
    P, d, N, L, rho, sw_in, sb_in, seeds = 3, 4, 512, 4, 0.7, 1.0, 0.1, 24
    X = np.random.default_rng(7).standard_normal((P, d))
    K0 = ft.input_kernel(X, sw_in, sb_in)
    theory = R.nngp_ntk(K0, L, rho, SW2, SB2, activation="erf")
    samples = [_empirical(X, N, L, rho, SW2, SB2, sw_in, sb_in, 100 + s) for s in range(seeds)]
    iu = np.triu_indices(P)
    se_theta = None
    for k, key in enumerate(("K", "Theta")):
        vals = np.array([s[k][iu] for s in samples])
        mean, se = vals.mean(0), vals.std(0, ddof=1) / np.sqrt(seeds)
        z = (mean - theory[key][iu]) / se
        assert np.all(np.abs(z) < 4), (key, z)
        assert np.all(se < 0.05 * np.max(np.abs(theory[key]))), (key, se)
        se_theta = se
    # not vacuous: with Theta0 = K0, Theta - K is the accumulated rho^2 sw2 <phi' phi'> Theta term alone, and it
    # is resolved by many standard errors
    assert np.all(np.abs(theory["Theta"] - theory["K"])[iu] > 8 * se_theta)


# ----------------------------------------------------------------------------------- validation
def test_validation():
    K0 = _k0(3)
    with pytest.raises(ParameterError, match="activation"):
        R.nngp_ntk(K0, 3, RHO, SW2, SB2, activation="tanh")
    with pytest.raises(ParameterError, match="Theta0"):
        R.nngp_ntk(K0, 3, RHO, SW2, SB2, Theta0=np.eye(2))
    with pytest.raises(ParameterError, match="Theta0"):
        R.nngp_ntk(K0, 3, RHO, SW2, SB2, Theta0=K0, ntk=False)
    with pytest.raises(ParameterError, match="positive semi-definite"):
        R.nngp_ntk(np.array([[1.0, 2.0], [2.0, 1.0]]), 3, RHO, SW2, SB2)
    with pytest.raises(ParameterError, match="symmetric"):
        R.nngp_ntk(np.array([[1.0, 0.2], [0.1, 1.0]]), 3, RHO, SW2, SB2)
    with pytest.raises(ParameterError, match="input_kernel"):
        R.nngp_ntk(np.ones((2, 3)), 3, RHO, SW2, SB2)
    with pytest.raises(ParameterError, match="input_kernel"):
        R.nngp_ntk(np.stack([K0, K0]), 3, RHO, SW2, SB2)
    with pytest.raises(ParameterError, match="diagonal"):
        R.nngp_ntk(np.zeros((2, 2)), 3, RHO, SW2, SB2)
    # rank-deficient PSD kernels (more inputs than input dimensions) are accepted
    X = np.random.default_rng(3).standard_normal((20, 3))
    R.nngp_ntk(ft.input_kernel(X, 1.0, 0.0), 3, RHO, SW2, SB2)
    with pytest.raises(ParameterError, match="depth"):
        R.nngp_ntk(K0, 0, RHO, SW2, SB2)
    with pytest.raises(ParameterError, match="rho"):
        R.nngp_ntk(K0, 3, -0.1, SW2, SB2)
    with pytest.raises(ParameterError, match="rho"):
        R.nngp_ntk(K0, 3, [0.1, 0.2], SW2, SB2)
    with pytest.raises(ParameterError, match="not finite"):
        R.nngp_ntk(K0, 400, 10.0, 1e300, SB2, activation="relu")


def test_rho_zero_is_the_identity():
    K0 = _k0(4)
    r = R.nngp_ntk(K0, 5, 0.0, SW2, SB2)
    assert np.allclose(r["K"], K0, rtol=1e-15, atol=0) and np.allclose(r["Theta"], K0, rtol=1e-15, atol=0)
