"""Finite-width Monte-Carlo simulator of residual networks at initialisation.

The network is eq. (1) of Fischer, Dahmen & Helias (2025), "Field theory for
optimal signal propagation in residual networks", for P inputs
``X = (x_alpha)`` of dimension ``d_in`` and width ``N``::

    h0  = W_in x + b_in                         W_in ~ N(0, s_win2/d_in), b_in ~ N(0, s_bin2)
    h_l = h_{l-1} + rho (W_l phi(h_{l-1}) + b_l)  W_l  ~ N(0, s_w2/N),    b_l  ~ N(0, s_b2)
    y   = W_out phi(h_L) + b_out                W_out ~ N(0, s_wout2/N), b_out ~ N(0, s_bout2)

with one bias vector per layer shared by all P inputs.  Per initialisation
("sample") the simulator records the auxiliary variables of the field theory,
eqs. (16)-(18) and (A21):

* ``C[l]``  -- the conditional residual kernel, ``C^(0) = s_win2/d_in X X^T + s_bin2``
  and ``C^(l) = rho^2 (s_w2/N Phi_{l-1}^T Phi_{l-1} + s_b2)`` for ``l >= 1``;
* ``C_emp[l]`` -- the empirical residual covariance ``f_l^T f_l / N`` with
  ``f_l = h_l - h_{l-1}`` (``f_0 = h0``);
* ``K[l] = sum_{k<=l} C[k]`` and ``K_emp[l] = h_l^T h_l / N``;
* ``K_out`` -- the readout kernel ``C^(L+1) = s_wout2/N Phi_L^T Phi_L + s_bout2``.

Two sampling paths are provided.  ``method="dense"`` draws every weight matrix.
``method="reduced"`` (default) never forms a weight matrix: conditional on
the post-activations ``Phi`` (N x P), the rows of ``W Phi + b 1^T`` are iid
``N(0, s_w2/N Phi^T Phi + s_b2 1 1^T)`` (cf. eq. (10)), so ``W Phi + b 1^T``
has the law of ``G R`` with ``G`` an N x P standard normal matrix and
``R^T R = s_w2/N Phi^T Phi + s_b2 1 1^T`` (``R^T`` is the Cholesky factor).
The read-in is reduced the same way with ``C^(0)``.  For P = 1 this is ``W phi + b =d sqrt(s_w2/N ||phi||^2 + s_b2) g``.
The reduction is exact jointly for all P inputs, so inputs simulated in one
batch share their weights (common random numbers).

Randomness flows only through an explicit :class:`numpy.random.Generator`;
results are deterministic given ``(seed, chunk_size)``.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import erf

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord

__all__ = [
    "ACTIVATIONS",
    "METHODS",
    "resolve_activation",
    "simulate_kernels",
    "finite_difference_response",
    "finite_difference_response_offdiag",
    "mean_and_se",
    "kernel_summary",
    "KernelSummary",
    "MeanSE",
]

Activation = Callable[[np.ndarray], np.ndarray]


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, x Phi(x) with Phi the standard normal CDF."""
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


#: Named activations (NumPy/SciPy implementations).
ACTIVATIONS: dict[str, Activation] = {
    "erf": erf,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "linear": lambda x: x,
    "gelu": _gelu,
}

METHODS = ("reduced", "dense")

#: Bytes of the largest per-chunk array the automatic chunk size aims for.
_CHUNK_BYTES = 2**25


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


def _scalar(name: str, arr: np.ndarray) -> float:
    if arr.ndim:
        raise V.ParameterError(name, f"must be a scalar, got shape {arr.shape}")
    return float(arr)


#: largest depth, width and number of samples accepted (the simulation allocates width x P per sample and layer)
MAX_DEPTH = 10**6
MAX_WIDTH = 10**7
#: the result arrays (C, C_emp, K, K_emp: samples x (depth+1) x P x P float64) may not exceed this
MAX_RESULT_BYTES = 4 * 2**30


def _check_int(name: str, value, minimum: int, maximum: int | None = None) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)):
        raise V.ParameterError(name, f"must be an integer >= {minimum}, got {value!r}")
    return V.integer(name, value, minimum, maximum)


def _is_real_scalar(value) -> bool:
    """A real number: Python/NumPy int or float, or a 0-d integer/float array (float32 included); not a bool."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, numbers.Real):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"


def _check_real(name: str, value) -> float:
    if not _is_real_scalar(value):
        raise V.ParameterError(name, f"must be a finite real number, got {value!r}")
    return _scalar(name, V.real(name, value))


def _check_variance(name: str, value) -> float:
    if not _is_real_scalar(value):
        raise V.ParameterError(name, f"must be a finite real number >= 0, got {value!r}")
    return _scalar(name, V.nonnegative(name, value))


def _check_inputs(X) -> np.ndarray:
    """X as a finite float64 array of shape (P, d_in) with P, d_in >= 1."""
    arr = V.real("X", X)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise V.ParameterError("X", f"must be a 2-D array of shape (P, d_in) with P, d_in >= 1, got shape {arr.shape}")
    return arr


def _check_vector(name: str, x) -> np.ndarray:
    arr = V.real(name, x)
    if arr.ndim != 1 or arr.size < 1:
        raise V.ParameterError(name, f"must be a finite 1-D array of length d_in >= 1, got shape {arr.shape}")
    return arr


def _check_method(method) -> str:
    if method not in METHODS:
        raise V.ParameterError("method", f"must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    return method


def _check_result_size(samples: int, depth: int, P: int) -> None:
    need = 4 * samples * (depth + 1) * P * P * 8
    if need > MAX_RESULT_BYTES:
        raise V.ParameterError("samples, depth", f"the result arrays (4 x samples x (depth+1) x P x P float64) would "
                                                 f"need {need / 2**30:.3g} GiB (limit {MAX_RESULT_BYTES / 2**30:g} "
                                                 "GiB); use fewer samples or a smaller depth")


def _make_rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(_check_int("seed", seed, 0))


def resolve_activation(activation: str | Activation) -> Activation:
    """The NumPy function for a named activation, or a user callable checked on a probe array."""
    if isinstance(activation, str):
        try:
            return ACTIVATIONS[activation]
        except KeyError:
            raise ValueError(
                f"activation: must be one of {', '.join(map(repr, ACTIVATIONS))} or a callable, "
                f"got {activation!r}"
            ) from None
    if not callable(activation):
        raise ValueError(f"activation: must be a string or a callable, got {activation!r}")
    probe = np.linspace(-3.0, 3.0, 12).reshape(2, 3, 2)
    out = np.asarray(activation(probe))
    if out.shape != probe.shape or not np.all(np.isfinite(out)):
        raise ValueError("activation: callable must map an array elementwise to finite values of the same shape")
    return activation


# ---------------------------------------------------------------------------
# Network parameters
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Network:
    """Validated hyper-parameters of the network of eq. (1)."""

    depth: int
    width: int
    rho: float
    s_w2: float
    s_b2: float
    s_win2: float
    s_bin2: float
    s_wout2: float
    s_bout2: float
    phi: Activation

    @classmethod
    def build(cls, *, depth, width, rho, sigma_w2, sigma_b2, sigma_w2_in, sigma_b2_in,
              sigma_w2_out, sigma_b2_out, activation) -> _Network:
        """Validate arguments; the read-in/read-out variances default to the residual ones."""
        s_w2 = _check_variance("sigma_w2", sigma_w2)
        s_b2 = _check_variance("sigma_b2", sigma_b2)
        return cls(
            depth=_check_int("depth", depth, 1, MAX_DEPTH),
            width=_check_int("width", width, 1, MAX_WIDTH),
            rho=_check_variance("rho", rho),
            s_w2=s_w2,
            s_b2=s_b2,
            s_win2=s_w2 if sigma_w2_in is None else _check_variance("sigma_w2_in", sigma_w2_in),
            s_bin2=s_b2 if sigma_b2_in is None else _check_variance("sigma_b2_in", sigma_b2_in),
            s_wout2=s_w2 if sigma_w2_out is None else _check_variance("sigma_w2_out", sigma_w2_out),
            s_bout2=s_b2 if sigma_b2_out is None else _check_variance("sigma_b2_out", sigma_b2_out),
            phi=resolve_activation(activation),
        )

    def input_kernel(self, X: np.ndarray) -> np.ndarray:
        """C^(0) = s_win2/d_in X X^T + s_bin2, eqs. (16)/(A21)."""
        return self.s_win2 / X.shape[1] * (X @ X.T) + self.s_bin2


# ---------------------------------------------------------------------------
# Sampling kernels
# ---------------------------------------------------------------------------


def _gram(a: np.ndarray) -> np.ndarray:
    """a^T a over the neuron axis for a stack a of shape (S, N, P) -> (S, P, P)."""
    return np.matmul(a.swapaxes(-1, -2), a)


def _affine_factor(A: np.ndarray, bias_var: float) -> np.ndarray:
    """Upper-triangular R (..., k, P) with R^T R = A^T A + bias_var 1 1^T.

    A has shape (..., m, P).  R is the R factor of the QR decomposition of the
    bias-augmented matrix [A; sqrt(bias_var) 1^T], i.e. R^T is the Cholesky
    factor of the Gram matrix.  Householder QR is used instead of Cholesky of
    the Gram matrix because it is backward stable and needs no jitter when the
    Gram matrix is (nearly) singular -- which happens for collinear inputs
    such as the +-delta pairs of the finite-difference response, or for ReLU
    post-activations that vanish.  For P = 1 it reduces to the norm.
    """
    ones = np.full(A.shape[:-2] + (1, A.shape[-1]), math.sqrt(bias_var))
    augmented = np.concatenate([A, ones], axis=-2)
    if A.shape[-1] == 1:
        return np.sqrt(_gram(augmented))
    return np.linalg.qr(augmented, mode="r")  # type: ignore[return-value]  # mode "r": R alone, an ndarray


def _readin_reduced(net: _Network, X: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """h0 for n samples: rows iid N(0, C^(0)), drawn as G R0 (no W_in formed)."""
    R0 = _affine_factor(math.sqrt(net.s_win2 / X.shape[1]) * X.T, net.s_bin2)
    G = rng.standard_normal((n, net.width, R0.shape[0]))
    return G @ R0


def _readin_dense(net: _Network, X: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """h0 = W_in X^T + b_in 1^T with explicitly drawn W_in and b_in."""
    W_in = rng.standard_normal((n, net.width, X.shape[1])) * math.sqrt(net.s_win2 / X.shape[1])
    b_in = rng.standard_normal((n, net.width, 1)) * math.sqrt(net.s_bin2)
    return W_in @ X.T + b_in


def _branch_reduced(net: _Network, phi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """W phi + b for a stack phi (S, N, P), drawn as G R with R^T R = s_w2/N phi^T phi + s_b2."""
    R = _affine_factor(math.sqrt(net.s_w2 / net.width) * phi, net.s_b2)
    G = rng.standard_normal(phi.shape[:-1] + (R.shape[-2],))
    return G @ R


def _branch_dense(net: _Network, phi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """W phi + b with explicitly drawn W (S, N, N) and b (S, N, 1)."""
    n, width = phi.shape[0], net.width
    W = rng.standard_normal((n, width, width)) * math.sqrt(net.s_w2 / width)
    b = rng.standard_normal((n, width, 1)) * math.sqrt(net.s_b2)
    return W @ phi + b


_PATHS = {
    "reduced": (_readin_reduced, _branch_reduced),
    "dense": (_readin_dense, _branch_dense),
}


def _simulate_chunk(net: _Network, X: np.ndarray, n: int, rng: np.random.Generator,
                    method: str) -> dict[str, np.ndarray]:
    """Propagate n independent initialisations through eq. (1), recording the kernels."""
    readin, branch = _PATHS[method]
    N, P, L = net.width, X.shape[0], net.depth
    C = np.empty((n, L + 1, P, P))
    C_emp = np.empty_like(C)
    K_emp = np.empty_like(C)

    h = readin(net, X, n, rng)
    C[:, 0] = net.input_kernel(X)
    C_emp[:, 0] = K_emp[:, 0] = _gram(h) / N
    for layer in range(1, L + 1):
        phi = net.phi(h)
        C[:, layer] = net.rho**2 * (net.s_w2 / N * _gram(phi) + net.s_b2)  # eq. (17)
        f = net.rho * branch(net, phi, rng)
        h = h + f
        C_emp[:, layer] = _gram(f) / N
        K_emp[:, layer] = _gram(h) / N
    K_out = net.s_wout2 / N * _gram(net.phi(h)) + net.s_bout2  # eq. (18)
    return {"C": C, "C_emp": C_emp, "K_emp": K_emp, "K_out": K_out}


def _auto_chunk_size(net: _Network, P: int, d_in: int, method: str) -> int:
    """Samples per chunk so that the largest per-chunk array stays near _CHUNK_BYTES."""
    per_sample = 8 * net.width * (max(net.width, d_in, P) if method == "dense" else 4 * (P + 1))
    return max(1, _CHUNK_BYTES // per_sample)


def _simulate(net: _Network, X: np.ndarray, samples: int, rng: np.random.Generator, method: str,
              chunk_size: int | None) -> dict[str, np.ndarray]:
    """Run all samples in chunks and assemble the result dictionary."""
    _check_result_size(samples, net.depth, X.shape[0])
    size = chunk_size or _auto_chunk_size(net, X.shape[0], X.shape[1], method)
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below, naming the inputs
            parts = [
                _simulate_chunk(net, X, min(size, samples - start), rng, method)
                for start in range(0, samples, size)
            ]
    except OverflowError:  # Python float arithmetic on the variances
        parts = None
    if parts is not None:
        out = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
        with np.errstate(all="ignore"):
            out["K"] = np.cumsum(out["C"], axis=1)
    if parts is None or not all(np.all(np.isfinite(v)) for v in out.values()):
        raise V.ParameterError("X, rho, sigma_w2, sigma_b2, depth", "the simulated kernels leave the float64 range "
                                                                    "(overflow); use values of moderate size")
    return out


@dataclass(frozen=True)
class SimulatedKernels(ResultRecord):
    """:func:`simulate_kernels`: C, C_emp, K, K_emp of shape (samples, depth+1, P, P) and K_out (samples, P, P)."""

    width: int
    depth: int
    C: np.ndarray
    C_emp: np.ndarray
    K: np.ndarray
    K_emp: np.ndarray
    K_out: np.ndarray

    @property
    def samples(self) -> int:
        return int(self.C.shape[0])


def simulate_kernels(
    X,
    *,
    depth: int,
    width: int,
    rho: float,
    sigma_w2: float,
    sigma_b2: float,
    sigma_w2_in: float | None = None,
    sigma_b2_in: float | None = None,
    sigma_w2_out: float | None = None,
    sigma_b2_out: float | None = None,
    activation: str | Activation = "erf",
    samples: int = 1000,
    seed: int | np.random.Generator = 0,
    method: str = "reduced",
    chunk_size: int | None = None,
) -> SimulatedKernels:
    """Simulate the kernels of eq. (1) over ``samples`` independent initialisations.

    Parameters
    ----------
    X : array (P, d_in)
        The P inputs, one per row.
    depth, width : int >= 1
        Number of residual layers L and width N.
    rho : float
        Residual scaling of eq. (2).
    sigma_w2, sigma_b2 : float >= 0
        Residual weight/bias variances; the ``*_in`` / ``*_out`` variances
        default to these (as in the paper's Fig. 2).
    activation : {"erf", "tanh", "relu", "linear", "gelu"} or callable
    samples : int >= 1
    seed : int >= 0 or numpy.random.Generator
    method : {"reduced", "dense"}
        Exact distributional reduction (no weight matrices) or explicit weights.
    chunk_size : int >= 1 or None
        Samples simulated at once (bounds memory); None picks one automatically.

    Returns
    -------
    SimulatedKernels with ``C``, ``C_emp``, ``K``, ``K_emp`` of shape (samples, depth+1, P, P)
    and ``K_out`` of shape (samples, P, P); see the module docstring.
    """
    X = _check_inputs(X)
    net = _Network.build(
        depth=depth, width=width, rho=rho, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
        sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in, sigma_w2_out=sigma_w2_out,
        sigma_b2_out=sigma_b2_out, activation=activation,
    )
    samples = _check_int("samples", samples, 1)
    method = _check_method(method)
    if chunk_size is not None:
        chunk_size = _check_int("chunk_size", chunk_size, 1)
    out = _simulate(net, X, samples, _make_rng(seed), method, chunk_size)
    return SimulatedKernels(width=net.width, depth=net.depth, **out)


# ---------------------------------------------------------------------------
# Finite-difference response functions (Fig. 2b, Fig. 7; eqs. (45), (51))
# ---------------------------------------------------------------------------


def _check_delta(delta, upper: float, what: str) -> float:
    delta = _check_real("delta", delta)
    if not 0 < delta < upper:
        raise V.ParameterError("delta", f"must satisfy 0 < delta < {upper!r} ({what}), got {delta!r}")
    return delta


def finite_difference_response(
    x,
    *,
    delta: float,
    depth: int,
    width: int,
    rho: float,
    sigma_w2: float,
    sigma_b2: float,
    sigma_w2_in: float | None = None,
    sigma_b2_in: float | None = None,
    activation: str | Activation = "erf",
    samples: int = 1000,
    seed: int | np.random.Generator = 0,
    method: str = "reduced",
    chunk_size: int | None = None,
) -> np.ndarray:
    """Per-sample response eta^(l) = dC^(l)/dK^(0) of the diagonal kernel, eq. (51).

    The input ``x`` is rescaled to ``x_-`` and ``x_+`` whose exact input kernels
    are ``K0 -+ delta`` with ``K0 = s_win2/d_in ||x||^2 + s_bin2``; both are
    simulated as one P = 2 batch, so they see the same weights (common random
    numbers) and the joint law is exact also on the reduced path.  Returns
    ``(C_+^(l) - C_-^(l)) / (2 delta)`` of shape (samples, depth+1); index 0 is
    1 by construction.  Requires ``0 < delta < s_win2/d_in ||x||^2``.
    """
    x = _check_vector("x", x)
    net = _Network.build(
        depth=depth, width=width, rho=rho, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
        sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in, sigma_w2_out=None,
        sigma_b2_out=None, activation=activation,
    )
    signal = net.s_win2 / x.size * float(x @ x)  # K0 - s_bin2
    delta = _check_delta(delta, signal, "K0 - sigma_b2_in, so that K0 - delta keeps a positive signal part")
    scales = np.sqrt([(signal - delta) / signal, (signal + delta) / signal])
    result = _simulate(
        net, scales[:, None] * x, _check_int("samples", samples, 1), _make_rng(seed),
        _check_method(method), None if chunk_size is None else _check_int("chunk_size", chunk_size, 1),
    )
    C = result["C"]
    return (C[:, :, 1, 1] - C[:, :, 0, 0]) / (2 * delta)


def _rotated_pair(x1: np.ndarray, x2: np.ndarray, shift: float) -> np.ndarray:
    """x2 rotated in the (x1, x2) plane, keeping ||x2||, so that x1 . x2 changes by -shift and +shift."""
    n1, n2 = np.linalg.norm(x1), np.linalg.norm(x2)
    u = x1 / n1
    v = x2 - (u @ x2) * u
    v /= np.linalg.norm(v)
    cos = (x1 @ x2) / (n1 * n2) + np.array([-shift, shift]) / (n1 * n2)
    return n2 * (cos[:, None] * u + np.sqrt(1.0 - cos**2)[:, None] * v)


def finite_difference_response_offdiag(
    x1,
    x2,
    *,
    delta: float,
    depth: int,
    width: int,
    rho: float,
    sigma_w2: float,
    sigma_b2: float,
    sigma_w2_in: float | None = None,
    sigma_b2_in: float | None = None,
    activation: str | Activation = "erf",
    samples: int = 1000,
    seed: int | np.random.Generator = 0,
    method: str = "reduced",
    chunk_size: int | None = None,
) -> np.ndarray:
    """Per-sample off-diagonal response dC_12^(l)/dK_12^(0) (Fig. 7a).

    ``x2`` is rotated in the plane spanned by ``x1`` and ``x2`` (norms fixed, so
    the diagonal kernels are unperturbed) such that
    ``K_12^(0) = s_win2/d_in x1.x2 + s_bin2`` changes by -delta and +delta.
    ``(x1, x2_-, x2_+)`` are simulated as one P = 3 batch with shared weights.
    Returns ``(C_12,+^(l) - C_12,-^(l)) / (2 delta)`` of shape (samples, depth+1);
    index 0 is 1 by construction.  Requires non-collinear ``x1``, ``x2`` and
    ``delta`` small enough that the rotated overlap stays within the norms.
    """
    x1, x2 = _check_vector("x1", x1), _check_vector("x2", x2)
    if x1.size != x2.size:
        raise ValueError(f"x2: must have the same length as x1 ({x1.size}), got {x2.size}")
    net = _Network.build(
        depth=depth, width=width, rho=rho, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
        sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in, sigma_w2_out=None,
        sigma_b2_out=None, activation=activation,
    )
    if net.s_win2 == 0:
        raise ValueError("sigma_w2_in: must be > 0 for the off-diagonal response, got 0.0")
    n1, n2 = np.linalg.norm(x1), np.linalg.norm(x2)
    sine = math.sqrt(max(0.0, 1.0 - (float(x1 @ x2) / float(n1 * n2)) ** 2)) if n1 * n2 > 0 else 0.0
    if sine < 1e-8:
        raise ValueError("x2: must be nonzero and not collinear with x1 (the rotation plane is undefined)")
    scale = net.s_win2 / x1.size
    headroom = scale * (n1 * n2 - abs(float(x1 @ x2)))
    delta = _check_delta(delta, headroom, "s_win2/d_in (||x1|| ||x2|| - |x1.x2|), so the rotated overlap stays valid")
    X = np.vstack([x1[None], _rotated_pair(x1, x2, delta / scale)])
    result = _simulate(
        net, X, _check_int("samples", samples, 1), _make_rng(seed),
        _check_method(method), None if chunk_size is None else _check_int("chunk_size", chunk_size, 1),
    )
    C = result["C"]
    return (C[:, :, 0, 2] - C[:, :, 0, 1]) / (2 * delta)


# ---------------------------------------------------------------------------
# Summary statistics
# ---------------------------------------------------------------------------


def mean_and_se(a, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sample mean and its standard error std(ddof=1)/sqrt(n) along ``axis``."""
    a = np.asarray(a, dtype=np.float64)
    n = a.shape[axis]
    if n < 2:
        raise ValueError(f"a: needs at least 2 entries along axis {axis} for a standard error, got {n}")
    return a.mean(axis=axis), a.std(axis=axis, ddof=1) / math.sqrt(n)


_SUMMARY_KEYS = ("C", "C_emp", "K", "K_emp", "K_out")


@dataclass(frozen=True)
class MeanSE(ResultRecord):
    """Mean over samples and its standard error (same shape)."""

    mean: np.ndarray
    se: np.ndarray


@dataclass(frozen=True)
class KernelSummary(ResultRecord):
    """:func:`kernel_summary`: mean and SE over samples of each kernel of :class:`SimulatedKernels` (None where
    not requested)."""

    C: MeanSE | None = None
    C_emp: MeanSE | None = None
    K: MeanSE | None = None
    K_emp: MeanSE | None = None
    K_out: MeanSE | None = None


def kernel_summary(result: SimulatedKernels, keys: tuple[str, ...] = _SUMMARY_KEYS) -> KernelSummary:
    """Theory-free summary of :func:`simulate_kernels` output: mean and SE over samples per layer.

    Returns a :class:`KernelSummary` with one :class:`MeanSE` (``mean``, ``se``) per key in ``keys`` (any of
    C, C_emp, K, K_emp, K_out), the sample axis removed, e.g. shape (depth+1, P, P) for ``C``.
    """
    keys = tuple(keys)
    unknown = [k for k in keys if k not in _SUMMARY_KEYS]
    if unknown:
        raise V.ParameterError("keys", f"unknown kernel(s) {unknown}; choose from {list(_SUMMARY_KEYS)}")
    summary = {}
    for key in keys:
        mean, se = mean_and_se(result[key], axis=0)
        summary[key] = MeanSE(mean=mean, se=se)
    return KernelSummary(**summary)
