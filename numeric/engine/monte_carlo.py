"""Monte Carlo engine for single-input signal propagation in deep residual networks at initialisation.

Two network families are simulated, each by an exact *reduced* path (cost O(n)
per layer and sample) and a *dense* path that draws every weight matrix (cost
O(n^2); it exists to validate the reduction).

1. Li-Nica-Roy ResNets (Li, Nica & Roy 2021, eq. (1), (18) and section 2.1)
---------------------------------------------------------------------------
::

    z^0 = W^0 x / sqrt(n_in)                                  (taken as z^0 = g ~ N(0, I_n), eq. (15))
    z^l = alpha_l z^{l-1} + lam_l sqrt(2/n) W^l phi(z^{l-1})  l = 1..d,  W^l_ij iid N(0, 1)
    z_out = W_out z^d / sqrt(n)

with phi = ReLU (vanilla ResNet) or phi_s(z) = relu(s * z) with fresh iid
uniform signs s in {+1, -1}^n at every layer (balanced ResNet, section 2.1).
Because ||x||^2 = n_in is assumed, z^0 has exactly the law of a standard normal
vector (eq. (15)), and ``alpha``/``lam`` may vary with the layer (Prop. 6, App. A.1).

*Reduction* (eq. (14), (16)).  W^l is independent of z^{l-1}, so conditionally on
z^{l-1} the vector W^l phi(z^{l-1}) is N(0, ||phi(z^{l-1})||^2 I_n), i.e.
``W^l phi(z^{l-1}) =d ||phi(z^{l-1})|| g^l`` with a fresh standard normal
vector g^l.  This is an identity in law for the *whole vector* z^l jointly
with all earlier layers (not only for its norm), so the reduced chain
``z^l = alpha_l z^{l-1} + lam_l sqrt(2/n) ||phi(z^{l-1})|| g^l`` has exactly
the law of the network.  The read-out reduces the same way,
``z_out =d ||z^d|| / sqrt(n) g'`` (eq. (15)).

Because ReLU is positively homogeneous, the chain is propagated for the
direction ``zhat^l = z^l / ||z^l||`` while the log-norm is accumulated,
``G = ln(||z^0||^2/n) + sum_l [ln(||z^l||^2/||z^{l-1}||^2) - ln(alpha_l^2 + lam_l^2)]``,
which equals the section-5 definition ``G = ln(||z^d||^2/n) - sum_l ln(alpha_l^2 + lam_l^2)``
(with ||x||^2 = n_in) but cannot overflow at large depth.  Recorded per
sample: G, ``act_sq[:, l] = ||phi(zhat^l)||^2`` (the activation norm feeding
step l+1, eq. (2), (11)-(13); for balanced networks with that step's signs),
the fraction of positive entries of z^l (Fig. 5a), and optionally z_out.

2. Residual MLP of PDLT (Roberts, Yaida & Hanin, App. B, eq. (B.3) with xi = 1)
-------------------------------------------------------------------------------
::

    z^(1)_i iid N(0, K1)
    z^(l+1) = R^(l+1) + gamma z^(l),  R^(l+1) = b + W sigma(z^(l)),  b_i ~ N(0, C_b),  W_ij ~ N(0, C_W/n)

*Reduction*: conditionally on z^(l), R^(l+1) ~ N(0, (C_b + C_W ||sigma(z^(l))||^2/n) I_n),
so ``R^(l+1) =d sqrt(C_b + C_W ||sigma(z^(l))||^2/n) g`` -- again exact for the
whole vector jointly with z^(l).  Recorded per sample and layer: S2 = ||z||^2/n,
S4 = sum z_i^4/n, the off-diagonal pair average
P = sum_{i != j} z_i^2 z_j^2 / (n(n-1)) (for the four-point vertex, B.22-B.23)
and optionally the block correlators G_RR, G_Rz, G_zz of (B.42)-(B.43).

Randomness and chunking
-----------------------
Samples are processed in chunks (bounding memory); chunk k draws from its own
``numpy.random.Generator`` seeded by the k-th child of ``SeedSequence(seed)``,
so results are deterministic given ``(seed, chunk_size)``.  The estimators
(with standard errors) live in :mod:`resprop.numeric.engine.mc_estimators` and are
re-exported here.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.mc_estimators import (
    block_correlators,
    conjecture5,
    four_point_vertex,
    g_moments,
    hypoactivation,
    log_norm_moments,
    output_moments,
)
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.simulate import ACTIVATIONS as _BASE_ACTIVATIONS

__all__ = [
    "LogGaussianSamples",
    "ResidualMLPSamples",
    "simulate_log_gaussian",
    "simulate_residual_mlp",
    "resolve_activation",
    "ACTIVATION_NAMES",
    "METHODS",
    "g_moments",
    "hypoactivation",
    "conjecture5",
    "output_moments",
    "four_point_vertex",
    "log_norm_moments",
    "block_correlators",
]

METHODS = ("reduced", "dense")
ACTIVATION_NAMES = ("relu", "tanh", "erf", "linear", "gelu", "leaky_relu:<slope>")

#: Byte budget of the largest per-chunk array: the weight stack (chunk, n, n) on the dense path.
_DENSE_CHUNK_BYTES = 2**26
#: Elements of one (chunk, n) work array on the reduced path (a few of them stay cache resident).
_REDUCED_CHUNK_ELEMENTS = 2**17
#: Largest memory a simulation may ask for (per-sample outputs plus one chunk's work arrays), in bytes.
MEMORY_LIMIT_BYTES = 2**33
#: The largest number of layers accepted.
MAX_LAYERS = 10**7

Activation = Callable[[np.ndarray], np.ndarray]


# ---------------------------------------------------------------------------
# Validation helpers (every error is a ParameterError naming the parameter)
# ---------------------------------------------------------------------------


def _int(name: str, value, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise V.ParameterError(name, f"must be an integer >= {minimum}, got {value!r}")
    return V.integer(name, value, minimum, maximum)


def _scalar(name: str, value, check=V.real) -> float:
    # a real number: Python/NumPy int or float, or a 0-d integer/float array (float32 included); not a bool
    real = isinstance(value, numbers.Real) or (isinstance(value, np.ndarray) and value.ndim == 0
                                               and value.dtype.kind in "iuf")
    if isinstance(value, (bool, np.bool_)) or not real:
        raise V.ParameterError(name, f"must be a finite real number, got {value!r}")
    return float(check(name, value))


def _per_layer(name: str, value, d: int, check) -> np.ndarray:
    """A scalar or a length-d 1-D array of per-layer coefficients, as float64 of shape (d,)."""
    if isinstance(value, bool):
        raise V.ParameterError(name, f"must be a real scalar or a 1-D array of length d = {d}, got {value!r}")
    arr = check(name, value)
    if arr.ndim == 0:
        return np.full(d, float(arr))
    if arr.ndim != 1 or arr.size != d:
        raise V.ParameterError(name, f"must be a real scalar or a 1-D array of length d = {d}, got shape {arr.shape}")
    return arr.astype(np.float64).copy()


def _seed_sequence(seed) -> np.random.SeedSequence:
    """A fresh SeedSequence (so repeated calls with the same seed spawn the same children)."""
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size)
    return np.random.SeedSequence(_int("seed", seed, 0))


def _method(method) -> str:
    if not isinstance(method, str):
        raise V.ParameterError("method", f"unknown value {method!r}; allowed: {', '.join(METHODS)}")
    return V.choice("method", method, METHODS)


def _chunk(chunk_size, samples: int, auto: int) -> int:
    size = auto if chunk_size is None else _int("chunk_size", chunk_size, 1)
    return max(1, min(size, samples))


def _leaky(slope: float) -> Activation:
    return lambda x: np.where(x > 0, x, slope * x)


def resolve_activation(activation) -> tuple[Activation, str]:
    """(function, label) for a named activation or a NumPy callable (checked on a probe array).

    Names: relu, tanh, erf, linear, gelu and ``leaky_relu:<slope>`` (sigma(z) = z for z > 0,
    slope * z otherwise).
    """
    allowed = ", ".join(ACTIVATION_NAMES)
    if isinstance(activation, str):
        if activation.startswith("leaky_relu:"):
            text = activation.split(":", 1)[1]
            try:
                slope = float(text)
            except ValueError:
                raise V.ParameterError("activation", f"leaky_relu slope must be a real number, got {text!r}") from None
            if not math.isfinite(slope):
                raise V.ParameterError("activation", f"leaky_relu slope must be finite, got {text!r}")
            return _leaky(slope), activation
        if activation in _BASE_ACTIVATIONS:
            return _BASE_ACTIVATIONS[activation], activation
        raise V.ParameterError("activation", f"unknown value {activation!r}; allowed: {allowed} or a callable")
    if not callable(activation):
        raise V.ParameterError("activation", f"must be a name ({allowed}) or a callable, got {activation!r}")
    probe = np.linspace(-3.0, 3.0, 12).reshape(3, 4)
    try:
        out = np.asarray(activation(probe), dtype=np.float64)
    except Exception as exc:  # noqa: BLE001  (report any failure of a user callable as a parameter error)
        raise V.ParameterError("activation", f"callable failed on a probe array: {exc}") from None
    if out.shape != probe.shape or not np.all(np.isfinite(out)):
        raise V.ParameterError(
            "activation", "callable must map an array elementwise to finite values of the same shape"
        )
    return activation, getattr(activation, "__name__", repr(activation))


def _auto_chunk(n: int, method: str, extra_per_sample: int = 0) -> int:
    if method == "dense":
        return max(1, _DENSE_CHUNK_BYTES // (8 * n * n))
    return max(16, _REDUCED_CHUNK_ELEMENTS // (n + extra_per_sample))


def _check_memory(outputs: dict[str, int], chunk: int, n: int, method: str, work_arrays: int) -> None:
    """Refuse (naming the largest contributor) a simulation whose arrays would exceed MEMORY_LIMIT_BYTES.

    ``outputs``: parameter name -> float64 elements of the per-sample output arrays it drives; the chunk's work
    arrays hold ``work_arrays`` (chunk, n) arrays, plus the (chunk, n, n) weight stack on the dense path.
    """
    work = 8 * chunk * n * (work_arrays + (n if method == "dense" else 0))
    parts = {name: 8 * count for name, count in outputs.items()}
    parts["width"] = work
    total = sum(parts.values())
    if total > MEMORY_LIMIT_BYTES:
        name = max(parts, key=parts.__getitem__)
        raise V.ParameterError(name, f"the simulation would need {total / 2**30:.3g} GiB (limit "
                                     f"{MEMORY_LIMIT_BYTES / 2**30:g} GiB): reduce {name}")


def _chunks(samples: int, size: int, ss: np.random.SeedSequence):
    """(start, stop, Generator) per chunk; chunk k uses the k-th child of ``ss``."""
    starts = range(0, samples, size)
    for start, child in zip(starts, ss.spawn(len(starts))):
        yield start, min(start + size, samples), np.random.default_rng(child)


def _row_sq(a: np.ndarray) -> np.ndarray:
    """Row-wise squared norm of a 2-D array."""
    return np.einsum("ij,ij->i", a, a)


# ---------------------------------------------------------------------------
# 1. Li-Nica-Roy ResNets
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LogGaussianSamples(ResultRecord):
    """Per-sample output of :func:`simulate_log_gaussian` (Li, Nica & Roy 2021).

    G : (samples,)
        ``ln(||z^d||^2/n) - sum_l ln(alpha_l^2 + lam_l^2)`` (section 5, with ||x||^2 = n_in);
        -inf for the (probability <= 2^-n per layer, only when alpha_l = 0) dead networks.
    act_sq : (samples, d)  (d = depth)
        ``||phi(zhat^l)||^2`` for l = 0..d-1 (the activation norm feeding step l+1;
        balanced: phi_s with that step's signs); NaN after a network died.
    active_fraction : (samples, d)
        Fraction of entries of z^l that are > 0, l = 0..d-1 (Fig. 5a).
    z_out : (samples, n_out) or None
        Read-out ``W_out z^d / sqrt(n)`` (eq. (1)), present when n_out > 0.
    """

    G: np.ndarray
    act_sq: np.ndarray
    active_fraction: np.ndarray
    z_out: np.ndarray | None
    width: int
    depth: int
    alpha: np.ndarray
    lam: np.ndarray
    balanced: bool
    method: str
    seed: object
    chunk_size: int

    @property
    def samples(self) -> int:
        return int(self.G.shape[0])


def _random_signs(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """(m, n) boolean array of iid fair coin flips (True = sign +1), from raw random bytes."""
    nbytes = (n + 7) // 8
    raw = np.frombuffer(rng.bytes(m * nbytes), dtype=np.uint8).reshape(m, nbytes)
    return np.unpackbits(raw, axis=1, count=n).view(bool)


def _log_gaussian_chunk(m: int, n: int, alpha: np.ndarray, lam: np.ndarray, balanced: bool, dense: bool,
                        n_out: int, rng: np.random.Generator):
    d = alpha.size
    log_growth = np.log(alpha**2 + lam**2)
    act_sq = np.empty((m, d))
    frac = np.empty((m, d))
    zhat = rng.standard_normal((m, n))                       # z^0 = g, eq. (15)
    nrm2 = _row_sq(zhat)
    G = np.log(nrm2 / n)
    zhat /= np.sqrt(nrm2)[:, None]
    g = None if dense else np.empty((m, n))
    sq = np.empty((m, n))
    phi = np.empty((m, n)) if dense else None
    death = np.full(m, d)                                      # first layer index with z^l = 0 (d: never)
    scale = math.sqrt(2.0 / n)
    for l in range(d):
        pos = zhat > 0
        frac[:, l] = np.count_nonzero(pos, axis=1) / n
        on = pos if not balanced else np.equal(pos, _random_signs(rng, m, n))  # phi_s(z)_i != 0 iff s_i z_i > 0
        np.multiply(zhat, zhat, out=sq)
        sq *= on
        act_sq[:, l] = phi2 = sq.sum(axis=1)                  # ||phi(zhat^l)||^2, as ||zhat^l|| = 1
        if dense:                                             # z = lam sqrt(2/n) W phi(zhat) (+ alpha zhat below)
            assert phi is not None
            np.abs(zhat, out=phi)
            phi *= on
            W = rng.standard_normal((m, n, n))
            z = np.matmul(W, phi[:, :, None])[:, :, 0]
            del W
            z *= lam[l] * scale
        else:                                                 # reduced: W phi =d ||phi|| g, eq. (14), (16)
            z = rng.standard_normal(out=g)
            z *= (lam[l] * scale) * np.sqrt(phi2)[:, None]
        if alpha[l] != 0.0:
            z += np.multiply(zhat, alpha[l], out=sq)
        nrm2 = _row_sq(z)
        with np.errstate(divide="ignore"):
            G += np.log(nrm2) - log_growth[l]                # ln ||z^l||^2/||z^{l-1}||^2 - ln(alpha^2 + lam^2)
        zero = nrm2 == 0.0
        if zero.any():                                        # all ReLUs off with alpha_l = 0: z^{l+1} = 0 exactly
            death[zero & (death == d)] = l + 1
            nrm2[zero] = 1.0
        z /= np.sqrt(nrm2)[:, None]
        if dense:
            zhat = z
        else:
            zhat, g = z, zhat                                 # the old direction's buffer takes the next g
    if (death < d).any():
        act_sq[np.arange(d)[None, :] >= death[:, None]] = np.nan
    z_out = None
    if n_out:
        norm_over_sqrt_n = np.exp(0.5 * (G + log_growth.sum()))  # ||z^d|| / sqrt(n)
        if dense:
            W_out = rng.standard_normal((m, n_out, n))
            z_out = np.matmul(W_out, zhat[:, :, None])[:, :, 0] * norm_over_sqrt_n[:, None]
        else:
            z_out = rng.standard_normal((m, n_out)) * norm_over_sqrt_n[:, None]  # eq. (15)
    return G, act_sq, frac, z_out


def simulate_log_gaussian(*, width: int, depth: int, alpha, lam, balanced: bool = False, samples: int, seed,
                          method: str = "reduced", chunk_size: int | None = None,
                          n_out: int = 0) -> LogGaussianSamples:
    """Sample the Li-Nica-Roy ResNet (eq. (1)/(18); balanced: section 2.1) over independent initialisations.

    Parameters
    ----------
    width : int >= 2
        Hidden width n.
    depth : int >= 1
        Number of residual layers d.
    alpha, lam : real scalar or 1-D array of length depth
        Skip and branch coefficients (layer dependent as in Prop. 6); lam >= 0,
        alpha_l^2 + lam_l^2 > 0 in every layer.
    balanced : bool
        Use phi_s(z) = relu(s * z) with fresh random signs per layer (section 2.1).
    samples : int >= 2
    seed : int >= 0 or numpy.random.SeedSequence
    method : {"reduced", "dense"}
        Exact reduction ``W phi =d ||phi|| g`` (eq. (14), O(n) per layer) or explicit W^l (O(n^2)).
    chunk_size : int >= 1 or None
        Samples per chunk; None picks one automatically (dense: weight stack <= 64 MiB).
    n_out : int >= 0
        Number of read-out neurons z_out = W_out z^d / sqrt(n) to record (0: none).

    Returns
    -------
    LogGaussianSamples; see its docstring and the module docstring.
    """
    n = _int("width", width, 2)
    d = _int("depth", depth, 1, MAX_LAYERS)
    alpha_arr = _per_layer("alpha", alpha, d, V.real)
    lam_arr = _per_layer("lam", lam, d, V.nonnegative)
    zero = (alpha_arr == 0) & (lam_arr == 0)
    if zero.any():
        raise V.ParameterError(
            "alpha, lam",
            "alpha = lam = 0 makes the network identically zero; need "
            f"alpha^2 + lam^2 > 0 (violated at layer(s) {', '.join(map(str, np.flatnonzero(zero)[:4] + 1))})",
        )
    V.skip_and_branch(alpha_arr, lam_arr)
    with np.errstate(under="ignore"):
        tiny = (alpha_arr != 0) & (np.abs(alpha_arr) < 1e-150 * np.hypot(alpha_arr, lam_arr))
    if tiny.any():  # z = alpha zhat when every ReLU is off: ||z||^2 would underflow to 0 (a false "death")
        raise V.ParameterError("alpha", "a nonzero alpha_l must be >= 1e-150 sqrt(alpha_l^2 + lam_l^2) in absolute "
                                        "value (smaller ones underflow float64); use alpha_l = 0 instead")
    if not isinstance(balanced, (bool, np.bool_)):
        raise V.ParameterError("balanced", f"must be True or False, got {balanced!r}")
    samples = _int("samples", samples, 2)
    ss = _seed_sequence(seed)
    method = _method(method)
    n_out = _int("n_out", n_out, 0)
    size = _chunk(chunk_size, samples, _auto_chunk(n, method))
    _check_memory({"samples": samples, "samples, depth": 2 * samples * d, "samples, n_out": samples * n_out}, size, n,
                  method, 5)

    G = np.empty(samples)
    act_sq = np.empty((samples, d))
    frac = np.empty((samples, d))
    z_out = np.empty((samples, n_out)) if n_out else None
    for start, stop, rng in _chunks(samples, size, ss):
        g, a, f, zo = _log_gaussian_chunk(stop - start, n, alpha_arr, lam_arr, bool(balanced),
                                          method == "dense", n_out, rng)
        G[start:stop], act_sq[start:stop], frac[start:stop] = g, a, f
        if z_out is not None:
            z_out[start:stop] = zo
    if n_out:
        V.finite_result(
            "alpha, lam, depth", z_out, "the read-out z_out (its scale is prod_l (alpha_l^2 + lam_l^2)^(1/2))"
        )
    return LogGaussianSamples(G=G, act_sq=act_sq, active_fraction=frac, z_out=z_out, width=n, depth=d,
                              alpha=alpha_arr, lam=lam_arr, balanced=bool(balanced), method=method,
                              seed=seed, chunk_size=size)


# ---------------------------------------------------------------------------
# 2. Residual MLP of PDLT (B.3)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ResidualMLPSamples(ResultRecord):
    """Per-sample output of :func:`simulate_residual_mlp` (PDLT eq. (B.3), xi = 1).

    Column l refers to layer l = 0..depth (layer 0 the input, PDLT's z^(1); ``depth`` residual layers after it).

    S2, S4, P : (samples, depth + 1)
        ``||z^(l)||^2/n``, ``sum_i (z_i^(l))^4/n`` and
        ``sum_{i != j} (z_i z_j)^2 / (n(n-1)) = ((n S2)^2 - n S4) / (n(n-1))``.
    G_RR, G_Rz, G_zz : (samples, depth) or None
        With ``record_block``: for the block R^(l+1) = b + W sigma(z^(l)), l = 0..depth-1 (column l),
        ``||R||^2/n``, ``R.z^(l)/n`` and ``||z^(l)||^2/n`` (B.42)-(B.43); per sample
        ``S2[:, l + 1] = gamma^2 G_zz + 2 gamma G_Rz + G_RR`` exactly (B.44).
    """

    S2: np.ndarray
    S4: np.ndarray
    P: np.ndarray
    G_RR: np.ndarray | None
    G_Rz: np.ndarray | None
    G_zz: np.ndarray | None
    width: int
    depth: int
    gamma: float
    C_W: float
    C_b: float
    activation: str
    input_kernel: float
    method: str
    seed: object
    chunk_size: int

    @property
    def samples(self) -> int:
        return int(self.S2.shape[0])


def _residual_mlp_chunk(m: int, n: int, depth: int, gamma: float, C_W: float, C_b: float, sigma: Activation,
                        K1: float, dense: bool, record_block: bool, rng: np.random.Generator):
    """Layers l = 0..depth (the input and ``depth`` residual layers) of m networks."""
    S2 = np.empty((m, depth + 1))
    S4 = np.empty((m, depth + 1))
    block = np.empty((3, m, depth)) if record_block else None
    z = rng.standard_normal((m, n))
    z *= math.sqrt(K1)
    sq = np.empty((m, n))
    for l in range(depth + 1):
        np.multiply(z, z, out=sq)
        S2[:, l] = sq.sum(axis=1) / n
        S4[:, l] = _row_sq(sq) / n
        if l == depth:
            break
        s = sigma(z)
        if dense:  # R = b + W sigma(z), W ~ N(0, C_W/n), b ~ N(0, C_b)
            W = rng.standard_normal((m, n, n))
            R = np.matmul(W, s[:, :, None])[:, :, 0]
            del W
            R *= math.sqrt(C_W / n)
            if C_b:
                R += math.sqrt(C_b) * rng.standard_normal((m, n))
        else:      # R =d sqrt(C_b + C_W ||sigma(z)||^2/n) g
            R = rng.standard_normal((m, n))
            R *= np.sqrt(C_b + C_W * _row_sq(s) / n)[:, None]
        if block is not None:
            block[0, :, l] = _row_sq(R) / n
            block[1, :, l] = np.einsum("ij,ij->i", R, z) / n
            block[2, :, l] = S2[:, l]
        if gamma != 0.0:
            R += gamma * z
        z = R
    return S2, S4, block


def simulate_residual_mlp(*, width: int, depth: int, gamma, C_W, C_b=0.0, activation="tanh", input_kernel=1.0,
                          samples: int, seed, method: str = "reduced", chunk_size: int | None = None,
                          record_block: bool = False) -> ResidualMLPSamples:
    """Sample the residual MLP of PDLT eq. (B.3) with xi = 1 for one input.

    Parameters
    ----------
    width : int >= 2
        Hidden width n.
    depth : int >= 0
        Number of residual layers after the input (docs/api-renames.md, "Depth: one convention"): layers
        l = 0..depth, the input z^(0)_i iid N(0, input_kernel) (PDLT's z^(1); PDLT's L is depth + 1), then
        z^(l+1) = gamma z^(l) + b + W sigma(z^(l)).
    gamma : real
        Residual (identity) coefficient.
    C_W : > 0, C_b : >= 0
        Weight variance C_W/n and bias variance C_b of the block b + W sigma(z).
    activation : "relu" | "tanh" | "erf" | "linear" | "gelu" | "leaky_relu:<slope>" | callable
    input_kernel : > 0
        Input kernel (layer 0; PDLT's first-layer kernel K^(1)).
    samples : int >= 2
    seed : int >= 0 or numpy.random.SeedSequence
    method : {"reduced", "dense"}
        Exact reduction ``b + W sigma(z) =d sqrt(C_b + C_W ||sigma(z)||^2/n) g`` (O(n) per layer)
        or explicit W, b (O(n^2)).
    chunk_size : int >= 1 or None
    record_block : bool
        Also record the block correlators G_RR, G_Rz, G_zz of (B.42)-(B.43).
    """
    n = _int("width", width, 2)
    depth = _int("depth", depth, 0, MAX_LAYERS - 1)
    gamma = _scalar("gamma", gamma)
    C_W = _scalar("C_W", C_W, V.positive)
    C_b = _scalar("C_b", C_b, V.nonnegative)
    K1 = _scalar("input_kernel", input_kernel, V.positive)
    sigma, label = resolve_activation(activation)
    samples = _int("samples", samples, 2)
    ss = _seed_sequence(seed)
    method = _method(method)
    if not isinstance(record_block, (bool, np.bool_)):
        raise V.ParameterError("record_block", f"must be True or False, got {record_block!r}")
    size = _chunk(chunk_size, samples, _auto_chunk(n, method))
    _check_memory({"samples, depth": samples * (depth + 1) * (3 + (3 if record_block else 0))}, size, n, method, 6)

    S2 = np.empty((samples, depth + 1))
    S4 = np.empty((samples, depth + 1))
    block = np.empty((3, samples, depth)) if record_block else None
    for start, stop, rng in _chunks(samples, size, ss):
        s2, s4, b = _residual_mlp_chunk(stop - start, n, depth, gamma, C_W, C_b, sigma, K1,
                                        method == "dense", bool(record_block), rng)
        S2[start:stop], S4[start:stop] = s2, s4
        if block is not None:
            block[:, start:stop] = b
    V.finite_result("gamma, C_W, C_b, input_kernel, depth", S4, "sum_i z_i^4 / n")
    with np.errstate(over="ignore"):
        P = ((n * S2) ** 2 - n * S4) / (n * (n - 1))
    V.finite_result("gamma, C_W, C_b, input_kernel, depth", P, "the pair average P")
    G_RR, G_Rz, G_zz = (block[0], block[1], block[2]) if block is not None else (None, None, None)
    return ResidualMLPSamples(S2=S2, S4=S4, P=P, G_RR=G_RR, G_Rz=G_Rz, G_zz=G_zz, width=n, depth=depth,
                              gamma=gamma, C_W=C_W, C_b=C_b, activation=label, input_kernel=K1, method=method,
                              seed=seed, chunk_size=size)
