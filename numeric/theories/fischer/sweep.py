"""`resprop sweep` kind of the Fischer theory: rho_star (rho* = argmax chi_out per grid point)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.sweep.kinds import (
    MAX_DEPTH,
    Kind,
    Output,
    Param,
    _float_check,
    _int_check,
    _string_check,
)


def _field_theory_activation(v: str):
    from resprop.numeric.engine.expectations import kernels
    return kernels(v)


_activation_check = _string_check(_field_theory_activation,
                                  "an activation name (erf, relu, tanh, gelu, linear) or a SymPy expression in x")


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
    if p.get("input_kernel_offdiag") is not None:  # then rho_star returned the off-diagonal fields
        assert r.rho_star_offdiag is not None and r.rho_star_offdiag_chi_out is not None
        assert r.rho_star_offdiag_grid_index is not None and r.rho_star_offdiag_interior is not None
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
    base: tuple[str, ...] = ("rho_star", "chi_out_max", "rho_star_grid_index", "rho_star_interior")
    if "input_kernel_offdiag" in params_present:
        base += ("rho_star_offdiag", "chi_out_max_offdiag", "rho_star_offdiag_grid_index",
                 "rho_star_offdiag_interior")
    return base

RHO_STAR = dataclasses.replace(RHO_STAR, output_names=_rho_star_outputs)

#: the sweep kinds this theory declares (registry entry ``sweep_kinds``)
KINDS = {"rho_star": RHO_STAR}
