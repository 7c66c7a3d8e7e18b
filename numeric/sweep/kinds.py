"""The kinds of grid point that ``resprop sweep`` can compute (see numeric/sweep.py for the engine).

A :class:`Kind` names its parameters (with their checks, defaults, units and descriptions), its outputs (units,
description, paper equation) and the function that computes one grid point from its parameters, its flat grid
index and the root seed.  Monte Carlo kinds draw from ``SeedSequence(root_seed, spawn_key=(flat_index,))``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.validation import ParameterError

#: the largest depth / number of layers each kind accepts (as the functions it calls)
MAX_DEPTH = 10**6    # resprop.numeric.theories.fischer.field_theory.MAX_DEPTH
MAX_LAYERS = 10**7   # resprop.numeric.engine.monte_carlo.MAX_LAYERS

# --------------------------------------------------------------------------- parameter checks
def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _int_check(minimum: int, maximum: int | None = None) -> Callable[[str, Any], int]:
    allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"

    def check(name, v):
        if (not _is_real(v) or not math.isfinite(float(v)) or not float(v).is_integer() or int(v) < minimum
                or (maximum is not None and int(v) > maximum)):
            raise ParameterError(name, f"must be an integer {allowed}, got {v!r}")
        return int(v)
    check.kind = "int"
    return check


def _float_check(validator, allowed: str) -> Callable[[str, Any], float]:
    def check(name, v):
        if not _is_real(v):
            raise ParameterError(name, f"must be a real number in {allowed}, got {v!r}")
        return float(validator(name, float(v)))
    check.kind = "float"
    return check


def _bool_check(name, v):
    if not isinstance(v, (bool, np.bool_)):
        raise ParameterError(name, f"must be true or false, got {v!r}")
    return bool(v)


_bool_check.kind = "bool"


def _choice_check(allowed: tuple[str, ...]):
    def check(name, v):
        if not isinstance(v, str):
            raise ParameterError(name, f"unknown value {v!r}; allowed: {', '.join(allowed)}")
        return V.choice(name, v, allowed)
    check.kind = "str"
    return check


def _string_check(parse: Callable[[str], Any], allowed: str) -> Callable[[str, Any], str]:
    """A check for a string parameter that ``parse`` accepts; its error is re-raised under the spec key."""
    def check(name, v):
        if not isinstance(v, str):
            raise ParameterError(name, f"must be {allowed}, got {v!r}")
        try:
            parse(v)
        except ParameterError as exc:
            raise ParameterError(name, str(exc).split(": ", 1)[-1]) from None
        return v
    check.kind = "str"
    return check


def _field_theory_activation(v: str):
    from resprop.numeric.engine.expectations import kernels
    return kernels(v)


_activation_check = _string_check(_field_theory_activation,
                                  "an activation name (erf, relu, tanh, gelu, linear) or a SymPy expression in x")


@dataclass(frozen=True)
class Param:
    check: Callable[[str, Any], Any]
    required: bool = True
    default: Any = None
    units: str = "1"
    description: str = ""


@dataclass(frozen=True)
class Output:
    units: str
    description: str
    equation: str
    dtype: str = "float64"


@dataclass(frozen=True)
class Kind:
    params: dict[str, Param]
    outputs: dict[str, Output]
    compute: Callable[[dict, int, int], dict[str, Any]]
    cross_check: Callable[[dict, dict[str, str]], None]


# --------------------------------------------------------------------------- kind: rho_star
def _rho_star_point(p: dict, flat_index: int, root_seed: int) -> dict[str, Any]:
    from resprop.numeric.theories.fischer.field_theory import rho_star

    r = rho_star(p["depth"], p["input_kernel"], p["sigma_w2"], p["sigma_b2"],
                 input_kernel_offdiag=p.get("input_kernel_offdiag"),
                 sigma_w2_out=p.get("sigma_w2_out"), sigma_b2_out=p.get("sigma_b2_out"),
                 activation=p["activation"])
    # no interior maximum: rho* is None in Python, NaN here, with rho_star_interior = 0 (chi_out_max is then the
    # supremum at the edge of the searched range)
    star = lambda v: math.nan if v is None else float(v)  # noqa: E731
    out = {"rho_star": star(r.rho_star[0]), "chi_out_max": float(r.rho_star_chi_out[0]),
           "rho_star_grid_index": int(r.rho_star_grid_index[0]),
           "rho_star_interior": int(bool(r.rho_star_interior[0]))}
    if p.get("input_kernel_offdiag") is not None:
        out.update(rho_star_offdiag=star(r.rho_star_offdiag[0]),
                   chi_out_max_offdiag=float(r.rho_star_offdiag_chi_out[0]),
                   rho_star_offdiag_grid_index=int(r.rho_star_offdiag_grid_index[0]),
                   rho_star_offdiag_interior=int(bool(r.rho_star_offdiag_interior[0])))
    return out


def _rho_star_cross(p: dict, where: dict[str, str]) -> None:
    off = p.get("input_kernel_offdiag")
    if off is not None and abs(off) > p["input_kernel"] * (1 + 1e-12):
        raise ParameterError(where["input_kernel_offdiag"], f"must satisfy |input_kernel_offdiag| <= input_kernel "
                                                            f"(PSD 2x2 kernel), got input_kernel_offdiag = {off:g} "
                                                            f"with input_kernel = {p['input_kernel']:g}")


_GRID_NOTE = ("log grid geomspace(1e-3, 3, 241) bracketing the maximum (0 or 240: the maximum is at or within one "
              "grid step of an edge; whether it is interior is rho_star_interior)")

RHO_STAR = Kind(
    params={
        "depth": Param(_int_check(1, MAX_DEPTH), units="1",
                       description="network depth L (number of residual blocks)"),
        "input_kernel": Param(_float_check(V.positive, "(0, inf)"),
                              description="input kernel K^(0) (diagonal element)"),
        "sigma_w2": Param(_float_check(V.positive, "(0, inf)"), description="residual-branch weight variance"),
        "sigma_b2": Param(_float_check(V.nonnegative, "[0, inf)"), description="residual-branch bias variance"),
        "input_kernel_offdiag": Param(_float_check(V.real, "[-input_kernel, input_kernel]"), required=False,
                                      description="off-diagonal input kernel element K^(0)_ab"),
        "sigma_w2_out": Param(_float_check(V.positive, "(0, inf)"), required=False,
                              description="readout weight variance (default sigma_w2)"),
        "sigma_b2_out": Param(_float_check(V.nonnegative, "[0, inf)"), required=False,
                              description="readout bias variance (default sigma_b2)"),
        "activation": Param(_activation_check, required=False, default="erf", description="activation function"),
    },
    outputs={
        "rho_star": Output("1", "rho* = argmax_rho chi_out, diagonal element",
                           "Fischer, Dahmen & Helias (2025) eq. (48), Figs. 4-5"),
        "chi_out_max": Output("1", "chi_out at rho* (diagonal element)", "Fischer et al. (2025) eq. (48)"),
        "rho_star_grid_index": Output("1", "index of the grid maximum; " + _GRID_NOTE, "-", "int64"),
        "rho_star_interior": Output("1", "1 if chi_out has an interior maximum in the searched rho range, 0 if not "
                                         "(then rho_star is NaN and chi_out_max the supremum at the edge)", "-",
                                    "int64"),
        "rho_star_offdiag": Output("1", "rho* = argmax_rho chi_out, off-diagonal element",
                                   "Fischer et al. (2025) eq. (48), C15-C17"),
        "chi_out_max_offdiag": Output("1", "chi_out at rho* (off-diagonal element)", "Fischer et al. (2025) eq. (48)"),
        "rho_star_offdiag_grid_index": Output("1", "index of the grid maximum (off-diagonal); " + _GRID_NOTE,
                                              "-", "int64"),
        "rho_star_offdiag_interior": Output("1", "1 if the off-diagonal chi_out has an interior maximum, 0 if not "
                                                 "(then rho_star_offdiag is NaN)", "-", "int64"),
    },
    compute=_rho_star_point,
    cross_check=_rho_star_cross,
)


def _rho_star_outputs(params_present: set[str]) -> tuple[str, ...]:
    base = ("rho_star", "chi_out_max", "rho_star_grid_index", "rho_star_interior")
    if "input_kernel_offdiag" in params_present:
        base += ("rho_star_offdiag", "chi_out_max_offdiag", "rho_star_offdiag_grid_index",
                 "rho_star_offdiag_interior")
    return base


# --------------------------------------------------------------------------- kind: log_gaussian
_MC_KEYS = ("mean_G", "mean_G_se", "var_G", "var_G_se", "C_hat", "C_hat_se")


def _log_gaussian_point(p: dict, flat_index: int, root_seed: int) -> dict[str, Any]:
    from resprop.numeric.theories.lognormal import log_gaussian as lg
    from resprop.numeric.engine import monte_carlo as mc
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


def _memory_check(p: dict, where: dict[str, str], outputs: dict[str, int], work_arrays: int) -> None:
    """resprop.numeric.engine.monte_carlo's memory bound for this point, with the error under the spec key."""
    from resprop.numeric.engine import monte_carlo as mc
    method = p.get("method", "reduced")
    size = min(p["samples"], mc._auto_chunk(p["width"], method))
    try:
        mc._check_memory(outputs, size, p["width"], method, work_arrays)
    except ParameterError as exc:
        key = exc.parameter.split(",")[0].strip()
        raise ParameterError(where.get(key, key), str(exc).split(": ", 1)[-1]) from None


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


_residual_gamma_check.kind = "float"


def _residual_mlp_point(p: dict, flat_index: int, root_seed: int) -> dict[str, Any]:
    """Last layer L of the residual MLP (PDLT eq. B.3) at the critical C_W(gamma) unless C_W is given: Monte Carlo
    kernel K, normalised four-point vertex V/(nK^2) (B.22-B.23) and Var ln(||z||^2/n), next to the iterated
    recursions B.12 and B.26 (with the width's 1/n) and the asymptotic nu(gamma) L/n (B.35)."""
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
            "theory_nu_L_over_n": float(rm.nu(p["gamma"], p["activation"])) * p["depth"] / p["width"], "C_W": C_W}


RESIDUAL_MLP = Kind(
    params={
        "width": Param(_int_check(2), description="hidden width n"),
        "depth": Param(_int_check(1, MAX_LAYERS), description="number of layers L (z^(1) ~ N(0, K^(1)) is layer 1)"),
        "gamma": Param(_residual_gamma_check, description="residual (identity) coefficient gamma in [0, 1)"),
        "activation": Param(_residual_activation_check, required=False, default="relu",
                            description="activation class: relu, linear, leaky_relu:<slope>, tanh or erf"),
        "samples": Param(_int_check(2), description="independent network initialisations per grid point"),
        "input_kernel": Param(_float_check(V.positive, "(0, inf)"), required=False, default=1.0,
                              description="first-layer kernel K^(1)"),
        "C_b": Param(_float_check(V.nonnegative, "[0, inf)"), required=False, default=0.0,
                     description="bias variance C_b"),
        "C_W": Param(_float_check(V.positive, "(0, inf)"), required=False,
                     description="weight variance C_W (default: the critical C_W(gamma) of B.20-B.21)"),
    },
    outputs={
        "K": Output("1", "Monte Carlo kernel E[||z^(L)||^2/n] at the last layer", "Roberts, Yaida & Hanin App. B (B.12)"),
        "K_se": Output("1", "standard error of K", "-"),
        "V_over_nK2": Output("1", "Monte Carlo normalised four-point vertex V/(n K^2) at the last layer",
                             "Roberts, Yaida & Hanin App. B (B.22)-(B.23)"),
        "V_over_nK2_se": Output("1", "jackknife standard error of V_over_nK2", "-"),
        "var_log_norm": Output("1", "Monte Carlo Var ln(||z^(L)||^2/n)", "-"),
        "var_log_norm_se": Output("1", "jackknife standard error of var_log_norm", "-"),
        "theory_K": Output("1", "kernel recursion at layer L", "Roberts, Yaida & Hanin (B.12)"),
        "theory_V_over_nK2": Output("1", "four-point vertex recursion V^(L)/(n K^(L)^2) from V^(1) = 0",
                                    "Roberts, Yaida & Hanin (B.26)"),
        "theory_nu_L_over_n": Output("1", "asymptotic nu(gamma) L/n", "Roberts, Yaida & Hanin (B.29), (B.35)"),
        "C_W": Output("1", "weight variance used (critical unless given)", "Roberts, Yaida & Hanin (B.20)-(B.21)"),
    },
    compute=_residual_mlp_point,
    cross_check=lambda p, where: _memory_check(p, where, {"samples, depth": 3 * p["samples"] * p["depth"]}, 6),
)

KINDS: dict[str, Kind] = {"rho_star": RHO_STAR, "log_gaussian": LOG_GAUSSIAN, "residual_mlp": RESIDUAL_MLP}


def _output_names(kind: str, present: set[str]) -> tuple[str, ...]:
    if kind == "rho_star":
        return _rho_star_outputs(present)
    return tuple(KINDS[kind].outputs)
