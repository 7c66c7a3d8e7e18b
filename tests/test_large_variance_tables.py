"""Issue 23 items 2-3: closed forms and tables at large (and tiny) variances.

Independent routes: sin(x)^2 through resprop.kernel against a plain loop over the textbook closed form
1/4 - exp(-2 K_aa)/4 - exp(-2 K_bb)/4 + (exp(-2(K_aa + K_bb + 2 K_ab)) + exp(-2(K_aa + K_bb - 2 K_ab)))/8 evaluated
in mpmath at 40 digits (the exponents merged by hand, so nothing overflows; at 40 digits nothing cancels), and the
tables against tests/data/variance_references.json (mpmath, tests/data/make_variance_references.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

import resprop
from resprop.derive.closed_forms import closed_form_dual, stable_dual

REFS = json.loads((Path(__file__).parent / "data" / "variance_references.json").read_text())


def _sin2_loop(X, L, sw, sb, ntk=True):
    """NNGP and NTK of the sin^2 residual network (gamma = branch_scale = 1) by a plain mpmath loop."""
    with mp.workdps(40):
        P, dim = X.shape
        G = [[sum(mp.mpf(float(X[i, k])) * mp.mpf(float(X[j, k])) for k in range(dim)) for j in range(P)]
             for i in range(P)]
        K = [[mp.mpf(sw) * G[i][j] / dim + mp.mpf(sb) for j in range(P)] for i in range(P)]
        T = [row[:] for row in K]
        for _ in range(L):
            Kn = [[None] * P for _ in range(P)]
            Tn = [[None] * P for _ in range(P)]
            for i in range(P):
                for j in range(P):
                    a, b, c = K[i][i], K[j][j], K[i][j]
                    E = (mp.mpf(1) / 4 - mp.exp(-2 * a) / 4 - mp.exp(-2 * b) / 4
                         + (mp.exp(-2 * (a + b + 2 * c)) + mp.exp(-2 * (a + b - 2 * c))) / 8)
                    Ed = (mp.exp(-2 * (a + b - 2 * c)) - mp.exp(-2 * (a + b + 2 * c))) / 2  # E sin 2u sin 2v
                    Kn[i][j] = c + sw * E + sb
                    Tn[i][j] = T[i][j] + sw * E + sb + sw * Ed * T[i][j]
            K, T = Kn, Tn
        return (np.array([[float(v) for v in row] for row in K]), np.array([[float(v) for v in row] for row in T]))


@pytest.mark.parametrize("norm", [1e-4, 1e-2, 1.0, 10.0, 40.0])
@pytest.mark.parametrize("sb", [0.05, 0.0])
def test_sin2_kernel_any_norm(norm, sb):
    X = np.random.default_rng(1).normal(size=(5, 3))
    X *= norm / np.linalg.norm(X, axis=1, keepdims=True)
    X[4] = -X[0]  # an anti-correlated pair (K_ab < 0)
    K, T = resprop.kernel(X, "sin(x)**2", 3, 1.0, sb, ntk=True)
    Kr, Tr = _sin2_loop(X, 3, 1.0, sb)
    assert np.all(np.isfinite(K)) and np.all(np.isfinite(T))
    np.testing.assert_allclose(K, Kr, rtol=1e-12, atol=0)
    np.testing.assert_allclose(T, Tr, rtol=1e-12, atol=1e-12 * np.abs(Tr).max())


@pytest.mark.parametrize("expr", ["sin(x)**2", "sin(x)", "cos(x)", "sin(2*x + 3/10)", "exp(x)", "exp(x)*cos(x)",
                                  "1 + cos(x)"])
def test_stable_dual_equals_closed_form(expr):
    """stable_dual is the same function as closed_form_dual (40-digit evaluation at spread points)."""
    e = sp.sympify(expr, locals={"x": sp.Symbol("x", real=True)})
    ref, new = closed_form_dual(e), stable_dual(e)
    assert ref is not None and new is not None and set(ref) == set(new)
    for key in ref:
        for pt in ((0.3, 0.5, 0.2), (0.3, 0.5, -0.2), (2.0, 1.5, 1.7), (1e-3, 2e-3, -1e-3)):
            names = dict(zip(("K_aa", "K_bb", "K_ab"), map(sp.Rational, map(str, pt)))) | {"K": sp.Rational(str(pt[0]))}
            a, b = ([(s, names[s.name]) for s in f.free_symbols] for f in (ref[key], new[key]))
            va, vb = sp.N(ref[key].subs(a), 40), sp.N(new[key].subs(b), 40)
            assert abs(va - vb) <= 1e-30 * max(1, abs(va)), (key, pt, va, vb)
