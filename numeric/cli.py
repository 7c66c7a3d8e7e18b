"""The `resprop` command line.  Bad input exits 2 with a message naming the parameter."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse already exits 2; keep its message on one line
        self.print_usage(sys.stderr)
        self.exit(2, f"resprop: error: {message}\n")


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
    from derive.codegen import stale_files, write_generated

    if args.check:
        stale = stale_files()
        if stale:
            for rel, diff in stale.items():
                print(f"stale: generated/{rel}", file=sys.stderr)
                print("\n".join(diff.splitlines()[:40]), file=sys.stderr)
            print("generated/ is stale: run `resprop derive`", file=sys.stderr)
            return 1
        print("generated/ is up to date")
        return 0
    for path in write_generated():
        print(f"wrote {path}")
    return 0


def cmd_latex(args) -> int:
    from derive.latex import export_latex

    for path in export_latex(Path(args.out)):
        print(f"wrote {path}")
    return 0


def cmd_rho_star(args) -> int:
    from numeric.field_theory import rho_star

    res = rho_star(args.depth, args.k0, args.sigma_w2, args.sigma_b2, k0_offdiag=args.k0_offdiag,
                   sigma_w2_out=args.sigma_w2_out, activation=args.activation)
    out = {"depth": res["depth"], "rho_star": res["rho_star"]}
    if args.k0_offdiag is not None:
        out["rho_star_offdiag"] = res["rho_star_offdiag"]
    _emit(out, args.json)
    return 0


def cmd_response(args) -> int:
    from numeric.field_theory import response

    res = response(args.k0, args.depth, args.rho, args.sigma_w2, args.sigma_b2, k0_offdiag=args.k0_offdiag,
                   sigma_w2_out=args.sigma_w2_out, activation=args.activation)
    out = {"layer": np.arange(args.depth + 1), "eta": res["eta"], "chi": res["chi"], "K": res["K"],
           "chi_out": res["chi_out"]}
    if args.k0_offdiag is not None:
        out.update(eta_offdiag=res["eta_offdiag"], chi_offdiag=res["chi_offdiag"],
                   chi_out_offdiag=res["chi_out_offdiag"])
    _emit(out, args.json)
    return 0


def cmd_reproduce(args) -> int:
    from numeric.reproduce import reproduce

    report = reproduce(Path(args.out), quick=args.quick, quiet=args.quiet)
    print(f"wrote {Path(args.out) / 'report.json'}: {report['summary']}")
    return 0 if report["summary"]["failed"] == 0 else 1


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
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("derive", help="regenerate generated/ from the derivations")
    p.add_argument("--check", action="store_true", help="exit 1 if generated/ is stale (no writes)")
    p.set_defaults(func=cmd_derive)
    p = sub.add_parser("latex", help="export one .tex document per theory")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_latex)
    p = sub.add_parser("rho-star", help="rho* = argmax chi_out for a batch of depths (Fischer et al. Fig. 4)")
    p.add_argument("--depth", type=int, nargs="+", required=True)
    _common(p)
    p.set_defaults(func=cmd_rho_star)
    p = sub.add_parser("response", help="eta^(l), chi^(l), chi_out (Fischer et al. 45-48)")
    p.add_argument("--rho", type=float, required=True)
    p.add_argument("--depth", type=int, required=True)
    _common(p)
    p.set_defaults(func=cmd_response)
    p = sub.add_parser("reproduce", help="the main job: theory + Monte Carlo checks, written to DIR/report.json")
    p.add_argument("theory", nargs="?", default="fischer", choices=["fischer", "all"])
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_reproduce)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:  # ParameterError and friends: a clear message, exit 2
        print(f"resprop: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
