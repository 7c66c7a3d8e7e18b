"""The compiled Mehler series (`numeric/engine/mehler_compiled.py`) against the NumPy path of `dual_tables`, the
reference: bit for bit per element, over hypothesis-drawn diagonal values, correlations (including +-1, 0, values
outside [-1, 1], NaN) and group sizes; elements no ladder level certifies go to the pair quadrature on both routes;
and the backend switch."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resprop.numeric.engine import dual_tables as dt
from resprop.numeric.engine import mehler_compiled
from resprop.numeric.engine.validation import ParameterError

pytestmark = pytest.mark.skipif(not mehler_compiled.available(), reason="numba is not installed")

EXPRESSIONS = ("tanh(x)", "x*exp(-x**2/2)", "sin(x) + x**2/10")


def _both(data, ia, ib, rho, want_g, monkeypatch):
    out = {}
    for backend in ("numpy", "compiled"):
        monkeypatch.setattr(dt, "SERIES_BACKEND", backend)
        f = np.full(rho.shape, -7.0)
        g = np.full(rho.shape, -7.0) if want_g else None
        dt.mean_phi_phi_strip(data, ia, ib, rho, f, g)
        out[backend] = (f, g)
    return out["numpy"], out["compiled"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expr=st.sampled_from(EXPRESSIONS), n_values=st.integers(5, 40), seed=st.integers(0, 2**32 - 1),
       group=st.sampled_from([1, 2, 7, 64, 300]), want_g=st.booleans(), h=st.integers(1, 9), n=st.integers(1, 70))
def test_compiled_series_equals_numpy_bit_for_bit(monkeypatch, expr, n_values, seed, group, want_g, h, n):
    rng = np.random.default_rng(seed)
    values = np.sort(rng.uniform(0.05, 5.0, n_values))
    data = dt.general_data(expr, values, 1e-10, cache=False)
    ia, ib = rng.integers(0, values.size, h), rng.integers(0, values.size, n)
    rho = rng.uniform(-1.05, 1.05, (h, n))
    special = np.array([1.0, -1.0, 0.0, -0.0, np.nan, 1 - 1e-12, 0.9999, -0.999999])
    mask = rng.random((h, n)) < 0.2
    rho[mask] = rng.choice(special, int(mask.sum()))
    monkeypatch.setattr(mehler_compiled, "GROUP", group)
    (f0, g0), (f1, g1) = _both(data, ia, ib, rho, want_g, monkeypatch)
    assert np.array_equal(f0, f1, equal_nan=True)
    if want_g:
        assert np.array_equal(g0, g1, equal_nan=True)
    assert np.array_equal(np.isnan(f1), np.isnan(rho))


def test_uncertified_elements_go_to_the_pair_quadrature_on_both_routes(monkeypatch):
    """tanh at d ~ 30-60: K_LADDER[-1] terms do not certify |rho| -> 1, so those elements take the pair
    quadrature; the compiled route hands the same elements over and gets the same numbers."""
    values = np.linspace(30.0, 60.0, 6)
    data = dt.general_data("tanh(x)", values, 1e-10, cache=False)
    ia, ib = np.arange(6), np.arange(6)
    rho = np.full((6, 6), 0.3)
    rho[:, 0] = 1.0
    rho[:, 1] = -0.99999
    level = mehler_compiled.series_strip(data.coefT, data.logtail_f, data.logtail_g, np.asarray(data.levels),
                                         data.rtol / 50, ia, ib, rho, np.sqrt(data.values), True,
                                         np.empty((6, 6)), np.empty((6, 6)))
    assert np.any(level == len(data.levels)), "the case must exercise the fallback"
    (f0, g0), (f1, g1) = _both(data, ia, ib, rho, True, monkeypatch)
    assert np.array_equal(f0, f1) and np.array_equal(g0, g1)


def test_strided_and_non_contiguous_blocks(monkeypatch):
    rng = np.random.default_rng(5)
    values = np.sort(rng.uniform(0.2, 3.0, 12))
    data = dt.general_data("tanh(x)", values, 1e-10, cache=False)
    big = rng.uniform(-1, 1, (10, 40))
    rho = big[::2, ::3]  # a non-contiguous view
    ia, ib = rng.integers(0, 12, rho.shape[0]), rng.integers(0, 12, rho.shape[1])
    (f0, g0), (f1, g1) = _both(data, ia, ib, rho, True, monkeypatch)
    assert np.array_equal(f0, f1) and np.array_equal(g0, g1)
    out = np.empty((5, 28))[:, ::2]
    monkeypatch.setattr(dt, "SERIES_BACKEND", "compiled")
    dt.mean_phi_phi_strip(data, ia, ib, rho, out)
    assert np.array_equal(out, f0)


def test_backend_switch(monkeypatch):
    values = np.linspace(0.5, 2.0, 10)
    data = dt.general_data("tanh(x)", values, 1e-10, cache=False)
    rho = np.zeros((1, 1))
    monkeypatch.setattr(dt, "SERIES_BACKEND", "compiled")
    monkeypatch.setattr(mehler_compiled, "numba", None)
    with pytest.raises(ParameterError, match="backend"):
        dt.mean_phi_phi_strip(data, [0], [1], rho, np.empty((1, 1)))
    monkeypatch.setattr(dt, "SERIES_BACKEND", "auto")  # without numba: the NumPy path
    out = np.empty((1, 1))
    dt.mean_phi_phi_strip(data, [0], [1], rho, out)
    assert out[0, 0] == pytest.approx(float(data.coefT[0, 0] * data.coefT[0, 1]), rel=1e-15)


@pytest.mark.parametrize("expr", EXPRESSIONS + ("log(1 + exp(x))",))
def test_diagonal_data_is_the_same_on_both_backends(monkeypatch, expr):
    """The compiled tails (value by value) and NumPy's (blocks of values) give the same levels, coefficients and
    log tails, bit for bit, with the coefficients interpolated in log d (1000 values) and evaluated (40)."""
    X = np.random.default_rng(0).standard_normal((1000, 10))
    all_values = np.unique(np.sum(X**2, axis=1) / 10 + 0.05)
    for values in (all_values, all_values[::25]):
        out = {}
        for backend in ("numpy", "compiled"):
            monkeypatch.setattr(dt, "SERIES_BACKEND", backend)
            out[backend] = dt.general_data(expr, values, 1e-10, cache=False)
        a, b = out["numpy"], out["compiled"]
        assert a.levels == b.levels
        for name in ("coefT", "logtail_f", "logtail_g"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
