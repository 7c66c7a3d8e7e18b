"""Numeric driver: fixed points, slopes, depth scales and the order-to-chaos line for any activation.

The formulas are the generated kernels (``resprop_schoenholz.generated.schoenholz``, written by
``resprop derive schoenholz`` from ``derivation.py``).  For the activations of ``derivation.ACTIVATIONS`` (erf,
tanh, relu, gelu) they are complete: ``length_map_tanh(q, sigma_w2, sigma_b2)``, ``chi_c_erf(q_star, c,
sigma_w2)``, ... hold the Gaussian expectations themselves, resolved by the derivation to resprop's closed forms
(erf, ReLU, GELU) or to a call of the engine's quadrature (tanh).  Any other activation (``linear`` or a SymPy
expression in ``x``) goes through the activation-generic kernels, whose expectation inputs come from resprop's
expectation engine (:func:`resprop.numeric.engine.expectations.kernels`: closed forms where resprop has them,
generated Gauss--Legendre rules otherwise).  :func:`maps` hides the difference.  The fixed points are found by
bracketing and Brent's method (scipy.optimize.brentq).

Network (the paper's Sec. 2): z^(1) = W^(0) x + b^(0) with q^(0) = |x|^2 / N_0, then z^(l+1) = W^(l) phi(z^(l)) +
b^(l), W_ij ~ N(0, sigma_w^2 / N), b_i ~ N(0, sigma_b^2).  So q^(1) = sigma_w^2 q^(0) + sigma_b^2 and the length map
acts from layer 1 on.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.optimize import brentq

from resprop.numeric.engine import expectations
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError

__all__ = ["DepthScales", "CriticalPoint", "Trajectory", "Maps", "NAMED", "generated", "declared",
           "activation_kernels", "maps", "length_fixed_point", "correlation_fixed_point", "depth_scales",
           "critical_point", "trajectory"]

#: the variances on which the length map's fixed point is bracketed (10 points a decade)
Q_GRID = np.geomspace(1e-8, 1e8, 161)
#: the variance that stands for q = 0 (erf's closed forms need K > 0)
TINY = 1e-300
#: chi_1 within this of 1 counts as critical (c* = 1 and xi_c infinite)
CRITICAL_TOL = 1e-12
#: the activations with generated kernels of their own (derivation.ACTIVATIONS; not imported from there: the
#: derivation needs SymPy and a second to run)
NAMED = ("erf", "tanh", "relu", "gelu")


def generated():
    """The kernels `resprop derive schoenholz` wrote into this package (generated/schoenholz.py)."""
    return importlib.import_module("resprop_schoenholz.generated.schoenholz")


def declared(name: str):
    """The run-time declaration of the derivation's parameter ``name`` (generated/parameters.py)."""
    return importlib.import_module("resprop_schoenholz.generated.parameters").PARAMETERS["schoenholz"][name]


def activation_kernels(activation="tanh") -> expectations.ActivationKernels:
    """resprop's Gaussian expectations of ``activation`` (a name or a SymPy expression in x; a ParameterError
    naming ``activation`` when it is not a usable activation, e.g. a discontinuous one)."""
    return expectations.kernels(activation)


@dataclass(frozen=True)
class Maps:
    """The maps, slopes and critical line of one activation as functions of the variances (floats in, floats out):
    ``length(q, sw, sb)``, ``covariance(q_aa, q_bb, q_ab, sw, sb)``, ``correlation(q_star, c, sw, sb)``,
    ``chi_1(q_star, sw)``, ``chi_q(q_star, sw)``, ``chi_c(q_star, c, sw)``, ``critical_sigma_w2(q_star)`` and
    ``critical_sigma_b2(q_star)``.  ``generated``: the activation's own generated kernels (else the generic ones
    on the engine's expectations); ``closed_form``: no quadrature behind them."""

    activation: str
    length: Callable[..., float]
    covariance: Callable[..., float]
    correlation: Callable[..., float]
    chi_1: Callable[..., float]
    chi_q: Callable[..., float]
    chi_c: Callable[..., float]
    critical_sigma_w2: Callable[[float], float]
    critical_sigma_b2: Callable[[float], float]
    generated: bool
    closed_form: bool


def _own_kernel(gen, result: str, activation: str) -> Callable[..., float]:
    """The generated kernel ``<result>_<activation>`` called with keywords: it takes the inputs its expression
    holds (``chi_q_relu`` = sigma_w^2/2 has no q_star, ``critical_sigma_w2_relu`` = 2 none), in the order its
    RESULTS entry lists them."""
    name = f"{result}_{activation}"
    fn, inputs = getattr(gen, name), tuple(gen.RESULTS[name]["inputs"])

    def call(**values) -> float:
        return _scalar(fn(*(values[k] for k in inputs)))
    return call


def _quadrature(gen, activation: str) -> bool:
    """Whether a generated kernel of ``activation`` calls the engine's quadrature (resprop.generated.gauss_hermite)."""
    return any("gauss_hermite" in getattr(gen, name).unchecked.__code__.co_names
               for name in gen.RESULTS if name.endswith(f"_{activation}"))


@cache
def maps(activation="tanh") -> Maps:
    """:class:`Maps` of ``activation``: the generated kernels of a name in :data:`NAMED`, else the generic kernels
    on resprop's expectation engine (a ParameterError naming ``activation`` when it is not usable)."""
    gen = generated()
    if isinstance(activation, str) and activation in NAMED:
        k = {r: _own_kernel(gen, r, activation) for r in ("length_map", "covariance_map", "correlation_map",
                                                          "chi_1", "chi_q", "chi_c", "critical_sigma_w2",
                                                          "critical_sigma_b2")}
        return Maps(
            activation,
            length=lambda q, sw, sb: k["length_map"](q=q, sigma_w2=sw, sigma_b2=sb),
            covariance=lambda qa, qb, qab, sw, sb: k["covariance_map"](q_aa=qa, q_bb=qb, q_ab=qab, sigma_w2=sw,
                                                                       sigma_b2=sb),
            correlation=lambda q, c, sw, sb: k["correlation_map"](q_star=q, c=c, sigma_w2=sw, sigma_b2=sb),
            chi_1=lambda q, sw: k["chi_1"](q_star=q, sigma_w2=sw),
            chi_q=lambda q, sw: k["chi_q"](q_star=q, sigma_w2=sw),
            chi_c=lambda q, c, sw: k["chi_c"](q_star=q, c=c, sigma_w2=sw),
            critical_sigma_w2=lambda q: k["critical_sigma_w2"](q_star=q),
            critical_sigma_b2=lambda q: k["critical_sigma_b2"](q_star=q),
            generated=True, closed_form=not _quadrature(gen, activation))
    kern = activation_kernels(activation)

    def dphi_sq(q):
        return _scalar(kern.mean_dphi_dphi(q, q, q))

    def chi_q(q, sw):
        d = dphi_sq(q)
        return _scalar(gen.chi_q(sw, d, _scalar(kern.price_diag(q)) - d))  # <phi'^2 + phi phi''> - <phi'^2>

    return Maps(
        str(activation),
        length=lambda q, sw, sb: _scalar(gen.length_map(sw, sb, kern.mean_phi_sq(q))),
        covariance=lambda qa, qb, qab, sw, sb: _scalar(gen.covariance_map(sw, sb, kern.mean_phi_phi(qa, qb, qab))),
        correlation=lambda q, c, sw, sb: _scalar(gen.correlation_map(sw, sb, kern.mean_phi_phi(q, q, c * q), q)),
        chi_1=lambda q, sw: _scalar(gen.chi_1(sw, dphi_sq(q))),
        chi_q=chi_q,
        chi_c=lambda q, c, sw: _scalar(gen.chi_c(sw, kern.mean_dphi_dphi(q, q, c * q))),
        critical_sigma_w2=lambda q: _scalar(gen.critical_sigma_w2(dphi_sq(q))),
        critical_sigma_b2=lambda q: _scalar(gen.critical_sigma_b2(q, kern.mean_phi_sq(q), dphi_sq(q))),
        generated=False, closed_form=bool(kern.closed_form))


def _variances(sigma_w2, sigma_b2) -> tuple[float, float]:
    return float(declared("sigma_w2").validate(sigma_w2)), float(declared("sigma_b2").validate(sigma_b2))


def _scalar(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def length_fixed_point(activation, sigma_w2, sigma_b2) -> float:
    """q* = sigma_w^2 <phi(z)^2>_{q*} + sigma_b^2: the smallest variance where the length map crosses the
    diagonal from above (the fixed point reached from small q, stable from below), by a scan of ``Q_GRID`` and
    Brent's method.  A ParameterError names sigma_w2 when the lengths grow without bound (no fixed point below
    1e8, e.g. ReLU with sigma_w^2 >= 2), sigma_b2 when they collapse to q* = 0 (sigma_b^2 = 0 in the ordered phase
    of an odd activation: the correlation is undefined there)."""
    sw, sb = _variances(sigma_w2, sigma_b2)
    m = maps(activation)

    def gap(q: float) -> float:  # at q = 0 the variance TINY (the kernels take q > 0)
        return m.length(q if q > 0 else TINY, sw, sb) - q

    previous = 0.0
    for q in Q_GRID:
        try:
            g = gap(float(q))
        except ParameterError as exc:  # an oscillating activation's expectations beyond their trusted variances
            raise ParameterError("activation", f"no fixed point q* of the length map within the variances where "
                                               f"{activation}'s expectations are accurate ({exc})") from None
        if g < 0:
            if sb == 0.0 and previous == 0.0:  # the map falls below the diagonal at once: q* = 0
                raise ParameterError("sigma_b2", f"with sigma_b2 = 0 the lengths collapse to q* = 0 (sigma_w2 = "
                                                 f"{sw:g} is in the ordered phase of {activation}), where the "
                                                 "correlation is undefined; take sigma_b2 > 0")
            return float(brentq(gap, previous, float(q), xtol=5e-324, rtol=4 * np.finfo(float).eps, maxiter=400))
        previous = float(q)
    raise ParameterError("sigma_w2", f"the length map of {activation} with sigma_w2 = {sw:g}, sigma_b2 = {sb:g} has "
                                     f"no fixed point below q = {Q_GRID[-1]:g}: the lengths grow without bound "
                                     "(for ReLU sigma_w2 must be below 2)")


def _correlation_gap(m: Maps, sw, sb, q):
    """h(c) = (M(c) - c) / (1 - c), M the correlation map at the fixed point q of the lengths."""
    def h(c: float) -> float:
        return (m.correlation(q, c, sw, sb) - c) / (1.0 - c)
    return h


def correlation_fixed_point(activation, sigma_w2, sigma_b2, q_star=None) -> float:
    """The stable fixed point c* of the correlation map at q*: 1 in the ordered phase (chi_1 <= 1); in the chaotic
    phase the root in [0, 1) of (M(c) - c) / (1 - c), which is >= 0 at c = 0 (M(0) = (sigma_w^2 <phi>^2 +
    sigma_b^2) / q* >= 0) and tends to 1 - chi_1 < 0 as c -> 1 (Brent's method)."""
    sw, sb = _variances(sigma_w2, sigma_b2)
    m = maps(activation)
    q = length_fixed_point(activation, sw, sb) if q_star is None else float(q_star)
    if m.chi_1(q, sw) <= 1.0 + CRITICAL_TOL:
        return 1.0
    h = _correlation_gap(m, sw, sb, q)
    hi = next((1.0 - 10.0**-k for k in range(1, 13) if h(1.0 - 10.0**-k) < 0), None)
    if hi is None:  # chi_1 so close to 1 that no c below 1 - 1e-12 resolves the gap
        return 1.0
    if h(0.0) <= 0.0:  # M(0) >= 0 exactly; zero (an odd phi without bias) or -1e-17 of round-off: c* = 0
        return 0.0
    return float(brentq(h, 0.0, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=200))


@dataclass(frozen=True)
class DepthScales(ResultRecord):
    """The fixed points, slopes and depth scales at one (activation, sigma_w^2, sigma_b^2).

    ``chi_q``: slope of the length map at q* (xi_q = -1/log|chi_q|); ``chi_1``: slope of the correlation map at
    c = 1 (order below 1, chaos above); ``chi_c``: its slope at c*; ``xi_c``: None at the critical line (infinite);
    ``closed_form``: the expectations came from closed forms (else from resprop's quadrature); ``generated``: from
    the activation's own generated kernels (else the generic kernels on resprop's expectation engine)."""

    activation: str
    sigma_w2: float
    sigma_b2: float
    q_star: float
    chi_q: float
    xi_q: float | None
    chi_1: float
    phase: str
    c_star: float
    chi_c: float
    xi_c: float | None
    closed_form: bool
    generated: bool


def _xi(kernel, chi: float) -> float | None:
    """-1/log|chi| for |chi| < 1 (0 at chi = 0; an oscillating approach, chi < 0, decays with |chi|), else None."""
    rate = abs(chi)
    if rate == 0.0:  # -1/log 0: the deviation is gone after one layer
        return 0.0
    return float(kernel(rate)) if rate < 1.0 else None


def depth_scales(activation="tanh", sigma_w2=1.5, sigma_b2=0.05) -> DepthScales:
    """q*, chi_q, xi_q, chi_1, the phase, c*, chi_c and xi_c (see :class:`DepthScales`)."""
    sw, sb = _variances(sigma_w2, sigma_b2)
    m, gen = maps(activation), generated()
    q = length_fixed_point(activation, sw, sb)
    chi_q = m.chi_q(q, sw)
    chi1 = m.chi_1(q, sw)
    phase = "critical" if abs(chi1 - 1.0) <= CRITICAL_TOL else ("ordered" if chi1 < 1.0 else "chaotic")
    c = correlation_fixed_point(activation, sw, sb, q)
    chi_c = chi1 if c == 1.0 else m.chi_c(q, c, sw)
    xi_c = None if phase == "critical" else _xi(gen.xi_c, chi_c)
    return DepthScales(str(activation), sw, sb, q, chi_q, _xi(gen.xi_q, chi_q), chi1, phase, c, chi_c, xi_c,
                       m.closed_form, m.generated)


@dataclass(frozen=True)
class CriticalPoint(ResultRecord):
    """A point of the order-to-chaos line: at ``sigma_b2``, chi_1 = 1 for ``sigma_w2``, with the fixed point
    ``q_star`` of the lengths there."""

    activation: str
    sigma_b2: float
    sigma_w2: float
    q_star: float


def critical_point(activation="tanh", sigma_b2=0.05) -> CriticalPoint:
    """sigma_w^2 on the order-to-chaos line at ``sigma_b2``.  The generated kernels give the line parametrised by
    q* (critical_sigma_w2 = 1/<phi'^2>_{q*}, critical_sigma_b2 = q* - <phi^2>_{q*}/<phi'^2>_{q*}); the q* whose
    sigma_b^2 is ``sigma_b2`` is bracketed on ``Q_GRID`` and found by Brent's method (the first crossing)."""
    sb = float(declared("sigma_b2").validate(sigma_b2))
    m = maps(activation)

    def gap(q: float) -> float:  # at q = 0 the variance TINY (the kernels take q > 0)
        return m.critical_sigma_b2(q if q > 0 else TINY) - sb

    previous, g_prev = 0.0, gap(0.0)
    if g_prev >= 0:  # sigma_b^2 = 0: the line starts at q* -> 0, where sigma_w^2 = 1 / <phi'^2>_0 = 1 / phi'(0)^2
        return CriticalPoint(str(activation), sb, m.critical_sigma_w2(TINY), 0.0)
    for q in Q_GRID:
        g = gap(float(q))
        if g >= 0 and g_prev < 0:
            if g == 0:
                q_star = float(q)
            else:
                q_star = float(brentq(gap, previous, float(q), xtol=5e-324, rtol=4 * np.finfo(float).eps))
            return CriticalPoint(str(activation), sb, m.critical_sigma_w2(q_star), q_star)
        previous, g_prev = float(q), g
    raise ParameterError("sigma_b2", f"{activation} has no order-to-chaos point at sigma_b2 = {sb:g} (no q* below "
                                     f"{Q_GRID[-1]:g} on its critical line)")


@dataclass(frozen=True)
class Trajectory(ResultRecord):
    """The maps iterated from two inputs of squared norm ``input_kernel`` (= |x|^2 / N_0) and correlation
    ``input_correlation``: per layer l = 1..depth the lengths ``q_aa`` (= q_bb), the covariance ``q_ab`` and the
    correlation ``c``."""

    layer: np.ndarray
    q_aa: np.ndarray
    q_ab: np.ndarray
    c: np.ndarray


def trajectory(activation, sigma_w2, sigma_b2, input_kernel, input_correlation, depth) -> Trajectory:
    """Iterate the length and covariance maps (:func:`maps`) over ``depth`` layers; layer 1 is the linear read-in,
    q^(1) = sigma_w^2 q^(0) + sigma_b^2, q_ab^(1) = sigma_w^2 c^(0) q^(0) + sigma_b^2."""
    from resprop.numeric.engine import validation as V

    sw, sb = _variances(sigma_w2, sigma_b2)
    q0 = V.scalar("input_kernel", input_kernel, V.positive)
    c0 = V.scalar("input_correlation", input_correlation)
    if not -1.0 <= c0 <= 1.0:
        raise ParameterError("input_correlation", f"must lie in [-1, 1], got {c0!r}")
    depth = V.integer("depth", depth, 1, 10**5)
    m = maps(activation)
    qa, qab = sw * q0 + sb, sw * c0 * q0 + sb
    out = []
    for _ in range(depth):
        out.append((qa, qab, qab / qa))
        qa, qab = m.length(qa, sw, sb), m.covariance(qa, qa, qab, sw, sb)
    arr = np.array(out)
    return Trajectory(np.arange(1, depth + 1), arr[:, 0], arr[:, 1], arr[:, 2])


def divergence_fit(activation="tanh", sigma_b2=0.05, offsets=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2)) -> dict:
    """xi_c on both sides of the critical point at ``sigma_b2``, at sigma_w^2 = sigma_c^2 (1 -+ offset), and the
    least-squares slope of log xi_c against log |sigma_w^2 - sigma_c^2| on each side (the exponent; -1 predicted)."""
    crit = critical_point(activation, sigma_b2)
    offsets = np.asarray(offsets, float)
    out: dict = {"sigma_c2": crit.sigma_w2, "q_star": crit.q_star, "offsets": offsets.tolist()}
    for side, sign in (("ordered", -1.0), ("chaotic", 1.0)):
        sw = crit.sigma_w2 * (1.0 + sign * offsets)
        xi = np.array([depth_scales(activation, s, sigma_b2).xi_c for s in sw], dtype=float)
        delta = np.abs(sw - crit.sigma_w2)
        slope, intercept = np.polyfit(np.log(delta), np.log(xi), 1)
        out[side] = {"sigma_w2": sw.tolist(), "delta": delta.tolist(), "xi_c": xi.tolist(), "slope": float(slope),
                     "amplitude": float(math.exp(intercept))}
    return out
