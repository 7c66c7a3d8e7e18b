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
diagonals are equal, the chunked general path otherwise).
"""
from __future__ import annotations

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

    from resprop.derive.codegen import render_recursion_module
    from resprop.derive.residual import from_closed_form, recursions_for
    from resprop.derive.results import Derivation

    recs = recursions_for(from_closed_form(str(expr), forms), prefix="custom")
    d = Derivation("custom", f"Residual recursions of phi(x) = {expr}", "fischer2025")
    source = render_recursion_module(d, "(run time)", recs)
    mod = types.ModuleType("resprop.generated.custom_recursions")
    exec(compile(source, f"<recursions of {expr}>", "exec"), mod.__dict__)
    return mod


# --------------------------------------------------------------------------- tabulated expectations
class _Tables:
    """Callbacks of the tabulated recursion for a block of layers: per layer a rho interpolant when the diagonal
    is constant over the inputs, the general path otherwise."""

    def __init__(self, expr: sp.Expr, diag: np.ndarray) -> None:
        dual_tables = _duals_module(expr)

        self.dt = dual_tables
        self.expr = expr
        self.diag = diag  # (layers, P): the diagonal before each layer of the block
        # equal up to round-off (unit-norm inputs differ by ulps): one table at the mean; the change of the
        # expectation is O(spread) relative, far below the tables' 1e-10
        spread = np.max(np.abs(diag - diag[:, :1]), axis=1) <= EQUAL_DIAGONAL_RTOL * np.max(np.abs(diag), axis=1)
        self.equal = bool(np.all(spread))
        self.tables = ([dual_tables.build_table(expr, float(np.mean(d)), float(np.mean(d))) for d in diag]
                       if self.equal else None)

    def for_strip(self, lo: int, hi: int) -> dict[str, Callable]:
        stash: dict[int, np.ndarray] = {}
        if self.equal:
            tables = self.tables

            def mean_phi_phi(l, rho, out):
                return tables[l].mean_phi_phi(rho, out)

            def mean_dphi_dphi(l, rho, out):
                return tables[l].mean_dphi_dphi(rho, out)
        else:
            diag = self.diag

            def _both(l, rho, out_phi, out_dphi):
                da, db = diag[l, lo:hi, None], diag[l, None, lo:]
                K_ab = rho * np.sqrt(da) * np.sqrt(db)
                Kaa, Kbb = np.broadcast_to(da, K_ab.shape), np.broadcast_to(db, K_ab.shape)
                self.dt.mean_phi_phi_general(self.expr, Kaa, Kbb, K_ab, out_phi, out_dphi)

            def mean_phi_phi(l, rho, out):
                dphi = np.empty_like(out)
                _both(l, rho, out, dphi)
                stash[l] = dphi
                return out

            def mean_dphi_dphi(l, rho, out):
                if l in stash:
                    out[...] = stash.pop(l)
                else:
                    _both(l, rho, np.empty_like(out), out)
                return out
        return {"mean_phi_phi": mean_phi_phi, "mean_dphi_dphi": mean_dphi_dphi}

    @staticmethod
    @cache  # custom_kernels differentiates and simplifies in SymPy (~0.1 s): once per activation
    def diagonal_callbacks(expr: sp.Expr) -> dict[str, Callable]:
        """Callbacks of the diagonal recursion: <phi^2>, <phi'^2> and <phi'^2 + phi phi''> at each K (1-D)."""
        from resprop.numeric.engine import dual_tables as dt_smooth
        from resprop.numeric.engine.expectations import custom_kernels

        dual_tables = _duals_module(expr)

        def unique(fn):
            def callback(l, K, out):
                values, inverse = np.unique(K, return_inverse=True)
                out[...] = np.asarray(fn(values))[inverse].reshape(K.shape)
                return out
            return callback

        return {"mean_phi_sq": unique(lambda d: dual_tables.diagonal(expr, d)[0]),
                "mean_dphi_sq": unique(lambda d: dual_tables.diagonal(expr, d)[1]),
                "price_diag": unique(lambda d: dual_tables.price_diag(expr, d) if dual_tables is not dt_smooth
                                     else custom_kernels(expr).price_diag(d))}  # response mode only


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
              block: int | None = None) -> Propagated:
    """Run the generated recursions of ``rec`` from K^(0) (and Theta^(0) or chi^(0)) through the layers given
    by the per-layer ``sequences`` (skip_gain, branch_weight, branch_bias), each of length L.

    Inputs are assumed validated (float64, symmetric, PSD).  The state of every strip is carried between blocks
    of layers; the diagonal is run first for each block."""
    g, w, s = (np.asarray(q, dtype=float) for q in sequences)
    L, P = g.size, K0.shape[0]
    pair_fn, diag_fn = rec.pair[mode], rec.diagonal[mode]
    two = mode != "nngp"
    homogeneous = rec.name in HOMOGENEOUS
    if block is None:
        block = max(1, min(L, DIAGONAL_BYTES // (8 * P * 3)))
        if homogeneous or mode == "response":  # rescaled between blocks: each block must stay in range
            block = min(block, HOMOGENEOUS_BLOCK)
    bands = strips(P, strip)
    K_strips = [np.array(K0[lo:hi, lo:], dtype=float) for lo, hi in bands]
    S_strips: Any = [np.array(second0[lo:hi, lo:], dtype=float) for lo, hi in bands] if two else None
    d = np.diagonal(K0).astype(float).copy()
    sd: Any = np.diagonal(second0).astype(float).copy() if two else None
    log_K = log_S = 0.0
    layers = [(K0.copy(), None if second0 is None else second0.copy())] if record_layers else None
    n_workers = min(workers(), len(bands)) if P * (P - 1) // 2 >= THREAD_MIN else 1
    diag_callbacks = _Tables.diagonal_callbacks(rec.expr) if rec.expr is not None else {}
    pool = ThreadPoolExecutor(n_workers) if n_workers > 1 else None
    try:
        for start in range(0, L, block):
            stop = min(L, start + block)
            gb, wb, sb = g[start:stop], w[start:stop], s[start:stop] * math.exp(-log_K)  # bias in the scaled units
            # the diagonal before each layer of the block
            rows = np.empty((stop - start, P))
            srow = np.empty((stop - start, P)) if record_layers and two else None

            def keep(l, *state, rows=rows, srow=srow):
                if l + 1 < rows.shape[0]:
                    rows[l + 1] = state[0]
                    if srow is not None:
                        srow[l + 1] = state[1]

            rows[0] = d
            if srow is not None:
                srow[0] = sd
            out = diag_fn(d.copy(), *((sd.copy(),) if two else ()), gb, wb, sb, record=keep,
                          **_used(diag_fn, diag_callbacks))
            d_next, sd_next = (out if two else (out, None))
            tables = _Tables(rec.expr, rows) if rec.expr is not None else None
            def work(k, rows=rows, gb=gb, wb=wb, sb=sb, tables=tables):
                lo, hi = bands[k]
                args = [K_strips[k]] + ([S_strips[k]] if two else [])
                callbacks = {} if tables is None else tables.for_strip(lo, hi)
                recorder = _StripRecorder() if record_layers else None
                result = pair_fn(*args, rows[:, lo:hi, None], rows[:, None, lo:], gb, wb, sb,
                                 record=recorder, **_used(pair_fn, callbacks))
                if two:
                    K_strips[k], S_strips[k] = result
                else:
                    K_strips[k] = result
                return recorder

            recorders = list(pool.map(work, range(len(bands)))) if pool else [work(k) for k in range(len(bands))]
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
    finally:
        if pool:
            pool.shutdown()
    K = _assemble(K_strips, bands, P)
    np.fill_diagonal(K, d)
    second = None
    if two:
        second = _assemble(S_strips, bands, P)
        np.fill_diagonal(second, sd)
    return Propagated(K, second, log_K, log_S, layers)


class _StripRecorder:
    """Copies a strip's state after each layer (for per-layer output)."""

    def __init__(self) -> None:
        self.K: list[np.ndarray] = []
        self.S: list[np.ndarray] = []

    def __call__(self, l, K, *second):
        self.K.append(K.copy())
        if second:
            self.S.append(second[0].copy())


def _used(fn: Callable, callbacks: dict[str, Callable]) -> dict[str, Callable]:
    """The callbacks a generated recursion takes (its module's RECURSIONS entry names them)."""
    table = fn.__globals__.get("RECURSIONS", {})
    wanted = table.get(fn.__name__, {}).get("callbacks", [])
    return {name: callbacks[name] for name in wanted}


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
