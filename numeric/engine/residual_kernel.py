"""Driver of the generated residual recursions: NNGP, NTK and response of a P x P input kernel at any depth.

The recursions themselves are generated (`resprop.generated.residual_recursions`, from
`derive/residual.py`): one function per activation and mode runs all layers of a block of the kernel with
in-place ufunc calls.  This module only prepares their inputs and calls them:

1. the diagonal K_aa^(l) (and Theta_aa, chi_aa) is iterated first, for a block of layers, by the generated
   ``*_diagonal*`` recursion, recording every layer;
2. the upper triangle is cut into row strips of about ``STRIP`` elements (each stays in cache), and every strip
   is taken through the block of layers by the generated ``*_nngp*`` recursion on a thread pool (NumPy
   releases the GIL; element (a, b) needs only its own state and the diagonals of the previous layer);
3. blocks of ``block`` layers keep the per-layer diagonals at O(block P) memory, so depth 10^5 at P = 1000 is
   fine; between blocks a positively homogeneous activation (ReLU) is rescaled by the largest diagonal
   element (the recursion is homogeneous of degree one in (K, Theta, sigma_b^2)), and the response by its
   own largest diagonal element (it is linear), so that nothing overflows: the scales are returned as logs.

Activations: the closed forms of the generated module (``erf``, ``relu``, ...); every other activation (a
name such as ``tanh`` or a SymPy expression in x) goes through the generated *tabulated* recursion, whose
expectations are callbacks into `resprop.numeric.engine.dual_tables` (a rho interpolant per layer when all
diagonals are equal, the general path otherwise).  Everything those callbacks read is built per layer, ONCE,
before the strips of the block run (`_Tables`: the layer's table, or the Hermite coefficients of all P diagonal
values) and only read by the threads, so no setting -- strip, block, thread count, cache sizes -- changes a
result beyond round-off (tests/test_kernel_chunking.py checks 1e-13 of the largest entry).

Cost with unequal norms (tanh, P = 1000, L = 50, NNGP + NTK, 2-core machine): ~15-20x the equal-norm run.  Per
layer the general path pays the Hermite coefficients of the P values (~30 ms, one BLAS thread), the diagonal
moments E[phi^2], E[phi'^2] at P values (dual_tables.diagonal, ~30-60 ms) and the Mehler series per element
(~23 terms on average for Gaussian inputs in dim 10, ~2.3 ns per term and ~60 ns of per-element level selection
and sorting: ~120 ns per element) against ~8-20 ns for a rho table; see BENCHMARKS.md (kernel with unequal norms).
"""
from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import sympy as sp

import resprop.generated.residual_recursions as gen

MODES = ("nngp", "ntk", "response")
#: target elements per strip (512 KiB per float64 buffer: measured fastest on the 2-core dev machine,
#: against 8192..131072; smaller strips pay more Python call overhead per element)
STRIP = 65536
#: bytes of per-layer diagonals kept at once (sets the block of layers)
DIAGONAL_BYTES = 32 * 2**20
#: upper-triangle elements below which one thread is used
THREAD_MIN = 20_000
#: diagonals within this relative spread count as equal (one dual-kernel table per layer)
EQUAL_DIAGONAL_RTOL = 1e-13
#: bytes of general-path diagonal data (Hermite coefficients of every diagonal value, per layer) held at once:
#: with unequal diagonals a block of layers ends when its data would exceed it
GENERAL_BYTES = 8 * 2**20
#: series terms per diagonal value assumed when choosing that block (tanh at K_aa ~ 1-3 needs ~310)
GENERAL_TERMS = 384
#: target relative error of the tabulated expectations (rho tables and the general path's series)
RTOL = 1e-10
#: seconds before a progress bar appears (shorter runs print nothing)
PROGRESS_DELAY = 1.0
#: activations whose recursions are homogeneous of degree one in (K, Theta, sigma_b^2)
HOMOGENEOUS = ("relu",)
#: most layers between two rescalings (a block may grow the state by at most ~2^block for the unscaled ReLU)
HOMOGENEOUS_BLOCK = 256


@dataclass(frozen=True)
class ActivationRecursions:
    """The generated functions of one activation: ``pair[mode]`` and ``diagonal[mode]``; ``expr`` is the SymPy
    expression of a tabulated activation (None for a closed form)."""

    name: str
    pair: dict[str, Callable]
    diagonal: dict[str, Callable]
    expr: sp.Expr | None = None


def _functions(module, prefix: str) -> tuple[dict[str, Callable], dict[str, Callable]]:
    suffix = {"nngp": "", "ntk": "_ntk", "response": "_response"}
    pair = {m: getattr(module, f"{prefix}_nngp{s}") for m, s in suffix.items()}
    diag = {m: getattr(module, f"{prefix}_diagonal{s}") for m, s in suffix.items()}
    return pair, diag


def closed_form_names() -> tuple[str, ...]:
    """Activations with generated closed-form recursions (read from the generated module)."""
    return tuple(sorted({name.rsplit("_nngp", 1)[0] for name in gen.RECURSIONS
                         if name.endswith("_nngp") and not name.startswith("tabulated")}))


@cache
def recursions(activation: str) -> ActivationRecursions:
    """The recursions of a named activation or of a SymPy expression in x (given as text)."""
    if activation in closed_form_names():
        return ActivationRecursions(activation, *_functions(gen, activation))
    from resprop.derive.closed_forms import closed_form_dual
    from resprop.numeric.engine.activation_check import check_activation

    checked = check_activation(activation)  # the one check of a user's activation (ParameterError naming it)
    expr = checked.expr
    if checked.relu:  # Max(x, 0), x*Heaviside(x), a Piecewise ReLU: the generated closed form
        return ActivationRecursions("relu", *_functions(gen, "relu"))
    if checked.piecewise:  # abs, sign, Heaviside, floor, ...: tabulated by piecewise_duals (see _duals_module)
        from resprop.numeric.engine.piecewise_duals import duals

        duals(expr)  # refuses what the piecewise route cannot handle (non-polynomial pieces) now
        return ActivationRecursions(activation, *_functions(gen, "tabulated"), expr=expr)
    forms = closed_form_dual(expr)
    if forms is not None:  # sin, cos, ... : generate their recursions now, from the same template
        return ActivationRecursions(activation, *_functions(_runtime_module(expr, forms), "custom"))
    try:
        import resprop.numeric.engine.dual_tables  # noqa: F401
    except ImportError:  # pragma: no cover - an install without the tabulated expectations
        from resprop.numeric.engine.validation import ParameterError

        raise ParameterError("activation", f"{activation!r} has no closed form and the tabulated expectations "
                                           "(resprop.numeric.engine.dual_tables) are not installed") from None
    return ActivationRecursions(activation, *_functions(gen, "tabulated"), expr=expr)


def _runtime_module(expr: sp.Expr, forms: dict):
    """Render and load the recursions of a closed-form activation given at run time (not written to disk)."""
    import types

    from resprop.derive.closed_forms import stable_dual
    from resprop.derive.codegen import render_recursion_module
    from resprop.derive.residual import from_closed_form, recursions_for
    from resprop.derive.results import Derivation

    # the same functions in float64-safe form (merged exponents, expm1): finite at K ~ 1e3, exact digits at 1e-8
    recs = recursions_for(from_closed_form(str(expr), stable_dual(expr) or forms), prefix="custom")
    d = Derivation("custom", f"Residual recursions of phi(x) = {expr}", "fischer2025")
    source = render_recursion_module(d, "(run time)", recs)
    mod = types.ModuleType("resprop.generated.custom_recursions")
    exec(compile(source, f"<recursions of {expr}>", "exec"), mod.__dict__)
    return mod


# --------------------------------------------------------------------------- tabulated expectations
class _Tables:
    """Callbacks of the tabulated recursion for a block of layers.  Per layer: a rho interpolant when the diagonal
    is constant over the inputs (to ``EQUAL_DIAGONAL_RTOL``), else the general path's diagonal data of all P
    diagonal values (`dual_tables.general_data`: Hermite coefficients of every value, or the tables of every
    pair when there are at most ``MAX_TABLE_PAIRS``).  Everything is built here, ONCE per layer and before any
    strip runs, and only read by the strips' threads afterwards: there is no shared cache to race on, and each
    element's value depends only on the element and its layer's diagonal, not on the strips, blocks or threads.

    The per-layer data is built for the layers of ``diag`` in order (``pool``: a few layers at a time in
    parallel) until it holds more than ``budget`` bytes; ``n_layers`` says how many were built, and the caller
    runs only those layers in this block."""

    def __init__(self, expr: sp.Expr, diag: np.ndarray, pool: ThreadPoolExecutor | None = None, step: int = 1,
                 budget: int | None = None, moments: _DiagonalMoments | None = None) -> None:
        self.dt = _duals_module(expr)  # dual_tables, or piecewise_duals (same interface) for abs, sign, floor, ...
        self.expr = expr
        self.known = moments
        budget = GENERAL_BYTES if budget is None else budget
        self.layers: list[tuple[Any, np.ndarray | None]] = []  # (DualTable, None) or (diagonal data, value index)
        nbytes, n, L = 0, 0, diag.shape[0]
        step = 1 if pool is None else max(1, step)
        while n < L and (n == 0 or nbytes <= budget):
            batch = range(n, min(L, n + step))
            built = (list(pool.map(lambda l: self._layer(l, diag[l]), batch)) if pool
                     else [self._layer(l, diag[l]) for l in batch])
            for entry in built:
                self.layers.append(entry)
                if entry[1] is not None:
                    nbytes += entry[0].nbytes + entry[1].nbytes
            n += len(batch)
        self.n_layers = len(self.layers)

    def _layer(self, l: int, d: np.ndarray) -> tuple[Any, np.ndarray | None]:
        # equal up to round-off (unit-norm inputs differ by ulps): one table at the mean; the change of the
        # expectation is O(spread) relative, far below the tables' 1e-10
        if np.max(np.abs(d - d[0])) <= EQUAL_DIAGONAL_RTOL * np.max(np.abs(d)):
            m = float(np.mean(d))
            return self.dt.build_table(self.expr, m, m, RTOL), None
        values = np.unique(d)
        smooth = self.dt.__name__.endswith(".dual_tables")  # piecewise_duals takes no moments
        known = None if self.known is None or not smooth else self.known.moments(l, values)
        if known is None:
            data = self.dt.general_data(self.expr, values, RTOL, cache=False)
        else:  # the tails need E[phi^2], E[phi'^2]: the diagonal recursion has just computed them
            data = self.dt.general_data(self.expr, values, RTOL, cache=False, moments=known)
        return data, np.searchsorted(data.values, d)

    def for_strip(self, lo: int, hi: int, want_dphi: bool = True) -> dict[str, Callable]:
        """The callbacks of the strip of rows lo:hi (columns lo:P); ``want_dphi``: the recursion also calls
        mean_dphi_dphi (the general path then evaluates both at once and keeps E[phi' phi'] for that call)."""
        stash: dict[int, np.ndarray] = {}
        layers, strip = self.layers, self.dt.mean_phi_phi_strip

        def mean_phi_phi(l, rho, out):
            obj, index = layers[l]
            if index is None:
                return obj.mean_phi_phi(rho, out)
            if want_dphi:
                dphi = np.empty_like(out)
                strip(obj, index[lo:hi], index[lo:], rho, out, dphi)
                stash[l] = dphi
            else:
                strip(obj, index[lo:hi], index[lo:], rho, out)
            return out

        def mean_dphi_dphi(l, rho, out):
            obj, index = layers[l]
            if index is None:
                return obj.mean_dphi_dphi(rho, out)
            if l in stash:
                out[...] = stash.pop(l)
            else:
                strip(obj, index[lo:hi], index[lo:], rho, np.empty_like(out), out)
            return out

        return {"mean_phi_phi": mean_phi_phi, "mean_dphi_dphi": mean_dphi_dphi}

    @staticmethod
    @cache  # custom_kernels differentiates and simplifies in SymPy (~0.1 s): once per activation
    def price_callback(expr: sp.Expr) -> Callable:
        """<phi'^2 + phi phi''> at each K (1-D), the response mode's diagonal callback."""
        from resprop.numeric.engine import dual_tables as dt_smooth
        from resprop.numeric.engine.expectations import custom_kernels

        duals = _duals_module(expr)

        def callback(l, K, out):
            values, inverse = np.unique(K, return_inverse=True)
            price = (duals.price_diag(expr, values) if duals is not dt_smooth
                     else custom_kernels(expr).price_diag(values))
            out[...] = np.asarray(price)[inverse].reshape(K.shape)
            return out
        return callback


class _DiagonalMoments:
    """Callbacks of the diagonal recursion of a tabulated activation for one block of layers: <phi^2>, <phi'^2>
    (both from ONE call of `dual_tables.diagonal` per layer, on the distinct values) and, for the response,
    <phi'^2 + phi phi''>.  The moments of layer l are kept (``moments(l, values)``) for the general path's tails,
    which need exactly these numbers.  Used by one thread (the diagonal runs before the strips)."""

    def __init__(self, expr: sp.Expr) -> None:
        self.expr = expr
        self.by_layer: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.callbacks = {"mean_phi_sq": self._callback(1), "mean_dphi_sq": self._callback(2),
                          "price_diag": _Tables.price_callback(expr)}

    def moments(self, l: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        hit = self.by_layer.get(l)
        return (hit[1], hit[2]) if hit is not None and np.array_equal(hit[0], values) else None

    def _callback(self, which: int) -> Callable:
        duals = _duals_module(self.expr)

        def callback(l, K, out):
            values, inverse = np.unique(K, return_inverse=True)
            hit = self.by_layer.get(l)
            if hit is None or not np.array_equal(hit[0], values):
                hit = (values, *duals.diagonal(self.expr, values))
                self.by_layer[l] = hit
            out[...] = hit[which][inverse].reshape(K.shape)
            return out
        return callback


def _duals_module(expr: sp.Expr):
    """The module of the tabulated expectations of ``expr``: piecewise_duals for a piecewise activation (abs,
    sign, floor, ...; same interface: build_table, mean_phi_phi_general, diagonal, price_diag), else dual_tables."""
    from resprop.numeric.engine import dual_tables, piecewise_duals
    from resprop.numeric.engine.activation_check import check_activation

    return piecewise_duals if check_activation(expr).piecewise else dual_tables


# --------------------------------------------------------------------------- strips
def strips(P: int, target: int = STRIP) -> list[tuple[int, int]]:
    """Row bands [lo, hi) covering the upper triangle; band k holds rows lo:hi, columns lo:P."""
    out, lo, tail = [], 0, max(8, int(math.sqrt(target)) // 2)
    while lo < P:
        n = P - lo
        h = max(1, min(n, target // n))
        if n - h < tail:
            h = n
        out.append((lo, lo + h))
        lo += h
    return out


def workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


@dataclass(frozen=True)
class Propagated:
    """K^(L) and the second state (Theta^(L) or chi^(L), None for the NNGP), each as exp(log_scale) times the
    array; ``layers`` (L + 1 entries, each (K, second)) when recorded."""

    K: np.ndarray
    second: np.ndarray | None
    log_scale_K: float
    log_scale_second: float
    layers: list | None = None


def propagate(K0: np.ndarray, second0: Any, sequences: tuple[np.ndarray, np.ndarray, np.ndarray],
              mode: str, rec: ActivationRecursions, record_layers: bool = False, strip: int = STRIP,
              block: int | None = None, progress: bool = False, in_place: bool = False) -> Propagated:
    """Run the generated recursions of ``rec`` from K^(0) (and Theta^(0) or chi^(0)) through the layers given
    by the per-layer ``sequences`` (skip_gain, branch_weight, branch_bias), each of length L.

    Inputs are assumed validated (float64, symmetric, PSD).  The state of every strip is carried between blocks
    of layers; the diagonal is run first for each block.  ``progress``: a tqdm bar on stderr over
    strips x layers (shown after one second).  ``in_place``: K0 (and second0) are overwritten and returned as
    K^(L) (and the second state): each strip's state is a view of its rows of them, so that the run holds no P x P
    array beyond its inputs (peak: the two outputs plus the per-layer data and one strip's temporaries per
    thread); otherwise the inputs are left alone and the outputs are new arrays."""
    g, w, s = (np.asarray(q, dtype=float) for q in sequences)
    L, P = g.size, K0.shape[0]
    pair_fn, diag_fn = rec.pair[mode], rec.diagonal[mode]
    two = mode != "nngp"
    homogeneous = rec.name in HOMOGENEOUS
    if block is None:
        block = max(1, min(L, DIAGONAL_BYTES // (8 * P * 3)))
        if homogeneous or mode == "response":  # rescaled between blocks: each block must stay in range
            block = min(block, HOMOGENEOUS_BLOCK)
        d0 = np.diagonal(K0)
        if rec.expr is not None and np.max(np.abs(d0 - d0[0])) > EQUAL_DIAGONAL_RTOL * np.max(np.abs(d0)):
            # unequal diagonals: the general path's data (P x ~300 Hermite coefficients per layer) fills
            # GENERAL_BYTES; a block of that many layers (_Tables shortens it if the series need more terms)
            block = min(block, max(1, GENERAL_BYTES // (8 * P * GENERAL_TERMS)))
    bands = strips(P, strip)
    d = np.diagonal(K0).astype(float).copy()
    sd: Any = np.diagonal(second0).astype(float).copy() if two else None
    log_K = log_S = 0.0
    layers = [(K0.copy(), None if second0 is None else second0.copy())] if record_layers else None
    S_out: Any
    if in_place:
        if not (K0.dtype == np.float64 and (not two or second0.dtype == np.float64)):
            raise TypeError("in_place needs float64 inputs")
        K_out, S_out = K0, (second0 if two else None)
    else:
        K_out = np.array(K0, dtype=float)
        S_out = np.array(second0, dtype=float) if two else None
    # each strip's state: a view of its rows (lo:hi, columns lo:P) of the output, written back after each block
    K_strips = [K_out[lo:hi, lo:] for lo, hi in bands]
    S_strips: Any = [S_out[lo:hi, lo:] for lo, hi in bands] if two else None
    n_workers = min(workers(), len(bands)) if P * (P - 1) // 2 >= THREAD_MIN else 1
    pool = ThreadPoolExecutor(n_workers) if n_workers > 1 else None
    bar = _progress_bar(L * len(bands)) if progress else None
    # BLAS (the general path's Hermite coefficients, ~P x 400 x 400 per layer) runs one thread: our pool already
    # uses the cores, and two-thread OpenBLAS measured 3-10x slower per call on a loaded 2-core machine
    blas = _one_blas_thread() if rec.expr is not None else contextlib.nullcontext()
    blas.__enter__()
    want = set(_callback_names(pair_fn))
    start = 0
    try:
        while start < L:
            stop = min(L, start + block)
            gb, wb, sb = g[start:stop], w[start:stop], s[start:stop] * math.exp(-log_K)  # bias in the scaled units
            # the diagonal before each layer of the block
            rows = np.empty((stop - start, P))
            srow = np.empty((stop - start, P)) if two else None

            def keep(l, *state, rows=rows, srow=srow):
                if l + 1 < rows.shape[0]:
                    rows[l + 1] = state[0]
                    if srow is not None:
                        srow[l + 1] = state[1]

            rows[0] = d
            if srow is not None:
                srow[0] = sd
            known = _DiagonalMoments(rec.expr) if rec.expr is not None else None
            out = diag_fn(d.copy(), *((sd.copy(),) if two else ()), gb, wb, sb, record=keep,
                          **_used(diag_fn, known.callbacks if known is not None else {}))
            d_next, sd_next = (out if two else (out, None))
            tables = _Tables(rec.expr, rows, pool, n_workers, moments=known) if rec.expr is not None else None
            if tables is not None and tables.n_layers < stop - start:  # the general path's data filled the budget
                nb = tables.n_layers
                stop = start + nb
                d_next = rows[nb].copy()
                sd_next = srow[nb].copy() if srow is not None else None
                rows, gb, wb, sb = rows[:nb], gb[:nb], wb[:nb], sb[:nb]
                srow = srow[:nb] if srow is not None else None

            def work(k, rows=rows, gb=gb, wb=wb, sb=sb, tables=tables):
                lo, hi = bands[k]
                args = [K_strips[k]] + ([S_strips[k]] if two else [])
                callbacks = {} if tables is None else tables.for_strip(lo, hi, "mean_dphi_dphi" in want)
                recorder = _StripRecorder() if record_layers else None
                result = pair_fn(*args, rows[:, lo:hi, None], rows[:, None, lo:], gb, wb, sb,
                                 record=recorder, **_used(pair_fn, callbacks))
                if two:
                    _store(K_strips[k], result[0])
                    _store(S_strips[k], result[1])
                else:
                    _store(K_strips[k], result)
                return recorder

            recorders = []
            for r in (pool.map(work, range(len(bands))) if pool else map(work, range(len(bands)))):
                recorders.append(r)
                if bar is not None:
                    bar.update(stop - start)
            d, sd = d_next, sd_next
            if record_layers:
                assert layers is not None
                nb = stop - start
                for l in range(nb):
                    Kl = _assemble([r.K[l] for r in recorders], bands, P, math.exp(log_K))
                    np.fill_diagonal(Kl, (rows[l + 1] if l + 1 < nb else d) * math.exp(log_K))
                    Sl = None
                    if two:
                        assert srow is not None
                        Sl = _assemble([r.S[l] for r in recorders], bands, P, math.exp(log_S))
                        np.fill_diagonal(Sl, (srow[l + 1] if l + 1 < nb else sd) * math.exp(log_S))
                    layers.append((Kl, Sl))
            # rescale between blocks (homogeneous activations; the linear response always)
            if stop < L:
                if homogeneous:
                    c = float(np.max(np.abs(d)))
                    if c > 0 and np.isfinite(c):
                        d = d / c
                        log_K += math.log(c)
                        for M in K_strips:
                            M /= c
                        if mode == "ntk":
                            sd = sd / c
                            log_S += math.log(c)
                            for M in S_strips:
                                M /= c
                if mode == "response":
                    c = float(np.max(np.abs(sd)))
                    if c > 0 and np.isfinite(c):
                        sd = sd / c
                        log_S += math.log(c)
                        for M in S_strips:
                            M /= c
            start = stop
    finally:
        if pool:
            pool.shutdown()
        if bar is not None:
            bar.close()
        blas.__exit__(None, None, None)
    _mirror(K_out, bands)
    np.fill_diagonal(K_out, d)
    if two:
        _mirror(S_out, bands)
        np.fill_diagonal(S_out, sd)
    return Propagated(K_out, S_out, log_K, log_S, layers)


def _store(view: np.ndarray, result: np.ndarray) -> None:
    if result is not view:
        view[...] = result


def _mirror(M: np.ndarray, bands: list[tuple[int, int]]) -> None:
    """Make M symmetric in place from the rows of its strips (band lo:hi holds columns lo:P): the lower
    triangle of each band's square block and the columns below it are copied from the upper triangle."""
    for lo, hi in bands:
        h = hi - lo
        M[hi:, lo:hi] = M[lo:hi, hi:].T
        square = M[lo:hi, lo:hi]
        il = np.tril_indices(h, -1)
        square[il] = square.T[il]


class _StripRecorder:
    """Copies a strip's state after each layer (for per-layer output)."""

    def __init__(self) -> None:
        self.K: list[np.ndarray] = []
        self.S: list[np.ndarray] = []

    def __call__(self, l, K, *second):
        self.K.append(K.copy())
        if second:
            self.S.append(second[0].copy())


def _callback_names(fn: Callable) -> list[str]:
    """The names of the callbacks a generated recursion takes (its module's RECURSIONS entry names them)."""
    return list(fn.__globals__.get("RECURSIONS", {}).get(fn.__name__, {}).get("callbacks", []))


def _used(fn: Callable, callbacks: dict[str, Callable]) -> dict[str, Callable]:
    """The callbacks a generated recursion takes, from ``callbacks``."""
    return {name: callbacks[name] for name in _callback_names(fn)}


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn (a dependency) brings threadpoolctl
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _progress_bar(total: int):
    """A tqdm bar on stderr over strips x layers, shown only after a second (short runs print nothing)."""
    import sys

    from tqdm import tqdm

    return tqdm(total=total, desc="kernel", unit="strip-layer", unit_scale=True, delay=PROGRESS_DELAY, file=sys.stderr,
                leave=False, dynamic_ncols=True)


def _assemble(parts: list[np.ndarray], bands: list[tuple[int, int]], P: int, scale: float = 1.0) -> np.ndarray:
    """The symmetric P x P matrix from the strips of its upper triangle (the diagonal is set by the caller)."""
    M = np.empty((P, P))
    for S, (lo, hi) in zip(parts, bands):
        h = hi - lo
        top = M[lo:hi, lo:]
        np.multiply(S, scale, out=top)
        M[hi:, lo:hi] = top[:, h:].T
        square = M[lo:hi, lo:hi]
        il = np.tril_indices(h, -1)
        square[il] = square.T[il]
    return M


__all__ = ["propagate", "recursions", "closed_form_names", "ActivationRecursions", "Propagated", "MODES", "strips"]
