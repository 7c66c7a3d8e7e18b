"""The generated recursion engine: lowering (derive/recursion.py), the residual recursions, resprop.kernel, the CLI.

Independent routes: a naive full-matrix loop over the *textbook* dual kernels of `resprop.generated.gaussian`
(derived separately, printed elementwise), mpmath quadrature of the bivariate expectations, and direct
evaluation of each recursion's SymPy update with lambdify for the lowering.
"""
from __future__ import annotations

import math
import types

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

import resprop
import resprop.generated.gaussian as gg
from resprop.derive.codegen import KernelPrinter, render_recursion_module
from resprop.derive.recursion import Recursion, UnitClip, lower
from resprop.derive.results import Derivation, Source
from resprop.numeric.cli import main
from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine.kernel import input_kernel
from resprop.numeric.engine.validation import ParameterError

SW, SB = 1.25, 0.05


def _inputs(P=12, d=6, seed=0, unit=False):
    X = np.random.default_rng(seed).normal(size=(P, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * math.sqrt(d) if unit else X


def _naive(X, act, L, sw, sb, gamma=1.0, lam=None, ntk=False):
    """Full-matrix loop over the textbook dual kernels (generated.gaussian), no strips, no hoisting."""
    K = sw * X @ X.T / X.shape[1] + sb
    T = K.copy()
    lam = np.ones(L) if lam is None else lam
    for l in range(L):
        d = np.diagonal(K)
        a, b = np.broadcast_arrays(d[:, None], d[None, :])
        if act == "erf":
            E, Ed = gg.erf_mean_phi_phi(a, b, K), gg.erf_mean_dphi_dphi(a, b, K)
            Es, Eds = gg.erf_mean_phi_sq(d), gg.erf_mean_dphi_dphi(d, d, d)
        else:
            E, Ed = gg.relu_arccos1(a, b, K), gg.relu_arccos0(a, b, K)
            Es, Eds = d / 2, 0.5  # the diagonal forms: arccos at a computed C = 1 - eps would cost sqrt(eps)
        E[np.diag_indices_from(E)], Ed[np.diag_indices_from(Ed)] = Es, Eds
        l2 = lam[l] ** 2
        T = gamma**2 * T + l2 * (sw * E + sb + sw * Ed * T)
        K = gamma**2 * K + l2 * (sw * E + sb)
    return K, T


@pytest.mark.parametrize("act", ["erf", "relu"])
@pytest.mark.parametrize("gamma, scale", [(1.0, 0.3), (0.8, "1/sqrt(L)"), (1.0, "1/(sqrt(l)*log(l + 1))")])
def test_closed_forms_match_naive_loop(act, gamma, scale):
    X, L = _inputs(), 23
    K, T = resprop.kernel(X, act, L, SW, SB, gamma=gamma, branch_scale=scale, ntk=True)
    from resprop.numeric.engine.kernel import branch_scales

    Kn, Tn = _naive(X, act, L, SW, SB, gamma, branch_scales(scale, L), ntk=True)
    np.testing.assert_allclose(K, Kn, rtol=1e-12, atol=1e-13 * np.abs(Kn).max())
    np.testing.assert_allclose(T, Tn, rtol=1e-11, atol=1e-12 * np.abs(Tn).max())
    assert np.array_equal(K, K.T) and np.array_equal(T, T.T)
    np.testing.assert_allclose(resprop.kernel(X, act, L, SW, SB, gamma=gamma, branch_scale=scale), K, rtol=1e-13)


def test_strips_blocks_and_threads_do_not_change_the_result():
    X = _inputs(P=210, seed=3)
    K0 = SW * X @ X.T / X.shape[1] + SB
    L = 40
    seq = (np.ones(L), np.full(L, 0.09 * SW), np.full(L, 0.09 * SB))
    ref = RK.propagate(K0, K0.copy(), seq, "ntk", RK.recursions("erf"))
    for strip, block in ((500, 7), (40_000, 1), (1, 40)):
        out = RK.propagate(K0, K0.copy(), seq, "ntk", RK.recursions("erf"), strip=strip, block=block)
        np.testing.assert_allclose(out.K, ref.K, rtol=1e-15, atol=0)
        np.testing.assert_allclose(out.second, ref.second, rtol=1e-15, atol=0)


def test_per_layer_output():
    X = _inputs(P=9)
    K0 = SW * X @ X.T / X.shape[1] + SB
    L = 6
    seq = (np.ones(L), np.full(L, 0.5 * SW), np.full(L, 0.5 * SB))
    out = RK.propagate(K0, K0.copy(), seq, "ntk", RK.recursions("relu"), record_layers=True, block=4)
    assert len(out.layers) == L + 1
    for l in range(L + 1):
        Kl, Tl = _naive(X, "relu", l, SW, SB, lam=np.full(L, math.sqrt(0.5)), ntk=True)
        np.testing.assert_allclose(out.layers[l][0], Kl, rtol=1e-12)
        np.testing.assert_allclose(out.layers[l][1], Tl, rtol=1e-12)


def _mp_erf_pair(kaa, kbb, kab):
    """<erf(u) erf(v)> by a 1-D mpmath quadrature of the conditional form E_u[erf(u) erf(mu / sqrt(1 + 2 s^2))],
    mu = (kab / kaa) u, s^2 = kbb - kab^2 / kaa (E[erf(mu + s z)] = erf(mu / sqrt(1 + 2 s^2))): a route
    independent of the arcsine closed form."""
    mp.mp.dps = 25
    kaa, kbb, kab = mp.mpf(kaa), mp.mpf(kbb), mp.mpf(kab)
    s2 = max(kbb - kab**2 / kaa, mp.mpf(0))
    f = lambda u: mp.erf(u) * mp.erf(kab / kaa * u / mp.sqrt(1 + 2 * s2)) * mp.npdf(u, 0, mp.sqrt(kaa))  # noqa: E731
    return float(mp.quad(f, [-mp.inf, 0, mp.inf]))


def test_erf_depth_two_against_mpmath():
    X = np.array([[1.0, 0.3], [0.2, -1.1]])
    K = SW * X @ X.T / 2 + SB
    for _ in range(2):
        E = np.array([[_mp_erf_pair(K[a, a], K[b, b], K[a, b]) for b in range(2)] for a in range(2)])
        K = K + 0.25 * (SW * E + SB)
    np.testing.assert_allclose(resprop.kernel(X, "erf", 2, SW, SB, branch_scale=0.5), K, rtol=1e-12)


def test_deep_relu_does_not_overflow():
    """Unscaled ReLU ResNet, depth 10^5: K ~ 2^L overflows float64 at L ~ 1024; the engine rescales between blocks
    and returns the log scale (the diagonal grows exactly by (1 + sigma_w2/2) per layer at sigma_b2 = 0)."""
    X = _inputs(P=4)
    K0 = 2.0 * X @ X.T / X.shape[1]
    L = 100_000
    seq = (np.ones(L), np.full(L, 2.0), np.zeros(L))
    out = RK.propagate(K0, K0.copy(), seq, "ntk", RK.recursions("relu"))
    assert np.all(np.isfinite(out.K)) and np.all(np.isfinite(out.second))
    log_diag = np.log(np.diagonal(out.K)) + out.log_scale_K
    np.testing.assert_allclose(log_diag, np.log(np.diagonal(K0)) + L * math.log(2.0), rtol=1e-12)
    with pytest.raises(ParameterError, match="not finite"):
        resprop.kernel(X, "relu", 2000, 2.0, 0.0)


def test_integer_inputs_and_correlation_one():
    X = np.array([[1, 2], [1, 2], [2, 4], [3, -1]])  # integers; rows 0 and 1 identical, row 2 collinear
    for act in ("erf", "relu"):
        K, T = resprop.kernel(X, act, 50, 1, 0, ntk=True)
        assert np.all(np.isfinite(K)) and np.all(np.isfinite(T))
        assert K[0, 1] == pytest.approx(K[0, 0], rel=1e-14)
        np.testing.assert_allclose(resprop.kernel(X.astype(float), act, 50, 1.0, 0.0, ntk=True)[0], K, rtol=0, atol=0)
        # the NNGP-only kernel is another compiled function: the same to round-off
        np.testing.assert_allclose(resprop.kernel(X.astype(float), act, 50, 1.0, 0.0), K, rtol=1e-14, atol=0)


@pytest.mark.parametrize("kwargs, name", [
    (dict(depth=-1), "depth"), (dict(sigma_w2=0.0), "sigma_w2"), (dict(sigma_b2=-1.0), "sigma_b2"),
    (dict(gamma=math.nan), "gamma"), (dict(branch_scale="l**"), "branch_scale"),
    (dict(branch_scale=[1.0, 2.0]), "branch_scale"), (dict(branch_scale="1/(l - 1)"), "branch_scale"),
    (dict(activation="exp(x**2)*y"), "activation"), (dict(activation="__import__('os')"), "activation"),
    (dict(X=np.ones(3)), "X"), (dict(X=np.zeros((2, 3)), sigma_b2=0.0), "X"), (dict(ntk=1), "ntk"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    args = dict(X=_inputs(P=3), activation="erf", depth=3, sigma_w2=1.0, sigma_b2=0.1) | kwargs
    with pytest.raises(ParameterError, match=rf"^{name}\b"):
        resprop.kernel(**args)


def test_cli_round_trip(tmp_path, capsys):
    X = _inputs(P=7)
    np.save(tmp_path / "X.npy", X)
    out = tmp_path / "K.npz"
    argv = ["kernel", "--inputs", str(tmp_path / "X.npy"), "--activation", "relu", "--depth", "5", "--sigma-w2",
            "2", "--sigma-b2", "0.1", "--gamma", "0.9", "--branch-scale", "1/sqrt(L)", "--ntk", "--out", str(out)]
    assert main(argv) == 0
    data = np.load(out)
    K, T = resprop.kernel(X, "relu", 5, 2.0, 0.1, gamma=0.9, branch_scale="1/sqrt(L)", ntk=True)
    np.testing.assert_array_equal(data["nngp"], K)
    np.testing.assert_array_equal(data["ntk"], T)
    bad = argv.copy()
    bad[bad.index("--sigma-w2") + 1] = "-2"
    assert main(bad) == 2
    assert "sigma_w2: must lie in (0, inf)" in capsys.readouterr().err
    assert main(argv[:-1] + [str(tmp_path / "K.txt")]) == 2


# --------------------------------------------------------------------------- the lowering itself
_s, _t, _ra, _cb, _g, _w = sp.symbols("s t r_a c_b g w", real=True)
_LOWERING_CASES = [
    ((_s, _g * _s + _w * sp.asin(UnitClip(_s * _ra * _cb)) + 1),),
    ((_s, (_g + _w / sp.sqrt(1 + _ra**2 * _s**2)) * _s - _t / 3), (_t, _w * sp.exp(-_s * _cb) + _t * _ra - _s)),
    ((_s, _s / (1 + _ra * _cb) - sp.sqrt(_ra) * sp.cos(_t)), (_t, _s * _t + (_ra + _cb) * _g)),
]


@pytest.mark.parametrize("state", _LOWERING_CASES)
def test_lowering_matches_direct_evaluation(state):
    """The lowered in-place code (buffer reuse, hoisting, rotation) equals the SymPy updates evaluated directly."""
    rec = Recursion("case", "test", Source("x", "1"), tuple(state), rows=(_ra,), cols=(_cb,), sequences=(_g, _w))
    d = Derivation("case", "case", "x")
    src = render_recursion_module(d, "tests", [rec])
    mod = types.ModuleType("case")
    exec(compile(src, "<case>", "exec"), mod.__dict__)
    rng = np.random.default_rng(1)
    h, n, L = 3, 5, 4
    states = [rng.uniform(0.1, 0.5, (h, n)) for _ in state]
    rows, cols = rng.uniform(0.5, 1.0, (L, h, 1)), rng.uniform(0.5, 1.0, (L, 1, n))
    g, w = rng.uniform(0.5, 1, L), rng.uniform(0.1, 0.3, L)
    syms = [s for s, _ in state]
    fns = [sp.lambdify((*syms, _ra, _cb, _g, _w), u.replace(UnitClip, lambda x: sp.Max(-1, sp.Min(1, x))), "numpy")
           for _, u in state]
    expect = [s.copy() for s in states]
    for l in range(L):
        expect = [f(*expect, rows[l], cols[l], g[l], w[l]) for f in fns]
    got = mod.case(*[s.copy() for s in states], rows, cols, g, w)
    got = got if isinstance(got, tuple) else (got,)
    for a, b in zip(got, expect):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    assert lower(rec, KernelPrinter()).passes > 0


def test_generated_recursions_are_hardened():
    """Every asin/acos argument is clipped and every elementwise sqrt argument clamped in the generated module."""
    import inspect

    import resprop.generated.residual_recursions as gen

    text = inspect.getsource(gen)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("numpy.")]
    for i, ln in enumerate(lines):
        if ln.startswith(("numpy.arcsin(", "numpy.arccos(")):
            arg = ln.split("(")[1].split(",")[0]
            assert any(p.startswith("numpy.clip(") and p.endswith(f"out={arg})") for p in lines[:i]), ln
        if ln.startswith("numpy.sqrt("):
            arg = ln.split("(")[1].split(",")[0]
            k = writer(lines, arg, i)
            if lines[k].startswith("numpy.maximum("):  # clamped at 0
                continue
            # otherwise 1 - t^2 of a t clipped into [-1, 1], which is >= 0 exactly
            assert lines[k].startswith("numpy.subtract(1.0, "), (ln, lines[k])
            square = writer(lines, lines[k].split(", ")[1], k)
            t = lines[square].split("(")[1].split(",")[0]
            assert lines[square].startswith(f"numpy.multiply({t}, {t}, "), (ln, lines[square])
            assert lines[writer(lines, t, square)].startswith("numpy.clip("), ln


def writer(lines: list[str], name: str, before: int) -> int:
    """Index of the last ufunc line before ``before`` that writes buffer ``name`` (within one layer body)."""
    return max(k for k in range(before) if lines[k].endswith((f"out={name})", f"copyto({name},")))


@pytest.mark.slow  # about 90 s each (2-D mpmath quadrature)
@pytest.mark.parametrize("normalise", [True, False])
def test_tanh_tabulated_against_mpmath(normalise):
    """tanh has no closed form: the tabulated recursion (rho interpolant for equal norms, the general path
    otherwise) against 2-D mpmath quadrature of one layer (the increment w <phi phi> must match to 1e-10)."""
    X = np.array([[1.0, 0.3], [0.2, -1.1], [0.5, 0.5]])
    if normalise:
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
    K0 = 1.3 * X @ X.T / 2 + 0.1
    K = resprop.kernel(X, "tanh", 1, 1.3, 0.1, branch_scale=0.7)
    mp.mp.dps = 20

    def mean(a, b):
        kaa, kbb, kab = K0[a, a], K0[b, b], K0[a, b]
        s = mp.sqrt(max(kbb - kab**2 / kaa, 0.0))
        f = lambda z1, z2: (mp.tanh(mp.sqrt(kaa) * z1) * mp.tanh(kab / mp.sqrt(kaa) * z1 + s * z2)  # noqa: E731
                            * mp.npdf(z1) * mp.npdf(z2))
        return float(mp.quad(f, [-10, -3, 0, 3, 10], [-10, -3, 0, 3, 10]))

    increment = np.array([[0.49 * 1.3 * mean(a, b) for b in range(3)] for a in range(3)])
    np.testing.assert_allclose(K - K0 - 0.49 * 0.1, increment, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("equal_rtol", [RK.EQUAL_DIAGONAL_RTOL, -1.0])
def test_tabulated_gelu_equals_its_closed_form(monkeypatch, equal_rtol):
    """The tabulated recursion (dual_tables) for GELU given as an expression, against GELU's closed-form
    recursion (Price's theorem, derive/closed_forms.py): two independent routes, NNGP and NTK, depth 4.
    Unit-norm inputs have diagonals equal up to ulps: with the default tolerance they take the per-layer
    rho table; with a negative tolerance the general (distinct-diagonal) path."""
    monkeypatch.setattr(RK, "EQUAL_DIAGONAL_RTOL", equal_rtol)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((24, 7))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    assert np.ptp(np.diagonal(X @ X.T)) > 0  # the ulp spread the table path must tolerate
    x = sp.Symbol("x")
    tab = RK.ActivationRecursions("gelu-tabulated", *RK._functions(RK.gen, "tabulated"),
                                  expr=x * (1 + sp.erf(x / sp.sqrt(2))) / 2)
    K0 = input_kernel(X, 1.7, 0.1)
    seq = (np.full(4, 0.8), np.full(4, 1.7 * 0.6), np.full(4, 0.1 * 0.6))
    closed = RK.propagate(K0, K0.copy(), seq, "ntk", RK.recursions("gelu"))
    table = RK.propagate(K0, K0.copy(), seq, "ntk", tab)
    np.testing.assert_allclose(table.K, closed.K, rtol=1e-10, atol=0)
    np.testing.assert_allclose(table.second, closed.second, rtol=1e-10, atol=0)
