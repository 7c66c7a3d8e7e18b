"""The generated field-theory recursions (numeric/theories/fischer/generated/fischer_recursions.py, from derive/theories/fischer.py) and the
drivers that run them (numeric/theories/fischer): against a plain per-layer loop of the generated one-step kernels
(the pre-recursion driver, restated here as the reference), the pinned boundary elements at depth, the prefix-sum
fluctuation recursion against the dense G12 B G12^T, and the lowering of Min/Max, callbacks of several arguments
and recursions without per-layer sequences."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import resprop.numeric.theories.fischer.generated.fischer as gen
import resprop.numeric.theories.fischer.generated.fischer_recursions as frec
from resprop.numeric.engine.datasets import scaled_kernel
from resprop.numeric.engine.expectations import kernels
from resprop.numeric.theories.fischer import field_theory as F
from resprop.numeric.theories.fischer import fluctuations as FL


def _one_step(fn):
    return getattr(fn, "unchecked", fn)


def reference(K0, L, rho, sw, sb, activation, eta0=1.0, swo=None, sbo=None):
    """K^(L), chi^(L), K_out, chi_out of a (P, P) input kernel by the one-step kernels of numeric/theories/fischer/generated/fischer.py,
    one layer at a time on the upper triangle (B9-B10, 45, 47, 48), with the clip |K_ab| <= sqrt(K_aa K_bb) and
    the pinned boundary elements (identical inputs) of the drivers."""
    kern = kernels(activation)
    res, resp = _one_step(gen.residual_kernel), _one_step(gen.residual_response)
    P = K0.shape[0]
    i, j = np.triu_indices(P, 1)
    d, o = np.diagonal(K0).astype(float).copy(), K0[i, j].astype(float)
    chi_d, chi_o = np.full(P, eta0), np.full(i.size, eta0)
    pinned = (np.abs(o) >= np.sqrt(d[i]) * np.sqrt(d[j]) * (1 - 1e-15)) & (d[i] == d[j]) & (o > 0)
    for _ in range(L):
        C_d = res(rho, sw, sb, kern.mean_phi_sq(d))
        eta_d = resp(rho, sw, kern.price_diag(d), chi_d)
        C_o = res(rho, sw, sb, kern.mean_phi_phi(d[i], d[j], o))
        eta_o = resp(rho, sw, kern.mean_dphi_dphi(d[i], d[j], o), chi_o)
        d = d + C_d
        bound = np.sqrt(d[i]) * np.sqrt(d[j])
        o = np.where(pinned, bound, np.clip(o + C_o, -bound, bound))
        chi_d, chi_o = chi_d + eta_d, chi_o + eta_o
    swo = sw if swo is None else swo
    sbo = sb if sbo is None else sbo

    def full(dd, oo):
        M = np.zeros((P, P))
        M[i, j] = M[j, i] = oo
        M[np.arange(P), np.arange(P)] = dd
        return M

    return {"K": full(d, o), "chi": full(chi_d, chi_o),
            "K_out": full(swo * kern.mean_phi_sq(d) + sbo, swo * kern.mean_phi_phi(d[i], d[j], o) + sbo),
            "chi_out": full(swo * kern.price_diag(d) * chi_d, swo * kern.mean_dphi_dphi(d[i], d[j], o) * chi_o)}


def _close(a, b, rtol):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))) < rtol


def _K0(P, seed=0, duplicate=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, 5))
    if duplicate:
        X = np.concatenate([X, X[:duplicate]])
    return scaled_kernel(X, 0.3)


@pytest.mark.parametrize("activation", ["erf", "relu", "tanh", "linear"])
def test_nngp_equals_the_per_layer_loop(activation):
    """nngp (the residual engine for erf/ReLU, the vector-mode recursions otherwise) = the per-layer loop."""
    K0 = _K0(6, seed=1)
    got = F.nngp(K0, 25, 0.6, 1.3, 0.1, activation=activation, eta0=1.7)
    ref = reference(K0, 25, 0.6, 1.3, 0.1, activation, eta0=1.7)
    for key in ("K", "chi", "K_out", "chi_out"):
        assert _close(got[key], ref[key], 1e-12), key
        assert np.array_equal(got[key], got[key].T), key


@pytest.mark.parametrize("activation", ["erf", "relu"])
def test_identical_inputs_stay_on_the_boundary_at_depth(activation):
    """Duplicated inputs: K_ab stays sqrt(K_aa) sqrt(K_bb) at every depth (pinned; unpinned, the last-ulp misses
    grow along the unstable correlation-one manifold: 7e-3 in chi at L = 5000 for erf), and chi_ab equals the
    identical-input response of :func:`response` and the per-layer loop."""
    K0 = _K0(5, seed=2, duplicate=2)
    L = 3000
    got = F.nngp(K0, L, 0.3, 1.3, 0.1, activation=activation)
    K = got["K"]
    assert K[0, 5] == np.sqrt(K[0, 0]) * np.sqrt(K[5, 5]) and K[1, 6] == np.sqrt(K[1, 1]) * np.sqrt(K[6, 6])
    ref = reference(K0, L, 0.3, 1.3, 0.1, activation)
    assert _close(got["K"], ref["K"], 1e-12)
    assert _close(got["chi"], ref["chi"], 1e-11)  # 3000 layers of round-off
    pair = F.response(K0[0, 0], L, 0.3, 1.3, 0.1, input_kernel_offdiag=K0[0, 0], activation=activation)
    assert _close(got["chi"][0, 5], pair["chi_offdiag"][-1], 1e-11)


def test_nngp_layers_and_eta0():
    """keep_layers: K, C, eta per layer by the one-step kernels from the kept layers; C = K^(l) - K^(l-1)."""
    K0 = _K0(4, seed=3)
    for activation in ("erf", "tanh"):
        r = F.nngp(K0, 6, 0.5, 1.3, 0.1, activation=activation, eta0=2.0, keep_layers=True)
        assert r["K_layers"].shape == (7, 4, 4)
        np.testing.assert_array_equal(r["K_layers"][0], K0)
        np.testing.assert_array_equal(r["eta_layers"][0], np.full((4, 4), 2.0))
        assert np.allclose(np.diff(r["K_layers"], axis=0), r["C_layers"][1:], rtol=1e-12, atol=1e-15)
        assert np.allclose(np.cumsum(r["eta_layers"], axis=0)[-1], r["chi"], rtol=1e-12, atol=0)
        assert _close(r["K_layers"][-1], r["K"], 1e-15)


@pytest.mark.parametrize("activation", ["erf", "relu", "tanh"])
def test_batched_scans_equal_the_per_layer_loop(activation):
    """_pair_pass (the <kind>_pair recursion) and chi_out_curves (propagate: <kind>_diagonal + <kind>_two_inputs)
    on a batch of rho and depths, against the per-layer loop element by element."""
    rho = np.array([0.05, 0.4, 1.1])
    depths = [2, 9, 30]
    k0, k0o = 0.3, -0.1
    fast = F._pair_pass(rho[None, :], 1.3, 0.07, 1.1, 0.02, k0, k0o, np.array(depths)[:, None], kernels(activation))
    curves = F.chi_out_curves(rho, depths, k0, 1.3, 0.07, input_kernel_offdiag=k0o, sigma_w2_out=1.1,
                              sigma_b2_out=0.02, activation=activation)
    K0 = np.array([[k0, k0o], [k0o, k0]])
    for a, L in enumerate(depths):
        for b, r in enumerate(rho):
            ref = reference(K0, L, r, 1.3, 0.07, activation, swo=1.1, sbo=0.02)
            for key, where in (("chi_out_diag", (0, 0)), ("chi_out_off", (0, 1)), ("K_diag", (0, 0)),
                               ("K_off", (0, 1)), ("K_out_off", (0, 1))):
                assert _close(fast[key][a, b], ref[key.split("_")[0] + ("_out" if "out" in key else "")][where],
                              1e-13), (key, L, r)
            assert _close(curves["chi_out"][a, b], ref["chi_out"][0, 0], 1e-13)
            assert _close(curves["chi_out_offdiag"][a, b], ref["chi_out"][0, 1], 1e-13)


def test_propagate_threads_over_chunks(monkeypatch):
    """Above _PARALLEL_MIN elements the vector-mode recursions run on a thread pool over chunks of elements:
    the same numbers as one chunk."""
    rho = np.geomspace(0.01, 1.0, 50)
    one = F.chi_out_curves(rho, [7, 20], 0.3, 1.3, 0.07, input_kernel_offdiag=0.1)
    monkeypatch.setattr(F, "_PARALLEL_MIN", 10)
    many = F.chi_out_curves(rho, [7, 20], 0.3, 1.3, 0.07, input_kernel_offdiag=0.1)
    np.testing.assert_array_equal(one["chi_out"], many["chi_out"])
    np.testing.assert_array_equal(one["chi_out_offdiag"], many["chi_out_offdiag"])


def test_response_layers_equal_the_recursion_states():
    """response: eta, C per layer are the recursion's own increments; chi = cumsum(eta) is its chi state."""
    r = F.response(0.3, 40, 0.5, 1.3, 0.1, input_kernel_offdiag=0.12, eta0=1.5)
    np.testing.assert_array_equal(np.cumsum(r["C"]), r["K"])  # K^(l) = K^(l-1) + C^(l), C^(0) = K^(0)
    assert r["eta"][0] == 1.5 and r["chi"][0] == 1.5
    ref = reference(np.array([[0.3, 0.12], [0.12, 0.3]]), 40, 0.5, 1.3, 0.1, "erf", eta0=1.5)
    assert _close(r["chi"][-1], ref["chi"][0, 0], 1e-13) and _close(r["chi_offdiag"][-1], ref["chi"][0, 1], 1e-13)
    assert _close(r["chi_out_offdiag"], ref["chi_out"][0, 1], 1e-13)


def test_fluctuation_recursion_equals_dense_quadratic_form():
    """The generated kernel_fluctuations recursion with an arbitrary symmetric kappa: N Var C^(l) and N Var K^(l)
    equal diag(G12 B G12^T) and its prefix sums (G12 the propagator block, B = w w^T kappa)."""
    rng = np.random.default_rng(5)
    L = 12
    n = L + 2
    w = np.concatenate([[0.0], rng.uniform(0.1, 0.5, L), [1.3]])
    g = np.concatenate([[0.0], rng.uniform(0.5, 1.5, L + 1)])
    A = rng.standard_normal((L + 1, L + 1))
    kappa = A @ A.T  # kappa(a, b), a, b = 0..L
    u = np.zeros(n)

    def row_sum(l, u_l, out):
        out[...] = u[1:l + 1] @ kappa[:l, l]
        u[l + 1] = u_l[0]

    var = np.zeros((2, n))

    def record(l, P, Q, vC, vK):
        var[:, l + 1] = vC[0], vK[0]

    frec.kernel_fluctuations(np.ones(1), np.zeros(1), np.zeros(1), np.zeros(1), w[1:], (w * g)[1:],
                             np.diagonal(kappa), cumulant_row_sum=row_sum, record=record)
    G12 = np.zeros((n, n))
    for l in range(n):
        G12[l] = np.arange(n) == l
        if l > 0:
            G12[l] += w[l] * g[l] * G12[:l].sum(axis=0)
    B = np.zeros((n, n))
    B[1:, 1:] = np.outer(w[1:], w[1:]) * kappa
    cov = G12 @ B @ G12.T
    cum = np.cumsum(np.cumsum(cov, axis=0), axis=1)
    assert _close(var[0], np.diag(cov), 1e-12)
    assert _close(var[1, :L + 1], np.diag(cum)[:L + 1], 1e-12)


def test_kernel_fluctuations_overflow_is_a_parameter_error():
    from resprop.numeric.engine.validation import ParameterError

    with pytest.raises(ParameterError):
        FL.kernel_fluctuations(0.5, 5, 100, 0.3, 1e300, 0.05)


def test_generated_module_lists_its_recursions():
    names = set(frec.RECURSIONS)
    for kind in ("erf", "relu", "callback"):
        assert {f"{kind}_diagonal", f"{kind}_pair", f"{kind}_two_inputs"} <= names
    assert "kernel_fluctuations" in names
    assert frec.RECURSIONS["callback_two_inputs"]["callbacks"] == ["mean_phi_sq", "mean_phi_phi", "mean_dphi_dphi"]


def test_lowering_min_max_multi_argument_callbacks_rows_only():
    """derive/recursion.py: Min/Max lower to numpy.minimum/maximum, a callback may take several arguments, and a
    recursion without sequences runs over the length of its rows (vector mode)."""
    import types

    from resprop.derive.codegen import render_recursion_module
    from resprop.derive.recursion import Recursion
    from resprop.derive.results import Derivation, Source

    x, y, a, lo, hi = sp.symbols("x y a lo hi", real=True)
    f = sp.Function("f")
    rec = Recursion("toy", "toy", Source("fischer2025", "-"),
                    ((x, sp.Min(sp.Max(x * a + f(x, y), lo), hi)), (y, y + a * x)), rows=(a, lo, hi),
                    callbacks=("f",))
    src = render_recursion_module(Derivation("toy", "toy", "fischer2025"), "(test)", [rec])
    mod = types.ModuleType("toy")
    exec(compile(src, "<toy>", "exec"), mod.__dict__)
    rng = np.random.default_rng(0)
    x0, y0 = rng.standard_normal(7), rng.standard_normal(7)
    A = rng.uniform(0.5, 1.5, 7)
    L = 5

    def cb(l, u, v, out):
        np.copyto(out, np.sin(u) * v + l)

    X, Y = mod.toy(x0.copy(), y0.copy(), np.broadcast_to(A, (L, 7)), np.full(L, -0.8), np.full(L, 0.9), f=cb)
    xr, yr = x0.copy(), y0.copy()
    for l in range(L):
        xr, yr = np.minimum(np.maximum(xr * A + np.sin(xr) * yr + l, -0.8), 0.9), yr + A * xr
    np.testing.assert_allclose(X, xr, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(Y, yr, rtol=1e-14, atol=1e-15)
