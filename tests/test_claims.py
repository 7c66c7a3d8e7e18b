"""Every report claim, checked by the same objects the report renders (numeric/theories/<slug>/claims.py).

The default suite evaluates each claim at quick sizes, the ``slow`` mark at full sizes; a claim passes when its
verdict is the declared one ("agrees", or "documented disagreement" with its reason).  Simulations shared by
several claims are cached per size in their claims module, so each runs once per session.  The documented
disagreements' reasons are what docs/disagreements.md shows (its generated block must be current)."""
import re

import pytest

from resprop import registry
from resprop.numeric.report import disagreements
from resprop.numeric.report.claims import (
    AGREES,
    DOCUMENTED,
    FAILS,
    Claim,
    Criterion,
    Evidence,
    Tolerance,
    registered_claims,
)

CLAIMS = registered_claims()
IDS = [c.key for c in CLAIMS]


def _check(claim, quick: bool) -> None:
    r = claim.evaluate(quick=quick)
    assert r["claim"] == claim.key and r["check"]
    assert r["verdict"] == claim.expected, f"{r['quantity']}: {r['check']}; {r['note']}; theory {r['theory']}, " \
                                           f"check {r['simulation']}"
    if claim.documented:
        assert r["note"].startswith(claim.reason)


@pytest.mark.parametrize("claim", CLAIMS, ids=IDS)
def test_claim_quick(claim):
    _check(claim, quick=True)


@pytest.mark.slow
@pytest.mark.parametrize("claim", CLAIMS, ids=IDS)
def test_claim_full(claim):
    _check(claim, quick=False)


@pytest.mark.registry
def test_claims_are_declared_once_with_unique_ids():
    """Every claim of every registered theory, once: as many as the theories' claims modules declare (CLAIMS and
    CROSS_CLAIMS, read here from the modules), each under its own theory; the documented disagreements are the rows
    of the table in docs/disagreements.md (as read from the file)."""
    declared = []
    for th in registry.theories().values():
        for field, attr in (("claims", "CLAIMS"), ("cross_claims", "CROSS_CLAIMS")):
            ref = getattr(th, field)
            own = list(getattr(registry.resolve(ref.partition(":")[0]), attr, [])) if ref else []
            assert all(c.theory == th.slug for c in own), th.slug
            declared += own
    assert len(IDS) == len(set(IDS)) == len(declared) > 0
    block = disagreements.current_block(disagreements.DEFAULT.read_text())
    assert sum(c.documented for c in CLAIMS) == len(re.findall(r"^\| `[^`]+` \|", block, re.M)) > 0
    for c in CLAIMS:
        assert c.documented == bool(c.reason) == bool(c.doc), c.key


def test_documented_reasons_are_what_the_docs_show():
    text = disagreements.DEFAULT.read_text()
    assert disagreements.current_block(text) == disagreements.render_block(), \
        "docs/disagreements.md is stale: run python -m resprop.numeric.report.disagreements"
    for c in CLAIMS:
        if c.documented:
            assert c.reason in text and f"| {c.doc} |" in text, c.key


def test_verdicts_from_the_rule():
    """The rule decides: a Monte Carlo claim outside k SE + allowance FAILS, and a documented disagreement that
    stops disagreeing FAILS with a note saying so."""
    tol = Tolerance(allowance="0.1", why="stated")
    assert tol.text() == "|MC - theory| <= 4 SE + 0.1 (stated)"
    mk = lambda sim: Claim("t", "x", "q", "p", tol, lambda ctx: Evidence(1.0, compare=(sim, 0.1, 1.0, 0.1)))  # noqa
    assert mk(1.45).evaluate()["verdict"] == AGREES and mk(1.55).evaluate()["verdict"] == FAILS
    doc = lambda holds: Claim("t", "y", "q", "p", Criterion("c"), lambda ctx: Evidence(0, holds=holds),  # noqa
                              expected=DOCUMENTED, reason="because", doc="X1")
    assert doc(True).evaluate()["verdict"] == DOCUMENTED and doc(True).evaluate()["check"] == "documented: c"
    gone = doc(False).evaluate()
    assert gone["verdict"] == FAILS and gone["note"].startswith("expected documented disagreement no longer holds")
    with pytest.raises(ValueError, match="^reason:"):
        Claim("t", "z", "q", "p", Criterion("c"), lambda ctx: Evidence(0), expected=DOCUMENTED)
