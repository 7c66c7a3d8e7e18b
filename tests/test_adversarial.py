"""Issue 11's adversarial suite: every case of tests/adversarial.py ends in a clean error or a correct result.

The cases are bad and edge-case inputs for every CLI subcommand and the public Python API (NaN, inf, negative,
zero, huge, non-numeric, empty, one ulp out of range, integer arrays, float32, output paths that are files, lie
under files, are unwritable or hold foreign files, bad sweep specs).  A result is checked against an independent
reference (SymPy at 30 digits, scipy.stats, an exact limit, or the same call in float64).
"""
import adversarial
import pytest

CASES = adversarial.all_cases()


def _marks(case):
    marks = [pytest.mark.timeout(case.timeout)]
    if "slow" in case.tags:  # subprocess scenarios of the slow writers (reproduce, figures, train): -m slow
        marks.append(pytest.mark.slow)
    return marks


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in CASES])
def test_adversarial_case(case):
    outcome, detail = adversarial.classify(case)
    assert outcome in ("clean error", "correct"), f"{outcome}: {detail}"


@pytest.mark.registry
def test_table_covers_every_subcommand():
    """No subcommand of resprop and its own theories is left out of the table (derive and theories take no values:
    derive --check is tested elsewhere, theories [--json] in tests/test_registry.py).  A plugin's subcommands are
    its own: the conformance suite's CLI check covers every registered theory's (tests/test_conformance.py)."""
    import importlib

    from resprop import registry
    from resprop.numeric.cli import build_parser

    parser = build_parser()
    subcommands = set(next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices)
    builtin = {importlib.import_module(package).THEORY.slug for package in registry.BUILTIN}
    plugins = {c for th in registry.theories().values() if th.slug not in builtin for c in th.subcommands}
    covered = {c.argv[0] for c in CASES if c.argv}
    assert subcommands - plugins - covered <= {"derive", "theories"}, sorted(subcommands - plugins - covered)


def test_classifier_can_fail():
    """The classifier itself: a bad input that is accepted, and a wrong answer, are not counted as passes."""
    accepted = adversarial.Case("x", "error", ("k0",), call=lambda: 1.0)
    wrong = adversarial.Case("y", "ok", call=lambda: float("nan"), check=adversarial._finite)
    unnamed = adversarial.Case("z", "error", ("k0",), call=lambda: (_ for _ in ()).throw(ValueError("bad")))
    crash = adversarial.Case("w", "ok", call=lambda: 1 / 0)
    assert adversarial.classify(accepted)[0] == "silent wrong"
    assert adversarial.classify(wrong)[0] == "silent wrong"
    assert adversarial.classify(unnamed)[0] == "false error"
    assert adversarial.classify(crash)[0] == "traceback"
