"""The per-machine cache (`numeric/engine/disk_cache.py`) of the interpolated tables' anchors: a new process reads
them instead of building them (the same bits), and a corrupt, foreign or unwritable cache never changes a result or
stops a run."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from resprop.numeric.engine import disk_cache
from resprop.numeric.engine import table_family as TF

RHO = np.linspace(-1, 1, 2001)


def _fresh():
    TF._anchor.cache_clear()
    TF._window_error.cache_clear()
    disk_cache._DISABLED.clear()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RESPROP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RESPROP_CACHE", raising=False)
    _fresh()
    yield tmp_path / "cache"
    _fresh()


def _files(root):
    return sorted(p for p in root.rglob("*.npz")) if root.exists() else []


def test_a_new_process_reads_the_anchors(cache, monkeypatch):
    first = TF.table("tanh(x)", 100.0)
    files = _files(cache)
    assert len(files) >= TF.POINTS + 1  # the anchors and the window check
    _fresh()  # as a new process: nothing in memory

    def no_build(*args):
        raise AssertionError("an anchor was built although the cache holds it")

    monkeypatch.setattr(TF, "_parts", no_build)
    second = TF.table("tanh(x)", 100.0)
    assert np.array_equal(first.mean_phi_phi(RHO), second.mean_phi_phi(RHO))
    assert np.array_equal(first.mean_dphi_dphi(RHO), second.mean_dphi_dphi(RHO))
    assert second.error_bound == first.error_bound


def test_corrupt_entries_are_rebuilt(cache):
    ref = TF.table("tanh(x)", 60.0).mean_phi_phi(RHO)
    files = _files(cache)
    files[0].write_bytes(b"not a npz")
    np.savez(files[1], other=np.zeros(3))  # a valid file with the wrong arrays
    _fresh()
    assert np.array_equal(TF.table("tanh(x)", 60.0).mean_phi_phi(RHO), ref)
    with np.load(files[0]) as f:  # rewritten
        assert set(f.files) >= {"error"} or set(f.files) == set(TF._ARRAYS)


def test_the_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("RESPROP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RESPROP_CACHE", "0")
    _fresh()
    TF.table("tanh(x)", 45.0)
    assert _files(tmp_path / "cache") == []
    _fresh()


def test_an_unwritable_cache_warns_once_and_the_run_goes_on(tmp_path, monkeypatch):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("RESPROP_CACHE_DIR", str(blocker))
    _fresh()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = TF.table("tanh(x)", 45.0)
    assert np.all(np.isfinite(table.mean_phi_phi(RHO)))
    messages = [w for w in caught if "cannot be written" in str(w.message)]
    assert len(messages) == 1 and str(blocker) in str(messages[0].message)
    assert blocker.read_text() == "a file where the cache directory should be"
    _fresh()


def test_a_symlinked_entry_is_not_followed(cache, tmp_path):
    TF.table("tanh(x)", 45.0)
    files = _files(cache)
    target = tmp_path / "elsewhere.npz"
    np.savez(target, **{n: np.zeros(1) for n in TF._ARRAYS})
    files[0].unlink()
    files[0].symlink_to(target)
    _fresh()
    ref = TF.table("tanh(x)", 45.0).mean_phi_phi(RHO)
    assert np.all(np.isfinite(ref))
    with np.load(target) as f:  # the link's target was neither read as an anchor nor overwritten
        assert all(np.array_equal(f[n], np.zeros(1)) for n in TF._ARRAYS)


def test_changed_source_makes_new_entries(cache, monkeypatch):
    TF.table("tanh(x)", 45.0)
    before = set(_files(cache))
    _fresh()
    monkeypatch.setattr(disk_cache, "source_hash", lambda *m: "another version of the code")
    TF.table("tanh(x)", 45.0)
    assert set(_files(cache)) > before
