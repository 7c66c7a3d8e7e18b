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
import dataclasses
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np
import sympy as sp

import resprop.generated.residual_recursions as gen
from resprop.numeric.engine import table_family
from resprop.numeric.engine.blas_threads import one_blas_thread
from resprop.numeric.engine.bytes_lru import BytesLRU

MODES = ("nngp", "ntk", "response")
#: the suffix of each mode's generated function names (``erf_nngp``, ``erf_nngp_ntk``, ``erf_diagonal_response``)
MODE_SUFFIX = {"nngp": "", "ntk": "_ntk", "response": "_response"}
#: target elements per strip (512 KiB per float64 buffer: measured fastest on the 2-core dev machine,
#: against 8192..131072; smaller strips pay more Python call overhead per element)
STRIP = 65536
#: bytes of per-layer diagonals kept at once (sets the block of layers)
DIAGONAL_BYTES = 32 * 2**20
#: a tabulated activation's block of per-layer data stays within BLOCK_SHARE of one P^2 float64 array (the fused
#: closed forms: FUSED_SHARE below), and a block has at least MIN_BLOCK layers (each block costs a pass over the
#: state and some Python); its rho tables within TABLE_SHARE of one P^2 array
BLOCK_SHARE = 0.05
TABLE_SHARE = 0.05
LAYER_ARRAYS = 6
MIN_BLOCK = 8
#: the fused closed forms' per-layer data within FUSED_SHARE of the output less FUSED_RESERVE bytes (what the
#: peak holds besides: the diagonals, the threads' column buffers, the bookkeeping; ~50-70 KiB measured), so that
#: the peak of a warm call stays within the output + 10% (tests/test_kernel_memory.py) with as few blocks as that
#: allows (each is a pass over the state, ~0.5-1 ms at P = 1000)
FUSED_SHARE = 0.07
FUSED_RESERVE = 64 << 10
#: the fewest layers per block of the fused closed-form kernels (a block costs ~0.1 ms there: at P = 200 blocks of
#: 2 layers instead of 8 cost 20-40% more time and keep the per-layer data within FUSED_SHARE of the output)
MIN_BLOCK_FUSED = 2
#: elements of NumPy's ufunc buffers while the NumPy kernels run (`_small_ufunc_buffers`); no effect on results
UFUNC_BUFFER = 1024
#: upper-triangle elements below which one thread is used
THREAD_MIN = 20_000
#: diagonals within this relative spread count as equal (one dual-kernel table per layer)
EQUAL_DIAGONAL_RTOL = 1e-13
#: bytes of general-path diagonal data (Hermite coefficients of every diagonal value, per layer) held at once:
#: with unequal diagonals a block of layers ends when its data would exceed it
GENERAL_BYTES = 8 * 2**20
#: and, in memory (`propagate`), within GENERAL_SHARE of one P^2 float64 array (a block ends after the layer that
#: passes it: at least one layer's data is held, ~0.2-0.9 MiB at P = 1000 for tanh)
GENERAL_SHARE = 0.05
#: the same share when the general path's fused kernels run (`_run_series`): they take the tile through one layer
#: per call whatever the block, so a block of one layer costs only the block's Python set-up (~1 ms) and holds one
#: layer's coefficients instead of two
GENERAL_SHARE_FUSED = 0.01
#: elements per piece of a tile on the general path (the NumPy tabulated recursion): its temporaries are a few
#: arrays of a piece per thread, ~1.2 MiB a thread in pieces of STRIP (tanh, P = 1000: 15% of the output); the
#: series costs ~100 ns an element, so the smaller pieces' Python calls cost little; no effect on the results
GENERAL_PIECE = 16384
#: series terms per diagonal value assumed when choosing that block (tanh at K_aa ~ 1-3 needs ~310)
GENERAL_TERMS = 384
#: target relative error of the tabulated expectations (rho tables and the general path's series)
RTOL = 1e-10
#: inputs from which the depth collapse (`depth_collapse`) is tried: below, the layers cost less than building it
COLLAPSE_MIN_P = 256
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
    #: the fused compiled kernels of the pairs, mode -> (prepare, run) (`resprop.generated.residual_compiled`),
    #: or None: the NumPy kernels run
    compiled: dict[str, tuple[Callable, Callable]] | None = None
    #: the compiled diagonal recursions, mode -> ``run(states..., sequences..., trajectory)`` (closed forms), or
    #: None: the NumPy diagonal runs
    compiled_diagonal: dict[str, Callable] | None = None
    #: the fused compiled kernels of the general path (a tabulated activation on inputs of unequal norm: the
    #: certified Mehler series per element), mode -> (series_run, series_patch), or None
    series: dict[str, tuple[Callable, Callable]] | None = None

    @property
    def backend(self) -> str:
        return "numpy" if self.compiled is None else "compiled"


def _functions(module, prefix: str) -> tuple[dict[str, Callable], dict[str, Callable]]:
    suffix = MODE_SUFFIX
    pair = {m: getattr(module, f"{prefix}_nngp{s}") for m, s in suffix.items()}
    diag = {m: getattr(module, f"{prefix}_diagonal{s}") for m, s in suffix.items()}
    return pair, diag


def closed_form_names() -> tuple[str, ...]:
    """Activations with generated closed-form recursions (read from the generated module)."""
    return tuple(sorted({name.rsplit("_nngp", 1)[0] for name in gen.RECURSIONS
                         if name.endswith("_nngp") and not name.startswith("tabulated")}))


BACKENDS = ("auto", "compiled", "numpy")


def compiled_module():
    """`resprop.generated.residual_compiled` (imports Numba), or None when Numba cannot be imported."""
    try:
        import resprop.generated.residual_compiled as comp
    except ImportError:  # pragma: no cover - an install without Numba
        return None
    return comp


def _compiled_functions(comp, prefix: str) -> dict[str, tuple[Callable, Callable]]:
    suffix = MODE_SUFFIX
    return {m: (getattr(comp, f"{prefix}_nngp{s}_prepare"), getattr(comp, f"{prefix}_nngp{s}_run"))
            for m, s in suffix.items()}


@cache
def recursions(activation: str, backend: str = "auto") -> ActivationRecursions:
    """The recursions of a named activation or of a SymPy expression in x (given as text).

    ``backend``: "numpy" (the generated ufunc kernels), "compiled" (the fused Numba kernels of
    `resprop.generated.residual_compiled`; ParameterError when the activation has none or Numba is missing) or
    "auto" (compiled where available, NumPy otherwise).  A tabulated activation runs compiled where every input of
    a layer has the same norm (one rho table per layer, `_Tables.packed_tables`) and on the NumPy kernels
    otherwise (the general path).  The two agree to round-off (tests/test_compiled_kernels.py).
    """
    if backend not in BACKENDS:
        from resprop.numeric.engine.validation import ParameterError

        raise ParameterError("backend", f"must be one of {', '.join(BACKENDS)}, got {backend!r}")
    rec = _recursions(activation)
    if backend == "numpy":
        return rec
    closed = rec.expr is None and rec.name in closed_form_names() and \
        rec.pair["nngp"] is getattr(gen, f"{rec.name}_nngp")
    tabulated = rec.expr is not None and rec.pair["nngp"] is gen.tabulated_nngp  # compiled where a layer has a table
    comp = compiled_module() if closed or tabulated else None
    if comp is None:
        if backend == "compiled":
            from resprop.numeric.engine.validation import ParameterError

            why = "Numba cannot be imported" if compiled_module() is None else \
                (f"compiled kernels exist for {', '.join(closed_form_names())} (and what reduces to them) and for "
                 "the tabulated activations (tanh, silu, ...), not for closed forms generated at run time")
            raise ParameterError("backend", f"no compiled kernel for activation {activation!r}: {why}; use "
                                            "backend='auto' or 'numpy'")
        return rec
    diagonal: dict[str, Callable] | None = None
    if closed:
        suffix = MODE_SUFFIX
        found = {m: getattr(comp, f"{rec.name}_diagonal{s}_run", None) for m, s in suffix.items()}
        if all(f is not None for f in found.values()):
            diagonal = {m: f for m, f in found.items() if f is not None}
    series = None
    if tabulated:
        series = {m: (getattr(comp, f"tabulated_nngp{s}_series_run"), getattr(comp, f"tabulated_nngp{s}_series_patch"))
                  for m, s in MODE_SUFFIX.items()}
    return dataclasses.replace(rec, compiled=_compiled_functions(comp, "tabulated" if tabulated else rec.name),
                               compiled_diagonal=diagonal, series=series)


@cache
def _recursions(activation: str) -> ActivationRecursions:
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
    parallel) until it holds more than ``budget`` bytes of general-path data or ``table_budget`` bytes of rho
    tables (counted twice: the compiled kernels take a packed copy); ``n_layers`` says how many were built, and the
    caller runs only those layers in this block."""

    def __init__(self, expr: sp.Expr, diag: np.ndarray, pool: ThreadPoolExecutor | None = None, step: int = 1,
                 budget: int | None = None, moments: _DiagonalMoments | None = None,
                 table_budget: int | None = None) -> None:
        self.dt = _duals_module(expr)  # dual_tables, or piecewise_duals (same interface) for abs, sign, floor, ...
        self.expr = expr
        self.known = moments
        budget = GENERAL_BYTES if budget is None else budget
        self.layers: list[tuple[Any, np.ndarray | None]] = []  # (DualTable, None) or (diagonal data, value index)
        nbytes, n, L = 0, 0, diag.shape[0]
        step = 1 if pool is None else max(1, step)
        if self.dt.__name__.endswith(".dual_tables"):  # the anchors of the interpolated tables, each built once
            equal = [float(np.mean(d)) for d in diag if _equal_diagonal(d)]
            table_family.prepare(expr, equal, RTOL, pool)
        table_budget = 1 << 62 if table_budget is None else table_budget
        tbytes = 0
        # the tables' budget applies from MIN_BLOCK layers on: a block costs ~1 ms of Python and table set-up, which
        # one- or two-layer blocks at small P would pay every layer
        while n < L and (n == 0 or (nbytes <= budget and (tbytes <= table_budget or n < MIN_BLOCK))):
            # general-path data a layer at a time while a batch of ``step`` more would pass the budget (two layers
            # built at once held twice the data and its build temporaries: tanh, P = 1000, the output + 29% against
            # + 20% one at a time, in the same time); rho tables in batches (their first build is the slow part)
            general = not _equal_diagonal(diag[n])
            width = step if not general or (n > 0 and nbytes * (n + step) / n <= budget) else 1
            batch = range(n, min(L, n + width))
            built = (list(pool.map(lambda l: self._layer(l, diag[l]), batch)) if pool
                     else [self._layer(l, diag[l]) for l in batch])
            for entry in built:
                self.layers.append(entry)
                if entry[1] is not None:
                    nbytes += entry[0].nbytes + entry[1].nbytes
                elif hasattr(entry[0], "_cf"):  # a rho table, and its packed copy for the compiled kernels
                    tbytes += 2 * sum(a.nbytes for a in (*entry[0]._cf, *entry[0]._cg))
            n += len(batch)
        self.n_layers = len(self.layers)

    def _layer(self, l: int, d: np.ndarray) -> tuple[Any, np.ndarray | None]:
        # equal up to round-off (unit-norm inputs differ by ulps): one table at the mean; the change of the
        # expectation is O(spread) relative, far below the tables' 1e-10
        if _equal_diagonal(d):
            m = float(np.mean(d))
            if self.dt.__name__.endswith(".dual_tables") and table_family.applies(m):
                return table_family.table(self.expr, m, RTOL), None  # interpolated between cached anchors
            return self.dt.build_table(self.expr, m, m, RTOL), None
        values = np.unique(d)
        smooth = self.dt.__name__.endswith(".dual_tables")  # piecewise_duals takes no moments
        known = None if self.known is None or not smooth else self.known.moments(l, values)
        if known is None:
            data = self.dt.general_data(self.expr, values, RTOL, cache=False)
        else:  # the tails need E[phi^2], E[phi'^2]: the diagonal recursion has just computed them
            data = self.dt.general_data(self.expr, values, RTOL, cache=False, moments=known)
        return data, np.searchsorted(data.values, d)

    def packed_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The rho tables of all layers as arrays for the compiled kernels (`resprop.generated.residual_compiled`:
        coefficients of E[phi phi] and E[phi' phi'], (L, intervals + 1, degree + 1) padded with zeros, and per
        layer the interval count, scale, eps, pi + eps and s0), or None when a layer has none (unequal norms, the
        general path; or a table of piecewise_duals)."""
        from resprop.numeric.engine.dual_tables import DualTable

        tabs = [obj for obj, index in self.layers]
        if not tabs or any(index is not None for _, index in self.layers) or \
                not all(type(t) is DualTable for t in tabs):
            return None
        key = tuple(id(t) for t in tabs)
        hit = _PACKED.get(key)
        if hit is not None and all(a is b for a, b in zip(hit.tables, tabs)):
            return hit.arrays
        n_int = max(t.n_intervals for t in tabs)
        deg = tabs[0].degree
        if any(t.degree != deg for t in tabs):
            return None
        tf = np.zeros((len(tabs), n_int + 1, deg + 1))
        tg = np.zeros_like(tf)
        meta = np.empty((len(tabs), 5))
        for l, t in enumerate(tabs):
            tf[l, :t.n_intervals + 1] = np.stack(t._cf, axis=1)
            tg[l, :t.n_intervals + 1] = np.stack(t._cg, axis=1)
            meta[l] = (t.n_intervals, t._scale, t.eps, t._pe, t._s0)
        _PACKED.put(key, _PackedTables(tuple(tabs), (tf, tg, meta)))
        return tf, tg, meta

    def for_tile(self, r0: int, r1: int, c0: int, c1: int, want_dphi: bool = True) -> dict[str, Callable]:
        """The callbacks of the tile of rows r0:r1, columns c0:c1; ``want_dphi``: the recursion also calls
        mean_dphi_dphi (the general path then evaluates both at once and keeps E[phi' phi'] for that call)."""
        stash: dict[int, np.ndarray] = {}
        layers, strip = self.layers, self.dt.mean_phi_phi_strip

        def mean_phi_phi(l, rho, out):
            obj, index = layers[l]
            if index is None:
                if want_dphi:  # one interval lookup for both (the same numbers as two calls)
                    dphi = np.empty_like(out)
                    obj.both(rho, out, dphi)
                    stash[l] = dphi
                    return out
                return obj.mean_phi_phi(rho, out)
            if want_dphi:
                dphi = np.empty_like(out)
                strip(obj, index[r0:r1], index[c0:c1], rho, out, dphi)
                stash[l] = dphi
            else:
                strip(obj, index[r0:r1], index[c0:c1], rho, out)
            return out

        def mean_dphi_dphi(l, rho, out):
            obj, index = layers[l]
            if l in stash:
                out[...] = stash.pop(l)
                return out
            if index is None:
                return obj.mean_dphi_dphi(rho, out)
            strip(obj, index[r0:r1], index[c0:c1], rho, np.empty_like(out), out)
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


@dataclass(frozen=True)
class _PackedTables:
    """The packed rho tables of a block (`_Tables.packed_tables`) and the tables they were packed from: the entry
    holds the tables, so the identities that key it cannot be reused by other objects while it is cached."""

    tables: tuple
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray]

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays)


#: the compiled kernels' packed copies of the rho tables, by block (the tables themselves are cached by
#: `dual_tables`): a later call whose blocks use the same tables reuses them instead of packing a copy per block,
#: which at small P was most of the call's memory above its output (tanh, P = 200: ~36 KiB a layer against a
#: 313 KiB output).  What is cached never changes a result.
PACKED_CACHE_BYTES = 16 << 20
_PACKED = BytesLRU(lambda: PACKED_CACHE_BYTES)


def _equal_diagonal(d: np.ndarray) -> bool:
    """Every input has the same K_aa up to round-off (unit-norm inputs differ by ulps): one rho table serves."""
    return bool(np.max(np.abs(d - d[0])) <= EQUAL_DIAGONAL_RTOL * np.max(np.abs(d)))


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
        # the closure holds the dict and the expression, not self: self -> callbacks -> closure -> self would be a
        # reference cycle, and every block's moments would then live until the garbage collector ran (~60 KiB of
        # a small tanh run's peak)
        duals, expr, by_layer = _duals_module(self.expr), self.expr, self.by_layer

        def callback(l, K, out):
            if _equal_diagonal(K):  # one value, as `_Tables` takes one table at the mean: the rule's temporaries
                # (values x ~10^3 nodes) for the few ulp-distinct values of unit-norm inputs were most of a small
                # run's memory above its output (tanh, P = 200: ~90 KiB against a 313 KiB output)
                values, inverse = np.array([float(np.mean(K))]), None
            else:
                values, inverse = np.unique(K, return_inverse=True)
            hit = by_layer.get(l)
            if hit is None or not np.array_equal(hit[0], values):
                hit = (values, *duals.diagonal(expr, values))
                by_layer[l] = hit
            if inverse is None:
                out[...] = hit[which][0]
            else:
                out[...] = hit[which][inverse].reshape(K.shape)
            return out
        return callback


@lru_cache(maxsize=64)
def _duals_module(expr: sp.Expr):
    """The module of the tabulated expectations of ``expr``: piecewise_duals for a piecewise activation (abs,
    sign, floor, ...; same interface: build_table, mean_phi_phi_general, diagonal, price_diag), else dual_tables.
    Cached: asked three times a block, and the check's SymPy work was part of a small call's peak."""
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
    #: True when every entry of the arrays is known to be finite (checked while mirroring), None when unchecked
    finite: bool | None = None


#: a tile of the upper triangle: rows r0:r1, columns c0:c1 (c0 >= r0; a tile with c0 == r0 holds the diagonal
#: block r0:r1 x r0:r1 and, if c1 > r1, the columns beyond it)
Tile = tuple[int, int, int, int]


def band_tiles(P: int, target: int = STRIP) -> list[Tile]:
    """The strips of `strips` as tiles: rows lo:hi, columns lo:P (what ``propagate`` uses in memory)."""
    return [(lo, hi, lo, P) for lo, hi in strips(P, target)]


def tile_grid(P: int, tile: int) -> list[Tile]:
    """Square tiles of side ``tile`` covering the upper triangle, row by row (the diagonal tiles are square)."""
    if tile < 1:
        raise ValueError("tile must be >= 1")
    edges = list(range(0, P, tile)) + [P]
    n = len(edges) - 1
    return [(edges[i], edges[i + 1], edges[j], edges[j + 1]) for i in range(n) for j in range(i, n)]


@dataclass
class Block:
    """What the tiles need for the layers start:stop: the diagonal before each layer (``rows``, ``srow``), the
    per-layer sequences (the bias in the scaled units of the run), the tables of a tabulated activation, the
    factors the state is divided by after the block (homogeneous activations and the response are rescaled
    between blocks: 1.0 when not), and the log scales in force during the block."""

    start: int
    stop: int
    rows: np.ndarray | None      # None when the fused kernels run from ``prepared`` alone
    srow: np.ndarray | None
    gb: np.ndarray
    wb: np.ndarray
    sb: np.ndarray
    tables: Any
    rescale_K: float
    rescale_S: float
    log_K: float
    log_S: float
    d_after: np.ndarray          # the diagonal after the block, before the rescaling
    sd_after: np.ndarray | None
    #: the compiled kernels' per-layer, row and column values of the block (``ActivationRecursions.compiled``)
    prepared: Any = None
    #: the general path's fused kernels (``ActivationRecursions.series``): ((layer, rows, cols) values of the
    #: block, and per layer a `_SeriesLayer`), or None
    series: Any = None


class Schedule:
    """The O(P x depth) part of a run, block by block: the diagonal recursion, the per-layer tables (a rho table
    per layer for equal norms, the general path's data otherwise), and the rescaling between blocks.  A tile's
    result depends only on its K^(0) entries and this schedule, so any tiling gives the same numbers.

    Iterate ``blocks()`` once, in order; after it, ``d``, ``sd`` hold the final diagonal (K, and Theta or chi)
    and ``log_K``, ``log_S`` the final log scales."""

    def __init__(self, d0: np.ndarray, sd0: np.ndarray | None, sequences: tuple[np.ndarray, np.ndarray, np.ndarray],
                 mode: str, rec: ActivationRecursions, block: int, pool: ThreadPoolExecutor | None = None,
                 n_workers: int = 1, bounds: list[tuple[int, int]] | None = None, keep_rows: bool = False,
                 general_budget: int | None = None) -> None:
        #: ``bounds``: the (start, stop) of the first blocks, as another process's schedule chose them (a Dask
        #: worker follows the driver's blocks whatever its own budgets say)
        self.bounds = bounds
        #: bytes of general-path data per block (GENERAL_BYTES by default; `propagate`, whose output is in memory,
        #: also bounds it by GENERAL_SHARE of the output; a store's state is on disk, and each extra block there
        #: costs a pass over the store)
        self.general_budget = GENERAL_BYTES if general_budget is None else general_budget
        #: keep every block's per-layer diagonals (``Block.rows``, ``srow``) even when the fused kernels do not
        #: need them (the layers are recorded: the NumPy kernels run and the diagonals are written out)
        self.keep_rows = keep_rows
        self.g, self.w, self.s = (np.asarray(q, dtype=float) for q in sequences)
        self.L = self.g.size
        self.mode, self.rec, self.block = mode, rec, block
        self.two = mode != "nngp"
        self.pool, self.n_workers = pool, n_workers
        self.d = np.asarray(d0, dtype=float).copy()
        self.sd = None if sd0 is None else np.asarray(sd0, dtype=float).copy()
        self.log_K = self.log_S = 0.0
        #: the scales are powers of four, 2^exp2 (log_K = exp2_K ln 2): dividing by them is exact, and so is the
        #: square root of the ReLU's separable form, so the rescaled recursion rounds exactly like the unscaled one
        #: and the block size changes nothing; `kernel._scaled` multiplies back with ldexp (exact as well)
        self.exp2_K = self.exp2_S = 0
        self.homogeneous = rec.name in HOMOGENEOUS

    def blocks(self):
        diag_fn = self.rec.diagonal[self.mode]
        two, L, P = self.two, self.L, self.d.size
        start, i = 0, 0
        while start < L:
            forced = self.bounds is not None and i < len(self.bounds)
            stop = self.bounds[i][1] if forced else min(L, start + self.block)
            i += 1
            gb, wb = self.g[start:stop], self.w[start:stop]
            sb = self.s[start:stop] * math.exp(-self.log_K)  # bias in the scaled units
            known = _DiagonalMoments(self.rec.expr) if self.rec.expr is not None else None
            both = None
            if self.rec.compiled_diagonal is not None:  # the fused compiled diagonal, its trajectory recorded
                # trajectory[l] (the state after layer l) is the diagonal before layer l + 1: one array holds both
                nb = stop - start
                both = np.empty((nb + 1, 2 if two else 1, P))
                both[0, 0] = self.d
                if two:
                    both[0, 1] = self.sd
                d_next = self.d.copy()
                sd_next = self.sd.copy() if two else None
                self.rec.compiled_diagonal[self.mode](*((d_next, sd_next) if two else (d_next,)), gb, wb, sb,
                                                      both[1:])
                rows = both[:-1, 0]
                srow = both[:-1, 1] if two else None
            else:
                rows = np.empty((stop - start, P))
                srow = np.empty((stop - start, P)) if two else None

                def keep(l, *state, rows=rows, srow=srow):
                    if l + 1 < rows.shape[0]:
                        rows[l + 1] = state[0]
                        if srow is not None:
                            srow[l + 1] = state[1]

                rows[0] = self.d
                if srow is not None:
                    srow[0] = self.sd
                out = diag_fn(self.d.copy(), *((self.sd.copy(),) if two else ()), gb, wb, sb, record=keep,
                              **_used(diag_fn, known.callbacks if known is not None else {}))
                d_next, sd_next = (out if two else (out, None))
                del keep  # its defaults hold the diagonals: they go with ``rows`` below when the fused kernels run
            built = None
            if self.rec.expr is not None:
                built = _Tables(self.rec.expr, rows, self.pool, self.n_workers, moments=known,
                                budget=1 << 62 if forced else self.general_budget,
                                table_budget=1 << 62 if forced else int(TABLE_SHARE * 8 * P * P))
                if built.n_layers < stop - start:  # the general data or the tables filled their budget
                    nb = built.n_layers
                    stop = start + nb
                    d_next = rows[nb].copy()
                    sd_next = srow[nb].copy() if srow is not None else None
                    rows, gb, wb, sb = rows[:nb], gb[:nb], wb[:nb], sb[:nb]
                    srow = srow[:nb] if srow is not None else None
                # the diagonal moments served the tables' tails; the tiles do not read them (unequal norms: P values
                # of E[phi^2], E[phi'^2] per layer of the block; tanh, P = 1000: 53 KiB less at the peak)
                built.known = None
            known = None
            prepared = None
            if self.rec.compiled is not None:
                if built is None:
                    prepared = self.rec.compiled[self.mode][0](rows, gb, wb, sb)
                else:  # a tabulated activation: compiled when every layer of the block has one rho table
                    packed = built.packed_tables()
                    if packed is not None:
                        prepared = self.rec.compiled[self.mode][0](rows, gb, wb, sb, *packed)
            series = None
            if prepared is None and built is not None and self.rec.series is not None and self.rec.compiled is not None:
                series_layers = _series_layers(built)
                if series_layers is not None:  # every layer on the general path's series: its fused kernels
                    nb = len(series_layers)
                    no_tables = (np.zeros((nb, 1, 1)), np.zeros((nb, 1, 1)), np.zeros((nb, 5)))
                    series = (self.rec.compiled[self.mode][0](rows, gb, wb, sb, *no_tables)[:3], series_layers)
                del series_layers  # the block's Block holds them; the next block's are built after it is gone
            if (prepared is not None or series is not None) and not self.keep_rows:
                # the fused kernels read only their prepared values: the diagonals of the block go (the peak holds
                # one copy of the per-layer data, not two)
                rows = srow = both = None
            log_K, log_S = self.log_K, self.log_S
            self.d, self.sd = d_next, sd_next
            cK = cS = 1.0
            if stop < L:  # rescale between blocks (homogeneous activations; the linear response always)
                if self.homogeneous:
                    k = _power_of_four(float(np.max(np.abs(self.d))))
                    if k:
                        c = math.ldexp(1.0, k)
                        self.d = self.d / c
                        self.exp2_K += k
                        cK = c
                        if self.mode == "ntk":
                            self.sd = self.sd / c
                            self.exp2_S += k
                            cS = c
                if self.mode == "response":
                    k = _power_of_four(float(np.max(np.abs(self.sd))))
                    if k:
                        c = math.ldexp(1.0, k)
                        self.sd = self.sd / c
                        self.exp2_S += k
                        cS = c
                self.log_K, self.log_S = self.exp2_K * math.log(2.0), self.exp2_S * math.log(2.0)
            yield Block(start, stop, rows, srow, gb, wb, sb, built, cK, cS, log_K, log_S, d_next, sd_next, prepared,
                        series)
            # release this block's per-layer data before the next block's is built (one block alive at a time)
            del rows, srow, both, built, prepared, series
            start = stop


def _power_of_four(c: float) -> int:
    """The even exponent k with 2^k nearest c (a power of four), 0 when c is 0 or not finite."""
    if not (c > 0 and math.isfinite(c)):
        return 0
    return 2 * round(math.log2(c) / 2)


def default_block(K0_diagonal: np.ndarray, L: int, mode: str, rec: ActivationRecursions) -> int:
    """Layers per block: the diagonal rows of a block within DIAGONAL_BYTES; HOMOGENEOUS_BLOCK for homogeneous
    activations and the response (rescaled between blocks); the general path's data within GENERAL_BYTES."""
    P = K0_diagonal.size
    block = max(1, min(L, DIAGONAL_BYTES // (8 * P * 3)))
    # the per-layer data of a block (diagonals, the compiled kernels' row and column values, tables) a small share
    # of the output, so that the peak stays near the output
    if rec.expr is None and rec.name in closed_form_names():
        n_out = 1 if mode == "nngp" else 2
        room = FUSED_SHARE * 8 * P * P * n_out - FUSED_RESERVE
        block = min(block, max(MIN_BLOCK_FUSED, int(room / _fused_layer_bytes(P, mode, rec))))
    else:  # a tabulated activation: its rho tables (~30-60 KiB a layer, `_Tables`) set the block's bytes; with
        # equal norms (one cached table per layer, the fused kernels) a block costs as little as a closed form's
        fewest = MIN_BLOCK_FUSED if rec.compiled is not None and _equal_diagonal(K0_diagonal) else MIN_BLOCK
        block = min(block, max(fewest, int(BLOCK_SHARE * P * P / (P * LAYER_ARRAYS))))
    if rec.name in HOMOGENEOUS or mode == "response":
        block = min(block, HOMOGENEOUS_BLOCK)
    if rec.expr is not None and not _equal_diagonal(K0_diagonal):
        # unequal diagonals: the general path's data (P x ~300 Hermite coefficients per layer) fills
        # GENERAL_BYTES; a block of that many layers (_Tables shortens it if the series need more terms)
        block = min(block, max(1, GENERAL_BYTES // (8 * P * GENERAL_TERMS)))
    return block


def _fused_layer_bytes(P: int, mode: str, rec: ActivationRecursions) -> int:
    """Bytes a block of a closed-form activation holds per layer at its peak: the diagonal trajectory (K, and Theta
    or chi) beside the fused kernels' prepared row and column values (`resprop.generated.residual_compiled`: P
    values per row quantity, P + LANES per column quantity); about LAYER_ARRAYS arrays of P without Numba.  The same
    count whichever backend runs: the blocks set where ReLU and the response are rescaled, and the two backends are
    compared scale for scale."""
    comp = compiled_module()
    meta = getattr(comp, "RECURSIONS", {}).get(f"{rec.name}_nngp{MODE_SUFFIX[mode]}") if comp is not None else None
    if meta is None:
        return 8 * P * LAYER_ARRAYS
    n_diag = 1 if mode == "nngp" else 2
    return 8 * (n_diag * P + len(meta["rows"]) * P + len(meta["cols"]) * (P + int(comp.LANES)))


@contextlib.contextmanager
def _small_ufunc_buffers():
    """NumPy's ufunc buffers at UFUNC_BUFFER elements in this thread (restored on exit).  The NumPy kernels update
    views of the state (rows r0:r1, columns c0:c1 of a P x P array: not contiguous), and NumPy 2's buffered
    iteration then allocates two buffers of its default 8,192 elements per ufunc call: 128 KiB a thread on
    every call, which was ~3% of a P = 1000 output at the peak, and slower than small buffers (an add on a
    16 x 900 view: 29 us against 17 us at 1,024).  Elementwise results do not depend on the buffer size."""
    old = np.setbufsize(UFUNC_BUFFER)
    try:
        yield
    finally:
        np.setbufsize(old)


def run_block(block: Block, rec: ActivationRecursions, mode: str, tile: Tile, K_state: np.ndarray,
              S_state: np.ndarray | None, record: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The layers of ``block`` on one tile: the state (float64, modified in place when it is a float64 array)
    after the block, divided by the block's rescale factors."""
    with _small_ufunc_buffers():
        return _run_block(block, rec, mode, tile, K_state, S_state, record)


def _run_block(block: Block, rec: ActivationRecursions, mode: str, tile: Tile, K_state: np.ndarray,
               S_state: np.ndarray | None, record: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    pair_fn = rec.pair[mode]
    two = mode != "nngp"
    r0, r1, c0, c1 = tile
    if block.series is not None and record is None and rec.series is not None:  # the general path, fused
        K_new = _work_array(K_state)
        S_new = _work_array(S_state) if S_state is not None and two else None
        _run_series(block, rec.series[mode], tile, K_new, S_new)
        return _rescaled(block, K_new, S_new)
    if block.prepared is not None and record is None and rec.compiled is not None:  # the fused kernel, in place
        K_new = _work_array(K_state)
        S_new = _work_array(S_state) if S_state is not None and two else None
        rec.compiled[mode][1](*((K_new, S_new) if two else (K_new,)), r0, c0, *block.prepared)
        return _rescaled(block, K_new, S_new)
    want = set(_callback_names(pair_fn))
    callbacks = {} if block.tables is None else block.tables.for_tile(r0, r1, c0, c1, "mean_dphi_dphi" in want)
    args = [K_state] + ([S_state] if two else [])
    assert block.rows is not None, "the NumPy kernels need the block's diagonals (Schedule keeps them unless fused)"
    result = pair_fn(*args, block.rows[:, r0:r1, None], block.rows[:, None, c0:c1], block.gb, block.wb, block.sb,
                     record=record, **_used(pair_fn, callbacks))
    K_new, S_new = result if two else (result, None)
    return _rescaled(block, K_new, S_new)


@dataclass(frozen=True, eq=False)
class _SeriesLayer:
    """One layer's general-path data as the fused series kernels read it: the `dual_tables` diagonal data, each
    input's value index, the thresholds of `mehler_thresholds`, the square roots of the values, the ladder and
    the log of the series' tolerance."""

    data: Any
    index: np.ndarray
    thr: np.ndarray
    sa: np.ndarray
    levels: np.ndarray
    ltol: float


def _series_layers(built: _Tables) -> list[_SeriesLayer] | None:
    """Per layer of ``built``, what the general path's fused kernels read; None unless every layer is on the
    general path with Hermite coefficients (not a rho table, not the pair tables of a few values, not
    piecewise_duals) and the compiled series may run (`dual_tables.SERIES_BACKEND`)."""
    if not built.dt.__name__.endswith(".dual_tables") or not built.dt._use_compiled():
        return None
    if any(index is None or getattr(obj, "coefT", None) is None for obj, index in built.layers):
        return None
    comp = compiled_module()
    out = []
    for data, index in built.layers:
        assert index is not None
        levels = np.asarray(data.levels, dtype=np.int64)
        thr = comp.mehler_thresholds(data.logtail_f, data.logtail_g, levels)
        out.append(_SeriesLayer(data, index.astype(np.int64), thr, np.sqrt(data.values), levels,
                                math.log(built.dt.series_tolerance(data))))
    return out


#: elements of a tile the general path's fused kernel hands to the pair quadrature at once (at least a row)
SERIES_BAD = 1024


def _run_series(block: Block, fns: tuple[Callable, Callable], tile: Tile, K_state: np.ndarray,
                S_state: np.ndarray | None) -> None:
    """The layers of ``block`` on one tile through the general path's fused kernels, in place: per layer, the
    series and the update in one compiled pass (`tabulated_*_series_run`), and the elements no series level
    certifies through `dual_tables`' pair quadrature and the generated update (`tabulated_*_series_patch`)."""
    run, patch = fns
    (layer, rows, cols), layers = block.series
    r0, r1, c0, c1 = tile
    states = (K_state,) if S_state is None else (K_state, S_state)
    h, n = K_state.shape
    cap = max(SERIES_BAD, n)
    bad_i, bad_j = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    bad_rho = np.empty(cap)
    dt = block.tables.dt
    for l, s in enumerate(layers):
        i = 0
        while i < h:
            i, n_bad = run(*states, r0, c0, l, layer, rows, cols, s.index, s.data.coefT, s.data.logtail_f,
                           s.data.logtail_g, s.levels, s.ltol, s.thr, s.sa, bad_i, bad_j, bad_rho, i)
            if n_bad:
                a = s.sa[s.index[r0 + bad_i[:n_bad]]]
                b = s.sa[s.index[c0 + bad_j[:n_bad]]]
                f, g, _, _ = dt._pair_quadrature(s.data.act, a, b, bad_rho[:n_bad], dt.STRIP_BYTE_BUDGET)
                patch(*states, r0, c0, l, layer, rows, cols, bad_i, bad_j, f, g, n_bad)


def _work_array(a: np.ndarray) -> np.ndarray:
    """``a`` itself when the compiled kernels can write into it (float64, writable), else a float64 copy."""
    return a if a.dtype == np.float64 and a.flags.writeable else np.array(a, dtype=np.float64)


def _rescaled(block: Block, K_new: np.ndarray, S_new: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    if block.rescale_K != 1.0:
        K_new /= block.rescale_K
    if S_new is not None and block.rescale_S != 1.0:
        S_new /= block.rescale_S
    return K_new, S_new


def run_block_pieces(block: Block, rec: ActivationRecursions, mode: str, tile: Tile, K_state: np.ndarray,
                     S_state: np.ndarray | None, target: int | None = None) -> None:
    """`run_block` on a tile in pieces of rows of at most ``target`` elements (default STRIP; GENERAL_PIECE on the
    general path, the NumPy tabulated recursion, whose pieces' work arrays are per thread), in place in the
    float64 arrays K_state (and S_state): the recursion's temporaries stay cache-sized whatever the tile (a
    2048 x 2048 tile in one piece ran 2.5x slower); the same numbers, element by element."""
    r0, r1, c0, c1 = tile
    n = c1 - c0
    if target is None:
        target = GENERAL_PIECE if block.prepared is None and block.series is None and block.tables is not None \
            else STRIP
    h = max(1, target // max(n, 1))
    for a in range(0, r1 - r0, h):
        b = min(r1 - r0, a + h)
        K_view = K_state[a:b]
        S_view = S_state[a:b] if S_state is not None else None
        K_new, S_new = run_block(block, rec, mode, (r0 + a, r0 + b, c0, c1), K_view, S_view)
        _store(K_view, K_new)
        if S_view is not None and S_new is not None:
            _store(S_view, S_new)


def propagate(K0: np.ndarray, second0: Any, sequences: tuple[np.ndarray, np.ndarray, np.ndarray],
              mode: str, rec: ActivationRecursions, record_layers: bool = False, strip: int = STRIP,
              block: int | None = None, progress: bool = False, in_place: bool = False,
              tile: int | None = None, collapse: bool = True) -> Propagated:
    """Run the generated recursions of ``rec`` from K^(0) (and Theta^(0) or chi^(0)) through the layers given
    by the per-layer ``sequences`` (skip_gain, branch_weight, branch_bias), each of length L.

    Inputs are assumed validated (float64, symmetric, PSD).  The upper triangle is cut into tiles: the strips of
    ``strip`` elements (rows lo:hi, columns lo:P; the default) or, with ``tile``, square tiles of that side; a
    `Schedule` runs the diagonal and builds the per-layer tables for each block of layers, then every tile runs
    the block from its own state.  ``progress``: a tqdm bar on stderr over tiles x layers (shown after one
    second).  ``in_place``: K0 (and second0) are overwritten and returned as K^(L) (and the second state): each
    tile's state is a view of them, so that the run holds no P x P array beyond its inputs (peak: the two outputs
    plus the per-layer data and one tile's temporaries per thread); otherwise the inputs are left alone and the
    outputs are new arrays.

    ``collapse``: when the inputs' norms take few values, the L-layer map of a pair is built once as a Chebyshev
    interpolant and evaluated over the triangle (`depth_collapse`; to 1e-13, when it pays: P >= COLLAPSE_MIN_P,
    not for the response; ReLU's NNGP map is built in the angle arccos rho, its NTK runs the layers); False
    always runs the layers."""
    L, P = len(sequences[0]), K0.shape[0]
    two = mode != "nngp"
    # second0 given as K0 itself (the NTK's Theta^(0) = K^(0)): the state gets its own array only where it is
    # needed (the depth collapse writes Theta^(L) = A Theta^(0) + B straight into a new one)
    same = two and second0 is K0
    if collapse and not record_layers and P >= COLLAPSE_MIN_P:
        from resprop.numeric.engine import depth_collapse

        col = depth_collapse.build(np.diagonal(K0).copy(), np.diagonal(second0).copy() if two else None,
                                   sequences, mode, rec)
        if col is not None:
            return _collapsed(col, K0, second0, P, two, in_place, strip, tile, progress, same)
    if same:
        second0 = K0.copy()
    if block is None:
        block = default_block(np.diagonal(K0), L, mode, rec)
        if rec.series is not None and rec.expr is not None and not _equal_diagonal(np.diagonal(K0)):
            # the general path's fused kernels hold one layer's data (GENERAL_SHARE_FUSED); a longer block would run
            # the diagonal recursion of layers that `_Tables` then drops (~7 ms a layer at P = 1000).  (A store keeps
            # default_block's: there each block is a pass over the store.)
            block = 1
    tiles = band_tiles(P, strip) if tile is None else tile_grid(P, tile)
    layers = [(K0.copy(), None if second0 is None else second0.copy())] if record_layers else None
    S_out: Any
    if in_place:
        if not (K0.dtype == np.float64 and (not two or second0.dtype == np.float64)):
            raise TypeError("in_place needs float64 inputs")
        K_out, S_out = K0, (second0 if two else None)
    else:
        K_out = np.array(K0, dtype=float)
        S_out = np.array(second0, dtype=float) if two else None
    n_workers = min(workers(), len(tiles)) if P * (P - 1) // 2 >= THREAD_MIN else 1
    pool = ThreadPoolExecutor(n_workers) if n_workers > 1 else None
    bar = _progress_bar(L * len(tiles)) if progress else None
    general_share = GENERAL_SHARE_FUSED if rec.series is not None and rec.expr is not None else GENERAL_SHARE
    schedule = Schedule(np.diagonal(K_out), np.diagonal(S_out) if two else None, sequences, mode, rec, block, pool,
                        n_workers, keep_rows=record_layers,
                        general_budget=min(GENERAL_BYTES, int(general_share * 8 * P * P)))
    # BLAS (the general path's Hermite coefficients, ~P x 400 x 400 per layer) runs one thread: our pool already
    # uses the cores, and two-thread OpenBLAS measured 3-10x slower per call on a loaded 2-core machine
    # (not with equal norms: one rho table per layer, no coefficients; the limit's bookkeeping was ~3 KiB of a small
    # call's peak)
    general = rec.expr is not None and not _equal_diagonal(np.diagonal(K_out))
    blas = one_blas_thread() if general else contextlib.nullcontext()
    blas.__enter__()
    try:
        for blk in schedule.blocks():

            def work(t: Tile, blk=blk):
                r0, r1, c0, c1 = t
                recorder = _StripRecorder() if record_layers else None
                K_view = K_out[r0:r1, c0:c1]
                S_view = S_out[r0:r1, c0:c1] if two else None
                if recorder is None:
                    run_block_pieces(blk, rec, mode, t, K_view, S_view)
                    return None
                K_new, S_new = run_block(blk, rec, mode, t, K_view, S_view, recorder)
                _store(K_view, K_new)
                if S_view is not None and S_new is not None:
                    _store(S_view, S_new)
                return recorder

            recorders = []
            for r in (pool.map(work, tiles) if pool else map(work, tiles)):
                recorders.append(r)
                if bar is not None:
                    bar.update(blk.stop - blk.start)
            if record_layers:
                assert layers is not None
                nb = blk.stop - blk.start
                for l in range(nb):
                    Kl = _assemble([r.K[l] for r in recorders], tiles, P, math.exp(blk.log_K))
                    np.fill_diagonal(Kl, (blk.rows[l + 1] if l + 1 < nb else blk.d_after) * math.exp(blk.log_K))
                    Sl = None
                    if two:
                        assert blk.srow is not None
                        Sl = _assemble([r.S[l] for r in recorders], tiles, P, math.exp(blk.log_S))
                        np.fill_diagonal(Sl, (blk.srow[l + 1] if l + 1 < nb else blk.sd_after)
                                         * math.exp(blk.log_S))
                    layers.append((Kl, Sl))
            del blk, work  # this block's data is freed before the next one is built
        finite = _mirror_tiles(K_out, S_out if two else None, tiles, pool)
    finally:
        if pool:
            pool.shutdown()
        if bar is not None:
            bar.close()
        blas.__exit__(None, None, None)
    np.fill_diagonal(K_out, schedule.d)
    finite = finite and bool(np.isfinite(schedule.d).all())
    if two:
        assert schedule.sd is not None
        np.fill_diagonal(S_out, schedule.sd)
        finite = finite and bool(np.isfinite(schedule.sd).all())
    return Propagated(K_out, S_out, schedule.log_K, schedule.log_S, layers, finite)


def _mirror_tiles(K: np.ndarray, S: np.ndarray | None, tiles: list[Tile], pool: ThreadPoolExecutor | None) -> bool:
    """Every tile's transpose below the diagonal (`mirror.mirror_tile`, on the pool's threads: tiles write disjoint
    parts that no tile reads); True when every value above the diagonal is finite."""
    from resprop.numeric.engine.mirror import mirror_tile

    def one(t: Tile) -> bool:
        ok = mirror_tile(K, *t)
        return (mirror_tile(S, *t) if S is not None else True) and ok

    return all(list(pool.map(one, tiles) if pool is not None else map(one, tiles)))


def _collapsed(col, K0: np.ndarray, second0: Any, P: int, two: bool, in_place: bool, strip: int,
               tile: int | None, progress: bool, same: bool = False) -> Propagated:
    """`propagate` through the collapsed maps of `depth_collapse` (tile by tile, in place or on copies);
    ``same``: second0 is K0 (Theta^(0) = K^(0)): Theta^(L) is evaluated as one function of u into a new array."""
    from resprop.numeric.engine.depth_collapse import evaluate_tile, with_theta_from_k

    K_out = K0 if in_place else np.array(K0, dtype=float)
    S_out: np.ndarray | None
    if same:  # Theta^(L) = G(u), one series (`with_theta_from_k`), written into a new array
        col = with_theta_from_k(col)
        # a map of the angle (ReLU) keeps A and B: Theta^(L) = A Theta^(0) + B from a copy of Theta^(0) = K^(0)
        S_out = np.empty((P, P)) if col.direct else np.array(K0, dtype=float)
    else:
        S_out = (second0 if in_place else np.array(second0, dtype=float)) if two else None
    tiles = band_tiles(P, strip) if tile is None else tile_grid(P, tile)
    n_workers = min(workers(), len(tiles)) if P * (P - 1) // 2 >= THREAD_MIN else 1
    bar = _progress_bar(len(tiles), unit="tile") if progress else None

    def work(t: Tile) -> bool:
        r0, r1, c0, c1 = t
        return evaluate_tile(col, K_out, S_out, r0, r1, c0, c1)  # mirrored below the diagonal as it goes

    finite = True
    try:
        with ThreadPoolExecutor(n_workers) if n_workers > 1 else contextlib.nullcontext() as pool:
            for ok in (pool.map(work, tiles) if pool is not None else map(work, tiles)):
                finite = finite and ok
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    np.fill_diagonal(K_out, col.diagonal[col.classes])
    finite = finite and bool(np.isfinite(col.diagonal).all())
    if S_out is not None:
        np.fill_diagonal(S_out, col.second_diagonal[col.classes])
        finite = finite and bool(np.isfinite(col.second_diagonal).all())
    return Propagated(K_out, S_out, 0.0, 0.0, None, finite)


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




def _progress_bar(total: int, unit: str = "tile-layer"):
    """A tqdm bar on stderr over tiles x layers (or ``unit``), shown only after a second (short runs print
    nothing)."""
    import sys

    from tqdm import tqdm

    return tqdm(total=total, desc="kernel", unit=unit, unit_scale=True, delay=PROGRESS_DELAY, file=sys.stderr,
                leave=False, dynamic_ncols=True)


def _assemble(parts: list[np.ndarray], tiles: list[Tile], P: int, scale: float = 1.0) -> np.ndarray:
    """The symmetric P x P matrix from the states of the tiles of its upper triangle (the diagonal is set by the
    caller)."""
    M = np.empty((P, P))
    for S, (r0, r1, c0, c1) in zip(parts, tiles):
        np.multiply(S, scale, out=M[r0:r1, c0:c1])
    _mirror(M, tiles)
    return M


def _store(view: np.ndarray, result: np.ndarray) -> None:
    if result is not view:
        view[...] = result


def _mirror(M: np.ndarray, tiles: list[Tile]) -> None:
    """Make M symmetric in place from its upper-triangle tiles (`mirror.mirror_tile` per tile)."""
    from resprop.numeric.engine.mirror import mirror_tile

    for t in tiles:
        mirror_tile(M, *t)


__all__ = ["propagate", "recursions", "closed_form_names", "ActivationRecursions", "Propagated", "MODES", "strips",
           "Schedule", "Block", "run_block", "run_block_pieces", "tile_grid", "band_tiles", "default_block"]

