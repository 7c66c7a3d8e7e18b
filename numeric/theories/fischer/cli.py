"""`resprop` subcommands of the fischer theory (rho-star ...): declared in its registry entry."""
from __future__ import annotations

import argparse
import json

import numpy as np

from resprop.generated.parameters import declared
from resprop.numeric.cli_support import add_parameter_option, emit, interrupted  # noqa: F401


def cmd_rho_star(args) -> int:
    from resprop.numeric.engine import validation as V
    from resprop.numeric.theories.fischer.field_theory import rho_star
    lo, hi = V.scalar("rho_min", args.rho_min, V.positive), V.scalar("rho_max", args.rho_max, V.positive)
    if hi <= lo:
        raise V.ParameterError("rho_max", f"must exceed rho_min = {lo:g}, got {hi:g}")
    res = rho_star(args.depth, args.input_kernel, args.sigma_w2, args.sigma_b2,
                   input_kernel_offdiag=args.input_kernel_offdiag,
                   sigma_w2_out=args.sigma_w2_out, activation=args.activation, grid=np.geomspace(lo, hi, 241),
                   progress=not args.quiet)
    # no interior maximum: rho* is null, and rho*_boundary names the edge the supremum approaches
    keys = ("rho_star",) + (("rho_star_offdiag",) if args.input_kernel_offdiag is not None else ())
    out = {"depth": res.depth.tolist(), "search_range": [lo, hi]}
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
    from resprop.numeric.theories.fischer.field_theory import response

    res = response(args.input_kernel, args.depth, args.rho, args.sigma_w2, args.sigma_b2,
                   input_kernel_offdiag=args.input_kernel_offdiag, sigma_w2_out=args.sigma_w2_out,
                   activation=args.activation, progress=not args.quiet)
    out = {"layer": np.arange(args.depth + 1), "eta": res.eta, "chi": res.chi, "K": res.K, "chi_out": res.chi_out}
    if args.input_kernel_offdiag is not None:
        out.update(eta_offdiag=res.eta_offdiag, chi_offdiag=res.chi_offdiag, chi_out_offdiag=res.chi_out_offdiag)
    emit(out, args.json)
    return 0
def _common(p: argparse.ArgumentParser) -> None:
    add_parameter_option(p, declared("fischer", "K0"), flag="--input-kernel", required=True, metavar="K0",
                         help="its diagonal element (every input has this variance)")
    p.add_argument("--input-kernel-offdiag", type=float, default=None, metavar="K0_AB",
                   help="off-diagonal input kernel element K^(0)_ab of a pair of inputs, in [-K0, K0] (K0 = "
                        "--input-kernel); default: none (the diagonal only)")
    add_parameter_option(p, declared("fischer", "sigma_w2"), required=True, metavar="S")
    add_parameter_option(p, declared("fischer", "sigma_b2"), required=True, metavar="B")
    add_parameter_option(p, declared("fischer", "sigma_w2_out"), default=None, metavar="S_OUT",
                         default_text="--sigma-w2")
    p.add_argument("--activation", default="erf", metavar="EXPR",
                   help="activation phi: erf, tanh, relu, gelu, linear or a SymPy expression in x; default: erf")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: one line per quantity)")


def add_subcommands(sub) -> None:
    """Add this theory's subcommands to the ``resprop`` parser's sub-parsers."""
    p = sub.add_parser("rho-star", help="rho* = argmax chi_out for a batch of depths (Fischer et al. Fig. 4)")
    add_parameter_option(p, "depth", domain="[1, inf)", nargs="+", required=True, metavar="L",
                         help="one or more (rho* for each)")
    _common(p)
    p.add_argument("--rho-min", type=float, default=1e-3, metavar="RHO",
                   help="lower edge of the searched rho range, in (0, inf); default: 0.001")
    p.add_argument("--rho-max", type=float, default=3.0, metavar="RHO",
                   help="upper edge of the searched rho range, in (rho-min, inf); default: 3")
    p.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    p.set_defaults(func=cmd_rho_star)
    p = sub.add_parser("response", help="eta^(l), chi^(l), chi_out (Fischer et al. 45-48)")
    add_parameter_option(p, declared("fischer", "rho"), required=True, metavar="RHO")
    add_parameter_option(p, "depth", domain="[1, inf)", required=True, metavar="L")
    _common(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    p.set_defaults(func=cmd_response)
