"""Issue 23.2, "every variance": the Gaussian expectations of the generated code against mpmath for variances
1e-8 .. 1e8 (references precomputed at 30 digits by tests/data/make_variance_references.py, independent of the
code under test), or a ParameterError naming the variance.

1-D: relative error of E[phi^2], E[phi'^2] (both routes: `expectations.kernels` and `dual_tables.diagonal`).
2-D: error of E[phi phi], E[phi' phi'] relative to the Cauchy--Schwarz scale sqrt(E f(u)^2 E f(v)^2) (the value
itself can vanish, e.g. at rho = 0 for odd phi).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from resprop.numeric.engine import dual_tables
from resprop.numeric.engine.expectations import kernels
from resprop.numeric.engine.validation import ParameterError

DATA = json.loads((Path(__file__).parent / "data" / "variance_references.json").read_text())
RTOL = 1e-10
ONE = {(r["activation"], r["K"]): (float(r["phi2"]), float(r["dphi2"])) for r in DATA["one"]}
ACTIVATIONS = sorted({r["activation"] for r in DATA["one"]})


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_one_dimensional_every_variance(activation):
    rows = [(K, v) for (a, K), v in ONE.items() if a == activation]
    K = np.array([k for k, _ in rows])
    ref = np.array([v for _, v in rows])
    kern = kernels(activation)
    got_phi = kern.mean_phi_sq(K)
    assert np.max(np.abs(got_phi / ref[:, 0] - 1)) <= RTOL
    # <phi'^2> through the tabulated route's diagonal (smooth, non-oscillating activations; sin^2 is refused
    # there at large K, below)
    if activation != "sin(x)**2":
        a, b = dual_tables.diagonal(activation.replace("tanh", "tanh(x)") if activation == "tanh" else activation, K)
        assert np.max(np.abs(a / ref[:, 0] - 1)) <= RTOL
        assert np.max(np.abs(b / ref[:, 1] - 1)) <= RTOL


def _two_rows():
    rows = list(DATA["two"])
    # rho = 0: the product of 1-D expectations E f(u) E f(v) is not a check of the 2-D rule for even phi only;
    # the 1-D references give E phi(u)^2 for the scale
    return rows


@pytest.mark.parametrize("row", _two_rows(), ids=lambda r: f"{r['activation']}-{r['K_aa']:g}-{r['K_ab']:g}")
def test_two_dimensional_every_variance(row):
    kern = kernels(row["activation"])
    Ka, Kb, Kab = row["K_aa"], row["K_bb"], row["K_ab"]
    for key, fn, sq in (("phiphi", kern.mean_phi_phi, kern.mean_phi_sq), ("dphidphi", kern.mean_dphi_dphi, None)):
        got = float(fn(Ka, Kb, Kab))
        ref = float(row[key])
        if sq is not None:
            scale = math.sqrt(float(sq(Ka)) * float(sq(Kb)))
        else:
            one = {k: v for (a, k), v in ONE.items() if a == row["activation"]}
            scale = math.sqrt(one[Ka][1] * one[Kb][1]) if Ka in one and Kb in one else abs(ref)
        assert abs(got - ref) <= RTOL * scale, (key, got, ref)


def test_oscillating_activation_refused_naming_the_variance():
    kern = kernels("sin(x) + x**2/10")  # no closed form, oscillates at large |x|
    with pytest.raises(ParameterError, match="K_aa = 1e"):
        kern.mean_phi_phi(1e8, 1e8, 0.5e8)
    with pytest.raises(ParameterError, match=r"variances <= "):
        kern.mean_phi_sq(1e8)
    assert np.isfinite(kern.mean_phi_sq(1.0))
    with pytest.raises(ParameterError, match="^d"):
        dual_tables.diagonal("sin(x)**2", [1e8])


def test_response_offdiagonal_eta_tanh():
    """`resprop response --rho 1 --depth 1 --input-kernel 50 --input-kernel-offdiag 30 --sigma-w2 1 --sigma-b2 0
    --activation tanh`: eta_offdiag = sigma_w2 E[tanh'(u) tanh'(v)], K = [[50, 30], [30, 50]] (it was 10.6% low with
    the 128^2 Gauss--Hermite rule).  Reference: nested adaptive mpmath quadrature at 30 digits."""
    ref = float(DATA["eta_offdiag_tanh_50_30"])
    got = float(kernels("tanh").mean_dphi_dphi(50.0, 50.0, 30.0))
    assert abs(got - ref) <= RTOL * abs(ref)
