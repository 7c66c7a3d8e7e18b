"""Numeric driver of the generated field-theory recursions (Fischer, Dahmen & Helias 2025).

The depth recursions are generated (this theory's `generated.fischer_recursions`, from `derive/theories/fischer.py`,
built from the one-step updates read off the action: residual kernel B9, kernel update B10, response 45/C15,
kernel response 47); this module only prepares their inputs, calls them and reads out (30, 48) with the
one-step kernels of this theory's `generated.fischer`:

* :func:`nngp` (a (P, P) input kernel) runs the generated residual recursions of
  `resprop.numeric.engine.residual_kernel` in mode "response" (g = 1, w = rho^2 sigma_w^2, s = rho^2 sigma_b^2)
  for erf and ReLU; other activations, and the batched scans (:func:`propagate`, :func:`_pair_pass` behind
  :func:`response`, :func:`rho_star`, :func:`chi_out_curves`, :func:`rho_star_pairs`), run the vector-mode
  recursions ``<kind>_diagonal``, ``<kind>_pair`` and ``<kind>_two_inputs`` (kind erf or relu with the dual
  kernels written in, ``callback`` with the activation's expectation kernels as callbacks) on a flat batch of
  elements: rho grids, depths, variances and targets ride along as one array axis.

Normalisation of the response: eta^(0) = 1 is the linear-response convention
(eq. 51, eta = dC/dK^(0)); the field-theory propagator gives eta^(0) = N/d_in
(C15).  Pass ``eta0=width/d_in`` for the latter; rho* does not depend on it.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import resprop.numeric.theories.fischer.generated.fischer as gen
import resprop.numeric.theories.fischer.generated.fischer_recursions as frec
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.expectations import ActivationKernels, kernels
from resprop.numeric.engine.results import ResultRecord

_PARALLEL_MIN = 20_000  # elements below which threading does not pay
MAX_DEPTH = 10**6  # the largest depth accepted (as V.depths)
#: the inputs that decide whether K^(l) and chi^(l) stay in float64 range (named when they do not)
_RANGE_NAMES = "rho, sigma_w2, sigma_b2, input_kernel, depth, activation"


def _u(fn):
    """The bare kernel of a generated function (``.unchecked``) for hot loops whose inputs were validated once
    at the public boundary; the checked wrapper would re-validate (and reject off-diagonal K_ab <= 0) per layer."""
    return getattr(fn, "unchecked", fn)


_residual_kernel = _u(gen.residual_kernel)
_residual_response = _u(gen.residual_response)
_output_response = _u(gen.output_response)
_readout_kernel = _u(gen.readout_kernel)


def _bare(kern: ActivationKernels) -> ActivationKernels:
    """``kern`` with the bare (unchecked) generated kernels where they exist."""
    return replace(kern, **{n: _u(getattr(kern, n)) for n in ("mean_phi_phi", "mean_dphi_dphi", "mean_phi_sq",
                                                              "price_diag", "mean_phi_sq_phi_sq")})


def _layer_bar(total: int, desc: str, enabled: bool):
    """A tqdm progress bar over layers on stderr (a no-op object when disabled)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="layer", unit_scale=True, leave=False, disable=not enabled,
                mininterval=0.5, delay=1.0)


def _workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _parallel(fn, *args: np.ndarray | float) -> np.ndarray:
    """Evaluate an elementwise kernel in chunks on a thread pool (NumPy releases the GIL)."""
    arrays = np.broadcast_arrays(*args)
    n = arrays[0].shape[-1] if arrays[0].ndim else 0
    w = _workers()
    if n < _PARALLEL_MIN or w == 1:
        return fn(*arrays)
    bounds = np.linspace(0, n, w + 1).astype(int)
    with ThreadPoolExecutor(w) as pool:
        parts = list(pool.map(lambda s: fn(*(a[..., s[0]:s[1]] for a in arrays)), zip(bounds[:-1], bounds[1:])))
    return np.concatenate(parts, axis=-1)


@dataclass
class Hyper:
    """Residual-branch and readout hyperparameters; each broadcasts against the batch shape."""

    rho: np.ndarray
    sigma_w2: np.ndarray
    sigma_b2: np.ndarray
    sigma_w2_out: np.ndarray
    sigma_b2_out: np.ndarray

    @classmethod
    def make(cls, rho, sigma_w2, sigma_b2, sigma_w2_out=None, sigma_b2_out=None) -> Hyper:
        sw = V.positive("sigma_w2", sigma_w2)
        sb = V.nonnegative("sigma_b2", sigma_b2)
        return cls(
            rho=V.nonnegative("rho", rho), sigma_w2=sw, sigma_b2=sb,
            sigma_w2_out=sw if sigma_w2_out is None else V.positive("sigma_w2_out", sigma_w2_out),
            sigma_b2_out=sb if sigma_b2_out is None else V.nonnegative("sigma_b2_out", sigma_b2_out))


@dataclass
class Trajectory:
    """Per-element results of :func:`propagate`; ``layers`` holds per-layer arrays when kept."""

    K_diag: np.ndarray
    K_off: np.ndarray
    chi_diag: np.ndarray
    chi_off: np.ndarray
    chi_out_diag: np.ndarray
    chi_out_off: np.ndarray
    K_out_diag: np.ndarray
    K_out_off: np.ndarray
    layers: dict[str, list[np.ndarray]] = field(default_factory=dict)


def propagate(d0: np.ndarray, o0: np.ndarray, pairs: tuple[np.ndarray, np.ndarray], stop: np.ndarray,
              hyper: Hyper, kern: ActivationKernels, eta0: float = 1.0, keep_layers: bool = False) -> Trajectory:
    """Iterate NNGP (B9-B10) and response (45, 47) to depth ``stop`` and read out (30, 48).

    The generated recursions ``<kind>_diagonal`` (the P diagonal elements) and ``<kind>_two_inputs`` (the M
    pairs, each carrying its two diagonals) on the flattened batch, threaded over chunks of elements.

    d0 (..., P): diagonal of K^(0); o0 (..., M): off-diagonal elements K^(0)_{ij}
    for (i, j) = pairs; stop (...): the depth L of each batch element (results
    are captured at layer stop, so one pass serves many depths).
    """
    eta0 = V.scalar("eta0", eta0, V.positive)
    with np.errstate(all="ignore"), _overflow_named():  # overflow (geometric growth, huge inputs): see there
        return _propagate(d0, o0, pairs, stop, hyper, kern, eta0, keep_layers)


@contextmanager
def _overflow_named():
    """Inside the recursions the inputs are already validated, so a kernel that objects (a generated kernel's
    domain check on an inf K^(l)) can only be reporting float64 overflow: name the inputs that cause it."""
    try:
        yield
    except V.ParameterError:
        raise V.ParameterError(_RANGE_NAMES, "K^(l) or chi^(l) is not finite in float64 for these values "
                                             "(overflow); use values of moderate size") from None


def _propagate(d0, o0, pairs, stop, hyper, kern, eta0, keep_layers) -> Trajectory:
    kern = _bare(kern)
    i, j = pairs
    stop = np.asarray(stop)
    L_max = int(stop.max())
    h = hyper
    batch = np.broadcast_shapes(d0.shape[:-1], o0.shape[:-1], stop.shape,
                                *(np.shape(getattr(h, n)) for n in ("rho", "sigma_w2", "sigma_b2")))
    d = np.broadcast_to(d0, batch + d0.shape[-1:]).astype(float)
    o = np.broadcast_to(o0, batch + o0.shape[-1:]).astype(float)
    P, M = d.shape[-1], o.shape[-1]
    # Elements on the boundary |K_ab| = sqrt(K_aa K_bb) stay on it exactly when the inputs are identical, or
    # collinear (x, c x) through a positively homogeneous activation without bias; the kernels' sqrt(1 - c^2)
    # turns a last-ulp miss of the boundary into ~1e-8 errors, so such elements are pinned to it (clip_lo =
    # clip_hi = sign K_ab); every other element is clipped into |K_ab| <= sqrt(K_aa K_bb), a round-off guard, not
    # input clipping: the correlation-one manifold is unstable (the off-diagonal slope exceeds the diagonal
    # one), so last-ulp differences between K_ab and K_aa would otherwise grow with depth.
    pinned = _stays_on_boundary(d[..., i], d[..., j], o, np.asarray(h.sigma_b2)[..., None] == 0, kern.name)
    hyp = [np.asarray(getattr(h, n))[..., None] for n in ("rho", "sigma_w2", "sigma_b2")]
    stop_e = stop[..., None]
    flat = lambda a, m: np.broadcast_to(a, batch + (m,)).reshape(-1)  # noqa: E731  batch x elements -> 1-D
    unflat = lambda a, m: a.reshape(batch + (m,))  # noqa: E731
    eta = np.full(d.size, float(eta0))
    diag = _Run(_recursion(kern, "diagonal"), kern, [d.reshape(-1), d.reshape(-1), eta, eta],
                [flat(x, P) for x in hyp], flat(stop_e, P), capture=(0, 2), keep=(0, 1, 3) if keep_layers else ())
    diag.run(L_max, threads=True)
    layers: dict[str, list[np.ndarray]] = {}
    if keep_layers:
        layers = {name: [unflat(a, P) for a in diag.layers[k]] for name, k in (("K_diag", 0), ("C_diag", 1),
                                                                               ("eta_diag", 3))}
    Kd, chi_d = unflat(diag.captured[0], P), unflat(diag.captured[2], P)
    if M:
        sign = np.where(o > 0, 1.0, -1.0)
        clip_lo, clip_hi = np.where(pinned, sign, -1.0), np.where(pinned, sign, 1.0)
        eta = np.full(o.size, float(eta0))
        off = _Run(_recursion(kern, "two_inputs"), kern,
                   [d[..., i].reshape(-1), d[..., j].reshape(-1), o.reshape(-1), o.reshape(-1), eta, eta],
                   [flat(x, M) for x in hyp] + [clip_lo.reshape(-1), clip_hi.reshape(-1)], flat(stop_e, M),
                   capture=(2, 4), keep=(2, 3, 5) if keep_layers else ())
        off.run(L_max, threads=True)
        Ko, chi_o = unflat(off.captured[2], M), unflat(off.captured[4], M)
        if keep_layers:
            layers.update({name: [unflat(a, M) for a in off.layers[k]]
                           for name, k in (("K_off", 2), ("C_off", 3), ("eta_off", 5))})
    else:
        Ko, chi_o = np.zeros(o.shape), np.zeros(o.shape)
        if keep_layers:
            layers.update({name: [np.zeros(o.shape)] * (L_max + 1) for name in ("K_off", "C_off", "eta_off")})
    swo, sbo = (np.asarray(a)[..., None] for a in (h.sigma_w2_out, h.sigma_b2_out))
    mo = _parallel(kern.mean_phi_phi, Kd[..., i], Kd[..., j], Ko)
    go = _parallel(kern.mean_dphi_dphi, Kd[..., i], Kd[..., j], Ko)
    return Trajectory(
        K_diag=Kd, K_off=Ko, chi_diag=chi_d, chi_off=chi_o,
        chi_out_diag=_output_response(swo, kern.price_diag(Kd), chi_d),
        chi_out_off=_output_response(swo, go, chi_o),
        K_out_diag=_readout_kernel(swo, sbo, kern.mean_phi_sq(Kd)),
        K_out_off=_readout_kernel(swo, sbo, mo),
        layers=layers)


def _stays_on_boundary(Kaa, Kbb, Kab, no_bias, activation: str) -> np.ndarray:
    """Elements on the boundary |K_ab| = sqrt(K_aa K_bb) that stay on it at every layer: identical inputs, and
    collinear inputs (x, c x) of a positively homogeneous activation without bias."""
    on = np.abs(Kab) >= np.sqrt(Kaa) * np.sqrt(Kbb) * (1 - 1e-15)
    return on & (((Kaa == Kbb) & (Kab > 0)) | (no_bias & (activation == "linear"))
                 | (no_bias & (activation == "relu") & (Kab > 0)))


# --------------------------------------------------------------------------- the generated recursions
#: activations whose dual kernels are written into the generated recursions (the rest use callbacks)
INLINE = ("erf", "relu")
#: layers per call of a generated recursion (the progress bar advances between calls)
_BLOCK = 4096


def _recursion(kern: ActivationKernels, variant: str):
    """The generated recursion ``<kind>_<variant>`` for an activation (kind: erf, relu or callback)."""
    return getattr(frec, f"{kern.name if kern.name in INLINE else 'callback'}_{variant}")


def _callbacks(fn, kern: ActivationKernels) -> dict[str, Any]:
    """The expectation kernels of ``kern`` as the callbacks f(l, *arguments, out) that ``fn`` takes."""

    def callback(kernel):
        def f(l, *args):
            np.copyto(args[-1], kernel(*args[:-1]))
        return f

    names: list[str] = frec.RECURSIONS[fn.__name__]["callbacks"]  # type: ignore[assignment]
    return {name: callback(getattr(kern, name)) for name in names}


def _row(x: np.ndarray) -> np.ndarray:
    """A per-element input as a row of the recursion: a scalar where all elements share it (cheaper per layer)."""
    x = np.asarray(x, dtype=float)
    return x[:1].reshape(()) if x.size and np.all(x == x.flat[0]) else x


class _Run:
    """One generated recursion over a flat batch of n elements, each stopping at its own depth ``stop``.

    ``state``: the arrays of layer 0 (copied), ``rows``: per-element inputs constant over the layers (broadcast
    to a zero-stride layer axis).  ``captured[k]`` is state k at each element's stop layer for k in ``capture``;
    with ``keep``, ``layers[k]`` holds state k at every layer 0..max(stop) ((L+1, n) arrays, preallocated)."""

    def __init__(self, fn, kern, state, rows, stop, capture=(), keep=()) -> None:
        self.fn, self.kern = fn, kern
        self.state = [np.asarray(a, dtype=float).reshape(-1) for a in state]  # copied by _run
        self.n = self.state[0].size
        self.rows = [_row(np.broadcast_to(r, (self.n,))) for r in rows]
        self.stop = np.broadcast_to(np.asarray(stop, dtype=np.int64), (self.n,))
        self.capture, self.keep = tuple(capture), tuple(keep)
        self.captured: dict[int, np.ndarray] = {}
        self.layers: dict[int, np.ndarray] = {}

    def run(self, layers: int, bar=None, threads: bool = False) -> None:
        n_chunks = _workers() if threads and self.n >= _PARALLEL_MIN and not self.keep else 1
        if n_chunks == 1:
            self._run(slice(0, self.n), layers, bar)
            return
        bounds = np.linspace(0, self.n, n_chunks + 1).astype(int)
        self.captured = {k: np.empty(self.n) for k in self.capture}
        with ThreadPoolExecutor(n_chunks) as pool:
            list(pool.map(lambda b: self._run(slice(*b), layers, None), zip(bounds[:-1], bounds[1:])))

    def _run(self, sl: slice, layers: int, bar) -> None:
        state = [a[sl].copy() for a in self.state]
        rows = [r if r.ndim == 0 else r[sl] for r in self.rows]
        stop = self.stop[sl]
        stops = set(np.unique(stop).tolist()) - {layers}
        cap = {k: np.zeros(state[k].shape) for k in self.capture}
        if self.keep:
            for k in self.keep:
                self.layers[k] = np.empty((layers + 1, self.n))
                self.layers[k][0] = state[k]
        kept = self.layers
        hits = {s: stop == s for s in stops}
        if 0 in hits:  # depth 0: the input itself
            for k in cap:
                np.copyto(cap[k], state[k], where=hits[0])

        def record(l, *st):
            if kept:
                for k in self.keep:
                    kept[k][l + 1] = st[k]
            if l + 1 in hits:
                for k in cap:
                    np.copyto(cap[k], st[k], where=hits[l + 1])

        callbacks = _callbacks(self.fn, self.kern)
        use_record = bool(self.keep or stops)
        for start in range(0, layers, _BLOCK):
            nb = min(_BLOCK, layers - start)
            block_rows = [np.broadcast_to(r, (nb,) + r.shape) for r in rows]
            rec = (lambda l, *st, start=start: record(start + l, *st)) if use_record else None
            out = self.fn(*state, *block_rows, record=rec, **callbacks)
            state = list(out) if isinstance(out, tuple) else [out]
            if bar is not None:
                bar.update(nb)
        last = stop == layers
        for k in cap:
            if not stops:
                cap[k] = state[k]
            else:
                np.copyto(cap[k], state[k], where=last)
        if sl == slice(0, self.n):
            self.captured = cap
        else:
            for k in cap:
                self.captured[k][sl] = cap[k]


# --------------------------------------------------------------------------- P inputs
def _triangle(P: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(P, k=1)


def _assemble(diag: np.ndarray, off: np.ndarray, P: int) -> np.ndarray:
    i, j = _triangle(P)
    M = np.zeros(diag.shape[:-1] + (P, P))
    M[..., i, j] = off
    M[..., j, i] = off
    idx = np.arange(P)
    M[..., idx, idx] = diag
    return M


@dataclass(frozen=True)
class NNGPResult(ResultRecord):
    """:func:`nngp`: K = K^(L), K_out = K^(L+1), chi = chi^(L), chi_out, each (P, P); with keep_layers also
    K_layers, C_layers, eta_layers of shape (L+1, P, P) (None otherwise)."""

    depth: int
    K: np.ndarray
    K_out: np.ndarray
    chi: np.ndarray
    chi_out: np.ndarray
    K_layers: np.ndarray | None = None
    C_layers: np.ndarray | None = None
    eta_layers: np.ndarray | None = None


@dataclass(frozen=True)
class ResponseResult(ResultRecord):
    """:func:`response`: per-layer eta, chi, C, K (l = 0..L) and chi_out, K_out of the diagonal element; the
    ``*_offdiag`` fields for the off-diagonal element when input_kernel_offdiag was given (None otherwise)."""

    depth: int
    eta: np.ndarray
    chi: np.ndarray
    C: np.ndarray
    K: np.ndarray
    chi_out: float
    K_out: float
    eta_offdiag: np.ndarray | None = None
    chi_offdiag: np.ndarray | None = None
    C_offdiag: np.ndarray | None = None
    K_offdiag: np.ndarray | None = None
    chi_out_offdiag: float | None = None
    K_out_offdiag: float | None = None


@dataclass(frozen=True)
class ChiOutCurves(ResultRecord):
    """:func:`chi_out_curves`: chi_out (and chi_out_offdiag) of shape (len(depth), len(rho))."""

    rho: np.ndarray
    depth: np.ndarray
    chi_out: np.ndarray
    chi_out_offdiag: np.ndarray | None = None


@dataclass(frozen=True)
class RhoStarResult(ResultRecord):
    """:func:`rho_star`: rho* per depth and its status (see there); the ``rho_star_offdiag*`` fields for the
    off-diagonal element when input_kernel_offdiag was given (None otherwise)."""

    depth: np.ndarray
    search_range: np.ndarray
    passes: int
    rho_star: np.ndarray
    rho_star_grid_index: np.ndarray
    rho_star_chi_out: np.ndarray
    rho_star_interior: np.ndarray
    rho_star_supremum_at: np.ndarray
    rho_star_bound: np.ndarray
    rho_star_boundary: np.ndarray
    rho_star_offdiag: np.ndarray | None = None
    rho_star_offdiag_grid_index: np.ndarray | None = None
    rho_star_offdiag_chi_out: np.ndarray | None = None
    rho_star_offdiag_interior: np.ndarray | None = None
    rho_star_offdiag_supremum_at: np.ndarray | None = None
    rho_star_offdiag_bound: np.ndarray | None = None
    rho_star_offdiag_boundary: np.ndarray | None = None


@dataclass(frozen=True)
class RhoStarPairs(ResultRecord):
    """:func:`rho_star_pairs` with ``with_status``: (P, P) matrices rho_star, interior, supremum_at, chi_out."""

    rho_star: np.ndarray
    interior: np.ndarray
    supremum_at: np.ndarray
    chi_out: np.ndarray


def input_kernel(X, sigma_w2_in=1.0, sigma_b2_in=0.0) -> np.ndarray:
    """K^(0) = sigma_w,in^2/d_in X X^T + sigma_b,in^2 (B10) for inputs X of shape (P, d_in)."""
    X = V.real("X", X)
    if X.ndim != 2:
        raise V.ParameterError("X", f"must have shape (P, d_in), got {X.shape}")
    sw = V.positive("sigma_w2_in", sigma_w2_in)
    sb = V.nonnegative("sigma_b2_in", sigma_b2_in)
    return gen.input_kernel(sw, sb, X.shape[1], X @ X.T)


def nngp(input_kernel, depth: int, rho, sigma_w2, sigma_b2, sigma_w2_out=None, sigma_b2_out=None,
         activation="erf", eta0: float = 1.0, keep_layers: bool = False) -> NNGPResult:
    """NNGP kernels and response functions for P inputs (B9-B10, C15-C17).

    input_kernel: (P, P) input kernel K^(0).  Returns (:class:`NNGPResult`) K (P, P) = K^(L), K_out = K^(L+1), chi =
    chi^(L) and chi_out, each (P, P): diagonal entries use the diagonal
    response (<phi'^2 + phi phi''>), off-diagonal ones the off-diagonal
    response (<phi'_a phi'_b>).  With keep_layers, also K_layers, C_layers,
    eta_layers of shape (L+1, P, P).
    """
    K0 = V.kernel_matrix("input_kernel", input_kernel)
    if K0.ndim != 2:
        raise V.ParameterError("input_kernel", f"must be a single (P, P) matrix, got shape {K0.shape}")
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    hyper = Hyper.make(rho, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    _scalars(hyper, "use rho_star/chi_out_curves for batches")
    P = K0.shape[0]
    kern = kernels(activation)
    if kern.name in INLINE:
        res = _nngp_residual(K0, L, hyper, kern, eta0, keep_layers)
    else:
        i, j = _triangle(P)
        tr = propagate(np.diagonal(K0).copy(), K0[i, j], (i, j), np.array(L), hyper, kern, eta0, keep_layers)
        res = {
            "K": _assemble(tr.K_diag, tr.K_off, P),
            "K_out": _assemble(tr.K_out_diag, tr.K_out_off, P),
            "chi": _assemble(tr.chi_diag, tr.chi_off, P),
            "chi_out": _assemble(tr.chi_out_diag, tr.chi_out_off, P),
        }
        if keep_layers:
            for name in ("K", "C", "eta"):
                res[f"{name}_layers"] = np.stack([_assemble(dd, oo, P) for dd, oo in
                                                  zip(tr.layers[f"{name}_diag"], tr.layers[f"{name}_off"])])
    for name, value in res.items():
        V.finite_result(_RANGE_NAMES, value, name)
    return NNGPResult(depth=L, **res)


def _nngp_residual(K0: np.ndarray, L: int, hyper: Hyper, kern: ActivationKernels, eta0,
                   keep_layers: bool) -> dict[str, np.ndarray]:
    """:func:`nngp` of a closed-form activation (erf, ReLU) on the generated residual recursions
    (`resprop.numeric.engine.residual_kernel`, mode "response": g = 1, w = rho^2 sigma_w^2, s = rho^2 sigma_b^2,
    chi^(0) = eta0), read out (30, 48) with the one-step kernels; per-layer C and eta from the kept layers by
    the one-step kernels B9 and 45."""
    from resprop.numeric.engine import residual_kernel as RK

    eta0 = V.scalar("eta0", eta0, V.positive)
    rho, sw, sb, swo, sbo = (np.float64(getattr(hyper, n)) for n in ("rho", "sigma_w2", "sigma_b2",
                                                                       "sigma_w2_out", "sigma_b2_out"))
    with np.errstate(all="ignore"):  # rho^2 may overflow: K^(l) is then not finite (reported below)
        r2 = rho**2
        sequences = (np.ones(L), np.full(L, r2 * sw), np.full(L, r2 * sb))
    chi0 = np.full(K0.shape, float(eta0))
    bare = _bare(kern)
    # pairs that stay on the boundary K_ab = +-sqrt(K_aa K_bb) exactly (see _propagate): the generated residual
    # recursion would let their last-ulp misses grow along the unstable correlation-one manifold (7e-3 in chi at
    # L = 5000 for erf), so their K_ab is pinned to the boundary and chi_ab comes from the pinned two-input run
    P = K0.shape[0]
    i, j = _triangle(P)
    d0, o0 = np.diagonal(K0).copy(), K0[i, j]
    pinned = np.flatnonzero(_stays_on_boundary(d0[i], d0[j], o0, sb == 0, kern.name))  # K_ab > 0: erf, ReLU
    pi, pj, ones = i[pinned], j[pinned], np.ones(pinned.size)

    def pin(M: np.ndarray, chi_M: np.ndarray, chi_ab: np.ndarray) -> None:
        M[pi, pj] = M[pj, pi] = np.sqrt(M[pi, pi]) * np.sqrt(M[pj, pj])
        chi_M[pi, pj] = chi_M[pj, pi] = chi_ab

    with np.errstate(all="ignore"):
        out = RK.propagate(K0, chi0, sequences, "response", RK.recursions(kern.name), record_layers=keep_layers)
        K = out.K * np.exp(out.log_scale_K)
        assert out.second is not None
        chi = out.second * np.exp(out.log_scale_second)
        if pinned.size:
            run = _Run(_recursion(kern, "two_inputs"), kern, [d0[pi], d0[pj], o0[pinned], o0[pinned],
                                                               chi0[pi, pj], chi0[pi, pj]],
                       [rho, sw, sb, ones, ones], L, capture=(4,), keep=(4,) if keep_layers else ())
            run.run(L)
            pin(K, chi, run.captured[4])
            if keep_layers:
                assert out.layers is not None
                for l in range(1, L + 1):
                    K_l, chi_l = out.layers[l]
                    pin(K_l, chi_l, run.layers[4][l])
        E, G = _pair_means(bare, K)
        res = {"K": K, "K_out": _readout_kernel(swo, sbo, E), "chi": chi, "chi_out": _output_response(swo, G, chi)}
        if keep_layers:
            assert out.layers is not None
            Ks = np.stack([k for k, _ in out.layers])
            chis = np.stack([c for _, c in out.layers])
            C, eta = np.empty_like(Ks), np.empty_like(Ks)
            C[0], eta[0] = K0, chi0
            for l in range(1, L + 1):
                E, G = _pair_means(bare, Ks[l - 1])
                C[l] = _residual_kernel(rho, sw, sb, E)
                eta[l] = _residual_response(rho, sw, G, chis[l - 1])
            res.update(K_layers=Ks, C_layers=C, eta_layers=eta)
    return res


def _pair_means(kern: ActivationKernels, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(<phi_a phi_b>, g_ab) of every pair of a (P, P) kernel: <phi'_a phi'_b> off the diagonal, <phi'^2 + phi
    phi''> on it (symmetric: the upper triangle mirrored)."""
    P = K.shape[0]
    i, j = _triangle(P)
    d = np.diagonal(K).copy()
    E = _parallel(kern.mean_phi_phi, d[i], d[j], K[i, j])
    G = _parallel(kern.mean_dphi_dphi, d[i], d[j], K[i, j])
    return _assemble(kern.mean_phi_sq(d), E, P), _assemble(kern.price_diag(d), G, P)


# --------------------------------------------------------------------------- two-input element
def _pair(input_kernel, input_kernel_offdiag):
    k0 = V.positive("input_kernel", input_kernel)
    if input_kernel_offdiag is None:
        return k0, np.zeros_like(k0)
    k0o = V.real("input_kernel_offdiag", input_kernel_offdiag)
    V.covariance_pair("input_kernel_offdiag", *np.broadcast_arrays(k0, k0o))
    return k0, k0o


def response(input_kernel, depth: int, rho, sigma_w2, sigma_b2, input_kernel_offdiag=None, sigma_w2_out=None,
             sigma_b2_out=None, activation="erf", eta0: float = 1.0, progress: bool = False) -> ResponseResult:
    """eta^(l), chi^(l), C^(l), K^(l) for l = 0..L and chi_out (45-48) for the diagonal element
    K^(0) = input_kernel, and for the off-diagonal element of [[k0, k0_offdiag], [k0_offdiag, k0]]
    (k0 = input_kernel, k0_offdiag = input_kernel_offdiag) when input_kernel_offdiag is given.

    One pass over the layers (O(depth) memory: 24 bytes per layer and element); ``progress`` shows a tqdm bar."""
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    k0, k0o = _pair(input_kernel, input_kernel_offdiag)
    if k0.ndim or k0o.ndim:
        raise V.ParameterError("input_kernel" if k0.ndim else "input_kernel_offdiag", "must be a scalar here")
    hyper = Hyper.make(rho, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    _scalars(hyper, "use chi_out_curves for batches")
    eta0 = V.scalar("eta0", eta0, V.positive)
    V.flag("progress", progress)
    off = input_kernel_offdiag is not None
    tr = _pair_pass(hyper.rho, hyper.sigma_w2, hyper.sigma_b2, hyper.sigma_w2_out, hyper.sigma_b2_out, k0, k0o,
                    np.array(L), kernels(activation), eta0, keep_layers=True, progress=progress, desc="response",
                    offdiag=off)
    lay = {k: v[:, 0] for k, v in tr["layers"].items()}
    res = {"eta": lay["eta_diag"], "chi": np.cumsum(lay["eta_diag"]), "C": lay["C_diag"],
           "K": lay["K_diag"], "chi_out": float(tr["chi_out_diag"]), "K_out": float(tr["K_out_diag"])}
    if off:
        res.update({"eta_offdiag": lay["eta_off"], "chi_offdiag": np.cumsum(lay["eta_off"]),
                    "C_offdiag": lay["C_off"], "K_offdiag": lay["K_off"],
                    "chi_out_offdiag": float(tr["chi_out_off"]), "K_out_offdiag": float(tr["K_out_off"])})
    for name, value in res.items():
        V.finite_result(_RANGE_NAMES, value, name)
    return ResponseResult(depth=L, **res)


def _scalars(hyper: Hyper, hint: str) -> None:
    for name in ("rho", "sigma_w2", "sigma_b2", "sigma_w2_out", "sigma_b2_out"):
        if np.ndim(getattr(hyper, name)) != 0:
            raise V.ParameterError(name, f"must be a scalar here; {hint}")


def _batch_shape(names: str, *shapes) -> tuple:
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise V.ParameterError(names, f"shapes {', '.join(map(str, shapes))} do not broadcast against each other") \
            from None


def chi_out_curves(rho, depths, input_kernel, sigma_w2, sigma_b2, input_kernel_offdiag=None, sigma_w2_out=None,
                   sigma_b2_out=None, activation="erf", eta0: float = 1.0) -> ChiOutCurves:
    """chi_out(rho) for every depth in one vectorised pass: arrays of shape (len(depths), len(rho))."""
    rho = np.atleast_1d(V.nonnegative("rho", rho))
    L = np.atleast_1d(V.depths("depth", depths, MAX_DEPTH))
    if rho.ndim != 1 or L.ndim != 1:
        raise V.ParameterError("rho" if rho.ndim != 1 else "depth", "must be a scalar or a 1-D array")
    k0, k0o = _pair(input_kernel, input_kernel_offdiag)
    hyper = Hyper.make(rho[None, :], sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    _batch_shape(
        "sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, input_kernel, input_kernel_offdiag",
        (L.size, rho.size),
        *(np.shape(getattr(hyper, n)) for n in ("sigma_w2", "sigma_b2", "sigma_w2_out", "sigma_b2_out")),
        np.shape(k0),
        np.shape(k0o),
    )
    stop = np.broadcast_to(L[:, None], (L.size, rho.size))
    tr = propagate(np.array([k0, k0], dtype=float), np.array([k0o], dtype=float), (np.array([0]), np.array([1])),
                   stop, hyper, kernels(activation), eta0)
    res = {"rho": rho, "depth": L, "chi_out": tr.chi_out_diag[..., 0]}
    if input_kernel_offdiag is not None:
        res["chi_out_offdiag"] = tr.chi_out_off[..., 0]
    for name in ("chi_out", "chi_out_offdiag"):
        if name in res:
            V.finite_result(_RANGE_NAMES, res[name], name)
    return ChiOutCurves(**res)


# --------------------------------------------------------------------------- fast identical-diagonal pair pass
def _pair_pass(rho, sw, sb, swo, sbo, k0, k0o, stop, kern: ActivationKernels, eta0: float = 1.0,
               keep_layers: bool = False, progress: bool = False, desc: str = "layers",
               offdiag: bool = True) -> dict[str, Any]:
    """NNGP + response of the 2x2 kernel [[k0, k0o], [k0o, k0]] for a batch of elements, one pass over layers.

    The generated recursion ``<kind>_pair`` (``<kind>_diagonal`` without ``offdiag``) of two inputs of equal
    variance: every argument broadcasts to one batch shape, which is flattened, and each layer costs a fixed
    handful of NumPy calls whatever the batch size (rho grids, depths, targets ride along as one array axis).
    Results are captured at layer ``stop`` of each element, then read out (30, 48).  With ``keep_layers`` the
    per-layer arrays are preallocated (L+1, n) float64 blocks (O(depth) memory, 48 bytes per layer and element).
    Without ``offdiag`` the off-diagonal element is not propagated (its results are absent).
    """
    kern = _bare(kern)
    arrs = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (rho, sw, sb, swo, sbo, k0, k0o)),
                               np.asarray(stop))
    shape = arrs[0].shape
    rho, sw, sb, swo, sbo, d, o, stop = (a.reshape(-1) for a in arrs)
    stop = stop.astype(np.int64)
    n = rho.size
    L_max = int(stop.max())
    chi0 = np.full(n, float(eta0))
    state, rows = [d, d, chi0, chi0], [rho, sw, sb]
    kept = ("K_diag", "C_diag", "eta_diag") + (("K_off", "C_off", "eta_off") if offdiag else ())
    if offdiag:
        # identical inputs (K_ab = K_aa) stay identical at every layer, exactly (pinned to sqrt(K) sqrt(K):
        # clip_lo = clip_hi = 1); computing K_ab separately would let round-off grow like chi_ab (the
        # correlation-one manifold is unstable) and make chi_out_ab noisy in rho.  Every other K_ab is clipped
        # into [-K, K] (a round-off guard).
        same = o == d
        state += [o, o, chi0, chi0]
        rows += [np.where(same, 1.0, -1.0), np.ones(n)]
    run = _Run(_recursion(kern, "pair" if offdiag else "diagonal"), kern, state, rows, stop,
               capture=(0, 2, 4, 6) if offdiag else (0, 2), keep=(0, 1, 3, 4, 5, 7)[:len(kept)] if keep_layers else ())
    mean_phi_sq, price_diag = kern.mean_phi_sq, kern.price_diag
    mean_phi_phi, mean_dphi_dphi = kern.mean_phi_phi, kern.mean_dphi_dphi
    with np.errstate(all="ignore"), _overflow_named(), _layer_bar(L_max, desc, progress) as bar:
        run.run(L_max, bar=bar)
        bar.update(L_max - bar.n)
        cap = run.captured
        Kd, chi_d = cap[0], cap[2]
        res = {"chi_out_diag": _output_response(swo, price_diag(Kd), chi_d),
               "K_out_diag": _readout_kernel(swo, sbo, mean_phi_sq(Kd)), "K_diag": Kd, "chi_diag": chi_d}
        if offdiag:
            Ko, chi_o = cap[4], cap[6]
            res.update(chi_out_off=_output_response(swo, mean_dphi_dphi(Kd, Kd, Ko), chi_o),
                       K_out_off=_readout_kernel(swo, sbo, mean_phi_phi(Kd, Kd, Ko)), K_off=Ko, chi_off=chi_o)
    out = {k: v.reshape(shape) for k, v in res.items()}
    out["layers"] = {name: run.layers[k] for name, k in zip(kept, run.keep)} if keep_layers else {}
    return out


# --------------------------------------------------------------------------- honest maximisation
#: points of the log sub-grid laid over the bracket of the coarse grid maximum (one pass)
_SUB_POINTS = 129
#: relative step of the 5-point central differences of the Newton stage (O(h^4) slope)
_FD_STEP = 1e-4
#: a Newton step below this (relative) is the last one: quadratic convergence leaves ~step^2 (~1e-12)
_NEWTON_TOL = 1e-6
_NEWTON_PASSES = 8


def _maximise(f, grid: np.ndarray, batch: tuple, label: str) -> dict[str, np.ndarray]:
    """argmax of f over [grid[0], grid[-1]] for a batch of independent problems, honest about the edges.

    ``f(r)`` maps rho of shape batch + (n,) to values of the same shape in ONE vectorised pass (the cost of a
    pass is one sweep over the layers, nearly independent of n), so the search is organised in few passes:

    1. the coarse grid (its maximum must be finite and positive, see :func:`_grid_argmax`);
    2. a log sub-grid of _SUB_POINTS points over the bracket [g_(i-1), g_(i+1)] of the grid maximum, and the
       vertex of the parabola (in log rho) through the sub-grid maximum and its neighbours;
    3. safeguarded Newton steps on the 5-point central-difference slope inside the bracket (one pass each),
       until a step is below _NEWTON_TOL relative: quadratic convergence then leaves an error ~step^2.  The
       maximum is flat, so its value alone fixes the maximiser only to ~sqrt(eps); the slope's root is well
       conditioned.  The value there is the stencil's Taylor polynomial at the final step (error ~step^3).

    The supremum is at an edge (no interior maximum) only when all three agree: the coarse grid maximum is
    an end point, the sub-grid next to that end point still peaks at the end point itself, and the slope
    at the end point points out of the range.  Otherwise the maximum is interior (possibly within a fraction
    of a grid step of the edge) and is refined.  Returns ``x`` (NaN where there is no interior maximum),
    ``value`` (f at x, or the supremum f(edge)), ``interior`` (bool), ``supremum_at`` ("interior", "lower",
    "upper"), ``bound`` (the edge, NaN where interior), ``grid_index`` and ``passes``.
    """
    N = grid.size
    vals = f(np.broadcast_to(grid, batch + (N,)))
    idx = _grid_argmax(vals, label)
    lo_edge, hi_edge = idx == 0, idx == N - 1
    a, b = grid[np.maximum(idx - 1, 0)], grid[np.minimum(idx + 1, N - 1)]
    t = np.linspace(0.0, 1.0, _SUB_POINTS)
    sub = a[..., None] * (b / a)[..., None] ** t  # log-spaced, end points exact
    sub[..., 0], sub[..., -1] = a, b
    v2 = np.where(np.isfinite(v2 := f(sub)), v2, -np.inf)
    j = np.argmax(v2, axis=-1)
    take = lambda arr, k: np.take_along_axis(arr, k[..., None], axis=-1)[..., 0]  # noqa: E731
    jm, jp = np.maximum(j - 1, 0), np.minimum(j + 1, _SUB_POINTS - 1)
    x, a, b = take(sub, j), take(sub, jm), take(sub, jp)
    lo_edge &= j == 0
    hi_edge &= j == _SUB_POINTS - 1
    fm, f0, fp = take(v2, jm), take(v2, j), take(v2, jp)
    with np.errstate(all="ignore"):  # parabola vertex in u = ln rho (equal spacing du on the sub-grid)
        du = np.log(b / a) / 2
        denom = fm - 2 * f0 + fp
        vertex = x * np.exp(du * (fm - fp) / (2 * denom))
    inner = (j > 0) & (j < _SUB_POINTS - 1) & (denom < 0) & np.isfinite(vertex) & (vertex > a) & (vertex < b)
    x = np.where(inner, vertex, x)
    value = f0
    done = np.zeros(batch, dtype=bool)
    passes, edge_checked = 2, False
    k = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    for _ in range(_NEWTON_PASSES):
        h = _FD_STEP * x
        st = f(x[..., None] + h[..., None] * k)
        passes += 1
        s2m, s1m, s0, s1p, s2p = (st[..., i] for i in range(5))
        slope = (s2m - 8 * s1m + 8 * s1p - s2p) / (12 * h)
        curv = (-s2m + 16 * s1m - 30 * s0 + 16 * s1p - s2p) / (12 * h**2)
        if not edge_checked:  # x is the edge itself where a candidate: its slope must point outwards
            lo_edge &= slope < 0
            hi_edge &= slope > 0
            edge_checked = True
        live = ~done & ~lo_edge & ~hi_edge
        # the maximiser lies where the slope points: shrink the bracket, then a Newton step safeguarded in it
        a = np.where(live & (slope > 0), np.maximum(a, x), a)
        b = np.where(live & (slope < 0), np.minimum(b, x), b)
        with np.errstate(all="ignore"):
            newton = x - slope / curv
        ok = np.isfinite(newton) & (curv < 0) & (newton >= a) & (newton <= b)
        new = np.where(ok, newton, np.where(slope > 0, (x + b) / 2, (x + a) / 2))
        new = np.where(live & (slope != 0), new, x)
        step = new - x
        last = live & ok & (np.abs(step) <= _NEWTON_TOL * x)
        value = np.where(live, np.where(last, s0 + slope * step + 0.5 * curv * step**2, s0), value)
        x, done = new, done | last | (live & (slope == 0))
        if np.all(done | lo_edge | hi_edge):
            break
    else:
        bad = ~(done | lo_edge | hi_edge)
        raise V.ParameterError(_RANGE_NAMES, f"the maximum of {label} could not be located to {_NEWTON_TOL:g} "
                                             f"relative in {passes} passes ({int(bad.sum())} problem(s)); "
                                             "chi_out is not smooth enough here (round-off or overflow)")
    edge = lo_edge | hi_edge
    value = np.where(lo_edge, vals[..., 0], np.where(hi_edge, vals[..., -1], value))
    V.finite_result(_RANGE_NAMES, value, f"{label} at its maximum")
    where = np.where(lo_edge, "lower", np.where(hi_edge, "upper", "interior"))
    return {"x": np.where(edge, np.nan, x), "value": value, "interior": ~edge, "supremum_at": where,
            "bound": np.where(lo_edge, grid[0], np.where(hi_edge, grid[-1], np.nan)), "grid_index": idx,
            "passes": passes}


def _none_at_edges(x: np.ndarray, interior: np.ndarray) -> np.ndarray:
    """x as float64 where every problem has an interior maximum; otherwise an object array holding None where
    there is none (arithmetic on it then fails loudly instead of propagating a made-up number;
    ``np.asarray(a, dtype=float)`` turns the None into NaN where that is wanted)."""
    if np.all(interior):
        return np.asarray(x, dtype=float)
    out = np.asarray(x, dtype=float).astype(object)
    out[~np.asarray(interior, dtype=bool)] = None
    return out


def boundary_text(supremum_at: str, bound: float) -> str | None:
    """'rho -> 0.001 (lower edge)' for a supremum at an edge of the searched range; None for an interior one."""
    if supremum_at == "interior":
        return None
    return f"rho -> {bound:g} ({supremum_at} edge)"


def rho_star(depths, input_kernel, sigma_w2, sigma_b2, input_kernel_offdiag=None, sigma_w2_out=None,
             sigma_b2_out=None, activation="erf", grid=None, iters: int = 25, progress: bool = False) -> RhoStarResult:
    """rho* = argmax_rho chi_out (Figs. 4-5) for a batch of depths and broadcastable hyperparameters.

    Searched range: rho in [grid[0], grid[-1]] (default: a 241-point log grid on [0.001, 3]).  Where chi_out
    has an interior maximum it is located to ~1e-10 relative (see :func:`_maximise`; about five passes over
    the layers, each vectorised over all rho, depths and both elements).  Where it has none -- chi_out is
    monotone towards an edge, e.g. bias-dominated variances, linear or ReLU activations, identical inputs in
    the off-diagonal -- there is no rho*: ``rho_star`` holds None there (it is then an object array; float64
    when every maximum is interior; the CLI prints null and "no interior maximum"), ``rho_star_interior`` is
    False, ``rho_star_supremum_at`` is "lower" or
    "upper", ``rho_star_bound`` the edge that the supremum approaches and ``rho_star_boundary`` the text
    "rho -> 0.001 (lower edge)".  ``rho_star_chi_out`` is chi_out at rho*, or its supremum (at the edge).
    The same keys with ``rho_star_offdiag`` for the off-diagonal element.  ``iters`` is accepted for
    compatibility (the refinement stops on its own tolerance).  sigma_w2, sigma_b2 and input_kernel may be arrays
    broadcasting against the depth axis (shape (len(depths), ...)).  ``progress`` shows a tqdm bar per pass.
    """
    L = np.atleast_1d(V.depths("depth", depths, MAX_DEPTH))
    k0, k0o = _pair(input_kernel, input_kernel_offdiag)
    kern = kernels(activation)
    grid = np.geomspace(1e-3, 3.0, 241) if grid is None else _rho_grid(grid)
    V.integer("iters", iters, 0, 10_000)
    V.flag("progress", progress)
    hyper0 = Hyper.make(1.0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    batch = _batch_shape("depth, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, input_kernel, input_kernel_offdiag",
                         L.shape,
                         *(np.shape(getattr(hyper0, n)) for n in ("sigma_w2", "sigma_b2", "sigma_w2_out",
                                                                  "sigma_b2_out")),
                         np.shape(k0), np.shape(k0o))
    try:  # the depth axis leads: hyperparameter arrays broadcast against (len(depths), ...)
        stop = np.broadcast_to(L.reshape(L.shape + (1,) * (len(batch) - L.ndim)), batch)
    except ValueError:
        raise V.ParameterError("depth, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, input_kernel, "
                               "input_kernel_offdiag",
                               f"array hyperparameters must broadcast against shape (len(depths), ...) = "
                               f"{L.shape + (1,) * (len(batch) - L.ndim)} with depth on the first axis") from None
    targets = ("diag",) + (("off",) if input_kernel_offdiag is not None else ())
    T = len(targets)
    ext = lambda a: np.reshape(np.broadcast_to(a, batch), batch + (1, 1))  # noqa: E731  batch -> (T, n) axes
    counter = iter(range(1, 10**6))

    # chi_out = sigma_w2_out <...> chi^(L) (48) is proportional to sigma_w2_out: maximise it at sigma_w2_out = 1
    # (no underflow or overflow of the factor in the search) and scale the value afterwards
    def chi(r: np.ndarray) -> np.ndarray:  # r: batch + (T, n); target t at its own rho
        res = _pair_pass(r, ext(hyper0.sigma_w2), ext(hyper0.sigma_b2), ext(1.0),
                         ext(hyper0.sigma_b2_out), ext(k0), ext(k0o), ext(stop), kern, progress=progress,
                         desc=f"rho* pass {next(counter)}", offdiag=T == 2)
        parts = [res["chi_out_diag" if t == "diag" else "chi_out_off"][..., k, :] for k, t in enumerate(targets)]
        return np.stack(parts, axis=-2)

    label = "chi_out" if T == 1 else "chi_out (diagonal and off-diagonal)"
    m = _maximise(chi, grid, batch + (T,), label)
    res: dict[str, Any] = {"depth": L, "search_range": np.array([grid[0], grid[-1]]), "passes": m["passes"]}
    for k, which in enumerate(targets):
        key = "rho_star" if which == "diag" else "rho_star_offdiag"
        res[key] = _none_at_edges(m["x"][..., k], m["interior"][..., k])
        res[key + "_grid_index"] = m["grid_index"][..., k]
        with np.errstate(over="ignore"):
            res[key + "_chi_out"] = m["value"][..., k] * np.broadcast_to(hyper0.sigma_w2_out, batch)
        V.finite_result(_RANGE_NAMES.replace("activation", "sigma_w2_out, activation"), res[key + "_chi_out"],
                        f"chi_out at {key}")
        res[key + "_interior"] = m["interior"][..., k]
        res[key + "_supremum_at"] = m["supremum_at"][..., k]
        res[key + "_bound"] = m["bound"][..., k]
        res[key + "_boundary"] = np.vectorize(boundary_text, otypes=[object])(m["supremum_at"][..., k],
                                                                               m["bound"][..., k])
    return RhoStarResult(**res)


def _rho_grid(grid) -> np.ndarray:
    grid = V.positive("grid", grid)
    if grid.ndim != 1 or grid.size < 2 or np.any(np.diff(grid) <= 0):
        raise V.ParameterError("grid", f"must be a strictly increasing 1-D array of at least 2 values of rho > 0, "
                                       f"got shape {grid.shape}")
    return grid


def _grid_argmax(vals: np.ndarray, which: str) -> np.ndarray:
    """Index of the grid maximum of chi_out; an error where chi_out is not representable near its maximum.

    Non-finite values (K^(l) or chi^(l) overflowing at large rho, e.g. ReLU at large depth) are skipped, but the
    maximum must not sit next to them: then the true maximiser may lie in the overflowing range.  A maximum of
    0 (or less) means chi_out underflowed on the whole grid (it then carries no information about rho*).
    """
    finite = np.isfinite(vals)
    idx = np.argmax(np.where(finite, vals, -np.inf), axis=-1)
    best = np.take_along_axis(vals, idx[..., None], axis=-1)[..., 0]
    lo = np.take_along_axis(finite, np.maximum(idx - 1, 0)[..., None], axis=-1)[..., 0]
    hi = np.take_along_axis(finite, np.minimum(idx + 1, vals.shape[-1] - 1)[..., None], axis=-1)[..., 0]
    label = {"diag": "chi_out", "off": "chi_out (off-diagonal)"}.get(which, which)
    if not (np.all(np.isfinite(best)) and np.all(lo) and np.all(hi)):
        raise V.ParameterError(_RANGE_NAMES, f"{label} overflows float64 on the rho grid next to its maximum, so "
                                             "rho* cannot be located; use smaller depth, sigma_w2 or input_kernel")
    if np.any(best <= 0):
        raise V.ParameterError(_RANGE_NAMES, f"{label} is not positive anywhere on the rho grid (it underflows, or "
                                             "the activation's response is negative), so rho* cannot be located")
    return idx


def rho_star_pairs(input_kernel, depth: int, sigma_w2, sigma_b2, sigma_w2_out=None, activation="erf", grid=None,
                   iters: int = 50, with_status: bool = False):
    """rho*_{ab} = argmax chi_out_{ab} for every element of a (P, P) input kernel (Fig. 6).

    Each element is its own 2x2 problem [[K_aa, K_ab], [K_ab, K_bb]] in the batch,
    so every element is refined at its own rho (see :func:`_maximise`).  Diagonal entries use the
    diagonal response, off-diagonal ones the off-diagonal response.  Returns the (P, P) matrix; an element
    whose chi_out has no interior maximum in [grid[0], grid[-1]] (default [0.001, 3]) is None there (the
    matrix is then an object array, float64 otherwise).  With
    ``with_status`` a :class:`RhoStarPairs`: ``rho_star`` (that matrix), ``interior`` (bool), ``supremum_at``
    ("interior",
    "lower", "upper") and ``chi_out`` (at rho*, or the supremum at the edge).  ``iters`` is accepted for
    compatibility.
    """
    K0 = V.kernel_matrix("input_kernel", input_kernel)
    if K0.ndim != 2:
        raise V.ParameterError("input_kernel", f"must be a single (P, P) matrix, got shape {K0.shape}")
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    V.integer("iters", iters, 0, 10_000)
    with_status = V.flag("with_status", with_status)
    P = K0.shape[0]
    ii, jj = np.triu_indices(P)  # including the diagonal
    kern = kernels(activation)
    h0 = Hyper.make(1.0, sigma_w2, sigma_b2, sigma_w2_out, None)
    grid = np.geomspace(1e-3, 3.0, 121) if grid is None else _rho_grid(grid)
    kd = np.stack([K0[ii, ii], K0[jj, jj]], axis=-1)
    ko = K0[ii, jj][:, None]
    is_diag = ii == jj
    pairs = (np.array([0]), np.array([1]))

    def f(r: np.ndarray) -> np.ndarray:  # r (M, n): each element at its own rho
        rt = np.ascontiguousarray(np.swapaxes(r, 0, 1))  # (n, M), the element axis last as propagate expects
        tr = propagate(kd, ko, pairs, np.array(L), Hyper(rt, h0.sigma_w2, h0.sigma_b2, h0.sigma_w2_out,
                                                           h0.sigma_b2_out), kern)
        return np.swapaxes(np.where(is_diag, tr.chi_out_diag[..., 0], tr.chi_out_off[..., 0]), 0, 1)

    m = _maximise(f, grid, (ii.size,), "chi_out")
    mats = {}
    for key, val, fill in (("rho_star", m["x"], np.nan), ("interior", m["interior"], False),
                           ("supremum_at", m["supremum_at"], ""), ("chi_out", m["value"], np.nan)):
        out = np.full((P, P), fill, dtype=np.asarray(val).dtype)
        out[ii, jj] = val
        out[jj, ii] = val
        mats[key] = out
    mats["rho_star"] = _none_at_edges(mats["rho_star"], mats["interior"])
    return RhoStarPairs(**mats) if with_status else mats["rho_star"]


def linearised_rho_star(depths, input_kernel, sigma_w2, sigma_b2, activation="erf", target_variance=0.5,
                        large_depth: bool = False) -> np.ndarray:
    """rho* of the linearised network (61) or its large-L form (62) for K^(L) = target_variance."""
    L = V.depths("depth", depths, MAX_DEPTH)
    k0 = V.positive("input_kernel", input_kernel)
    tv = V.positive("target_variance", target_variance)
    sw, sb = V.positive("sigma_w2", sigma_w2), V.nonnegative("sigma_b2", sigma_b2)
    if np.any(tv <= k0):
        raise V.ParameterError("target_variance", "must exceed input_kernel (the kernel only grows with depth)")
    f = gen.rho_star_large_depth if large_depth else gen.rho_star_linearised
    return f(L, sw, sb, kernels(activation).dphi0_sq, k0, tv)
