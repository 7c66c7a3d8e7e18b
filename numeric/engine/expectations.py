"""Gaussian expectations of an activation, dispatched to the generated kernels.

For each activation the same five functions are provided:
``mean_phi_phi(K_aa, K_bb, K_ab)``, ``mean_dphi_dphi(...)``, ``mean_phi_sq(K)``,
``price_diag(K)`` = <phi'^2 + phi phi''> and ``mean_phi_sq_phi_sq(...)``.
erf, ReLU and linear use the closed forms of `resprop.generated.gaussian`; tanh, GELU
and any SymPy expression use generated Gauss--Hermite kernels (the module for a
custom expression is rendered from the same template and loaded in memory).
"""
from __future__ import annotations

import hashlib
import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import sympy as sp

import resprop.generated.activation_erf as gh_erf
import resprop.generated.activation_gelu as gh_gelu
import resprop.generated.activation_tanh as gh_tanh
import resprop.generated.gaussian as closed
from resprop.derive import activations
from resprop.generated.gauss_hermite import expect1
from resprop.numeric.engine.validation import ParameterError

Array = np.ndarray


@dataclass(frozen=True)
class ActivationKernels:
    name: str
    mean_phi_phi: Callable[[Array, Array, Array], Array]
    mean_dphi_dphi: Callable[[Array, Array, Array], Array]
    mean_phi_sq: Callable[[Array], Array]
    price_diag: Callable[[Array], Array]
    mean_phi_sq_phi_sq: Callable[[Array, Array, Array], Array]
    dphi0_sq: float
    closed_form: bool


#: variances on which the quadrature of every activation is self-checked (refined rule, every panel halved)
CHECK_VARIANCES = 10.0 ** np.arange(-8.0, 8.01, 0.5)
#: agreement of the rule and the refined rule required on CHECK_VARIANCES (relative)
CHECK_RTOL = 1e-12
#: an oscillatory activation's closed form (combined exponentials) is used where every variance is >= this
#: (below, its terms of size 1 cancel to the expectation, O(K) or O(K^2)); the quadrature below
CLOSED_FORM_MIN_VARIANCE = 1e-2


def trusted_variance(mod: types.ModuleType) -> float:
    """The largest variance K_hi such that on CHECK_VARIANCES <= K_hi the 1-D rules for <phi^2>, <phi'^2> and
    <phi phi''> agree with the refined rule (every panel halved) to CHECK_RTOL; inf if they agree on all of
    them (1e-8 .. 1e8: then the activation does not oscillate at large |x| and the graded rules hold at every
    variance; see `resprop.generated.gauss_hermite`)."""
    K = CHECK_VARIANCES
    worst = np.zeros(K.size)
    for f in (lambda u: mod.phi(u) ** 2, lambda u: mod.dphi(u) ** 2, lambda u: mod.phi(u) * mod.ddphi(u)):
        a, b = expect1(f, K), expect1(f, K, refined=True)
        scale = np.maximum(np.abs(b), expect1(lambda u: np.abs(f(u)), K))
        with np.errstate(invalid="ignore", divide="ignore"):
            worst = np.maximum(worst, np.where(np.isfinite(a) & np.isfinite(b), np.abs(a - b) / scale, np.inf))
    bad = np.nonzero(~(worst <= CHECK_RTOL))[0]
    if bad.size == 0:
        return math.inf
    return float(K[bad[0] - 1]) if bad[0] > 0 else 0.0


def _guarded(name: str, fn: Callable, k_hi: float, names: tuple[str, ...], closed: Callable | None = None):
    """``fn`` refusing variances above k_hi (ParameterError naming the variance and the range), or ``closed``
    where every variance is >= CLOSED_FORM_MIN_VARIANCE."""
    def wrapped(*args, **kw):
        ks = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in args[:len(names)]))
        diag = ks[:2] if len(names) == 3 else ks[:1]
        lo = np.minimum.reduce(diag) if len(diag) > 1 else diag[0]
        hi = np.maximum.reduce(diag) if len(diag) > 1 else diag[0]
        use_closed = (lo >= CLOSED_FORM_MIN_VARIANCE) if closed is not None else np.zeros(lo.shape, dtype=bool)
        quad = ~use_closed
        if np.any(hi[quad] > k_hi):
            which = names[0] if len(names) == 1 or np.any(ks[0][quad] > k_hi) else names[1]
            where = (f"variances <= {k_hi:g}" if closed is None else
                     f"variances <= {k_hi:g}, or all >= {CLOSED_FORM_MIN_VARIANCE:g} (closed form)")
            raise ParameterError(which, f"{name} oscillates at large |x|: its Gaussian expectations are accurate "
                                        f"(1e-10) for {where}; got {which} = {float(np.max(hi[quad])):g}")
        if closed is None:
            return fn(*args, **kw)
        out = np.empty(lo.shape)
        if np.any(quad):
            out[quad] = fn(*(k[quad] for k in ks))
        if np.any(use_closed):
            with np.errstate(under="ignore"):
                out[use_closed] = closed(*(k[use_closed] for k in ks))
        return out[()] if out.ndim == 0 else out
    return wrapped


def _closed_forms(expr: sp.Expr) -> dict[str, Callable] | None:
    """Closed forms of an exponential-type activation (sin, sin^2, ...) with the exponentials combined into one
    exponent each (no overflow of cosh(4 K_ab) exp(-2 K_aa) exp(-2 K_bb) at large K), or None."""
    from resprop.derive.closed_forms import closed_form_dual

    try:
        forms, fourth = closed_form_dual(expr), closed_form_dual(sp.expand(expr ** 2))
    except Exception:  # noqa: BLE001  (no closed form found)
        return None
    if forms is None or fourth is None:
        return None
    K, Ka, Kb, Kab = sp.symbols("K K_aa K_bb K_ab", real=True)
    out = {}
    for key, e, args in (("mean_phi_phi", forms["mean_phi_phi"], (Ka, Kb, Kab)),
                         ("mean_dphi_dphi", forms["mean_dphi_dphi"], (Ka, Kb, Kab)),
                         ("mean_phi_sq", forms["mean_phi_sq"], (K,)), ("price_diag", forms["price_diag"], (K,)),
                         ("mean_phi_sq_phi_sq", fourth["mean_phi_phi"], (Ka, Kb, Kab))):
        e = sp.powsimp(sp.expand(sp.sympify(e).rewrite(sp.exp)), combine="exp")
        subs = {sym: arg for sym in e.free_symbols for arg in args if sym.name == arg.name}
        e = e.xreplace(subs)
        if not e.free_symbols <= set(args) or e.has(sp.I):
            return None
        out[key] = sp.lambdify(args, e, modules="numpy")
    return out


def _from_module(name: str, mod: types.ModuleType, closed_form_overrides: dict | None = None,
                 expr: sp.Expr | None = None) -> ActivationKernels:
    fns = dict(mean_phi_phi=mod.mean_phi_phi, mean_dphi_dphi=mod.mean_dphi_dphi, mean_phi_sq=mod.mean_phi_sq,
               price_diag=mod.price_diag, mean_phi_sq_phi_sq=mod.mean_phi_sq_phi_sq)
    k_hi = math.inf if closed_form_overrides or expr is None else trusted_variance(mod)
    if math.isfinite(k_hi):
        assert expr is not None
        closed = _closed_forms(expr)
        for key in fns:
            names = ("K",) if key in ("mean_phi_sq", "price_diag") else ("K_aa", "K_bb", "K_ab")
            fns[key] = _guarded(str(expr), fns[key], k_hi, names, None if closed is None else closed[key])
    fns.update(closed_form_overrides or {})
    with np.errstate(over="ignore"):
        d0 = float(mod.dphi(np.array(0.0))) ** 2
    return ActivationKernels(name=name, dphi0_sq=d0, closed_form=bool(closed_form_overrides), **fns)


def erf_mean_phi_sq_phi_sq(K_aa, K_bb, K_ab) -> Array:
    """<erf(u)^2 erf(v)^2> by a one-dimensional reduction (fourth moment of Fischer et al. 35/C4).

    Given u, v ~ N(mu, s^2) with mu = K_ab u / K_aa, s^2 = K_bb - K_ab^2/K_aa.  Writing
    erf(v) = 2 Phi(sqrt2 v) - 1 and E[Phi(a v)^2] as a bivariate normal orthant
    probability in Owen's T gives E[erf(v)^2 | u] = 1 - 8 T(sqrt2 mu / sqrt(1 + 2 s^2), 1/sqrt(1 + 4 s^2))
    (at mu = 0 this is (2/pi) asin(2 s^2 / (1 + 2 s^2)), the erf dual kernel).  The outer integral
    over u uses the graded Gauss--Legendre rule of `resprop.generated.gauss_hermite` (any variance).
    """
    from scipy.special import erf, owens_t

    K_aa, K_bb, K_ab = np.broadcast_arrays(*(np.asarray(k, dtype=float) for k in (K_aa, K_bb, K_ab)))
    out = np.empty(K_ab.shape)
    for idx in np.ndindex(K_ab.shape):
        ka, kb, kab = float(K_aa[idx]), float(K_bb[idx]), float(K_ab[idx])
        c = kab / ka if ka > 0 else 0.0
        s2 = max(kb - c * kab, 0.0)

        def f(u, c=c, s2=s2):
            mu = c * u
            return erf(u) ** 2 * (1 - 8 * owens_t(np.sqrt(2) * mu / np.sqrt(1 + 2 * s2), 1 / np.sqrt(1 + 4 * s2)))

        out[idx] = expect1(f, ka)
    return out


def _linear() -> ActivationKernels:
    return ActivationKernels(
        name="linear",
        mean_phi_phi=lambda a, b, c: np.asarray(c, dtype=float) + 0.0 * np.asarray(a),
        mean_dphi_dphi=lambda a, b, c: np.ones(np.broadcast(a, b, c).shape),
        mean_phi_sq=lambda k: np.asarray(k, dtype=float),
        price_diag=lambda k: np.ones(np.shape(k)),
        mean_phi_sq_phi_sq=lambda a, b, c: np.asarray(a) * b + 2 * np.asarray(c) ** 2,  # Isserlis
        dphi0_sq=1.0, closed_form=True)


def _relu() -> ActivationKernels:
    return ActivationKernels(
        name="relu",
        mean_phi_phi=closed.relu_arccos1,
        mean_dphi_dphi=closed.relu_arccos0,
        mean_phi_sq=lambda k: np.asarray(k, dtype=float) / 2,
        price_diag=lambda k: closed.relu_price_diag(np.asarray(k, dtype=float)),
        mean_phi_sq_phi_sq=closed.relu_arccos2,
        dphi0_sq=0.25,  # one-sided: phi'(0) is undefined; the symmetric value 1/2 squared
        closed_form=True)


def kernels(activation: str | sp.Expr = "erf") -> ActivationKernels:
    """The expectation kernels of a named activation or a SymPy expression in ``x``."""
    if isinstance(activation, str):
        if "__" in activation:  # sympify evaluates its input: no dunder access from a user string
            raise ParameterError("activation", f"not a SymPy expression in x: {activation!r}")
    elif not isinstance(activation, sp.Expr):
        raise ParameterError("activation", f"must be a name ({', '.join(activations.KNOWN)}) or a SymPy expression "
                                           f"in x, got {activation!r}")
    if not (isinstance(activation, str) and activation in ("erf", "relu", "linear", "tanh", "gelu")):
        from resprop.numeric.engine.activation_check import check_activation

        checked = check_activation(activation)  # the one check: ParameterError naming activation
        if checked.relu:
            return _kernels("relu")
        if checked.piecewise:
            why = (f"phi' has a Dirac delta at x = {checked.jumps[0]:g}" if checked.jumps
                   else "phi'' has a Dirac delta at its kinks")
            raise ParameterError("activation", f"{checked.expr} is piecewise ({why}): the theory drivers' Gaussian "
                                               "expectations need a smooth phi (they use phi' and phi''); "
                                               "resprop kernel / resprop.kernel handle piecewise activations")
        activation = checked.expr
    return _kernels(activation)


def activation_expression(activation: str | sp.Expr) -> sp.Expr:
    """The SymPy expression (in ``resprop.derive.activations.x``) of a named activation or of a SymPy expression
    given as text; a ParameterError naming ``activation`` otherwise."""
    if isinstance(activation, (str, sp.Expr)) and activation not in activations.BUILTIN_EXPRESSIONS:
        from resprop.numeric.engine.activation_check import check_activation

        return check_activation(activation).expr  # the one check: ParameterError naming activation
    if isinstance(activation, sp.Expr):
        expr = activation.subs(sp.Symbol("x"), activations.x)
    elif not isinstance(activation, str) or "__" in activation:
        raise ParameterError("activation", f"must be a name ({', '.join(activations.KNOWN)}) or a SymPy expression "
                                           f"in x, got {activation!r}")
    elif activation in activations.BUILTIN_EXPRESSIONS:
        return activations.BUILTIN_EXPRESSIONS[activation]
    else:
        try:
            expr = sp.sympify(activation, locals={"x": activations.x})
        except Exception:  # noqa: BLE001  (SympifyError, SyntaxError, TokenError, AttributeError, ...)
            expr = None
    if expr is None or not isinstance(expr, sp.Expr) or expr.free_symbols != {activations.x}:
        raise ParameterError("activation", f"unknown activation {activation!r}; allowed: "
                             f"{', '.join(activations.KNOWN)} or a SymPy expression in x")
    return expr


@cache
def _kernels(activation: str | sp.Expr) -> ActivationKernels:
    if isinstance(activation, str):
        if activation == "erf":
            return _from_module("erf", gh_erf, dict(
                mean_phi_phi=closed.erf_mean_phi_phi, mean_dphi_dphi=closed.erf_mean_dphi_dphi,
                mean_phi_sq=closed.erf_mean_phi_sq, price_diag=closed.erf_price_diag,
                mean_phi_sq_phi_sq=erf_mean_phi_sq_phi_sq))
        if activation == "relu":
            return _relu()
        if activation == "linear":
            return _linear()
        if activation == "tanh":
            return _from_module("tanh", gh_tanh)
        if activation == "gelu":
            return _from_module("gelu", gh_gelu)
        try:
            expr = sp.sympify(activation, locals={"x": activations.x})
        except Exception:  # noqa: BLE001  (SympifyError, SyntaxError, TokenError, AttributeError, ...)
            expr = None
        if expr is None or not isinstance(expr, sp.Expr) or expr.free_symbols != {activations.x}:
            raise ParameterError("activation", f"unknown activation {activation!r}; allowed: "
                                 f"{', '.join(activations.KNOWN)} or a SymPy expression in x")
        return custom_kernels(expr)
    return custom_kernels(activation)


#: where a custom activation and its first two derivatives must be finite real numbers
_PROBE = np.linspace(-12.0, 12.0, 241)
#: bound on |phi|, |phi'|, |phi''| on the probe: rules out exp(x^2)-like growth (polynomials and exp(x) pass)
_GROWTH_BOUND = 1e12


def custom_kernels(expr: sp.Expr) -> ActivationKernels:
    """Render the activation template for an arbitrary SymPy expression and load it in memory."""
    from resprop.derive.codegen import render_activation_module

    expr = expr.subs(sp.Symbol("x"), activations.x)
    if expr.free_symbols != {activations.x}:
        raise ParameterError("activation", f"expression must depend on x only, got {expr}")
    name = "custom_" + hashlib.sha256(sp.srepr(expr).encode()).hexdigest()[:10]
    try:
        source = render_activation_module(name, expr)
        mod = types.ModuleType(f"generated.{name}")
        exec(compile(source, f"<generated {name}>", "exec"), mod.__dict__)
        with np.errstate(all="ignore"):
            values = [np.asarray(f(_PROBE)) for f in (mod.phi, mod.dphi, mod.ddphi)]
    except Exception as exc:  # noqa: BLE001  (any failure to print or evaluate the expression)
        raise ParameterError("activation", f"cannot generate kernels for {expr}: {type(exc).__name__}") from None
    if not all(np.isrealobj(v) and np.all(np.isfinite(v)) for v in values):
        raise ParameterError("activation", f"{expr} and its first two derivatives must be finite real numbers on "
                                           "the real line (checked on [-12, 12])")
    if max(float(np.max(np.abs(v))) for v in values) > _GROWTH_BOUND:
        raise ParameterError(
            "activation",
            f"{expr} grows too fast for its Gaussian expectations to exist at every "
            f"variance (|phi|, |phi'| or |phi''| exceeds {_GROWTH_BOUND:g} on [-12, 12])",
        )
    return _from_module(name, mod, expr=expr)
