"""Numeric driver of the generated field-theory kernels (Fischer, Dahmen & Helias 2025).

The one-step updates of `generated.fischer` (residual kernel B9, kernel update
B10, response 45/C15, kernel response 47, output response 48) are iterated over
depth for whole arrays of kernel elements at once: P x P input kernels (upper
triangle only, the kernel is symmetric), batches of rho, depths and variances.

Normalisation of the response: eta^(0) = 1 is the linear-response convention
(eq. 51, eta = dC/dK^(0)); the field-theory propagator gives eta^(0) = N/d_in
(C15).  Pass ``eta0=width/d_in`` for the latter; rho* does not depend on it.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

import generated.fischer as gen

from . import validation as V
from .expectations import ActivationKernels, kernels

_PARALLEL_MIN = 20_000  # elements below which threading does not pay
MAX_DEPTH = 10**6  # the largest depth accepted (as V.depths)
#: the inputs that decide whether K^(l) and chi^(l) stay in float64 range (named when they do not)
_RANGE_NAMES = "rho, sigma_w2, sigma_b2, k0, depth, activation"


def _workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _parallel(fn, *args: np.ndarray) -> np.ndarray:
    """Evaluate an elementwise kernel in chunks on a thread pool (NumPy releases the GIL)."""
    args = np.broadcast_arrays(*args)
    n = args[0].shape[-1] if args[0].ndim else 0
    w = _workers()
    if n < _PARALLEL_MIN or w == 1:
        return fn(*args)
    bounds = np.linspace(0, n, w + 1).astype(int)
    with ThreadPoolExecutor(w) as pool:
        parts = list(pool.map(lambda s: fn(*(a[..., s[0]:s[1]] for a in args)), zip(bounds[:-1], bounds[1:])))
    return np.concatenate(parts, axis=-1)


def _elementwise(value: np.ndarray, sl: slice) -> np.ndarray:
    """Slice the element axis of a hyperparameter when it has one (size > 1), else keep it for broadcasting."""
    return value[..., sl] if value.shape[-1] > 1 else value


@dataclass
class Hyper:
    """Residual-branch and readout hyperparameters; each broadcasts against the batch shape."""

    rho: np.ndarray
    sigma_w2: np.ndarray
    sigma_b2: np.ndarray
    sigma_w2_out: np.ndarray
    sigma_b2_out: np.ndarray

    @classmethod
    def make(cls, rho, sigma_w2, sigma_b2, sigma_w2_out=None, sigma_b2_out=None) -> "Hyper":
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

    d0 (..., P): diagonal of K^(0); o0 (..., M): off-diagonal elements K^(0)_{ij}
    for (i, j) = pairs; stop (...): the depth L of each batch element (results
    are captured at layer stop, so one pass serves many depths).
    """
    eta0 = V.scalar("eta0", eta0, V.positive)
    with np.errstate(all="ignore"):  # overflow (geometric growth, huge inputs) is reported by the callers
        return _propagate(d0, o0, pairs, stop, hyper, kern, eta0, keep_layers)


def _propagate(d0, o0, pairs, stop, hyper, kern, eta0, keep_layers) -> Trajectory:
    i, j = pairs
    stop = np.asarray(stop)
    L_max = int(stop.max())
    h = hyper
    expand = lambda a: np.asarray(a)[..., None]  # noqa: E731  batch -> element axis
    rho, sw, sb, swo, sbo = map(expand, (h.rho, h.sigma_w2, h.sigma_b2, h.sigma_w2_out, h.sigma_b2_out))
    batch = np.broadcast_shapes(d0.shape[:-1], o0.shape[:-1], stop.shape,
                                *(np.shape(getattr(h, n)) for n in ("rho", "sigma_w2", "sigma_b2")))
    d = np.broadcast_to(d0, batch + d0.shape[-1:]).astype(float)
    o = np.broadcast_to(o0, batch + o0.shape[-1:]).astype(float)
    chi_d = np.full(d.shape, float(eta0))
    chi_o = np.full(o.shape, float(eta0))
    out = {k: np.zeros(a.shape) for k, a in (("K_d", d), ("K_o", o), ("chi_d", d), ("chi_o", o))}
    layers: dict[str, list[np.ndarray]] = {}
    if keep_layers:
        layers = {"K_diag": [d.copy()], "K_off": [o.copy()], "C_diag": [d.copy()], "C_off": [o.copy()],
                  "eta_diag": [chi_d.copy()], "eta_off": [chi_o.copy()]}
    M = o.shape[-1]
    n_chunks = _workers() if M >= _PARALLEL_MIN else 1
    bounds = np.linspace(0, M, n_chunks + 1).astype(int)
    chunks = [(slice(lo, hi), i[lo:hi], j[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    with ThreadPoolExecutor(n_chunks) as pool:
        for layer in range(0, L_max + 1):
            if layer > 0:
                C_d = gen.residual_kernel(rho, sw, sb, kern.mean_phi_sq(d))
                eta_d = gen.residual_response(rho, sw, kern.price_diag(d), chi_d)
                d_new = gen.kernel_update(d, C_d)
                sqrt_d_new = np.sqrt(d_new)
                o_new, chi_o_new = np.empty_like(o), np.empty_like(chi_o)
                C_o, eta_o = (np.empty_like(o), np.empty_like(o)) if keep_layers else (None, None)

                def step(chunk, d=d, o=o, chi_o=chi_o, o_new=o_new, chi_o_new=chi_o_new, C_o=C_o, eta_o=eta_o,
                         sqrt_d_new=sqrt_d_new):
                    sl, ci, cj = chunk
                    a, b, oo = d[..., ci], d[..., cj], o[..., sl]
                    r = _elementwise(rho, sl)
                    w, bias = _elementwise(sw, sl), _elementwise(sb, sl)
                    C = gen.residual_kernel(r, w, bias, kern.mean_phi_phi(a, b, oo))
                    eta = gen.residual_response(r, w, kern.mean_dphi_dphi(a, b, oo), chi_o[..., sl])
                    # Round-off guard, not input clipping: |K_ab| <= sqrt(K_aa K_bb) holds exactly, but the
                    # correlation-one manifold is unstable (the off-diagonal slope exceeds the diagonal
                    # one), so last-ulp differences between K_ab and K_aa would otherwise grow with depth.
                    bound = sqrt_d_new[..., ci] * sqrt_d_new[..., cj]
                    o_new[..., sl] = np.clip(gen.kernel_update(oo, C), -bound, bound)
                    chi_o_new[..., sl] = gen.kernel_response(chi_o[..., sl], eta)
                    if C_o is not None:
                        C_o[..., sl], eta_o[..., sl] = C, eta

                if n_chunks == 1:
                    step(chunks[0])
                else:
                    list(pool.map(step, chunks))
                d, o, chi_o = d_new, o_new, chi_o_new
                chi_d = gen.kernel_response(chi_d, eta_d)
                if keep_layers:
                    for k, v in (("K_diag", d), ("K_off", o), ("C_diag", C_d), ("C_off", C_o),
                                 ("eta_diag", eta_d), ("eta_off", eta_o)):
                        layers[k].append(v)
            hit = (stop == layer)[..., None]
            if hit.any():
                for k, v in (("K_d", d), ("K_o", o), ("chi_d", chi_d), ("chi_o", chi_o)):
                    out[k] = v if hit.all() else np.where(hit, v, out[k])
    Kd, Ko = out["K_d"], out["K_o"]
    mo = _parallel(kern.mean_phi_phi, Kd[..., i], Kd[..., j], Ko)
    go = _parallel(kern.mean_dphi_dphi, Kd[..., i], Kd[..., j], Ko)
    return Trajectory(
        K_diag=Kd, K_off=Ko, chi_diag=out["chi_d"], chi_off=out["chi_o"],
        chi_out_diag=gen.output_response(swo, kern.price_diag(Kd), out["chi_d"]),
        chi_out_off=gen.output_response(swo, go, out["chi_o"]),
        K_out_diag=gen.readout_kernel(swo, sbo, kern.mean_phi_sq(Kd)),
        K_out_off=gen.readout_kernel(swo, sbo, mo),
        layers=layers)


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


def input_kernel(X, sigma_w2_in=1.0, sigma_b2_in=0.0) -> np.ndarray:
    """K^(0) = sigma_w,in^2/d_in X X^T + sigma_b,in^2 (B10) for inputs X of shape (P, d_in)."""
    X = V.real("X", X)
    if X.ndim != 2:
        raise V.ParameterError("X", f"must have shape (P, d_in), got {X.shape}")
    sw = V.positive("sigma_w2_in", sigma_w2_in)
    sb = V.nonnegative("sigma_b2_in", sigma_b2_in)
    return gen.input_kernel(sw, sb, X.shape[1], X @ X.T)


def nngp(K0, depth: int, rho, sigma_w2, sigma_b2, sigma_w2_out=None, sigma_b2_out=None,
         activation="erf", eta0: float = 1.0, keep_layers: bool = False) -> dict[str, np.ndarray]:
    """NNGP kernels and response functions for P inputs (B9-B10, C15-C17).

    K0: (P, P) input kernel.  Returns K (P, P) = K^(L), K_out = K^(L+1), chi =
    chi^(L) and chi_out, each (P, P): diagonal entries use the diagonal
    response (<phi'^2 + phi phi''>), off-diagonal ones the off-diagonal
    response (<phi'_a phi'_b>).  With keep_layers, also K_layers, C_layers,
    eta_layers of shape (L+1, P, P).
    """
    K0 = V.kernel_matrix("K0", K0)
    if K0.ndim != 2:
        raise V.ParameterError("K0", f"must be a single (P, P) matrix, got shape {K0.shape}")
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    hyper = Hyper.make(rho, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    _scalars(hyper, "use rho_star/chi_out_curves for batches")
    P = K0.shape[0]
    i, j = _triangle(P)
    tr = propagate(np.diagonal(K0).copy(), K0[i, j], (i, j), np.array(L), hyper, kernels(activation), eta0,
                   keep_layers)
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
        V.finite_result(_RANGE_NAMES.replace("k0", "K0"), value, name)
    return res


# --------------------------------------------------------------------------- two-input element
def _pair(k0, k0_offdiag):
    k0 = V.positive("k0", k0)
    if k0_offdiag is None:
        return k0, np.zeros_like(k0)
    k0o = V.real("k0_offdiag", k0_offdiag)
    V.covariance_pair("k0_offdiag", *np.broadcast_arrays(k0, k0o))
    return k0, k0o


def response(k0, depth: int, rho, sigma_w2, sigma_b2, k0_offdiag=None, sigma_w2_out=None, sigma_b2_out=None,
             activation="erf", eta0: float = 1.0) -> dict[str, np.ndarray]:
    """eta^(l), chi^(l), C^(l), K^(l) for l = 0..L and chi_out (45-48) for the diagonal element K^(0) = k0,
    and for the off-diagonal element of [[k0, k0_offdiag], [k0_offdiag, k0]] when k0_offdiag is given."""
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    k0, k0o = _pair(k0, k0_offdiag)
    if k0.ndim or k0o.ndim:
        raise V.ParameterError("k0" if k0.ndim else "k0_offdiag", "must be a scalar here")
    hyper = Hyper.make(rho, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    _scalars(hyper, "use chi_out_curves for batches")
    tr = propagate(np.array([k0, k0], dtype=float), np.array([k0o], dtype=float), (np.array([0]), np.array([1])),
                   np.array(L), hyper, kernels(activation), eta0, keep_layers=True)
    lay = {k: np.array(v) for k, v in tr.layers.items()}
    res = {"eta": lay["eta_diag"][:, 0], "chi": np.cumsum(lay["eta_diag"][:, 0]), "C": lay["C_diag"][:, 0],
           "K": lay["K_diag"][:, 0], "chi_out": float(tr.chi_out_diag[0]), "K_out": float(tr.K_out_diag[0])}
    if k0_offdiag is not None:
        res.update({"eta_offdiag": lay["eta_off"][:, 0], "chi_offdiag": np.cumsum(lay["eta_off"][:, 0]),
                    "C_offdiag": lay["C_off"][:, 0], "K_offdiag": lay["K_off"][:, 0],
                    "chi_out_offdiag": float(tr.chi_out_off[0]), "K_out_offdiag": float(tr.K_out_off[0])})
    for name, value in res.items():
        V.finite_result(_RANGE_NAMES, value, name)
    return res


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


def chi_out_curves(rho, depths, k0, sigma_w2, sigma_b2, k0_offdiag=None, sigma_w2_out=None, sigma_b2_out=None,
                   activation="erf", eta0: float = 1.0) -> dict[str, np.ndarray]:
    """chi_out(rho) for every depth in one vectorised pass: arrays of shape (len(depths), len(rho))."""
    rho = np.atleast_1d(V.nonnegative("rho", rho))
    L = np.atleast_1d(V.depths("depth", depths))
    if rho.ndim != 1 or L.ndim != 1:
        raise V.ParameterError("rho" if rho.ndim != 1 else "depth", "must be a scalar or a 1-D array")
    k0, k0o = _pair(k0, k0_offdiag)
    hyper = Hyper.make(rho[None, :], sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    _batch_shape("sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, k0, k0_offdiag", (L.size, rho.size),
                 *(np.shape(getattr(hyper, n)) for n in ("sigma_w2", "sigma_b2", "sigma_w2_out", "sigma_b2_out")),
                 np.shape(k0), np.shape(k0o))
    stop = np.broadcast_to(L[:, None], (L.size, rho.size))
    tr = propagate(np.array([k0, k0], dtype=float), np.array([k0o], dtype=float), (np.array([0]), np.array([1])),
                   stop, hyper, kernels(activation), eta0)
    res = {"rho": rho, "depth": L, "chi_out": tr.chi_out_diag[..., 0]}
    if k0_offdiag is not None:
        res["chi_out_offdiag"] = tr.chi_out_off[..., 0]
    for name in ("chi_out", "chi_out_offdiag"):
        if name in res:
            V.finite_result(_RANGE_NAMES, res[name], name)
    return res


def _golden_max(f, lo: np.ndarray, hi: np.ndarray, iters: int = 80) -> np.ndarray:
    """Vectorised golden-section search for the maximiser of f on [lo, hi] (elementwise brackets)."""
    g = (np.sqrt(5) - 1) / 2
    a, b = lo.copy(), hi.copy()
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        left = fc > fd
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        c_new = b - g * (b - a)
        d_new = a + g * (b - a)
        c, d = np.where(left, c_new, d), np.where(left, c, d_new)
        fnew = f(np.where(left, c, d))
        fc, fd = np.where(left, fnew, fd), np.where(left, fc, fnew)
    return (a + b) / 2


def _refine_stationary(f, x: np.ndarray, rel_step: float = 1e-5, iters: int = 4) -> np.ndarray:
    """Secant steps on the central-difference slope of f: the root of f' is well conditioned where the
    maximum of f itself is flat (golden section alone stops at ~sqrt(eps) relative)."""
    def slope(r):
        h = rel_step * r
        return (f(r + h) - f(r - h)) / (2 * h)

    x0, x1 = x * (1 - 1e-4), x.copy()
    s0, s1 = slope(x0), slope(x1)
    for _ in range(iters):
        denom = s1 - s0
        step = np.where(denom != 0, s1 * (x1 - x0) / np.where(denom != 0, denom, 1), 0.0)
        x0, s0 = x1, s1
        x1 = x1 - step
        s1 = slope(x1)
    return x1


def rho_star(depths, k0, sigma_w2, sigma_b2, k0_offdiag=None, sigma_w2_out=None, sigma_b2_out=None,
             activation="erf", grid=None, iters: int = 25) -> dict[str, np.ndarray]:
    """rho* = argmax_rho chi_out (Figs. 4-5) for a batch of depths and broadcastable hyperparameters.

    A log grid brackets the maximum, golden-section search narrows it, and secant
    steps on the slope locate the stationary point to ~1e-10 relative (the maximum
    is flat, so the value alone fixes it only to ~sqrt(eps)).  sigma_w2, sigma_b2 and k0 may be arrays broadcasting against the
    depth axis (shape (len(depths), ...)).  Returns arrays rho_star (and
    rho_star_offdiag) with that broadcast shape, plus the grid maximum's index
    so callers can check the maximum is interior.
    """
    L = np.atleast_1d(V.depths("depth", depths))
    k0, k0o = _pair(k0, k0_offdiag)
    kern = kernels(activation)
    grid = np.geomspace(1e-3, 3.0, 241) if grid is None else _rho_grid(grid)
    iters = V.integer("iters", iters, 0, 10_000)
    hyper0 = Hyper.make(1.0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    batch = _batch_shape("depth, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, k0, k0_offdiag", L.shape,
                         *(np.shape(getattr(hyper0, n)) for n in ("sigma_w2", "sigma_b2", "sigma_w2_out",
                                                                  "sigma_b2_out")),
                         np.shape(k0), np.shape(k0o))
    try:  # the depth axis leads: hyperparameter arrays broadcast against (len(depths), ...)
        stop = np.broadcast_to(L.reshape(L.shape + (1,) * (len(batch) - L.ndim)), batch)
    except ValueError:
        raise V.ParameterError("depth, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, k0, k0_offdiag",
                               f"array hyperparameters must broadcast against shape (len(depths), ...) = "
                               f"{L.shape + (1,) * (len(batch) - L.ndim)} with depth on the first axis") from None
    kd = np.broadcast_to(k0, batch)[..., None] * np.ones(2)
    ko = np.broadcast_to(k0o, batch)[..., None]
    pairs = (np.array([0]), np.array([1]))

    def chi(rho_arr: np.ndarray, which: str) -> np.ndarray:
        shape = rho_arr.shape
        ext = lambda a: np.broadcast_to(np.asarray(a).reshape(np.shape(a) + (1,) * (len(shape) - len(batch))), shape) \
            if np.ndim(a) else a  # noqa: E731
        hy = Hyper(rho_arr, ext(hyper0.sigma_w2), ext(hyper0.sigma_b2), ext(hyper0.sigma_w2_out),
                   ext(hyper0.sigma_b2_out))
        st = np.broadcast_to(stop.reshape(stop.shape + (1,) * (len(shape) - len(batch))), shape)
        kdx = np.broadcast_to(kd.reshape(batch + (1,) * (len(shape) - len(batch)) + (2,)), shape + (2,))
        kox = np.broadcast_to(ko.reshape(batch + (1,) * (len(shape) - len(batch)) + (1,)), shape + (1,))
        tr = propagate(kdx, kox, pairs, st, hy, kern)
        return (tr.chi_out_diag if which == "diag" else tr.chi_out_off)[..., 0]

    res: dict[str, np.ndarray] = {"depth": L}
    for which in ("diag",) + (("off",) if k0_offdiag is not None else ()):
        vals = chi(np.broadcast_to(grid, batch + grid.shape), which)
        idx = _grid_argmax(vals, which)
        lo = grid[np.maximum(idx - 1, 0)]
        hi = grid[np.minimum(idx + 1, grid.size - 1)]
        best = _golden_max(lambda r: chi(r, which), lo, hi, iters)
        refined = _refine_stationary(lambda r: chi(r, which), best)
        # keep the refinement only where it stayed inside the bracket (always, for an interior maximum)
        best = np.where((refined > lo) & (refined < hi), refined, best)
        key = "rho_star" if which == "diag" else "rho_star_offdiag"
        res[key] = best
        res[key + "_grid_index"] = idx
        res[key + "_chi_out"] = chi(best, which)
        V.finite_result(_RANGE_NAMES, res[key + "_chi_out"], f"chi_out at {key}")
    return res


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
    label = "chi_out" if which == "diag" else "chi_out (off-diagonal)"
    if not (np.all(np.isfinite(best)) and np.all(lo) and np.all(hi)):
        raise V.ParameterError(_RANGE_NAMES, f"{label} overflows float64 on the rho grid next to its maximum, so "
                                             "rho* cannot be located; use smaller depth, sigma_w2 or k0")
    if np.any(best <= 0):
        raise V.ParameterError(_RANGE_NAMES, f"{label} is not positive anywhere on the rho grid (it underflows, or "
                                             "the activation's response is negative), so rho* cannot be located")
    return idx


def rho_star_pairs(K0, depth: int, sigma_w2, sigma_b2, sigma_w2_out=None, activation="erf", grid=None,
                   iters: int = 50) -> np.ndarray:
    """rho*_{ab} = argmax chi_out_{ab} for every element of a (P, P) input kernel (Fig. 6).

    Each element is its own 2x2 problem [[K_aa, K_ab], [K_ab, K_bb]] in the batch,
    so every element is refined at its own rho.  Diagonal entries use the
    diagonal response, off-diagonal ones the off-diagonal response.
    """
    K0 = V.kernel_matrix("K0", K0)
    if K0.ndim != 2:
        raise V.ParameterError("K0", f"must be a single (P, P) matrix, got shape {K0.shape}")
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    iters = V.integer("iters", iters, 0, 10_000)
    P = K0.shape[0]
    ii, jj = np.triu_indices(P)  # including the diagonal
    kern = kernels(activation)
    h0 = Hyper.make(1.0, sigma_w2, sigma_b2, sigma_w2_out, None)
    grid = np.geomspace(1e-3, 3.0, 121) if grid is None else _rho_grid(grid)
    kd = np.stack([K0[ii, ii], K0[jj, jj]], axis=-1)
    ko = K0[ii, jj][:, None]
    is_diag = ii == jj
    pairs = (np.array([0]), np.array([1]))

    def f(r: np.ndarray) -> np.ndarray:  # r (..., M): each element at its own rho
        tr = propagate(kd, ko, pairs, np.array(L), Hyper(r, h0.sigma_w2, h0.sigma_b2, h0.sigma_w2_out,
                                                          h0.sigma_b2_out), kern)
        return np.where(is_diag, tr.chi_out_diag[..., 0], tr.chi_out_off[..., 0])

    vals = f(np.broadcast_to(grid[:, None], (grid.size, ii.size)))
    idx = _grid_argmax(vals.T, "diag")
    best = _golden_max(f, grid[np.maximum(idx - 1, 0)], grid[np.minimum(idx + 1, grid.size - 1)], iters)
    out = np.zeros((P, P))
    out[ii, jj] = best
    out[jj, ii] = best
    return out


def linearised_rho_star(depths, k0, sigma_w2, sigma_b2, activation="erf", target_variance=0.5,
                        large_depth: bool = False) -> np.ndarray:
    """rho* of the linearised network (61) or its large-L form (62) for K^(L) = target_variance."""
    L = V.depths("depth", depths)
    k0 = V.positive("k0", k0)
    tv = V.positive("target_variance", target_variance)
    sw, sb = V.positive("sigma_w2", sigma_w2), V.nonnegative("sigma_b2", sigma_b2)
    if np.any(tv <= k0):
        raise V.ParameterError("target_variance", "must exceed k0 (the kernel only grows with depth)")
    f = gen.rho_star_large_depth if large_depth else gen.rho_star_linearised
    return f(L, sw, sb, kernels(activation).dphi0_sq, k0, tv)
