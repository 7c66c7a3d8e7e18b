"""The driver against independent routes: closed forms derived by hand for ReLU and linear networks, mpmath
quadrature at 30 digits (tanh, erf, a user expression), a 2-D Gauss--Hermite product rule, the paper's critical
point, and the iterated maps; bad input is a ParameterError naming the parameter."""
import math

import numpy as np
import pytest

from resprop.numeric.engine.validation import ParameterError
from resprop_schoenholz import driver as D
from resprop_schoenholz import mp_checks as M


def test_relu_and_linear_against_their_closed_forms():
    # ReLU: <phi^2>_q = q/2, <phi'^2> = 1/2, so q* = sigma_b^2 / (1 - sigma_w^2/2), chi_1 = chi_q = sigma_w^2/2, c* = 1
    # (the generated kernels chi_1_relu = chi_q_relu = sigma_w2/2 exactly)
    for sw, sb in ((1.0, 0.1), (1.5, 0.3), (1.9, 0.01)):
        r = D.depth_scales("relu", sw, sb)
        assert r.q_star == pytest.approx(sb / (1 - sw / 2), rel=1e-13)
        assert r.chi_q == pytest.approx(sw / 2, rel=1e-15) and r.chi_1 == pytest.approx(sw / 2, rel=1e-15)
        assert r.c_star == 1.0 and r.phase == "ordered" and r.closed_form and r.generated
        assert r.xi_c == pytest.approx(-1 / math.log(sw / 2), rel=1e-14)
    # ReLU's critical line is sigma_w^2 = 2 at sigma_b^2 = 0 (chi_1 = sigma_w^2 / 2 at every q*), and nowhere else
    assert D.critical_point("relu", 0.0).sigma_w2 == 2.0
    with pytest.raises(ParameterError, match="^sigma_b2:"):
        D.critical_point("relu", 0.05)
    # linear (resprop's expectation engine and the generic kernels): q* = sigma_b^2 / (1 - sigma_w^2), slopes sigma_w^2
    r = D.depth_scales("linear", 0.5, 0.2)
    assert r.q_star == pytest.approx(0.4, rel=1e-13) and r.chi_q == pytest.approx(0.5, rel=1e-14)
    assert not r.generated and r.closed_form


@pytest.mark.parametrize("named, expression", [("tanh", "tanh(x)"), ("erf", "erf(x)"),
                                               ("gelu", "x*(1 + erf(x/sqrt(2)))/2")])
def test_the_named_kernels_and_the_engine_route_agree(named, expression):
    """A named activation runs on its generated kernels, the same activation written as an expression on the
    generic kernels and resprop's expectation engine (its generated quadrature for that expression)."""
    a, b = D.depth_scales(named, 2.0, 0.1), D.depth_scales(expression, 2.0, 0.1)
    assert a.generated and not b.generated
    for key in ("q_star", "chi_q", "chi_1", "c_star", "chi_c"):
        assert getattr(a, key) == pytest.approx(getattr(b, key), rel=1e-11), key
    assert D.critical_point(named, 0.05).sigma_w2 == pytest.approx(D.critical_point(expression, 0.05).sigma_w2,
                                                                   rel=1e-11)


@pytest.mark.parametrize("activation, sw, sb", [("tanh", 1.5, 0.05), ("tanh", 2.5, 0.05), ("erf", 2.0, 0.1),
                                                ("x*exp(-x**2/2)", 3.0, 0.1), ("sin(x) + x/2", 1.2, 0.2)])
def test_fixed_point_and_slopes_against_mpmath(activation, sw, sb):
    r = D.depth_scales(activation, sw, sb)
    q = M.length_fixed_point(activation, sw, sb)
    assert r.q_star == pytest.approx(float(q), rel=1e-10)
    assert r.chi_1 == pytest.approx(float(M.chi_1(activation, sw, q)), rel=1e-10)
    assert r.chi_q == pytest.approx(float(M.chi_q(activation, sw, q)), rel=1e-10)
    assert r.xi_q == pytest.approx(-1 / math.log(abs(float(M.chi_q(activation, sw, q)))), rel=1e-9)


# tanh at q* = 2.5 has poles of tanh(sqrt(q*) z) at |Im z| = 0.98: the product rule needs 300 nodes there for 1e-10
@pytest.mark.parametrize("activation, sw, sb, nodes", [("tanh", 2.5, 0.05, 160), ("tanh", 4.0, 0.3, 300),
                                                       ("erf", 2.0, 0.1, 160)])
def test_correlation_fixed_point_against_a_product_rule(activation, sw, sb, nodes):
    r = D.depth_scales(activation, sw, sb)
    gh = M.gauss_hermite_correlation(activation, sw, sb, r.q_star, nodes=nodes)
    assert r.phase == "chaotic" and 0 <= r.c_star < 1
    assert r.c_star == pytest.approx(gh["c_star"], rel=1e-9)
    assert r.chi_c == pytest.approx(gh["chi_c"], rel=1e-9) and 0 < r.chi_c < 1


def test_without_bias_an_odd_activation_decorrelates_completely():
    # sigma_b^2 = 0, tanh odd: M(0) = sigma_w^2 <tanh>^2 / q* = 0, so c* = 0 in the chaotic phase
    r = D.depth_scales("tanh", 2.5, 0.0)
    assert r.phase == "chaotic" and r.c_star == 0.0
    gh = M.gauss_hermite_correlation("tanh", 2.5, 0.0, r.q_star)
    assert abs(gh["c_star"]) < 1e-12 and r.chi_c == pytest.approx(gh["chi_c"], rel=1e-9)


def test_iterated_maps_converge_to_the_fixed_points_at_the_rate_of_the_depth_scales():
    sw, sb = 2.5, 0.05
    r = D.depth_scales("tanh", sw, sb)
    tr = D.trajectory("tanh", sw, sb, input_kernel=1.0, input_correlation=0.9, depth=120)
    assert tr.q_aa[-1] == pytest.approx(r.q_star, rel=1e-12)
    assert tr.c[-1] == pytest.approx(r.c_star, abs=1e-4)
    # |c^(l) - c*| ~ exp(-l / xi_c): the ratio of successive deviations is chi_c deep in the network
    dev = np.abs(tr.c - r.c_star)
    assert dev[60] / dev[59] == pytest.approx(r.chi_c, rel=1e-3)
    devq = np.abs(tr.q_aa - r.q_star)
    assert devq[8] / devq[7] == pytest.approx(r.chi_q, rel=1e-2)


def test_critical_point_against_mpmath_and_the_paper():
    crit = D.critical_point("tanh", 0.05)
    sw_mp, q_mp = M.critical_point("tanh", 0.05)
    assert crit.sigma_w2 == pytest.approx(float(sw_mp), rel=1e-10)
    assert crit.q_star == pytest.approx(float(q_mp), rel=1e-9)
    assert abs(crit.sigma_w2 - 1.761) <= 5e-4  # Schoenholz et al.: sigma_b^2 = 0.05 -> sigma_w^2 = 1.761
    at = D.depth_scales("tanh", crit.sigma_w2, 0.05)
    assert at.phase == "critical" and at.xi_c is None
    below, above = D.depth_scales("tanh", 0.99 * crit.sigma_w2, 0.05), D.depth_scales("tanh", 1.01 * crit.sigma_w2, 0.05)
    assert below.phase == "ordered" and below.c_star == 1.0 and above.phase == "chaotic" and above.c_star < 1.0


def test_the_ends_of_the_critical_line_and_of_the_depth_scales():
    # sigma_b^2 = 0: the line starts at q* -> 0, where chi_1 = sigma_w^2 phi'(0)^2 = 1 (tanh: 1, erf: pi/4)
    assert D.critical_point("tanh", 0.0).sigma_w2 == 1.0
    assert D.critical_point("erf", 0.0).sigma_w2 == pytest.approx(math.pi / 4, rel=1e-15)
    small = D.critical_point("tanh", 1e-12)  # q* ~ 1e-4: sigma_w^2 = 1/<phi'^2>_{q*} just above 1
    assert small.sigma_w2 == pytest.approx(float(M.critical_point("tanh", 1e-12)[0]), rel=1e-9)
    # a vanishing weight variance: every deviation is gone after one layer (xi = 0), q* = sigma_b^2
    r = D.depth_scales("tanh", 5e-324, 1.0)
    assert r.q_star == 1.0 and r.xi_q == 0.0 and r.xi_c == 0.0
    # a subnormal bias variance in the ordered phase: q* = sigma_b^2 / (1 - sigma_w^2) to first order
    assert D.depth_scales("tanh", 0.5, 1e-320).q_star == pytest.approx(2e-320, rel=1e-3)


def test_xi_c_diverges_with_exponent_minus_one():
    fit = D.divergence_fit("tanh", 0.05)
    for side in ("ordered", "chaotic"):
        assert abs(fit[side]["slope"] + 1) <= 0.01, fit[side]
    # against the derivation's near-critical form 1/(1 - chi_c) - 1/2 at the closest point
    gen = D.generated()
    r = D.depth_scales("tanh", fit["ordered"]["sigma_w2"][0], 0.05)
    assert r.xi_c == pytest.approx(float(gen.xi_c_near_critical(r.chi_c)), rel=1e-6)


@pytest.mark.parametrize("call, name", [
    (lambda: D.depth_scales("tanh", -1.0, 0.05), "sigma_w2"),
    (lambda: D.depth_scales("tanh", float("nan"), 0.05), "sigma_w2"),
    (lambda: D.depth_scales("tanh", 1.0, -0.1), "sigma_b2"),
    (lambda: D.depth_scales("tanh", 0.5, 0.0), "sigma_b2"),        # the lengths collapse to q* = 0
    (lambda: D.depth_scales("relu", 2.5, 0.1), "sigma_w2"),        # no finite fixed point
    (lambda: D.depth_scales("sign(x)", 1.0, 0.1), "activation"),   # a jump: phi' has a Dirac delta
    (lambda: D.depth_scales("exp(x**2)", 1.0, 0.1), "activation"),
    (lambda: D.depth_scales("x + y", 1.0, 0.1), "activation"),
    (lambda: D.depth_scales("__import__('os')", 1.0, 0.1), "activation"),
    (lambda: D.critical_point("tanh", float("inf")), "sigma_b2"),
    (lambda: D.trajectory("tanh", 1.0, 0.1, 1.0, 1.5, 3), "input_correlation"),
    (lambda: D.trajectory("tanh", 1.0, 0.1, 1.0, 0.5, 0), "depth"),
])
def test_bad_input_is_a_parameter_error_naming_the_parameter(call, name):
    with pytest.raises(ParameterError) as err:
        call()
    assert str(err.value).startswith(f"{name}:"), err.value
