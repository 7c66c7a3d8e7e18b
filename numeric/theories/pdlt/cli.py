"""`resprop` subcommands of the pdlt theory (nu, residual-mlp): declared in its registry entry."""
from __future__ import annotations

from resprop.generated.parameters import declared
from resprop.numeric.cli_support import add_deprecated_alias, add_parameter_option, emit, interrupted  # noqa: F401


def cmd_nu(args) -> int:
    """PDLT nu(gamma), C_W(gamma) and r*(gamma) for an activation class."""
    from resprop.numeric.theories.pdlt import residual_mlp as rm
    out = {"gamma": args.gamma, "activation": args.activation,
           "nu": float(rm.nu(args.gamma, args.activation)),
           "C_W": float(rm.critical_C_W(args.gamma, args.activation)),
           "r_star": float(rm.r_star(args.gamma, args.activation, args.n_out))}
    emit(out, args.json)
    return 0


def cmd_residual_mlp(args) -> int:
    """R(d) = n Var[||z^d||^2/n]/E[...]^2 of a residual MLP at n -> oo: the corrected theory and PDLT's B.26; with
    --width N also the leading finite-width predictions Var[||z^d||^2/n] ~ R K_d^2/N (``var_*``) and the
    normalised Var/E^2 ~ R/N (``rel_var_*``), K_d = E[||z^d||^2/n] at infinite width; with --samples S as well
    the simulated R_n = n Var/E^2 of S networks of that width (``simulated``, ``simulated_se``, seed --seed)."""
    import math

    from resprop.numeric.engine import validation as V
    from resprop.numeric.theories.pdlt import corrected as C
    # the corrected theory is written in gamma^2; the deprecated --gamma2 G2 gave it directly and still does (its
    # value exactly as before), --gamma G gives gamma^2 = G^2
    if args.gamma2 is not None and args.gamma is not None:
        raise V.ParameterError("--gamma, --gamma2", "give --gamma (gamma) only; --gamma2 (gamma^2) is its deprecated "
                                                    "form")
    gamma2 = args.gamma2 if args.gamma2 is not None else args.gamma ** 2
    corrected = C.corrected_ratio(args.activation, gamma2, args.depth)
    b26 = C.b26_ratio(args.activation, gamma2, args.depth)
    out = {"activation": args.activation, "gamma": args.gamma if args.gamma is not None else math.sqrt(gamma2),
           "gamma2": gamma2, "depth": args.depth,
           "C_W": C.critical_C_W(args.activation, gamma2), "corrected": corrected, "b26": b26}
    if args.width is not None:
        width = V.integer("width", args.width, minimum=1)
        K_d = C.output_kernel(args.activation, gamma2, args.depth)
        out.update(width=width, K_d=K_d, rel_var_corrected=corrected / width, rel_var_b26=b26 / width,
                   var_corrected=corrected * K_d**2 / width, var_b26=b26 * K_d**2 / width)
        if args.samples is not None:
            from resprop.numeric.theories.pdlt import finite_width_mc as F
            R_n, se = F.simulate_norm_ratio(args.activation, gamma2, args.depth, width,
                                            V.integer("samples", args.samples, minimum=3, maximum=10**8),
                                            V.integer("seed", args.seed, minimum=0))
            out.update(simulated=R_n, simulated_se=se, samples=args.samples, seed=args.seed)
    elif args.samples is not None:
        raise V.ParameterError("samples", "needs --width (the simulated width)")
    emit(out, args.json)
    return 0


def add_subcommands(sub) -> None:
    """Add this theory's subcommands to the ``resprop`` parser's sub-parsers."""
    p = sub.add_parser("nu", help="PDLT residual-MLP nu(gamma), critical C_W and r*(gamma)")
    add_parameter_option(p, declared("pdlt", "gamma"), required=True)
    p.add_argument("--activation", required=True, metavar="NAME",
                   help="activation class: relu, tanh, erf, linear or leaky_relu:<slope> (a finite slope)")
    p.add_argument("--n-out", type=int, default=1, metavar="N",
                   help="output width n_L of r* (B.36), an integer >= 1; default: 1")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: one line per quantity)")
    p.set_defaults(func=cmd_nu)

    p = sub.add_parser("residual-mlp", help="PDLT residual MLP: n Var[|z^d|^2/n]/E[.]^2, corrected theory vs B.26")
    p.add_argument("--activation", required=True, metavar="NAME",
                   help="activation: relu, linear, leaky_relu:<slope>, tanh, erf or gelu")
    gamma = add_parameter_option(p, declared("pdlt_corrected", "gamma"), required=True, default=None, metavar="G",
                                 help="the skip coefficient; C_W is the critical C_W(gamma)")
    add_deprecated_alias(p, "--gamma2", gamma, dest="gamma2", type=float,
                         note=" (gamma, not gamma^2: --gamma2 G2 is --gamma sqrt(G2))")
    add_parameter_option(p, "depth", required=True, metavar="D",
                         help="PDLT's layer 1 is layer 0 here; 0 gives the input alone, R = 2 (--samples needs "
                              "d >= 1)")
    add_parameter_option(p, "width", default=None, metavar="N",
                         help="with it, the leading finite-width predictions var_* = R K_d^2/n of Var[|z^d|^2/n] and "
                              "rel_var_* = R/n of Var/E^2, corrected and B.26",
                         default_text="none (the n -> oo ratio R only)")
    add_parameter_option(p, "samples", default=None, metavar="S", domain="[3, 100000000]",
                         help="with --width, their width: prints the measured R_n = n Var/E^2 (simulated, "
                              "simulated_se)", default_text="none (no simulation)")
    add_parameter_option(p, "seed", default=0, metavar="SEED", help="here those of --samples")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: one line per quantity)")
    p.set_defaults(func=cmd_residual_mlp, gamma2=None)
