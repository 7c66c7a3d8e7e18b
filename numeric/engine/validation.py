"""Input validation at the public boundary: every error names the parameter and the allowed range.

This is the one validation layer of resprop.  The generated kernels' domain checks (``generated/_domain.py`` is
a re-export of :func:`as_float`, :func:`interval`, :func:`covariance`, :func:`constraint` and
:func:`kernel_result`), the drivers' checks (:func:`positive`, :func:`integer`, ...) and the check of a value
against a declared parameter (:func:`check`, used by ``Parameter.validate`` and the CLI's
``add_parameter_option``) all live here and raise :class:`ParameterError`.  The domain strings of the
declarations (``"(0, inf)"``, ``"[0, 1)"``, ``"real"``, ``"|K_ab| <= sqrt(K_aa K_bb)"``) are parsed by
:func:`parse_domain` (re-exported by ``resprop.derive.results``).
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from resprop.domains import COVARIANCE_RTOL, Domain, parse_domain  # noqa: F401  (the kernels' checks use them)


class ParameterError(ValueError):
    """A bad value for a named parameter."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.parameter = name


def _array(name: str, value) -> np.ndarray:
    if isinstance(value, (str, bytes)):  # "1.5" is text, not a number (np.asarray(..., float) would parse it)
        raise ParameterError(name, f"must be a real number (or an array of them), got the string {_brief(value)}")
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, np.ndarray) and value.dtype.kind == "b"
                                                and value.ndim == 0):
        raise ParameterError(name, f"must be a real number (or an array of them), got a boolean {_brief(value)}")
    try:
        complex_ = value is not None and np.iscomplexobj(value)
    except (TypeError, ValueError):  # a ragged nested sequence
        raise ParameterError(name, f"must be numeric (a number or a rectangular array), got {_brief(value)}") from None
    if value is None or complex_:
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
        out, bad = None, (value is None or isinstance(value, (bool, np.bool_, str, bytes))
                          or np.iscomplexobj(value))
        if not bad:
            try:
                number = float(value)
                bad = np.ndim(value) != 0 or not number.is_integer() or number < minimum
                out = int(number)
            except (TypeError, ValueError, OverflowError):
                bad = True
    if bad:
        raise ParameterError(name, f"must be an integer >= {minimum}, got {_brief(value)}")
    assert out is not None  # set whenever bad is False
    if maximum is not None and out > maximum:
        raise ParameterError(name, f"must be an integer <= {maximum}, got {_brief(value)}")
    return out


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def scalar(name: str, value, check=None) -> float:
    """A single real number (check: one of positive, nonnegative, real; default real); booleans are refused
    (True is not the number 1)."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, np.ndarray) and value.dtype.kind == "b"):
        raise ParameterError(name, f"must be a real number, got a boolean {_brief(value)}")
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
        raise ParameterError(name, f"must satisfy |k0_offdiag| <= k0 (PSD 2x2 kernel), got {_show(k_off)} "
                                   f"with k0 {_show(k_diag)}")


def choice(name: str, value: str, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise ParameterError(name, f"unknown value {value!r}; allowed: {', '.join(allowed)}")
    return value


def _show(arr: np.ndarray) -> str:
    flat = np.ravel(arr)
    return ", ".join(f"{v:g}" for v in flat[:4]) + (" ..." if flat.size > 4 else "")



# ---------------------------------------------------------------------------
# Domain checks of the generated kernels (generated/_domain.py re-exports these)
# ---------------------------------------------------------------------------



def _show_exact(values) -> str:
    flat = np.ravel(values)
    text = ", ".join(repr(float(v)) for v in flat[:4])
    return text + (" ..." if flat.size > 4 else "")


def as_float(name, value, domain):
    """``value`` as a float64 array: numeric, not NaN, not infinite."""
    raw = value if isinstance(value, np.ndarray) else np.asarray(value)
    if raw.dtype.kind not in "biuf" and not (raw.dtype.kind == "O" and raw.size and all(
            isinstance(v, (int, float, np.integer, np.floating)) for v in raw.ravel())):
        raise ParameterError(name, f"must be a real number (or an array of them) in {domain}, got {value!r:.60}")
    try:
        arr = raw.astype(np.float64, copy=False)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(name, f"must be a real number in {domain}, got {value!r:.60}") from None
    if not np.isfinite(arr).all():
        bad = arr[~np.isfinite(arr)]
        raise ParameterError(name, f"must be a finite number in {domain}, got {_show_exact(bad)}")
    return arr


def interval(name, value, lo, hi, lo_closed, hi_closed, domain):
    """float64 array of ``value`` in the interval (lo, hi) with the given closed ends."""
    arr = as_float(name, value, domain)
    ok = (arr >= lo if lo_closed else arr > lo) & (arr <= hi if hi_closed else arr < hi)
    if not ok.all():
        raise ParameterError(name, f"must lie in {domain}, got {_show_exact(arr[~ok])}")
    return arr


def covariance(name, value, var_a, var_b, domain):
    """float64 array of ``value`` with |value| <= sqrt(var_a var_b) up to a relative round-off of
    COVARIANCE_RTOL, clipped into [-sqrt(var_a var_b), sqrt(var_a var_b)]."""
    arr = as_float(name, value, domain)
    bound = np.sqrt(var_a) * np.sqrt(var_b)
    ok = np.abs(arr) <= bound * (1.0 + COVARIANCE_RTOL)
    if not ok.all():
        bad = np.broadcast_to(arr, ok.shape)[~ok]
        raise ParameterError(name, f"must satisfy {domain} (relative round-off {COVARIANCE_RTOL:g} allowed), "
                                   f"got {_show_exact(bad)}")
    return np.clip(arr, -bound, bound)


def constraint(ok, names, text):
    """A compound condition on several inputs (e.g. alpha^2 + lam^2 > 0)."""
    if not np.all(ok):
        raise ParameterError(names, f"must satisfy {text}")


def kernel_result(function, names, value):
    """The kernel's value; inf or NaN from finite in-domain input is a float64 overflow of ``function``."""
    if not np.isfinite(value).all():
        raise ParameterError(names, f"{function} is not finite in float64 for these values (overflow); "
                                    "use values of moderate size")
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


# ---------------------------------------------------------------------------
# A value against a declared parameter (resprop.derive.symbols.Parameter, or anything with name and domain)
# ---------------------------------------------------------------------------

#: integers beyond this are not exact in float64 (an integer parameter given as a float must stay below it)
MAX_EXACT_FLOAT_INT = 2**53
_INT64 = np.iinfo(np.int64)


def _is_bool(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "b" or (value.dtype.kind == "O" and any(
            isinstance(v, (bool, np.bool_)) for v in value.ravel()))
    if isinstance(value, (list, tuple)):
        try:
            return any(isinstance(v, (bool, np.bool_)) for v in np.asarray(value, dtype=object).ravel())
        except (TypeError, ValueError):
            return False
    return False


@dataclass(frozen=True)
class Declared:
    """A parameter declaration without its SymPy symbol: the run-time copy that ``generated/parameters.py``
    holds of each ``resprop.derive.symbols.Parameter`` (so the CLI and the drivers read the declarations without
    importing SymPy).  Same fields as the declaration; :func:`check` accepts either."""

    name: str
    domain: str
    meaning: str
    convention: str = ""
    latex: str = ""
    integer: bool = False
    layer: str = ""

    def validate(self, value, name: str | None = None):
        return check(self, value, name)

    def describe(self) -> str:
        text = f"{self.meaning}; {describe(self)}"
        return f"{text} ({self.convention})" if self.convention else text


def describe(parameter) -> str:
    """'a real number in <domain>' or 'an integer in <domain>': what a declared parameter accepts ('any finite
    real number' for the domain 'real', which is not an interval to quote)."""
    kind = "an integer" if getattr(parameter, "integer", False) else "a real number"
    if parameter.domain == "real":
        return f"any finite {kind.split(' ', 1)[1]}"
    return f"{kind} in {parameter.domain}"


def check(parameter, value, name: str | None = None):
    """``value`` checked against the declaration ``parameter`` (its ``domain`` string and ``integer`` flag).

    Refused with a :class:`ParameterError` naming ``name`` (default ``parameter.name``) and the allowed range:
    None, strings and other non-numeric values, booleans (True is not 1), complex numbers, empty arrays, NaN,
    inf, values outside the domain (closed and open ends exact) and, for an integer parameter, non-integral
    values, integers beyond int64 and integers given as floats beyond 2^53 (not exact in float64).  The
    messages have the kernels' form, e.g. ``gamma: must lie in [0, 1), got 1.0``.

    Returns a Python float (int for an integer parameter) for a scalar, else a float64 (int64) array.  A
    covariance domain (``|K_ab| <= sqrt(K_aa K_bb)``) needs the variances: only finiteness is checked here.
    """
    name = parameter.name if name is None else name
    domain = parse_domain(parameter.domain)
    integer = bool(getattr(parameter, "integer", False))
    if value is None or _is_bool(value) or np.iscomplexobj(value) or isinstance(value, (str, bytes)):
        raise ParameterError(name, f"must be {describe(parameter)}, got {_brief(value)}")
    raw = None if isinstance(value, numbers.Number) else value if isinstance(value, np.ndarray) else np.asarray(value)
    if raw is not None and raw.size == 0:
        raise ParameterError(name, f"must not be empty ({describe(parameter)}), got shape {raw.shape}")
    if integer:
        ints = _integers(name, value, raw, domain.text)
        if ints is not None:
            ok = np.vectorize(domain.contains, otypes=[bool])(ints.astype(np.float64))
            if not np.all(ok):
                bad = np.ravel(ints[~ok])
                raise ParameterError(name, f"must lie in {domain.text}, got "
                                           + ", ".join(str(int(v)) for v in bad[:4]) + (" ..." if bad.size > 4 else ""))
            return int(ints) if ints.ndim == 0 else ints
    if domain.kind == "interval":
        arr = interval(name, value, domain.lo, domain.hi, domain.lo_closed, domain.hi_closed, domain.text)
    else:
        arr = as_float(name, value, domain.text)
    if integer:  # given as floats: integral and exact in float64
        frac = arr != np.round(arr)
        if frac.any():
            raise ParameterError(name, f"must be an integer in {domain.text}, got {_show_exact(arr[frac])}")
        big = np.abs(arr) > MAX_EXACT_FLOAT_INT
        if big.any():
            raise ParameterError(name, f"must be an integer in {domain.text} given exactly (an int, or a float "
                                       f"<= 2^53), got {_show_exact(arr[big])}")
        out = arr.astype(np.int64)
        return int(out) if out.ndim == 0 else out
    return float(arr) if arr.ndim == 0 else arr


def _integers(name, value, raw, domain):
    """An int64 array when ``value`` is given as integers (Python ints, NumPy integers, integer arrays or
    lists of ints), None when it is given otherwise (floats: checked as floats); refuses ints beyond int64."""
    if isinstance(value, numbers.Integral):
        items = [int(value)]
    elif raw is not None and raw.dtype.kind in "iu":
        if raw.dtype.kind == "u" and raw.size and int(raw.max()) > _INT64.max:
            raise ParameterError(name, f"must be an integer in {domain} within int64 (|n| < 2^63), "
                                       f"got {int(raw.max())}")
        return raw.astype(np.int64)
    elif raw is not None and raw.dtype.kind == "O" and all(isinstance(v, numbers.Integral) for v in raw.ravel()):
        items = [int(v) for v in raw.ravel()]
    else:
        return None
    big = [v for v in items if not _INT64.min <= v <= _INT64.max]
    if big:
        raise ParameterError(name, f"must be an integer in {domain} within int64 (|n| < 2^63), got {_brief(big[0])}")
    return np.asarray(value if raw is None else raw, dtype=np.int64)
