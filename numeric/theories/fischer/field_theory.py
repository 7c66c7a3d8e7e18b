"""Numeric driver of the generated field-theory kernels (Fischer, Dahmen & Helias 2025).

The one-step updates of `resprop.generated.fischer` (residual kernel B9, kernel update
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
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import resprop.generated.fischer as gen
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
_kernel_update = _u(gen.kernel_update)
_kernel_response = _u(gen.kernel_response)
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
    # Elements on the boundary |K_ab| = sqrt(K_aa K_bb) stay on it exactly when the inputs are identical, or
    # collinear (x, c x) through a positively homogeneous activation without bias; the kernels' sqrt(1 - c^2)
    # turns a last-ulp miss of the boundary into ~1e-8 errors, so such elements are pinned to it.
    on = np.abs(o) >= np.sqrt(d[..., i]) * np.sqrt(d[..., j]) * (1 - 1e-15)
    no_bias = np.broadcast_to(np.asarray(sb) == 0, o.shape)
    pinned = on & (((d[..., i] == d[..., j]) & (o > 0)) | (no_bias & (kern.name == "linear"))
                   | (no_bias & (kern.name == "relu") & (o > 0)))
    pin_sign = np.sign(o)
    pinned_any = bool(pinned.any())
    M = o.shape[-1]
    n_chunks = _workers() if M >= _PARALLEL_MIN else 1
    bounds = np.linspace(0, M, n_chunks + 1).astype(int)
    chunks = [(slice(lo, hi), i[lo:hi], j[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    with ThreadPoolExecutor(n_chunks) as pool:
        for layer in range(0, L_max + 1):
            if layer > 0:
                C_d = _residual_kernel(rho, sw, sb, kern.mean_phi_sq(d))
                eta_d = _residual_response(rho, sw, kern.price_diag(d), chi_d)
                d_new = _kernel_update(d, C_d)
                sqrt_d_new = np.sqrt(d_new)
                o_new, chi_o_new = np.empty_like(o), np.empty_like(chi_o)
                C_o, eta_o = (np.empty_like(o), np.empty_like(o)) if keep_layers else (None, None)

                def step(chunk, d=d, o=o, chi_o=chi_o, o_new=o_new, chi_o_new=chi_o_new, C_o=C_o, eta_o=eta_o,
                         sqrt_d_new=sqrt_d_new):
                    sl, ci, cj = chunk
                    a, b, oo = d[..., ci], d[..., cj], o[..., sl]
                    r = _elementwise(rho, sl)
                    w, bias = _elementwise(sw, sl), _elementwise(sb, sl)
                    C = _residual_kernel(r, w, bias, kern.mean_phi_phi(a, b, oo))
                    eta = _residual_response(r, w, kern.mean_dphi_dphi(a, b, oo), chi_o[..., sl])
                    # Round-off guard, not input clipping: |K_ab| <= sqrt(K_aa K_bb) holds exactly, but the
                    # correlation-one manifold is unstable (the off-diagonal slope exceeds the diagonal
                    # one), so last-ulp differences between K_ab and K_aa would otherwise grow with depth.
                    bound = sqrt_d_new[..., ci] * sqrt_d_new[..., cj]
                    o_new[..., sl] = np.clip(_kernel_update(oo, C), -bound, bound)
                    if pinned_any:
                        o_new[..., sl] = np.where(pinned[..., sl], pin_sign[..., sl] * bound, o_new[..., sl])
                    chi_o_new[..., sl] = _kernel_response(chi_o[..., sl], eta)
                    if C_o is not None:
                        C_o[..., sl], eta_o[..., sl] = C, eta

                if n_chunks == 1:
                    step(chunks[0])
                else:
                    list(pool.map(step, chunks))
                d, o, chi_o = d_new, o_new, chi_o_new
                chi_d = _kernel_response(chi_d, eta_d)
                if keep_layers:
                    assert C_o is not None and eta_o is not None  # allocated when keeping layers
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
        chi_out_diag=_output_response(swo, kern.price_diag(Kd), out["chi_d"]),
        chi_out_off=_output_response(swo, go, out["chi_o"]),
        K_out_diag=_readout_kernel(swo, sbo, kern.mean_phi_sq(Kd)),
        K_out_off=_readout_kernel(swo, sbo, mo),
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
        V.finite_result(_RANGE_NAMES, value, name)
    return NNGPResult(depth=L, **res)


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

    The same one-step updates as :func:`propagate` (B9-B10, 45, 47, 48) in the same order, specialised to two
    inputs of equal variance: every argument broadcasts to one batch shape, which is flattened, and each layer
    costs a fixed handful of NumPy calls whatever the batch size (rho grids, depths, targets ride along as one
    array axis).  Results are captured at layer ``stop`` of each element.  With ``keep_layers`` the per-layer
    arrays are preallocated (L+1, n) float64 blocks (O(depth) memory, 48 bytes per layer and element).
    Without ``offdiag`` the off-diagonal element is not propagated (its results are absent).
    """
    kern = _bare(kern)
    arrs = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (rho, sw, sb, swo, sbo, k0, k0o)),
                               np.asarray(stop))
    shape = arrs[0].shape
    rho, sw, sb, swo, sbo, d, o, stop = (a.reshape(-1) for a in arrs)
    stop = stop.astype(np.int64)
    # identical inputs (K_ab = K_aa) stay identical at every layer, exactly; computing K_ab separately would let
    # round-off grow like chi_ab (the correlation-one manifold is unstable) and make chi_out_ab noisy in rho
    same = o == d
    same_any = bool(same.any())
    n = rho.size
    L_max = int(stop.max())
    chi_d = np.full(n, float(eta0))
    chi_o = np.full(n, float(eta0))
    cap = {k: np.zeros(n) for k in ("K_d", "K_o", "chi_d", "chi_o")}
    stops = set(np.unique(stop).tolist())
    lay = {}
    kept = ("K_diag", "C_diag", "eta_diag") + (("K_off", "C_off", "eta_off") if offdiag else ())
    if keep_layers:
        lay = {k: np.empty((L_max + 1, n)) for k in kept}
        lay["K_diag"][0], lay["C_diag"][0], lay["eta_diag"][0] = d, d, chi_d
        if offdiag:
            lay["K_off"][0], lay["C_off"][0], lay["eta_off"][0] = o, o, chi_o
    mean_phi_sq, price_diag = kern.mean_phi_sq, kern.price_diag
    mean_phi_phi, mean_dphi_dphi = kern.mean_phi_phi, kern.mean_dphi_dphi
    tick = 4096
    with np.errstate(all="ignore"), _overflow_named(), _layer_bar(L_max, desc, progress) as bar:
        for layer in range(L_max + 1):
            if layer > 0:
                C_d = _residual_kernel(rho, sw, sb, mean_phi_sq(d))
                eta_d = _residual_response(rho, sw, price_diag(d), chi_d)
                if offdiag:
                    C_o = _residual_kernel(rho, sw, sb, mean_phi_phi(d, d, o))
                    eta_o = _residual_response(rho, sw, mean_dphi_dphi(d, d, o), chi_o)
                d = _kernel_update(d, C_d)
                chi_d = _kernel_response(chi_d, eta_d)
                if offdiag:
                    s = np.sqrt(d)
                    bound = s * s  # as propagate: |K_ab| <= sqrt(K_aa K_bb), a round-off guard (see there)
                    o = np.minimum(np.maximum(_kernel_update(o, C_o), -bound), bound)
                    if same_any:
                        o = np.where(same, d, o)
                    chi_o = _kernel_response(chi_o, eta_o)
                if keep_layers:
                    lay["K_diag"][layer], lay["C_diag"][layer], lay["eta_diag"][layer] = d, C_d, eta_d
                    if offdiag:
                        lay["K_off"][layer], lay["C_off"][layer], lay["eta_off"][layer] = o, C_o, eta_o
                if layer % tick == 0:
                    bar.update(tick)
            if layer in stops:
                hit = stop == layer
                for k, v in (("K_d", d), ("K_o", o), ("chi_d", chi_d), ("chi_o", chi_o)):
                    cap[k] = np.where(hit, v, cap[k])
        bar.update(L_max - bar.n)
        Kd, Ko = cap["K_d"], cap["K_o"]
        res = {"chi_out_diag": _output_response(swo, price_diag(Kd), cap["chi_d"]),
               "K_out_diag": _readout_kernel(swo, sbo, mean_phi_sq(Kd)), "K_diag": Kd, "chi_diag": cap["chi_d"]}
        if offdiag:
            res.update(chi_out_off=_output_response(swo, mean_dphi_dphi(Kd, Kd, Ko), cap["chi_o"]),
                       K_out_off=_readout_kernel(swo, sbo, mean_phi_phi(Kd, Kd, Ko)), K_off=Ko, chi_off=cap["chi_o"])
    out = {k: v.reshape(shape) for k, v in res.items()}
    out["layers"] = lay
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
