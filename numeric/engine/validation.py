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
    if value is None or np.iscomplexobj(value):
        raise ParameterError(name, f"must be a real number (or an array of them), got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(name, f"must be numeric, got {value!r}") from None
    if arr.size == 0:
        raise ParameterError(name, f"must not be empty, got shape {arr.shape}")
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
    """Integers in [1, maximum]; booleans are refused (True is not the depth 1)."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (list, tuple, np.ndarray)) and any(
            isinstance(v, (bool, np.bool_)) for v in np.asarray(value, dtype=object).ravel())):
        raise ParameterError(name, f"must be integers >= 1, got a boolean {_brief(value)}")
    arr = _array(name, value)
    if arr.size == 0:
        raise ParameterError(name, "needs at least one depth")
    if (arr < 1).any() or (arr != np.round(arr)).any():
        raise ParameterError(name, f"must be integers >= 1, got {_show(arr[(arr < 1) | (arr != np.round(arr))])}")
    if (arr > maximum).any():
        raise ParameterError(name, f"must be <= {maximum}, got {_show(arr[arr > maximum])}")
    return arr.astype(int)


def integer(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        out, bad = int(value), int(value) < minimum
    else:
        out, bad = None, value is None or isinstance(value, (bool, np.bool_)) or np.iscomplexobj(value)
        if not bad:
            try:
                number = float(value)
                bad = np.ndim(value) != 0 or not number.is_integer() or number < minimum
                out = int(number)
            except (TypeError, ValueError, OverflowError):
                bad = True
    if bad:
        raise ParameterError(name, f"must be an integer >= {minimum}, got {_brief(value)}")
    if maximum is not None and out > maximum:
        raise ParameterError(name, f"must be an integer <= {maximum}, got {_brief(value)}")
    return out


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def scalar(name: str, value, check=None) -> float:
    """A single real number (check: one of positive, nonnegative, real; default real)."""
    arr = (check or real)(name, value)
    if arr.ndim != 0:
        raise ParameterError(name, f"must be a scalar, got shape {arr.shape}")
    return float(arr)


def flag(name: str, value) -> bool:
    """True or False (not a truthy number such as NaN)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(name, f"must be True or False, got {_brief(value)}")
    return bool(value)


def finite_result(names: str, value, what: str) -> None:
    """Raise when a computed result is not finite: the inputs ``names`` lie outside the float64-representable
    range of the result ``what`` (overflow, or inf - inf / 0 * inf), so there is no correct answer to return."""
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ParameterError(names, f"{what} is not finite in float64 for these values (overflow); "
                                    "use values of moderate size")


#: range of alpha_l^2 + lam_l^2 (the Li-Nica-Roy formulas square it; the simulation sums n squares of it)
GROWTH_RANGE = (1e-150, 1e150)


def skip_and_branch(alpha, lam) -> None:
    """alpha_l^2 + lam_l^2, the per-layer growth of a Li-Nica-Roy ResNet, must be > 0 and of moderate size."""
    alpha, lam = np.asarray(alpha, float), np.asarray(lam, float)
    with np.errstate(over="ignore", under="ignore"):
        s2 = np.square(alpha) + np.square(lam)
    if np.any((alpha == 0) & (lam == 0)):
        raise ParameterError("alpha, lam", "alpha = lam = 0 makes the network identically zero; "
                                           "need alpha^2 + lam^2 > 0")
    lo, hi = GROWTH_RANGE
    if not np.all((s2 >= lo) & (s2 <= hi)):
        raise ParameterError("alpha, lam", f"alpha^2 + lam^2 must lie in [{lo:g}, {hi:g}] (the formulas square it), "
                                           f"got {_show(s2[~((s2 >= lo) & (s2 <= hi))])}")


def kernel_matrix(name: str, value, atol: float = 1e-12) -> np.ndarray:
    """A symmetric positive semi-definite matrix (or a batch of them, shape (..., P, P))."""
    arr = _array(name, value)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2] or arr.size == 0:
        raise ParameterError(name, f"must be a non-empty square P x P matrix, got shape {arr.shape}")
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
    if not isinstance(value, str) or value not in allowed:
        raise ParameterError(name, f"unknown value {value!r}; allowed: {', '.join(allowed)}")
    return value


def _show(arr: np.ndarray) -> str:
    flat = np.ravel(arr)
    return ", ".join(f"{v:g}" for v in flat[:4]) + (" ..." if flat.size > 4 else "")
