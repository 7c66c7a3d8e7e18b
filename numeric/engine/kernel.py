"""``resprop.kernel``: the infinite-width NNGP (and NTK) of a residual network for a set of inputs.

The architecture, exactly (docs/kernel.md has the same statement with the neural-tangents equivalent):

* read-in  h^(0) = W_in x + b_in,  W_in ~ N(0, sigma_w^2 / d_in),  b_in ~ N(0, sigma_b^2):
  K^(0) = sigma_w^2 (x . x') / d_in + sigma_b^2, and Theta^(0) = K^(0) (the read-in is trained too);
* ``depth`` = L residual blocks, l = 1..L (the one depth convention of resprop: depth counts the residual
  layers after the input; depth = 0 returns K^(0)),
  h^(l) = gamma h^(l-1) + lambda_l (W^(l) phi(h^(l-1)) + b^(l)),  W^(l) ~ N(0, sigma_w^2 / n), b^(l) ~ N(0, sigma_b^2),
  in the NTK parameterisation (weights N(0, 1) times sigma / sqrt(fan-in)):

    K     <- gamma^2 K     + lambda_l^2 (sigma_w^2 <phi phi> + sigma_b^2)
    Theta <- gamma^2 Theta + lambda_l^2 (sigma_w^2 <phi phi> + sigma_b^2 + sigma_w^2 <phi' phi'> Theta)

  (Fischer et al. 2025 B9-B10 with gamma = 1, lambda = rho; Hayou et al. 2021 eq. 9 with lambda = lambda_{l,L});
* no readout: the result is the kernel of the residual stream h^(L).  ``readout=True`` adds the final dense
  layer y = W_out phi(h^(L)) + b_out with the same sigma_w^2 / n and sigma_b^2 (Fischer et al. 2025 eq. 1: the
  readout acts on phi of the stream): K_out = sigma_w^2 <phi phi> + sigma_b^2,
  Theta_out = K_out + sigma_w^2 <phi' phi'> Theta^(L), i.e. one more layer with gamma = 0 and lambda = 1.

``gamma = 0`` (with lambda = 1) is a plain fully connected network, h^(l) = W^(l) phi(h^(l-1)) + b^(l): the NNGP of
Lee et al. (2018) with L hidden layers is ``kernel(X, act, depth=L, ..., gamma=0)`` (its output layer is the L-th
block), and ``readout=True`` there is the same as depth L + 1.
``branch_scale`` is lambda: a number, an array of length depth, or a SymPy expression in ``l`` (1..L) and ``L``
such as ``"1/sqrt(L)"`` (Stable ResNet).  The recursions are the generated ones
(`resprop.generated.residual_recursions`), run by :mod:`resprop.numeric.engine.residual_kernel`.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import sympy as sp

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.residual_kernel import propagate, recursions

MAX_DEPTH = 10**6
#: P^2 d from which K^(0) is computed in bands on the engine's threads (`_input_kernel_bands`); P = 1000, d = 100
#: is 1e8.  Below it one syrk (a small one measured the same either way)
SYRK_ONE_THREAD = 1 << 22
#: row bands of the upper triangle in `_input_kernel_bands`
SYRK_BANDS = 16
_l, _L = sp.symbols("l L", positive=True, integer=True)
#: inputs that decide whether the kernels stay in float64 range (named when they do not)
_RANGE_NAMES = "X, sigma_w2, sigma_b2, gamma, branch_scale, depth"
_RANGE_NAMES_TUPLE = tuple(_RANGE_NAMES.split(", "))


@lru_cache(maxsize=64)
def _scale_expression(text: str) -> sp.Expr:
    bad = V.ParameterError("branch_scale", f"must be a number, an array of length depth or a SymPy expression in "
                                           f"l and L such as 1/sqrt(L), got {text!r}")
    if "__" in text:  # sympify evaluates its input: no dunder access from a user string
        raise bad
    try:
        expr = sp.sympify(text, locals={"l": _l, "L": _L})
    except Exception:  # noqa: BLE001  (SympifyError, SyntaxError, TokenError, ...)
        raise bad from None
    if not isinstance(expr, sp.Expr) or not expr.free_symbols <= {_l, _L} or expr.has(sp.zoo, sp.nan):
        raise bad
    return expr


def branch_scales(branch_scale, depth: int) -> np.ndarray:
    """lambda_l for l = 1..depth from a number, an array of length depth or a SymPy expression in l and L."""
    if isinstance(branch_scale, str):
        expr = _scale_expression(branch_scale.strip())
        fn = sp.lambdify((_l, _L), expr, "numpy")
        with np.errstate(all="ignore"):
            try:
                values = np.asarray(fn(np.arange(1, depth + 1, dtype=float), float(depth)))
            except Exception:  # noqa: BLE001  (an expression NumPy cannot evaluate)
                values = np.array(np.nan)
        if not np.isrealobj(values):
            raise V.ParameterError("branch_scale", f"lambda_(l,L) = {branch_scale!r} must be real for l = 1..{depth}")
        values = np.broadcast_to(values.astype(float), (depth,))
        if not np.all(np.isfinite(values)):
            raise V.ParameterError("branch_scale", f"lambda_(l,L) = {branch_scale!r} is not finite for some "
                                                   f"l in 1..{depth}")
        return values.copy()
    values = V.real("branch_scale", branch_scale)
    if values.ndim == 0:
        return np.full(depth, float(values))
    if values.shape != (depth,):
        raise V.ParameterError("branch_scale", f"an array must have shape (depth,) = ({depth},), got {values.shape}")
    return values.copy()


def input_kernel(X, sigma_w2, sigma_b2) -> np.ndarray:
    """K^(0) = sigma_w^2 X X^T / d_in + sigma_b^2 for inputs X of shape (P, d_in)."""
    X = V.real("X", X)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise V.ParameterError("X", f"must be a non-empty 2-D array (P inputs, d_in features), got shape {X.shape}")
    K0 = X @ X.T  # one P x P array, scaled in place (no temporaries of its size; the same roundings as
    K0 *= float(sigma_w2)  # sigma_w2 * (X @ X.T) / d_in + sigma_b2)
    K0 /= X.shape[1]
    K0 += float(sigma_b2)
    return K0


def _input_kernel_upper(X: np.ndarray, sigma_w2: float, sigma_b2: float) -> np.ndarray:
    """K^(0) of `input_kernel` with only its upper triangle (diagonal included) computed; below the diagonal it
    holds values the engine never reads (it reads the upper triangle only and mirrors its results).  The same values
    as `input_kernel` to round-off.

    Below SYRK_ONE_THREAD products, one BLAS syrk (sigma_w2 / d_in X X^T + sigma_b2: half the products of X X^T,
    sigma_w2 / d_in applied to the dot product; sigma_b2 below the diagonal).  Above, `_input_kernel_bands`."""
    from scipy.linalg import blas

    P, d = X.shape
    if P * P * d >= SYRK_ONE_THREAD:
        return _input_kernel_bands(X, sigma_w2, sigma_b2)
    K0 = np.full((P, P), float(sigma_b2))
    # K0.T is Fortran-ordered: syrk's "lower" triangle of it is K0's upper triangle; trans=1 on X.T gives X X^T
    done = blas.dsyrk(float(sigma_w2) / d, np.asarray(X, dtype=np.float64).T, beta=1.0, c=K0.T, trans=1, lower=1,
                      overwrite_c=1)
    if not np.shares_memory(done, K0):  # pragma: no cover - a BLAS wrapper that copied: take its result
        K0 = np.ascontiguousarray(done.T)
    return K0


def _input_kernel_bands(X: np.ndarray, sigma_w2: float, sigma_b2: float) -> np.ndarray:
    """`_input_kernel_upper` for large inputs: the upper triangle in row bands (`residual_kernel.strips`, about
    SYRK_BANDS of them: a fixed split, so the values do not depend on the thread count), band rows lo:hi and
    columns lo:P by one GEMM of the band's rows scaled by sigma_w2 / d_in against the rows lo:P, written in place
    (numpy's matmul with ``out=`` a view of K^(0)), then sigma_b2 added; the bands on the engine's threads with one
    BLAS thread each.  No copy of X (an augmented copy would be (d_in + 1) / P of the output: 10% at P = 1000,
    d_in = 100).

    Why not one threaded syrk: OpenBLAS leaves its worker threads spinning for ~0.1 s after a threaded call, on the
    cores the engine's pool is about to use (`blas_threads`), and one single-threaded syrk took 28 ms of a 95 ms
    call (erf NNGP + NTK, P = 4000, L = 50, equal norms).  K^(0) starts as np.zeros (pages mapped on first write, by
    the band's thread); below the diagonal it is 0 except inside each band's diagonal block."""
    from concurrent.futures import ThreadPoolExecutor

    from resprop.numeric.engine.blas_threads import one_blas_thread
    from resprop.numeric.engine.residual_kernel import strips, workers

    P, d = X.shape
    X = np.ascontiguousarray(X, dtype=np.float64)
    alpha, bias = float(sigma_w2) / d, float(sigma_b2)
    K0 = np.zeros((P, P))
    bands = strips(P, max(1, P * P // (2 * SYRK_BANDS)))

    def band(rows: tuple[int, int]) -> None:
        lo, hi = rows
        out = K0[lo:hi, lo:]
        with np.errstate(over="ignore", invalid="ignore"):
            np.matmul(X[lo:hi] * alpha, X[lo:].T, out=out)  # the band's rows scaled: an (hi - lo) x d temporary
            out += bias

    n = min(workers(), len(bands))
    with one_blas_thread():
        if n > 1:
            with ThreadPoolExecutor(n) as pool:
                list(pool.map(band, bands))
        else:
            for rows in bands:
                band(rows)
    return K0


def _bounded(X: np.ndarray, sigma_w2: float, sigma_b2: float, limit: float = 1e300) -> bool:
    """True when every |K^(0)_ab| <= sigma_w2 |x_a| |x_b| / d_in + sigma_b2 (Cauchy-Schwarz) is far below the float64
    range, so that K^(0) is finite without looking at its P x P values."""
    with np.errstate(over="ignore", invalid="ignore"):
        norms2 = np.einsum("ij,ij->i", X, X)
        bound = float(sigma_w2) / X.shape[1] * float(np.max(norms2)) + float(sigma_b2)
    return bool(np.isfinite(bound) and bound < limit)


def _all_finite(M: np.ndarray, rows: int | None = None) -> bool:
    """np.all(np.isfinite(M)) a block of rows at a time (no P x P temporary: the output stays the peak); by default
    blocks of P / 32 rows, whose boolean temporary is 1/256 of M's bytes whatever P."""
    rows = max(1, M.shape[0] // 32) if rows is None else rows
    return all(bool(np.isfinite(M[i:i + rows]).all()) for i in range(0, M.shape[0], rows))


def _scaled(M: np.ndarray, log_scale: float) -> np.ndarray:
    """M exp(log_scale), in place (M is the engine's own output).  The engine's scales are powers of two
    (log_scale = k ln 2): then M 2^k by ldexp, exact, so that the result overflows exactly when its value does."""
    if log_scale != 0.0:
        k = round(log_scale / math.log(2.0))
        if k * math.log(2.0) == log_scale:
            np.ldexp(M, k, out=M)
        else:
            M *= np.exp(log_scale)
    return M


def kernel(X, activation, depth: int, sigma_w2, sigma_b2, gamma=1.0, branch_scale=1.0, ntk: bool = False,
           readout: bool = False, progress: bool | None = None, out=None, dtype: str = "float64",
           tile: int | None = None, workers: int | None = None, scheduler: str | None = None,
           backend: str = "auto", collapse: bool = True):
    """The (P, P) NNGP K^(L) of the residual network for inputs X (P, d_in) after ``depth`` residual blocks; with
    ``ntk=True`` the tuple (NNGP, NTK); with ``readout=True`` the kernels of the dense readout
    y = W_out phi(h^(L)) + b_out instead (see the module docstring for the architecture).

    ``activation``: erf, relu, tanh, gelu, silu, linear or a SymPy expression in x (``"sin(x)"``,
    ``"x*exp(-x**2/2)"``).  erf, ReLU and GELU use their generated closed-form dual kernels; an expression
    whose dual SymPy finds in closed form (sin, cos, ...) gets its recursion generated at run time from the
    same template; others the tabulated recursion (a rho interpolant per layer when every input has the same
    norm, the chunked general path otherwise).
    Piecewise activations as a user writes them (``abs(x)``, ``Max(x, 0)``, ``Min(x, 0)``, ``sign(x)``,
    ``Heaviside(x)``, ``floor(x)``, ``ceiling(x)``, ``frac(x)``, ``Piecewise(...)`` with polynomial pieces) are
    checked once by ``activation_check.check_activation`` (real and finite for real x, x only, growth, breakpoints
    located by SymPy); Max(x, 0), x*Heaviside(x) and a Piecewise ReLU are the closed-form ``relu``, the others are
    tabulated by ``piecewise_duals`` (breakpoint-aware quadrature, ~1e-12 relative; floor up to variance ~39).
    A discontinuous activation (sign, Heaviside, floor) has an NNGP but no NTK: phi' contains a Dirac delta, so
    ``ntk=True`` raises ParameterError naming ``activation``; kinks (abs, Max) have a finite NTK.
    Raises ParameterError (a ValueError naming the parameter) for bad input and when a kernel leaves the
    float64 range.
    ``progress``: a tqdm bar on stderr over strips x layers, shown once a run has lasted a second (shorter runs
    print nothing); None (the default) shows it only when stderr is a terminal, False never, True always (the
    CLI: unless ``--quiet``).

    Kernels of any size (`resprop.numeric.engine.kernel_store`): with ``out="K.zarr"`` (a Zarr store with the
    arrays ``nngp`` and, with ``ntk``, ``ntk``) or ``out="K.npy"`` (the NNGP through a memory map) the upper
    triangle is computed tile by tile (``tile``, default 2048) and written to disk, never held in memory; the
    stored values are float64 or ``dtype="float32"`` (computed in float64).  A .zarr run interrupted keeps its
    finished tiles and a rerun with the same inputs and options completes it.  ``workers=N`` computes the tiles
    on a local Dask cluster of N processes, ``scheduler="tcp://host:port"`` on an existing one (bit-identical
    results).  Returns the output's path then.  ``tile`` without ``out`` cuts the in-memory run into square
    tiles of that side instead of its default strips (the same result to round-off).

    ``backend``: "auto" (default: the fused compiled kernels where Numba is available -- erf, ReLU, GELU, and the
    tabulated activations where a layer's inputs share one norm -- the NumPy kernels otherwise), "compiled"
    (ParameterError naming ``backend`` for an activation without compiled kernels, e.g. a closed form generated at
    run time such as sin(x)) or "numpy" (the generated ufunc kernels, the reference).  Both agree to round-off.
    ``collapse``: when the inputs' norms take at most 8 values and the network is deep enough to pay, the L-layer
    map of a pair is built once as a certified piecewise Chebyshev interpolant (to 1e-13 of the largest entry,
    exact at correlation +-1) and evaluated over the triangle (`depth_collapse`; in memory and with ``out``; not
    for ReLU or tabulated activations); False runs every layer for every pair.
    """
    if progress is None:
        import sys

        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    depth = V.integer("depth", depth, minimum=0, maximum=MAX_DEPTH)
    sw = V.scalar("sigma_w2", sigma_w2, V.positive)
    sb = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    g = V.scalar("gamma", gamma, V.real)
    ntk = V.flag("ntk", ntk)
    collapse = V.flag("collapse", collapse)
    readout = V.flag("readout", readout)
    lam = branch_scales(branch_scale, depth)
    from resprop.numeric.engine.inputs import check_inputs  # X: 2-D, real, finite; P x P results fit in memory

    on_disk = out is not None
    if not on_disk and (workers is not None or scheduler is not None):
        raise V.ParameterError("workers, scheduler", "a Dask cluster writes into a store: give out='K.zarr' too")
    if tile is not None:
        tile = V.integer("tile", tile, minimum=1, maximum=1 << 20)
    X = check_inputs(X, ntk, check_memory=not on_disk)
    if on_disk:
        return _kernel_on_disk(X, activation, depth, sw, sb, g, lam, ntk, readout, progress, out, dtype, tile,
                               workers, scheduler, branch_scale, _backend(backend), collapse)
    K0 = _input_kernel_upper(X, sw, sb)  # upper triangle only: the engine mirrors its results
    if not (_bounded(X, sw, sb) or _all_finite(K0)):
        raise V.ParameterError("X, sigma_w2", "K^(0) = sigma_w2 X X^T / d_in + sigma_b2 is not finite in float64")
    if np.any(np.diagonal(K0) <= 0):
        raise V.ParameterError("X", "every input needs K^(0)_aa > 0 (a zero input with sigma_b2 = 0 has no "
                                    "correlation)")
    rec = recursions(str(activation), _backend(backend))
    if ntk and rec.expr is not None:  # a jump (sign, Heaviside, floor): phi' has a Dirac delta, no finite NTK
        from resprop.numeric.engine.activation_check import check_activation

        check_activation(rec.expr).require_finite_dphi()
    if depth == 0 and not readout:
        from resprop.numeric.engine.mirror import mirror_tile

        mirror_tile(K0, 0, K0.shape[0], 0, K0.shape[0])
        return (K0, K0.copy()) if ntk else K0
    sequences = _sequences(depth, g, lam, sw, sb, readout)
    with np.errstate(all="ignore"):
        try:
            # Theta^(0) = K^(0) passed as K0 itself: the engine copies it only where it needs to
            out = propagate(K0, K0 if ntk else None, sequences, "ntk" if ntk else "nngp", rec,
                            progress=bool(progress), in_place=True, tile=tile, collapse=collapse)
        except V.ParameterError as exc:  # a tabulated expectation given an overflowed variance (parameter d, ...)
            if exc.parameter == "activation" or exc.parameter.split(",")[0].strip() in _RANGE_NAMES_TUPLE:
                raise
            raise V.ParameterError("activation, " + _RANGE_NAMES, f"a layer's variance left the range where the "
                                   f"expectations of this activation are computed ({exc}); use a smaller X, "
                                   "sigma_w2, sigma_b2, branch_scale or depth") from None
        results = [_scaled(out.K, out.log_scale_K)]
        if ntk:
            assert out.second is not None
            results.append(_scaled(out.second, out.log_scale_second))
    checked = (out.finite is True and out.log_scale_K == 0.0
               and (not ntk or out.log_scale_second == 0.0))  # the engine checked while mirroring
    for name, value in zip(("NNGP", "NTK"), results):
        if not checked and not _all_finite(value):
            raise V.ParameterError(_RANGE_NAMES, f"the {name} is not finite in float64 for these values (overflow); "
                                                 "use values of moderate size")
    return tuple(results) if ntk else results[0]


def _sequences(depth: int, g: float, lam: np.ndarray, sw: float, sb: float, readout: bool):
    lam2 = lam * lam
    skip, weight, bias = np.full(depth, g * g), lam2 * sw, lam2 * sb
    if readout:  # the dense readout on phi(h^(L)): one more layer with gamma = 0, lambda = 1
        skip, weight, bias = np.append(skip, 0.0), np.append(weight, sw), np.append(bias, sb)
    return skip, weight, bias


def _backend(backend) -> str:
    from resprop.numeric.engine.residual_kernel import BACKENDS

    if not isinstance(backend, str) or backend not in BACKENDS:
        raise V.ParameterError("backend", f"must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def _kernel_on_disk(X, activation, depth, sw, sb, g, lam, ntk, readout, progress, out, dtype, tile, workers,
                    scheduler, branch_scale, backend="auto", collapse=True):
    """`kernel` with ``out``: the kernels written tile by tile by `kernel_store.write_kernel`."""
    from resprop.numeric.engine import kernel_store

    rec = recursions(str(activation), backend)
    options = {"activation": str(activation), "depth": depth, "sigma_w2": sw, "sigma_b2": sb, "gamma": g,
               "branch_scale": [float(v) for v in lam] if not isinstance(branch_scale, str) else branch_scale,
               "ntk": ntk, "readout": readout, "backend": rec.backend}
    net = kernel_store.Network(X, sw, sb, rec, _sequences(depth, g, lam, sw, sb, readout), "ntk" if ntk else "nngp",
                               options)
    d0 = net.diagonal0()
    if not np.all(np.isfinite(d0)):
        raise V.ParameterError("X, sigma_w2", "K^(0) = sigma_w2 X X^T / d_in + sigma_b2 is not finite in float64")
    if np.any(d0 <= 0):
        raise V.ParameterError("X", "every input needs K^(0)_aa > 0 (a zero input with sigma_b2 = 0 has no "
                                    "correlation)")
    if ntk and rec.expr is not None:
        from resprop.numeric.engine.activation_check import check_activation

        check_activation(rec.expr).require_finite_dphi()
    with np.errstate(all="ignore"):
        return kernel_store.write_kernel(net, out, dtype=dtype, tile=kernel_store.TILE if tile is None else tile,
                                         workers=workers, scheduler=scheduler, progress=bool(progress),
                                         collapse=collapse)


__all__ = ["kernel", "branch_scales", "input_kernel"]
