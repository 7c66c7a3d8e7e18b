"""Parameters declared once (issue item 7): the ``PARAMETERS`` declarations drive the kernels' domains, the one
validation layer (``validation.check`` / ``Parameter.validate``), the hypothesis strategies (tests/strategies.py)
and the reference page docs/reference/parameters.md.

Property tests, for every generated kernel (read from each module's ``RESULTS`` table, no hand list): arguments
drawn inside their declared domains give a finite float64 or a ParameterError naming the kernel's own inputs (a
float64 overflow or a compound constraint); one argument drawn outside its declared domain gives a ParameterError
naming that argument.  Deterministic (derandomize) and small (a few examples per kernel).
"""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resprop.numeric.engine.validation import ParameterError, check, parse_domain
from resprop.registry import derivations, generated_module
from tests import strategies as S

SETTINGS = settings(derandomize=True, max_examples=8, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))

THEORIES = list(derivations())
DECLARED = {t: S.declarations(t) for t in THEORIES}
KERNELS = [(t, name, spec["inputs"]) for t in THEORIES
           for name, spec in importlib.import_module(generated_module(t)).RESULTS.items() if spec["inputs"]]
IDS = [f"{t}.{name}" for t, name, _ in KERNELS]
PARAMS = [(t, p) for t in THEORIES for p in DECLARED[t].values()]
PARAM_IDS = [f"{t}.{p.name}" for t, p in PARAMS]


def _kernel(theory, name):
    return getattr(importlib.import_module(generated_module(theory)), name)


def _names(err: ParameterError) -> set[str]:
    return {n.strip() for n in err.parameter.split(",")}


def test_every_kernel_input_is_declared_with_its_domain():
    for theory, name, inputs in KERNELS:
        for arg, domain in inputs.items():
            assert arg in DECLARED[theory], f"{theory}.{name}: input {arg!r} has no Parameter declaration"
            assert DECLARED[theory][arg].domain == domain, (theory, name, arg)


@pytest.mark.parametrize("theory, name, inputs", KERNELS, ids=IDS)
def test_inside_the_declared_domains_is_finite_or_a_named_overflow(theory, name, inputs):
    f = _kernel(theory, name)

    @SETTINGS
    @given(S.kernel_inputs(inputs, DECLARED[theory]))
    def run(args):
        try:
            with np.errstate(all="ignore"):
                value = f(**args)
        except ParameterError as err:
            assert _names(err) <= set(inputs), str(err)
            return
        arr = np.asarray(value)
        assert arr.dtype == np.float64 and np.isfinite(arr).all(), (args, value)

    run()


@pytest.mark.parametrize("theory, name, inputs", KERNELS, ids=IDS)
def test_outside_a_declared_domain_is_a_parameter_error_naming_it(theory, name, inputs):
    f = _kernel(theory, name)
    interval_args = [a for a, dom in inputs.items() if parse_domain(dom).kind == "interval" or dom == "real"]

    @SETTINGS
    @given(S.kernel_inputs(inputs, DECLARED[theory]), st.sampled_from(interval_args), st.data())
    def run(args, arg, data):
        args[arg] = data.draw(S.outside(DECLARED[theory][arg], kernel=True))
        with pytest.raises(ParameterError) as info:
            f(**args)
        assert info.value.parameter == arg and str(info.value).startswith(f"{arg}: "), str(info.value)

    run()


@pytest.mark.parametrize("theory, parameter", PARAMS, ids=PARAM_IDS)
def test_check_accepts_the_domain_and_refuses_the_rest(theory, parameter):
    domain = parse_domain(parameter.domain)

    @SETTINGS
    @given(S.inside(parameter), S.outside(parameter))
    def run(good, bad):
        if domain.kind == "interval":
            out = parameter.validate(good)
            assert out == good and type(out) is (int if parameter.integer else float)
        with pytest.raises(ParameterError) as info:
            check(parameter, bad, name=f"--{parameter.name}")
        assert info.value.parameter == f"--{parameter.name}"
        assert parameter.domain in str(info.value), str(info.value)

    run()


def test_check_messages_name_the_parameter_and_the_range():
    from resprop.derive.symbols import Parameter

    gamma = Parameter("gamma", "[0, 1)", r"\gamma", "residual hyperparameter")
    depth = Parameter("L", "[1, inf)", "L", "depth", integer=True)
    cases = [(gamma, 1.0, "gamma: must lie in [0, 1), got 1.0"),
             (gamma, math.nan, "gamma: must be a finite number in [0, 1), got nan"),
             (gamma, True, "gamma: must be a real number in [0, 1), got True"),
             (gamma, "0.5", "gamma: must be a real number in [0, 1), got '0.5'"),
             (depth, 0, "L: must lie in [1, inf), got 0"),
             (depth, 2.5, "L: must be an integer in [1, inf), got 2.5"),
             (depth, np.array([3, 2**70], dtype=object), "L: must be an integer in [1, inf) within int64"),
             (depth, 1e20, "L: must be an integer in [1, inf) given exactly")]
    for p, value, message in cases:
        with pytest.raises(ParameterError) as info:
            p.validate(value)
        assert isinstance(info.value, ValueError) and str(info.value).startswith(message), str(info.value)
    assert depth.validate(np.array([1, 5], dtype=np.int32)).dtype == np.int64
    assert gamma.validate([0.0, 0.5]).dtype == np.float64


def test_generated_domain_module_is_the_validation_layer():
    from resprop.generated import _domain
    from resprop.numeric.engine import validation

    for name in ("as_float", "interval", "covariance", "constraint", "ParameterError", "COVARIANCE_RTOL"):
        assert getattr(_domain, name) is getattr(validation, name)
    assert _domain.result is validation.kernel_result


def test_generated_parameters_module_copies_the_declarations():
    from resprop.registry import declared

    for theory in THEORIES:
        for name, p in DECLARED[theory].items():
            copy = declared(theory, name)
            assert (copy.domain, copy.meaning, copy.convention, copy.latex, copy.integer, copy.layer) == \
                (p.domain, p.meaning, p.convention, p.latex, p.integer, p.layer), (theory, name)


@pytest.mark.parametrize("argv, option", [
    (["nu", "--gamma", "nan", "--activation", "relu"], "--gamma"),
    (["nu", "--gamma", "1", "--activation", "relu"], "--gamma"),
    (["log-gaussian", "--width", "10", "--depth", "5", "--alpha", "0.7", "--lam", "-1"], "--lam"),
    (["stable-kernel", "--depth", "3", "--sigma-w2", "0"], "--sigma-w2"),
])
def test_declared_cli_options_exit_2_naming_the_option(argv, option, capsys):
    """One message form for every bad input: ``resprop: error: NAME: must ...`` (the option's destination)."""
    from resprop.numeric.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    name = option.lstrip("-").replace("-", "_")
    assert err.startswith(f"resprop: error: {name}: must") and err.count("\n") == 1, err
