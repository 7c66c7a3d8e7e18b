"""Numeric driver for Hayou et al. (2021), Stable ResNet: ReLU NNGP and NTK at any depth without overflow.

NNGP (5) and NTK (9) are the generated ReLU recursion of `derive/residual.py`
(`resprop.generated.residual_recursions.relu_nngp_ntk` and ``relu_diagonal_ntk``) with the per-layer
sequences g = 1, w = lambda_{l,L}^2 sigma_w^2, s = lambda_{l,L}^2 sigma_b^2, run on the P x P kernel by
`resprop.numeric.engine.residual_kernel.propagate` (diagonal first, then row strips of the upper triangle
through blocks of layers on a thread pool).  Both Q and Theta are carried as ``exp(log_scale) * normalised``
with one common scale, renormalised between blocks of layers (the recursions are homogeneous of degree one
in (Q, Theta, sigma_b^2)), so depth 10^5 of the unscaled ResNet, where Q ~ 2^L, stays finite.
``log_Q_diag`` and ``log_ntk_diag`` are natural logs.

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

import resprop.numeric.theories.stable.generated.stable as gs
from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.stable.residual_ntk import _kernel_matrix

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


def _layer_bar(total: int, desc: str, enabled: bool):
    """A tqdm progress bar over layers on stderr (a no-op object when disabled)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="layer", unit_scale=True, leave=False, disable=not enabled,
                mininterval=0.5, delay=1.0)


#: natural log of the growth allowed between two rescalings of the carried kernels (float64 holds e^709)
_LOG_GROWTH_BUDGET = 300.0


def rescaling_block(branch_weight: np.ndarray, branch_bias: np.ndarray, P: int) -> int:
    """Layers between two rescalings of the ReLU recursion run by `residual_kernel.propagate`.

    With g = 1 and kernels normalised to a largest diagonal entry of 1 (every entry is bounded by the diagonal,
    which only grows), one layer multiplies the largest entry of K and of Theta by at most 1 + w_l + s_l: the
    block keeps the product over a block below e^300.  ``branch_bias`` is in the units of the normalised
    input kernel (an upper bound for every later layer)."""
    with np.errstate(over="ignore"):
        growth = float(np.max(np.log1p(branch_weight + branch_bias))) if branch_weight.size else 0.0
    by_growth = int(min(_LOG_GROWTH_BUDGET / growth, RK.HOMOGENEOUS_BLOCK)) if growth > 0 else RK.HOMOGENEOUS_BLOCK
    by_memory = RK.DIAGONAL_BYTES // (8 * P * 3)
    return max(1, min(branch_weight.size, RK.HOMOGENEOUS_BLOCK, by_growth, by_memory))


def _correlation(M: np.ndarray, clip: bool) -> np.ndarray:
    """M_ab / sqrt(M_aa M_bb) off the diagonal (clipped into [-1, 1] for the NNGP), 1 on it."""
    d = np.sqrt(np.diagonal(M))
    out = M / np.outer(d, d)
    if clip:
        np.clip(out, -1.0, 1.0, out=out)
    np.fill_diagonal(out, 1.0)
    return out


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
    Q0, symmetric_psd = _kernel_matrix(input_kernel)  # V.kernel_matrix's test by Cholesky (eigvalsh: ~0.4 s)
    if not symmetric_psd():
        V.kernel_matrix("input_kernel", Q0)  # raises: not symmetric or not positive semi-definite
    if np.min(np.diagonal(Q0)) < np.finfo(float).tiny:
        raise ParameterError(
            "input_kernel", f"variances must be normal float64 numbers (>= {np.finfo(float).tiny:.3g})"
        )
    sigma_w2 = V.scalar("sigma_w2", sigma_w2, V.positive)
    sigma_b2 = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    lam2 = lambda_squared(scaling, depth, require_stable)
    V.flag("progress", progress)
    L, P = lam2.size, Q0.shape[0]
    # the generated ReLU recursion (derive/residual.py) with g = 1, w = lambda_l^2 sigma_w^2, s = lambda_l^2
    # sigma_b^2, run by residual_kernel.propagate on K = exp(log_scale) Kn, Theta = exp(log_scale) Tn, where the
    # largest diagonal entry of Kn is 1 at the start of every call
    r0 = float(np.max(np.diagonal(Q0)))
    log_scale = float(np.log(r0))
    Kn = Q0 / r0
    Tn = Kn.copy()
    with np.errstate(over="ignore"):
        w, s = lam2 * sigma_w2, lam2 * sigma_b2
    g = np.ones(L)
    block = rescaling_block(w, s / r0, P)
    # one call normally; calls of one block each for per-layer output (a block is never rescaled inside, so the
    # recorded layers share the scale of its start) or a progress bar
    step = block if keep_layers or progress else L
    rec = RK.recursions("relu")
    layers = []

    def record(Kl: np.ndarray, Tl: np.ndarray, log_scale: float):
        layers.append((log_scale + np.log(np.diagonal(Kl)), log_scale + np.log(np.diagonal(Tl)),
                       _correlation(Kl, True), _correlation(Tl, False)))

    if keep_layers:
        record(Kn, Tn, log_scale)
    with np.errstate(all="ignore"), _layer_bar(L, "stable kernel", progress) as bar:  # overflow: below
        for start in range(0, L, step):
            stop = min(L, start + step)
            out_ = RK.propagate(Kn, Tn, (g[start:stop], w[start:stop], s[start:stop] * np.exp(-log_scale)), "ntk",
                                rec, record_layers=keep_layers, block=block)
            if keep_layers:
                assert out_.layers is not None  # recorded with record_layers=True
                for Kl, Tl in out_.layers[1:]:
                    record(Kl, Tl, log_scale)
            r = float(np.max(np.diagonal(out_.K)))
            Kn = out_.K / r
            Tn = out_.second * np.exp(out_.log_scale_second - out_.log_scale_K) / r
            log_scale += out_.log_scale_K + float(np.log(r))
            bar.update(stop - start)
    out = {
        "log_scale": log_scale, "Q_normalised": Kn, "ntk_normalised": Tn,
        "correlation": _correlation(Kn, True), "ntk_correlation": _correlation(Tn, False),
        "log_Q_diag": log_scale + np.log(np.diagonal(Kn)),
        "log_ntk_diag": log_scale + np.log(np.diagonal(Tn)),
        "lambda_squared_sum": float(lam2.sum()),
    }
    if keep_layers:
        out["log_Q_diag_layers"] = np.array([r[0] for r in layers])
        out["log_ntk_diag_layers"] = np.array([r[1] for r in layers])
        out["correlation_layers"] = np.array([r[2] for r in layers])
        out["ntk_correlation_layers"] = np.array([r[3] for r in layers])
    for key, value in out.items():
        V.finite_result(_RANGE_NAMES, value, key)
    return StableKernels(depth=lam2.size, **out)  # type: ignore[arg-type]


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
