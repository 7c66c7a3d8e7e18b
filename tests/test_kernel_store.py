"""Kernels of any size (issue 24): the engine by tiles, the kernels written to disk tile by tile (Zarr, .npy),
resume after an interruption, and a Dask cluster.

References: the in-memory `resprop.kernel` (strips), whose agreement with mpmath and with neural-tangents is tested
elsewhere.  A tile's K^(0) entries come from its own rows of X (a BLAS product of a sub-block), so disk and memory
agree to round-off (1e-13 of the largest entry); tilings in memory share the same K^(0) and agree bit for bit;
the Dask run and the single-process run of the same store are bit-identical."""
from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import resprop
from resprop.numeric.engine import kernel_store as KS
from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine.output import OutputPathError
from resprop.numeric.engine.validation import ParameterError

zarr = pytest.importorskip("zarr")

SW, SB, LAM = 1.0, 0.05, 0.5


def _X(P: int, seed: int = 0, d: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((P, d))


def _close(a, ref, what):
    err = float(np.max(np.abs(a - ref)))
    assert err <= 1e-13 * float(np.max(np.abs(ref))), f"{what}: {err:.2e}"


def _read(path, names=("nngp", "ntk")):
    g = zarr.open_group(str(path), mode="r")
    return [g[n][:] for n in names if n in g]


@pytest.mark.parametrize("act", ["erf", "relu", "tanh", "x*exp(-x**2/2)"])
@pytest.mark.parametrize("tile", [1, 7, 64, 1000])
def test_square_tiles_in_memory_equal_the_strips(act, tile):
    X = _X(90)
    X[::3] *= 1.7  # unequal norms: the general path for the tabulated activations
    ref = resprop.kernel(X, act, 5, SW, SB, branch_scale=LAM, ntk=True)
    got = resprop.kernel(X, act, 5, SW, SB, branch_scale=LAM, ntk=True, tile=tile)
    assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])


@pytest.mark.parametrize("act,ntk", [("erf", True), ("relu", False), ("tanh", True), ("gelu", True)])
@pytest.mark.parametrize("tile", [33, 150, 4096])
def test_zarr_store_equals_memory(tmp_path, act, ntk, tile):
    X = _X(301, seed=1)
    ref = resprop.kernel(X, act, 6, SW, SB, branch_scale=LAM, ntk=ntk)
    ref = ref if ntk else (ref,)
    path = resprop.kernel(X, act, 6, SW, SB, branch_scale=LAM, ntk=ntk, out=tmp_path / "K.zarr", tile=tile)
    got = _read(path)
    assert len(got) == len(ref)
    for a, r in zip(got, ref):
        assert a.dtype == np.float64 and np.array_equal(a, a.T)
        _close(a, r, act)
    g = zarr.open_group(str(path), mode="r")
    assert g["nngp"].chunks == (min(tile, 301),) * 2 or g["nngp"].chunks == (tile, tile)
    assert g.attrs["resprop"]["network"]["activation"] == act
    assert not (tmp_path / ".K.zarr.partial").exists()


def test_float32_store_is_the_float64_result_rounded(tmp_path):
    X = _X(120)
    ref = resprop.kernel(X, "tanh", 4, SW, SB, ntk=True, out=tmp_path / "a.zarr", tile=50)
    f32 = resprop.kernel(X, "tanh", 4, SW, SB, ntk=True, out=tmp_path / "b.zarr", tile=50, dtype="float32")
    for a, b in zip(_read(ref), _read(f32)):
        assert b.dtype == np.float32
        assert np.array_equal(a.astype(np.float32), b)


def test_npy_memory_map_and_its_limits(tmp_path):
    X = _X(200)
    ref = resprop.kernel(X, "erf", 3, SW, SB)
    path = resprop.kernel(X, "erf", 3, SW, SB, out=tmp_path / "K.npy", tile=64)
    _close(np.load(path), ref, "npy")
    with pytest.raises(ParameterError, match="out"):
        resprop.kernel(X, "erf", 3, SW, SB, ntk=True, out=tmp_path / "T.npy")
    with pytest.raises(ParameterError, match="out"):
        resprop.kernel(X, "erf", 3, SW, SB, out=tmp_path / "K.h5")
    with pytest.raises(ParameterError, match="dtype"):
        resprop.kernel(X, "erf", 3, SW, SB, out=tmp_path / "K2.zarr", dtype="float16")
    with pytest.raises(ParameterError, match="tile"):
        resprop.kernel(X, "erf", 3, SW, SB, out=tmp_path / "K3.zarr", tile=0)
    with pytest.raises(ParameterError, match="workers"):
        resprop.kernel(X, "erf", 3, SW, SB, workers=2)


def test_depth_zero_and_readout_on_disk(tmp_path):
    X = _X(50)
    for depth, readout in ((0, False), (2, True)):
        ref = resprop.kernel(X, "tanh", depth, SW, SB, ntk=True, readout=readout)
        path = resprop.kernel(X, "tanh", depth, SW, SB, ntk=True, readout=readout,
                              out=tmp_path / f"K{depth}.zarr", tile=16)
        for a, r in zip(_read(path), ref):
            _close(a, r, f"depth {depth}")


def test_several_blocks_go_through_the_scratch_state(tmp_path, monkeypatch):
    """Unequal norms with the general path's data limited to one layer per block: the state between blocks goes
    to the float64 scratch arrays, which are removed at the end."""
    monkeypatch.setattr(RK, "GENERAL_BYTES", 1)
    X = _X(130, seed=4)
    ref = resprop.kernel(X, "tanh", 4, SW, SB, branch_scale=LAM, ntk=True)
    path = resprop.kernel(X, "tanh", 4, SW, SB, branch_scale=LAM, ntk=True, out=tmp_path / "K.zarr", tile=40)
    for a, r in zip(_read(path), ref):
        _close(a, r, "multi-block")
    assert sorted(zarr.open_group(str(path), mode="r").array_keys()) == ["nngp", "ntk"]
    # ReLU beyond HOMOGENEOUS_BLOCK layers: rescaled between blocks
    monkeypatch.setattr(RK, "HOMOGENEOUS_BLOCK", 3)
    ref = resprop.kernel(X, "relu", 8, 2.0, 0.0, gamma=0.0, ntk=True)
    path = resprop.kernel(X, "relu", 8, 2.0, 0.0, gamma=0.0, ntk=True, out=tmp_path / "R.zarr", tile=40)
    for a, r in zip(_read(path), ref):
        _close(a, r, "relu rescaled")


class _Stop(KeyboardInterrupt):
    pass


def _interrupt_at(monkeypatch, n: int) -> list:
    """Make the n-th tile raise a KeyboardInterrupt (one thread); returns the list of tiles started."""
    started: list = []
    real = KS._tile_blocks

    def tile_blocks(*args):
        started.append(args[4])
        if len(started) == n:
            raise _Stop()
        return real(*args)

    monkeypatch.setattr(KS, "_tile_blocks", tile_blocks)
    monkeypatch.setattr(RK, "workers", lambda: 1)
    return started


def test_interrupted_run_resumes_and_computes_only_missing_tiles(tmp_path, monkeypatch):
    X = _X(200, seed=2)
    out = tmp_path / "K.zarr"
    real = KS._tile_blocks
    _interrupt_at(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        resprop.kernel(X, "tanh", 3, SW, SB, ntk=True, out=out, tile=50)
    partial = tmp_path / ".K.zarr.partial"
    assert partial.is_dir() and not out.exists()
    assert len(list((partial / KS._DONE).iterdir())) == 3
    seen = []
    monkeypatch.setattr(KS, "_tile_blocks", lambda *a: (seen.append(a[4]), real(*a))[1])
    path = resprop.kernel(X, "tanh", 3, SW, SB, ntk=True, out=out, tile=50)
    n_tiles = len(RK.tile_grid(200, 50))
    assert len(seen) == n_tiles - 3
    assert not partial.exists()
    ref = resprop.kernel(X, "tanh", 3, SW, SB, ntk=True)
    for a, r in zip(_read(path), ref):
        _close(a, r, "resumed")


def test_a_changed_run_does_not_take_over_a_partial_one(tmp_path, monkeypatch):
    X = _X(120, seed=3)
    out = tmp_path / "K.zarr"
    real = KS._tile_blocks
    _interrupt_at(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        resprop.kernel(X, "erf", 3, SW, SB, out=out, tile=40)
    monkeypatch.setattr(KS, "_tile_blocks", real)
    for change in ({"sigma_b2": 0.06}, {"tile": 30}, {"X": X * 1.0000001}, {"dtype": "float32"}):
        kw = {"X": X, "sigma_b2": SB, "tile": 40, "dtype": "float64", **change}
        with pytest.raises(OutputPathError, match="partial run with other inputs or options"):
            resprop.kernel(kw["X"], "erf", 3, SW, kw["sigma_b2"], out=out, tile=kw["tile"], dtype=kw["dtype"])
    resprop.kernel(X, "erf", 3, SW, SB, out=out, tile=40)  # the same run finishes it
    assert out.is_dir()


def test_the_output_is_never_held_in_memory(tmp_path):
    """P = 2500, erf NNGP + NTK to a Zarr store: the two 50 MB float64 results exist only on disk; the traced
    peak of the run stays far below one of them (tiles of 256: 0.5 MB each)."""
    X = _X(2500, seed=5)
    tracemalloc.start()
    resprop.kernel(X, "erf", 3, SW, SB, ntk=True, out=tmp_path / "K.zarr", tile=256)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.3 * 2500 * 2500 * 8, f"peak {peak / 2**20:.1f} MiB"


def test_existing_foreign_output_is_refused_before_work(tmp_path):
    out = tmp_path / "K.zarr"
    out.mkdir()
    (out / "mine.txt").write_text("user data")
    with pytest.raises(OutputPathError, match="did not write"):
        resprop.kernel(_X(30), "erf", 2, SW, SB, out=out)
    assert (out / "mine.txt").read_text() == "user data"


def test_dask_local_cluster_is_bit_identical(tmp_path):
    pytest.importorskip("dask.distributed")
    X = _X(260, seed=6)
    X[::2] *= 1.4
    one = resprop.kernel(X, "tanh", 3, SW, SB, branch_scale=LAM, ntk=True, out=tmp_path / "one.zarr", tile=64)
    two = resprop.kernel(X, "tanh", 3, SW, SB, branch_scale=LAM, ntk=True, out=tmp_path / "two.zarr", tile=64,
                         workers=2)
    for a, b in zip(_read(one), _read(two)):
        assert np.array_equal(a, b)


def test_cli_writes_a_zarr_store(tmp_path):
    X = _X(80)
    np.save(tmp_path / "X.npy", X)
    out = tmp_path / "K.zarr"
    run = subprocess.run([sys.executable, "-m", "resprop.numeric.cli", "kernel", "--inputs", str(tmp_path / "X.npy"),
                          "--activation", "erf", "--depth", "3", "--sigma-w2", "1", "--sigma-b2", "0.05", "--ntk",
                          "--out", str(out), "--tile", "32", "--dtype", "float32", "--quiet"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert run.returncode == 0, run.stderr
    ref = resprop.kernel(X, "erf", 3, 1.0, 0.05, ntk=True)
    for a, r in zip(_read(out), ref):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, r, rtol=1e-6, atol=0)
    bad = subprocess.run([sys.executable, "-m", "resprop.numeric.cli", "kernel", "--inputs",
                          str(tmp_path / "X.npy"), "--activation", "erf", "--depth", "3", "--sigma-w2", "1",
                          "--sigma-b2", "0.05", "--out", str(tmp_path / "B.zarr"), "--tile", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--tile" in bad.stderr and "Traceback" not in bad.stderr


def test_predict_reads_a_zarr_store(tmp_path, monkeypatch):
    """resprop predict --kernel K.zarr: the same posterior as from the .npz when the blocks fit in memory
    (Cholesky), and by conjugate gradients over row blocks of the store when they do not (BlockView)."""
    from resprop.numeric import cli
    from resprop.numeric.engine import inputs
    from resprop.numeric.engine.predict import BlockView, predict

    rng = np.random.default_rng(8)
    X = rng.standard_normal((160, 6)) * np.linspace(0.5, 2.0, 160)[:, None]
    Y = np.sin(X[:, :2])
    np.save(tmp_path / "Y.npy", Y)
    store = resprop.kernel(X, "erf", 3, 1.5, 0.05, ntk=True, out=tmp_path / "K.zarr", tile=48)
    K, T = resprop.kernel(X, "erf", 3, 1.5, 0.05, ntk=True)
    np.savez(tmp_path / "K.npz", nngp=K, ntk=T)
    outs = {}
    for name in ("K.zarr", "K.npz"):
        for mode in ((), ("--ntk",)):
            out = tmp_path / f"P-{name}-{len(mode)}.npz"
            assert cli.main(["predict", "--kernel", str(tmp_path / name), "--train", "120", "--targets",
                             str(tmp_path / "Y.npy"), "--regulariser", "1e-4", "--out", str(out), *mode]) == 0
            with np.load(out) as f:
                outs[name, mode] = f["mean"]
    for mode in ((), ("--ntk",)):
        np.testing.assert_allclose(outs["K.zarr", mode], outs["K.npz", mode], rtol=1e-12, atol=1e-12)
    # out of core: the store read 16 rows at a time by CG, against the direct solve
    g = zarr.open_group(str(store), mode="r")
    lazy = predict(BlockView(g["nngp"], slice(0, 120), slice(0, 120)), Y[:120],
                   BlockView(g["nngp"], slice(120, 160), slice(0, 120)), regulariser=1e-4, block_rows=16)
    direct = np.linalg.solve(K[:120, :120] + 1e-4 * np.eye(120), Y[:120])
    assert lazy.solver == "cg"
    np.testing.assert_allclose(lazy.mean, K[120:, :120] @ direct, rtol=1e-7, atol=1e-9)
    # the CLI takes that route when the blocks do not fit in memory
    monkeypatch.setattr(inputs, "available_memory", lambda: 1000)
    out = tmp_path / "P-lazy.npz"
    assert cli.main(["predict", "--kernel", str(store), "--train", "120", "--targets", str(tmp_path / "Y.npy"),
                     "--regulariser", "1e-4", "--out", str(out)]) == 0
    with np.load(out) as f:
        np.testing.assert_allclose(f["mean"], K[120:, :120] @ direct, rtol=1e-7, atol=1e-9)
        assert "variance" in f.files  # 40 test points: one CG solve each


def test_the_scaling_page_runs(tmp_path, monkeypatch):
    """docs/scaling.md's first Python block, in a scratch directory (it writes K.zarr)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "scaling.md").read_text()
    block = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "scaling.md[python block 0]", "exec"), namespace)
    assert namespace["block"].shape == (1000, 1000) and namespace["block"].dtype == np.float32
    ref = resprop.kernel(namespace["X"][:50], "tanh", 20, 1.0, 0.05, branch_scale=0.5)
    np.testing.assert_allclose(namespace["K"][0:50, 0:50], ref, rtol=1e-6)


def test_an_existing_scheduler_computes_the_same_store(tmp_path):
    """scheduler=ADDRESS: an existing dask.distributed cluster (started here, as a user would start one) computes
    the tiles; bit-identical to the single-process store.  Several blocks (ReLU rescaled every 2 layers) go through
    the scratch state on the workers too."""
    distributed = pytest.importorskip("dask.distributed")
    X = _X(150, seed=9)
    one = resprop.kernel(X, "relu", 5, 2.0, 0.0, gamma=0.5, ntk=True, out=tmp_path / "one.zarr", tile=40)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                                  silence_logs=40) as cluster:
        import unittest.mock as um

        with um.patch.object(RK, "HOMOGENEOUS_BLOCK", 2):
            many = resprop.kernel(X, "relu", 5, 2.0, 0.0, gamma=0.5, ntk=True, out=tmp_path / "many.zarr",
                                  tile=40, scheduler=cluster.scheduler_address)
            ref_blocks = resprop.kernel(X, "relu", 5, 2.0, 0.0, gamma=0.5, ntk=True, out=tmp_path / "blocks.zarr",
                                        tile=40)
    for a, b in zip(_read(many), _read(ref_blocks)):
        assert np.array_equal(a, b)
    for a, b in zip(_read(many), _read(one)):
        _close(a, b, "blocks vs one block")


def _sphere_x(P: int, seed: int, radii=(1.0,)) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((P, 12))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.asarray(radii)[np.arange(P) % len(radii)][:, None] * np.sqrt(12)


@pytest.mark.parametrize("radii", [(1.0,), (0.7, 1.3)], ids=["one-norm", "two-norms"])
@pytest.mark.parametrize("ntk", [False, True])
def test_depth_collapsed_store_equals_memory_and_the_layers(tmp_path, radii, ntk, monkeypatch):
    """Inputs of few norms at depth >= MIN_LAYERS: the store runs the collapsed maps tile by tile (one pass, no
    scratch) and agrees with the in-memory kernel (collapsed too) and with the layered run to 1e-13."""
    from resprop.numeric.engine import depth_collapse

    monkeypatch.setattr(depth_collapse, "BUILD_SHARE", 1.0)  # let it pay at this small P
    X = _sphere_x(300, 3, radii)
    X[5] = X[0]  # a duplicate: u = 1
    used = []
    real = KS._collapsed_run
    monkeypatch.setattr(KS, "_collapsed_run", lambda net: used.append(real(net)) or used[-1])
    path = resprop.kernel(X, "erf", 40, SW, SB, branch_scale=0.3, ntk=ntk, out=tmp_path / "K.zarr", tile=128)
    assert used and used[0] is not None, "the store did not collapse the depth"
    got = _read(path)
    mem = resprop.kernel(X, "erf", 40, SW, SB, branch_scale=0.3, ntk=ntk)
    lay = resprop.kernel(X, "erf", 40, SW, SB, branch_scale=0.3, ntk=ntk, collapse=False)
    mem = mem if ntk else (mem,)
    lay = lay if ntk else (lay,)
    assert len(got) == len(mem)
    for a, m, ly in zip(got, mem, lay):
        assert np.array_equal(a, a.T)
        _close(a, m, "store vs memory")
        _close(a, ly, "store vs layers")
    layered = resprop.kernel(X, "erf", 40, SW, SB, branch_scale=0.3, ntk=ntk, out=tmp_path / "L.zarr", tile=128,
                             collapse=False)
    for a, b in zip(got, _read(layered)):
        _close(a, b, "collapsed store vs layered store")


def test_depth_collapsed_store_on_dask_is_bit_identical(tmp_path, monkeypatch):
    pytest.importorskip("dask.distributed")
    from resprop.numeric.engine import depth_collapse

    monkeypatch.setattr(depth_collapse, "BUILD_SHARE", 1.0)
    X = _sphere_x(300, 4)
    one = resprop.kernel(X, "gelu", 40, SW, SB, branch_scale=0.3, ntk=True, out=tmp_path / "one.zarr", tile=100)
    two = resprop.kernel(X, "gelu", 40, SW, SB, branch_scale=0.3, ntk=True, out=tmp_path / "two.zarr", tile=100,
                         workers=2)
    assert zarr.open_group(str(one), mode="r").attrs["resprop"]["network"]["activation"] == "gelu"
    for a, b in zip(_read(one), _read(two)):
        assert np.array_equal(a, b)
