"""`resprop` subcommands of the lognormal theory (j2bar ...): declared in its registry entry."""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from resprop.generated.parameters import declared
from resprop.numeric.cli_support import add_parameter_option, emit, interrupted  # noqa: F401


def cmd_j2bar(args) -> int:
    """J2-bar(theta) at --digits digits: derived closed form and 2-D quadrature of eq. (23), as decimal strings."""
    import mpmath as mp

    from resprop.numeric.engine.validation import ParameterError
    from resprop.numeric.theories.lognormal.mp_checks import j2bar_closed_mp, j2bar_quadrature_mp

    digits = args.digits
    if not 1 <= digits <= 100:
        raise ParameterError("digits", f"must be an integer in [1, 100], got {digits}")
    out: dict[str, list[str]] = {"theta": [], "closed_form": [], "quadrature": []}
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
    from resprop.numeric.engine import monte_carlo as mc
    from resprop.numeric.engine import validation as V
    from resprop.numeric.theories.lognormal import log_gaussian as lg
    lg.check_architecture(args.width, args.depth, args.alpha, args.lam)
    V.integer("hypo_samples", args.hypo_samples, 2)
    if args.hypo_constant is not None:  # refused when not finite, also where --balanced leaves it unused
        V.real("hypo_constant", args.hypo_constant)
    sim = None
    hypo = args.hypo_constant
    hypo_source = "given" if hypo is not None else None
    def alive(s):  # with alpha = 0 a network dies (z = 0, G = -inf) when all n ReLUs of a layer are off
        dead = int(np.count_nonzero(~np.isfinite(s.G)))
        if dead:
            raise V.ParameterError("alpha, width", f"{dead} of {s.samples} simulated networks died (alpha = 0 and "
                                                   f"all width = {s.width} ReLUs of a layer off, probability "
                                                   "2^-width per layer), so E[G] = -inf; use alpha != 0 or a "
                                                   "larger width")
        return s

    if args.simulate:
        sim = alive(mc.simulate_log_gaussian(width=args.width, depth=args.depth, alpha=args.alpha, lam=args.lam,
                                             balanced=args.balanced, samples=args.samples, seed=args.seed))
    if not args.balanced and hypo is None:
        est = sim if sim is not None else alive(mc.simulate_log_gaussian(
            width=args.width, depth=args.depth, alpha=args.alpha, lam=args.lam, samples=args.hypo_samples,
            seed=args.seed))
        hyp = mc.hypoactivation(est)
        hypo, hypo_source = float(hyp["C_hat"]), f"Monte Carlo ({est.samples} samples, seed {args.seed})"
        hypo_se = float(hyp["C_hat_se"])
    th = lg.theory(args.width, args.depth, args.alpha, args.lam, balanced=args.balanced, hypo_constant=hypo)
    theory: dict[str, Any] = {"mean_G": th.mean_G, "var_G": th.var_G, "beta": th.beta, "c": th.c,
                              "I_total": th.I_total, "h_total": th.h_total}
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


def add_subcommands(sub) -> None:
    """Add this theory's subcommands to the ``resprop`` parser's sub-parsers."""
    p = sub.add_parser("j2bar", help="Li-Nica-Roy J2-bar(theta): closed form vs 2-D mpmath quadrature")
    p.add_argument("theta", nargs="+", help="angles theta between the two arguments (radians), each in [0, pi]")
    p.add_argument("--digits", type=int, default=30, metavar="N",
                   help="significant digits of the two evaluations, an integer in [1, 100]; default: 30")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: one line per angle)")
    p.set_defaults(func=cmd_j2bar)
    p = sub.add_parser("log-gaussian", help="Li-Nica-Roy E[G], Var[G]: theory and Monte Carlo")
    add_parameter_option(p, "width", domain="[2, inf)", required=True, metavar="N")
    add_parameter_option(p, "depth", domain="[1, inf)", required=True, metavar="D")
    add_parameter_option(p, declared("lognormal", "alpha"), required=True, metavar="ALPHA")
    add_parameter_option(p, declared("lognormal", "lam"), required=True, metavar="LAMBDA")
    p.add_argument("--balanced", action="store_true", help="balanced ResNet (random activation signs, Thm 4)")
    p.add_argument("--simulate", action="store_true", help="add a Monte Carlo estimate with standard errors")
    add_parameter_option(p, "samples", domain="[2, inf)", default=5000, metavar="S", help="with --simulate")
    add_parameter_option(p, "seed", default=0, metavar="SEED",
                         help="here those of --simulate and of the estimate of C_{alpha,lambda}")
    p.add_argument("--hypo-constant", type=float, default=None, metavar="C",
                   help="hypoactivation constant C_{alpha,lambda} of Prop. 2, any finite real number; default: "
                        "estimated by Monte Carlo")
    p.add_argument("--hypo-samples", type=int, default=2000, metavar="S",
                   help="samples for estimating C_{alpha,lambda} when neither --hypo-constant nor --simulate is "
                        "given, an integer >= 2; default: 2000")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: one line per part)")
    p.set_defaults(func=cmd_log_gaussian)
