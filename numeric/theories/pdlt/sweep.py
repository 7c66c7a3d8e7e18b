"""`resprop sweep` kind of the PDLT theory: residual_mlp (kernel and four-point vertex against Monte Carlo)."""
from __future__ import annotations

from typing import Any

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.sweep.kinds import (
    MAX_LAYERS,
    Kind,
    Output,
    Param,
    _float_check,
    _int_check,
    _is_real,
    _memory_check,
    _string_check,
)


# --------------------------------------------------------------------------- kind: residual_mlp
def _residual_activation_class(v: str):
    from resprop.numeric.theories.pdlt.residual_mlp import activation_class
    return activation_class(v)


_residual_activation_check = _string_check(_residual_activation_class,
                                           "one of relu, linear, leaky_relu:<slope>, tanh, erf")


def _residual_gamma_check(name, v):
    if not _is_real(v) or not 0 <= float(v) < 1:
        raise ParameterError(name, f"must be a real number in [0, 1) (criticality needs gamma^2 < 1), got {v!r}")
    return float(v)


_residual_gamma_check.kind = "float"  # type: ignore[attr-defined]


def _residual_mlp_point(p: dict, flat_index: int, root_seed: int) -> dict[str, Any]:
    """Last layer (``depth`` residual layers after the input; PDLT's layer L = depth + 1) of the residual MLP
    (PDLT eq. B.3) at the critical C_W(gamma) unless C_W is given: Monte Carlo kernel K, normalised four-point vertex
    V/(nK^2) (B.22-B.23) and Var ln(||z||^2/n), next to the iterated recursions B.12 and B.26 (with the width's 1/n)
    and the asymptotic nu(gamma) L/n (B.35) with PDLT's L = depth + 1."""
    from resprop.numeric.engine import mc_estimators as est
    from resprop.numeric.engine import monte_carlo as mc
    from resprop.numeric.theories.pdlt import residual_mlp as rm
    C_W = p.get("C_W")
    C_W = float(rm.critical_C_W(p["gamma"], p["activation"])) if C_W is None else C_W
    ss = np.random.SeedSequence(root_seed, spawn_key=(flat_index,))
    s = mc.simulate_residual_mlp(width=p["width"], depth=p["depth"], gamma=p["gamma"], C_W=C_W, C_b=p["C_b"],
                                 activation=p["activation"], input_kernel=p["input_kernel"], samples=p["samples"],
                                 seed=ss)
    v, ln = est.four_point_vertex(s), est.log_norm_moments(s)
    th = rm.vertex_trajectory(p["activation"], gamma=p["gamma"], depth=p["depth"], input_kernel=p["input_kernel"],
                              C_W=C_W,
                              C_b=p["C_b"])
    last = lambda a: float(np.asarray(a)[-1])  # noqa: E731
    return {"K": last(v["K"]), "K_se": last(v["K_se"]), "V_over_nK2": last(v["V_over_nK2"]),
            "V_over_nK2_se": last(v["V_over_nK2_se"]), "var_log_norm": last(ln["var"]),
            "var_log_norm_se": last(ln["var_se"]), "theory_K": last(th.K),
            "theory_V_over_nK2": last(th.V_over_K2) / p["width"],
            "theory_nu_L_over_n": float(rm.nu(p["gamma"], p["activation"])) * (p["depth"] + 1) / p["width"],
            "C_W": C_W}


RESIDUAL_MLP = Kind(
    params={
        "width": Param(_int_check(2), description="hidden width n"),
        "depth": Param(_int_check(0, MAX_LAYERS - 1),
                       description="number of residual layers after the input (the input is layer 0; PDLT's "
                                   "L = depth + 1)"),
        "gamma": Param(_residual_gamma_check, description="residual (identity) coefficient gamma in [0, 1)"),
        "activation": Param(
            _residual_activation_check,
            required=False,
            default="relu",
            description="activation class: relu, linear, leaky_relu:<slope>, tanh or erf",
        ),
        "samples": Param(_int_check(2), description="independent network initialisations per grid point"),
        "input_kernel": Param(
            _float_check(V.positive, "(0, inf)"), required=False, default=1.0,
            description="input kernel (layer 0; PDLT's K^(1))",
        ),
        "C_b": Param(
            _float_check(V.nonnegative, "[0, inf)"), required=False, default=0.0, description="bias variance C_b"
        ),
        "C_W": Param(
            _float_check(V.positive, "(0, inf)"),
            required=False,
            description="weight variance C_W (default: the critical C_W(gamma) of B.20-B.21)",
        ),
    },
    outputs={
        "K": Output(
            "1", "Monte Carlo kernel E[||z||^2/n] at the last layer (depth)", "Roberts, Yaida & Hanin App. B (B.12)"
        ),
        "K_se": Output("1", "standard error of K", "-"),
        "V_over_nK2": Output(
            "1",
            "Monte Carlo normalised four-point vertex V/(n K^2) at the last layer",
            "Roberts, Yaida & Hanin App. B (B.22)-(B.23)",
        ),
        "V_over_nK2_se": Output("1", "jackknife standard error of V_over_nK2", "-"),
        "var_log_norm": Output("1", "Monte Carlo Var ln(||z||^2/n) at the last layer", "-"),
        "var_log_norm_se": Output("1", "jackknife standard error of var_log_norm", "-"),
        "theory_K": Output("1", "kernel recursion at the last layer (depth)", "Roberts, Yaida & Hanin (B.12)"),
        "theory_V_over_nK2": Output(
            "1", "four-point vertex recursion V/(n K^2) at the last layer, from V = 0 at the input",
            "Roberts, Yaida & Hanin (B.26)"
        ),
        "theory_nu_L_over_n": Output("1", "asymptotic nu(gamma) L/n, PDLT's L = depth + 1",
                                     "Roberts, Yaida & Hanin (B.29), (B.35)"),
        "C_W": Output("1", "weight variance used (critical unless given)", "Roberts, Yaida & Hanin (B.20)-(B.21)"),
    },
    compute=_residual_mlp_point,
    cross_check=lambda p, where: _memory_check(p, where, {"samples, depth": 3 * p["samples"] * (p["depth"] + 1)}, 6),
)


#: the sweep kinds this theory declares (registry entry ``sweep_kinds``)
KINDS = {"residual_mlp": RESIDUAL_MLP}
