"""NNGP and NTK of the residual erf / ReLU network (Fischer et al. 2025 B9-B10 with Hayou et al. 2021 eq. 9).

Network (NTK parameterisation): a read-in with K^(0) = Theta^(0) (the input kernel), then L blocks

    h^(l) = h^(l-1) + rho (sqrt(sigma_w2 / N) W^(l) phi(h^(l-1)) + sqrt(sigma_b2) b^(l)),

whose infinite-width kernels obey, elementwise over pairs of inputs (a, b),

    C^(l)     = rho^2 (sigma_w2 <phi_a phi_b>_{K^(l-1)} + sigma_b2)                       (B9)
    K^(l)     = K^(l-1) + C^(l)                                                            (B10)
    Theta^(l) = Theta^(l-1) + C^(l) + rho^2 sigma_w2 <phi'_a phi'_b>_{K^(l-1)} Theta^(l-1)  (Hayou eq. 9, lambda = rho)

This is the kernel neural-tangents computes for ``serial(FanOut(2), parallel(serial(phi, Dense(W_std =
rho sqrt(sigma_w2), b_std = rho sqrt(sigma_b2))), Identity()), FanInSum())`` repeated L times.  The
expectations are the generated closed forms: erf from `resprop.generated.gaussian` (erf_mean_phi_phi,
erf_mean_dphi_dphi), ReLU from `resprop.generated.stable` (psi_relu, mean_dphi_dphi, nngp_update,
ntk_update with lam2 = rho^2).

Two evaluation paths give the same numbers (to round-off, checked in tests/test_residual_ntk.py):

* ``method="generated"``: the generated kernels themselves on the flattened upper triangle, threaded by
  `resprop.numeric.theories.fischer.field_theory._parallel`;
* ``method="fused"`` (default): the same formulas written out once, per layer, with the common factors
  hoisted (1/sqrt(1 + 2 K_aa) for erf, sqrt(K_aa) for ReLU, evaluated on the diagonal only) and applied
  by broadcasting to row strips of the upper triangle of about ``_STRIP`` elements, so that every
  intermediate stays in cache and no index gather is needed.  Since element (a, b) of layer l needs only
  its own K_ab, Theta_ab and the diagonal K_aa, K_bb of layer l - 1, the diagonal is iterated first for all
  layers, and each strip is then taken through all L layers on its own, in place, with preallocated
  float64 buffers (12 array passes per layer for erf NNGP + NTK: the erf strips hold K/kappa and
  Theta/kappa, kappa = rho^2 sigma_w2 2/pi, which absorbs two scalings).  The strips are handed out to a
  thread pool (NumPy releases the GIL) with no synchronisation between layers; each writes its part of
  the symmetric output.  The symmetry and PSD test of K0 runs on the same pool (a one-thread Cholesky
  factorisation with the eigvalsh tolerance of `resprop.numeric.engine.validation.kernel_matrix`, whose error is raised
  when it fails).  The diagonal is always evaluated with the diagonal forms (erf_mean_phi_sq and
  erf_mean_dphi_dphi(K, K, K); psi_relu at C = 1 and E[phi'^2] = 1/2).

At P = 1000, L = 200 on two cores the fused path takes about 0.13 s (erf NNGP) and 0.27 s (erf NNGP +
NTK), about 4 ns per upper-triangle element and layer and core for the latter; see
benchmarks/bench_peers_nt.py for the comparison with neural-tangents.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

import resprop.generated.gaussian as gg
import resprop.generated.stable as gs
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.theories.fischer.field_theory import _parallel, _workers

__all__ = ["nngp_ntk", "ACTIVATIONS", "METHODS"]

ACTIVATIONS = ("erf", "relu")
METHODS = ("fused", "generated")
MAX_DEPTH = 10**6  # as field_theory.MAX_DEPTH; one layer costs ~10-50 us at small P
_STRIP = 32768  # target elements per strip: ~256 KiB per float64 buffer
_THREAD_MIN = 20_000  # upper-triangle elements below which one thread is used


# --------------------------------------------------------------------------- diagonal (exact forms)
def _diag_step(act: str, d: np.ndarray, td: np.ndarray | None, r2: float, sw: float, sb: float):
    """One layer for the diagonal K_aa (and Theta_aa): returns (d_new, td_new)."""
    if act == "erf":
        C = r2 * (sw * gg.erf_mean_phi_sq(d) + sb)
        g = gg.erf_mean_dphi_dphi(d, d, d) if td is not None else None
    else:
        psi = gs.psi_relu(1.0, d, sb, sw)  # C = 1: f(1) = 0
        C = gs.nngp_update(0.0, r2, psi)
        g = 0.5 if td is not None else None  # E[phi'^2] = (pi - arccos 1)/(2 pi)
    if td is None:
        return d + C, None
    assert g is not None  # computed whenever td is given
    return d + C, td + C + r2 * sw * g * td


# --------------------------------------------------------------------------- generated path
def _gen_erf(k, t, da, db, r2, sw, sb):
    C = r2 * (sw * gg.erf_mean_phi_phi(da, db, k) + sb)
    if t is None:
        return (k + C)[None]
    return np.stack([k + C, t + C + r2 * sw * gg.erf_mean_dphi_dphi(da, db, k) * t])


def _gen_relu(k, t, da, db, r2, sw, sb):
    root = np.sqrt(da * db)
    c = np.clip(k / root, -1.0, 1.0)
    psi = gs.psi_relu(c, root, sb, sw)
    if t is None:
        return gs.nngp_update(k, r2, psi)[None]
    return np.stack([gs.nngp_update(k, r2, psi), gs.ntk_update(t, r2, psi, sw * gs.mean_dphi_dphi(c))])


def _run_generated(act, K0, T0, L, r2, sw, sb):
    P = K0.shape[0]
    i, j = np.triu_indices(P, 1)
    d, o = np.diagonal(K0).copy(), K0[i, j]
    td, to = (None, None) if T0 is None else (np.diagonal(T0).copy(), T0[i, j])
    fn = _gen_erf if act == "erf" else _gen_relu
    for _ in range(L):
        if o.size:
            if to is None:
                o = _parallel(lambda k, a, b: fn(k, None, a, b, r2, sw, sb), o, d[i], d[j])[0]
            else:
                o, to = _parallel(lambda k, t, a, b: fn(k, t, a, b, r2, sw, sb), o, to, d[i], d[j])
        d, td = _diag_step(act, d, td, r2, sw, sb)
    out = {"K": _full(d, o, i, j)}
    if td is not None:
        out["Theta"] = _full(td, to, i, j)
    return out


def _full(diag, off, i, j):
    P = diag.size
    M = np.empty((P, P))
    M[i, j] = off
    M[j, i] = off
    M[np.arange(P), np.arange(P)] = diag
    return M


# --------------------------------------------------------------------------- fused path
def _strips(P: int, target: int = _STRIP) -> list[tuple[int, int]]:
    """Row bands [lo, hi) covering the upper triangle; band k holds the block rows lo:hi, columns lo:P."""
    out, lo, tail = [], 0, max(8, int(math.sqrt(target)) // 2)
    while lo < P:
        n = P - lo
        h = max(1, min(n, target // n))
        if n - h < tail:
            h = n
        out.append((lo, lo + h))
        lo += h
    return out


def _erf_strip(K, T, bufs, A_r, A_c, beta, kappa):
    """erf: all layers, in place, on one strip of the scaled state K/kappa, Theta/kappa, kappa = rho^2 sw (2/pi).

    With w = 1/sqrt(1 + 2 K_aa) and t = 2 K_ab w_a w_b: erf_mean_phi_phi = (2/pi) arcsin t and, as
    (1 + 2K_aa)(1 + 2K_bb) - 4 K_ab^2 = (1 - t^2)/(w_a w_b)^2, erf_mean_dphi_dphi = (2/pi) 2 w_a w_b / sqrt(1 - t^2).
    So with R = kappa 2 w_a w_b:  t = (K/kappa) R,  C/kappa = arcsin t + beta (beta = pi sb/(2 sw)),
    rho^2 sw <phi' phi'> = R / sqrt(1 - t^2);  K/kappa += C/kappa, Theta/kappa = Theta/kappa (1 + R/sqrt(1 - t^2))
    + C/kappa.  A_r (L, h, 1), A_c (L, 1, n): the row and column factors kappa 2 w and w of each layer."""
    R, t, q = bufs[:3]
    mul, sub, div, sqrt, arcsin = np.multiply, np.subtract, np.divide, np.sqrt, np.arcsin
    for a_r, a_c in zip(A_r, A_c):
        mul(a_r, a_c, out=R)
        mul(K, R, out=t)
        if T is not None:
            mul(t, t, out=q)
            sub(1.0, q, out=q)
            sqrt(q, out=q)
            div(R, q, out=q)
            q += 1.0
        arcsin(t, out=t)
        t += beta
        K += t
        if T is not None:
            T *= q
            T += t


def _relu_strip(K, T, bufs, A_r, A_c, beta, kappa):
    """ReLU: all layers, in place, on one strip (psi_relu, mean_dphi_dphi, nngp_update, ntk_update with
    lam2 = rho^2), state unscaled.  With root = sqrt(K_aa K_bb) = R, c = clip(K_ab/root, -1, 1) and
    Y = pi - arccos c: rho^2 psi = beta + kappa root (c Y + sqrt(1 - c^2)) with kappa = rho^2 sw/(2 pi),
    beta = rho^2 sb (that is rho^2 (sb + sw root (pi c + sqrt(1 - c^2) - c arccos c)/(2 pi))), and
    rho^2 sw mean_dphi_dphi = kappa Y.  A_r (L, h, 1), A_c (L, 1, n): sqrt(K_aa) of each layer."""
    R, c, q, A = bufs
    mul, sub, div, sqrt, arccos, clip = np.multiply, np.subtract, np.divide, np.sqrt, np.arccos, np.clip
    for a_r, a_c in zip(A_r, A_c):
        mul(a_r, a_c, out=R)
        div(K, R, out=c)
        clip(c, -1.0, 1.0, out=c)
        arccos(c, out=A)
        sub(np.pi, A, out=A)  # Y
        mul(c, c, out=q)
        sub(1.0, q, out=q)
        sqrt(q, out=q)
        c *= A
        q += c
        q *= R
        q *= kappa
        q += beta  # rho^2 psi
        K += q
        if T is not None:
            A *= kappa
            A += 1.0
            T *= A
            T += q


def _fused_setup(act: str, r2: float, sw: float, sb: float):
    """(strip update, buffers, state scale, kappa, beta, vectors(d) -> (row factors, column factors)).

    The strips hold K / scale and Theta / scale (erf: scale = kappa, which removes two multiplications)."""
    if act == "erf":
        kappa = r2 * sw * (2.0 / np.pi)

        def vectors(d):
            w = 1.0 / np.sqrt(1.0 + 2.0 * d)
            return (2.0 * kappa) * w, w

        return _erf_strip, 3, kappa, kappa, np.pi * sb / (2.0 * sw), vectors

    def relu_vectors(d):
        s = np.sqrt(d)
        return s, s

    return _relu_strip, 4, 1.0, r2 * sw / (2.0 * np.pi), r2 * sb, relu_vectors


def _run_fused(act, K0, T0, L, r2, sw, sb, strip: int | None = None, check: Callable[[], bool] | None = None):
    """Returns ({"K": ..., "Theta": ...}, check()) with check (the deferred input test) run on the pool."""
    if r2 == 0.0:  # rho = 0: every block is the identity
        out = {"K": K0.copy()} | ({} if T0 is None else {"Theta": np.array(T0, dtype=float)})
        return out, True if check is None else check()
    step, nbuf, scale, kappa, beta, vectors = _fused_setup(act, r2, sw, sb)
    P = K0.shape[0]
    # The diagonal obeys its own recursion, and element (a, b) needs only K_ab, Theta_ab and K_aa, K_bb of
    # the previous layer: so the diagonal is run first for all layers, and then every strip is taken
    # through all L layers on its own (no synchronisation between layers; the strip stays in cache) and
    # written, with its mirror image, into the output.
    d = np.diagonal(K0).copy()
    td = None if T0 is None else np.diagonal(T0).copy()
    a_r, a_c = np.empty((L, P)), np.empty((L, P))
    for layer in range(L):
        a_r[layer], a_c[layer] = vectors(d)
        d, td = _diag_step(act, d, td, r2, sw, sb)
    bands = _strips(P, _STRIP if strip is None else strip)
    outK = np.empty((P, P))
    outT = None if T0 is None else np.empty((P, P))

    def work(k):
        lo, hi = bands[k]
        K = K0[lo:hi, lo:] / scale
        T = None if T0 is None else T0[lo:hi, lo:] / scale
        bufs = [np.empty(K.shape) for _ in range(nbuf)]
        # all L layers; the strip's diagonal entries follow the off-diagonal form and are replaced below
        step(K, T, bufs, a_r[:, lo:hi, None], a_c[:, None, lo:], beta, kappa)
        for S, M in ((K, outK), (T, outT)):
            if S is not None:
                _place(S, M, lo, hi, scale)
        return True

    tasks = [check or (lambda: True)] + [lambda k=k: work(k) for k in range(len(bands))]
    workers = min(_workers(), len(bands)) if P * (P - 1) // 2 >= _THREAD_MIN else 1
    if workers == 1:
        results = [task() for task in tasks]
    else:
        with ThreadPoolExecutor(workers) as pool:  # tasks are handed out as threads free up
            results = list(pool.map(lambda task: task(), tasks))
    idx = np.arange(P)
    outK[idx, idx] = d
    out = {"K": outK}
    if outT is not None:
        outT[idx, idx] = td
        out["Theta"] = outT
    return out, bool(results[0])


def _place(S: np.ndarray, M: np.ndarray, lo: int, hi: int, scale: float) -> None:
    """Write scale * strip S (rows lo:hi, columns lo:P of the upper triangle) and its transpose into M;
    disjoint strips write disjoint parts of M (the diagonal is set by the caller)."""
    h = hi - lo
    top = M[lo:hi, lo:]
    np.multiply(S, scale, out=top)
    M[hi:, lo:hi] = top[:, h:].T
    square = M[lo:hi, lo:hi]
    il = np.tril_indices(h, -1)
    square[il] = square.T[il]


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover  (installed with scikit-learn)
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _kernel_matrix(K0) -> tuple[np.ndarray, Callable[[], bool]]:
    """resprop.numeric.engine.validation.kernel_matrix for one (P, P) matrix, split in two: the cheap checks (shape,
    finite, positive diagonal) run now; the returned ``deferred()`` does the symmetry and PSD tests and
    returns False when they fail (then ``V.kernel_matrix`` decides and raises its usual error), so the fused
    path can run it on its thread pool alongside the strips.  The PSD test is a Cholesky factorisation of
    K0 + 1e-10 max(1, max|K0|) I on one BLAS thread (several times cheaper than eigvalsh at P = 1000): it
    succeeds only if the smallest eigenvalue exceeds -1e-10 max(1, max|K0|) (up to round-off), which is
    the eigvalsh criterion."""
    arr = V.real("input_kernel", K0)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.size == 0:
        arr = V.kernel_matrix("input_kernel", arr)  # raises the usual shape error (or a batch: rejected below)
        raise V.ParameterError("input_kernel", f"must be a single (P, P) matrix, got shape {arr.shape}")
    if (np.diagonal(arr) <= 0).any():
        V.kernel_matrix("input_kernel", arr)  # raises (symmetry, PSD or the diagonal)

    def deferred() -> bool:
        scale = max(1.0, float(np.abs(arr).max()))
        if not np.allclose(arr, arr.T, rtol=0, atol=1e-12 * scale):
            return False
        jitter = np.array(arr)
        jitter[np.diag_indices_from(jitter)] += 1e-10 * scale
        try:
            with _one_blas_thread():  # threaded BLAS stalls badly when another process holds a core
                np.linalg.cholesky(jitter)
        except np.linalg.LinAlgError:
            return False
        return True

    return arr, deferred


def _scalar(name: str, arr: np.ndarray) -> float:
    if arr.ndim != 0:
        raise V.ParameterError(name, f"must be a scalar, got shape {arr.shape}")
    return float(arr)


@dataclass(frozen=True)
class NNGPNTK(ResultRecord):
    """:func:`nngp_ntk`: K = K^(L) and (with ntk; None otherwise) Theta = Theta^(L), each (P, P)."""

    depth: int
    K: np.ndarray
    Theta: np.ndarray | None = None


def nngp_ntk(input_kernel, depth: int, rho, sigma_w2, sigma_b2, activation: str = "erf", ntk: bool = True,
             Theta0=None, method: str = "fused") -> NNGPNTK:
    """K^(L) and Theta^(L) of the residual network for a (P, P) input kernel K^(0) = input_kernel.

    Theta0 defaults to input_kernel (read-in layer in NTK parameterisation: Theta^(0) = K^(0)).  With
    ``ntk=False`` only the NNGP is iterated (``Theta`` is None).
    """
    K0, deferred_check = _kernel_matrix(input_kernel)
    L = V.integer("depth", depth, 1, MAX_DEPTH)
    rho, sw, sb = (_scalar(name, check(name, value)) for name, check, value in
                   (("rho", V.nonnegative, rho), ("sigma_w2", V.positive, sigma_w2),
                    ("sigma_b2", V.nonnegative, sigma_b2)))
    act = V.choice("activation", activation, ACTIVATIONS)
    method = V.choice("method", method, METHODS)
    T0 = None
    if ntk:
        T0 = K0
        if Theta0 is not None:
            T0 = V.real("Theta0", Theta0)
            if T0.shape != K0.shape or not np.allclose(T0, T0.T, rtol=0, atol=1e-12 * max(1.0, np.abs(T0).max())):
                raise V.ParameterError("Theta0", f"must be a symmetric matrix of the shape of input_kernel {K0.shape}")
    elif Theta0 is not None:
        raise V.ParameterError("Theta0", "is only used with ntk=True")
    try:
        with np.errstate(all="ignore"):  # overflow is reported below, naming the inputs
            if method == "fused":
                out, valid = _run_fused(act, K0, T0, L, rho * rho, sw, sb, check=deferred_check)
            else:
                valid = deferred_check()
                out = _run_generated(act, K0, T0, L, rho * rho, sw, sb) if valid else {}
    except V.ParameterError:  # the inputs were validated: a generated kernel objects only to float64 overflow
        if not deferred_check():
            V.kernel_matrix("input_kernel", K0)  # raises: not symmetric or not positive semi-definite
        raise V.ParameterError(
            "rho, sigma_w2, sigma_b2, input_kernel, depth",
            "K or Theta is not finite in float64 for these values (overflow); use values of moderate size",
        ) from None
    if not valid:
        V.kernel_matrix("input_kernel", K0)  # raises: not symmetric or not positive semi-definite
    for name, value in out.items():
        if not np.all(np.isfinite(value)):
            raise V.ParameterError("rho, sigma_w2, sigma_b2, input_kernel, depth",
                                   f"{name} is not finite in float64 for these values (overflow); "
                                   "use values of moderate size")
    return NNGPNTK(depth=L, **out)
