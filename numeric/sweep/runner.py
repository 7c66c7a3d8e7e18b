"""Parameter sweeps on Dask with resumable, self-describing output (``resprop sweep``).

Spec (TOML, read with :mod:`tomllib`, or the same structure as a dict)::

    kind = "rho_star"                 # or "log_gaussian", "residual_mlp"
    [grid]                            # one axis per key, in this order; values: a non-empty list
    depth = [10, 50, 100]
    sigma_w2 = [1.0, 1.25]
    sigma_b2 = [0.0, 0.05]
    activation = ["erf", "relu"]
    [fixed]                           # scalars shared by every grid point
    input_kernel = 0.05
    [run]
    seed = 0                          # root seed (Monte Carlo kinds); default 0
    chunk = 4                         # grid points per task / part file; default max(1, points // 100)

Parameters of each kind (a parameter goes in [grid] or [fixed], not both; see :func:`kinds`, declared by the theories):

* ``rho_star`` -- :func:`resprop.numeric.theories.fischer.field_theory.rho_star` per grid point: depth, input_kernel,
  sigma_w2, sigma_b2 (required); input_kernel_offdiag, sigma_w2_out, sigma_b2_out (optional); activation (default erf).
* ``log_gaussian`` -- :func:`resprop.numeric.engine.monte_carlo.simulate_log_gaussian` with the estimators of
  :mod:`resprop.numeric.engine.mc_estimators` and the theory of
  :func:`resprop.numeric.theories.lognormal.log_gaussian.theory`: width, depth, alpha,
  lam, samples (required); balanced (default false), method (default reduced), hypo_constant
  (optional: C_{alpha,lambda} for the theory mean; default: the point's own Monte Carlo C_hat).
* ``residual_mlp`` -- :func:`resprop.numeric.engine.monte_carlo.simulate_residual_mlp` (PDLT App. B, eq. B.3) with
  :func:`resprop.numeric.engine.mc_estimators.four_point_vertex` at the last layer, next to
  :func:`resprop.numeric.theories.pdlt.residual_mlp.vertex_trajectory` (B.12, B.26) and nu(gamma) L/n: width, depth,
  gamma,
  samples (required); activation (relu | linear | leaky_relu:<s> | tanh | erf, default relu), input_kernel
  (default 1), C_b (default 0), C_W (default: the critical C_W(gamma)).

Determinism.  Grid points are numbered by their row-major (C order) flat index over the [grid]
axes in spec order; point i draws its randomness from ``SeedSequence(seed, spawn_key=(i,))`` and is
computed by its own call, never batched with other points, so every value is bit-identical
whatever the number of workers, the chunk size or the interruptions.

Resume.  Each finished chunk is written as ``<out>.parts/chunk-NNNNNN.npz`` (temp file + fsync +
os.replace; it carries the spec hash and its flat indices, so the part files are the authoritative
record) next to a ``manifest.json`` (spec, spec hash, chunk count and the finished chunks, refreshed
every few seconds and on exit).  A rerun loads the finished chunks,
computes only the missing ones and, when all are present, writes ``out`` atomically and removes its
part files (:class:`resprop.numeric.engine.output.Publication`: ``out`` is replaced only when it is resprop's own
previous
output per its manifest; a lock keeps a second run out; SIGINT/SIGTERM leave ``out`` as it was).  A parts
directory of a different spec, or one holding files resprop did not write, is an error (never mixed, never
deleted).  The whole spec is validated in the parent before any worker starts or the parts directory exists;
a point that only its computation can refuse (e.g. float64 overflow) stops the run with one line naming it.

Output.  An :class:`xarray.Dataset` with one dimension per grid axis (coordinates = grid values),
the [fixed] values as scalar coordinates, one data variable per output (attrs: units, description,
equation) and global attrs ``spec`` (canonical TOML), ``resprop_version``, ``git_commit``; written
as NetCDF-4 (``.nc``, h5netcdf engine) or Zarr (``.zarr``).
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import numbers
import os
import re
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from resprop.numeric.cli_support import checkpoint
from resprop.numeric.engine.output import OutputPathError, Publication
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.sweep.kinds import _int_check, _output_names, kinds

__all__ = ["kinds", "run_sweep", "cli_sweep", "load_spec", "normalize_spec", "dumps_toml", "grid_points"]

log = logging.getLogger("resprop.numeric.sweep.runner")

OUTPUT_SUFFIXES = (".nc", ".zarr")
SPEC_KEYS = ("kind", "grid", "fixed", "run")
RUN_KEYS = ("seed", "chunk")
_MANIFEST_INTERVAL = 2.0  # seconds between manifest rewrites while chunks complete


# --------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class Spec:
    kind: str
    grid: dict[str, list]         # axis -> canonical values, in spec order
    fixed: dict[str, Any]         # canonical scalars (defaults filled in)
    seed: int
    chunk: int
    toml: str                     # canonical TOML
    sha256: str

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.grid.values())

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def n_chunks(self) -> int:
        return -(-self.size // self.chunk)

    @property
    def outputs(self) -> tuple[str, ...]:
        return _output_names(self.kind, set(self.grid) | set(self.fixed))


def load_spec(spec) -> dict:
    """A spec dict from a TOML path (str or Path) or a dict (returned as is)."""
    if isinstance(spec, dict):
        return spec
    if not isinstance(spec, (str, os.PathLike)):
        raise ParameterError("spec", f"must be a path to a TOML file or a dict, got {type(spec).__name__}")
    path = Path(spec)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParameterError("spec", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError("spec", f"{path} is not valid TOML: {exc}") from None


def normalize_spec(raw: dict) -> Spec:
    """Validate a spec dict; every error is a ParameterError naming the key (``grid.depth``, ``run.seed``...)."""
    if not isinstance(raw, dict):
        raise ParameterError("spec", f"must be a table, got {type(raw).__name__}")
    for key in raw:
        if key not in SPEC_KEYS:
            raise ParameterError(str(key), f"unknown top-level key; allowed: {', '.join(SPEC_KEYS)}")
    kind_name = raw.get("kind")
    if kind_name is None:
        raise ParameterError("kind", f"required; allowed: {', '.join(kinds())}")
    if not isinstance(kind_name, str) or kind_name not in kinds():
        raise ParameterError("kind", f"unknown value {kind_name!r}; allowed: {', '.join(kinds())}")
    kind = kinds()[kind_name]
    grid_raw, fixed_raw, run_raw = raw.get("grid"), raw.get("fixed", {}), raw.get("run", {})
    for name, table in (("grid", grid_raw), ("fixed", fixed_raw), ("run", run_raw)):
        if table is not None and not isinstance(table, dict):
            raise ParameterError(name, f"must be a table, got {table!r}")
    if not grid_raw:
        raise ParameterError("grid", "empty: give at least one axis, e.g. depth = [10, 50]")

    allowed = ", ".join(kind.params)
    grid: dict[str, list] = {}
    for key, values in grid_raw.items():
        name = f"grid.{key}"
        if key not in kind.params:
            raise ParameterError(name, f"unknown parameter for kind {kind_name!r}; allowed: {allowed}")
        if not isinstance(values, (list, tuple)):
            raise ParameterError(name, f"must be a list of values, got {values!r}")
        if not values:
            raise ParameterError(name, "empty list: give at least one value")
        vals = [kind.params[key].check(name, v) for v in values]
        if len(set(vals)) != len(vals):
            raise ParameterError(name, f"duplicate values in {values!r}")
        grid[key] = vals
    fixed: dict[str, Any] = {}
    for key, value in fixed_raw.items():
        name = f"fixed.{key}"
        if key not in kind.params:
            raise ParameterError(name, f"unknown parameter for kind {kind_name!r}; allowed: {allowed}")
        if key in grid:
            raise ParameterError(name, "also given in [grid]; a parameter is either swept or fixed")
        if isinstance(value, (list, dict)):
            raise ParameterError(name, f"must be a scalar (put lists in [grid]), got {value!r}")
        fixed[key] = kind.params[key].check(name, value)
    for key, par in kind.params.items():
        if key in grid or key in fixed:
            continue
        if par.required:
            raise ParameterError(key, f"required for kind {kind_name!r}: give it in [grid] or [fixed]")
        if par.default is not None:
            fixed[key] = par.default
    for key in run_raw:
        if key not in RUN_KEYS:
            raise ParameterError(f"run.{key}", f"unknown key; allowed: {', '.join(RUN_KEYS)}")
    seed = _int_check(0)("run.seed", run_raw.get("seed", 0))
    size = math.prod(len(v) for v in grid.values())
    chunk = _int_check(1)("run.chunk", run_raw["chunk"]) if "chunk" in run_raw else max(1, size // 100)
    chunk = min(chunk, size)

    where = {k: f"grid.{k}" for k in grid} | {k: f"fixed.{k}" for k in fixed}
    for point in grid_points(grid, fixed):  # cross-parameter constraints, point by point
        kind.cross_check(point, where)

    canon = {"kind": kind_name, "grid": grid, "fixed": fixed, "run": {"seed": seed, "chunk": chunk}}
    text = dumps_toml(canon)
    return Spec(kind=kind_name, grid=grid, fixed=fixed, seed=seed, chunk=chunk, toml=text,
                sha256=hashlib.sha256(text.encode()).hexdigest())


def grid_points(grid: dict[str, list], fixed: dict[str, Any], indices=None):
    """Parameter dicts of the grid points (row-major over the axes in order), optionally only ``indices``."""
    shape = tuple(len(v) for v in grid.values())
    keys = list(grid)
    flat = range(math.prod(shape)) if indices is None else indices
    for i in flat:
        multi = np.unravel_index(i, shape) if shape else ()
        yield {**fixed, **{k: grid[k][int(j)] for k, j in zip(keys, multi)}}


def _toml_value(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def dumps_toml(spec: dict) -> str:
    """TOML text of a (normalised) spec: top-level scalars, then one table per dict."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    for k, v in spec.items():
        if isinstance(v, dict):
            lines += ["", f"[{k}]"] + [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the task
def compute_chunk(kind: str, points: list[dict], indices: list[int], root_seed: int) -> dict[str, np.ndarray]:
    """Compute the grid points of one chunk (run on a Dask worker); one call per point, never batched.

    A point whose computation refuses its values (a :class:`ParameterError` that only the computation can
    detect, e.g. chi_out overflowing float64) gives ``{"error": ...}`` instead of raising, so the worker logs no
    traceback and the parent reports it as one line naming the grid point."""
    k = kinds()[kind]
    rows = []
    for p, i in zip(points, indices):
        try:
            rows.append(k.compute(p, i, root_seed))
        except ParameterError as exc:
            return {"error": np.array(str(exc)), "error_index": np.array(i),
                    "error_point": np.array(json.dumps(p, default=str))}
    names = rows[0].keys()
    return {"index": np.asarray(indices, dtype=np.int64),
            **{n: np.asarray([r[n] for r in rows], dtype=k.outputs[n].dtype) for n in names}}


# --------------------------------------------------------------------------- parts on disk
def _parts_dir(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


def _part_path(parts: Path, c: int) -> Path:
    return parts / f"chunk-{c:06d}.npz"


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _write_part(parts: Path, c: int, result: dict[str, np.ndarray], sha: str) -> None:
    buf = io.BytesIO()
    np.savez(buf, spec_sha256=np.array(sha), **cast(dict[str, Any], result))
    _atomic_write_bytes(_part_path(parts, c), buf.getvalue())


def _read_part(parts: Path, c: int, spec: Spec) -> dict[str, np.ndarray] | None:
    """A finished chunk, or None when missing or not matching (it is then recomputed)."""
    path = _part_path(parts, c)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception:  # noqa: BLE001  (unreadable part: recompute it)
        log.warning("part %s unreadable; recomputing chunk %d", path, c)
        return None
    lo, hi = c * spec.chunk, min((c + 1) * spec.chunk, spec.size)
    if (str(data.get("spec_sha256")) != spec.sha256
            or not ("index" in data and np.array_equal(data["index"], np.arange(lo, hi)))
            or any(n not in data for n in spec.outputs)):
        log.warning("part %s does not match the spec; recomputing chunk %d", path, c)
        return None
    return data


def _write_manifest(parts: Path, spec: Spec, done: set[int]) -> None:
    manifest = {"spec_sha256": spec.sha256, "kind": spec.kind, "points": spec.size, "chunk": spec.chunk,
                "chunks": spec.n_chunks, "done": sorted(done), "spec": spec.toml}
    _atomic_write_bytes(parts / "manifest.json", json.dumps(manifest, indent=1).encode())


_PART_NAME = re.compile(r"^(chunk-\d{6}\.npz|manifest\.json|\.(chunk-\d{6}\.npz|manifest\.json)\.tmp-\d+)$")


def _check_parts(parts: Path) -> None:
    """``OUT.parts`` is absent or a directory holding only resprop's part files (never anything else)."""
    if parts.is_symlink() or (parts.exists() and not parts.is_dir()):
        raise OutputPathError(parts, "exists and is not a directory (resprop keeps the finished chunks of OUT "
                                     "there); move it away or choose another out")
    if parts.is_dir():
        foreign = sorted(p.name for p in parts.iterdir() if not _PART_NAME.match(p.name) or not p.is_file())
        if foreign:
            raise OutputPathError(parts, f"holds files that resprop did not write ({', '.join(foreign[:3])}"
                                         f"{' ...' if len(foreign) > 3 else ''}); refusing to use it; move them "
                                         "away or choose another out")


def _remove_parts(parts: Path) -> None:
    """Remove the part files resprop wrote, then the directory if nothing else is in it."""
    for p in parts.iterdir() if parts.is_dir() else ():
        if _PART_NAME.match(p.name) and p.is_file():
            p.unlink(missing_ok=True)
    try:
        parts.rmdir()
    except OSError:
        pass


def _open_parts(parts: Path, spec: Spec) -> dict[int, dict[str, np.ndarray] | None]:
    """Create or check the parts directory; return the finished chunks."""
    manifest = parts / "manifest.json"
    _check_parts(parts)
    if parts.exists():
        try:
            old = json.loads(manifest.read_text())
        except (OSError, ValueError):
            old = None
        if old is None:
            if any(parts.glob("chunk-*.npz")):
                raise ParameterError("out", f"{parts} holds parts without a readable manifest.json; "
                                            "remove it or choose another out")
        elif old.get("spec_sha256") != spec.sha256:
            raise ParameterError("out", f"{parts} holds a partial sweep of a different spec; rerun with that "
                                        "spec to finish it, or remove the directory / choose another out")
        for stray in parts.glob(".*.tmp-*"):  # temp files of a killed run
            stray.unlink(missing_ok=True)
    else:
        parts.mkdir(parents=True)
    done: dict[int, dict[str, np.ndarray] | None] = {}  # the run marks chunks done with None
    for c in range(spec.n_chunks):
        data = _read_part(parts, c, spec)
        if data is not None:
            done[c] = data
    _write_manifest(parts, spec, set(done))
    return done


# --------------------------------------------------------------------------- output
def _provenance() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("resprop")
    except PackageNotFoundError:
        ver = "unknown"
    attrs = {"resprop_version": ver, "git_commit": "unknown"}
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode == 0:
            attrs["git_commit"] = head.stdout.strip()
            status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=30)
            if status.returncode == 0:
                attrs["git_dirty"] = "true" if status.stdout.strip() else "false"
    except (OSError, subprocess.SubprocessError):
        pass
    return attrs


def _coord(values: list) -> np.ndarray:
    if all(isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=bool)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=np.int64)
    if all(isinstance(v, str) for v in values):
        return np.asarray(values, dtype=str)
    return np.asarray(values, dtype=np.float64)


def assemble(spec: Spec, chunks: dict[int, dict[str, np.ndarray]]):
    """The labelled Dataset of a finished sweep from its chunk results."""
    import xarray as xr

    kind = kinds()[spec.kind]
    dims = list(spec.grid)
    data_vars = {}
    for name in spec.outputs:
        out = kind.outputs[name]
        flat = np.empty(spec.size, dtype=out.dtype)
        for c in range(spec.n_chunks):
            flat[chunks[c]["index"]] = chunks[c][name]
        data_vars[name] = (dims, flat.reshape(spec.shape),
                           {"units": out.units, "description": out.description, "equation": out.equation})
    coords: dict[str, tuple[Any, Any, dict[str, str]]]
    coords = {k: (k, _coord(v), {"units": kind.params[k].units, "description": kind.params[k].description})
              for k, v in spec.grid.items()}
    for k, v in spec.fixed.items():
        coords[k] = ((), _coord([v])[0], {"units": kind.params[k].units,
                                          "description": kind.params[k].description + " (fixed)"})
    attrs = {"title": f"resprop sweep: {spec.kind}", "kind": spec.kind, "spec": spec.toml,
             "spec_sha256": spec.sha256, **_provenance(),
             "seeding": "grid point i (row-major flat index over the dims) uses "
                        "numpy.random.SeedSequence(run.seed, spawn_key=(i,))"}
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def _write_output(ds, path: Path) -> None:
    """Write the dataset to ``path`` (the temporary of a :class:`resprop.numeric.engine.output.Publication`)."""
    if path.suffix == ".nc":
        ds.to_netcdf(path, engine="h5netcdf")
    else:
        ds.to_zarr(path, mode="w", zarr_format=2, consolidated=True)


# --------------------------------------------------------------------------- driver
def _check_out(out) -> Path:
    if not isinstance(out, (str, os.PathLike)):
        raise ParameterError("out", f"must be a path ending in {' or '.join(OUTPUT_SUFFIXES)}, got {out!r}")
    path = Path(out)
    if path.suffix not in OUTPUT_SUFFIXES:
        raise ParameterError("out", f"unknown extension {path.suffix or '(none)'!r} of {str(path)!r}; allowed: "
                                    f"{', '.join(OUTPUT_SUFFIXES)} (NetCDF-4 via h5netcdf, Zarr)")
    return path


def _client(scheduler: str | None, workers: int | None, processes: bool):
    """(client, cluster or None): a connection to ``scheduler`` or a fresh in-process LocalCluster."""
    from distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            return Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise ParameterError("scheduler", f"cannot connect to {scheduler!r}: {exc}") from None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    try:
        return Client(cluster), cluster
    except BaseException:
        cluster.close()
        raise


def run_sweep(spec, out, scheduler: str | None = None, workers: int | None = None, progress: bool = True,
              processes: bool = False):
    """Run the grid of ``spec`` on Dask and write ``out`` (.nc or .zarr); return the xarray Dataset.

    spec : path to a TOML file, or the dict it parses to (module docstring).
    out : output file; ``<out>.parts/`` holds finished chunks until the sweep completes (resume).
    scheduler : address ``tcp://HOST:PORT`` of a running Dask scheduler (its workers need resprop
        installed); None starts a LocalCluster for the duration of the call.
    workers : LocalCluster worker count (default min(2, CPUs)); not allowed with ``scheduler``.
    progress : tqdm progress bar and a one-line summary on stderr.
    processes : LocalCluster workers as threads of this process (False, default: no start-up cost,
        nothing to clean up; NumPy releases the GIL, ~1.6x on 2 workers) or as subprocesses (True:
        ~2-3 s start-up per worker, pays off for long grids; scripts need an ``if __name__ ==
        "__main__":`` guard as workers are spawned).
    """
    import tqdm

    spec_ = normalize_spec(load_spec(spec))
    out = _check_out(out)
    if scheduler is not None and not isinstance(scheduler, str):
        raise ParameterError("scheduler", f"must be an address like tcp://HOST:PORT, got {scheduler!r}")
    if workers is not None:
        if scheduler is not None:
            raise ParameterError("workers", "only for the local cluster; with --scheduler the scheduler's "
                                            "workers are used")
        workers = _int_check(1)("workers", workers)
    else:
        workers = min(2, os.cpu_count() or 1)
    pub = Publication(out, "dir" if out.suffix == ".zarr" else "file", "resprop sweep")  # path checks first
    parts = _parts_dir(pub.out)
    _check_parts(parts)
    with pub:
        checkpoint("locked")
        ds = _run_locked(spec_, pub, parts, scheduler, workers, processes, progress, tqdm)
        pub.commit()
    _remove_parts(parts)
    if progress:
        print(f"sweep: wrote {out}", file=sys.stderr)
    return ds


def _point_label(spec: Spec, index: int) -> str:
    point = next(grid_points(spec.grid, {}, [index]))
    return f"grid point {index} (" + ", ".join(f"{k}={v!r}" for k, v in point.items()) + ")"


def _run_locked(spec_: Spec, pub: Publication, parts: Path, scheduler, workers, processes, progress, tqdm):
    """The sweep proper, holding ``pub``'s lock: parts, Dask, assembly and the output in ``pub.path``."""
    done = _open_parts(parts, spec_)
    todo = [c for c in range(spec_.n_chunks) if c not in done]
    if progress:
        print(f"sweep {spec_.kind}: {spec_.size} points in {spec_.n_chunks} chunks of {spec_.chunk}; "
              f"{len(done)} chunks already done" + (f", computing {len(todo)}" if todo else ""), file=sys.stderr)
    if done:
        log.info("resuming: %d of %d chunks already done", len(done), spec_.n_chunks)

    if todo:
        from distributed import as_completed

        client = cluster = bar = None
        futures = []
        refused = False
        try:
            client, cluster = _client(scheduler, workers, processes)
            bar = tqdm.tqdm(total=spec_.n_chunks, initial=len(done), unit="chunk", desc="sweep", file=sys.stderr,
                            disable=not progress, dynamic_ncols=True)
            for c in todo:
                idx = list(range(c * spec_.chunk, min((c + 1) * spec_.chunk, spec_.size)))
                points = list(grid_points(spec_.grid, spec_.fixed, idx))
                futures.append(client.submit(compute_chunk, spec_.kind, points, idx, spec_.seed, pure=False,
                                             key=f"resprop-sweep-{spec_.sha256[:12]}-{c}"))
            chunk_of = {f.key: c for f, c in zip(futures, todo)}
            last_manifest = time.monotonic()
            for fut in as_completed(futures):
                c = chunk_of[fut.key]
                result = fut.result()
                fut.release()
                if "error" in result:  # refused by the computation itself: one line naming the point
                    refused = True  # the same spec can never complete, so its parts are of no use
                    raise ParameterError(_point_label(spec_, int(result["error_index"])), str(result["error"]))
                _write_part(parts, c, result, spec_.sha256)
                done[c] = None  # reloaded from its part file below, like the resumed ones
                log.info("chunk %d computed", c)
                bar.update(1)
                if time.monotonic() - last_manifest > _MANIFEST_INTERVAL:  # informative; the parts are authoritative
                    _write_manifest(parts, spec_, set(done))
                    last_manifest = time.monotonic()
                checkpoint("part-written")  # test hook: the part is written and counted as done
        finally:
            if done and not refused:
                try:
                    _write_manifest(parts, spec_, set(done))
                except OSError:  # never mask the original error
                    pass
            else:  # nothing to resume: leave no parts directory behind
                _remove_parts(parts)
            if bar is not None:
                bar.close()
            for f in futures:
                if not f.done():
                    f.cancel()
            # a run stopped by Ctrl-C / SIGTERM or an error: Dask's own warnings about the tasks cancelled during
            # the shutdown are not for the user (the one line resprop prints says what happened)
            failing = sys.exc_info()[0]
            dask_log = logging.getLogger("distributed")
            level = dask_log.level
            if failing is not None:
                dask_log.setLevel(logging.CRITICAL)
            try:
                if client is not None:
                    client.close()
                if cluster is not None:
                    cluster.close()
            finally:
                # after an interrupt the process is on its way out and Dask's threads may still log while they
                # stop: leave them quiet then; after an error, restore the level
                if failing is None or not issubclass(failing, KeyboardInterrupt):
                    dask_log.setLevel(level)

    chunks = {c: _read_part(parts, c, spec_) for c in range(spec_.n_chunks)}
    missing = [c for c, v in chunks.items() if v is None]
    if missing:  # pragma: no cover  (a part vanished under us)
        raise RuntimeError(f"chunks {missing[:5]} missing from {parts} after the run; rerun to recompute them")
    ds = assemble(spec_, {c: v for c, v in chunks.items() if v is not None})  # all of them (checked above)
    _write_output(ds, pub.path)
    return ds


def cli_sweep(spec, out, scheduler: str | None = None, workers: int | None = None, quiet: bool = False) -> int:
    """``resprop sweep``: run, print the output path and the data variables; 130 on Ctrl-C, 143 on SIGTERM
    (resumable; ``out`` is left as it was)."""
    try:
        ds = run_sweep(spec, out, scheduler=scheduler, workers=workers, progress=not quiet)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as resprop.numeric.engine.output.Interrupted
        from resprop.numeric.cli_support import interrupted
        from resprop.numeric.engine.output import published_here

        if published_here(out):  # it landed after the commit: out is complete
            return interrupted(exc, out)
        parts = _parts_dir(Path(out))
        kept = (f"finished chunks are kept in {parts} -- rerun the same command to resume" if parts.is_dir()
                else "no chunk had finished")
        print(f"resprop: interrupted; {out} left as it was; {kept}", file=sys.stderr)
        return 128 + getattr(exc, "signum", 2)
    dims = ", ".join(f"{k}={v}" for k, v in ds.sizes.items())
    print(f"wrote {out}: {ds.attrs['kind']} ({dims}); variables: {', '.join(ds.data_vars)}")
    return 0
