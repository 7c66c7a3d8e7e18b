"""Numeric driver for Hayou et al. (2021), Stable ResNet: ReLU NNGP and NTK at any depth without overflow.

The kernels are iterated with the generated updates of `resprop.generated.stable` on whole P x P matrices.
Both Q and Theta are carried as ``exp(log_scale) * normalised`` with one common scale per layer (the
recursions are homogeneous of degree one in (Q, Theta, sigma_b^2)), so depth 10^4 of the unscaled
ResNet, where Q ~ 2^L, stays finite.  ``log_Q_diag`` and ``log_ntk_diag`` are natural logs.

Scalings lambda_{l,L} (eq. 2): ``unscaled`` (1), ``uniform`` (1/sqrt(L)), ``decreasing``
(lambda_l^{-1} = sqrt(l) log(l+1)), or any SymPy expression in ``l`` (and ``L``) such as ``"1/l"``, or an
explicit array of length L.  Definition 1 (stable iff sum_l lambda_{l,L}^2 stays bounded) is decided
symbolically for expressions (`scaling_is_stable`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

import resprop.generated.stable as gs
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.fischer.field_theory import _layer_bar, _parallel

__all__ = ["NAMED_SCALINGS", "Scaling", "parse_scaling", "scaling_is_stable", "lambda_squared", "kernels",
           "two_input_kernels", "ode_limit", "input_kernel_matrix", "ScalingVerdict", "StableKernels",
           "TwoInputKernels"]

NAMED_SCALINGS = {"unscaled": "1", "uniform": "1/sqrt(L)", "decreasing": "1/(sqrt(l)*log(l + 1))"}
_l, _L = sp.symbols("l L", positive=True, integer=True)
MAX_DEPTH = 10**6  # as V.depths
#: names of the inputs that decide whether Q_L and Theta_L are representable (named when they are not)
_RANGE_NAMES = "input_kernel, sigma_w2, sigma_b2, scaling"


@dataclass(frozen=True)
class Scaling:
    name: str
    expr: sp.Expr | None  # lambda_{l,L} as a SymPy expression, or None for an explicit array
    values: tuple[float, ...] | None = None

    def lambdas(self, L: int) -> np.ndarray:
        """lambda_{l,L} for l = 1..L (not yet checked for positivity)."""
        if self.values is not None:
            if len(self.values) != L:
                raise ParameterError("scaling", f"an explicit sequence must have length depth = {L}, "
                                                f"got {len(self.values)}")
            return np.asarray(self.values, float)
        l = np.arange(1, L + 1, dtype=float)
        try:
            fn = sp.lambdify((_l, _L), self.expr, "numpy")
            with np.errstate(all="ignore"):
                values = np.asarray(fn(l, float(L)))
        except Exception:  # noqa: BLE001  (an expression NumPy cannot evaluate)
            raise ParameterError("scaling", f"cannot evaluate {self.name!r} numerically for l = 1..{L}") from None
        if not np.isrealobj(values):
            raise ParameterError("scaling", f"lambda_(l,L) must be real, {self.name!r} is complex")
        return np.broadcast_to(values.astype(float), (L,)).copy()

    def squared(self, L: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            return self.lambdas(L) ** 2


@lru_cache(maxsize=64)
def _parse_expr(text: str) -> sp.Expr:
    bad = ParameterError("scaling", f"must be unscaled, uniform, decreasing or a SymPy expression in l and L, "
                                    f"got {text!r}")
    if "__" in text:  # sympify evaluates its input: no dunder access from a user string
        raise bad
    try:
        expr = sp.sympify(text, locals={"l": _l, "L": _L})
    except Exception:  # noqa: BLE001  (SympifyError, SyntaxError, TokenError, AttributeError, ...)
        raise bad from None
    if not isinstance(expr, sp.Expr) or expr.has(sp.zoo, sp.oo, -sp.oo, sp.nan):
        raise bad
    extra = expr.free_symbols - {_l, _L}
    if extra:
        raise ParameterError("scaling", f"expression may use only l and L, found {sorted(map(str, extra))}")
    return expr


def parse_scaling(scaling) -> Scaling:
    """Scaling from a name, a SymPy expression string, or an explicit array of lambda_{l,L} (l = 1..L)."""
    if isinstance(scaling, Scaling):
        return scaling
    if isinstance(scaling, str):
        expr = _parse_expr(NAMED_SCALINGS.get(scaling, scaling))
        return Scaling(scaling, expr)
    arr = V.positive("scaling", scaling)
    if arr.ndim != 1:
        raise ParameterError("scaling", f"an explicit sequence must be 1-D, got shape {arr.shape}")
    return Scaling("explicit", None, tuple(float(v) for v in arr))


@lru_cache(maxsize=64)
def _stable_expr(expr: sp.Expr) -> tuple[bool, str]:
    sq = expr**2
    if sq.has(_L):
        total = sp.summation(sq, (_l, 1, _L))
        lim = sp.limit(total, _L, sp.oo)
        ok = bool(lim.is_finite)
        return ok, f"lim_L sum_(l=1..L) lambda^2 = {lim}"
    conv = sp.Sum(sq, (_l, 1, sp.oo)).is_convergent()
    return bool(conv), ("sum_l lambda_l^2 converges" if conv else "sum_l lambda_l^2 diverges")


@dataclass(frozen=True)
class ScalingVerdict(ResultRecord):
    """:func:`scaling_is_stable`: ``stable`` (True / False; None for an explicit finite sequence) and the
    ``reason``."""

    stable: bool | None
    reason: str


def scaling_is_stable(scaling) -> ScalingVerdict:
    """Definition 1: stable iff lim_L sum_{l<=L} lambda_{l,L}^2 < inf (decided symbolically)."""
    s = parse_scaling(scaling)
    if s.expr is None:
        return ScalingVerdict(stable=None,
                              reason="an explicit finite sequence cannot be classified; give an expression")
    ok, reason = _stable_expr(s.expr)
    return ScalingVerdict(stable=ok, reason=reason)


def lambda_squared(scaling, depth: int, require_stable: bool = False) -> np.ndarray:
    """lambda_{l,L}^2 for l = 1..L; with require_stable, a non-square-summable scaling is an error."""
    depth = V.integer("depth", depth, minimum=1, maximum=MAX_DEPTH)
    s = parse_scaling(scaling)
    if require_stable:
        verdict = scaling_is_stable(s)
        if verdict.stable is False:
            raise ParameterError("scaling", f"{s.name!r} is not a Stable ResNet scaling (Definition 1): "
                                            f"{verdict.reason}")
    lam = s.lambdas(depth)
    with np.errstate(over="ignore", under="ignore"):
        lam2 = lam**2
    if not np.all(np.isfinite(lam2)) or np.any(lam <= 0) or np.any(lam2 == 0):
        raise ParameterError("scaling", f"lambda_(l,L) must be > 0 with a finite, nonzero square for l = 1..{depth}")
    return lam2


def input_kernel_matrix(X, sigma_w2, sigma_b2) -> np.ndarray:
    """Q_0(x, x') = sigma_b^2 + sigma_w^2 x.x'/d (eq. 5) for the rows of X."""
    sigma_w2 = float(V.positive("sigma_w2", sigma_w2))
    sigma_b2 = float(V.nonnegative("sigma_b2", sigma_b2))
    X = V.real("X", X)
    if X.ndim != 2:
        raise ParameterError("X", f"must be a (P, d) array of inputs, got shape {X.shape}")
    return gs.input_kernel(sigma_b2, sigma_w2, X @ X.T, X.shape[1])


@dataclass
class KernelState:
    """Q = exp(log_scale) Qn, Theta = exp(log_scale) Tn; diagonals and the upper triangle (i < j) kept apart."""

    q_diag: np.ndarray
    t_diag: np.ndarray
    q_off: np.ndarray
    t_off: np.ndarray
    log_scale: float
    i: np.ndarray
    j: np.ndarray

    def _full(self, diag: np.ndarray, off: np.ndarray) -> np.ndarray:
        P = diag.size
        out = np.empty((P, P))
        out[np.arange(P), np.arange(P)] = diag
        out[self.i, self.j] = off
        out[self.j, self.i] = off
        return out

    def Qn(self) -> np.ndarray:
        return self._full(self.q_diag, self.q_off)

    def Tn(self) -> np.ndarray:
        return self._full(self.t_diag, self.t_off)

    def correlation(self) -> np.ndarray:
        d = np.sqrt(self.q_diag)
        return self._full(np.ones_like(d), np.clip(self.q_off / (d[self.i] * d[self.j]), -1.0, 1.0))

    def ntk_correlation(self) -> np.ndarray:
        d = np.sqrt(self.t_diag)
        return self._full(np.ones_like(d), self.t_off / (d[self.i] * d[self.j]))


def _offdiag_update(q, t, qa, qb, lam2, sb, sw):
    """One layer of eqs (5) and (9) for off-diagonal elements (generated kernels), stacked as (2, n)."""
    root = np.sqrt(qa * qb)
    C = np.clip(q / root, -1.0, 1.0)
    psi = gs.psi_relu(C, root, sb, sw)
    q_new = gs.nngp_update(q, lam2, psi)
    t_new = gs.ntk_update(t, lam2, psi, sw * gs.mean_dphi_dphi(C))
    return np.stack([q_new, t_new])


def _step(state: KernelState, lam2: float, sigma_w2: float, sigma_b2: float) -> KernelState:
    sb = sigma_b2 * np.exp(-state.log_scale)
    qd, td = state.q_diag, state.t_diag
    # diagonal: C = 1, f(1) = 0, E[phi'^2] = 1/2
    psi_diag = gs.psi_relu(1.0, qd, sb, sigma_w2)
    q_diag = gs.nngp_update(qd, lam2, psi_diag)
    t_diag = gs.ntk_update(td, lam2, psi_diag, sigma_w2 / 2)
    if state.q_off.size:
        new = _parallel(_offdiag_update, state.q_off, state.t_off, qd[state.i], qd[state.j], lam2, sb, sigma_w2)
        q_off, t_off = new[0], new[1]
    else:
        q_off, t_off = state.q_off, state.t_off
    r = float(np.max(q_diag))
    return KernelState(q_diag / r, t_diag / r, q_off / r, t_off / r, state.log_scale + np.log(r), state.i, state.j)


@dataclass(frozen=True)
class StableKernels(ResultRecord):
    """:func:`kernels`: Q_L = exp(log_scale) Q_normalised, Theta_L = exp(log_scale) ntk_normalised (P, P), the
    correlations C_L and of the NTK, the log diagonals, sum_l lambda_l^2; the ``*_layers`` fields (L+1, ...)
    with keep_layers (None otherwise)."""

    depth: int
    log_scale: float
    Q_normalised: np.ndarray
    ntk_normalised: np.ndarray
    correlation: np.ndarray
    ntk_correlation: np.ndarray
    log_Q_diag: np.ndarray
    log_ntk_diag: np.ndarray
    lambda_squared_sum: float
    log_Q_diag_layers: np.ndarray | None = None
    log_ntk_diag_layers: np.ndarray | None = None
    correlation_layers: np.ndarray | None = None
    ntk_correlation_layers: np.ndarray | None = None


@dataclass(frozen=True)
class TwoInputKernels(ResultRecord):
    """:func:`two_input_kernels`: per depth, log Q_L(x, x), C_L(x, x'), log Theta_L(x, x) and the NTK
    correlation (lists of Python numbers)."""

    depth: list
    log_Q_diag: list
    correlation: list
    log_ntk_diag: list
    ntk_correlation: list


def kernels(input_kernel, depth: int, scaling="uniform", sigma_w2: float = 2.0, sigma_b2: float = 0.0,
            keep_layers: bool = False, require_stable: bool = False, progress: bool = False) -> StableKernels:
    """NNGP Q_L (5) and NTK Theta_L (9), NTK parameterisation, for the input kernel Q_0 = input_kernel (P x P).

    Returns (:class:`StableKernels`) log_scale, Q_normalised, ntk_normalised (Q = exp(log_scale) Q_normalised, same
    for the NTK),
    the correlation kernel C_L (3), log_Q_diag and log_ntk_diag.  With keep_layers, also per-layer
    log_Q_diag_layers, log_ntk_diag_layers and correlation_layers (L+1, P, P).
    """
    Q0 = V.kernel_matrix("input_kernel", input_kernel)
    if Q0.ndim != 2:
        raise ParameterError("input_kernel", f"must be a single (P, P) matrix, got shape {Q0.shape}")
    if np.min(np.diagonal(Q0)) < np.finfo(float).tiny:
        raise ParameterError(
            "input_kernel", f"variances must be normal float64 numbers (>= {np.finfo(float).tiny:.3g})"
        )
    sigma_w2 = V.scalar("sigma_w2", sigma_w2, V.positive)
    sigma_b2 = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    lam2 = lambda_squared(scaling, depth, require_stable)
    r0 = float(np.max(np.diagonal(Q0)))
    i, j = np.triu_indices(Q0.shape[0], 1)
    d0, o0 = np.diagonal(Q0) / r0, Q0[i, j] / r0
    state = KernelState(d0, d0.copy(), o0, o0.copy(), np.log(r0), i, j)
    layers = []

    def record(s: KernelState):
        layers.append((s.log_scale + np.log(s.q_diag), s.log_scale + np.log(s.t_diag),
                       s.correlation(), s.ntk_correlation()))

    if keep_layers:
        record(state)
    V.flag("progress", progress)
    with np.errstate(all="ignore"), _layer_bar(lam2.size, "stable kernel", progress) as bar:  # overflow: below
        for n, l2 in enumerate(lam2, 1):
            state = _step(state, float(l2), sigma_w2, sigma_b2)
            if keep_layers:
                record(state)
            if n % 4096 == 0:
                bar.update(4096)
        bar.update(lam2.size - bar.n)
    out = {
        "log_scale": state.log_scale, "Q_normalised": state.Qn(), "ntk_normalised": state.Tn(),
        "correlation": state.correlation(), "ntk_correlation": state.ntk_correlation(),
        "log_Q_diag": state.log_scale + np.log(state.q_diag),
        "log_ntk_diag": state.log_scale + np.log(state.t_diag),
        "lambda_squared_sum": float(lam2.sum()),
    }
    if keep_layers:
        out["log_Q_diag_layers"] = np.array([r[0] for r in layers])
        out["log_ntk_diag_layers"] = np.array([r[1] for r in layers])
        out["correlation_layers"] = np.array([r[2] for r in layers])
        out["ntk_correlation_layers"] = np.array([r[3] for r in layers])
    for key, value in out.items():
        V.finite_result(_RANGE_NAMES, value, key)
    return StableKernels(depth=lam2.size, **out)


def two_input_kernels(depths, scaling="uniform", angle: float = 1.0, sigma_w2: float = 2.0, sigma_b2: float = 0.0,
                      d_in: int = 2, progress: bool = False) -> TwoInputKernels:
    """Two unit inputs at ``angle`` (radians, in [0, pi]): log Q_L(x, x), C_L(x, x'), log Theta_L(x, x) per depth."""
    depths = V.depths("depth", depths, MAX_DEPTH)
    if depths.ndim > 1:
        raise ParameterError("depth", f"must be a scalar or a 1-D sequence of depths, got shape {depths.shape}")
    depths = np.atleast_1d(depths)
    a = V.scalar("angle", angle)
    if not 0 <= a <= np.pi:
        raise ParameterError("angle", f"must lie in [0, pi], got {a}")
    d_in = V.integer("d_in", d_in, minimum=2, maximum=2**53)
    sigma_w2 = V.scalar("sigma_w2", sigma_w2, V.positive)
    sigma_b2 = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    # Q_0 of the unit inputs (1, 0, ...) and (cos a, sin a, 0, ...), from their Gram matrix
    gram = np.array([[1.0, np.cos(a)], [np.cos(a), 1.0]])
    with np.errstate(under="ignore"):
        Q0 = gs.input_kernel(sigma_b2, sigma_w2, gram, float(d_in))
    if np.min(np.diagonal(Q0)) < np.finfo(float).tiny:
        raise ParameterError("sigma_w2, sigma_b2, d_in", "Q_0 = sigma_b^2 + sigma_w^2/d_in underflows float64")
    out: dict[str, list[Any]] = {"depth": [], "log_Q_diag": [], "correlation": [], "log_ntk_diag": [],
                                 "ntk_correlation": []}
    for L in depths:
        k = kernels(Q0, int(L), scaling, sigma_w2, sigma_b2, progress=progress)
        out["depth"].append(int(L))
        out["log_Q_diag"].append(float(k["log_Q_diag"][0]))
        out["correlation"].append(float(k["correlation"][0, 1]))
        out["log_ntk_diag"].append(float(k["log_ntk_diag"][0]))
        out["ntk_correlation"].append(float(k["ntk_correlation"][0, 1]))
    return TwoInputKernels(**out)


def ode_limit(input_kernel, t_eval, sigma_w2: float = 2.0, sigma_b2: float = 0.0, rtol: float = 1e-11) -> np.ndarray:
    """The ODE (8), the uniform-scaling limit L -> oo, solved for every element of the input kernel Q_0
    (``input_kernel``, P x P): q_t (len(t_eval), P, P).

    t_eval: strictly increasing times in [0, 1] (t = l/L); sigma_w2 > 0, sigma_b2 >= 0, rtol in [1e-13, 0.1].

    The diagonal is the closed form `ode_diagonal` (dsolve); off-diagonal elements are integrated by
    scipy's DOP853 with q' = sigma_b^2 + sigma_w^2 sqrt(q_aa q_bb) (c + f(c))/2.
    """
    Q0 = V.kernel_matrix("input_kernel", input_kernel)
    if Q0.ndim != 2:
        raise ParameterError("input_kernel", f"must be a single (P, P) matrix, got shape {Q0.shape}")
    t_eval = np.atleast_1d(V.nonnegative("t_eval", t_eval))
    if t_eval.ndim != 1 or np.any(t_eval > 1) or (t_eval.size > 1 and np.any(np.diff(t_eval) <= 0)):
        raise ParameterError("t_eval", "must be a strictly increasing 1-D sequence of times in [0, 1] (t = l/L), "
                                       f"got {V._show(t_eval)}")
    sigma_w2 = V.scalar("sigma_w2", sigma_w2, V.positive)
    sigma_b2 = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    rtol = V.scalar("rtol", rtol, V.positive)
    if not 1e-13 <= rtol <= 0.1:
        raise ParameterError("rtol", f"must lie in [1e-13, 0.1], got {rtol:g}")
    diag = gs.ode_diagonal(np.diagonal(Q0)[None, :], sigma_b2, sigma_w2, t_eval[:, None])  # (T, P)
    P = Q0.shape[0]
    i, j = np.triu_indices(P, 1)
    qa = lambda tt: gs.ode_diagonal(Q0[i, i], sigma_b2, sigma_w2, tt)  # noqa: E731
    qb = lambda tt: gs.ode_diagonal(Q0[j, j], sigma_b2, sigma_w2, tt)  # noqa: E731

    def rhs(tt, q):
        root = np.sqrt(qa(tt) * qb(tt))
        c = np.clip(q / root, -1.0, 1.0)
        return sigma_b2 + sigma_w2 * root * gs.mean_phi_phi_normalised(c)

    out = np.empty((t_eval.size, P, P))
    out[:, np.arange(P), np.arange(P)] = diag
    if i.size and t_eval[-1] == 0:  # only t = 0: the initial condition
        out[:, i, j] = out[:, j, i] = Q0[i, j]
    elif i.size:
        with np.errstate(all="ignore"):
            sol = solve_ivp(rhs, (0.0, float(t_eval.max())), Q0[i, j], t_eval=t_eval, method="DOP853", rtol=rtol,
                            atol=1e-13)
        if not sol.success or sol.y.shape[1] != t_eval.size:
            raise ParameterError(
                "input_kernel, sigma_w2, sigma_b2, t_eval",
                f"the ODE (8) could not be integrated for these values ({sol.message}); use values of moderate size",
            )
        out[:, i, j] = sol.y.T
        out[:, j, i] = sol.y.T
    V.finite_result("input_kernel, sigma_w2, sigma_b2, t_eval", out, "q_t")
    return out
