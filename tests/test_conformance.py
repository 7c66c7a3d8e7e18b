"""Every registered theory passes the conformance suite (resprop.testing, issue 26 item 4), check by check.

The theories are read from the registry (the built-in ones, any installed plugin) plus the worked example of
docs/adding-a-theory.md (tests/example_theory/), registered here as a plugin would be: its generated files are
rendered into a scratch directory (``target``), never into resprop's package.  No theory, claim or subcommand is
named here: the counts each check reports are compared with counts taken from the registry and the derivations.
The second half shows that each check can fail, and how it names the theory and the check.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shutil
import sys

import pytest
from example_theory import THEORY as EXAMPLE

from resprop import registry
from resprop.derive import codegen
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.report.claims import theory_claims
from resprop.testing import (
    CHECKS,
    ConformanceError,
    check_claims,
    check_cli,
    check_derivation,
    check_figures,
    check_kernel_domains,
    check_theory,
)

#: every registered theory, then the worked example (registered by the ``example`` fixture)
SLUGS = [*registry.slugs(), *([] if EXAMPLE.slug in registry.slugs() else [EXAMPLE.slug])]


def _load(name: str, path) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The example theory registered at run time, its generated files written below a scratch directory (what
    `resprop derive linear` writes into a plugin's package) and its kernel modules importable by its driver."""
    registry.register(EXAMPLE)
    target = tmp_path_factory.mktemp("example-generated")
    written = codegen.write_generated(target=target, slugs=[EXAMPLE.slug])
    modules = []
    for name in EXAMPLE.derivations:
        (path,) = [p for p in written if p.name == f"{name}.py"]
        module_name = registry.generated_module(name)
        sys.modules[module_name] = _load(module_name, path)
        modules.append(module_name)
    yield target
    for module_name in modules:
        del sys.modules[module_name]
    registry.unregister(EXAMPLE.slug)


def _target(slug, example):
    return example if slug == EXAMPLE.slug else None


def _kernel_results(theory) -> list:
    return [r for name in theory.derivations for r in registry.derivation(name).results if r.inputs]


@pytest.mark.parametrize("slug, check", [(s, c) for s in SLUGS for c in CHECKS], ids=lambda v: v)
def test_theory_conforms(slug, check, example):
    """check_theory(slug, checks=[check]) passes, and what it verified is what the theory declares."""
    theory = registry.theory(slug)
    summary = check_theory(slug, checks=[check], target=_target(slug, example))[check]
    if check == "derivation":
        results = sum(len(registry.derivation(n).results) for n in theory.derivations)
        assert summary["derivations"] == len(theory.derivations) and summary["results"] == results > 0
    elif check == "latex":
        assert summary["equations"] == sum(len(registry.derivation(n).results) for n in theory.derivations) > 0
    elif check == "kernels":
        assert summary["kernels"] == len(_kernel_results(theory)) > 0
        assert summary["compared_with_mpmath"] >= 1
    elif check == "claims":
        own = [c for c in theory_claims(slug) if c.theory == slug]
        assert summary["rows"] + summary["cross_rows"] == len(own) > 0
    elif check == "figures":
        assert (summary["figures"] > 0) == (theory.figures is not None)
    elif check == "cli":
        assert summary["subcommands"] == len(theory.subcommands)
        assert summary["refused"] >= 2 * len(theory.subcommands)  # every subcommand has a numeric option here


@pytest.mark.slow
@pytest.mark.parametrize("slug", SLUGS)
def test_theory_conforms_at_full_size(slug, example):
    """The kernels with 100 hypothesis examples each, the claims and figures at full size."""
    summary = check_theory(slug, quick=False, checks=["kernels", "claims", "figures"], target=_target(slug, example))
    assert summary["kernels"]["examples_per_kernel"] == 100 and summary["kernels"]["kernels"] > 0


# --------------------------------------------------------------------------------------------- the checks fail
def _broken_target(example, tmp_path):
    """A copy of the example's generated files whose kernels no longer check rho (a hand edit)."""
    copy = tmp_path / "generated"
    shutil.copytree(example, copy)
    (path,) = [p for p in copy.rglob("*.py") if p.stem in EXAMPLE.derivations]
    text, n = re.subn(r"^(\s+)rho = _domain\.\w+\(.*$", r"\1rho = numpy.asarray(rho, dtype=float)",
                      path.read_text(), flags=re.M)
    assert n >= 1
    path.write_text(text)
    return copy


def test_a_kernel_without_its_domain_check_fails(example, tmp_path):
    broken = _broken_target(example, tmp_path)
    with pytest.raises(ConformanceError) as err:
        check_kernel_domains(EXAMPLE, target=broken)
    assert err.value.theory == EXAMPLE.slug and err.value.check == "kernels"
    assert "rho=" in str(err.value) and "not a ParameterError naming rho" in str(err.value)
    with pytest.raises(ConformanceError, match="stale") as err:  # and the edit makes its files stale
        check_derivation(EXAMPLE, target=broken)
    assert err.value.check == "derivation"


def test_a_claim_without_independent_evidence_fails(example, monkeypatch):
    from example_theory import claims as module

    bare = [dataclasses.replace(c, compute=lambda ctx, f=c.compute: dataclasses.replace(f(ctx), simulation=None))
            for c in module.CLAIMS]
    monkeypatch.setattr(module, "CLAIMS", bare)
    with pytest.raises(ConformanceError, match="no independent evidence") as err:
        check_claims(EXAMPLE)
    assert err.value.check == "claims" and str(err.value).count("no independent evidence") == len(bare)


def test_a_claim_with_the_wrong_verdict_fails(example, monkeypatch):
    from example_theory import claims as module

    wrong = [dataclasses.replace(c, compute=lambda ctx: module.Evidence(1.0, module.ref(2.0, "x"), holds=False))
             for c in module.CLAIMS[:1]] + module.CLAIMS[1:]
    monkeypatch.setattr(module, "CLAIMS", wrong)
    with pytest.raises(ConformanceError, match="verdict 'FAILS'"):
        check_claims(EXAMPLE)


def test_a_subcommand_that_accepts_nan_fails(example, monkeypatch):
    from example_theory import driver

    monkeypatch.setattr(driver, "mean_kernel", lambda *args: 1.0)  # no validation left
    with pytest.raises(ConformanceError) as err:
        check_cli(EXAMPLE)
    assert err.value.check == "cli" and "=nan`: exit 0" in str(err.value)


def _blank_figures(out_dir, *, quick, seed, data=None, progress=False):
    """Two identical blank PNGs, one not named after its theory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in ("conformanceblank_a.png", "other.png"):
        fig = plt.figure(figsize=(3, 3))
        fig.savefig(out_dir / name)
        plt.close(fig)
        paths.append(out_dir / name)
    return paths


def test_blank_duplicate_or_misnamed_figures_fail():
    theory = registry.Theory(slug="conformanceblank", title="t", citation="c", paper="p", citation_tex="c",
                             derivations={"conformanceblank_d": "m:f"}, figures=f"{__name__}:_blank_figures")
    registry.register(theory)
    try:
        with pytest.raises(ConformanceError) as err:
            check_figures(theory)
    finally:
        registry.unregister(theory.slug)
    text = str(err.value)
    assert err.value.check == "figures" and "blank" in text and "must start with the slug" in text
    assert "the same image as" in text


def test_check_theory_runs_every_check_and_names_each_failure(example, monkeypatch):
    from example_theory import driver

    monkeypatch.setattr(driver, "mean_kernel", lambda *args: 1.0)
    with pytest.raises(ConformanceError) as err:
        check_theory(EXAMPLE, target=example)
    assert isinstance(err.value, AssertionError)
    # the CLI check fails; the claims call the driver too (its simulation disagrees with the constant)
    assert set(err.value.failures) == {"claims", "cli"} and err.value.check == "claims"
    assert str(err.value).startswith(f"theory {EXAMPLE.slug!r} fails the conformance checks 'claims', 'cli'")


def test_bad_arguments_name_the_parameter(example):
    with pytest.raises(ParameterError, match="^theory:"):
        check_theory({"slug": EXAMPLE.slug})
    with pytest.raises(ParameterError, match="^theory: unknown theory 'nosuch'"):
        check_theory("nosuch")
    with pytest.raises(ParameterError, match="^theory: .* is not registered"):
        check_derivation(dataclasses.replace(EXAMPLE, slug="unregistered"))
    with pytest.raises(ParameterError, match="^theory: another theory is registered"):
        check_derivation(dataclasses.replace(EXAMPLE, title="another"))
    with pytest.raises(ParameterError, match="^checks: unknown check"):
        check_theory(EXAMPLE, checks=["nosuch"])
    with pytest.raises(ParameterError, match="^checks:"):
        check_theory(EXAMPLE, checks="cli")
    with pytest.raises(ParameterError, match="^quick:"):
        check_theory(EXAMPLE, quick="yes")
    with pytest.raises(ParameterError, match="^target:"):
        check_theory(EXAMPLE, checks=["derivation"], target=example / "no-such-directory")
    with pytest.raises(ParameterError, match="^examples:"):
        check_cli(EXAMPLE, examples={"no-such-subcommand": []})


def test_the_cli_check_uses_the_example_given(example):
    """An explicit example call is the base of the refused values (and must parse)."""
    good = {c: ["--input-kernel", "1", "--depth", "2", "--rho", "0.5", "--sigma-w2", "1"] for c in EXAMPLE.subcommands}
    assert check_cli(EXAMPLE, examples=good)["refused"] > 0
    bad = {c: ["--input-kernel", "1", "--depth", "two"] for c in EXAMPLE.subcommands}
    with pytest.raises(ConformanceError, match="does not parse"):
        check_cli(EXAMPLE, examples=bad)


def test_the_summary_is_json(example):
    summary = check_theory(EXAMPLE, checks=["cli", "figures"], target=example)
    assert list(summary) == ["cli", "figures"] and json.loads(json.dumps(summary)) == summary
