"""Numeric driver for PDLT Appendix B (residual MLPs): criticality, nu(gamma), r*(gamma), gamma*(r), xi(gamma).

Formulas are the generated kernels of `generated.pdlt` (this theory's) (derived in `derive/theories/pdlt.py`); the
kernel / four-point vertex trajectory is the generated fused recursion of `generated.pdlt_recursions` (this theory's)
(B.12 with B.26).  Gaussian expectations of a smooth activation come from the generated composite
Gauss--Legendre rule; those of the scale-invariant class are closed forms inside the generated recursion.

Activation classes (PDLT §5): ``relu``, ``linear`` and ``leaky_relu:s`` are scale-invariant with
(a_+, a_-) = (1, 0), (1, 1), (1, s); ``tanh`` and ``erf`` are smooth odd activations of the K* = 0 class.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import erf

import resprop.numeric.theories.pdlt.generated.pdlt as pr
import resprop.numeric.theories.pdlt.generated.pdlt_recursions as prr
from resprop.generated.gauss_hermite import PANELS_1D, panel_nodes
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError

__all__ = ["ActivationClass", "activation_class", "check_gamma", "critical_C_W", "nu", "r_star", "gamma_star",
           "vertex_trajectory", "xi_from_correlators", "ACTIVATION_CLASSES"]

ACTIVATION_CLASSES = ("relu", "linear", "leaky_relu:<slope>", "tanh", "erf")
#: "auto": the compiled trajectory (scale-invariant class) where Numba imports, else NumPy; "compiled"; "numpy"
BACKENDS = ("auto", "compiled", "numpy")


@dataclass(frozen=True)
class ActivationClass:
    name: str
    kind: str  # "scale_invariant" or "k0"
    a_plus: float = 1.0
    a_minus: float = 0.0
    sigma1: float = 1.0
    a1: float = 0.0

    def sigma(self, z: np.ndarray) -> np.ndarray:
        if self.kind == "scale_invariant":
            return np.where(z > 0, self.a_plus * z, self.a_minus * z)
        return np.tanh(z) if self.name == "tanh" else erf(z)


def activation_class(spec: str) -> ActivationClass:
    """Parse ``relu | linear | leaky_relu:<s> | tanh | erf``; anything else names the allowed classes."""
    allowed = ", ".join(ACTIVATION_CLASSES)
    if not isinstance(spec, str):
        raise ParameterError("activation", f"must be one of {allowed}, got {spec!r}")
    if spec == "relu":
        return ActivationClass("relu", "scale_invariant", 1.0, 0.0)
    if spec == "linear":
        return ActivationClass("linear", "scale_invariant", 1.0, 1.0)
    if spec.startswith("leaky_relu:"):
        try:
            s = float(spec.split(":", 1)[1])
        except ValueError:
            raise ParameterError("activation", f"leaky_relu needs a numeric slope, e.g. leaky_relu:0.1, got {spec!r}") \
                from None
        if not np.isfinite(s):
            raise ParameterError("activation", f"leaky_relu slope must be finite, got {spec!r}")
        return ActivationClass(spec, "scale_invariant", 1.0, s)
    if spec in ("tanh", "erf"):
        return ActivationClass(spec, "k0", sigma1=float(getattr(pr, f"sigma1_{spec}")()),
                               a1=float(getattr(pr, f"a1_{spec}")()))
    raise ParameterError("activation", f"unknown activation class {spec!r}; allowed: {allowed}")


def check_gamma(gamma) -> np.ndarray:
    g = V.real("gamma", gamma)
    if np.any((g < 0) | (g >= 1)):
        raise ParameterError(
            "gamma", f"must lie in [0, 1) (criticality needs gamma^2 < 1), got {g[(g < 0) | (g >= 1)]}"
        )
    return g


def _unit_slopes(ac: ActivationClass) -> tuple[float, float]:
    """(a_+, a_-) / max(|a_+|, |a_-|): nu and gamma* are homogeneous of degree 0 in the slopes, and the unit
    scale keeps a_-^4 in float64 range for any finite leaky slope."""
    m = max(abs(ac.a_plus), abs(ac.a_minus))
    return ac.a_plus / m, ac.a_minus / m


def critical_C_W(gamma, activation: str) -> np.ndarray:
    """C_W(gamma): B.20 (scale-invariant) or B.21 (K* = 0); C_b = 0 in both."""
    g, ac = check_gamma(gamma), activation_class(activation)
    if ac.kind == "scale_invariant":
        with np.errstate(all="ignore"):
            out = pr.critical_C_W_scale_invariant(g, np.float64(ac.a_plus), np.float64(ac.a_minus))
        if np.any(~np.isfinite(out) | ((out == 0) & (g < 1))):
            raise ParameterError("activation", f"the critical C_W = 2(1 - gamma^2)/(a_+^2 + a_-^2) of {ac.name} is "
                                               "outside the float64 range; use a leaky slope of moderate size")
        return out
    return pr.critical_C_W_k0(g, ac.sigma1)


def nu(gamma, activation: str) -> np.ndarray:
    """nu(gamma) of B.29 or B.35."""
    g, ac = check_gamma(gamma), activation_class(activation)
    if ac.kind == "scale_invariant":
        return pr.nu_scale_invariant(g, *_unit_slopes(ac))
    return pr.nu_k0(g)


def r_star(gamma, activation: str, n_out: int = 1) -> np.ndarray:
    """Optimal aspect ratio r*(gamma) = 4/((20 + 3 n_L) nu(gamma)) (B.36)."""
    n_out = V.integer("n_out", n_out, minimum=1)
    return pr.r_star(nu(gamma, activation), n_out)


def gamma_star(r, activation: str, n_out: int = 1) -> np.ndarray:
    """Inverse of r*(gamma): 0 for r <= r*(0), where the criterion cannot be met (§B.3)."""
    r = V.positive("r", r)
    n_out = V.integer("n_out", n_out, minimum=1)
    ac = activation_class(activation)
    r0 = r_star(0.0, activation, n_out)
    # the bare kernels (.unchecked): r below r*(0), where the generated functions refuse, is masked to 0 below
    with np.errstate(invalid="ignore", over="ignore"):
        if ac.kind == "scale_invariant":
            kernel = pr.gamma_star_scale_invariant.unchecked  # type: ignore[attr-defined]
            g = kernel(r, float(n_out), *map(float, _unit_slopes(ac)))
        else:
            g = pr.gamma_star_k0.unchecked(r, float(n_out))  # type: ignore[attr-defined]
    # 1 - gamma*^2 ~ 3/((20 + 3 n_L) r): gamma* rounds to 1 in float64 long before the formula overflows
    g = np.where(r >= 1e20, 1.0, np.minimum(g, 1.0))
    return np.where(r <= r0, 0.0, g)


#: vertex_trajectory evaluates one activation on the quadrature nodes per layer for tanh / erf (~0.1 ms): 10^5
#: layers take about ten seconds (the scale-invariant class, with closed-form moments, about one second); the
#: largest ``depth`` (residual layers after the input) accepted
MAX_TRAJECTORY_DEPTH = 10**5


class _Moments:
    """Callbacks of the generated ``kernel_vertex`` recursion: <sigma^2>_K, <sigma^2 z^2>_K and <sigma^4>_K by
    the generated quadrature (``expect1``'s rule), the activation evaluated once per layer for all three."""

    def __init__(self, ac: ActivationClass) -> None:
        self.sigma = ac.sigma
        self.z, self.w = panel_nodes(PANELS_1D)
        self.layer = -1

    def _at(self, l: int, K: np.ndarray) -> None:
        if l != self.layer:
            u = np.sqrt(K)[..., None] * self.z
            s2 = self.sigma(u) ** 2
            self.values = (s2 @ self.w, (s2 * u**2) @ self.w, (s2**2) @ self.w)
            self.layer = l

    def callbacks(self) -> dict:
        def make(i: int):
            def callback(l, K, out):
                self._at(l, K)
                out[...] = self.values[i]
            return callback

        return {name: make(i) for i, name in enumerate(("mean_sigma_sq", "mean_sigma_sq_z_sq", "mean_sigma_4"))}


@dataclass(frozen=True)
class VertexTrajectory(ResultRecord):
    """:func:`vertex_trajectory`: K^(l), V^(l), V^(l)/K^(l)^2 for the layers l = 0..depth (``layers``; layer 0 is
    the input, PDLT's layer 1), and the C_W used."""

    depth: int
    layers: np.ndarray
    K: np.ndarray
    V: np.ndarray
    V_over_K2: np.ndarray
    C_W: float


def vertex_trajectory(activation: str, *, gamma: float, depth: int, input_kernel: float = 1.0,
                      C_W: float | None = None, C_b: float = 0.0, backend: str = "auto") -> VertexTrajectory:
    """Iterate the kernel (B.12) and four-point vertex (B.26) recursions from the input kernel, V = 0.

    Depth convention (docs/api-renames.md, "Depth: one convention"): ``depth`` is the number of residual layers
    after the input, z^(l+1) = gamma z^(l) + b + W sigma(z^(l)) for l = 0..depth-1.  The input is layer 0 of the
    returned arrays (PDLT's z^(1) ~ N(0, K^(1)), B.3, whose residual updates are its layers 2..L), so PDLT's L is
    depth + 1 and K, V, V_over_K2 and ``layers`` have depth + 1 entries, l = 0..depth; depth = 0 is the input
    alone (K = input_kernel, V = 0).  Returns K^(l), V^(l) and V^(l)/K^(l)^2 (V/(n K^2) = that / n).  C_W
    defaults to the critical C_W(gamma).  ``backend`` (scale-invariant class): "auto" (the fused compiled loop
    of `generated.pdlt_compiled` (this theory's) where Numba imports), "compiled" or "numpy" (the generated NumPy
    kernel); they agree to round-off.  The smooth class calls its Gaussian moments per layer (NumPy).
    """
    ac = activation_class(activation)
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ParameterError("backend", f"must be one of {', '.join(BACKENDS)}, got {backend!r}")
    g_arr = check_gamma(gamma)
    if g_arr.ndim:
        raise ParameterError("gamma", f"must be a scalar here, got shape {g_arr.shape}")
    g = float(g_arr)
    depth = V.integer("depth", depth, minimum=0, maximum=MAX_TRAJECTORY_DEPTH)
    K1 = float(V.positive("input_kernel", input_kernel))
    C_b = float(V.nonnegative("C_b", C_b))
    C_W = float(critical_C_W(g, activation)) if C_W is None else float(V.positive("C_W", C_W))
    K = np.empty(depth + 1)
    Vv = np.empty(depth + 1)
    K[0], Vv[0] = K1, 0.0

    def keep(l, K_l, V_l):
        K[l + 1], Vv[l + 1] = K_l[0], V_l[0]

    n = depth
    sequences = (np.full(n, g), np.full(n, C_W), np.full(n, C_b))
    with np.errstate(all="ignore"):  # overflow and underflow are reported below, naming the inputs
        if ac.kind == "scale_invariant":
            _scale_invariant_trajectory(K, Vv, sequences, ac, keep, backend)
        else:
            prr.kernel_vertex(np.array([K1]), np.zeros(1), *sequences, **_Moments(ac).callbacks(), record=keep)
    if not (np.all(np.isfinite(K)) and np.all(np.isfinite(Vv)) and np.all(K > 0)):
        raise ParameterError(
            "input_kernel, C_W, C_b, gamma, depth",
            "K^(l) or V^(l) leaves the float64 range (overflow or underflow); use values of moderate size",
        )
    return VertexTrajectory(depth=depth, layers=np.arange(depth + 1), K=K, V=Vv, V_over_K2=Vv / K**2, C_W=C_W)


def _compiled():
    """`resprop.numeric.theories.pdlt.generated.pdlt_compiled` (Numba), or None where Numba does not import."""
    try:
        import resprop.numeric.theories.pdlt.generated.pdlt_compiled as comp
    except ImportError:  # pragma: no cover - an install without Numba
        return None
    return comp


def _scale_invariant_trajectory(K: np.ndarray, Vv: np.ndarray, sequences, ac: ActivationClass, keep,
                                backend: str) -> None:
    """K[1:], Vv[1:] from K[0] by the generated recursion B.12/B.26 of the scale-invariant class: the fused
    compiled loop (`generated.pdlt_compiled` (this theory's), the trajectory written as it goes) or the NumPy kernel
    (`pdlt_recursions`, a callback per layer).  Both are generated from the same derivation and agree to
    round-off (tests/test_pdlt_compiled.py)."""
    n = len(sequences[0])
    seqs = (*sequences, np.full(n, ac.a_plus), np.full(n, ac.a_minus))
    comp = _compiled() if backend in ("auto", "compiled") else None
    if backend == "compiled" and comp is None:  # pragma: no cover - an install without Numba
        raise ParameterError("backend", "'compiled' needs Numba (pip install numba); use 'auto' or 'numpy'")
    if comp is None:
        prr.kernel_vertex_scale_invariant(np.array([K[0]]), np.zeros(1), *seqs, record=keep)
        return
    trajectory = np.empty((n, 2, 1))
    comp.kernel_vertex_scale_invariant_run(np.array([K[0]]), np.zeros(1), *(np.ascontiguousarray(q, dtype=float)
                                                                            for q in seqs), trajectory)
    K[1:], Vv[1:] = trajectory[:, 0, 0], trajectory[:, 1, 0]


def xi_from_correlators(gamma, G_RR, G_Rz, G_zz) -> np.ndarray:
    """B.45: the residual weight xi that preserves the measured two-point correlator."""
    g = check_gamma(gamma)
    return pr.xi_recipe(g, V.positive("G_RR", G_RR), V.real("G_Rz", G_Rz), V.positive("G_zz", G_zz))
