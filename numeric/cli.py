"""The `resprop` command line.  Bad input exits 2 with a message naming the parameter."""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

import numpy as np


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse already exits 2; keep its message on one line
        self.print_usage(sys.stderr)
        self.exit(2, f"resprop: error: {message}\n")


def _interrupted(exc: KeyboardInterrupt, out=None) -> int:
    """Ctrl-C, or SIGTERM raised as numeric.output.Interrupted: one line, exit 128 + the signal number."""
    where = f"; {out} left as it was" if out is not None else ""
    print(f"resprop: interrupted{where}", file=sys.stderr)
    return 128 + getattr(exc, "signum", 2)


def _emit(obj: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj, default=lambda v: v.tolist() if hasattr(v, "tolist") else float(v)))
        return
    for key, val in obj.items():
        val = np.asarray(val)
        text = np.array2string(val, precision=6, max_line_width=100) if val.ndim else f"{float(val):.10g}" \
            if val.dtype.kind in "fi" else str(val)
        print(f"{key}: {text}")


def cmd_derive(args) -> int:
    from derive.codegen import display_path, stale_files, write_generated

    if args.check:
        stale = stale_files()
        if stale:
            for rel, diff in stale.items():
                print(f"stale: {display_path(rel)}", file=sys.stderr)
                print("\n".join(diff.splitlines()[:40]), file=sys.stderr)
            print("generated/ is stale: run `resprop derive`", file=sys.stderr)
            return 1
        print("generated/ is up to date")
        return 0
    for path in write_generated():
        print(f"wrote {path}")
    return 0


def cmd_latex(args) -> int:
    """Export (and with --pdf compile) into a temporary sibling of --out that replaces it when complete
    (numeric.output: never over anything but resprop's own previous export)."""
    from derive.latex import export_latex
    from numeric.output import Publication

    pub = Publication(args.out, "dir", "resprop latex")  # checks the path before any work
    if args.pdf:
        from numeric.latex_pdf import find_engine

        if find_engine() is None:  # fail before writing anything
            from numeric.latex_pdf import INSTALL_HINT

            print(f"resprop: error: --pdf needs pdflatex, which is not on PATH ({INSTALL_HINT})", file=sys.stderr)
            return 1
    failed = 0
    try:
        with pub:
            paths = export_latex(pub.path)
            written = list(paths)
            if args.pdf:
                from numeric.latex_pdf import LatexError, compile_pdf

                for path in paths:
                    try:
                        written.append(compile_pdf(path))
                    except LatexError as exc:
                        failed += 1
                        print(f"resprop: error: {exc}", file=sys.stderr)
            written = [pub.final(p) for p in written]
            pub.commit()
    except KeyboardInterrupt as exc:
        return _interrupted(exc, args.out)
    for path in written:
        print(f"wrote {path}")
    return 1 if failed else 0


def cmd_rho_star(args) -> int:
    from numeric.field_theory import rho_star

    from numeric import validation as V

    lo, hi = V.scalar("rho_min", args.rho_min, V.positive), V.scalar("rho_max", args.rho_max, V.positive)
    if hi <= lo:
        raise V.ParameterError("rho_max", f"must exceed rho_min = {lo:g}, got {hi:g}")
    res = rho_star(args.depth, args.k0, args.sigma_w2, args.sigma_b2, k0_offdiag=args.k0_offdiag,
                   sigma_w2_out=args.sigma_w2_out, activation=args.activation, grid=np.geomspace(lo, hi, 241),
                   progress=not args.quiet)
    # no interior maximum: rho* is null, and rho*_boundary names the edge the supremum approaches
    keys = ("rho_star",) + (("rho_star_offdiag",) if args.k0_offdiag is not None else ())
    out = {"depth": res["depth"].tolist(), "search_range": [lo, hi]}
    for key in keys:
        out[key] = [None if not i else float(v) for v, i in zip(res[key], res[key + "_interior"])]
        out[key + "_boundary"] = list(res[key + "_boundary"])
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"depth: {out['depth']}")
    for key in keys:
        print(f"{key}: [" + ", ".join("null" if v is None else f"{v:.10g}" for v in out[key]) + "]")
        for depth, text in zip(out["depth"], out[key + "_boundary"]):
            if text is not None:
                print(f"{key}: no interior maximum at depth {depth} in rho [{lo:g}, {hi:g}]: chi_out"
                      f"{' (off-diagonal)' if key.endswith('offdiag') else ''} is largest as {text}")
    return 0


def cmd_response(args) -> int:
    from numeric.field_theory import response

    res = response(args.k0, args.depth, args.rho, args.sigma_w2, args.sigma_b2, k0_offdiag=args.k0_offdiag,
                   sigma_w2_out=args.sigma_w2_out, activation=args.activation, progress=not args.quiet)
    out = {"layer": np.arange(args.depth + 1), "eta": res["eta"], "chi": res["chi"], "K": res["K"],
           "chi_out": res["chi_out"]}
    if args.k0_offdiag is not None:
        out.update(eta_offdiag=res["eta_offdiag"], chi_offdiag=res["chi_offdiag"],
                   chi_out_offdiag=res["chi_out_offdiag"])
    _emit(out, args.json)
    return 0


def cmd_reproduce(args) -> int:
    """Exit 0 when no row FAILS, 1 otherwise, 130 on Ctrl-C (DIR is then left as it was)."""
    from numeric.reproduce import reproduce

    out = Path(args.out)
    try:
        report = reproduce(out, args.theory, quick=args.quick, quiet=args.quiet)
    except KeyboardInterrupt as exc:
        return _interrupted(exc, out)
    s = report["summary"]
    print(f"wrote {out / 'report.json'} and {out / 'index.html'}: {s['rows']} rows, {s['agrees']} agree, "
          f"{s['documented_disagreements']} documented disagreements, {s['fails']} FAIL ({s['seconds']} s)")
    sections = [(name, t["rows"]) for name, t in report["theories"].items()]
    for name, rows in sections + [("cross-theory", report["cross_theory"]["rows"])]:
        for r in rows:
            if r["verdict"] == "FAILS":
                print(f"FAILS [{name}] {r['quantity']}: {r['check']} {r['note']}".rstrip(), file=sys.stderr)
    return 0 if s["fails"] == 0 else 1


def cmd_j2bar(args) -> int:
    """J2-bar(theta) at --digits digits: derived closed form and 2-D quadrature of eq. (23), as decimal strings."""
    import mpmath as mp

    from numeric.mp_checks import j2bar_closed_mp, j2bar_quadrature_mp
    from numeric.validation import ParameterError

    digits = args.digits
    if not 1 <= digits <= 100:
        raise ParameterError("digits", f"must be an integer in [1, 100], got {digits}")
    out = {"theta": [], "closed_form": [], "quadrature": []}
    with mp.workdps(digits + 10):
        for text in args.theta:
            try:
                theta = mp.mpf(text)
            except (ValueError, TypeError):
                raise ParameterError("theta", f"must be a number in [0, pi], got {text!r}") from None
            if not 0 <= theta <= mp.pi:
                raise ParameterError("theta", f"must lie in [0, pi], got {text}")
            out["theta"].append(mp.nstr(theta, digits))
            out["closed_form"].append(mp.nstr(j2bar_closed_mp(theta, digits), digits))
            out["quadrature"].append(mp.nstr(j2bar_quadrature_mp(theta, digits), digits))
    if args.json:
        print(json.dumps(out))
    else:
        for t, c, q in zip(out["theta"], out["closed_form"], out["quadrature"]):
            print(f"theta={t}  closed_form={c}  quadrature={q}")
    return 0


def cmd_log_gaussian(args) -> int:
    """Li-Nica-Roy E[G], Var[G]: theory (Thm 1 / Thm 4) and, with --simulate, Monte Carlo with SEs."""
    from numeric import log_gaussian as lg
    from numeric import monte_carlo as mc
    from numeric import validation as V

    lg.check_architecture(args.n, args.d, args.alpha, args.lam)
    V.integer("hypo_samples", args.hypo_samples, 2)
    sim = None
    hypo = args.hypo_constant
    hypo_source = "given" if hypo is not None else None
    def alive(s):  # with alpha = 0 a network dies (z = 0, G = -inf) when all n ReLUs of a layer are off
        dead = int(np.count_nonzero(~np.isfinite(s.G)))
        if dead:
            raise V.ParameterError("alpha, n", f"{dead} of {s.samples} simulated networks died (alpha = 0 and all "
                                               f"n = {s.n} ReLUs of a layer off, probability 2^-n per layer), so "
                                               "E[G] = -inf; use alpha != 0 or a larger n")
        return s

    if args.simulate:
        sim = alive(mc.simulate_log_gaussian(n=args.n, d=args.d, alpha=args.alpha, lam=args.lam,
                                             balanced=args.balanced, samples=args.samples, seed=args.seed))
    if not args.balanced and hypo is None:
        est = sim if sim is not None else alive(mc.simulate_log_gaussian(
            n=args.n, d=args.d, alpha=args.alpha, lam=args.lam, samples=args.hypo_samples, seed=args.seed))
        hyp = mc.hypoactivation(est)
        hypo, hypo_source = float(hyp["C_hat"]), f"Monte Carlo ({est.samples} samples, seed {args.seed})"
        hypo_se = float(hyp["C_hat_se"])
    th = lg.theory(args.n, args.d, args.alpha, args.lam, balanced=args.balanced, hypo_constant=hypo)
    theory = {"mean_G": th["mean_G"], "var_G": th["var_G"], "beta": th["beta"], "c": th["c"],
              "I_total": th["I_total"], "h_total": th["h_total"]}
    if not args.balanced:
        theory["hypo_constant"] = hypo
        theory["hypo_constant_source"] = hypo_source
        if hypo_source != "given":
            theory["hypo_constant_se"] = hypo_se
    out = {"theory": theory}
    if sim is not None:
        g = mc.g_moments(sim)
        out["simulation"] = {k: float(g[k]) for k in ("mean_G", "mean_G_se", "var_G", "var_G_se")}
        out["simulation"].update(samples=sim.samples, seed=args.seed)
    if args.json:
        print(json.dumps(out))
    else:
        for part, vals in out.items():
            print(part + ": " + ", ".join(f"{k}={v}" for k, v in vals.items()))
    return 0


def cmd_nu(args) -> int:
    """PDLT nu(gamma), C_W(gamma) and r*(gamma) for an activation class."""
    from numeric import residual_mlp as rm

    out = {"gamma": args.gamma, "activation": args.activation,
           "nu": float(rm.nu(args.gamma, args.activation)),
           "C_W": float(rm.critical_C_W(args.gamma, args.activation)),
           "r_star": float(rm.r_star(args.gamma, args.activation, args.n_out))}
    _emit(out, args.json)
    return 0


def cmd_sweep(args) -> int:
    """Parameter grid from a TOML spec on Dask; resumable; NetCDF (.nc) or Zarr (.zarr) output."""
    import importlib.util

    missing = [m for m in ("dask", "distributed", "xarray", "h5netcdf", "zarr") if importlib.util.find_spec(m) is None]
    if missing:  # the optional extra: say which one, not a ModuleNotFoundError
        print(f"resprop: error: sweep needs the optional dependencies of resprop[sweep] (missing: {', '.join(missing)}); "
              "install them with: pip install 'resprop[sweep]'", file=sys.stderr)
        return 2
    from numeric.sweep import cli_sweep

    return cli_sweep(Path(args.spec), Path(args.out), scheduler=args.scheduler, workers=args.workers,
                     quiet=args.quiet)


def cmd_abcd(args) -> int:
    """Innocenti et al. abcd parameterisations: exact solution family, Table 2, or --check of one assignment."""
    from numeric.abcd import cli_abcd

    return cli_abcd(args.check, args.json, reading=args.reading, widths=args.widths, depth=args.depth,
                    gamma0=args.gamma0)


FIGURE_SETS = ("lnr_pdlt", "stable", "pc")


def cmd_figures(args) -> int:
    from numeric.validation import ParameterError

    chosen = FIGURE_SETS if args.only is None else tuple(args.only.split(","))
    unknown = sorted(set(chosen) - set(FIGURE_SETS))
    if unknown:
        raise ParameterError("only", f"unknown figure set(s) {unknown}; allowed: {', '.join(FIGURE_SETS)}")
    from numeric.output import Publication

    try:
        with Publication(args.out, "dir", "resprop figures") as pub:  # path checked before any work
            out = pub.path
            paths = []
            if "lnr_pdlt" in chosen:
                from numeric.figures import make_figures

                paths += make_figures(out, quick=args.quick, seed=args.seed, progress=not args.quiet)
            if "stable" in chosen:
                from numeric.stable_experiments import make_stable_figures

                paths += make_stable_figures(out, quick=args.quick, seed=args.seed)
            if "pc" in chosen:
                from numeric.pc_figures import make_pc_figures

                paths += make_pc_figures(out, quick=args.quick, seed=args.seed)
            paths = [pub.final(p) for p in paths]
            pub.commit()
    except KeyboardInterrupt as exc:
        return _interrupted(exc, args.out)
    for path in paths:
        print(f"wrote {path}")
    return 0


def cmd_stable_kernel(args) -> int:
    """Hayou et al. NNGP/NTK for two unit inputs at --angle, in natural logs so deep unscaled nets stay finite."""
    from numeric.stable_resnet import two_input_kernels

    res = two_input_kernels(args.depth, args.scaling, angle=args.angle, sigma_w2=args.sigma_w2,
                            sigma_b2=args.sigma_b2, d_in=args.d_in, progress=not args.quiet)
    _emit({k: res[k] for k in ("depth", "log_Q_diag", "correlation", "log_ntk_diag")}, args.json)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k0", type=float, required=True, help="input kernel K^(0) (diagonal element)")
    p.add_argument("--k0-offdiag", type=float, default=None, help="off-diagonal input kernel element")
    p.add_argument("--sigma-w2", type=float, required=True)
    p.add_argument("--sigma-b2", type=float, required=True)
    p.add_argument("--sigma-w2-out", type=float, default=None, help="readout weight variance (default: sigma_w2)")
    p.add_argument("--activation", default="erf", help="erf, tanh, relu, gelu, linear or a SymPy expression in x")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="resprop", description=__doc__)
    parser.add_argument("--debug", action="store_true",
                        help="print the full traceback of an error (default: one line)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("derive", help="regenerate generated/ from the derivations")
    p.add_argument("--check", action="store_true", help="exit 1 if generated/ is stale (no writes)")
    p.set_defaults(func=cmd_derive)
    p = sub.add_parser("latex", help="export one .tex document per theory (and, with --pdf, compile each)")
    p.add_argument("--out", required=True)
    p.add_argument("--pdf", action="store_true", help="compile every .tex with pdflatex; the PDF goes next to it")
    p.set_defaults(func=cmd_latex)
    p = sub.add_parser("rho-star", help="rho* = argmax chi_out for a batch of depths (Fischer et al. Fig. 4)")
    p.add_argument("--depth", type=int, nargs="+", required=True)
    _common(p)
    p.add_argument("--rho-min", type=float, default=1e-3, help="lower edge of the searched rho range (> 0)")
    p.add_argument("--rho-max", type=float, default=3.0, help="upper edge of the searched rho range")
    p.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    p.set_defaults(func=cmd_rho_star)
    p = sub.add_parser("response", help="eta^(l), chi^(l), chi_out (Fischer et al. 45-48)")
    p.add_argument("--rho", type=float, required=True)
    p.add_argument("--depth", type=int, required=True)
    _common(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    p.set_defaults(func=cmd_response)
    p = sub.add_parser("j2bar", help="Li-Nica-Roy J2-bar(theta): closed form vs 2-D mpmath quadrature")
    p.add_argument("theta", nargs="+", help="angles in [0, pi]")
    p.add_argument("--digits", type=int, default=30)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_j2bar)
    p = sub.add_parser("log-gaussian", help="Li-Nica-Roy E[G], Var[G]: theory and Monte Carlo")
    p.add_argument("--n", type=int, required=True, help="hidden width (>= 2)")
    p.add_argument("--d", type=int, required=True, help="number of residual layers (>= 1)")
    p.add_argument("--alpha", type=float, required=True, help="skip coefficient")
    p.add_argument("--lam", type=float, required=True, help="residual-branch coefficient (>= 0)")
    p.add_argument("--balanced", action="store_true", help="balanced ResNet (random activation signs, Thm 4)")
    p.add_argument("--simulate", action="store_true", help="add a Monte Carlo estimate with standard errors")
    p.add_argument("--samples", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hypo-constant", type=float, default=None,
                   help="C_{alpha,lambda} of Prop. 2 (default: estimated by Monte Carlo)")
    p.add_argument("--hypo-samples", type=int, default=2000,
                   help="samples for estimating C_{alpha,lambda} when neither --hypo-constant nor --simulate")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_log_gaussian)
    p = sub.add_parser("nu", help="PDLT residual-MLP nu(gamma), critical C_W and r*(gamma)")
    p.add_argument("--gamma", type=float, required=True, help="residual hyperparameter in [0, 1)")
    p.add_argument("--activation", required=True, help="relu, tanh, erf, linear or leaky_relu:<slope>")
    p.add_argument("--n-out", type=int, default=1, help="output width n_L (B.36)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_nu)
    p = sub.add_parser("stable-kernel", help="Hayou et al. Stable ResNet NNGP/NTK (log diagonal, correlation)")
    p.add_argument("--depth", type=int, nargs="+", required=True)
    p.add_argument("--scaling", default="uniform",
                   help="unscaled, uniform (1/sqrt(L)), decreasing (1/(sqrt(l) log(l+1))) or a SymPy expression in l, L")
    p.add_argument("--angle", type=float, default=1.0, help="angle between the two unit inputs, in [0, pi]")
    p.add_argument("--sigma-w2", type=float, default=2.0)
    p.add_argument("--sigma-b2", type=float, default=0.0)
    p.add_argument("--d-in", type=int, default=2, help="input dimension d in Q_0 = sigma_b^2 + sigma_w^2 x.x'/d")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    p.set_defaults(func=cmd_stable_kernel)
    p = sub.add_parser("sweep", help="parameter grid from a TOML spec on Dask (resumable; .nc or .zarr output)")
    p.add_argument("spec", help="TOML spec: kind, [grid], [fixed], [run] (see examples/sweeps/)")
    p.add_argument("--out", required=True, help="output file, .nc (NetCDF-4) or .zarr; OUT.parts/ holds "
                                                "finished chunks until the sweep completes")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="use a running Dask scheduler (default: an in-process LocalCluster)")
    p.add_argument("--workers", type=int, default=None, help="LocalCluster workers (default: min(2, CPUs))")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sweep)
    p = sub.add_parser("abcd", help="Innocenti et al. (2025) abcd parameterisations: exact family, Table 2, --check")
    p.add_argument("--check", nargs="+", metavar="KEY=VALUE", default=None,
                   help="exponents a1 b1 a b c d (rationals, e.g. a=1/2), optional alpha and nu (N = L^nu)")
    p.add_argument("--reading", choices=["paper", "literal"], default="paper",
                   help="paper: every layer's own update at order one (eq. 15); literal: total dh/dt = Theta(1)")
    p.add_argument("--widths", nargs="+", type=float, default=None, metavar="N",
                   help="evaluate the PC-specific rates on the eq.-15 family at these widths (N >= 1)")
    p.add_argument("--depth", type=int, default=3, help="depth L for --widths (>= 2)")
    p.add_argument("--gamma0", type=float, default=1.0, help="output-scale constant gamma_0 for --widths (> 0)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_abcd)
    p = sub.add_parser("figures", help="PNG figures: Li-Nica-Roy, PDLT, Stable ResNet, predictive coding")
    p.add_argument("--out", required=True)
    p.add_argument("--only", default=None, help="comma-separated subset of: " + ", ".join(FIGURE_SETS))
    p.add_argument("--quick", action="store_true", help="fewer depths/widths and samples (seconds)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_figures)
    p = sub.add_parser("reproduce", help="the main job: theory, Monte Carlo checks, figures and LaTeX/PDF, "
                                         "written to DIR/report.json and DIR/index.html")
    p.add_argument("theory", nargs="?", default="all",
                   choices=["fischer", "stable", "abcd", "pdlt", "lognormal", "all"])
    p.add_argument("--out", required=True, metavar="DIR", help="report directory (replaced atomically at the end)")
    p.add_argument("--quick", action="store_true", help="smaller Monte Carlo samples and quick figures")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_reproduce)
    return parser


def _one_line(text: str) -> str:
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
    args = parser.parse_args([a for a in argv if a != "--debug"])
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
        return _interrupted(exc)
    except Exception as exc:  # a bug: say what and where in one line; the traceback only under --debug
        if args.debug:
            traceback.print_exc()
        print(f"resprop: internal error: {type(exc).__name__}: {_one_line(exc)} "
              f"(rerun with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
