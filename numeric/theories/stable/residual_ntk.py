"""NNGP and NTK of the residual erf / ReLU network (Fischer et al. 2025 B9-B10 with Hayou et al. 2021 eq. 9).

Network (NTK parameterisation): a read-in with K^(0) = Theta^(0) (the input kernel), then L blocks

    h^(l) = h^(l-1) + rho (sqrt(sigma_w2 / N) W^(l) phi(h^(l-1)) + sqrt(sigma_b2) b^(l)),

whose infinite-width kernels obey, elementwise over pairs of inputs (a, b),

    C^(l)     = rho^2 (sigma_w2 <phi_a phi_b>_{K^(l-1)} + sigma_b2)                       (B9)
    K^(l)     = K^(l-1) + C^(l)                                                            (B10)
    Theta^(l) = Theta^(l-1) + C^(l) + rho^2 sigma_w2 <phi'_a phi'_b>_{K^(l-1)} Theta^(l-1)  (Hayou eq. 9, lambda = rho)

This is the kernel neural-tangents computes for ``serial(FanOut(2), parallel(serial(phi, Dense(W_std =
rho sqrt(sigma_w2), b_std = rho sqrt(sigma_b2))), Identity()), FanInSum())`` repeated L times.

The recursion is the generated one of `derive/residual.py` (`resprop.generated.residual_recursions`) with the
per-layer sequences g = 1, w = rho^2 sigma_w2, s = rho^2 sigma_b2, run by
`resprop.numeric.engine.residual_kernel.propagate` (diagonal first, then row strips of the upper triangle
through blocks of layers on a thread pool; ReLU rescaled between blocks).  This module validates the inputs
and calls it.  The symmetry and PSD test of K0 (a one-thread Cholesky factorisation with the eigvalsh
tolerance of `resprop.numeric.engine.validation.kernel_matrix`, whose error is raised when it fails) runs
on a thread of its own alongside.  See benchmarks/bench_peers_nt.py for the comparison with
neural-tangents.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from resprop.numeric.engine import residual_kernel as RK
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.blas_threads import one_blas_thread
from resprop.numeric.engine.results import ResultRecord

__all__ = ["nngp_ntk", "ACTIVATIONS"]

ACTIVATIONS = ("erf", "relu")
MAX_DEPTH = 10**6  # as field_theory.MAX_DEPTH; one layer costs ~10-50 us at small P




def _kernel_matrix(K0) -> tuple[np.ndarray, Callable[[], bool]]:
    """resprop.numeric.engine.validation.kernel_matrix for one (P, P) matrix, split in two: the cheap checks (shape,
    finite, positive diagonal) run now; the returned ``deferred()`` does the symmetry and PSD tests and
    returns False when they fail (then ``V.kernel_matrix`` decides and raises its usual error), so that it
    can run on a thread of its own alongside the recursion.  The PSD test is a Cholesky factorisation of
    K0 + 1e-10 max(1, max|K0|) I on one BLAS thread (several times cheaper than eigvalsh at P = 1000): it
    succeeds only if the smallest eigenvalue exceeds -1e-10 max(1, max|K0|) (up to round-off), which is
    the eigvalsh criterion."""
    arr = V.real("input_kernel", K0)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.size == 0:
        arr = V.kernel_matrix("input_kernel", arr)  # raises the usual shape error (or a batch: rejected below)
        raise V.ParameterError("input_kernel", f"must be a single (P, P) matrix, got shape {arr.shape}")
    if (np.diagonal(arr) <= 0).any():
        V.kernel_matrix("input_kernel", arr)  # raises (symmetry, PSD or the diagonal)

    def deferred() -> bool:
        scale = max(1.0, float(np.abs(arr).max()))
        if not np.allclose(arr, arr.T, rtol=0, atol=1e-12 * scale):
            return False
        jitter = np.array(arr)
        jitter[np.diag_indices_from(jitter)] += 1e-10 * scale
        try:
            with one_blas_thread():  # threaded BLAS stalls badly when another process holds a core
                np.linalg.cholesky(jitter)
        except np.linalg.LinAlgError:
            return False
        return True

    return arr, deferred


def _scalar(name: str, arr: np.ndarray) -> float:
    if arr.ndim != 0:
        raise V.ParameterError(name, f"must be a scalar, got shape {arr.shape}")
    return float(arr)


@dataclass(frozen=True)
class NNGPNTK(ResultRecord):
    """:func:`nngp_ntk`: K = K^(L) and (with ntk; None otherwise) Theta = Theta^(L), each (P, P)."""

    depth: int
    K: np.ndarray
    Theta: np.ndarray | None = None


def nngp_ntk(input_kernel, depth: int, rho, sigma_w2, sigma_b2, activation: str = "erf", ntk: bool = True,
             Theta0=None) -> NNGPNTK:
    """K^(L) and Theta^(L) of the residual network for a (P, P) input kernel K^(0) = input_kernel.

    Theta0 defaults to input_kernel (read-in layer in NTK parameterisation: Theta^(0) = K^(0)).  With
    ``ntk=False`` only the NNGP is iterated (``Theta`` is None).
    """
    K0, deferred_check = _kernel_matrix(input_kernel)
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    rho, sw, sb = (_scalar(name, check(name, value)) for name, check, value in
                   (("rho", V.nonnegative, rho), ("sigma_w2", V.positive, sigma_w2),
                    ("sigma_b2", V.nonnegative, sigma_b2)))
    act = V.choice("activation", activation, ACTIVATIONS)
    T0 = None
    if ntk:
        T0 = K0
        if Theta0 is not None:
            T0 = V.real("Theta0", Theta0)
            if T0.shape != K0.shape or not np.allclose(T0, T0.T, rtol=0, atol=1e-12 * max(1.0, np.abs(T0).max())):
                raise V.ParameterError("Theta0", f"must be a symmetric matrix of the shape of input_kernel {K0.shape}")
    elif Theta0 is not None:
        raise V.ParameterError("Theta0", "is only used with ntk=True")
    r2 = rho * rho
    with np.errstate(all="ignore"):  # overflow is reported below, naming the inputs
        sequences = (np.ones(L), np.full(L, r2 * sw), np.full(L, r2 * sb))
    if r2 == 0.0:  # rho = 0: every block is the identity
        valid = deferred_check()
        out = {"K": K0.copy()} | ({} if T0 is None else {"Theta": np.array(T0, dtype=float)})
    else:
        with ThreadPoolExecutor(1) as pool, np.errstate(all="ignore"):
            check = pool.submit(deferred_check)
            run = RK.propagate(K0, T0, sequences, "ntk" if ntk else "nngp", RK.recursions(act))
            valid = check.result()
        out = {"K": _scaled(run.K, run.log_scale_K)}
        if ntk:
            assert run.second is not None  # mode "ntk" carries Theta
            out["Theta"] = _scaled(run.second, run.log_scale_second)
    if not valid:
        V.kernel_matrix("input_kernel", K0)  # raises: not symmetric or not positive semi-definite
    for name, value in out.items():
        if not np.all(np.isfinite(value)):
            raise V.ParameterError("rho, sigma_w2, sigma_b2, input_kernel, depth",
                                   f"{name} is not finite in float64 for these values (overflow); "
                                   "use values of moderate size")
    return NNGPNTK(depth=L, **out)


def _scaled(M: np.ndarray, log_scale: float) -> np.ndarray:
    """exp(log_scale) M (ReLU is carried rescaled between blocks of layers); inf when that overflows."""
    if log_scale == 0.0:
        return M
    if log_scale < 700.0:
        return M * math.exp(log_scale)
    half = math.exp(min(log_scale / 2, 709.0))  # the product overflows only where exp(log_scale) M does
    with np.errstate(over="ignore", invalid="ignore"):
        return M * half * half
