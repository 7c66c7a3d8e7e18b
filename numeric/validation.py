"""Input validation at the public boundary: every error names the parameter and the allowed range."""
from __future__ import annotations

from typing import Iterable

import numpy as np


class ParameterError(ValueError):
    """A bad value for a named parameter."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.parameter = name


def _array(name: str, value) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(name, f"must be numeric, got {value!r}") from None
    if np.isnan(arr).any():
        raise ParameterError(name, "must not be NaN")
    if np.isinf(arr).any():
        raise ParameterError(name, "must be finite, got inf")
    return arr


def positive(name: str, value) -> np.ndarray:
    arr = _array(name, value)
    if (arr <= 0).any():
        raise ParameterError(name, f"must be > 0 (allowed range (0, inf)), got {_show(arr[arr <= 0])}")
    return arr


def nonnegative(name: str, value) -> np.ndarray:
    arr = _array(name, value)
    if (arr < 0).any():
        raise ParameterError(name, f"must be >= 0 (allowed range [0, inf)), got {_show(arr[arr < 0])}")
    return arr


def real(name: str, value) -> np.ndarray:
    return _array(name, value)


def depths(name: str, value, maximum: int = 10**6) -> np.ndarray:
    arr = _array(name, value)
    if arr.size == 0:
        raise ParameterError(name, "needs at least one depth")
    if (arr < 1).any() or (arr != np.round(arr)).any():
        raise ParameterError(name, f"must be integers >= 1, got {_show(arr[(arr < 1) | (arr != np.round(arr))])}")
    if (arr > maximum).any():
        raise ParameterError(name, f"must be <= {maximum}, got {_show(arr[arr > maximum])}")
    return arr.astype(int)


def integer(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not float(value).is_integer() or int(value) < minimum:
        raise ParameterError(name, f"must be an integer >= {minimum}, got {value!r}")
    return int(value)


def kernel_matrix(name: str, value, atol: float = 1e-12) -> np.ndarray:
    """A symmetric positive semi-definite matrix (or a batch of them, shape (..., P, P))."""
    arr = _array(name, value)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2]:
        raise ParameterError(name, f"must be a square P x P matrix, got shape {arr.shape}")
    scale = max(1.0, float(np.abs(arr).max()))
    if not np.allclose(arr, np.swapaxes(arr, -1, -2), rtol=0, atol=atol * scale):
        raise ParameterError(name, "must be symmetric")
    eig = np.linalg.eigvalsh(arr)
    if (eig < -1e-10 * scale).any():
        raise ParameterError(name, f"must be positive semi-definite; smallest eigenvalue {eig.min():.3g}")
    if (np.diagonal(arr, axis1=-2, axis2=-1) <= 0).any():
        raise ParameterError(name, "diagonal (variances) must be > 0")
    return arr


def covariance_pair(name: str, k_diag, k_off) -> None:
    """|K_ab| <= K_aa for a 2x2 kernel [[K_aa, K_ab], [K_ab, K_aa]]."""
    if (np.abs(k_off) > k_diag * (1 + 1e-12)).any():
        raise ParameterError(name, f"must satisfy |k0_offdiag| <= k0 (PSD 2x2 kernel), got {_show(k_off)} with k0 {_show(k_diag)}")


def choice(name: str, value: str, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ParameterError(name, f"unknown value {value!r}; allowed: {', '.join(allowed)}")
    return value


def _show(arr: np.ndarray) -> str:
    flat = np.ravel(arr)
    return ", ".join(f"{v:g}" for v in flat[:4]) + (" ..." if flat.size > 4 else "")
