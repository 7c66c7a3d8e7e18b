"""`resprop` subcommands of the abcd theory (abcd ...): declared in its registry entry."""
from __future__ import annotations

from resprop.generated.parameters import declared
from resprop.numeric.cli_support import add_parameter_option, emit, interrupted  # noqa: F401


def cmd_abcd(args) -> int:
    """Innocenti et al. abcd parameterisations: exact solution family, Table 2, or --check of one assignment."""
    from resprop.numeric.theories.abcd.abcd import cli_abcd

    return cli_abcd(args.check, args.json, reading=args.reading, widths=args.width, depth=args.depth,
                    gamma0=args.gamma0)


def add_subcommands(sub) -> None:
    """Add this theory's subcommands to the ``resprop`` parser's sub-parsers."""
    p = sub.add_parser("abcd", help="Innocenti et al. (2025) abcd parameterisations: exact family, Table 2, --check")
    p.add_argument("--check", nargs="+", metavar="KEY=VALUE", default=None,
                   help="exponents a1 b1 a b c d (rationals, e.g. a=1/2), optional alpha and nu (N = L^nu)")
    p.add_argument("--reading", choices=["paper", "literal"], default="paper",
                   help="paper: every layer's own update at order one (eq. 15); literal: total dh/dt = Theta(1); "
                        "default: paper")
    add_parameter_option(p, "width", integer=False, nargs="+", default=None, metavar="N",
                         help="N, one or more: evaluate the PC-specific rates on the eq.-15 family at these widths "
                              "(real numbers: the rates are formulas in N)",
                         default_text="none (the family and Table 2)", deprecated=("--widths",))
    add_parameter_option(p, "depth", default=1, metavar="D",
                         help="for --width: the layers between read-in and readout; the paper's L (weight matrices) "
                              "is depth + 2")
    add_parameter_option(p, declared("abcd", "gamma_0"), flag="--gamma0", default=1.0, metavar="G0", help="for --width")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: readable lines)")
    p.set_defaults(func=cmd_abcd)
