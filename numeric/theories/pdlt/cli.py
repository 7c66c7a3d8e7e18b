"""`resprop` subcommands of the pdlt theory (nu ...): declared in its registry entry."""
from __future__ import annotations

from resprop.generated.parameters import declared
from resprop.numeric.cli_support import add_parameter_option, emit, interrupted  # noqa: F401


def cmd_nu(args) -> int:
    """PDLT nu(gamma), C_W(gamma) and r*(gamma) for an activation class."""
    from resprop.numeric.theories.pdlt import residual_mlp as rm
    out = {"gamma": args.gamma, "activation": args.activation,
           "nu": float(rm.nu(args.gamma, args.activation)),
           "C_W": float(rm.critical_C_W(args.gamma, args.activation)),
           "r_star": float(rm.r_star(args.gamma, args.activation, args.n_out))}
    emit(out, args.json)
    return 0


def add_subcommands(sub) -> None:
    """Add this theory's subcommands to the ``resprop`` parser's sub-parsers."""
    p = sub.add_parser("nu", help="PDLT residual-MLP nu(gamma), critical C_W and r*(gamma)")
    add_parameter_option(p, declared("pdlt", "gamma"), required=True)
    p.add_argument("--activation", required=True, help="relu, tanh, erf, linear or leaky_relu:<slope>")
    p.add_argument("--n-out", type=int, default=1, help="output width n_L (B.36)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_nu)
