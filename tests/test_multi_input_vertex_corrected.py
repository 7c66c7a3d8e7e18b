"""The corrected multi-input four-point vertex (derive/theories/pdlt_vertex.py, numeric/theories/pdlt/
multi_input_corrected.py): B.25 plus the same-neuron cross-layer source of the delta method.

Independent routes: SymPy (the delta-method recursion equals B.25 plus the Delta source; at P = 1 the source is
2 chi C_W Delta of the single-input derivation), the single-input corrected theory (arc-cosine closed form and
Hermite channels, a different quadrature) at P = 1 and for the diagonal element at P = 2, Isserlis and
factorised arc-cosine kernels for the cross-layer moments, and Monte Carlo of the empirical kernel.
Theory vs simulation: n Cov(G_ab, G_cd) at fixed depth, leading order in 1/n; tolerance 4 SE plus the allowance
((l + 1)/n) |theory| at layer l for the next order (the convention of tests/test_multi_input_vertex.py).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import sympy as sp

from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.pdlt import corrected as C
from resprop.numeric.theories.pdlt import multi_input_corrected as MC

_equiangular = MC.equiangular_kernel


# --------------------------------------------------------------------------- symbolic
def test_one_input_source_is_two_chi_cw_delta():
    from resprop.derive.theories import pdlt_vertex as dv

    (corr,) = dv.corrected_update_from_influence(1).values()
    K0 = sp.Symbol("K_00", real=True)
    g = sp.Function("g_00")(K0)
    delta = sp.Symbol("Delta_00_00", real=True)
    chi = dv.gamma**2 + dv.C_W * sp.Derivative(g, K0)  # B.15 with Phi' = dg/dK
    assert sp.expand(corr - 2 * chi * dv.C_W * delta) == 0  # the source of pdlt_corrected's vertex_corrected


def test_two_input_influence_recursion_derives():
    from resprop.derive.theories import pdlt_vertex as dv

    out = dv.multi_input_influence_recursion(2)
    assert set(out) == {(0, 0), (0, 1), (1, 1)}
    assert len(dv.corrected_update_from_influence(2)) == 6


# --------------------------------------------------------------------------- reductions
@pytest.mark.parametrize("activation,gamma2", [("relu", 0.5), ("relu", 0.25), ("leaky_relu:0.5", 0.75),
                                               ("tanh", 0.5), ("erf", 0.25), ("gelu", 0.5), ("gelu", 0.0)])
def test_one_input_is_the_corrected_single_input_theory(activation, gamma2):
    r = MC.multi_input_vertex_corrected(np.array([[1.0]]), activation, math.sqrt(gamma2), 5)
    tr = C.corrected_trajectory(activation, gamma2, 5)  # the same depth convention: 6 layers, 0..5
    np.testing.assert_allclose(r.K[:, 0, 0], tr.K, rtol=1e-9)
    np.testing.assert_allclose(r.V[:, 0, 0, 0, 0], tr.V_corrected, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(r.V_b25[:, 0, 0, 0, 0], tr.V_b26, rtol=1e-7, atol=1e-12)


def test_diagonal_element_of_two_inputs_is_the_single_input_value():
    """V_(00)(00) depends on input 0 alone: from the four-dimensional joint quadrature at P = 2 it must equal the
    single-input closed form (arc-cosine kernel of degree 2) at the same K_00."""
    r = MC.multi_input_vertex_corrected(_equiangular(2, np.pi / 3), "relu", math.sqrt(0.5), 4)
    tr = C.corrected_trajectory("relu", 0.5, 4)
    np.testing.assert_allclose(r.V[:, 0, 0, 0, 0], tr.V_corrected, rtol=1e-8)
    np.testing.assert_allclose(r.V[:, 1, 1, 1, 1], tr.V_corrected, rtol=1e-8)


def test_vanilla_mlp_is_b25():
    r = MC.multi_input_vertex_corrected(_equiangular(3, 1.0), "tanh", 0.0, 3)
    np.testing.assert_array_equal(r.V, r.V_b25)
    assert np.all(r.Delta == 0)


def test_corrected_vertex_symmetries():
    r = MC.multi_input_vertex_corrected(_equiangular(2, 0.8), "relu", math.sqrt(0.5), 3)
    V = r.V[-1]
    np.testing.assert_allclose(V, V.transpose(1, 0, 2, 3), atol=1e-12)
    np.testing.assert_allclose(V, V.transpose(2, 3, 0, 1), atol=1e-12)
    assert not np.allclose(r.V, r.V_b25)


# --------------------------------------------------------------------------- cross-layer moments
@pytest.mark.parametrize("P", [2, 3])
def test_linear_cross_moment_is_isserlis(P):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((2 * P, 2 * P))
    J = A @ A.T / (2 * P) + 0.5 * np.eye(2 * P)
    Ke, Kl, Cx = J[:P, :P], J[P:, P:], J[:P, P:]
    F = MC.cross_layer_moment(Ke, Kl, Cx, "linear")
    for a, b, c, d in itertools.product(range(P), repeat=4):
        u, v, w, x = a, b, P + c, P + d
        exact = J[u, v] * J[w, x] + J[u, w] * J[v, x] + J[u, x] * J[v, w]
        assert F[a, b, c, d] == pytest.approx(exact, rel=1e-9, abs=2e-9)  # 4-D cones: 28 nodes per angle


def _arccos1(K11, K22, K12):
    """E[relu(x) relu(y)] (arc-cosine kernel of degree 1, Cho & Saul)."""
    s = math.sqrt(K11 * K22)
    rho = K12 / s
    return s * (math.sqrt(1 - rho**2) + (math.pi - math.acos(rho)) * rho) / (2 * math.pi)


@pytest.mark.parametrize("P", [2, 3])
def test_relu_cross_moment_factorises_over_independent_inputs(P):
    """Inputs uncorrelated with each other: <s(u_0) s(u_1) s(v_0) s(v_1)> = <s(u_0) s(v_0)> <s(u_1) s(v_1)>."""
    Ke = np.diag([1.0, 1.3, 0.8][:P])
    Kl = np.diag([1.2, 0.9, 1.1][:P])
    Cx = np.diag([0.7, 0.5, 0.6][:P])
    F = MC.cross_layer_moment(Ke, Kl, Cx, "relu")
    exact = _arccos1(Ke[0, 0], Kl[0, 0], Cx[0, 0]) * _arccos1(Ke[1, 1], Kl[1, 1], Cx[1, 1])
    assert F[0, 1, 0, 1] == pytest.approx(exact, rel=1e-10)
    assert F[0, 0, 1, 1] == pytest.approx((Ke[0, 0] / 2) * (Kl[1, 1] / 2), rel=1e-10)  # <relu(x)^2> = K/2


@pytest.mark.parametrize("gamma2,rtol", [(0.8, 1e-6), (0.9, 1e-4), (MC.MAX_GAMMA2_SCALE_INVARIANT, 1e-3)])
def test_cross_layer_quadrature_accuracy_near_the_gamma_limit(gamma2, rtol):
    """The cone rules resolve strongly correlated consecutive layers less well: the documented accuracy of the
    diagonal element against the single-input closed form up to MAX_GAMMA2_SCALE_INVARIANT."""
    r = MC.multi_input_vertex_corrected(_equiangular(2, np.pi / 3), "relu", math.sqrt(gamma2), 3)
    tr = C.corrected_trajectory("relu", gamma2, 3)
    np.testing.assert_allclose(r.V[:, 0, 0, 0, 0], tr.V_corrected, rtol=rtol)


def test_three_inputs_take_the_engine():
    """route="auto" at P = 3 runs the finite-width kernel engine (its channels climbed along MANY_INPUT_LADDER) and
    lands within 1e-7 (the cone quadrature's accuracy) plus the engine's own truncation estimate of the O(depth^2)
    quadrature route, every quadruple of V and Delta at every layer."""
    K = _equiangular(3, 1.0)
    a = MC.multi_input_vertex_corrected(K, "relu", math.sqrt(0.5), 2)
    q = MC.multi_input_vertex_corrected(K, "relu", math.sqrt(0.5), 2, route="quadrature")
    assert a.route == "engine" and a.channels > 12 and q.route == "quadrature" and q.truncation is None
    scale = np.abs(q.V).max()
    assert np.abs(a.V - q.V).max() <= (1e-7 + a.truncation) * scale
    assert np.abs(a.Delta - q.Delta).max() <= (1e-7 + a.truncation) * scale
    assert np.abs(a.V - a.V_b25).max() > 1e-4 * scale  # the cross-layer correction is there


def test_bad_input_raises_parameter_error():
    """The O(depth^2) quadrature route keeps its depth cap and its gamma limits; route="auto" for P <= 4 goes to the
    finite-width kernel engine (issue 27), which has neither."""
    with pytest.raises(ParameterError) as err:
        MC.multi_input_vertex_corrected(np.eye(3), "relu", 0.5, MC.MAX_DEPTH + 1, route="quadrature")
    assert "depth" in str(err.value)
    for act, g2 in (("relu", 0.96), ("tanh", float(np.nextafter(1.0, 0.0)))):
        with pytest.raises(ParameterError) as err:
            MC.multi_input_vertex_corrected(np.eye(3), act, math.sqrt(g2), 2, route="quadrature")
        assert err.value.parameter == "gamma"
    deep = MC.multi_input_vertex_corrected(np.array([[1.0, 0.3], [0.3, 1.5]]), "relu", math.sqrt(0.96),
                                           MC.MAX_DEPTH + 1)
    assert np.all(np.isfinite(deep.V)) and deep.V.shape[0] == MC.MAX_DEPTH + 2
    with pytest.raises(ParameterError) as err:
        MC.cross_layer_moment(np.eye(2), np.eye(3), np.eye(2), "relu")
    assert "K_early" in str(err.value)


# --------------------------------------------------------------------------- Monte Carlo
def _deviations(K, activation, gamma, depth, width, samples, seed):
    """Per layer l and element: (|MC - theory| - ((l + 1)/n)|theory|)/SE for the corrected theory and B.25."""
    r = MC.compare_with_simulation(K, activation, gamma, depth, width, samples, seed)
    return {"corrected": r["excess_corrected"], "b25": r["excess_b25"]}


def test_two_input_relu_corrected_matches_simulation_b25_does_not():
    """ReLU, gamma^2 = 1/2 (critical C_W = 1), P = 2 at 60 degrees, layers 0-2 (depth 2), n = 512: every element
    within 4 SE + allowance of the corrected vertex; B.25 misses the diagonal at layer 2 by more than 8 SE."""
    dev = _deviations(_equiangular(2, np.pi / 3), "relu", math.sqrt(0.5), 2, 512, 24000, seed=61)
    assert dev["corrected"].max() <= 4
    assert dev["b25"][2, 0, 0, 0, 0] > 8


def test_two_input_gelu_corrected_matches_simulation_b25_does_not():
    """GELU (outside App. B's classes; C_W keeps K_aa = 1 fixed), gamma^2 = 1/2, P = 2 at 60 degrees, n = 512."""
    dev = _deviations(_equiangular(2, np.pi / 3), "gelu", math.sqrt(0.5), 2, 512, 16000, seed=91)
    assert dev["corrected"].max() <= 4
    assert dev["b25"][2, 0, 0, 0, 0] > 6


CAMPAIGN = [(P, theta, act, g2) for P in MC.CAMPAIGN["P"] for theta in MC.CAMPAIGN["theta"]
            for act, g2 in MC.CAMPAIGN["models"]]


@pytest.mark.slow
@pytest.mark.parametrize("P,theta,activation,gamma2", CAMPAIGN)
def test_corrected_vertex_campaign(P, theta, activation, gamma2):
    for width, seed in MC.CAMPAIGN["widths"]:
        dev = _deviations(_equiangular(P, theta), activation, math.sqrt(gamma2), MC.CAMPAIGN["depth"], width,
                          MC.CAMPAIGN["samples"], seed=seed + P)
        assert dev["corrected"].max() <= 4
