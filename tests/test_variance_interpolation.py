"""Interpolation in log d of functions of the variance (`numeric/engine/variance_interpolation.py`), used by the
general path for the Hermite coefficients and E[phi^2], E[phi'^2] of all P diagonal values of a layer.

References are independent routes: the same quantities evaluated at every value (trapezoidal / graded rules), and
mpmath quadrature for the moments.  The check inside `on_values` must be able to fail: a function with a kink in
log d is never returned with the kink smoothed over."""
from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

from resprop.derive.activations import x as X
from resprop.numeric.engine import dual_tables as dt
from resprop.numeric.engine import variance_interpolation as vi

ACTIVATIONS = ("tanh(x)", "log(1 + exp(x))", "x/(1 + exp(-x))", "x*erf(x/sqrt(2))/2 + x/2", "atan(x)")


def _values(lo: float, hi: float, n: int = 400, seed: int = 0) -> np.ndarray:
    return np.unique(np.exp(np.random.default_rng(seed).uniform(np.log(lo), np.log(hi), n)))


@pytest.mark.parametrize("expr", ACTIVATIONS)
@pytest.mark.parametrize("span", [(0.15, 4.2), (1e-3, 10.0)])
def test_hermite_coefficients_interpolated_against_every_value(expr, span):
    act = dt.activation(expr)
    values = _values(*span)
    K = 200
    direct, _ = dt._hermite_coefficients(act, values, K, estimate=False)
    coefT, interpolated = dt._coefficients_at(act, values, K)
    coef = coefT.T
    assert interpolated, "400 values over this span must take the interpolation"
    amp = np.sqrt(np.sum(direct**2, axis=1))
    err = np.max(np.abs(coef - direct), axis=1) / amp
    # the check admits 1e-14 at the coarse level; the finer interpolant used is better
    assert np.max(err) <= 1e-14, f"{expr}: {np.max(err):.2e}"


@pytest.mark.parametrize("expr", ACTIVATIONS)
def test_moments_interpolated_against_mpmath(expr):
    act = dt.activation(expr)
    values = _values(0.05, 20.0, 300, seed=1)
    m_phi, m_dphi, _ = dt._moments_at(act, values)
    e = act.expr
    phi = sp.lambdify(X, e, "mpmath")
    dphi = sp.lambdify(X, sp.diff(e, X), "mpmath")
    mp.mp.dps = 30
    for i in (0, 57, 150, 299):
        d = mp.mpf(float(values[i]))
        dens = lambda u: mp.exp(-u * u / (2 * d)) / mp.sqrt(2 * mp.pi * d)  # noqa: E731
        ref_phi = mp.quad(lambda u: phi(u) ** 2 * dens(u), [-mp.inf, 0, mp.inf])
        ref_dphi = mp.quad(lambda u: dphi(u) ** 2 * dens(u), [-mp.inf, 0, mp.inf])
        assert abs(m_phi[i] - float(ref_phi)) <= 1e-14 * abs(float(ref_phi)), (expr, values[i])
        assert abs(m_dphi[i] - float(ref_dphi)) <= 1e-14 * abs(float(ref_dphi)), (expr, values[i])


def test_the_check_refuses_a_kink():
    """|log d - c|: not analytic, so the nested check never passes at 1e-14 and every value is evaluated."""
    values = _values(0.1, 10.0, 2000)
    c = 0.123

    def evaluate(d):
        return np.abs(np.log(d) - c)[:, None]

    out, nodes = vi.on_values(evaluate, values, lambda F: np.ones_like(F), 1e-14)
    assert nodes == 0
    assert np.array_equal(out, evaluate(values))


def test_the_check_passes_an_analytic_function_and_is_accurate():
    values = _values(0.1, 10.0, 2000)

    def evaluate(d):
        return np.column_stack([1 / (1 + d), np.sin(np.log(d))])

    out, nodes = vi.on_values(evaluate, values, lambda F: np.ones_like(F), 1e-14)
    assert 0 < nodes <= vi.N_MAX
    assert np.max(np.abs(out - evaluate(values))) <= 1e-14


def test_few_values_and_one_value_are_evaluated_directly():
    calls = []

    def evaluate(d):
        calls.append(d.size)
        return d[:, None] ** 2

    for values in (np.array([2.0]), np.linspace(1, 2, vi.MIN_VALUES - 1)):
        calls.clear()
        out, nodes = vi.on_values(evaluate, values, lambda F: np.ones_like(F), 1e-14)
        assert nodes == 0 and calls == [values.size]
        assert np.array_equal(out[:, 0], values**2)


def test_endpoint_values_are_exact_nodes():
    """The smallest and largest values are interpolation nodes: their rows are the evaluated ones (up to the
    rounding of exp(log d))."""
    values = _values(0.3, 3.0, 500)

    def evaluate(d):
        return np.column_stack([np.exp(-d), d])

    out, nodes = vi.on_values(evaluate, values, lambda F: np.abs(F), 1e-14)
    assert nodes > 0
    assert out[0, 1] == pytest.approx(values[0], rel=4e-16)
    assert out[-1, 1] == pytest.approx(values[-1], rel=4e-16)
