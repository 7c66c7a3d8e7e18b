"""Equal-variance tables at large variance interpolated across the variance (`numeric/engine/table_family.py`).

References: the mpmath values of tests/data/variance_references.json (d = 30 and 1000: tanh, SiLU, softplus, atan)
and tables built directly by `dual_tables` at the same d (an independent construction at that d, not an
interpolation).  The window check must be able to fail: with too few interpolation points it refuses and the
direct table is used."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import resprop
from resprop.numeric.engine import dual_tables as dt
from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine import table_family as TF

REFS = json.loads((Path(__file__).parent / "data" / "variance_references.json").read_text())
EXPRS = {"tanh": "tanh(x)", "x/(1+exp(-x))": "x/(1 + exp(-x))", "log(1+exp(x))": "log(1 + exp(x))",
         "atan(x)": "atan(x)"}


@pytest.mark.parametrize("case", [r for r in REFS["tables"] if r["d"] > dt.D_SERIES],
                         ids=lambda r: f"{r['activation']}-{r['d']:g}-{r['rho']:.6g}")
def test_interpolated_table_vs_mpmath(case):
    table = TF.table(EXPRS[case["activation"]], case["d"])
    assert table.error_bound <= 1e-10
    f, g = table.both(np.array([case["rho"]]))
    assert abs(f[0] - float(case["phiphi"])) <= 1e-10 * table.scale_phi
    assert abs(g[0] - float(case["dphidphi"])) <= 1e-10 * table.scale_dphi


@pytest.mark.parametrize("expr", ["tanh(x)", "x/(1 + exp(-x))", "atan(x)"])
@pytest.mark.parametrize("d", [5.5, 11.0, 20.5, 33.3, 77.7, 150.0, 420.0, 2500.0])
def test_interpolated_table_equals_a_direct_table(expr, d):
    """Against the table built directly at d on the same intervals, at variances that are not the windows' checked
    midpoints: within rtol / 4 = 2.5e-11 of the scale, the criterion the window checks apply (measured above d = 20:
    ~7e-13 for f, ~1e-12 for g; between 5 and 20 up to ~1e-11), far below the tables' 1e-10."""
    interp = TF.table(expr, d)
    act = dt.activation(expr)
    ser, cf, cg, _, _ = dt.large_variance_parts(act, d, TF.M_ANCHOR, 1e-10)
    direct = dt.DualTable(act, d, d, ser, cf, cg, 0.0, 0.0, 1.0 / math.sqrt(d))
    f_i, g_i = interp.both(TF._CHECK_RHO)
    f_d, g_d = direct.both(TF._CHECK_RHO)
    assert np.max(np.abs(f_i - f_d)) <= 2.5e-11 * ser.scale_f
    assert np.max(np.abs(g_i - g_d)) <= 2.5e-11 * ser.scale_g


def test_a_window_that_does_not_check_falls_back_to_direct_tables(monkeypatch):
    """Four points cannot interpolate to rtol / 4: the window check refuses and build_table is used."""
    monkeypatch.setattr(TF, "POINTS", 4)
    TF._window_error.cache_clear()
    try:
        d = 57.0
        j0 = math.floor(TF.ANCHORS_PER_OCTAVE * math.log2(d / TF.D_ANCHOR0))
        assert TF._window_error(dt.activation("tanh(x)").key, j0, 1e-10) > 1e-10 / 4
        table = TF.table("tanh(x)", d)
        direct = dt.build_table("tanh(x)", d, d)
        rho = np.linspace(-1, 1, 1001)
        assert np.array_equal(table.mean_phi_phi(rho), direct.mean_phi_phi(rho))
    finally:
        TF._window_error.cache_clear()


def test_outside_the_large_range_tables_are_built_directly():
    for d in (0.5, TF.D_MIN):
        assert not TF.applies(d)
        rho = np.linspace(-1, 1, 101)
        assert np.array_equal(TF.table("tanh(x)", d).mean_phi_phi(rho), dt.build_table("tanh(x)", d, d)
                              .mean_phi_phi(rho))


def test_kernel_at_growing_variance_blocks_and_direct_tables():
    """tanh at branch_scale = 1 (the variance grows past 20 within 30 layers): every block size gives the same
    bits (a table depends only on its layer's d), and the kernels differ from the run with direct tables by
    <= 1e-11 of the largest entry."""
    X = np.random.default_rng(0).standard_normal((40, 5))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    K0 = resprop.kernel(X, "tanh", 0, 1.0, 0.05)
    seq = (np.ones(30), np.ones(30), np.full(30, 0.05))
    runs = [RK.propagate(K0, K0.copy(), seq, "ntk", RK.recursions("tanh"), block=b) for b in (None, 1, 7)]
    for r in runs[1:]:
        assert np.array_equal(r.K, runs[0].K) and np.array_equal(r.second, runs[0].second)
    assert runs[0].K[0, 0] > 20  # the last layers are in the interpolated range
    import unittest.mock as um

    with um.patch.object(TF, "applies", lambda d: False):
        direct = RK.propagate(K0, K0.copy(), seq, "ntk", RK.recursions("tanh"))
    for a, b in ((runs[0].K, direct.K), (runs[0].second, direct.second)):
        assert np.max(np.abs(a - b)) <= 1e-11 * np.max(np.abs(b))
