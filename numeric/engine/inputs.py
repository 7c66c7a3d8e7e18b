"""Inputs X of ``resprop.kernel`` / ``resprop kernel``: read a ``.npy`` file safely and check the memory up front.

:func:`read_inputs` reads the ``.npy`` header first (``numpy.lib.format``; never a pickle) and refuses, before
the data are read or any P x P array is allocated, with a :class:`~resprop.numeric.engine.validation.ParameterError`
naming the option:

* a file that is not a ``.npy`` array (empty, another format, a bad header);
* an object (pickled) or structured dtype, strings, complex numbers and booleans (``True`` is not the feature
  value 1: convert with ``X.astype(float)`` if that is what is meant); integer and floating dtypes are read as
  float64; C and Fortran order are both fine;
* a shape that is not 2-D (P inputs, d_in features) with P >= 1 and d_in >= 1;
* a file shorter than its header says (truncated, or a header claiming more elements than the file holds);
* P inputs whose kernels would not fit in the available memory (:func:`check_kernel_memory`);
* NaN or infinite entries.

:func:`check_inputs` is the same check for an in-memory X (``resprop.kernel`` calls it before K^(0) is formed),
refusing ragged and non-numeric X with an error naming ``X``.

Memory.  ``resprop.kernel`` works in place: K^(0) (and its copy Theta^(0)) become the results, each tile's state
is a view of them, and they are mirrored and rescaled in place.  Peak traced allocations (tracemalloc) at
P = 2000, depth 3: 1.13-1.26 x 8 P^2 bytes for the NNGP and 2.13-2.30 x 8 P^2 with the NTK (erf, relu, tanh; the
extra 0.13 is the boolean finiteness check); the tabulated general path (tanh with unequal norms) adds its
per-layer data and their construction, ~0.9 x 8 P^2 at P = 2000 but bounded by ``GENERAL_BYTES`` per block, not
growing like P^2.  :data:`PEAK_FACTOR` (1.5 and 2.5) plus :data:`ALLOWANCE` (128 MiB) covers both.
Available memory is MemAvailable of
/proc/meminfo (else ``SC_AVPHYS_PAGES x SC_PAGE_SIZE``); when neither is known the memory check is skipped.
"""
from __future__ import annotations

import math
import os
import stat

import numpy as np

from resprop.numeric.engine.validation import ParameterError

__all__ = ["read_inputs", "check_inputs", "check_kernel_memory", "kernel_bytes", "available_memory",
           "PEAK_FACTOR"]

#: peak bytes of resprop.kernel in units of one float64 P x P array (8 P^2 bytes): NNGP only / with the NTK
PEAK_FACTOR = {False: 1.5, True: 2.5}
#: bytes beyond PEAK_FACTOR x 8 P^2: the per-layer data of the general path and the temporaries of a few tiles
ALLOWANCE = 128 * 2**20


def available_memory() -> int | None:
    """Bytes the system can give a new allocation without swapping: MemAvailable of /proc/meminfo, else
    ``SC_AVPHYS_PAGES * SC_PAGE_SIZE``; None when neither is known."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def kernel_bytes(P: int, ntk: bool) -> int:
    """Peak bytes :func:`resprop.kernel` needs for P inputs (see :data:`PEAK_FACTOR`)."""
    return int(math.ceil(PEAK_FACTOR[bool(ntk)] * 8 * P * P)) + ALLOWANCE


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def check_kernel_memory(P: int, ntk: bool, extra: int = 0, name: str = "X") -> int:
    """Refuse (ParameterError naming ``name``) P inputs whose kernels need more memory than is available.

    Needed: :func:`kernel_bytes` (``PEAK_FACTOR`` x 8 P^2) plus ``extra`` bytes (e.g. X itself while it is read).
    Returns the bytes needed."""
    P = int(P)
    need = kernel_bytes(P, ntk) + int(extra)
    have = available_memory()
    if have is not None and need > have:
        what = "NNGP and NTK" if ntk else "NNGP"
        raise ParameterError(name, f"P = {P} inputs: the {what} (P x P float64) need about {need} bytes "
                                   f"({_size(need)}) but only {have} bytes ({_size(have)}) are available; "
                                   "use fewer inputs")
    return need


def _refuse_dtype(name: str, dtype: np.dtype, where: str) -> None:
    if dtype.hasobject:
        raise ParameterError(name, f"{where}holds Python objects (dtype {dtype}); resprop reads numeric arrays only "
                                   "and never unpickles; save a float array")
    if dtype.names is not None or dtype.subdtype is not None:
        raise ParameterError(name, f"{where}has a structured dtype {dtype}; need a plain (P, d_in) float array")
    if dtype.kind == "b":
        raise ParameterError(name, f"{where}is a boolean array; need real numbers (True is not the value 1: "
                                   "convert with X.astype(float) if that is meant)")
    if dtype.kind == "c":
        raise ParameterError(name, f"{where}is complex (dtype {dtype}); need real numbers")
    if dtype.kind not in "iuf":
        raise ParameterError(name, f"{where}is not numeric (dtype {dtype}); need real numbers")


def _refuse_shape(name: str, shape: tuple, where: str) -> None:
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise ParameterError(name, f"{where}must be a non-empty 2-D array (P >= 1 inputs, d_in >= 1 features), "
                                   f"got shape {tuple(shape)}")


def _finite(name: str, X: np.ndarray, where: str) -> None:
    bad = ~np.isfinite(X)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ParameterError(name, f"{where}must be finite, got {X[i, j]} at row {i}, column {j}")


def check_inputs(X, ntk: bool = False, name: str = "X", check_memory: bool = True) -> np.ndarray:
    """X as a float64 (P, d_in) array, checked: numeric and real (not ragged, strings, booleans or complex),
    2-D with P, d_in >= 1, finite, and (``check_memory``) the kernels of P inputs fit in the available memory
    (not asked when they go to disk)."""
    if isinstance(X, np.ndarray):
        arr = X
    else:
        try:
            arr = np.asarray(X)
        except (TypeError, ValueError) as exc:  # ragged nested lists
            raise ParameterError(name, f"must be a (P, d_in) array of real numbers; could not read it as one "
                                       f"({' '.join(str(exc).split())[:120]})") from None
    if arr.dtype.hasobject:  # a list of numbers with None, a ragged object array, ...
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError, OverflowError):
            raise ParameterError(name, "must be a (P, d_in) array of real numbers (not ragged, no None or other "
                                       "objects)") from None
    _refuse_dtype(name, arr.dtype, "")
    _refuse_shape(name, arr.shape, "")
    if check_memory:
        check_kernel_memory(arr.shape[0], ntk, name=name)
    arr = np.asarray(arr, dtype=np.float64)
    _finite(name, arr, "")
    return arr


def read_inputs(path, ntk: bool = False, name: str = "inputs", check_memory: bool = True) -> np.ndarray:
    """The (P, d_in) float64 array of a ``.npy`` file, checked from its header before the data are read (see the
    module docstring); ``ntk``: whether the run also computes the NTK (the memory check); ``check_memory=False``:
    the kernels go to disk, only X itself must fit."""
    where = f"{path}: "
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise ParameterError(name, f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    with fh:
        try:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ParameterError(name, f"{where}is not a regular file")
            fmt = np.lib.format
            try:
                version = fmt.read_magic(fh)
                if version == (1, 0):
                    shape, fortran, dtype = fmt.read_array_header_1_0(fh)
                elif version == (2, 0):
                    shape, fortran, dtype = fmt.read_array_header_2_0(fh)
                else:  # 3.0: numpy.save writes it only for structured dtypes with non-ASCII field names
                    raise ParameterError(name, f"{where}is a .npy file of format version {version[0]}.{version[1]} "
                                               "(a structured dtype); need a plain (P, d_in) float array")
            except (ValueError, EOFError, SyntaxError, TypeError) as exc:
                raise ParameterError(name, f"{where}is not a .npy array file ({' '.join(str(exc).split())[:120]})") \
                    from None
            _refuse_dtype(name, dtype, where)
            _refuse_shape(name, shape, where)
            P, d = (int(v) for v in shape)
            count = P * d
            data_bytes = count * dtype.itemsize
            held = st.st_size - fh.tell()
            if held < data_bytes:
                raise ParameterError(name, f"{where}is truncated: its header says shape {tuple(shape)} of {dtype} "
                                           f"({data_bytes} bytes of data) but the file holds {held}")
            # X as read and as float64, then the kernels
            if check_memory:
                check_kernel_memory(P, ntk, extra=data_bytes + 8 * count, name=name)
            else:
                need, have = data_bytes + 8 * count, available_memory()
                if have is not None and need > have:
                    raise ParameterError(name, f"{where}X needs {_size(need)} (as read and as float64) but only "
                                               f"{_size(have)} of memory are available")
            raw = np.fromfile(fh, dtype=dtype, count=count)
        except OSError as exc:
            raise ParameterError(name, f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    if raw.size != count:
        raise ParameterError(name, f"{where}is truncated: read {raw.size} of {count} elements")
    X = raw.reshape((P, d), order="F" if fortran else "C").astype(np.float64, copy=False)
    _finite(name, X, where)
    return X
