"""One command-line vocabulary (issue 28, item 2), checked over the whole argparse tree: every subcommand of
``resprop`` (resprop's own and each registered theory's, read from the parser and the registry, not from a list
here) and every option of each.

* every option has a help line, numeric options state their range, options with a default state it, choices are
  named, and an option built from a declaration (``add_parameter_option``) shows that declaration's meaning, range
  and convention;
* one spelling per concept: the old spellings (``--weight-var``, ``--bias-var``, ``--gamma2``, ``--seeds``,
  ``--widths``) are not visible anywhere, only as deprecated aliases hidden from --help, and they still work,
  with one deprecation line on stderr, and are listed in docs/api-renames.md;
* ``resprop --version``, and "did you mean" for a mistyped subcommand or option (the option's own subcommand's
  usage, exit 2).
"""
from __future__ import annotations

import argparse
import importlib.metadata
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import resprop
from resprop import registry
from resprop.numeric.cli import build_parser, main
from resprop.numeric.cli_support import VOCABULARY, DeprecatedAlias
from resprop.numeric.engine.validation import describe

# the registry as a whole: run again with a plugin installed (`pytest --registry-only`, .ci/run)
pytestmark = pytest.mark.registry

ROOT = Path(__file__).resolve().parent.parent
PARSER = build_parser()
SUBCOMMANDS = next(a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)).choices
#: (subcommand, action) for every argument of every subcommand but -h
ACTIONS = [(name, a) for name, p in SUBCOMMANDS.items() for a in p._actions
           if not isinstance(a, argparse._HelpAction)]
VISIBLE = [(name, a) for name, a in ACTIONS if a.help != argparse.SUPPRESS]
HIDDEN = [(name, a) for name, a in ACTIONS if a.help == argparse.SUPPRESS]

#: the renames of issue 28 (subcommand, old spelling, new spelling); every one must be a deprecated alias
RENAMES = {("kernel", "--weight-var", "--sigma-w2"), ("kernel", "--bias-var", "--sigma-b2"),
           ("residual-mlp", "--gamma2", "--gamma"), ("train", "--seeds", "--seed"), ("abcd", "--widths", "--width")}
#: spellings of one concept: at most one of each group may be visible anywhere in the tree (written from the
#: issue and the papers' notation, not read from the code)
SYNONYMS = [{"--sigma-w2", "--weight-var", "--sigma-w-2", "--sw2", "--weight-variance"},
            {"--sigma-b2", "--bias-var", "--sigma-b-2", "--sb2", "--bias-variance"},
            {"--gamma", "--gamma2", "--gamma-2", "--skip-gain"},
            {"--seed", "--seeds", "--random-seed"},
            {"--width", "--widths", "--n", "--N"},
            {"--depth", "--depths", "--d", "--L", "--layers"},
            {"--samples", "--n-samples", "--num-samples"},
            {"--input-kernel", "--k0", "--K0", "--q0"}]
#: a range in a help line: an interval, an inequality, a named finite domain
RANGE = re.compile(r"[\[(]\s*[-\w.^ ]+,\s*[-\w.^ +]+[\])]|>=|<=|> ?0|\bany finite\b")
NUMERIC_TYPES = (int, float)


def _label(name, action):
    return f"{name} {'/'.join(action.option_strings) or action.dest}"


def _is_numeric(action) -> bool:
    return action.type in NUMERIC_TYPES or hasattr(action.type, "parameter")


def _run(argv, capsys):
    """main(argv) in this process: (exit code, stdout, stderr); argparse's SystemExit counts as its code."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


# --------------------------------------------------------------------------- the tree
def test_the_tree_holds_every_registered_subcommand():
    """The walk covers resprop's own subcommands and every theory's (from the registry)."""
    expected = set(registry.CORE_SUBCOMMANDS)
    for th in registry.theories().values():
        expected |= set(th.subcommands)
    assert expected <= set(SUBCOMMANDS), sorted(expected - set(SUBCOMMANDS))
    assert len(VISIBLE) > 3 * len(SUBCOMMANDS)  # the walk sees the options, not just the parsers


# --------------------------------------------------------------------------- help lines
def test_every_option_has_a_help_line():
    missing = [_label(n, a) for n, a in VISIBLE if not (a.help or "").strip()]
    assert not missing, missing


def test_numeric_options_state_their_range():
    bad = [f"{_label(n, a)}: {a.help}" for n, a in VISIBLE if _is_numeric(a) and not RANGE.search(a.help)]
    assert not bad, bad


def test_defaults_are_stated():
    bad = [f"{_label(n, a)} (default {a.default!r}): {a.help}" for n, a in VISIBLE
           if a.nargs != 0 and a.default not in (None, argparse.SUPPRESS) and "default" not in a.help]
    assert not bad, bad


def test_choices_are_named_in_the_help():
    bad = [_label(n, a) for n, a in VISIBLE if a.choices and any(str(c) not in a.help for c in a.choices)]
    assert not bad, bad


def test_no_help_reads_in_real():
    """'a real number in real' (the old help of log-gaussian --alpha): the domain 'real' is said in words."""
    bad = [_label(n, a) for n, a in VISIBLE if re.search(r"\bin real\b", a.help)]
    assert not bad, bad
    alpha = next(a for n, a in VISIBLE if n == "log-gaussian" and a.dest == "alpha")
    assert "any finite real number" in alpha.help


def test_declared_options_show_their_declaration():
    """An option built from a declaration (add_parameter_option) shows its meaning, range and convention, and is
    checked against it: a value outside the range exits 2 naming the option."""
    declared = [(n, a) for n, a in VISIBLE if hasattr(a, "parameter")]
    assert len(declared) >= 20
    for n, a in declared:
        p = a.parameter
        assert p.meaning in a.help and describe(p) in a.help, (_label(n, a), a.help)
        if p.convention:
            assert p.convention in a.help, (_label(n, a), a.help)
        assert a.type.parameter is p


def test_shared_concepts_come_from_declarations():
    """The concepts that several subcommands share are declared once: the network's parameters (sigma_w2, sigma_b2,
    gamma) by the derivations, depth, width, samples and seed by the command line's vocabulary."""
    shared = {"sigma_w2", "sigma_b2", "gamma", "depth", "width", "samples"}
    bad = [_label(n, a) for n, a in VISIBLE if a.dest in shared and not hasattr(a, "parameter")]
    assert not bad, bad
    for n, a in VISIBLE:
        if a.dest in VOCABULARY:
            assert VOCABULARY[a.dest].meaning in a.help, (_label(n, a), a.help)


# --------------------------------------------------------------------------- one spelling per concept
def test_one_spelling_per_concept():
    visible = {o for _, a in VISIBLE for o in a.option_strings}
    for group in SYNONYMS:
        assert len(group & visible) <= 1, sorted(group & visible)
    by_dest: dict[str, set[str]] = {}
    for _, a in VISIBLE:
        if a.option_strings:
            by_dest.setdefault(a.dest, set()).add(a.option_strings[-1])
    assert {d: f for d, f in by_dest.items() if len(f) > 1} == {}


def test_old_spellings_are_hidden_deprecated_aliases():
    aliases = {(n, o, a.replacement) for n, a in HIDDEN if isinstance(a, DeprecatedAlias) for o in a.option_strings}
    assert RENAMES <= aliases, sorted(RENAMES - aliases)
    visible = {o for _, a in VISIBLE for o in a.option_strings}
    assert not {old for _, old, _ in RENAMES} & visible
    hidden_not_alias = [_label(n, a) for n, a in HIDDEN if not isinstance(a, DeprecatedAlias)]
    assert not hidden_not_alias, hidden_not_alias
    for name in SUBCOMMANDS:
        usage = SUBCOMMANDS[name].format_help()
        assert not re.search(r"--weight-var|--bias-var|--gamma2|--seeds\b|--widths\b", usage), name


def test_every_rename_is_listed_in_docs():
    text = (ROOT / "docs" / "api-renames.md").read_text()
    for _, a in HIDDEN:
        if isinstance(a, DeprecatedAlias):
            rows = [ln for ln in text.splitlines() if f"`{a.option_strings[0]}`" in ln and f"`{a.replacement}`" in ln]
            assert rows, f"docs/api-renames.md has no row for {a.option_strings[0]} -> {a.replacement}"


def test_python_api_and_sweep_specs_use_the_same_names():
    """resprop.kernel takes sigma_w2, sigma_b2, gamma, depth; no sweep kind or example spec uses an old name."""
    params = inspect.signature(resprop.kernel).parameters
    assert {"depth", "sigma_w2", "sigma_b2", "gamma"} <= set(params)
    old = {"weight_var", "bias_var", "gamma2", "seeds", "widths"}
    from resprop.numeric.sweep.kinds import kinds

    for kind, k in kinds().items():
        assert not old & set(k.params), kind
    for spec in (ROOT / "examples" / "sweeps").glob("*.toml"):
        keys = set(re.findall(r"^\s*(\w+)\s*=", spec.read_text(), re.M))
        assert not old & keys, spec.name


# --------------------------------------------------------------------------- deprecated aliases still work
@pytest.fixture
def inputs(tmp_path):
    np.save(tmp_path / "X.npy", np.random.default_rng(3).normal(size=(6, 3)))
    return tmp_path


def test_kernel_old_spellings_give_the_same_kernel(inputs, capsys):
    base = ["kernel", "--inputs", str(inputs / "X.npy"), "--activation", "tanh", "--depth", "3", "--ntk"]
    code, _, err = _run(base + ["--sigma-w2", "1.7", "--sigma-b2", "0.2", "--out", str(inputs / "new.npz")], capsys)
    assert code == 0 and "deprecated" not in err
    code, _, err = _run(base + ["--weight-var", "1.7", "--bias-var", "0.2", "--out", str(inputs / "old.npz")], capsys)
    assert code == 0
    assert err.splitlines() == ["resprop: --weight-var is deprecated; use --sigma-w2",
                                "resprop: --bias-var is deprecated; use --sigma-b2"]
    new, old = np.load(inputs / "new.npz"), np.load(inputs / "old.npz")
    ref = resprop.kernel(np.load(inputs / "X.npy"), "tanh", 3, 1.7, 0.2, ntk=True)
    for key, want in zip(("nngp", "ntk"), ref):
        np.testing.assert_array_equal(new[key], want)
        np.testing.assert_array_equal(old[key], want)


def test_kernel_old_spelling_refuses_bad_values_naming_it(inputs, capsys):
    code, _, err = _run(["kernel", "--inputs", str(inputs / "X.npy"), "--activation", "erf", "--depth", "2",
                         "--weight-var=-1", "--sigma-b2", "0", "--out", str(inputs / "K.npz")], capsys)
    assert code == 2 and err.strip().splitlines()[-1] == "resprop: error: weight_var: must lie in (0, inf), got -1.0"
    assert not (inputs / "K.npz").exists()


def test_residual_mlp_gamma2_keeps_its_meaning(capsys):
    """--gamma2 G2 meant gamma^2 = G2 and still does, exactly: --gamma2 0.25 is --gamma 0.5."""
    argv = ["residual-mlp", "--activation", "tanh", "--depth", "3", "--width", "64", "--json"]
    code, out_new, err = _run(argv + ["--gamma", "0.5"], capsys)
    assert code == 0 and err == ""
    code, out_old, err = _run(argv + ["--gamma2", "0.25"], capsys)
    assert code == 0
    assert err.splitlines() == ["resprop: --gamma2 is deprecated; use --gamma (gamma, not gamma^2: --gamma2 G2 is "
                                "--gamma sqrt(G2))"]
    new, old = json.loads(out_new), json.loads(out_old)
    assert new == old and new["gamma"] == 0.5 and new["gamma2"] == 0.25
    from resprop.numeric.theories.pdlt import corrected as C

    assert old["corrected"] == C.corrected_ratio("tanh", 0.25, 3)  # the Python function takes gamma^2
    # an awkward gamma^2 goes to the theory unrounded (no sqrt and square on the way)
    code, out, _ = _run(["residual-mlp", "--activation", "relu", "--gamma2", "0.3", "--depth", "2", "--json"], capsys)
    assert code == 0 and json.loads(out)["corrected"] == C.corrected_ratio("relu", 0.3, 2)


def test_residual_mlp_gamma_or_gamma2_is_required_and_not_both(capsys):
    code, _, err = _run(["residual-mlp", "--activation", "relu", "--depth", "1"], capsys)
    assert code == 2 and "the following arguments are required: --gamma" in err and "usage: resprop residual-mlp" in err
    code, _, err = _run(["residual-mlp", "--activation", "relu", "--depth", "1", "--gamma", "0.5", "--gamma2",
                         "0.25"], capsys)
    assert code == 2 and err.strip().splitlines()[-1].startswith("resprop: error: --gamma, --gamma2:")


def test_abcd_widths_is_width(capsys):
    code, new, err = _run(["abcd", "--width", "10", "1000", "--json"], capsys)
    assert code == 0 and err == ""
    code, old, err = _run(["abcd", "--widths", "10", "1000", "--json"], capsys)
    assert code == 0 and err == "resprop: --widths is deprecated; use --width\n"
    assert json.loads(old) == json.loads(new) and json.loads(new)["width"] == [10.0, 1000.0]


def test_train_seeds_is_seed():
    args = PARSER.parse_args(["train", "fischer-fig7", "--seeds", "4,5", "--out", "x"])
    assert args.seed == "4,5"
    args = PARSER.parse_args(["train", "fischer-fig7", "--seed", "4,5", "--out", "x"])
    assert args.seed == "4,5"


# --------------------------------------------------------------------------- --version and "did you mean"
def test_version():
    done = subprocess.run([sys.executable, "-m", "resprop", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"resprop {importlib.metadata.version('resprop')}"


def test_mistyped_subcommand_suggests_the_closest(capsys):
    code, _, err = _run(["kernal"], capsys)
    assert code == 2
    assert "'kernal'" in err and "did you mean 'kernel'?" in err and err.startswith("usage: resprop ")


@pytest.mark.parametrize("tail", [[], ["--inputs", "X.npy", "--activation", "erf", "--sigma-w2", "1", "--sigma-b2",
                                       "0", "--out", "K.npz"]], ids=["required-missing", "all-given"])
def test_mistyped_option_is_named_with_the_subcommands_usage(tail, capsys):
    """`resprop kernel --depht 3 ...` names --depht and suggests --depth, before any missing option, after the
    usage of `resprop kernel` (not the top-level usage)."""
    code, out, err = _run(["kernel", "--depht", "3", *tail], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith("usage: resprop kernel ")
    assert lines[-1] == "resprop: error: unrecognized option --depht; did you mean --depth?"
    assert "required" not in err


def _mistyped(flag: str) -> str:
    """A typo of ``flag``: a letter doubled in the middle of its name."""
    i = 2 + (len(flag) - 2) // 2
    return flag[:i] + flag[i] + flag[i:]


def test_every_subcommand_names_a_mistyped_option(capsys):
    """For every option of every subcommand: the same typo is named and the option suggested, with the usage of
    that subcommand."""
    checked = 0
    for name, sub in SUBCOMMANDS.items():
        strings = sub._option_string_actions
        for n, a in VISIBLE:
            if n != name or not a.option_strings or not a.option_strings[-1].startswith("--"):
                continue
            flag = a.option_strings[-1]
            typo = _mistyped(flag)
            if any(s.startswith(typo) for s in strings):  # the typo is itself an option or its abbreviation
                continue
            code, _, err = _run([name, typo], capsys)
            lines = err.strip().splitlines()
            assert code == 2, (name, typo)
            assert lines[0].startswith(f"usage: resprop {name} "), (name, typo, lines[0])
            assert lines[-1].startswith(f"resprop: error: unrecognized option {typo}; did you mean "), lines[-1]
            suggested = lines[-1].rsplit(" ", 1)[-1].rstrip("?")
            assert suggested == flag, (name, typo, suggested)
            checked += 1
    assert checked > 50


def test_mistyped_top_level_option(capsys):
    code, _, err = _run(["--verison"], capsys)
    assert code == 2 and err.strip().splitlines()[-1] == "resprop: error: unrecognized option --verison; did you " \
                                                          "mean --version?"


def test_values_that_look_like_options_are_still_values(capsys):
    """Negative numbers and '--' are values, not unknown options: they reach the checks as before."""
    code, _, err = _run(["j2bar", "--", "-0.1"], capsys)
    assert code == 2 and "theta" in err and "unrecognized" not in err
    code, _, err = _run(["nu", "--gamma", "-0.5", "--activation", "relu"], capsys)
    assert code == 2 and "gamma: must lie in [0, 1), got -0.5" in err and "unrecognized" not in err
