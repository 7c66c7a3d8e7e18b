"""Width extrapolation of a Monte Carlo series X_n -> X_inf by weighted least squares in 1/n.

The one rule of resprop's fixed-depth, growing-width campaigns (moved here from
``resprop.numeric.theories.pdlt.finite_width_mc``, which re-exports :func:`fit_ratio` and :data:`CHI2_P_MIN`):

* fit X_n = X_inf + a/n by WLS over the widths (weights 1/se_n^2; the widths carry independent samples);
* when that fit is bad, a chi^2 p-value below :data:`CHI2_P_MIN` = 0.01, and there are at least 4 widths, use
  X_inf + a/n + b/n^2 instead;
* X_inf's standard error is the WLS one, scaled by sqrt(chi^2/dof) when that exceeds 1.

:func:`extrapolate` returns that fit as a record and adds the extrapolation systematic of
docs/design/fluctuations-engine.md section 7.1: |X_inf(a/n) - X_inf(a/n + b/n^2)| when *both* models are acceptable
(p-value >= CHI2_P_MIN, each with at least one degree of freedom), and None when it cannot be estimated that way
(the a/n model is rejected, or fewer than 4 widths).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord

__all__ = ["CHI2_P_MIN", "wls", "fit_ratio", "extrapolate", "WidthExtrapolation"]

#: chi^2 p-value below which the a/n model is rejected in favour of a/n + b/n^2
CHI2_P_MIN = 0.01

LINEAR = "a/n"
QUADRATIC = "a/n + b/n^2"


def wls(widths, R, se, order: int):
    """WLS fit of R_n = sum_{k <= order} c_k / n^k with weights 1/se^2: (coefficients, their covariance, chi^2,
    degrees of freedom)."""
    x = 1.0 / np.asarray(widths, dtype=float)
    X = np.stack([x**k for k in range(order + 1)], axis=1)
    w = 1.0 / np.asarray(se) ** 2
    cov = np.linalg.inv(X.T @ (X * w[:, None]))
    beta = cov @ (X.T @ (w * np.asarray(R)))
    chi2 = float(np.sum(w * (np.asarray(R) - X @ beta) ** 2))
    return beta, cov, chi2, len(x) - order - 1


def fit_ratio(widths, R, se) -> tuple:
    """WLS R_n = R_inf + a/n, or + b/n^2 when the first fit's chi^2 p-value is below CHI2_P_MIN (needs >= 4
    widths).  Returns (R_inf, se, model, coefficients, chi2, dof, p, chi2 of the a/n fit)."""
    beta, cov, chi2, dof = wls(widths, R, se, 1)
    chi2_1 = chi2
    model = LINEAR
    if dof > 0 and stats.chi2.sf(chi2, dof) < CHI2_P_MIN and len(widths) >= 4:
        beta, cov, chi2, dof = wls(widths, R, se, 2)
        model = QUADRATIC
    p = float(stats.chi2.sf(chi2, dof)) if dof > 0 else float("nan")
    scale = max(1.0, chi2 / dof) if dof > 0 else 1.0
    return (float(beta[0]), float(math.sqrt(cov[0, 0] * scale)), model, tuple(float(b) for b in beta[1:]),
            chi2, dof, p, chi2_1)


@dataclass(frozen=True)
class WidthExtrapolation(ResultRecord):
    """:func:`extrapolate`: the chosen fit (``value`` +- ``se``, ``model``, its 1/n coefficients, chi^2, dof and
    p-value), both models' intercepts (``value_quadratic`` etc. None when there are fewer than 4 widths) and the
    extrapolation ``systematic`` (None when it cannot be estimated: see the module docstring)."""

    value: float
    se: float
    model: str
    coefficients: tuple
    chi2: float
    dof: int
    p_value: float
    value_linear: float
    se_linear: float
    p_value_linear: float
    value_quadratic: float | None
    se_quadratic: float | None
    p_value_quadratic: float | None
    systematic: float | None
    widths: tuple
    values: tuple
    se_n: tuple


def _fit(widths, values, se, order: int) -> tuple[float, float, float]:
    """(intercept, its scaled standard error, p-value) of one model."""
    beta, cov, chi2, dof = wls(widths, values, se, order)
    p = float(stats.chi2.sf(chi2, dof)) if dof > 0 else float("nan")
    scale = max(1.0, chi2 / dof) if dof > 0 else 1.0
    return float(beta[0]), float(math.sqrt(cov[0, 0] * scale)), p


def extrapolate(widths, values, se) -> WidthExtrapolation:
    """X_inf = lim_n X_n from (widths, X_n, se_n) by the rule of the module docstring (:func:`fit_ratio`), with
    the a/n + b/n^2 intercept alongside and the extrapolation systematic.

    ``widths``: at least 3 distinct positive integers; ``values``, ``se``: finite, ``se`` > 0, one per width.
    """
    w = V.real("widths", widths)
    if w.ndim != 1 or w.size < 3 or np.any(w <= 0) or np.unique(w).size != w.size:
        raise V.ParameterError("widths", f"must be at least 3 distinct positive widths, got {widths!r}")
    x = V.real("values", values)
    s = V.positive("se", se)
    if x.shape != w.shape or s.shape != w.shape:
        raise V.ParameterError("values, se", f"need one value and one standard error per width ({w.size}), got "
                                             f"shapes {x.shape} and {s.shape}")
    value, err, model, coef, chi2, dof, p, _ = fit_ratio(w, x, s)
    lin_value, lin_se, lin_p = _fit(w, x, s, 1)
    quad = _fit(w, x, s, 2) if w.size >= 4 else None
    systematic = None
    if quad is not None and lin_p >= CHI2_P_MIN and quad[2] >= CHI2_P_MIN:
        systematic = abs(lin_value - quad[0])
    return WidthExtrapolation(
        value=value, se=err, model=model, coefficients=coef, chi2=chi2, dof=dof, p_value=p,
        value_linear=lin_value, se_linear=lin_se, p_value_linear=lin_p,
        value_quadratic=None if quad is None else quad[0], se_quadratic=None if quad is None else quad[1],
        p_value_quadratic=None if quad is None else quad[2], systematic=systematic,
        widths=tuple(int(n) if float(n).is_integer() else float(n) for n in w), values=tuple(map(float, x)),
        se_n=tuple(map(float, s)))
