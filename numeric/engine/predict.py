"""``resprop.predict``: inference with infinite-width kernels -- the GP posterior and NTK gradient flow.

Given the kernel between training inputs (``k_train``, N x N), between test and training inputs (``k_test``,
M x N) and targets ``y_train`` (N, or N x C):

* **GP posterior** (the NNGP as a Gaussian-process prior, Lee et al. 2018, eq. 3; Rasmussen & Williams 2006,
  eqs. 2.23-2.24) with observation noise / ridge ``regulariser`` = s^2:

      mean     = k_test (K + s^2 I)^-1 y
      variance = k(x, x) - k_test (K + s^2 I)^-1 k_test^T      (diagonal; needs ``k_test_diag``)

* **NTK gradient flow** (Lee et al. 2019, eqs. 8-9 and 15-16; Jacot et al. 2018): the mean prediction of the
  infinitely wide network trained by gradient flow on L = 1/2 sum_i ||f(x_i) - y_i||^2 with learning rate eta,
  from an output of mean zero at initialisation, at time t:

      mean(t) = Theta_test Theta^-1 (I - exp(-eta Theta t)) y

  computed through the eigendecomposition Theta = V diag(lambda) V^T, Theta^-1 (I - exp(-eta Theta t)) =
  V diag((1 - exp(-eta lambda t)) / lambda) V^T (for lambda t -> 0 the factor is eta t; ``t = inf`` is the
  kernel regression Theta_test Theta^-1 y).  With the NNGP blocks (``k_train``, ``k_test``, ``k_test_diag``) the
  variance of eq. 16 is returned too:

      var(t) = K(x, x) + Theta_test A_t K A_t Theta_test^T - 2 Theta_test A_t K_test^T,
      A_t = Theta^-1 (I - exp(-eta Theta t)).

  The loss is the plain sum of squares: neural-tangents' ``gradient_descent_mse`` divides eta by the number of
  training targets ``y_train.size`` (N C), so its time is this t times N C for the same eta.

The regulariser s^2 (absolute, in the units of the kernel) is chosen, when not given, on a validation split of the
training set: ``validation_fraction`` of the training points (seed ``seed``) are held out, the posterior mean of the
rest is computed for s^2 = mean(diag K) x 10^k, k = -12..1 (one eigendecomposition serves the whole grid), and the s^2
with the smallest validation mean squared error is used on the whole training set.

Solvers.  In memory: Cholesky (SciPy ``cho_factor``) for the GP, ``eigh`` for the NTK and the validation grid.
A training kernel that is not an in-memory NumPy array (a ``numpy.memmap`` or a Zarr array, for example the output of
``resprop kernel --out K.zarr``) is never loaded whole: the posterior mean is solved by conjugate gradients with a
matrix-vector product that reads ``block_rows`` rows at a time (memory O(block_rows N)); the variance then needs one
such solve per test point and is computed only for test sets of at most ``MAX_CG_VARIANCE`` points.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord

#: the grid of s^2 / mean(diag K) searched on the validation split
REGULARISER_GRID = tuple(10.0 ** k for k in range(-12, 2))
#: CG stops at this relative residual
CG_RTOL = 1e-10
#: test points for which the out-of-core route computes the variance (one CG solve each)
MAX_CG_VARIANCE = 64


@dataclass(frozen=True)
class Prediction(ResultRecord):
    """:func:`predict`: the posterior mean (M, C) or (M,), its variance (M,) when the test diagonal was given, the
    regulariser used, how it was chosen (``"given"`` or ``"validation"``; the validation MSE of every grid point in
    ``validation_mse``), the solver (``"cholesky"``, ``"eigh"`` or ``"cg"``) and, for the NTK, the time ``t``."""

    mean: np.ndarray
    variance: np.ndarray | None
    regulariser: float
    regulariser_source: str
    solver: str
    mode: str
    t: float | None = None
    validation_grid: np.ndarray | None = None
    validation_mse: np.ndarray | None = None


class BlockView:
    """Rows ``rows`` and columns ``cols`` of a 2-D array read lazily (a Zarr array of ``resprop kernel --out
    K.zarr``, a memmap): ``view[lo:hi]`` reads those rows of the block only, ``view[:]`` all of it.  What
    `predict` takes as an out-of-core ``k_train`` or ``k_test``."""

    def __init__(self, array, rows: slice, cols: slice) -> None:
        self.array = array
        self.r0, self.r1, _ = rows.indices(array.shape[0])
        self.c0, self.c1, _ = cols.indices(array.shape[1])
        self.shape = (self.r1 - self.r0, self.c1 - self.c0)
        self.dtype = np.dtype(array.dtype)

    def __getitem__(self, key) -> np.ndarray:
        if not isinstance(key, slice):
            raise TypeError("BlockView takes a slice of rows")
        lo, hi, step = key.indices(self.shape[0])
        if step != 1:
            raise TypeError("BlockView takes contiguous rows")
        return np.asarray(self.array[self.r0 + lo:self.r0 + hi, self.c0:self.c1])


def _in_memory(A) -> bool:
    return type(A) is np.ndarray


def _matrix(name: str, A, shape: tuple[int | None, int | None]):
    """A 2-D float kernel block: NumPy arrays are checked in full; other array-likes (memmap, Zarr) by shape and
    dtype only (their values are checked block by block as they are read)."""
    if A is None:
        raise V.ParameterError(name, "is required")
    if _in_memory(A) or not (hasattr(A, "shape") and hasattr(A, "dtype")):
        _not_boolean(name, A)
        arr = V.real(name, A)
        if arr.ndim != 2:
            raise V.ParameterError(name, f"must be a 2-D array, got shape {arr.shape}")
    else:  # a memmap or a Zarr array: read block by block later
        if len(A.shape) != 2 or not np.issubdtype(np.dtype(A.dtype), np.floating):
            raise V.ParameterError(name, f"must be a 2-D float array, got shape {tuple(A.shape)} and dtype {A.dtype}")
        arr = A
    for axis, want in enumerate(shape):
        if want is not None and arr.shape[axis] != want:
            raise V.ParameterError(name, f"must have {want} {'rows' if axis == 0 else 'columns'}, got shape "
                                         f"{tuple(arr.shape)}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise V.ParameterError(name, f"must not be empty, got shape {tuple(arr.shape)}")
    return arr


def _not_boolean(name: str, value) -> None:
    if isinstance(value, np.ndarray) and value.dtype.kind == "b":
        raise V.ParameterError(name, "must hold numbers, not booleans (convert with .astype(float) if meant)")


def _targets(y_train, n: int) -> tuple[np.ndarray, bool]:
    _not_boolean("y_train", y_train)
    y = V.real("y_train", y_train)
    vector = y.ndim == 1
    if vector:
        y = y[:, None]
    if y.ndim != 2 or y.shape[0] != n:
        raise V.ParameterError("y_train", f"must have shape ({n},) or ({n}, C) to match k_train, got {y.shape}")
    return np.ascontiguousarray(y), vector


def _symmetric(name: str, K: np.ndarray) -> None:
    scale = float(np.max(np.abs(K)))
    if not np.allclose(K, K.T, rtol=0, atol=1e-10 * max(scale, 1e-300)):
        raise V.ParameterError(name, "must be symmetric (a kernel between the training inputs)")


def _choose_regulariser(K: np.ndarray, y: np.ndarray, fraction: float, seed: int):
    n = K.shape[0]
    n_val = int(round(fraction * n))
    if n_val < 1 or n - n_val < 1:
        raise V.ParameterError("validation_fraction", f"leaves no validation or no fitting point for {n} training "
                                                      f"points (got {fraction!r}); give regulariser instead")
    perm = np.random.default_rng(seed).permutation(n)
    val, fit = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    w, Q = linalg.eigh(K[np.ix_(fit, fit)])
    base = float(np.mean(np.diagonal(K)))
    grid = np.array([base * g for g in REGULARISER_GRID])
    qy = Q.T @ y[fit]
    K_vf = K[np.ix_(val, fit)]
    mse = np.empty(grid.size)
    for i, s2 in enumerate(grid):
        denom = w + s2
        if np.any(denom <= 0):
            mse[i] = np.inf
            continue
        pred = K_vf @ (Q @ (qy / denom[:, None]))
        mse[i] = float(np.mean((pred - y[val]) ** 2))
    best = int(np.argmin(mse))
    if not np.isfinite(mse[best]):
        raise V.ParameterError("k_train", "is not positive semi-definite enough for any regulariser of the grid")
    return float(grid[best]), grid, mse


class _BlockOperator:
    """y -> K y for a kernel that is read ``block_rows`` rows at a time (memmap, Zarr), plus s^2 y."""

    def __init__(self, K, s2: float, block_rows: int) -> None:
        self.K, self.s2, self.block = K, s2, block_rows
        self.n = K.shape[0]

    def __call__(self, v: np.ndarray) -> np.ndarray:
        out = np.empty_like(v)
        for lo in range(0, self.n, self.block):
            rows = np.asarray(self.K[lo:lo + self.block], dtype=float)
            if not np.all(np.isfinite(rows)):
                raise V.ParameterError("k_train", f"has non-finite entries in rows {lo}..{lo + rows.shape[0] - 1}")
            out[lo:lo + rows.shape[0]] = rows @ v
        return out + self.s2 * v


def _cg(op: _BlockOperator, b: np.ndarray) -> np.ndarray:
    """Conjugate gradients for each column of b (the operator is symmetric positive definite for s^2 > 0)."""
    x = np.zeros_like(b)
    r = b - op(x)
    p = r.copy()
    rs = np.sum(r * r, axis=0)
    target = (CG_RTOL ** 2) * np.sum(b * b, axis=0)
    for _ in range(10 * op.n):
        if np.all(rs <= target):
            return x
        Ap = op(p)
        alpha = rs / np.maximum(np.sum(p * Ap, axis=0), 1e-300)
        x += alpha * p
        r -= alpha * Ap
        rs_new = np.sum(r * r, axis=0)
        p = r + (rs_new / np.maximum(rs, 1e-300)) * p
        rs = rs_new
    raise V.ParameterError("regulariser", f"conjugate gradients did not reach a relative residual of {CG_RTOL:g}; "
                                          "use a larger regulariser")


def predict(k_train, y_train, k_test, *, k_test_diag=None, ntk_train=None, ntk_test=None, t=math.inf,
            learning_rate: float = 1.0, regulariser=None, validation_fraction: float = 0.2, seed: int = 0,
            block_rows: int = 2048) -> Prediction:
    """GP posterior (``ntk_train`` None) or NTK gradient-flow prediction at time ``t`` (see the module docstring).

    ``k_train`` (N, N), ``k_test`` (M, N) and ``k_test_diag`` (M,) are NNGP blocks; ``ntk_train``, ``ntk_test`` the
    NTK blocks.  ``regulariser`` s^2 >= 0 (None: chosen on a validation split).  Raises ParameterError (a ValueError
    naming the parameter) for bad input."""
    k_train = _matrix("k_train", k_train, (None, None))
    n = k_train.shape[0]
    if k_train.shape[1] != n:
        raise V.ParameterError("k_train", f"must be square (N x N), got shape {tuple(k_train.shape)}")
    k_test = _matrix("k_test", k_test, (None, n))
    m = k_test.shape[0]
    y, vector = _targets(y_train, n)
    diag = None
    if k_test_diag is not None:
        diag = V.real("k_test_diag", k_test_diag).reshape(-1)
        if diag.shape != (m,):
            raise V.ParameterError("k_test_diag", f"must have shape ({m},) to match k_test, got {diag.shape}")
    learning_rate = V.scalar("learning_rate", learning_rate, V.positive)
    seed = V.integer("seed", seed, minimum=0, maximum=2**63 - 1)
    block_rows = V.integer("block_rows", block_rows, minimum=1)
    fraction = V.scalar("validation_fraction", validation_fraction)
    if not 0 < fraction < 1:
        raise V.ParameterError("validation_fraction", f"must lie in (0, 1), got {validation_fraction!r}")
    if regulariser is not None:
        regulariser = V.scalar("regulariser", regulariser, V.nonnegative)
    if ntk_train is None and ntk_test is not None:
        raise V.ParameterError("ntk_train", "is required with ntk_test")
    if ntk_train is not None:
        return _ntk(k_train, y, k_test, diag, ntk_train, ntk_test, t, learning_rate, regulariser, vector)
    t_given = t is not None and not (isinstance(t, float) and math.isinf(t) and t > 0)
    if t_given:
        raise V.ParameterError("t", "applies to the NTK prediction only (give ntk_train and ntk_test)")
    shape = (m,) if vector else (m, y.shape[1])
    if not _in_memory(k_train) or not _in_memory(k_test):
        return _gp_out_of_core(k_train, y, k_test, diag, regulariser, block_rows, shape)
    _symmetric("k_train", k_train)
    source, grid, mse = "given", None, None
    if regulariser is None:
        regulariser, grid, mse = _choose_regulariser(k_train, y, fraction, seed)
        source = "validation"
    A = k_train + regulariser * np.eye(n)
    try:
        factor = linalg.cho_factor(A, lower=True, check_finite=False)
    except linalg.LinAlgError:
        raise V.ParameterError("regulariser", f"k_train + {regulariser:g} I is not positive definite; use a larger "
                                              "regulariser (or None to choose one)") from None
    alpha = linalg.cho_solve(factor, y, check_finite=False)
    mean = k_test @ alpha
    variance = None
    if diag is not None:
        half = linalg.solve_triangular(factor[0], k_test.T, lower=True, check_finite=False)
        variance = diag - np.sum(half * half, axis=0)
    return Prediction(mean=mean.reshape(shape), variance=variance, regulariser=float(regulariser),
                      regulariser_source=source, solver="cholesky", mode="gp", validation_grid=grid,
                      validation_mse=mse)


def _gp_out_of_core(k_train, y, k_test, diag, regulariser, block_rows, shape) -> Prediction:
    if regulariser is None or regulariser <= 0:
        raise V.ParameterError("regulariser", "must be given and > 0 when k_train is not in memory (conjugate "
                                              "gradients need a positive definite system)")
    op = _BlockOperator(k_train, regulariser, block_rows)
    alpha = _cg(op, y)
    m = k_test.shape[0]
    mean = np.empty((m, y.shape[1]))
    for lo in range(0, m, block_rows):
        mean[lo:lo + block_rows] = np.asarray(k_test[lo:lo + block_rows], dtype=float) @ alpha
    variance = None
    if diag is not None:
        if m > MAX_CG_VARIANCE:
            raise V.ParameterError("k_test_diag", f"the out-of-core variance needs one solve per test point: at most "
                                                  f"{MAX_CG_VARIANCE} test points, got {m}")
        kt = np.asarray(k_test[:], dtype=float)
        sol = _cg(op, np.ascontiguousarray(kt.T))
        variance = diag - np.sum(kt.T * sol, axis=0)
    return Prediction(mean=mean.reshape(shape), variance=variance, regulariser=float(regulariser),
                      regulariser_source="given", solver="cg", mode="gp")


def _ntk(k_train, y, k_test, diag, ntk_train, ntk_test, t, eta, regulariser, vector) -> Prediction:
    n, m = k_train.shape[0], k_test.shape[0]
    if not (_in_memory(k_train) and _in_memory(k_test)):
        raise V.ParameterError("k_train", "the NTK prediction needs the kernels in memory (an eigendecomposition)")
    theta = _matrix("ntk_train", ntk_train, (n, n))
    if ntk_test is None:
        raise V.ParameterError("ntk_test", "is required with ntk_train")
    theta_test = _matrix("ntk_test", ntk_test, (m, n))
    if not (_in_memory(theta) and _in_memory(theta_test)):
        raise V.ParameterError("ntk_train", "the NTK prediction needs the kernels in memory (an eigendecomposition)")
    _symmetric("ntk_train", theta)
    t = V.scalar("t", t, V.nonnegative) if not (isinstance(t, float) and math.isinf(t) and t > 0) else math.inf
    s2 = 0.0 if regulariser is None else float(regulariser)
    w, Q = linalg.eigh(theta + s2 * np.eye(n))
    scale = float(np.max(np.abs(w)))
    if np.any(w <= 1e-14 * scale * n):
        raise V.ParameterError("ntk_train", "is singular to working precision; give a regulariser > 0")
    if math.isinf(t):
        factor = 1.0 / w
    else:
        x = eta * w * t
        factor = np.where(x < 1e-8, eta * t * (1 - x / 2), -np.expm1(-x) / w)
    At = (Q * factor) @ Q.T  # Theta^-1 (I - exp(-eta Theta t))
    B = theta_test @ At       # (M, N)
    mean = B @ y
    variance = None
    if diag is not None:
        _symmetric("k_train", k_train)
        variance = diag + np.einsum("ij,jk,ik->i", B, k_train, B) - 2 * np.einsum("ij,ij->i", B, k_test)
    shape = (m,) if vector else (m, y.shape[1])
    return Prediction(mean=mean.reshape(shape), variance=variance, regulariser=s2,
                      regulariser_source="given" if regulariser is not None else "none", solver="eigh", mode="ntk",
                      t=float(t))


__all__ = ["predict", "Prediction", "REGULARISER_GRID"]
