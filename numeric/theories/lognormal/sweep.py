"""`resprop sweep` kind of the Li-Nica-Roy theory: log_gaussian (Monte Carlo of G against the theory)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.sweep.kinds import (
    MAX_LAYERS,
    Kind,
    Output,
    Param,
    _bool_check,
    _choice_check,
    _float_check,
    _int_check,
    _memory_check,
)

# --------------------------------------------------------------------------- kind: log_gaussian
_MC_KEYS = ("mean_G", "mean_G_se", "var_G", "var_G_se", "C_hat", "C_hat_se")


def _log_gaussian_point(p: dict, flat_index: int, root_seed: int) -> dict[str, Any]:
    from resprop.numeric.engine import monte_carlo as mc
    from resprop.numeric.theories.lognormal import log_gaussian as lg
    ss = np.random.SeedSequence(root_seed, spawn_key=(flat_index,))
    s = mc.simulate_log_gaussian(width=p["width"], depth=p["depth"], alpha=p["alpha"], lam=p["lam"],
                                 balanced=p["balanced"], samples=p["samples"], seed=ss, method=p["method"])
    dead = int(np.count_nonzero(~np.isfinite(s.G)))
    if dead:  # a network died (alpha = 0, all ReLUs off): the estimators are undefined
        est = dict.fromkeys(_MC_KEYS, math.nan)
    else:
        g, h = mc.g_moments(s), mc.hypoactivation(s)
        est = {**{k: g[k] for k in _MC_KEYS[:4]}, "C_hat": h["C_hat"], "C_hat_se": h["C_hat_se"]}
    hypo = p.get("hypo_constant")
    if hypo is None and not p["balanced"] and math.isfinite(est["C_hat"]):
        hypo = est["C_hat"]
    th = lg.theory(p["width"], p["depth"], p["alpha"], p["lam"], balanced=p["balanced"], hypo_constant=hypo)
    nan = lambda v: math.nan if v is None else float(v)  # noqa: E731
    return {**{k: float(v) for k, v in est.items()}, "theory_mean_G": nan(th.mean_G),
            "theory_var_G": nan(th.var_G), "theory_beta": nan(th.beta),
            "theory_I_total": nan(th.I_total), "dead": dead}


def _log_gaussian_cross(p: dict, where: dict[str, str]) -> None:
    if p["alpha"] == 0 and p["lam"] == 0:
        raise ParameterError(where["alpha"], "alpha = lam = 0 makes the network identically zero; "
                                             "need alpha^2 + lam^2 > 0")
    lo, hi = V.GROWTH_RANGE
    norm = math.hypot(p["alpha"], p["lam"])
    s2 = norm * norm  # inf, not OverflowError, beyond float64 (float ** 2 raises)
    if not lo <= s2 <= hi:
        raise ParameterError(f"{where['alpha']}, {where['lam']}", f"alpha^2 + lam^2 must lie in [{lo:g}, {hi:g}] "
                             f"(the formulas square it), got ({norm:g})^2")
    if p["alpha"] != 0 and abs(p["alpha"]) < 1e-150 * math.hypot(p["alpha"], p["lam"]):
        raise ParameterError(where["alpha"], "a nonzero alpha must be >= 1e-150 sqrt(alpha^2 + lam^2) in absolute "
                                             "value (smaller ones underflow float64); use alpha = 0 instead")
    _memory_check(p, where, {"samples": p["samples"], "samples, depth": 2 * p["samples"] * p["depth"]}, 5)


LOG_GAUSSIAN = Kind(
    params={
        "width": Param(_int_check(2), description="hidden width n"),
        "depth": Param(_int_check(1, MAX_LAYERS), description="number of residual layers d"),
        "alpha": Param(_float_check(V.real, "(-inf, inf)"), description="skip coefficient alpha"),
        "lam": Param(_float_check(V.nonnegative, "[0, inf)"), description="residual-branch coefficient lambda"),
        "samples": Param(_int_check(2), description="independent network initialisations per grid point"),
        "balanced": Param(_bool_check, required=False, default=False,
                          description="balanced ResNet (random activation signs, section 2.1)"),
        "method": Param(_choice_check(("reduced", "dense")), required=False, default="reduced",
                        description="exact reduction W phi = ||phi|| g (reduced) or explicit weights (dense)"),
        "hypo_constant": Param(_float_check(V.real, "(-inf, inf)"), required=False,
                               description="C_{alpha,lambda} for the theory mean (default: Monte Carlo C_hat)"),
    },
    outputs={
        "mean_G": Output("1", "Monte Carlo E[G], G = ln(||z^d||^2/n) - sum_l ln(alpha^2 + lam^2)",
                         "Li, Nica & Roy (2021) Thm. 1 eq. (7) / Thm. 4 eq. (9)"),
        "mean_G_se": Output("1", "standard error of mean_G (std(ddof=1)/sqrt(samples))", "-"),
        "var_G": Output("1", "Monte Carlo Var[G] (ddof=1)", "Li, Nica & Roy (2021) Thm. 1 eq. (7) / Thm. 4 eq. (9)"),
        "var_G_se": Output("1", "jackknife standard error of var_G (50 batches)", "-"),
        "C_hat": Output("1", "hypoactivation constant estimate h_total n / d", "Li, Nica & Roy (2021) Prop. 2"),
        "C_hat_se": Output("1", "standard error of C_hat", "-"),
        "theory_mean_G": Output("1", "theory E[G] (vanilla: with hypo_constant, default the point's C_hat)",
                                "Li, Nica & Roy (2021) eq. (7) with Prop. 2 / eq. (9)"),
        "theory_var_G": Output("1", "theory Var[G]", "Li, Nica & Roy (2021) eq. (7) / eq. (9)"),
        "theory_beta": Output("1", "beta of Theorem 1", "Li, Nica & Roy (2021) Thm. 1"),
        "theory_I_total": Output("1", "interlayer covariance total I_total", "Li, Nica & Roy (2021) eq. (8)"),
        "dead": Output("1", "samples whose network died (z = 0; estimators NaN when > 0)", "-", "int64"),
    },
    compute=_log_gaussian_point,
    cross_check=_log_gaussian_cross,
)

#: the sweep kinds this theory declares (registry entry ``sweep_kinds``)
KINDS = {"log_gaussian": LOG_GAUSSIAN}
