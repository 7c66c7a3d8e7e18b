"""Robustness: hypothesis fuzzing of the command line and the public functions, extreme depths, and memory.

Every call must either fail cleanly or return a finite, correct answer.  A clean failure is a ``ValueError``
(normally ``ParameterError``) whose message starts with the name(s) of the offending parameter(s); for
``resprop`` (``resprop.numeric.cli.main`` called in process) it is exit code 2 and exactly one line ``resprop: error:
<name>: ...`` on stderr (argparse may add its usage line), never a traceback.  A silent NaN or inf in a result is
a failure too.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import re
import resource
import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resprop.numeric.cli import main
from resprop.numeric.engine import monte_carlo as MC
from resprop.numeric.theories.abcd import abcd as AB
from resprop.numeric.theories.fischer import field_theory as F
from resprop.numeric.theories.lognormal import log_gaussian as LG
from resprop.numeric.theories.pdlt import residual_mlp as RM
from resprop.numeric.theories.stable import residual_ntk as RN
from resprop.numeric.theories.stable import stable_resnet as SR

FUZZ = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: every name an error message may start with (CLI flags appear in argparse's own "argument --x" messages)
PARAMETERS = {
    "input_kernel", "input_kernel_offdiag", "width", "K0", "Q0", "sigma_w2", "sigma_b2", "sigma_w2_out", "sigma_b2_out",
    "rho", "depth", "iters",
    "grid", "activation", "eta0", "theta", "digits", "n", "d", "alpha", "lam", "samples", "seed", "hypo_constant",
    "hypo_samples", "gamma", "n_out", "r", "scaling", "angle", "d_in", "N", "L", "gamma0", "assignment", "reading",
    "a1", "b1", "a", "b", "c", "nu", "method", "chunk_size", "balanced", "C_W", "C_b", "K1", "h", "X",
    "assignments", "widths", "rho_min", "rho_max", "t_eval", "rtol", "full",
    "zz",  # an unknown exponent key of the abcd fuzzing: its error message names the key the user gave
}
# a name may carry its command-line or paper alias in parentheses: "widths (N): ...", "assignments (--check): ..."
NAMES = re.compile(r"^((?:[A-Za-z_]\w*(?: \([^)]*\))?)(?:, [A-Za-z_]\w*(?: \([^)]*\))?)*): \S")


def names_a_parameter(message: str) -> bool:
    m = NAMES.match(message)
    return bool(m) and all(re.sub(r" \(.*\)$", "", name) in PARAMETERS for name in m.group(1).split(", "))


def all_finite(obj) -> bool:
    """True when every number in a (nested) result is finite; strings, bools and None are skipped."""
    if obj is None or isinstance(obj, (str, bool, int, np.integer)):  # ints are exact (10**20 is fine)
        return True
    if dataclasses.is_dataclass(obj):
        return all(all_finite(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name != "seed")
    if isinstance(obj, dict):
        return all(all_finite(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(all_finite(v) for v in obj)
    arr = np.asarray(obj)
    if arr.dtype.kind in "fc":
        return bool(np.all(np.isfinite(arr)))
    if arr.dtype.kind == "O":
        return all(all_finite(v) for v in arr.ravel())
    return True


# --------------------------------------------------------------------------- the command line
def run_cli(argv: list[str]) -> tuple[int, object]:
    """Run resprop in process; assert the clean-failure contract; return (exit code, parsed output)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # every warning, every time (not once per location)
            code = main(argv)
    except SystemExit as exc:  # argparse: usage line + one error line, exit 2
        code, parsed = exc.code, False
    else:
        parsed = True
    stderr = err.getvalue()
    assert "Traceback" not in stderr, (argv, stderr)
    if code == 2:
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error:" in ln]
        assert len(errors) == 1, (argv, stderr)
        assert all(ln.startswith(("usage:", " ")) or ln is errors[0] for ln in lines), (argv, stderr)
        assert errors[0].startswith("resprop: error: "), (argv, stderr)
        if parsed:  # a ValueError of resprop itself (argparse's own messages name the flag their way)
            assert names_a_parameter(errors[0].removeprefix("resprop: error: ")), (argv, errors[0])
        return code, None
    assert code == 0, (argv, code, stderr)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], (argv, [str(w.message) for w in caught])
    text = out.getvalue()
    data = json.loads(text) if "--json" in argv else text
    if isinstance(data, str):
        assert not re.search(r"\b(nan|inf)\b", data, re.I), (argv, data)
    else:
        assert all_finite(data), (argv, data)
    return code, data


BAD_NUMBERS = ["nan", "inf", "-inf", "0", "-1", "-0.5", "1e308", "-1e308", "1e-308", "5e-324", "1e400", "abc", "",
               "1,5", "0x10"]


def number(lo: float, hi: float) -> tuple[st.SearchStrategy[str], st.SearchStrategy[str]]:
    """(good values in [lo, hi] as text, bad values)."""
    return st.floats(lo, hi, allow_nan=False).map(lambda v: f"{v:.6g}"), st.sampled_from(BAD_NUMBERS)


def integer(lo: int, hi: int):
    return st.integers(lo, hi).map(str), st.sampled_from(["0", "-3", "2.5", "1e3", "nan", "x", "1" + "0" * 22])


def choice(good: list, bad: list):
    return st.sampled_from(good), st.sampled_from(bad or good)


def several(spec, max_size: int = 3):
    good, bad = spec
    return st.lists(good, min_size=1, max_size=max_size), st.lists(st.one_of(good, bad), min_size=0, max_size=max_size)


FLAG = (st.just(None), st.just(None))  # a switch without a value


@st.composite
def argv_for(draw, command: str, options: dict[str, tuple], required: tuple[str, ...] = (),
             positional: tuple | None = None) -> list[str]:
    """Half of the examples use only good values with every required option; the rest mix in bad values and
    drop options (argparse must name a missing required one)."""
    clean = draw(st.booleans())
    argv = [command]
    if positional is not None:
        argv += draw(positional[0] if clean else st.one_of(*positional))
    for flag, (good, bad) in options.items():
        if draw(st.integers(0, 9)) < (0 if clean and flag in required else 1 if flag in required else 4):
            continue
        value = draw(good if clean or draw(st.booleans()) else bad)
        argv += [flag] + (value if isinstance(value, list) else [value] if value is not None else [])
    argv.append("--json")
    return argv


FIELD_ACTIVATIONS = choice(["erf", "relu", "linear"], ["1/x", "exp(x**2)", "x**x", "foo(", "__import__('os')",
                                                      "Max(x, 0)", "I*x", "zoo*x", "y", ""])
FIELD_COMMON = {
    "--input-kernel": number(1e-3, 2.0), "--input-kernel-offdiag": number(-0.001, 0.001), "--sigma-w2": number(0.1, 3.0),
    "--sigma-b2": number(0.0, 0.5), "--sigma-w2-out": number(0.1, 3.0), "--activation": FIELD_ACTIVATIONS,
}


@FUZZ
@given(argv_for("rho-star", {"--depth": several(integer(1, 40)), **FIELD_COMMON},
                required=("--depth", "--input-kernel", "--sigma-w2", "--sigma-b2")))
def test_cli_rho_star_fuzz(argv):
    code, data = run_cli(argv)
    if code == 0:  # rho* in (0, 3], or null with the edge its supremum approaches (no interior maximum)
        for value, edge in zip(data["rho_star"], data["rho_star_boundary"]):
            assert (value is None) != (edge is None)
            assert value is None or 0 < value <= 3.0


@FUZZ
@given(argv_for("response", {"--rho": number(0.0, 2.0), "--depth": integer(1, 200), **FIELD_COMMON,
                             "--activation": choice(["erf", "relu", "linear", "tanh", "gelu", "sin(x)"],
                                                    ["1/x", "softmaxx", "exp(x**2)"])},
                required=("--rho", "--depth", "--input-kernel", "--sigma-w2", "--sigma-b2")))
def test_cli_response_fuzz(argv):
    code, data = run_cli(argv)
    if code == 0:
        K, chi = np.array(data["K"]), np.array(data["chi"])
        assert chi[0] == 1.0 and np.all(np.diff(K) >= -1e-12 * K[1:])  # C^(l) >= 0 (eta may be < 0 for sin)


@settings(FUZZ, max_examples=10)
@given(argv_for("j2bar", {"--digits": integer(1, 4)}, positional=several(number(0.0, 3.14), max_size=2)))
def test_cli_j2bar_fuzz(argv):
    code, data = run_cli(argv)
    if code == 0:
        for c, q in zip(data["closed_form"], data["quadrature"]):
            assert math.isclose(float(c), float(q), rel_tol=1e-4, abs_tol=1e-6)


@FUZZ
@given(argv_for("log-gaussian", {
    "--width": integer(2, 40), "--depth": integer(1, 20), "--alpha": number(-1.5, 1.5), "--lam": number(0.0, 1.5),
    "--balanced": FLAG, "--simulate": FLAG, "--samples": integer(2, 200),
    "--seed": integer(0, 5), "--hypo-constant": number(-2.0, 0.0), "--hypo-samples": integer(2, 100)},
    required=("--width", "--depth", "--alpha", "--lam")))
def test_cli_log_gaussian_fuzz(argv):
    code, data = run_cli(argv)
    if code == 0:
        th = data["theory"]
        assert th["var_G"] > 0 and th["beta"] > 0


@FUZZ
@given(argv_for("nu", {"--gamma": number(0.0, 0.999), "--n-out": integer(1, 100),
                       "--activation": choice(["relu", "linear", "tanh", "erf", "leaky_relu:0.1", "leaky_relu:-2",
                                               "leaky_relu:1e30"], ["leaky_relu:1e300", "leaky_relu:nan",
                                                                    "leaky_relu:", "leaky_relu:x", "gelu", "RELU", ""])},
                required=("--gamma", "--activation")))
def test_cli_nu_fuzz(argv):
    code, data = run_cli(argv)
    if code == 0:
        assert data["nu"] > 0 and data["C_W"] > 0 and data["r_star"] > 0


GOOD_SCALINGS = ["unscaled", "uniform", "decreasing", "1/l", "1/sqrt(l)", "l**-2 + 1/L", "exp(-l)"]
BAD_SCALINGS = ["-1", "0", "1/(l-1)", "I", "zoo", "x", "1/0", "sin(l)", "__import__('os')", "l**1000", "", "lambda"]
SCALINGS = st.sampled_from(GOOD_SCALINGS + BAD_SCALINGS)


@FUZZ
@given(argv_for("stable-kernel", {"--depth": several(integer(1, 300)),
                                  "--scaling": choice(GOOD_SCALINGS, BAD_SCALINGS), "--angle": number(0.0, 3.14),
                                  "--sigma-w2": number(0.1, 4.0), "--sigma-b2": number(0.0, 1.0),
                                  "--d-in": integer(2, 10**6)}, required=("--depth",)))
def test_cli_stable_kernel_fuzz(argv):
    code, data = run_cli(argv)
    if code == 0:
        assert np.all(np.abs(data["correlation"]) <= 1.0)


EXPONENT = st.one_of(st.sampled_from(["0", "1/2", "-1/2", "1", "3/7", "-2", "0.25", "2.5e-1"]),
                     st.sampled_from(["nan", "inf", "1/0", "x", "", "1e400", "1/2/3"]))


@st.composite
def assignments(draw) -> list[str]:
    keys = ["a1", "b1", "a", "b", "c", "d"] + draw(st.lists(st.sampled_from(["alpha", "nu", "a_l", "bL", "zz"]),
                                                         max_size=2))
    keys = draw(st.permutations(keys))[: draw(st.integers(4, len(keys)))]
    items = [f"{k}={draw(EXPONENT)}" for k in keys]
    if draw(st.booleans()) and items:
        items[0] = items[0].replace("=", "")  # not key=value
    return items


@FUZZ
@given(st.one_of(
    assignments().map(lambda items: ["abcd", "--check", *items, "--json"]),
    st.tuples(st.lists(st.one_of(*number(1.0, 1e6)), min_size=1, max_size=3), st.one_of(*integer(2, 10**6)),
              st.one_of(*number(0.1, 10.0))).map(
        lambda t: ["abcd", "--width", *t[0], "--depth", t[1], "--gamma0", t[2], "--json"]),
    st.sampled_from([["abcd", "--json"], ["abcd", "--reading", "sideways"], ["abcd", "--check"]])))
def test_cli_abcd_fuzz(argv):
    run_cli(argv)


def test_cli_missing_and_unknown():
    for argv in (["rho-star"], ["response", "--rho"], ["nu"], ["nosuchcommand"], ["stable-kernel", "--depth"],
                 ["log-gaussian", "--width", "10"], ["j2bar"], ["abcd", "--width"], []):
        code, _ = run_cli(argv)
        assert code == 2, argv


# --------------------------------------------------------------------------- extreme depths (cheap routes)
def _stable_resnet_at_depth(L: int):
    k = SR.two_input_kernels([L], "unscaled", angle=1.0)  # Q ~ 2^L, carried in logs (2^L > float64 max here)
    assert np.isclose(k["log_Q_diag"][0], L * np.log(2.0))
    assert all_finite(k) and 0.999 < k["correlation"][0] <= 1.0
    u = SR.two_input_kernels([L], "uniform", angle=1.0)
    assert all_finite(u) and abs(u["correlation"][0] - SR.two_input_kernels([L // 10], "uniform")["correlation"][0]) < 1e-3


def test_extreme_depths():
    r = F.response(0.05, 10**5, 0.3, 1.25, 0.05)  # erf: K grows linearly, everything finite
    assert all_finite(r) and r["K"].shape == (10**5 + 1,) and np.all(np.diff(r["K"]) > 0)
    # Stable ResNet at 10^4 layers (already 2^(10^4) >> float64): the 10^5 version takes ~25 s and runs under
    # `-m slow` (test_extreme_depths_stable_resnet_1e5); `resprop stable-kernel --depth 100000 --scaling uniform`
    # also runs in the default suite (tests/test_doc_blocks.py, the command-line block of docs/quickstart/stable.md)
    _stable_resnet_at_depth(10**4)
    th = LG.theory(50, 10**6, 0.7071, 0.7071, hypo_constant=-0.876)
    assert all_finite(th)
    # geometric growth beyond float64 is an error naming the inputs, not inf/nan
    with pytest.raises(ValueError, match=r"^rho, sigma_w2, .*depth"):
        F.response(0.05, 5000, 3.0, 2.0, 0.05, activation="relu")
    with pytest.raises(ValueError, match=r"^rho, sigma_w2, .*depth"):
        F.rho_star([5000], 0.05, 2.0, 0.05, activation="relu")
    for bad in (10**7, 10**20, float("inf")):
        with pytest.raises(ValueError, match=r"^depth:"):
            F.response(0.05, bad, 0.3, 1.25, 0.05)
        with pytest.raises(ValueError, match=r"^depth:"):
            SR.two_input_kernels([bad])


@pytest.mark.slow
def test_extreme_depths_stable_resnet_1e5():
    """The 10^5-layer Stable ResNet kernels (unscaled in logs, uniform converged to 1e-3 against 10^4 layers)."""
    _stable_resnet_at_depth(10**5)


# --------------------------------------------------------------------------- public functions
def check_call(fn, **kwargs):
    """Call fn; a ValueError must name a parameter, any other exception fails; results must be finite."""
    try:
        out = fn(**kwargs)
    except ValueError as exc:
        assert names_a_parameter(str(exc)), (fn.__name__, kwargs, str(exc))
        return None
    assert all_finite(out), (fn.__name__, kwargs, out)
    return out


BAD = [float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1e308, -1e308, 5e-324, 1e-308, None, "x", [1.0, 2.0],
       [[1.0]], 1j, True, np.array([]), object()]
BAD_VALUES = st.sampled_from(BAD)
BAD_DEPTHS = st.sampled_from([0, -1, 2.5, float("nan"), 1e20, 10**7, None, "x", [3], True, 1j])


def real(lo: float, hi: float):
    return st.floats(lo, hi), BAD_VALUES


def whole(lo: int, hi: int):
    return st.integers(lo, hi), BAD_DEPTHS


@st.composite
def call_args(draw, **specs) -> dict:
    """Keyword arguments: half the examples take only good values, the others mix in bad ones (1 in 3)."""
    clean = draw(st.booleans())
    return {k: draw(good if clean or draw(st.integers(0, 2)) else bad) for k, (good, bad) in specs.items()}


@st.composite
def psd_matrices(draw):
    P = draw(st.integers(1, 4))
    X = np.array(draw(st.lists(st.floats(-2, 2), min_size=P * 3, max_size=P * 3))).reshape(P, 3)
    return X @ X.T / 3 + 0.05 * np.eye(P)


BAD_MATRICES = st.sampled_from([np.ones((2, 3)), np.ones((2, 2, 2)), np.full((2, 2), np.nan), np.full((2, 2), np.inf),
                                np.eye(2) * 1e300, np.eye(2) * 5e-324, np.zeros((0, 0)),
                                np.array([[1.0, 0.5], [0.0, 1.0]]), np.array([[1.0, 2.0], [2.0, 1.0]]),
                                np.diag([1.0, 0.0]), [["a", "b"], ["c", "d"]], [[0.3]], np.eye(2) + 1j, None, 3.0])
ACTIVATIONS = (st.sampled_from(["erf", "relu", "linear", "tanh"]),
               st.sampled_from([3, None, ["erf"], "1/x", "softmaxx", "exp(x**2)", "__import__('os')"]))


@FUZZ
@given(call_args(input_kernel=(psd_matrices(), BAD_MATRICES), depth=whole(1, 40), rho=real(0, 2), sigma_w2=real(0.1, 3),
                 sigma_b2=real(0, 0.5), activation=ACTIVATIONS, eta0=(st.just(1.0), BAD_VALUES)))
def test_nngp_fuzz(kw):
    out = check_call(F.nngp, **kw)
    if out is not None:
        assert np.allclose(out["K"], out["K"].T)
        assert np.all(np.diag(out["K"]) >= np.diag(np.asarray(kw["input_kernel"])) - 1e-12)  # K only grows


@FUZZ
@given(call_args(input_kernel=(psd_matrices(), BAD_MATRICES), depth=whole(1, 40), rho=real(0, 2), sigma_w2=real(0.1, 3),
                 sigma_b2=real(0, 0.5), activation=(st.sampled_from(["erf", "relu"]), ACTIVATIONS[1]),
                 ntk=(st.booleans(), st.just(True))))
def test_nngp_ntk_fuzz(kw):
    out = check_call(RN.nngp_ntk, **kw)
    if out is not None:
        K0 = np.asarray(kw["input_kernel"])
        assert np.allclose(out["K"], out["K"].T) and np.all(np.diag(out["K"]) >= np.diag(K0) - 1e-12)
        if kw["ntk"]:  # Theta^(L) = K^(L) + (non-negative gradient terms) on the diagonal
            assert np.all(np.diag(out["Theta"]) >= np.diag(out["K"]) - 1e-12 * np.abs(np.diag(out["K"])))


@FUZZ
@given(call_args(input_kernel=real(1e-3, 2), depth=whole(1, 200), rho=real(0, 2), sigma_w2=real(0.1, 3), sigma_b2=real(0, 0.5),
                 input_kernel_offdiag=(st.one_of(st.none(), st.floats(-1e-3, 1e-3)), BAD_VALUES),
                 activation=(st.sampled_from(["erf", "relu", "gelu", "linear"]), ACTIVATIONS[1]),
                 eta0=(st.floats(0.5, 2), BAD_VALUES)))
def test_response_fuzz(kw):
    out = check_call(F.response, **kw)
    if out is not None:
        assert np.all(np.diff(out["K"]) >= 0) and out["chi_out"] >= 0 and out["chi"][0] == kw["eta0"]


@FUZZ
@given(call_args(depths=(st.lists(st.integers(1, 40), min_size=1, max_size=3),
                         st.one_of(BAD_VALUES, st.just([[5, 10]]), st.just([]))),
                 input_kernel=real(1e-3, 2), sigma_w2=real(0.1, 3), sigma_b2=real(0, 0.5),
                 input_kernel_offdiag=(st.one_of(st.none(), st.floats(-1e-3, 1e-3)), BAD_VALUES),
                 grid=(st.sampled_from([None, [0.01, 0.1, 0.3, 1.0]]),
                       st.sampled_from([[0.5], [], [[0.1, 0.2]], [-1, 1], [0.3, 0.1, 0.2], "x"])),
                 iters=(st.integers(0, 30), st.sampled_from([-1, "x", 2.5, 10**9])),
                 activation=(st.sampled_from(["erf", "relu", "linear"]), ACTIVATIONS[1])))
def test_rho_star_fuzz(kw):
    out = check_call(F.rho_star, **kw)
    if out is not None:  # rho* > 0 where interior; None exactly where the supremum is at an edge
        interior = out["rho_star_interior"]
        stars = np.asarray(out["rho_star"], dtype=object)
        assert all((v is None) == (not i) for v, i in zip(stars.ravel(), interior.ravel()))
        assert np.all(np.asarray(out["rho_star"], dtype=float)[interior] > 0)


@FUZZ
@given(call_args(width=whole(2, 60), depth=whole(1, 30), alpha=(st.one_of(st.floats(-1.5, 1.5), st.lists(
    st.floats(0.1, 1), min_size=1, max_size=4)), BAD_VALUES), lam=real(0, 1.5), balanced=(st.booleans(), BAD_VALUES),
                 hypo_constant=(st.one_of(st.none(), st.floats(-2, 0)), BAD_VALUES)))
def test_log_gaussian_theory_fuzz(kw):
    out = check_call(LG.theory, **kw)
    if out is not None:
        assert out["var_G"] > 0


ACT_CLASSES = (st.sampled_from(["relu", "linear", "tanh", "erf", "leaky_relu:0.2", "leaky_relu:-3",
                                "leaky_relu:1e200"]),
               st.sampled_from(["leaky_relu:nan", "leaky_relu:", "gelu", None, 3, "RELU"]))


@FUZZ
@given(call_args(gamma=real(0, 0.9999), activation=ACT_CLASSES), call_args(r=real(1e-3, 1e3), activation=ACT_CLASSES,
                                                                            n_out=whole(1, 50)))
def test_residual_mlp_fuzz(nu_kw, gs_kw):
    out = check_call(RM.nu, **nu_kw)
    if out is not None:
        assert np.all(np.asarray(out) > 0)
    g = check_call(RM.gamma_star, **gs_kw)
    if g is not None:
        assert np.all((np.asarray(g) >= 0) & (np.asarray(g) <= 1))


@FUZZ
@given(call_args(input_kernel=(psd_matrices(), BAD_MATRICES), depth=whole(1, 300), scaling=choice(GOOD_SCALINGS, BAD_SCALINGS),
                 sigma_w2=real(0.1, 4), sigma_b2=real(0, 1)))
def test_stable_kernels_fuzz(kw):
    out = check_call(SR.kernels, **kw)
    if out is not None:
        assert np.all(np.abs(out["correlation"]) <= 1.0)


@FUZZ
@given(call_args(depths=(st.lists(st.integers(1, 300), min_size=1, max_size=3), BAD_VALUES),
                 scaling=choice(GOOD_SCALINGS, BAD_SCALINGS), angle=real(0, 3.14), sigma_w2=real(0.1, 4),
                 sigma_b2=real(0, 1), d_in=whole(2, 10**9)))
def test_two_input_kernels_fuzz(kw):
    out = check_call(SR.two_input_kernels, **kw)
    if out is not None:
        assert np.all(np.abs(out["correlation"]) <= 1.0)


@FUZZ
@given(call_args(width=(st.integers(2, 12), st.sampled_from([1, 0, 2.0, 10**12, None])),
                 depth=(st.integers(1, 6), st.sampled_from([0, 10**12, 3.5])),
                 alpha=(st.floats(0.2, 1.5), BAD_VALUES), lam=(st.floats(0.1, 1.5), BAD_VALUES),
                 balanced=(st.booleans(), BAD_VALUES), samples=(st.integers(2, 50), st.sampled_from([1, 10**15, 2.5])),
                 seed=(st.integers(0, 3), st.sampled_from([-1, 1.5, "s"])),
                 method=choice(["reduced", "dense"], ["other", None]), n_out=(st.integers(0, 3), st.just(10**12)),
                 chunk_size=(st.sampled_from([None, 3]), st.just(0))))
def test_simulate_log_gaussian_fuzz(kw):
    try:
        out = MC.simulate_log_gaussian(**kw)
    except ValueError as exc:
        assert names_a_parameter(str(exc)), (kw, str(exc))
        return
    alive = np.isfinite(out.G)
    # G = -inf only for networks that died (all ReLUs off with alpha = 0), and act_sq is NaN after death
    assert np.all(alive | ((out.G == -np.inf) & np.any(out.alpha == 0))), (kw, out.G)
    assert all_finite(out.active_fraction) and all_finite(out.act_sq[alive]) and all_finite(out.z_out)
    assert out.G.shape == (kw["samples"],)
    assert np.all((out.active_fraction >= 0) & (out.active_fraction <= 1))


@FUZZ
@given(st.one_of(assignments(), st.sampled_from([None, 5, [1, 2], "a1=0 b1=0 a=1/2 b=0 c=0 d=1/2", []])),
       st.sampled_from(["paper", "literal", "other", None]))
def test_abcd_check_fuzz(items, reading):
    out = check_call(AB.check, assignments=items, reading=reading)
    if out is not None:
        verdicts = out.to_dict()
        assert set(verdicts) == {"bp", "pc"}
        assert all(isinstance(v, bool) for alg in verdicts.values() for v in alg.values())


# --------------------------------------------------------------------------- memory
def _peak_bytes(fn) -> tuple[int, int]:
    """(tracemalloc peak of fn's allocations, growth of the process's maximum RSS) in bytes."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0


def test_memory_reduced_path_n_d_2000():
    """The reduced Li-Nica-Roy path at n = d = 2000 works in chunks of (chunk, n) arrays: far below 4 GB."""
    peak, rss = _peak_bytes(lambda: MC.simulate_log_gaussian(width=2000, depth=2000, alpha=0.7071, lam=0.7071,
                                                             samples=64, seed=0))
    assert peak < 4 * 2**30 and rss < 4 * 2**30
    assert peak < 64 * 2**20  # measured ~ 7 MB: outputs 2 x 64 x 2000 floats plus ~5 work arrays of 64 x 2000


def test_memory_dense_path_chunking_is_bounded():
    """Dense path: the (chunk, n, n) weight stack is capped at 64 MiB, so the peak does not grow with samples."""
    n = 96
    run = lambda samples: _peak_bytes(lambda: MC.simulate_log_gaussian(  # noqa: E731
        width=n, depth=2, alpha=0.7071, lam=0.7071, samples=samples, seed=0, method="dense"))[0]
    stack = 2**26  # MC._DENSE_CHUNK_BYTES
    assert MC._auto_chunk(n, "dense") * 8 * n * n <= stack
    small, large = run(1024), run(4096)  # both above the auto chunk (910 samples at n = 96)
    assert large < 3 * stack
    assert large < 1.5 * small + 4096 * (1 + 2 * 2) * 8  # only the per-sample outputs grow
    r = _peak_bytes(lambda: MC.simulate_residual_mlp(width=n, depth=2, gamma=0.5, C_W=1.0, samples=4096, seed=0,
                                                     method="dense"))[0]
    assert r < 3 * stack


def test_memory_guard_names_the_parameter():
    with pytest.raises(ValueError, match=r"^width: the simulation would need"):
        MC.simulate_log_gaussian(width=10**6, depth=1, alpha=1.0, lam=1.0, samples=2, seed=0, method="dense")
    with pytest.raises(ValueError, match=r"^samples, depth: the simulation would need"):
        MC.simulate_log_gaussian(width=4, depth=10**6, alpha=1.0, lam=1.0, samples=10**6, seed=0)
