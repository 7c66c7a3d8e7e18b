"""Gaussian expectations inside derivations (issue 26 item 3, resprop.derive.expectation): Price's theorem as the
derivative of the symbolic expectations, their resolution for a concrete activation (derived closed forms, exact
integration, the engine's quadrature in generated code), checked against mpmath quadrature, an independent route."""
import types

import mpmath as mp
import numpy as np
import pytest
import sympy as sp
from conftest import bivariate_mean_quad

from resprop.derive.codegen import render_theory_module
from resprop.derive.expectation import (
    GaussianMean,
    GaussianMean2,
    TabulatedMean,
    TabulatedMean2,
    mean,
    mean2,
    per_activation,
    phi,
    resolve,
    u,
    v,
    z,
)
from resprop.derive.results import Derivation
from resprop.derive.symbols import Parameter
from resprop.numeric.engine.validation import ParameterError

q = sp.Symbol("q", positive=True)
K_aa, K_bb = sp.symbols("K_aa K_bb", positive=True)
K_ab = sp.Symbol("K_ab", real=True)
MP_ACT = {"erf": mp.erf, "tanh": mp.tanh, "relu": lambda t: max(t, 0), "sin(x)": mp.sin, "x**3": lambda t: t**3,
          "gelu": lambda t: t * (1 + mp.erf(t / mp.sqrt(2))) / 2}
MP_DACT = {"erf": lambda t: 2 / mp.sqrt(mp.pi) * mp.exp(-t**2), "tanh": lambda t: 1 - mp.tanh(t)**2,
           "relu": lambda t: 1 if t > 0 else 0, "sin(x)": mp.cos, "x**3": lambda t: 3 * t**2,
           "gelu": lambda t: (1 + mp.erf(t / mp.sqrt(2))) / 2 + t * mp.exp(-t**2 / 2) / mp.sqrt(2 * mp.pi)}


def mp_mean1(f, var):
    s = mp.sqrt(var)
    return mp.quad(lambda t: f(s * t) * mp.npdf(t), [-mp.inf, 0, mp.inf])


#: phi and phi' in NumPy for the two-point references: nested adaptive QUADPACK quadrature (conftest), split where
#: either argument crosses 0 (the kink of ReLU); nested mpmath quadrature took 70 s + 22 s for tanh at 15 digits
NP_ACT = {"tanh": np.tanh, "relu": lambda t: np.maximum(t, 0.0)}
NP_DACT = {"tanh": lambda t: 1.0 / np.cosh(t) ** 2, "relu": lambda t: np.where(t > 0, 1.0, 0.0)}


def test_price_theorem_is_the_derivative():
    """d<f>_q/dq = <f''>/2 and d<f>/dK_ab = <d_u d_v f>, d<f>/dK_aa = <d_u^2 f>/2, symbolically."""
    m = mean(phi(z) ** 2, q)
    assert sp.diff(m, q) == mean(sp.diff(phi(z), z) ** 2 + phi(z) * sp.diff(phi(z), z, 2), q)
    m2 = mean2(phi(u) * phi(v), K_aa, K_bb, K_ab)
    assert sp.diff(m2, K_ab) == mean2(sp.diff(phi(u), u) * sp.diff(phi(v), v), K_aa, K_bb, K_ab)
    assert sp.diff(m2, K_aa) == mean2(sp.diff(phi(u), u, 2) * phi(v) / 2, K_aa, K_bb, K_ab)
    assert sp.diff(sp.Integer(3) * m2, K_bb) == 3 * mean2(phi(u) * sp.diff(phi(v), v, 2) / 2, K_aa, K_bb, K_ab)
    assert mean(sp.Integer(2), q) == 2 and isinstance(m, GaussianMean) and isinstance(m2, GaussianMean2)


def test_means_are_numbers_to_sympy():
    """An expectation is a number that commutes, so that solve works on a derivation's unresolved expressions
    (Schoenholz's critical line: q* = s_w <phi^2> + s_b with s_w <phi'^2> = 1).  SymPy inferred is_commutative =
    None from the Lambda argument: then solve returned [] and linsolve raised 'non-commutative expressions'."""
    s_w, s_b = sp.symbols("s_w s_b", real=True)
    m, md = mean(phi(z) ** 2, q), mean(sp.diff(phi(z), z) ** 2, q)
    m2 = mean2(phi(u) * phi(v), K_aa, K_bb, K_ab)
    for node in (m, m2, resolve(m, "tanh"), resolve(m2, "tanh").atoms(TabulatedMean2).pop()):
        assert node.is_commutative is True and node.is_positive is None and node.evalf() == node
    assert m * m2 - m2 * m == 0
    sol = sp.solve([sp.Eq(q, s_w * m + s_b), sp.Eq(s_w * md, 1)], [s_w, s_b], dict=True)
    assert sol == [{s_w: 1 / md, s_b: q - m / md}]
    assert sp.linsolve([s_w * md - 1, s_w * m + s_b - q], [s_w, s_b]) == sp.FiniteSet((1 / md, q - m / md))


@pytest.mark.parametrize("act", ["tanh", "x**3", "sin(x)"])
def test_price_theorem_holds_for_the_resolved_means(act):
    """The resolved <phi^2>_q differenced in q equals the resolved <phi'^2 + phi phi''>_q (different integrands,
    different routes for tanh: two quadratures)."""
    m = mean(phi(z) ** 2, q)
    value = _evaluate(resolve(m, act), q)
    slope = _evaluate(resolve(sp.diff(m, q), act), q)
    for q0 in (0.4, 2.5):
        h = 1e-4
        fd = (value(q0 + h) - value(q0 - h)) / (2 * h)
        assert fd == pytest.approx(slope(q0), rel=1e-6), (act, q0)


def _evaluate(expr, *symbols):
    """A NumPy function of ``expr`` through the generated-kernel printer (TabulatedMean -> the quadrature)."""
    import scipy.special  # noqa: F401 - the printed code calls it

    import resprop.generated.gauss_hermite  # noqa: F401 - the printed code calls it
    from resprop.derive.codegen import print_numpy

    code = print_numpy(expr)
    names = ", ".join(s.name for s in symbols)
    namespace = {"numpy": np, "resprop": resprop, "scipy": scipy}
    return eval(f"lambda {names}: {code}", namespace)  # noqa: S307 - our own printed code


@pytest.mark.parametrize("act", sorted(MP_ACT))
@pytest.mark.parametrize("q0", [0.3, 2.0])
def test_one_point_means_against_mpmath(act, q0):
    mp.mp.dps = 25
    phi_sq = _evaluate(resolve(mean(phi(z) ** 2, q), act), q)(q0)
    dphi_sq = _evaluate(resolve(mean(sp.diff(phi(z), z) ** 2, q), act), q)(q0)
    assert phi_sq == pytest.approx(float(mp_mean1(lambda t: MP_ACT[act](t) ** 2, q0)), rel=1e-11, abs=1e-14)
    assert dphi_sq == pytest.approx(float(mp_mean1(lambda t: MP_DACT[act](t) ** 2, q0)), rel=1e-11, abs=1e-14)


def test_closed_forms_are_used_where_they_exist():
    """erf, GELU, ReLU: the foundation's derived forms; sin and polynomials: exact integration; tanh: quadrature."""
    for act in ("erf", "gelu", "relu", "sin(x)", "x**3"):
        assert not resolve(mean(phi(z) ** 2, q), act).has(TabulatedMean), act
    assert resolve(mean(phi(z) ** 2, q), "relu") == q / 2
    assert sp.simplify(resolve(mean(phi(z) ** 2, q), "sin(x)") - (1 - sp.exp(-2 * q)) / 2) == 0
    assert resolve(mean(phi(z) ** 2, q), "tanh").has(TabulatedMean)
    # ReLU's phi'' is a point mass: <phi''>_q is the density at 0, exactly
    assert sp.simplify(resolve(mean(sp.diff(phi(z), z, 2), q), "relu") - 1 / sp.sqrt(2 * sp.pi * q)) == 0


def test_two_point_closed_forms_against_the_textbook():
    """erf: Williams (1997) (2/pi) asin(2 K_ab / sqrt((1 + 2 K_aa)(1 + 2 K_bb))); x^3: Isserlis' theorem."""
    kaa, kbb, kab = 0.8, 1.7, -0.5
    erf = _evaluate(resolve(mean2(phi(u) * phi(v), K_aa, K_bb, K_ab), "erf"), K_aa, K_bb, K_ab)(kaa, kbb, kab)
    assert erf == pytest.approx(2 / np.pi * np.arcsin(2 * kab / np.sqrt((1 + 2 * kaa) * (1 + 2 * kbb))), rel=1e-14)
    derf = _evaluate(resolve(mean2(sp.diff(phi(u), u) * sp.diff(phi(v), v), K_aa, K_bb, K_ab), "erf"),
                     K_aa, K_bb, K_ab)(kaa, kbb, kab)
    assert derf == pytest.approx(4 / np.pi / np.sqrt((1 + 2 * kaa) * (1 + 2 * kbb) - 4 * kab**2), rel=1e-14)
    cubic = resolve(mean2(phi(u) * phi(v), K_aa, K_bb, K_ab), "x**3")
    assert sp.expand(cubic - (9 * K_aa * K_bb * K_ab + 6 * K_ab**3)) == 0


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_two_point_means_against_adaptive_quadrature(act):
    kaa, kbb, kab = 0.8, 1.7, -0.5
    both = resolve(mean2(phi(u) * phi(v), K_aa, K_bb, K_ab), act)
    dboth = resolve(mean2(sp.diff(phi(u), u) * sp.diff(phi(v), v), K_aa, K_bb, K_ab), act)
    got = _evaluate(both, K_aa, K_bb, K_ab)(kaa, kbb, kab)
    dgot = _evaluate(dboth, K_aa, K_bb, K_ab)(kaa, kbb, kab)
    ref = bivariate_mean_quad(NP_ACT[act], NP_ACT[act], kaa, kbb, kab)
    dref = bivariate_mean_quad(NP_DACT[act], NP_DACT[act], kaa, kbb, kab)
    assert got == pytest.approx(ref, rel=1e-8, abs=1e-10), act
    assert dgot == pytest.approx(dref, rel=1e-8, abs=1e-10), act


def _demo_module():
    params = (Parameter("q", "(0, inf)", "q", "pre-activation variance"),
              Parameter("sigma_w2", "(0, inf)", r"\sigma_w^2", "weight variance"),
              Parameter("K_aa", "(0, inf)", "K_{aa}", "variance a"), Parameter("K_bb", "(0, inf)", "K_{bb}", "variance b"),
              Parameter("K_ab", "|K_ab| <= sqrt(K_aa K_bb)", "K_{ab}", "covariance"))
    qs, sw, ka, kb, kab = (p.symbol for p in params)
    d = Derivation("demo", "demo", "fischer2025")
    add = d.adder(d.declare(params))
    per_activation(add, "chi_1", sw * mean(sp.diff(phi(z), z) ** 2, qs), [qs, sw], "7", "chi_1", r"\chi_1",
                   ("erf", "tanh"))
    per_activation(add, "chi_c", sw * mean2(sp.diff(phi(u), u) * sp.diff(phi(v), v), ka, kb, kab), [ka, kb, kab, sw],
                   "9", "chi_c", r"\chi_c", ("tanh",))
    module = types.ModuleType("demo")
    exec(render_theory_module(d, "demo.py"), module.__dict__)  # noqa: S102 - the generated kernel module
    return module


def _latex_demo():
    """A derivation with expectations in its equations: symbolic (phi undetermined), resolved to closed forms, and
    left to the quadrature (tanh), for the LaTeX round trip below."""
    params = (Parameter("q", "(0, inf)", "q", "pre-activation variance"),
              Parameter("sigma_w2", "(0, inf)", r"\sigma_w^2", "weight variance"),
              Parameter("K_aa", "(0, inf)", "K_{aa}", "variance a"), Parameter("K_bb", "(0, inf)", "K_{bb}", "variance b"),
              Parameter("K_ab", "|K_ab| <= sqrt(K_aa K_bb)", "K_{ab}", "covariance"))
    qs, sw, ka, kb, kab = (p.symbol for p in params)
    d = Derivation("meandemo", "expectations in LaTeX", "fischer2025")
    add = d.adder(d.declare(params))
    add("chi_1", sw * mean(sp.diff(phi(z), z) ** 2, qs), [qs, sw], "7", "chi_1", r"\chi_1",
        statement="The slope of the length map for any activation is this expectation")
    per_activation(add, "chi_q", sp.diff(sw * mean(phi(z) ** 2, qs), qs), [qs, sw], "8", "chi_q", r"\chi_q",
                   ("erf", "tanh", "gelu"), statement="The slope of the length map by Price's theorem is")
    per_activation(add, "chi_c", sw * mean2(sp.diff(phi(u), u) * sp.diff(phi(v), v), ka, kb, kab), [ka, kb, kab, sw],
                   "9", "chi_c", r"\chi_c", ("tanh", "relu"), statement="The slope of the correlation map is")
    return d


def test_latex_round_trip_reads_expectations():
    """resprop.testing's LaTeX round trip compares an expectation <...> by its own printed LaTeX (the parser cannot
    read angle brackets), and reads pi (x)^2 as a product."""
    from resprop import registry
    from resprop.registry import Theory
    from resprop.testing import check_latex_roundtrip

    theory = Theory(slug="meandemo", title="expectations in LaTeX", citation="test", paper="fischer2025",
                    citation_tex="test", derivations={"meandemo": "test_expectation:_latex_demo"})
    registry.register(theory)
    try:
        assert check_latex_roundtrip("meandemo") == {"documents": 1, "equations": 6}
    finally:
        registry.unregister("meandemo")


def test_generated_kernels_call_the_engine_and_check_their_domain():
    mp.mp.dps = 15
    module = _demo_module()
    assert set(module.RESULTS) == {"chi_1_erf", "chi_1_tanh", "chi_c_tanh"}
    q0 = np.array([0.2, 1.0, 5.0])
    ref = [1.5 * float(mp_mean1(lambda t: MP_DACT["tanh"](t) ** 2, x)) for x in q0]
    np.testing.assert_allclose(module.chi_1_tanh(q0, 1.5), ref, rtol=1e-11)
    np.testing.assert_allclose(module.chi_1_erf(q0, 1.5), [1.5 * 4 / np.pi / np.sqrt(1 + 4 * x) for x in q0],
                               rtol=1e-14)
    assert module.chi_c_tanh(1.0, 1.0, 0.4, 2.0) == pytest.approx(
        2.0 * bivariate_mean_quad(NP_DACT["tanh"], NP_DACT["tanh"], 1.0, 1.0, 0.4), rel=1e-8)
    with pytest.raises(ParameterError, match="q"):
        module.chi_1_tanh(-1.0, 1.5)
    with pytest.raises(ParameterError, match="K_ab"):
        module.chi_c_tanh(1.0, 1.0, 1.5, 1.0)


@pytest.mark.parametrize("q0", [1e3, 1e5])
def test_quadrature_keeps_the_integrand_as_derived(q0):
    """<tanh'^2>_q at large variance: the quadrature of (1 - tanh^2)^2 itself, not of tanh^4 - 2 tanh^2 + 1 (whose
    three O(1) parts cancel to O(1/sqrt(q)) and lose digits), and <tanh'(u) tanh'(v)> as one quadrature."""
    mp.mp.dps = 30
    got = _evaluate(resolve(mean(sp.diff(phi(z), z) ** 2, q), "tanh"), q)(q0)
    ref = mp_mean1(lambda t: (1 - mp.tanh(t) ** 2) ** 2, q0)
    assert got == pytest.approx(float(ref), rel=1e-12)
    pair = resolve(mean2(sp.diff(phi(u), u) * sp.diff(phi(v), v), K_aa, K_bb, K_ab), "tanh")
    assert len(pair.atoms(TabulatedMean, TabulatedMean2)) == 1


def test_point_masses_sift_and_parameters_stay_symbolic():
    """ReLU's phi'' is DiracDelta: <phi'' g> = g(0) times the density at 0, exactly, whatever else needs the
    quadrature; a leaky ReLU with symbolic slopes stays symbolic, and agrees with mpmath once they are numbers."""
    from resprop.derive.activations import x

    got = resolve(mean(sp.diff(phi(z), z, 2) * sp.cosh(z) + sp.tanh(z) ** 2, q), "relu")
    assert got.has(TabulatedMean)  # the tanh^2 part
    sifted = got.subs(TabulatedMean(sp.Lambda(z, sp.tanh(z) ** 2), q), 0)
    assert sp.simplify(sifted - 1 / sp.sqrt(2 * sp.pi * q)) == 0
    a_plus, a_minus = sp.symbols("a_plus a_minus", positive=True)
    leaky = resolve(mean(phi(z) ** 2 * sp.exp(z), q), a_plus * sp.Max(x, 0) + a_minus * sp.Min(x, 0))
    assert leaky.free_symbols == {q, a_plus, a_minus}
    mp.mp.dps = 20
    value = float(leaky.subs({a_plus: 1.3, a_minus: 0.2, q: 0.6}))
    ref = mp_mean1(lambda t: (1.3 * t if t > 0 else 0.2 * t) ** 2 * mp.exp(t), 0.6)
    assert value == pytest.approx(float(ref), rel=1e-12)


def test_a_bad_activation_is_refused():
    with pytest.raises(ValueError, match="activation"):
        resolve(mean(phi(z) ** 2, q), "x*y")
