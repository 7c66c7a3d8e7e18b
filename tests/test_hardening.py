"""Hardening of every generated kernel: domain boundaries to the last ulp, integer input, correlations at +-1 and
very deep networks.

No kernel is listed by hand: every module of ``resprop.registry.derivations()`` is imported from
``resprop.registry.generated_module`` and each entry of its ``RESULTS`` table (kernel name -> input domains) is probed, so a new
derivation is covered as soon as it is generated.  Hypothesis draws the other arguments inside their domains, of
moderate size: depths and widths up to ~40, positive reals in [0.01, 10], bounded domains anywhere inside, and
unbounded reals 0 or of magnitude in [1e-3, 3] (below ~1e-77 the fourth powers in scale-free ratios such as
lam^4/(alpha^2 + lam^2)^2 underflow to 0/0, which the kernels report as an overflow error).  Properties:

* one ulp inside each finite bound of a domain (``np.nextafter``; the bound itself when it is closed): a finite
  float64 -- where that point is the subnormal 5e-324 next to an open 0 and the exact value is beyond float64
  (e.g. 1/sigma_w2), the overflow error naming the kernel's inputs is the right answer and is accepted;
* one ulp outside each finite bound (and an open bound itself): ParameterError whose ``parameter`` is that input;
* integer input (Python ints, int64 and int32 arrays, up to 2^40) gives exactly the float64 answer, or the same
  error;
* correlation inputs (domain [-1, 1], or |K_ab| <= sqrt(K_aa K_bb)) exactly at +-1 and one ulp inside give finite
  values, and so does the bare ``.unchecked`` kernel one ulp past +-1 (no NaN from sqrt(1 - rho^2) or arccos);
* a depth input (depth L, a number of layers, a layer lag) at 10^5 and 10^9: a finite value; where the value
  itself exceeds float64 (geometric growth) the kernel raises the overflow error and its log-space counterpart
  ``log_<name>`` is finite and above ln(max float64), which also shows that the overflow is genuine.

The activation modules' phi, phi', phi'' convert integer input too (no int64 overflow of x**2).
"""
from __future__ import annotations

import importlib
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resprop.domains import COVARIANCE_RTOL, parse_domain
from resprop.numeric.engine.validation import ParameterError
from resprop.registry import declared, derivations, generated_module

SETTINGS = settings(derandomize=True, max_examples=30, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))

THEORIES = list(derivations())
MODULES = {t: importlib.import_module(generated_module(t)) for t in THEORIES}
#: (theory, kernel name, {input: parsed domain}) for every generated kernel, zero-argument ones included
KERNELS = [(t, name, {n: parse_domain(d) for n, d in spec["inputs"].items()})
           for t in THEORIES for name, spec in MODULES[t].RESULTS.items()]
WITH_INPUTS = [k for k in KERNELS if k[2]]
IDS = [f"{t}.{name}" for t, name, _ in WITH_INPUTS]

#: meaning of a declared depth input: "depth L", "number of weight layers L", "... residual layers d", "layer lag k"
DEPTH_MEANING = re.compile(r"^(depth L\b|number of [\w ]*layers \w+$|number of weight matrices L\b|layer lag\b)")
LN_MAX = math.log(np.finfo(float).max)  # 709.78...
TINY = np.finfo(float).tiny  # smallest normal float64; one ulp above 0 is the subnormal 5e-324
OVERFLOW = "not finite in float64"


def _kernel(theory, name):
    return getattr(MODULES[theory], name)


def _declared(theory, name):
    """The run-time declaration of ``name`` in derivation ``theory``, or None (a kernel input it does not declare)."""
    try:
        return declared(theory, name)
    except KeyError:
        return None


def _is_depth(theory, name, dom) -> bool:
    p = _declared(theory, name)
    return (p is not None and bool(DEPTH_MEANING.match(p.meaning)) and dom.kind == "interval"
            and dom.lo >= 1 and math.isinf(dom.hi))


def _integer_like(dom) -> bool:
    """Depths, widths, dimensions: [1, inf) and [2, inf)."""
    return dom.kind == "interval" and dom.lo_closed and dom.lo in (1.0, 2.0) and math.isinf(dom.hi)


def _moderate(dom) -> st.SearchStrategy:
    """Values of moderate size inside ``dom`` (for a covariance: its correlation in [-1, 1], scaled later)."""
    if dom.kind == "covariance":
        return st.floats(-1.0, 1.0)
    lo, hi = dom.lo, dom.hi
    if math.isinf(lo) and math.isinf(hi):  # 0 or a magnitude in [1e-3, 3] (see the module docstring)
        return st.one_of(st.just(0.0), st.floats(1e-3, 3.0), st.floats(-3.0, -1e-3))
    if math.isinf(hi):
        if _integer_like(dom):
            return st.integers(int(lo), int(lo) + 40).map(float)
        return st.floats(-2.0, 1.0).map(lambda u, lo=lo: lo + 10.0 ** u)
    return st.floats(lo, hi, exclude_min=not dom.lo_closed, exclude_max=not dom.hi_closed)


def _bound(args, dom) -> float:
    """sqrt(var_a) sqrt(var_b) of a covariance input: the same float64 product the domain check computes."""
    return float(np.sqrt(args[dom.var_a]) * np.sqrt(args[dom.var_b]))


def _points(inputs) -> st.SearchStrategy:
    """A full argument dict inside the domains; a covariance is its drawn correlation times its bound."""
    def assemble(draw):
        args = dict(draw)
        for n, dom in inputs.items():
            if dom.kind == "covariance":
                args[n] = args[n] * _bound(args, dom)
        return args

    return st.fixed_dictionaries({n: _moderate(dom) for n, dom in inputs.items()}).map(assemble)


def _call(f, args):
    """("ok", float64 array) or ("error", ParameterError)."""
    try:
        with np.errstate(all="ignore"):
            return "ok", np.asarray(f(**args))
    except ParameterError as e:
        return "error", e


def _constraint(err) -> bool:
    """A compound constraint of the kernel (alpha^2 + lam^2 > 0, target_variance >= K0, ...) failed."""
    return "must satisfy" in str(err) and "relative round-off" not in str(err)


def _assert_finite(theory, name, args, outcome, allow_overflow=False):
    kind, value = outcome
    if kind == "error":
        if _constraint(value):
            return False
        assert allow_overflow and OVERFLOW in str(value), (theory, name, args, str(value))
        assert set(value.parameter.split(", ")) <= set(MODULES[theory].RESULTS[name]["inputs"]), str(value)
        return False
    assert value.dtype == np.float64 and np.isfinite(value).all(), (theory, name, args, value)
    return True


# --------------------------------------------------------------------------- boundaries to the last ulp
def _inside_bound_values(dom):
    """The closed finite ends and the value one ulp inside each finite end."""
    out = []
    if dom.kind != "interval":
        return out
    if math.isfinite(dom.lo):
        out += ([dom.lo] if dom.lo_closed else []) + [float(np.nextafter(dom.lo, np.inf))]
    if math.isfinite(dom.hi):
        out += ([dom.hi] if dom.hi_closed else []) + [float(np.nextafter(dom.hi, -np.inf))]
    return out


def _outside_bound_values(dom):
    """One ulp outside each finite end, and an open end itself."""
    out = []
    if dom.kind != "interval":
        return out
    if math.isfinite(dom.lo):
        out += ([] if dom.lo_closed else [dom.lo]) + [float(np.nextafter(dom.lo, -np.inf))]
    if math.isfinite(dom.hi):
        out += ([] if dom.hi_closed else [dom.hi]) + [float(np.nextafter(dom.hi, np.inf))]
    return out


BOUNDED = [k for k in WITH_INPUTS if any(_inside_bound_values(d) for d in k[2].values())]


@pytest.mark.parametrize("theory, name, inputs", BOUNDED, ids=[f"{t}.{n}" for t, n, _ in BOUNDED])
def test_one_ulp_inside_each_finite_bound_is_finite(theory, name, inputs):
    f = _kernel(theory, name)
    probes = [(n, v) for n, dom in inputs.items() for v in _inside_bound_values(dom)]
    checked = set()

    @SETTINGS
    @given(_points(inputs))
    def run(base):
        for n, v in probes:
            args = dict(base, **{n: v})
            for m, dom in inputs.items():  # a covariance follows its variances
                if dom.kind == "covariance" and n in (dom.var_a, dom.var_b):
                    args[m] = base[m] / _bound(base, dom) * _bound(args, dom) if _bound(base, dom) else 0.0
                    args[m] = float(np.clip(args[m], -_bound(args, dom), _bound(args, dom)))
            if _assert_finite(theory, name, args, _call(f, args), allow_overflow=0 < abs(v) < TINY):
                checked.add((n, v))

    run()
    missing = {p for p in probes if not (0 < abs(p[1]) < TINY)} - checked
    assert not missing, f"{theory}.{name}: no admissible example reached {sorted(missing)}"


@pytest.mark.parametrize("theory, name, inputs", WITH_INPUTS, ids=IDS)
def test_one_ulp_outside_each_bound_names_the_parameter(theory, name, inputs):
    f = _kernel(theory, name)

    @SETTINGS
    @given(_points(inputs))
    def run(base):
        for n, dom in inputs.items():
            if dom.kind == "covariance":
                b = _bound(base, dom)
                bad = [s * b * (1 + 2 * COVARIANCE_RTOL) for s in (1, -1)] if b > 0 else [1.0, -1.0]
            else:
                bad = _outside_bound_values(dom)
            for v in bad:
                with pytest.raises(ParameterError) as err:
                    f(**dict(base, **{n: v}))
                assert err.value.parameter == n, (theory, name, n, v, str(err.value))
                assert isinstance(err.value, ValueError)

    run()


# --------------------------------------------------------------------------- integer input
def _integers(dom):
    """Integers inside ``dom`` (None if there is none); for a covariance an integer clipped into range later."""
    if dom.kind == "covariance":
        return st.integers(-(2**20), 2**20)
    lo = -(2**40) if math.isinf(dom.lo) else (math.ceil(dom.lo) if dom.lo_closed else math.floor(dom.lo) + 1)
    hi = 2**40 if math.isinf(dom.hi) else (math.floor(dom.hi) if dom.hi_closed else math.ceil(dom.hi) - 1)
    if lo > hi:
        return None
    small_lo = min(max(lo, -50), hi)
    return st.one_of(st.integers(small_lo, min(hi, small_lo + 100)), st.integers(lo, hi))


@pytest.mark.parametrize("theory, name, inputs", WITH_INPUTS, ids=IDS)
def test_integer_input_equals_float_input(theory, name, inputs):
    strategies = {n: _integers(dom) for n, dom in inputs.items()}
    if None in strategies.values():
        pytest.skip("a domain holds no integer")
    f = _kernel(theory, name)

    @SETTINGS
    @given(st.fixed_dictionaries(strategies))
    def run(ints):
        for n, dom in inputs.items():  # an integer covariance inside |K_ab| <= sqrt(K_aa K_bb)
            if dom.kind == "covariance":
                b = math.isqrt(ints[dom.var_a] * ints[dom.var_b])
                ints[n] = max(-b, min(b, ints[n]))
        for variant in (ints, {n: np.array([v, v], dtype=np.int64) for n, v in ints.items()},
                        {n: np.array(v, dtype=np.int32) for n, v in ints.items() if abs(v) < 2**31}):
            if len(variant) < len(ints):
                continue
            # the same values and shapes in float64 (NumPy may round 0-d and 1-d power differently)
            want = _call(f, {n: np.asarray(v, dtype=np.float64) for n, v in variant.items()})
            got = _call(f, variant)
            assert got[0] == want[0], (theory, name, variant, got, want)
            if want[0] == "ok":
                assert got[1].dtype == np.float64
                np.testing.assert_array_equal(got[1], want[1])
            else:
                assert str(got[1]) == str(want[1])

    run()


@pytest.mark.parametrize("activation", ["erf", "tanh", "gelu"])
def test_activation_functions_convert_integer_input(activation):
    mod = importlib.import_module(f"resprop.generated.activation_{activation}")
    x = np.array([-(2**40), -3, 0, 2, 2**32, 2**40], dtype=np.int64)
    for fn in (mod.phi, mod.dphi, mod.ddphi):
        with np.errstate(all="ignore"):
            got, want = fn(x), fn(x.astype(float))
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, want)
        assert np.isfinite(got).all(), (activation, fn.__name__, got)
        assert fn(2) == fn(2.0)
    assert mod.mean_phi_sq(2) == mod.mean_phi_sq(2.0)
    assert mod.mean_phi_phi(2, 3, 1) == mod.mean_phi_phi(2.0, 3.0, 1.0)


# --------------------------------------------------------------------------- correlations at +-1
CORRELATED = [k for k in WITH_INPUTS if any(d.correlation_type for d in k[2].values())]


@pytest.mark.parametrize("theory, name, inputs", CORRELATED, ids=[f"{t}.{n}" for t, n, _ in CORRELATED])
def test_correlation_at_and_one_ulp_from_plus_minus_one_is_finite(theory, name, inputs):
    f = _kernel(theory, name)
    corr = [n for n, d in inputs.items() if d.correlation_type]
    one = 1.0
    inside = [one, -one, float(np.nextafter(one, 0)), -float(np.nextafter(one, 0))]
    past = [float(np.nextafter(one, 2)), -float(np.nextafter(one, 2))]
    checked = []

    @SETTINGS
    @given(_points(inputs))
    def run(base):
        for n in corr:
            dom = inputs[n]
            scale = _bound(base, dom) if dom.kind == "covariance" else 1.0
            values = [r * scale for r in inside]
            if dom.kind == "covariance":  # one ulp beyond the bound is round-off: accepted, clipped
                values += [float(np.nextafter(scale, np.inf)), -float(np.nextafter(scale, np.inf)),
                           scale * (1 + COVARIANCE_RTOL / 2)]
            for v in values:
                args = dict(base, **{n: v})
                if _assert_finite(theory, name, args, _call(f, args)):
                    checked.append(v)
            for r in past:  # the bare kernel one ulp past +-1: clipped, never NaN
                args = dict(base, **{n: r * scale if dom.kind == "covariance" else r})
                with np.errstate(all="ignore"):
                    value = np.asarray(f.unchecked(**args))
                assert np.isfinite(value).all(), (theory, name, args, value)

    run()
    assert checked, f"{theory}.{name}: no admissible example"


# --------------------------------------------------------------------------- very deep networks
DEEP = [(t, name, inputs, [n for n, d in inputs.items() if _is_depth(t, n, d)]) for t, name, inputs in WITH_INPUTS]
DEEP = [k for k in DEEP if k[3]]


def test_depth_inputs_are_found():
    """The declarations name their depth inputs: every theory with a depth has kernels in DEEP."""
    found = {(t, n) for t, _, _, names in DEEP for n in names}
    assert {("fischer", "L"), ("stable", "L"), ("abcd", "L"), ("predictive_coding", "L"), ("lognormal", "d"),
            ("lognormal", "k")} <= found, found


@pytest.mark.parametrize("theory, name, inputs, depth_names", DEEP, ids=[f"{t}.{n}" for t, n, _, _ in DEEP])
def test_depth_1e5_is_finite_or_a_genuine_overflow_with_a_finite_log(theory, name, inputs, depth_names):
    f = _kernel(theory, name)
    log_f = getattr(MODULES[theory], f"log_{name}", None)
    finite = []

    @SETTINGS
    @given(_points(inputs))
    def run(base):
        for n in depth_names:
            for depth in (10**5, 1e5, 10**9):
                args = dict(base, **{n: depth})
                kind, value = _call(f, args)
                if kind == "ok":
                    assert value.dtype == np.float64 and np.isfinite(value).all(), (theory, name, args, value)
                    finite.append(depth)
                    continue
                if _constraint(value):
                    continue
                # the value itself exceeds float64: only then an overflow error, and its logarithm is returned
                assert OVERFLOW in str(value), (theory, name, args, str(value))
                assert log_f is not None, f"{theory}.{name} overflows at depth {depth} and has no log_{name}"
                log_value = log_f(**args)
                assert np.isfinite(log_value).all() and np.max(log_value) > LN_MAX, (theory, name, args, log_value)

    run()
    assert finite or log_f is not None, f"{theory}.{name}: never finite at depth 1e5"


LOG_PAIRS = [(t, n) for t, n, _ in KERNELS if n.startswith("log_") and n[4:] in MODULES[t].RESULTS]


@pytest.mark.parametrize("theory, name", LOG_PAIRS, ids=[f"{t}.{n}" for t, n in LOG_PAIRS])
def test_log_counterpart_equals_log_of_value_where_both_are_finite(theory, name):
    """log_<name> = ln(<name>) wherever the value is representable (so the log form is the same result)."""
    f, log_f = _kernel(theory, name[4:]), _kernel(theory, name)
    inputs = {n: parse_domain(d) for n, d in MODULES[theory].RESULTS[name]["inputs"].items()}

    @SETTINGS
    @given(_points(inputs))
    def run(args):
        kind, value = _call(f, args)
        if kind == "ok" and np.all(value > 0):
            np.testing.assert_allclose(log_f(**args), np.log(value), rtol=1e-12, atol=1e-12)

    run()


# --------------------------------------------------------------------------- docstrings
@pytest.mark.parametrize("theory", THEORIES)
def test_every_kernel_docstring_states_its_domain(theory):
    mod = MODULES[theory]
    for name, spec in mod.RESULTS.items():
        doc = getattr(mod, name).__doc__
        assert "Inputs:" in doc, (theory, name)
        if not spec["inputs"]:
            assert "Inputs: none" in doc, (theory, name)
        for arg, domain in spec["inputs"].items():
            assert f"{arg} in {domain}" in doc, (theory, name, arg)
        code = "\n".join(getattr(mod, f"_{name}").__code__.co_names)
        for fn in ("expm1", "log1p", "gammaln"):
            if fn in code:
                assert "Numerics:" in doc and fn in doc, (theory, name, fn)


@pytest.mark.parametrize("activation", ["erf", "tanh", "gelu"])
def test_activation_docstrings_state_the_domain(activation):
    mod = importlib.import_module(f"resprop.generated.activation_{activation}")
    for fn in (mod.phi, mod.dphi, mod.ddphi, mod.mean_phi_sq, mod.price_diag, mod.mean_phi_phi, mod.mean_dphi_dphi,
               mod.mean_phi_sq_phi_sq):
        assert "Inputs:" in fn.__doc__ and " in " in fn.__doc__.split("Inputs:")[1], fn.__name__


# --------------------------------------------------------------------------- the failures, by value
def test_named_failures_are_fixed():
    """Each failure named in the issue, at the point where it showed (values before the fix in comments)."""
    import mpmath

    stable, lognormal, fischer = MODULES["stable"], MODULES["lognormal"], MODULES["fischer"]
    up = float(np.nextafter(1.0, 2.0))
    # NaN one ulp past |C| = 1 (was NaN from sqrt(1 - C^2) and arccos): the bare kernel clips, the checked one
    # names the parameter
    assert stable.f_relu.unchecked(up) == 0.0 and stable.mean_dphi_dphi.unchecked(-up) == 0.0
    with pytest.raises(ParameterError) as err:
        stable.f_relu(up)
    assert err.value.parameter == "C"
    # unscaled_diagonal on integer arrays (was "Integers to negative integer powers") and at depth 1024 (was
    # OverflowError / inf); at depth 1e5 the value exceeds float64 and log_unscaled_diagonal is finite
    L = np.array([3, 1000], dtype=np.int64)
    np.testing.assert_array_equal(stable.unscaled_diagonal(1, 2, 1, L), stable.unscaled_diagonal(1.0, 2.0, 1.0, 1.0 * L))
    assert stable.unscaled_diagonal(1, 2, 0, 1023) == pytest.approx(2.0**1023, rel=1e-12)
    with mpmath.workdps(40):
        g = mpmath.mpf(1) + mpmath.mpf("0.25")
        exact = mpmath.log(g ** 10**5 * (1 + 2 * mpmath.mpf("0.1") / mpmath.mpf("0.5")) - 2 * mpmath.mpf("0.1") / mpmath.mpf("0.5"))
    assert stable.log_unscaled_diagonal(1.0, 0.5, 0.1, 10**5) == pytest.approx(float(exact), rel=1e-13)
    # log_chi2_density at n_out = 400 (was NaN: Gamma(200) and e^{n y/2} overflow)
    for n_out in (400, 10**4):
        y = math.log(n_out)
        with mpmath.workdps(40):
            m = mpmath.mpf(n_out) / 2
            exact = mpmath.exp(m * y - m * mpmath.log(2) - mpmath.exp(y) / 2 - mpmath.loggamma(m))
        assert lognormal.log_chi2_density(y, n_out) == pytest.approx(float(exact), rel=1e-10)
    # rho_star_linearised at L = 1e9 (was relative error 1.9e-8: ratio^(1/L) - 1 cancels)
    args = (10**9, 1.25, 0.05, 4 / np.pi, 0.05, 0.5)
    with mpmath.workdps(60):
        Lm, sw, sb, dp, K0, V = map(mpmath.mpf, args)
        exact = mpmath.sqrt((((sw * dp * V + sb) / (sw * dp * K0 + sb)) ** (1 / Lm) - 1) / (sw * dp))
    assert fischer.rho_star_linearised(*args) == pytest.approx(float(exact), rel=1e-14)


def test_cancellation_free_forms_found_by_these_tests():
    """Kernels whose printed form cancelled or underflowed (values before the fix in comments)."""
    import mpmath

    pc, abcd, lognormal = MODULES["predictive_coding"], MODULES["abcd"], MODULES["lognormal"]
    # PC-BP cosine at rho = 1: 1 - rho is computed first (was 0.0 at theta = 1e-10, 5.0000004e-6 at 1e-5)
    for theta in (1e-10, 1e-5, 0.3):
        assert pc.pc_bp_cosine(1.0, theta) == pytest.approx(math.sin(theta / 2), rel=1e-13)
    assert pc.pc_bp_cosine(1.0, 1e-300) == 0.0  # exact 5e-301; was a false overflow error (0/0)
    # eq. 102 as exp((L - 2) log1p(L^-2alpha)) (was relative error 8.3e-8 at L = 1e9, alpha = 1/2)
    with mpmath.workdps(40):
        exact = (1 + mpmath.mpf(10) ** -9) ** (10**9 - 2)
    assert abcd.residual_variance_factor(0.5, 10**9) == pytest.approx(float(exact), rel=1e-14)
    # ... and at alpha = -512, L = 2 the factor is exactly 1 (L^-2alpha = inf: logaddexp(0, -2 alpha ln L), not NaN)
    assert abcd.residual_variance_factor(-512.0, 2.0) == 1.0
    assert abcd.log_residual_variance_factor(-512.0, 3.0) == pytest.approx(1024 * math.log(3), rel=1e-15)
    # alpha/hypot(alpha, lam) (was 0.70711072 at alpha = lam = 1e-160: subnormal alpha^2 + lam^2)
    assert lognormal.layer_cos_factor(1e-160, 1e-160) == pytest.approx(math.sqrt(0.5), rel=1e-15)
    # PDLT's xi: the root of (1 - gamma^2) G_zz = xi^2 G_RR + 2 gamma xi G_Rz without cancellation (was 4.2147e-8,
    # 11% low, at gamma one ulp below 1); both signs of G_Rz
    pdlt = MODULES["pdlt"]
    for g, g_rr, g_rz, g_zz in ((float(np.nextafter(1.0, 0.0)), 1.0, 0.0, 10.0), (1 - 1e-8, 1.0, 1.0, 1.0),
                                (1 - 1e-8, 1.0, -1.0, 1.0), (0.5, 2.0, 0.3, 1.5), (0.5, 2.0, -0.3, 1.5)):
        with mpmath.workdps(50):
            gm, rr, rz, zz = map(mpmath.mpf, (g, g_rr, g_rz, g_zz))
            exact = (-rz * gm + mpmath.sqrt(rr * zz * (1 - gm**2) + rz**2 * gm**2)) / rr
        assert pdlt.xi_recipe(g, g_rr, g_rz, g_zz) == pytest.approx(float(exact), rel=1e-14)


def test_common_subexpressions_are_computed_once():
    """sympy.cse in function_spec: a repeated subexpression becomes one temporary of the bare kernel."""
    import inspect

    stable, fischer, gaussian = MODULES["stable"], MODULES["fischer"], MODULES["gaussian"]
    source = inspect.getsource(stable.unscaled_diagonal.unchecked)
    assert source.count("numpy.log1p") == 1 and "_x0 = " in source and source.count("_x0") == 3
    assert inspect.getsource(fischer.linearised_kernel.unchecked).count("numpy.log1p") == 1
    # the clipping follows a temporary that carries the correlation K_ab/(sqrt(K_aa) sqrt(K_bb))
    source = inspect.getsource(gaussian.relu_arccos2.unchecked)
    assert source.count("numpy.arcsin") == 1 and "numpy.maximum(1 - _x" in source
