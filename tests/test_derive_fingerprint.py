"""`resprop derive --check` without re-deriving (issue 26 item 1, issue 28 item 3): each generated directory records
what its files were rendered from (an input fingerprint) and their hashes, and the check re-derives only where that
record no longer holds.  The fast answer must never be "fresh" when the full check would say "stale"."""
import json

import pytest

import resprop.derive.codegen as codegen
from resprop import registry
from resprop.numeric import cli

SLUG = "stable"  # one small theory: its derivation takes about a second


@pytest.fixture
def written(tmp_path):
    codegen.write_generated(target=tmp_path, slugs=[SLUG])
    return tmp_path


def test_fingerprint_is_written_and_holds_for_fresh_files(written):
    record = json.loads((written / "theories" / SLUG / codegen.FINGERPRINT).read_text())
    assert record["inputs"] == codegen.input_fingerprint(SLUG)
    assert set(record["files"]) == set(codegen.generated_files([SLUG]))
    assert codegen.fingerprint_holds(SLUG, written)
    assert codegen.stale_files(target=written, slugs=[SLUG], fast=True) == {}


def test_a_hand_edited_file_is_stale_on_the_fast_path(written):
    path = written / "theories" / SLUG / f"{SLUG}.py"
    path.write_text(path.read_text().replace("numpy", "numpy ", 1))
    assert not codegen.fingerprint_holds(SLUG, written)
    stale = codegen.stale_files(target=written, slugs=[SLUG], fast=True)
    assert list(stale) == [f"theories/{SLUG}/{SLUG}.py"]


def test_a_deleted_file_or_fingerprint_falls_back_to_the_full_check(written):
    (written / "theories" / SLUG / "kernels.md").unlink()
    assert not codegen.fingerprint_holds(SLUG, written)
    assert list(codegen.stale_files(target=written, slugs=[SLUG], fast=True)) == [f"theories/{SLUG}/kernels.md"]
    codegen.write_generated(target=written, slugs=[SLUG])
    (written / "theories" / SLUG / codegen.FINGERPRINT).write_text("{not json")
    assert not codegen.fingerprint_holds(SLUG, written)
    assert codegen.stale_files(target=written, slugs=[SLUG], fast=True) == {}  # re-derived: fresh after all


def test_changed_inputs_do_not_hold(written, monkeypatch):
    """A derivation, template or registry entry that changed gives another fingerprint: the check re-derives."""
    before = codegen.input_fingerprint(SLUG)
    th = registry.theory(SLUG)
    import dataclasses

    monkeypatch.setitem(registry._REGISTERED, SLUG, dataclasses.replace(th, title=th.title + " (edited)"))
    assert codegen.input_fingerprint(SLUG) != before
    assert not codegen.fingerprint_holds(SLUG, written)
    monkeypatch.setitem(registry._REGISTERED, SLUG, th)
    assert codegen.input_fingerprint(SLUG) == before

    sources = dict(codegen._package_sources("resprop.templates"))
    template = sources["resprop.templates/numpy_module.py.j2"]
    real = type(template).read_bytes
    monkeypatch.setattr(type(template), "read_bytes",
                        lambda self: real(self) + (b" " if self == template else b""))
    assert codegen.input_fingerprint(SLUG) != before
    assert codegen.input_fingerprint("foundation") != codegen.input_fingerprint(SLUG)


@pytest.mark.registry
def test_the_foundation_does_not_depend_on_the_theories(monkeypatch):
    """Installing or removing a theory leaves the foundation's fingerprint (and files) as they are."""
    before = codegen.input_fingerprint("foundation")
    files = codegen.generated_files(["foundation"])
    dropped = next(reversed(registry.theories()))  # a theory removed, the registry's order kept on restore
    monkeypatch.setattr(registry, "_REGISTERED", {k: v for k, v in registry._REGISTERED.items() if k != dropped})
    assert codegen.input_fingerprint("foundation") == before
    assert codegen.generated_files(["foundation"]) == files


def test_the_checkout_is_fresh_both_ways(capsys):
    assert cli.main(["derive", "--check", "--quiet", SLUG]) == 0
    assert cli.main(["derive", "--check", "--full", "--quiet", SLUG]) == 0
    assert codegen.fingerprint_holds(SLUG), "run `resprop derive` to record the fingerprint"
