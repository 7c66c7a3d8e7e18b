"""Predictive coding (PC) vs backprop (BP): Innocenti, Achour & Bogacz (2025), numerically.

Networks (eqs 7-12 and 95-98) of width N with L weight matrices (the paper's depth L: L - 1 hidden layers), input
dimension D and output dimension n_out, with trainable weights W^(l) ~ N(0, v N^{-b_l}) and layer maps
multiplied by fixed constants:

* ``mlp``:    z_1 = phi(N^{-a_1} W^(1) x / sqrt(D)),  z_l = phi(N^{-a} W^(l) z_{l-1}),  f = N^{-a} W^(L) z_{L-1}/gamma;
* ``resnet``: z_1 = N^{-a_1} W^(1) x / sqrt(D),  z_l = z_{l-1} + N^{-a} L^{-alpha} W^(l) phi(z_{l-1})
  (l = 2..L-1),  f = N^{-a} W^(L) z_{L-1}/gamma;

with gamma = gamma_0 N^d and (a_1, b_1, a, b, c, d) from Table 2 (``sp``, ``ntk``, ``mean_field``, ``mup``).
For linear phi the residual block is eq. 97.  The PC energy (eq. 2) of the data set (x_mu, y_mu) is
F = 1/(2P) sum_mu sum_l ||z_l - mu_l(z_{l-1})||^2 with z_0 = x, z_L = y clamped; the equilibrated
energy F* = F(z*) (eq. 3) is L(theta)/s(theta) for linear networks (eqs 5-6, 24-25, 104-105).

Routes to F* and its gradient, checked against each other in tests:

* ``equilibrated_energy(method="closed_form")``: the generated kernel L/s with s from the backward row
  products B_k = A_L ... A_{k+1} (derived in `derive/theories/predictive_coding.py`); for n_out > 1 the matrix
  form 1/(2P) sum r^T S^{-1} r;
* ``equilibrated_energy(method="solve")``: the hidden activities solved from the stationarity system of
  the stacked energy (a least-squares problem), independent of the closed form;
* ``inference_gd``: gradient descent on the activities (eq. 3), z <- z - beta dF_mu/dz per sample
  (the paper's beta on F with its 1/P is P times this beta), until the relative gradient is below ``gtol``.

PC weight gradients are dF/dW at the equilibrium (exact for linear networks, GD-inferred for tanh); BP
gradients are those of the MSE (eq. 1).  For linear networks with scalar output, the envelope theorem
makes the PC gradient equal to grad(L/s) = grad L/s - L grad s/s^2 (eq. 26); ``pc_bp_cosine_closed_form``
evaluates the generated law-of-cosines kernel from grad L and grad s (eq. 48/109 by a backward recursion).

Sampling s(theta) at initialisation uses an exact distributional reduction: each W^(l) is independent
of the row vector u_l = A_L ... A_{l+1} it multiplies, so u_l W =d ||u_l|| sigma g with g ~ N(0, I) and
only norms are needed: ||u||^2 picks up a factor c^2 sigma^2 chi^2_N per MLP layer and
(1 + c sigma g_1)^2 + c^2 sigma^2 chi^2_{N-1} per residual block (O(L) per sample at any N);
``method="dense"`` draws full weight matrices to validate it.

Depth convention (docs/api-renames.md): every public ``depth`` here is resprop's one depth, the number of layers
after the read-in z_1 (layer 0) and before the readout: ``depth = L - 2 >= 0``.  For ``resnet`` these are the
residual blocks l = 2..L-1 of eq. 18 / 97; for ``mlp`` (no skips) they are the hidden N x N layers l = 2..L-1
(the same count of N x N weight matrices W^(2..L-1); the read-in W^(1) and the readout W^(L) are not counted).
``depth = 0`` (L = 2) is read-in and readout only.  The paper's formulas are written in L (eqs. 6, 16, 19, 25,
104-107) and so is everything inside this module: ``L = depth + 2`` at the public boundary, ``PCNetwork.L``
is the number of weight matrices and ``PCNetwork.depth`` is L - 2.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import resprop.numeric.theories.abcd.generated.predictive_coding as gen
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError

__all__ = ["Parameterisation", "PARAMETERISATIONS", "ARCHITECTURES", "ACTIVATIONS", "PCNetwork", "init_network",
           "toy_task", "forward", "mse_loss", "energy", "rescaling_matrix", "s_theta", "rescaling_gradient",
           "equilibrium_linear", "equilibrated_energy", "InferenceResult", "inference_gd", "pc_weight_gradients",
           "bp_weight_gradients", "gradient_cosine", "pc_bp_cosine_closed_form", "sample_s_theta", "fit_power_law",
           "s_theta_sweep", "cosine_vs_width", "expected_s_minus_one", "relative_gradient_error", "train_linear",
           "cosine_vs_inference_step", "ClosedFormCosine", "PowerLawFit", "SThetaSweep", "CosineVsWidth",
           "TrainingRecord", "CosineVsInferenceStep"]

ARCHITECTURES = ("mlp", "resnet")
ACTIVATIONS = ("linear", "tanh")


@dataclass(frozen=True)
class Parameterisation:
    """Width exponents of Table 2: layer-1 (a_1, b_1), hidden and output (a, b), learning rate c, output d."""

    name: str
    a1: float
    b1: float
    a: float
    b: float
    c: float
    d: float
    alpha: float  # default depth exponent of residual branches for this parameterisation


PARAMETERISATIONS = {
    "sp": Parameterisation("sp", 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0),
    "ntk": Parameterisation("ntk", 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0),
    "mean_field": Parameterisation("mean_field", 0.0, 0.0, 0.5, 0.0, 0.0, 0.5, 0.5),
    "mup": Parameterisation("mup", -0.5, 1.0, 0.0, 1.0, 1.0, 0.5, 0.5),
}


@dataclass(frozen=True)
class PCNetwork:
    """Raw weights W^(l) (shape (..., n_l, n_{l-1}); leading axes batch independent networks) and layer constants."""

    weights: tuple[np.ndarray, ...]
    multipliers: tuple[float, ...]
    arch: str
    activation: str
    param: str
    width: int
    gamma0: float
    alpha: float

    @property
    def L(self) -> int:
        """The paper's L: the number of weight matrices (read-in, depth hidden/residual layers, readout)."""
        return len(self.weights)

    @property
    def depth(self) -> int:
        """resprop's depth: the hidden (mlp) or residual (resnet) layers between read-in and readout, L - 2."""
        return len(self.weights) - 2

    def kinds(self) -> list[str]:
        """Layer kinds: 'act' phi(cWz), 'linear' cWz, 'residual' z + cW phi(z)."""
        L = self.L
        if self.arch == "mlp":
            hidden = "linear" if self.activation == "linear" else "act"
            return [hidden] * (L - 1) + ["linear"]
        return ["linear"] + ["residual"] * (L - 2) + ["linear"]

    def with_weights(self, weights: Sequence[np.ndarray]) -> PCNetwork:
        return dataclasses.replace(self, weights=tuple(weights))


# --------------------------------------------------------------------------- validation helpers
def _param(name: str) -> Parameterisation:
    return PARAMETERISATIONS[V.choice("param", name, PARAMETERISATIONS)]


def _check_common(width, depth, gamma0, alpha, weight_variance):
    width = V.integer("width", width, 1)
    depth = V.integer("depth", depth, 0)
    gamma0 = float(V.positive("gamma0", gamma0))
    if alpha is not None:
        alpha = float(V.nonnegative("alpha", alpha))
    weight_variance = float(V.positive("weight_variance", weight_variance))
    return width, depth, gamma0, alpha, weight_variance


def _layer_constants(p: Parameterisation, arch: str, width: int, n_weights: int, d_in: int, gamma0: float,
                     alpha: float, weight_variance: float):
    """(multiplier, weight variance) of each of the ``n_weights`` = L layers (the branch scale is L^-alpha)."""
    N, L = float(width), float(n_weights)
    gamma = gamma0 * N**p.d
    mult = [N ** (-p.a1) / np.sqrt(d_in)]
    var = [weight_variance * N ** (-p.b1)]
    for _ in range(2, n_weights):
        mult.append(N ** (-p.a) * (L ** (-alpha) if arch == "resnet" else 1.0))
        var.append(weight_variance * N ** (-p.b))
    mult.append(N ** (-p.a) / gamma)
    var.append(weight_variance * N ** (-p.b))
    return mult, var


def init_network(width: int, depth: int, *, d_in: int = 40, d_out: int = 1, arch: str = "mlp",
                 param: str = "mean_field", activation: str = "linear", gamma0: float = 1.0,
                 alpha: float | None = None, weight_variance: float = 1.0, batch: tuple[int, ...] = (),
                 rng: np.random.Generator | None = None) -> PCNetwork:
    """Draw W^(l) ~ N(0, weight_variance N^{-b_l}) (eq. 12), l = 1..L with L = depth + 2.

    ``depth`` (>= 0): residual blocks (``resnet``) or hidden N x N layers (``mlp``) between the read-in W^(1) and
    the readout W^(L) (module docstring); the paper's L is depth + 2 (``init_network(N, L - 2)`` is the paper's
    depth-L network).  ``alpha`` (residual networks only) defaults to the parameterisation's: 1/2 for mean-field and muP
    (§4), 0 for SP and NTK (no depth scaling).  ``batch`` prepends axes of independent networks.
    """
    width, depth, gamma0, alpha, weight_variance = _check_common(width, depth, gamma0, alpha, weight_variance)
    d_in = V.integer("d_in", d_in, 1)
    d_out = V.integer("d_out", d_out, 1)
    arch = V.choice("arch", arch, ARCHITECTURES)
    activation = V.choice("activation", activation, ACTIVATIONS)
    p = _param(param)
    alpha = p.alpha if alpha is None else alpha
    batch = tuple(V.integer("batch", b, 1) for b in batch)
    rng = np.random.default_rng() if rng is None else rng
    L = depth + 2
    mult, var = _layer_constants(p, arch, width, L, d_in, gamma0, alpha, weight_variance)
    dims = [d_in] + [width] * (L - 1) + [d_out]
    weights = tuple(rng.standard_normal(batch + (dims[l + 1], dims[l])) * np.sqrt(var[l]) for l in range(L))
    return PCNetwork(weights, tuple(mult), arch, activation, p.name, width, gamma0, alpha)


def toy_task(n_samples: int = 20, d_in: int = 40, rng: np.random.Generator | None = None):
    """App. A.8: x ~ N(0, I_D) and labels y = +-1 (drawn uniformly, independently of x); shapes (D, P), (1, P)."""
    n_samples = V.integer("n_samples", n_samples, 1)
    d_in = V.integer("d_in", d_in, 1)
    rng = np.random.default_rng() if rng is None else rng
    x = rng.standard_normal((d_in, n_samples))
    y = rng.choice([-1.0, 1.0], size=(1, n_samples))
    return x, y


def _check_data(net: PCNetwork, x, y):
    x = V.real("x", x)
    y = V.real("y", y)
    d_in, d_out = net.weights[0].shape[-1], net.weights[-1].shape[-2]
    if x.ndim < 2 or x.shape[-2] != d_in:
        raise ParameterError("x", f"must have shape (..., {d_in}, P) (input dimension {d_in}), got {x.shape}")
    if y.ndim < 2 or y.shape[-2] != d_out or y.shape[-1] != x.shape[-1]:
        raise ParameterError("y", f"must have shape (..., {d_out}, P) with P = {x.shape[-1]}, got {y.shape}")
    return x, y


# --------------------------------------------------------------------------- layer primitives
def _T(a):
    return np.swapaxes(a, -1, -2)


def _phi(net, z):
    return np.tanh(z) if net.activation == "tanh" else z


def _dphi(net, z):
    return 1.0 - np.tanh(z) ** 2 if net.activation == "tanh" else np.ones_like(z)


def _predict(net, l, z_prev):
    """mu_l(z_{l-1}) for layer l = 1..L."""
    W, c, kind = net.weights[l - 1], net.multipliers[l - 1], net.kinds()[l - 1]
    if kind == "linear":
        return c * (W @ z_prev)
    if kind == "act":
        return _phi(net, c * (W @ z_prev))
    return z_prev + c * (W @ _phi(net, z_prev))


def _vjp_z(net, l, z_prev, v):
    """(d mu_l / d z_{l-1})^T v."""
    W, c, kind = net.weights[l - 1], net.multipliers[l - 1], net.kinds()[l - 1]
    if kind == "linear":
        return c * (_T(W) @ v)
    if kind == "act":
        return c * (_T(W) @ (_dphi(net, c * (W @ z_prev)) * v))
    return v + _dphi(net, z_prev) * (c * (_T(W) @ v))


def _jvp_z(net, l, z_prev, dz):
    """(d mu_l / d z_{l-1}) dz."""
    W, c, kind = net.weights[l - 1], net.multipliers[l - 1], net.kinds()[l - 1]
    if kind == "linear":
        return c * (W @ dz)
    if kind == "act":
        return _dphi(net, c * (W @ z_prev)) * (c * (W @ dz))
    return dz + c * (W @ (_dphi(net, z_prev) * dz))


def _vjp_w(net, l, z_prev, v):
    """d <v, mu_l(z_{l-1})> / d W^(l), summed over samples."""
    W, c, kind = net.weights[l - 1], net.multipliers[l - 1], net.kinds()[l - 1]
    if kind == "linear":
        return c * (v @ _T(z_prev))
    if kind == "act":
        return c * ((_dphi(net, c * (W @ z_prev)) * v) @ _T(z_prev))
    return c * (v @ _T(_phi(net, z_prev)))


def _right_mul(net, l, u):
    """u A_l for the linear layer map A_l (c W, or I + c W for a residual block); A_l z is `_predict`."""
    W, c, kind = net.weights[l - 1], net.multipliers[l - 1], net.kinds()[l - 1]
    return u + c * (u @ W) if kind == "residual" else c * (u @ W)


# --------------------------------------------------------------------------- energies and BP
def forward(net: PCNetwork, x) -> list[np.ndarray]:
    """Feed-forward activities [x, z_1, ..., z_{L-1}, f]."""
    zs = [np.asarray(x, float)]
    for l in range(1, net.L + 1):
        zs.append(_predict(net, l, zs[-1]))
    return zs


def mse_loss(net: PCNetwork, x, y) -> np.ndarray:
    """L(theta) = 1/(2P) sum_mu ||y_mu - f(x_mu)||^2 (eq. 1); shape = batch shape."""
    x, y = _check_data(net, x, y)
    f = forward(net, x)[-1]
    return 0.5 * np.sum((y - f) ** 2, axis=(-2, -1)) / x.shape[-1]


def _errors(net, x, y, hidden):
    zs = [x] + list(hidden) + [y]
    return zs, [zs[l] - _predict(net, l, zs[l - 1]) for l in range(1, net.L + 1)]


def energy(net: PCNetwork, x, y, hidden: Sequence[np.ndarray]) -> np.ndarray:
    """F(z, theta) of eq. 2 at hidden activities z_1..z_{L-1} (each (..., N, P))."""
    x, y = _check_data(net, x, y)
    if len(hidden) != net.L - 1:
        raise ParameterError("hidden", f"needs depth + 1 = {net.L - 1} activity arrays (z_1..z_(L-1)), "
                                       f"got {len(hidden)}")
    _, errs = _errors(net, x, y, hidden)
    return 0.5 * sum(np.sum(e**2, axis=(-2, -1)) for e in errs) / x.shape[-1]


def _activity_grad(net, zs, errs):
    """dF_mu/dz_l for l = 1..L-1 (per-sample energy, no 1/P)."""
    return [errs[l - 1] - _vjp_z(net, l + 1, zs[l], errs[l]) for l in range(1, net.L)]


def _energy_weight_grads(net, zs, errs, n_samples):
    return [-_vjp_w(net, l, zs[l - 1], errs[l - 1]) / n_samples for l in range(1, net.L + 1)]


def bp_weight_gradients(net: PCNetwork, x, y) -> list[np.ndarray]:
    """dL/dW^(l) of the MSE (eq. 1) by backpropagation."""
    x, y = _check_data(net, x, y)
    zs = forward(net, x)
    g = (zs[-1] - y) / x.shape[-1]
    grads: list[np.ndarray] = [np.empty(0)] * net.L  # every entry replaced below
    for l in range(net.L, 0, -1):
        grads[l - 1] = _vjp_w(net, l, zs[l - 1], g)
        g = _vjp_z(net, l, zs[l - 1], g)
    return grads


# --------------------------------------------------------------------------- closed forms (linear networks)
def _require_linear(net):
    if net.activation != "linear":
        raise ParameterError("activation", f"closed forms need a linear network, got activation {net.activation!r}")


def _backward_rows(net) -> list[np.ndarray]:
    """[B_1, ..., B_L] with B_k = A_L ... A_{k+1} (shape (..., n_out, n_k)), B_L = I."""
    _require_linear(net)
    W_out = net.weights[-1]
    eye = np.broadcast_to(np.eye(W_out.shape[-2]), W_out.shape[:-2] + (W_out.shape[-2],) * 2)
    rows = [eye]
    for l in range(net.L, 1, -1):
        rows.append(_right_mul(net, l, rows[-1]))
    return rows[::-1]


def rescaling_matrix(net: PCNetwork) -> np.ndarray:
    """S = I + sum_{k<L} B_k B_k^T, shape (..., n_out, n_out); s(theta) for scalar output (eqs 6, 25, 104)."""
    rows = _backward_rows(net)
    return sum(B @ _T(B) for B in rows)


def s_theta(net: PCNetwork) -> np.ndarray:
    """s(theta) = 1 + sum_{l=2}^{L} ||A_{L:l}||^2 with all scalings (eq. 25; eq. 104 for residual networks)."""
    if net.weights[-1].shape[-2] != 1:
        raise ParameterError("net", "s(theta) is a scalar only for scalar output (d_out = 1); use rescaling_matrix")
    return rescaling_matrix(net)[..., 0, 0]


def rescaling_gradient(net: PCNetwork) -> list[np.ndarray]:
    """ds/dW^(l) (eq. 48; eq. 109 for residual blocks): 2 c_l B_l^T m_l with m_{l+1} = m_l A_l^T + B_l, m_1 = 0."""
    if net.weights[-1].shape[-2] != 1:
        raise ParameterError("net", "ds/dW needs scalar output (d_out = 1)")
    rows = _backward_rows(net)
    grads, m = [], None
    for l in range(1, net.L + 1):
        W = net.weights[l - 1]
        if m is None:
            grads.append(np.zeros_like(W))
        else:
            grads.append(2 * net.multipliers[l - 1] * (_T(rows[l - 1]) @ m))
        # m_{l+1} = m_l A_l^T + B_l  (as a row: (A_l m_l^T)^T)
        mA = 0 if m is None else _T(_predict(net, l, _T(m)))
        m = rows[l - 1] + mA
    return grads


def equilibrium_linear(net: PCNetwork, x, y) -> list[np.ndarray]:
    """Exact equilibrium z*_1..z*_{L-1}: errors e_k* = B_k^T S^{-1} r, z_l = A_l z_{l-1} + e_l."""
    x, y = _check_data(net, x, y)
    rows = _backward_rows(net)
    S = sum(B @ _T(B) for B in rows)
    r = y - forward(net, x)[-1]
    lam = np.linalg.solve(S, r)
    z, hidden = x, []
    for l in range(1, net.L):
        z = _predict(net, l, z) + _T(rows[l - 1]) @ lam
        hidden.append(z)
    return hidden


def _stacked_system(net, x, y):
    """The energy as 1/2 ||D z - b||^2 per sample: D (..., L N_out_total, (L-1) N), b (..., rows, P)."""
    L, N = net.L, net.width
    n_rows = [N] * (L - 1) + [net.weights[-1].shape[-2]]
    batch = net.weights[0].shape[:-2]
    D = np.zeros(batch + (sum(n_rows), (L - 1) * N))
    off = np.cumsum([0] + n_rows)
    for l in range(1, L + 1):
        r0, r1 = off[l - 1], off[l]
        if l <= L - 1:
            D[..., r0:r1, (l - 1) * N:l * N] = np.eye(N)
        if l >= 2:
            A = _predict(net, l, np.broadcast_to(np.eye(N), batch + (N, N)))
            D[..., r0:r1, (l - 2) * N:(l - 1) * N] = -A
    P = x.shape[-1]
    b = np.zeros(np.broadcast_shapes(batch, x.shape[:-2], y.shape[:-2]) + (sum(n_rows), P))
    b[..., :N, :] = _predict(net, 1, x)
    b[..., off[L - 1]:, :] = -y
    return D, b


def equilibrated_energy(net: PCNetwork, x, y, method: str = "closed_form") -> np.ndarray:
    """F* = min_z F (eq. 3) for a linear network.

    ``closed_form``: generated kernel L/s (scalar output) or 1/(2P) sum r^T S^{-1} r.  ``solve``: the hidden
    activities from the normal equations of the stacked energy (dense, small networks), F evaluated there.
    """
    _require_linear(net)
    x, y = _check_data(net, x, y)
    method = V.choice("method", method, ("closed_form", "solve"))
    P = x.shape[-1]
    if method == "solve":
        D, b = _stacked_system(net, x, y)
        z = np.linalg.solve(_T(D) @ D, _T(D) @ b)
        N = net.width
        hidden = [z[..., k * N:(k + 1) * N, :] for k in range(net.L - 1)]
        return energy(net, x, y, hidden)
    if net.weights[-1].shape[-2] == 1:
        return gen.equilibrated_energy(mse_loss(net, x, y), s_theta(net))
    r = y - forward(net, x)[-1]
    return 0.5 * np.sum(r * np.linalg.solve(rescaling_matrix(net), r), axis=(-2, -1)) / P


# --------------------------------------------------------------------------- inference by gradient descent
@dataclass
class InferenceResult:
    hidden: list[np.ndarray]
    energy: np.ndarray
    iterations: int
    converged: bool
    rel_grad: float
    beta: float
    energy_trace: np.ndarray | None = None


def _max_curvature(net, x, n_iter: int = 60, seed: int = 0) -> float:
    """lambda_max of the Gauss-Newton Hessian of F_mu in z at the forward pass (power iteration, max over batch)."""
    zs = forward(net, x)
    rng = np.random.default_rng(seed)
    v = [rng.standard_normal(z.shape) for z in zs[1:-1]]
    lam = 1.0
    for _ in range(n_iter):
        nrm = np.sqrt(sum(np.sum(u**2, axis=(-2, -1)) for u in v))
        nrm = np.maximum(nrm, 1e-300)[..., None, None]
        v = [u / nrm for u in v]
        # J_e v: de_l = dz_l - J_l dz_{l-1}, dz_0 = 0, dz_L = 0
        dz = [np.zeros_like(zs[0])] + v + [np.zeros_like(zs[-1])]
        de = [dz[l] - (_jvp_z(net, l, zs[l - 1], dz[l - 1]) if l >= 2 else 0) for l in range(1, net.L + 1)]
        hv = [de[l - 1] - _vjp_z(net, l + 1, zs[l], de[l]) for l in range(1, net.L)]
        lam_b = sum(np.sum(a * b, axis=(-2, -1)) for a, b in zip(v, hv))
        lam = float(np.max(lam_b))
        v = hv
    return lam


def inference_gd(net: PCNetwork, x, y, *, beta: float | None = None, max_iter: int = 200_000, gtol: float = 1e-11,
                 hidden0: Sequence[np.ndarray] | None = None, record: bool = False) -> InferenceResult:
    """Gradient descent on the activities (eq. 3) from the feed-forward pass (or ``hidden0``).

    Per-sample steps z_l <- z_l - beta dF_mu/dz_l.  ``beta=None`` uses 1/lambda_max of the Gauss-Newton
    Hessian at the forward pass (exact Hessian for linear networks).  Stops when
    ||dF_mu/dz|| <= gtol ||e_mu|| for every sample (relative gradient), after ``max_iter`` updates, or on
    divergence (non-finite gradient).  ``iterations`` counts the updates made.
    """
    x, y = _check_data(net, x, y)
    max_iter = V.integer("max_iter", max_iter, 0)
    gtol = float(V.positive("gtol", gtol))
    if beta is None:
        beta = 1.0 / _max_curvature(net, x)
    beta = float(V.positive("beta", beta))
    if hidden0 is None:
        hidden = forward(net, x)[1:-1]
    else:
        if len(hidden0) != net.L - 1:
            raise ParameterError("hidden0", f"needs depth + 1 = {net.L - 1} arrays (z_1..z_(L-1)), "
                                            f"got {len(hidden0)}")
        hidden = [np.array(h, float) for h in hidden0]
    trace = []
    it = 0
    with np.errstate(over="ignore", invalid="ignore"):
        while True:
            zs, errs = _errors(net, x, y, hidden)
            grads = _activity_grad(net, zs, errs)
            g2 = sum(np.sum(g**2, axis=-2) for g in grads)
            e2 = sum(np.sum(e**2, axis=-2) for e in errs)
            rel = float(np.max(np.sqrt(g2 / np.maximum(e2, 1e-300))))
            if record:
                trace.append(0.5 * sum(np.sum(e**2, axis=(-2, -1)) for e in errs) / x.shape[-1])
            if rel <= gtol or not np.isfinite(rel) or it >= max_iter:
                break
            hidden = [h - beta * g for h, g in zip(hidden, grads)]
            it += 1
    converged = bool(rel <= gtol)
    return InferenceResult(hidden, energy(net, x, y, hidden), it, converged, rel, beta,
                           np.array(trace) if record else None)


# --------------------------------------------------------------------------- gradients and cosines
def pc_weight_gradients(net: PCNetwork, x, y, *, inference: str = "exact", **gd_kwargs):
    """dF/dW^(l) at the equilibrated activities: ``exact`` (linear networks) or ``gd`` (eq. 3 by GD).

    Returns (gradients, hidden activities, InferenceResult or None).
    """
    x, y = _check_data(net, x, y)
    inference = V.choice("inference", inference, ("exact", "gd"))
    info = None
    if inference == "exact":
        hidden = equilibrium_linear(net, x, y)
    else:
        info = inference_gd(net, x, y, **gd_kwargs)
        hidden = info.hidden
    zs, errs = _errors(net, x, y, hidden)
    return _energy_weight_grads(net, zs, errs, x.shape[-1]), hidden, info


def gradient_cosine(ga: Sequence[np.ndarray], gb: Sequence[np.ndarray]) -> np.ndarray:
    """Cosine similarity of two gradients over all weights (batch shape preserved)."""
    dot = sum(np.sum(a * b, axis=(-2, -1)) for a, b in zip(ga, gb))
    na = sum(np.sum(a * a, axis=(-2, -1)) for a in ga)
    nb = sum(np.sum(b * b, axis=(-2, -1)) for b in gb)
    return dot / np.sqrt(na * nb)


@dataclass(frozen=True)
class ClosedFormCosine(ResultRecord):
    """:func:`pc_bp_cosine_closed_form`: cos(PC, BP) and the quantities it is built from."""

    cosine: np.ndarray
    rho: np.ndarray
    theta: np.ndarray
    s: np.ndarray
    loss: np.ndarray


@dataclass(frozen=True)
class PowerLawFit(ResultRecord):
    """:func:`fit_power_law`: weighted log-log fit (slope, its SE, intercept, chi^2, degrees of freedom)."""

    slope: float
    slope_se: float
    intercept: float
    chi2: float
    dof: int


@dataclass(frozen=True)
class SThetaSweep(ResultRecord):
    """:func:`s_theta_sweep`: mean, SE and exact expectation of s - 1 on the (depth, width) grid, and the fits
    (None when the grid has too few points for them).  ``depths`` are resprop depths, ``L = depths + 2`` the
    paper's numbers of weight matrices; ``fit_depth*`` and ``fit_ratio*`` are exponents in L and L/N (eqs. 16, 19)."""

    widths: np.ndarray
    depths: np.ndarray
    L: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    theory: np.ndarray
    arch: str
    param: str
    fit_width: list[PowerLawFit] | None = None
    fit_width_theory: list[PowerLawFit] | None = None
    fit_depth: list[PowerLawFit] | None = None
    fit_depth_theory: list[PowerLawFit] | None = None
    fit_ratio: PowerLawFit | None = None
    fit_ratio_theory: PowerLawFit | None = None


@dataclass(frozen=True)
class CosineVsWidth(ResultRecord):
    """:func:`cosine_vs_width`: per width and seed cos(PC, BP), the relative gradient error, s and the inference
    iterations; means and SEs over seeds."""

    widths: np.ndarray
    cosine: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    rel_error: np.ndarray
    rel_error_mean: np.ndarray
    rel_error_se: np.ndarray
    s: np.ndarray
    iterations: np.ndarray
    depth: int
    arch: str
    param: str
    activation: str


@dataclass(frozen=True)
class TrainingRecord(ResultRecord):
    """:func:`train_linear`: the recorded steps' cos(PC, BP), relative error, loss, energy and s; the learning
    rate ``eta`` and the trained network ``net`` (not JSON data: ``to_dict`` leaves it as is)."""

    step: np.ndarray
    cosine: np.ndarray
    rel_error: np.ndarray
    loss: np.ndarray
    energy: np.ndarray
    s: np.ndarray
    eta: float
    net: PCNetwork


@dataclass(frozen=True)
class CosineVsInferenceStep(ResultRecord):
    """:func:`cosine_vs_inference_step`: cos(PC, BP) per (depth, beta, seed), its mean and SE over seeds."""

    depths: np.ndarray
    betas: np.ndarray
    cosine: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    width: int
    n_iter: int


def pc_bp_cosine_closed_form(net: PCNetwork, x, y) -> ClosedFormCosine:
    """cos(PC, BP) from eq. 26 via the generated kernel: rho = L ||grad s||/(s ||grad L||), theta = angle(grad L,
    grad s)."""
    g = bp_weight_gradients(net, x, y)
    gs = rescaling_gradient(net)
    loss, s = mse_loss(net, x, y), s_theta(net)
    ng = np.sqrt(sum(np.sum(a * a, axis=(-2, -1)) for a in g))
    ns = np.sqrt(sum(np.sum(a * a, axis=(-2, -1)) for a in gs))
    dot = sum(np.sum(a * b, axis=(-2, -1)) for a, b in zip(g, gs))
    rho = loss * ns / (s * ng)
    theta = np.arccos(np.clip(dot / np.maximum(ng * ns, 1e-300), -1.0, 1.0))
    return ClosedFormCosine(cosine=gen.pc_bp_cosine(rho, theta), rho=rho, theta=theta, s=s, loss=loss)


# --------------------------------------------------------------------------- s(theta) at initialisation
def expected_s_minus_one(width, depth, *, arch: str = "mlp", param: str = "mean_field", gamma0: float = 1.0,
                         alpha: float | None = None):
    """Exact E[s] - 1 at initialisation (generated kernels s_minus_one_mlp_init / s_minus_one_resnet_init).

    ``depth`` (>= 0, arrays allowed) counts the hidden/residual layers between read-in and readout; the kernels
    are the paper's eqs. 16, 45-47 (MLP: (L - 1)/(gamma_0^2 N^(2d))) and 104-107 (ResNet) in L = depth + 2.
    """
    arch = V.choice("arch", arch, ARCHITECTURES)
    p = _param(param)
    N = V.positive("width", width)
    depth = V.real("depth", depth)
    if (N < 1).any():
        raise ParameterError("width", f"must be >= 1, got {N.min():g}")
    if (depth < 0).any():
        raise ParameterError("depth", f"must be >= 0 (residual layers after the read-in; L = depth + 2), "
                                      f"got {depth.min():g}")
    L = depth + 2.0
    gamma0 = float(V.positive("gamma0", gamma0))
    alpha = p.alpha if alpha is None else float(V.nonnegative("alpha", alpha))
    if arch == "mlp":
        return gen.s_minus_one_mlp_init(L, N, gamma0, p.d)
    return gen.s_minus_one_resnet_init(L, N, gamma0, p.d, alpha)


def sample_s_theta(width: int, depth: int, n_samples: int, *, arch: str = "mlp", param: str = "mean_field",
                   gamma0: float = 1.0, alpha: float | None = None, weight_variance: float = 1.0,
                   method: str = "reduced", rng: np.random.Generator | None = None) -> np.ndarray:
    """n_samples independent draws of s(theta) at initialisation (``reduced``: exact O(L) law; ``dense``: full
    weights), for ``depth`` hidden/residual layers (L = depth + 2 weight matrices)."""
    width, depth, gamma0, alpha, weight_variance = _check_common(width, depth, gamma0, alpha, weight_variance)
    L = depth + 2
    n_samples = V.integer("n_samples", n_samples, 1)
    arch = V.choice("arch", arch, ARCHITECTURES)
    method = V.choice("method", method, ("reduced", "dense"))
    p = _param(param)
    alpha = p.alpha if alpha is None else alpha
    rng = np.random.default_rng() if rng is None else rng
    if method == "dense":
        out = np.empty(n_samples)
        chunk = max(1, int(2e7 // (L * width * width + 1)))
        for i in range(0, n_samples, chunk):
            k = min(chunk, n_samples - i)
            net = init_network(width, depth, d_in=1, arch=arch, param=param, gamma0=gamma0, alpha=alpha,
                               weight_variance=weight_variance, batch=(k,), rng=rng)
            out[i:i + k] = s_theta(net)
        return out
    mult, var = _layer_constants(p, arch, width, L, 1, gamma0, alpha, weight_variance)
    norm2 = mult[-1] ** 2 * var[-1] * rng.chisquare(width, n_samples)  # ||B_{L-1}||^2 = ||A_L||^2
    total = norm2.copy()
    for l in range(L - 1, 1, -1):  # B_{l-1} = B_l A_l, layers L-1..2
        cs2 = mult[l - 1] ** 2 * var[l - 1]
        if arch == "mlp":
            gain = cs2 * rng.chisquare(width, n_samples)
        else:
            g1 = rng.standard_normal(n_samples)
            rest = rng.chisquare(width - 1, n_samples) if width > 1 else 0.0
            gain = (1 + np.sqrt(cs2) * g1) ** 2 + cs2 * rest
        norm2 = norm2 * gain
        total += norm2
    return 1.0 + total


def fit_power_law(xs, means, ses) -> PowerLawFit:
    """Weighted least squares of log(mean) on log(x), weights (mean/se)^2: slope, its SE, intercept."""
    xs, means, ses = (np.asarray(v, float).ravel() for v in (xs, means, ses))
    if xs.size < 2:
        raise ParameterError("xs", "a power-law fit needs at least two points")
    if (means <= 0).any():
        raise ParameterError("means", "must be > 0 for a log-log fit")
    X = np.stack([np.ones_like(xs), np.log(xs)], axis=1)
    w = (means / np.maximum(ses, 1e-300)) ** 2
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    coef = cov @ X.T @ (w * np.log(means))
    resid = np.log(means) - X @ coef
    chi2 = float(np.sum(w * resid**2))
    return PowerLawFit(slope=float(coef[1]), slope_se=float(np.sqrt(cov[1, 1])), intercept=float(coef[0]),
                       chi2=chi2, dof=int(xs.size - 2))


def s_theta_sweep(widths: Sequence[int], depths: Sequence[int], *, arch: str = "mlp", param: str = "mean_field",
                  n_samples: int = 2000, seed: int = 0, gamma0: float = 1.0, alpha: float | None = None,
                  method: str = "reduced") -> SThetaSweep:
    """Mean and SE of s - 1 on a (depth, width) grid, exact expectations, and fitted log-log exponents.

    ``depths`` (>= 0) are resprop depths (hidden/residual layers); the fits use the paper's L = depth + 2.
    ``fit_width[i]``: exponent of s - 1 in N at depths[i] (Eq. 16 predicts -1 under mean-field, 0 under SP);
    ``fit_depth[j]``: exponent in L at widths[j]; ``fit_ratio``: pooled exponent in L/N (eq. 19); each with the
    same fit applied to the exact expectation (``*_theory``) for comparison.
    """
    widths = [V.integer("widths", w, 1) for w in widths]
    depths = [V.integer("depths", d, 0) for d in depths]
    Ls = [d + 2 for d in depths]
    seed = V.integer("seed", seed, 0)
    children = np.random.SeedSequence(seed).spawn(len(depths) * len(widths))
    mean = np.empty((len(depths), len(widths)))
    se = np.empty_like(mean)
    for i, dep in enumerate(depths):
        for j, N in enumerate(widths):
            rng = np.random.default_rng(children[i * len(widths) + j])
            sm1 = sample_s_theta(N, dep, n_samples, arch=arch, param=param, gamma0=gamma0, alpha=alpha,
                                 method=method, rng=rng) - 1.0
            mean[i, j], se[i, j] = sm1.mean(), sm1.std(ddof=1) / np.sqrt(n_samples)
    Ng, Lg = np.meshgrid(np.array(widths, float), np.array(Ls, float))
    theory = expected_s_minus_one(Ng, Lg - 2, arch=arch, param=param, gamma0=gamma0, alpha=alpha)
    out: dict = {}
    if len(widths) > 1:
        out["fit_width"] = [fit_power_law(widths, mean[i], se[i]) for i in range(len(depths))]
        out["fit_width_theory"] = [fit_power_law(widths, theory[i], se[i]) for i in range(len(depths))]
    if len(depths) > 1:
        out["fit_depth"] = [fit_power_law(Ls, mean[:, j], se[:, j]) for j in range(len(widths))]
        out["fit_depth_theory"] = [fit_power_law(Ls, theory[:, j], se[:, j]) for j in range(len(widths))]
    if mean.size > 1 and len(set((Lg / Ng).ravel())) > 1:
        out["fit_ratio"] = fit_power_law(Lg / Ng, mean, se)
        out["fit_ratio_theory"] = fit_power_law(Lg / Ng, theory, se)
    return SThetaSweep(widths=np.array(widths), depths=np.array(depths), L=np.array(Ls), mean=mean, se=se,
                       theory=theory, arch=arch, param=param, **out)


# --------------------------------------------------------------------------- cosine sweeps on the toy task
def _blas(threads: int | None):
    """Limit BLAS threads for loops of thin (N x N)(N x P) products, where threading costs more than it gains."""
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=V.integer("blas_threads", threads, 1), user_api="blas")


def relative_gradient_error(g_pc: Sequence[np.ndarray], g_bp: Sequence[np.ndarray]) -> np.ndarray:
    """||g_PC - g_BP|| / ||g_BP|| over all weights: zero iff PC computes the BP gradient (Corollaries 3.2, 4.2)."""
    num = sum(np.sum((a - b) ** 2, axis=(-2, -1)) for a, b in zip(g_pc, g_bp))
    den = sum(np.sum(b**2, axis=(-2, -1)) for b in g_bp)
    return np.sqrt(num / den)


def _mean_se(values: np.ndarray, axis: int = -1):
    n = values.shape[axis]
    se = values.std(axis=axis, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(np.delete(values.shape, axis))
    return values.mean(axis=axis), se


def cosine_vs_width(widths: Sequence[int], depth: int = 3, *, arch: str = "mlp", param: str = "mean_field",
                    activation: str = "linear", n_seeds: int = 5, seed: int = 0, n_samples: int = 20,
                    d_in: int = 40, gamma0: float = 1.0, alpha: float | None = None, inference: str | None = None,
                    blas_threads: int | None = 1, **gd_kwargs) -> CosineVsWidth:
    """cos(PC, BP) and ||g_PC - g_BP||/||g_BP|| at initialisation on the toy task of App. A.8, per width.

    ``depth`` (default 3: the paper's L = 5 of Fig. 2) counts hidden/residual layers, L = depth + 2.

    Each (width, seed) pair draws its own data set and weights from child k of SeedSequence(seed).
    ``inference`` defaults to ``exact`` for linear and ``gd`` for tanh networks (``gd_kwargs`` go to
    `inference_gd`; non-convergence raises).  Returns per-width mean and SE over seeds.
    """
    widths = [V.integer("widths", w, 1) for w in widths]
    n_seeds = V.integer("n_seeds", n_seeds, 1)
    seed = V.integer("seed", seed, 0)
    activation = V.choice("activation", activation, ACTIVATIONS)
    inference = inference or ("exact" if activation == "linear" else "gd")
    children = np.random.SeedSequence(seed).spawn(len(widths) * n_seeds)
    cos = np.empty((len(widths), n_seeds))
    err = np.empty_like(cos)
    s_vals = np.full_like(cos, np.nan)
    iters = np.zeros(cos.shape, int)
    with _blas(blas_threads):
        for j, N in enumerate(widths):
            for k in range(n_seeds):
                rng = np.random.default_rng(children[j * n_seeds + k])
                x, y = toy_task(n_samples, d_in, rng)
                net = init_network(N, depth, d_in=d_in, arch=arch, param=param, activation=activation,
                                   gamma0=gamma0, alpha=alpha, rng=rng)
                g_pc, _, info = pc_weight_gradients(net, x, y, inference=inference, **gd_kwargs)
                g_bp = bp_weight_gradients(net, x, y)
                cos[j, k] = gradient_cosine(g_pc, g_bp)
                err[j, k] = relative_gradient_error(g_pc, g_bp)
                if activation == "linear":
                    s_vals[j, k] = s_theta(net)
                if info is not None:
                    iters[j, k] = info.iterations
                    if not info.converged:
                        raise RuntimeError(f"inference did not converge (width {N}, seed {k}): relative gradient "
                                           f"{info.rel_grad:.3g} after {info.iterations} steps; raise max_iter")
    mean, se = _mean_se(cos)
    err_mean, err_se = _mean_se(err)
    return CosineVsWidth(widths=np.array(widths), cosine=cos, mean=mean, se=se, rel_error=err,
                         rel_error_mean=err_mean, rel_error_se=err_se, s=s_vals, iterations=iters, depth=depth,
                         arch=arch, param=param, activation=activation)


def train_linear(net: PCNetwork, x, y, *, steps: int = 200, eta0: float = 0.025, algorithm: str = "pc",
                 record_every: int = 10) -> TrainingRecord:
    """Full-batch GD on F* (``pc``, exact equilibrium) or on L (``bp``), eta = eta0 gamma^2 N^{-c} (eq. 14).

    Records, every ``record_every`` steps, cos(PC, BP), ||g_PC - g_BP||/||g_BP||, L, F* and s (Fig. 2).
    """
    _require_linear(net)
    x, y = _check_data(net, x, y)
    steps = V.integer("steps", steps, 0)
    eta0 = float(V.positive("eta0", eta0))
    algorithm = V.choice("algorithm", algorithm, ("pc", "bp"))
    record_every = V.integer("record_every", record_every, 1)
    p = PARAMETERISATIONS[net.param]
    eta = eta0 * (net.gamma0 * net.width**p.d) ** 2 * float(net.width) ** (-p.c)
    rec: dict[str, list[Any]] = {k: [] for k in ("step", "cosine", "rel_error", "loss", "energy", "s")}
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(steps + 1):
            g_pc, _, _ = pc_weight_gradients(net, x, y)
            g_bp = bp_weight_gradients(net, x, y)
            if t % record_every == 0 or t == steps:
                rec["step"].append(t)
                rec["cosine"].append(gradient_cosine(g_pc, g_bp))
                rec["rel_error"].append(relative_gradient_error(g_pc, g_bp))
                rec["loss"].append(mse_loss(net, x, y))
                rec["energy"].append(equilibrated_energy(net, x, y))
                rec["s"].append(s_theta(net))
            if t == steps:
                break
            g = g_pc if algorithm == "pc" else g_bp
            net = net.with_weights([W - eta * gw for W, gw in zip(net.weights, g)])
    return TrainingRecord(**{k: np.array(v) for k, v in rec.items()}, eta=eta, net=net)


def cosine_vs_inference_step(width: int, depths: Sequence[int], betas: Sequence[float], *, n_iter: int = 20,
                             arch: str = "resnet", param: str = "mean_field", activation: str = "tanh",
                             n_seeds: int = 3, seed: int = 0, n_samples: int = 20, d_in: int = 40,
                             gamma0: float = 1.0, blas_threads: int | None = 1) -> CosineVsInferenceStep:
    """Fig. 4: cos(PC, BP) after ``n_iter`` GD inference steps of size beta, for several depths at fixed width.

    ``depths`` (>= 0) count residual blocks (L = depth + 2; the paper's Fig. 4 L = 16 is depth 14).

    beta is per-sample (the paper's step on F = (1/P) sum F_mu is P beta).  Diverged inference gives NaN.
    """
    width = V.integer("width", width, 1)
    depths = [V.integer("depths", d, 0) for d in depths]
    betas = [float(V.positive("betas", b)) for b in betas]
    n_iter = V.integer("n_iter", n_iter, 0)
    n_seeds = V.integer("n_seeds", n_seeds, 1)
    children = np.random.SeedSequence(V.integer("seed", seed, 0)).spawn(len(depths) * n_seeds)
    cos = np.full((len(depths), len(betas), n_seeds), np.nan)
    with _blas(blas_threads):
        for i, dep in enumerate(depths):
            for k in range(n_seeds):
                rng = np.random.default_rng(children[i * n_seeds + k])
                x, y = toy_task(n_samples, d_in, rng)
                net = init_network(width, dep, d_in=d_in, arch=arch, param=param, activation=activation,
                                   gamma0=gamma0, rng=rng)
                g_bp = bp_weight_gradients(net, x, y)
                for j, b in enumerate(betas):
                    info = inference_gd(net, x, y, beta=b, max_iter=n_iter, gtol=1e-300)
                    zs, errs = _errors(net, x, y, info.hidden)
                    if all(np.isfinite(e).all() for e in errs):
                        cos[i, j, k] = gradient_cosine(_energy_weight_grads(net, zs, errs, n_samples), g_bp)
    mean = np.nanmean(cos, axis=-1)
    return CosineVsInferenceStep(
        depths=np.array(depths), betas=np.array(betas), cosine=cos, mean=mean,
        se=np.nanstd(cos, axis=-1, ddof=1) / np.sqrt(n_seeds) if n_seeds > 1 else np.zeros_like(mean),
        width=width, n_iter=n_iter)
