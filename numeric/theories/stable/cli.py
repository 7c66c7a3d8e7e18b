"""`resprop` subcommands of the stable theory (stable-kernel ...): declared in its registry entry."""
from __future__ import annotations

from resprop.generated.parameters import declared
from resprop.numeric.cli_support import add_parameter_option, emit, interrupted  # noqa: F401


def cmd_stable_kernel(args) -> int:
    """Hayou et al. NNGP/NTK for two unit inputs at --angle, in natural logs so deep unscaled nets stay finite."""
    from resprop.numeric.theories.stable.stable_resnet import two_input_kernels

    res = two_input_kernels(args.depth, args.scaling, angle=args.angle, sigma_w2=args.sigma_w2,
                            sigma_b2=args.sigma_b2, d_in=args.d_in, progress=not args.quiet)
    emit({k: res[k] for k in ("depth", "log_Q_diag", "correlation", "log_ntk_diag")}, args.json)
    return 0


def add_subcommands(sub) -> None:
    """Add this theory's subcommands to the ``resprop`` parser's sub-parsers."""
    p = sub.add_parser("stable-kernel", help="Hayou et al. Stable ResNet NNGP/NTK (log diagonal, correlation)")
    add_parameter_option(p, "depth", domain="[1, inf)", nargs="+", required=True, metavar="L",
                         help="one or more")
    p.add_argument("--scaling", default="uniform", metavar="NAME|EXPR",
                   help="branch scales lambda_(l,L): unscaled, uniform (1/sqrt(L)), decreasing (1/(sqrt(l) log(l+1))) "
                        "or a SymPy expression in l, L; default: uniform")
    p.add_argument("--angle", type=float, default=1.0, metavar="THETA",
                   help="angle between the two unit inputs (radians), in [0, pi]; default: 1")
    add_parameter_option(p, declared("stable", "sigma_w2"), default=2.0, metavar="S")
    add_parameter_option(p, declared("stable", "sigma_b2"), default=0.0, metavar="B")
    p.add_argument("--d-in", type=int, default=2, metavar="D",
                   help="input dimension d in Q_0 = sigma_b^2 + sigma_w^2 x.x'/d, an integer >= 1; default: 2")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: one line per quantity)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    p.set_defaults(func=cmd_stable_kernel)
