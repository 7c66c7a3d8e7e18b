"""The example theory's subcommand: `resprop linear-kernel --input-kernel K0 --depth L --rho R --sigma-w2 S`."""
from resprop.numeric.cli_support import emit


def cmd_linear_kernel(args) -> int:
    from example_theory.driver import mean_kernel

    value = mean_kernel(args.input_kernel, args.depth, args.rho, args.sigma_w2, args.sigma_b2)
    emit({"depth": args.depth, "mean_kernel": value}, args.json)
    return 0


def add_subcommands(sub) -> None:
    p = sub.add_parser("linear-kernel", help="example theory: mean kernel of a deep linear ResNet")
    p.add_argument("--input-kernel", type=float, required=True)
    p.add_argument("--depth", type=int, required=True)
    p.add_argument("--rho", type=float, required=True)
    p.add_argument("--sigma-w2", type=float, required=True)
    p.add_argument("--sigma-b2", type=float, default=0.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_linear_kernel)
