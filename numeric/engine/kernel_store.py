"""``resprop.kernel(..., out=...)``: kernels of any size, written tile by tile into a store on disk.

The recursion needs, for entry (a, b) at layer l + 1, only its own state and the diagonals of layer l
(`residual_kernel.Schedule`: the diagonals of all P inputs over all layers, and the per-layer tables, O(P x depth)).
So the upper triangle is cut into square tiles of side ``tile``; each tile starts from its own K^(0) entries
(sigma_w^2 X_r X_c^T / d_in + sigma_b^2, computed from the rows of X, never the whole K^(0)), runs the layers and
is written, with its transpose, into the output.  Peak memory: the schedule plus a few tiles (one per thread or
Dask worker); the P x P result exists only on disk.

Stores:

* ``K.zarr``: a Zarr (v3) group with the arrays ``nngp`` (and ``ntk``), shape (P, P), chunks (tile, tile), float64
  or ``dtype="float32"`` (computed in float64, rounded when written); its attributes record the network and the
  inputs' sha256.  The run is *resumable*: it is built in ``.K.zarr.partial`` next to the output, which an
  interrupted run keeps; every finished tile leaves a marker, and a rerun with the same inputs and options computes
  only the missing tiles (any change is detected by a fingerprint of X and the options, and refused).
* ``K.npy``: the NNGP as a NumPy file written through a memory map (``numpy.lib.format.open_memmap``); not
  resumable (a rerun starts again).

When the general path's per-layer data does not fit one block of layers (unequal norms with many layers, large P),
the state between blocks goes to float64 scratch arrays in the partial store (two of them, alternating, so that a
tile interrupted in the middle of a block is recomputed from the previous block's state).

Both go through `resprop.numeric.engine.output.Publication` (path checked first, lock, manifest, atomic rename).
Before any work, the disk space the uncompressed result needs is checked against what the file system has free.

Dask: ``workers=N`` starts a local ``dask.distributed`` cluster of N single-threaded worker processes,
``scheduler=ADDRESS`` uses an existing one (its workers must see the output's directory); every tile is a task
that rebuilds the schedule once per worker process (the same deterministic computation, BLAS on one thread) and
writes its chunks; the result is bit-identical to the single-process run (tests/test_kernel_store.py).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.blas_threads import one_blas_thread

#: side of the square tiles (and of the Zarr chunks): 2048^2 float64 = 32 MiB per array
TILE = 2048
FORMATS = (".zarr", ".npy")
DTYPES = ("float64", "float32")
_DONE = "tiles-done"


@dataclass(frozen=True)
class Network:
    """A validated ``resprop.kernel`` problem: inputs, recursions and per-layer sequences."""

    X: np.ndarray
    sigma_w2: float
    sigma_b2: float
    rec: Any
    sequences: tuple[np.ndarray, np.ndarray, np.ndarray]
    mode: str
    options: dict = field(default_factory=dict)

    @property
    def P(self) -> int:
        return int(self.X.shape[0])

    @property
    def ntk(self) -> bool:
        return self.mode == "ntk"

    def diagonal0(self) -> np.ndarray:
        """K^(0)_aa, with the roundings of `kernel.input_kernel`'s diagonal."""
        sq = np.einsum("ij,ij->i", self.X, self.X)
        return self.k0_tile(0, self.P, 0, self.P, diagonal=sq)

    def k0_tile(self, r0: int, r1: int, c0: int, c1: int, diagonal: np.ndarray | None = None) -> np.ndarray:
        """K^(0)[r0:r1, c0:c1] = sigma_w^2 X_r X_c^T / d_in + sigma_b^2 (or its diagonal from |x_a|^2)."""
        K = (self.X[r0:r1] @ self.X[c0:c1].T) if diagonal is None else diagonal.copy()
        K *= self.sigma_w2
        K /= self.X.shape[1]
        K += self.sigma_b2
        return K

    def fingerprint(self, extra: dict) -> str:
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.X).tobytes())
        h.update(repr(self.X.shape).encode())
        h.update(json.dumps({**self.options, **extra}, sort_keys=True, default=str).encode())
        from resprop import __version__

        h.update(__version__.encode())
        return h.hexdigest()


def required_bytes(P: int, ntk: bool, dtype: str, scratch: bool) -> int:
    """Uncompressed bytes of the store: the outputs, and float64 scratch for multi-block runs."""
    n = 2 if ntk else 1
    out = n * P * P * np.dtype(dtype).itemsize
    return out + (2 * n * P * P * 8 if scratch else 0)


def check_disk(path: Path, need: int) -> None:
    """Refuse up front when the file system of ``path`` has less free space than ``need`` bytes."""
    anc = path.parent
    while not anc.exists():
        anc = anc.parent
    free = shutil.disk_usage(anc).free
    if need > free:
        from resprop.numeric.engine.inputs import _size

        raise V.ParameterError("out", f"the kernels need {_size(need)} on disk (uncompressed) and {anc} has "
                                      f"{_size(free)} free; use --dtype float32, fewer inputs or another disk")


class _Writer:
    """The output arrays of a store and, for multi-block runs, the alternating float64 scratch state."""

    def __init__(self, root: Path, fmt: str, P: int, ntk: bool, dtype: str, tile: int, scratch: bool,
                 attrs: dict) -> None:
        self.fmt, self.P, self.ntk, self.dtype, self.tile = fmt, P, ntk, dtype, tile
        self.root = root
        names = ["nngp"] + (["ntk"] if ntk else [])
        if fmt == ".zarr":
            import zarr

            # the store's directory also holds resprop's partial-run record and tile markers, which zarr lists
            # with a warning per object when it looks for members
            warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy")
            group = zarr.open_group(str(root), mode="a", zarr_format=3)
            if attrs:
                group.attrs.update(attrs)
            self.arrays = {n: self._zarr_array(group, n, dtype) for n in names}
            self.scratch = ({f"{n}-{i}": self._zarr_array(group, f"_scratch-{n}-{i}", "float64")
                             for n in names for i in (0, 1)} if scratch else {})
            self.group = group
        else:
            self.arrays = {"nngp": np.lib.format.open_memmap(root, mode="w+", dtype=dtype, shape=(P, P))}
            self.scratch = ({f"nngp-{i}": np.lib.format.open_memmap(root.with_name(f"{root.name}.scratch-{i}.npy"),
                                                                     mode="w+", dtype="float64", shape=(P, P))
                             for i in (0, 1)} if scratch else {})

    def _zarr_array(self, group, name: str, dtype: str):
        if name in group:
            return group[name]
        # no compression: kernels are dense floats (zstd saved 5% at P = 10000 and cost 5x the write time)
        return group.create_array(name, shape=(self.P, self.P), chunks=(self.tile, self.tile), dtype=dtype,
                                  fill_value=np.nan, compressors=None)

    def write(self, name: str, t: RK.Tile, M: np.ndarray) -> None:
        """The tile and, off the diagonal, its transpose."""
        r0, r1, c0, c1 = t
        arr = self.arrays[name]
        arr[r0:r1, c0:c1] = M.astype(self.dtype, copy=False)
        if c0 != r0:
            arr[c0:c1, r0:r1] = M.T.astype(self.dtype, copy=False)

    def read_state(self, name: str, parity: int, t: RK.Tile) -> np.ndarray:
        r0, r1, c0, c1 = t
        return np.array(self.scratch[f"{name}-{parity}"][r0:r1, c0:c1], dtype=np.float64)

    def write_state(self, name: str, parity: int, t: RK.Tile, M: np.ndarray) -> None:
        r0, r1, c0, c1 = t
        self.scratch[f"{name}-{parity}"][r0:r1, c0:c1] = M

    def drop_scratch(self) -> None:
        if not self.scratch:
            return
        if self.fmt == ".zarr":
            for name in list(self.group.array_keys()):
                if name.startswith("_scratch-"):
                    del self.group[name]
        else:
            for arr in self.scratch.values():
                path = arr.filename
                del arr
                if path:
                    os.unlink(path)
        self.scratch = {}

    def flush(self) -> None:
        if self.fmt == ".npy":
            for arr in self.arrays.values():
                arr.flush()


def _marker(done_dir: Path, block: int, t: RK.Tile) -> Path:
    return done_dir / f"{block}-{t[0]}-{t[2]}"


def _finish_tile(schedule: Any, t: RK.Tile, K: np.ndarray, S: np.ndarray | None) -> tuple[Any, Any]:
    """The final values of a tile: scaled by the run's log scales, the diagonal set, symmetric diagonal blocks;
    a ParameterError when not finite (as `kernel.kernel`).  ``schedule``: anything with the final diagonals ``d``,
    ``sd`` and log scales ``log_K``, ``log_S`` (a `residual_kernel.Schedule`, or `_CollapsedRun`)."""
    from resprop.numeric.engine.kernel import _RANGE_NAMES

    out: list[np.ndarray | None] = []
    for M, d, log_scale in ((K, schedule.d, schedule.log_K), (S, schedule.sd, schedule.log_S)):
        if M is None or d is None:
            out.append(None)
            continue
        r0, r1, c0, c1 = t
        if c0 == r0:
            e = min(r1, c1)
            sq = M[:, : e - c0]
            il = np.tril_indices(e - r0, -1)
            sq[il] = sq.T[il]
            sq[np.diag_indices(e - r0)] = d[r0:e]
        if log_scale != 0.0:
            M *= np.exp(log_scale)
        if not np.all(np.isfinite(M)):
            name = "NNGP" if M is K else "NTK"
            raise V.ParameterError(_RANGE_NAMES, f"the {name} is not finite in float64 for these values "
                                                 "(overflow); use values of moderate size")
        out.append(M)
    return out[0], out[1]


def _tile_blocks(net: Network, stage: list[RK.Block], schedule: RK.Schedule, writer: _Writer, t: RK.Tile,
                 b_from: int, final: bool) -> None:
    """Run the blocks of ``stage`` (numbered from b_from) on tile t: from K^(0) (b_from == 0) or the scratch state
    of block b_from - 1; the run's last block writes the final values, others the scratch state of their parity."""
    two = net.mode != "nngp"
    if b_from == 0:
        K = net.k0_tile(*t)
        S = K.copy() if two else None
    else:
        K = writer.read_state("nngp", (b_from - 1) % 2, t)
        S = writer.read_state("ntk", (b_from - 1) % 2, t) if two else None
    for blk in stage:
        RK.run_block_pieces(blk, net.rec, net.mode, t, K, S)
    if final:
        K, S = _finish_tile(schedule, t, K, S)
        writer.write("nngp", t, K)
        if two:
            assert S is not None
            writer.write("ntk", t, S)
    else:
        b_last = b_from + len(stage) - 1
        writer.write_state("nngp", b_last % 2, t, K)
        if two:
            assert S is not None
            writer.write_state("ntk", b_last % 2, t, S)


@dataclass(frozen=True)
class _CollapsedRun:
    """A run through the depth-collapsed maps (`depth_collapse`): every tile from its K^(0) entries in one pass."""

    col: Any
    d: np.ndarray
    sd: np.ndarray | None
    log_K: float = 0.0
    log_S: float = 0.0


def _collapsed_run(net: Network) -> _CollapsedRun | None:
    """The collapsed maps of ``net`` when `depth_collapse.build` finds them worth it (inputs of few norms, a deep
    enough smooth closed form; the same rule as in memory), else None.  The NTK starts from Theta^(0) = K^(0), so
    Theta^(L) is one series of u (`depth_collapse.with_theta_from_k`)."""
    from resprop.numeric.engine import depth_collapse

    if net.P < RK.COLLAPSE_MIN_P:
        return None
    d0 = net.diagonal0()
    two = net.mode != "nngp"
    with one_blas_thread():
        col = depth_collapse.build(d0, d0.copy() if two else None, net.sequences, net.mode, net.rec, P=net.P)
    if col is None:
        return None
    if two:
        col = depth_collapse.with_theta_from_k(col)
    d = col.diagonal[col.classes]
    sd = col.second_diagonal[col.classes] if two and col.second_diagonal is not None else None
    return _CollapsedRun(col, d, sd)


def _collapsed_tile(run: _CollapsedRun, net: Network, writer: _Writer, t: RK.Tile) -> None:
    """One tile through the collapsed maps: K^(0) of the tile, the maps, the diagonal and the mirror of a diagonal
    tile, the finiteness check, and the write (`_finish_tile`)."""
    from resprop.numeric.engine.depth_collapse import evaluate_tile

    K = net.k0_tile(*t)
    # Theta^(0) = K^(0): written whole when the map gives Theta^(L) itself, else A Theta^(0) + B from a copy
    S = (np.empty_like(K) if run.col.direct else K.copy()) if net.mode != "nngp" else None
    evaluate_tile(run.col, K, S, *t, whole=False)
    K, S = _finish_tile(run, t, K, S)
    writer.write("nngp", t, K)
    if S is not None:
        writer.write("ntk", t, S)


class _LazyBlocks:
    """The blocks of a run's schedule, built one at a time and only the current one kept (a deep tabulated run
    would otherwise hold every layer's tables); ``get(b)`` advances to block b (None past the last)."""

    def __init__(self, net: Network, block: int | None, pool=None, n_workers: int = 1,
                 bounds: list[tuple[int, int]] | None = None) -> None:
        d0 = net.diagonal0()
        self.L = len(net.sequences[0])
        block = RK.default_block(d0, self.L, net.mode, net.rec) if block is None else block
        self.schedule = RK.Schedule(d0, d0.copy() if net.mode != "nngp" else None, net.sequences, net.mode,
                                    net.rec, block, pool, n_workers, bounds=bounds)
        self._gen = self.schedule.blocks()
        self.index, self.current = -1, None

    def get(self, b: int) -> RK.Block | None:
        if b < self.index:
            raise RuntimeError("blocks are built in order")
        while self.index < b:
            self.current = next(self._gen, None)
            self.index += 1
            if self.current is None:
                break
        return self.current


def write_kernel(net: Network, out, dtype: str = "float64", tile: int = TILE, workers: int | None = None,
                 scheduler: str | None = None, progress: bool = False, block: int | None = None,
                 collapse: bool = True) -> Path:
    """Compute the kernels of ``net`` into ``out`` (.zarr or .npy) tile by tile; returns the output path.  See the
    module docstring.  ``collapse``: use the depth-collapsed maps where they apply (as `kernel.kernel`)."""
    from resprop.numeric.engine.output import Publication

    if not isinstance(out, (str, os.PathLike)) or not str(out):
        raise V.ParameterError("out", f"must be a path ending in .zarr or .npy, got {out!r}")
    out = Path(out)
    fmt = out.suffix
    if fmt not in FORMATS:
        raise V.ParameterError("out", f"a kernel on disk must be a .zarr store or a .npy file, got {str(out)!r}")
    if dtype not in DTYPES:
        raise V.ParameterError("dtype", f"must be one of {', '.join(DTYPES)}, got {dtype!r}")
    tile = V.integer("tile", tile, minimum=1, maximum=1 << 20)
    if fmt == ".npy" and net.ntk:
        raise V.ParameterError("out", "a .npy file holds one array: write the NNGP and NTK into a .zarr store "
                                      "(or a .npz)")
    if workers is not None:
        workers = V.integer("workers", workers, minimum=1, maximum=1024)
    if workers is not None and scheduler is not None:
        raise V.ParameterError("workers, scheduler", "give one of them: workers starts a local cluster, scheduler "
                                                     "connects to an existing one")
    if fmt == ".zarr":
        try:
            import zarr  # noqa: F401
        except ImportError:
            raise V.ParameterError("out", "writing a .zarr store needs zarr: pip install 'resprop[sweep]'") from None
    options: dict[str, Any] = {"dtype": dtype, "tile": tile, "format": fmt, "block": block}
    run = _collapsed_run(net) if collapse else None
    if run is not None:
        options["collapsed"] = True  # a partial store of a layered run is not resumed as a collapsed one
    key = net.fingerprint(options)
    pub = Publication(out, "dir" if fmt == ".zarr" else "file", "resprop kernel",
                      resume_key=key if fmt == ".zarr" else None)
    with pub:
        P = net.P
        tiles = RK.tile_grid(P, tile)
        n_threads = 1 if workers is not None or scheduler is not None else min(RK.workers(), len(tiles))
        pool = ThreadPoolExecutor(n_threads) if n_threads > 1 else None
        try:
            lazy = None
            if run is None:
                with one_blas_thread():
                    lazy = _LazyBlocks(net, block, pool, n_threads)
                    first = lazy.get(0)
            scratch = lazy is not None and first is not None and first.stop < lazy.L
            check_disk(out, required_bytes(P, net.ntk, dtype, scratch) if not pub.resumed else 0)
            root = pub.path
            attrs = {"resprop": {"network": net.options, "inputs_sha256": hashlib.sha256(
                np.ascontiguousarray(net.X).tobytes()).hexdigest(), "dtype": dtype, "tile": tile,
                "fingerprint": key}}
            writer = _Writer(root, fmt, P, net.ntk, dtype, tile, scratch, attrs)
            done_dir = root / _DONE if fmt == ".zarr" else None
            if done_dir is not None:
                done_dir.mkdir(exist_ok=True)
            if workers is not None or scheduler is not None:
                _run_dask(net, lazy, tiles, root, fmt, dtype, tile, scratch, done_dir, workers, scheduler,
                          progress, options, run)
            elif run is not None:
                _run_collapsed_local(net, run, tiles, writer, done_dir, pool, progress)
            else:
                _run_local(net, lazy, tiles, writer, done_dir, pool, progress)
            writer.flush()
            writer.drop_scratch()
            if done_dir is not None:
                shutil.rmtree(done_dir)
            del writer
        finally:
            if pool is not None:
                pool.shutdown()
        return pub.commit()


def _todo(done_dir: Path | None, b: int, tiles: list[RK.Tile]) -> list[RK.Tile]:
    if done_dir is None:
        return tiles
    return [t for t in tiles if not _marker(done_dir, b, t).exists()]


def _mark(done_dir: Path | None, b: int, t: RK.Tile) -> None:
    if done_dir is not None:
        _marker(done_dir, b, t).touch()


def _stages(lazy: _LazyBlocks):
    """The passes over the tiles, as (b_from, blocks of the pass, final): all layers at once when the first block
    holds them, else one pass per block, each block built when its pass comes."""
    first = lazy.get(0)
    if first is None or first.stop >= lazy.L:
        yield 0, [first] if first is not None else [], True
        return
    b = 0
    blk: RK.Block | None = first
    while blk is not None:
        final = blk.stop >= lazy.L
        yield b, [blk], final
        if final:
            return
        b += 1
        blk = lazy.get(b)


def _n_stages(lazy: _LazyBlocks) -> int:
    first = lazy.get(0)
    if first is None or first.stop >= lazy.L:
        return 1
    return math.ceil(lazy.L / max(1, first.stop - first.start))


def _run_local(net, lazy, tiles, writer, done_dir, pool, progress) -> None:
    from resprop.numeric.engine.residual_kernel import _progress_bar

    bar = _progress_bar(len(tiles) * _n_stages(lazy), unit="tile") if progress else None
    try:
        with one_blas_thread():
            for b_from, stage, final in _stages(lazy):
                b_last = b_from + max(len(stage), 1) - 1
                todo = _todo(done_dir, b_last, tiles)
                if bar is not None:
                    bar.update(len(tiles) - len(todo))

                def work(t, b_from=b_from, stage=stage, final=final, b_last=b_last):
                    _tile_blocks(net, stage, lazy.schedule, writer, t, b_from, final)
                    _mark(done_dir, b_last, t)

                for _ in (pool.map(work, todo) if pool is not None else map(work, todo)):
                    if bar is not None:
                        bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def _run_collapsed_local(net, run, tiles, writer, done_dir, pool, progress) -> None:
    from resprop.numeric.engine.residual_kernel import _progress_bar

    todo = _todo(done_dir, 0, tiles)
    bar = _progress_bar(len(tiles), unit="tile") if progress else None
    try:
        if bar is not None:
            bar.update(len(tiles) - len(todo))

        def work(t):
            _collapsed_tile(run, net, writer, t)
            _mark(done_dir, 0, t)

        with one_blas_thread():
            for _ in (pool.map(work, todo) if pool is not None else map(work, todo)):
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()


# --------------------------------------------------------------------------- Dask
_WORKER_CACHE: dict[str, _LazyBlocks] = {}


def _dask_tile(t: RK.Tile, net: Network, fingerprint: str, root: str, fmt: str, dtype: str, tile: int, scratch: bool,
               done_dir: str | None, b_from: int, n_blocks: int, final: bool, bounds: list[tuple[int, int]]
               ) -> RK.Tile:
    """One tile on a Dask worker: the schedule followed block by block once per worker process (the driver's
    block bounds, BLAS on one thread), the tile computed and written into the store."""
    with one_blas_thread(), np.errstate(all="ignore"):
        lazy = _WORKER_CACHE.get(fingerprint)
        if lazy is None or lazy.index > b_from:
            _WORKER_CACHE.clear()
            lazy = _WORKER_CACHE[fingerprint] = _LazyBlocks(net, None, bounds=bounds)
        lazy.schedule.bounds = bounds
        stage = [blk for blk in (lazy.get(b) for b in range(b_from, b_from + n_blocks)) if blk is not None]
        writer = _Writer(Path(root), fmt, net.P, net.ntk, dtype, tile, scratch, {}) if fmt == ".zarr" else \
            _NpyWorkerWriter(Path(root), net.P, dtype, scratch)
        _tile_blocks(net, stage, lazy.schedule, writer, t, b_from, final)
        writer.flush()
        _mark(Path(done_dir) if done_dir else None, b_from + max(n_blocks, 1) - 1, t)
    return t


class _NpyWorkerWriter(_Writer):
    """A worker's view of a .npy store: the memory maps opened for update (the driver created them)."""

    def __init__(self, root: Path, P: int, dtype: str, scratch: bool) -> None:  # noqa: D107
        self.fmt, self.P, self.ntk, self.dtype, self.root = ".npy", P, False, dtype, root
        self.arrays = {"nngp": np.load(root, mmap_mode="r+")}
        self.scratch = ({f"nngp-{i}": np.load(root.with_name(f"{root.name}.scratch-{i}.npy"), mmap_mode="r+")
                         for i in (0, 1)} if scratch else {})


def _dask_collapsed_tile(t: RK.Tile, net: Network, run: _CollapsedRun, root: str, fmt: str, dtype: str, tile: int,
                         done_dir: str | None) -> RK.Tile:
    """One tile through the collapsed maps on a Dask worker (the driver's maps: the same bits as locally)."""
    with one_blas_thread(), np.errstate(all="ignore"):
        writer = _Writer(Path(root), fmt, net.P, net.ntk, dtype, tile, False, {}) if fmt == ".zarr" else \
            _NpyWorkerWriter(Path(root), net.P, dtype, False)
        _collapsed_tile(run, net, writer, t)
        writer.flush()
        _mark(Path(done_dir) if done_dir else None, 0, t)
    return t


def _run_dask(net, lazy, tiles, root, fmt, dtype, tile, scratch, done_dir, workers, scheduler, progress,
              options, run: _CollapsedRun | None = None) -> None:
    try:
        from dask.distributed import Client, LocalCluster, wait
    except ImportError:
        raise V.ParameterError("workers", "a Dask cluster needs dask.distributed: pip install 'resprop[sweep]'"
                               ) from None
    cluster = None
    try:
        if scheduler is not None:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise V.ParameterError("scheduler", f"cannot connect to the Dask scheduler at {scheduler!r}: "
                                                    f"{' '.join(str(exc).split())[:160]}") from None
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   silence_logs=40)
            client = Client(cluster)
        with client:
            key = net.fingerprint(options)
            [net_future] = client.scatter([net], broadcast=True)
            from resprop.numeric.engine.residual_kernel import _progress_bar

            bar = _progress_bar(len(tiles) * (1 if run is not None else _n_stages(lazy)), unit="tile") \
                if progress else None
            bounds: list[tuple[int, int]] = []
            try:
                if run is not None:
                    [run_future] = client.scatter([run], broadcast=True)
                    todo = _todo(done_dir, 0, tiles)
                    if bar is not None:
                        bar.update(len(tiles) - len(todo))
                    futures = client.map(_dask_collapsed_tile, todo, net=net_future, run=run_future, root=str(root),
                                         fmt=fmt, dtype=dtype, tile=tile,
                                         done_dir=str(done_dir) if done_dir else None, pure=False)
                    for fut in futures:
                        fut.add_done_callback(lambda f: bar.update(1) if bar is not None else None)
                    wait(futures)
                    for fut in futures:
                        fut.result()
                for b_from, stage, final in (_stages(lazy) if run is None else ()):
                    bounds += [(b.start, b.stop) for b in stage]
                    b_last = b_from + max(len(stage), 1) - 1
                    todo = _todo(done_dir, b_last, tiles)
                    if bar is not None:
                        bar.update(len(tiles) - len(todo))
                    futures = client.map(_dask_tile, todo, net=net_future, fingerprint=key, root=str(root), fmt=fmt,
                                         dtype=dtype, tile=tile, scratch=scratch,
                                         done_dir=str(done_dir) if done_dir else None, b_from=b_from,
                                         n_blocks=len(stage), final=final, bounds=list(bounds), pure=False)
                    for fut in futures:
                        fut.add_done_callback(lambda f: bar.update(1) if bar is not None else None)
                    wait(futures)
                    for fut in futures:
                        fut.result()  # raises the first task error here
            finally:
                if bar is not None:
                    bar.close()
    finally:
        if cluster is not None:
            cluster.close()


__all__ = ["write_kernel", "Network", "TILE", "FORMATS", "DTYPES", "required_bytes"]
