"""Predictive coding (PC) against backprop (BP) in trained residual networks on scikit-learn digits, under the abcd
parameterisations compared by Innocenti, Achour & Bogacz (2025), On the infinite width and depth limits of
predictive coding networks: Fig. 1 / A.5 (cos(PC, BP) of the weight gradients over training on a width x depth
grid, mean-field with alpha = 1/2), Fig. A.18 (SP: PC does not compute BP's gradient), Fig. A.17 right (PC and BP
training curves), Fig. 4 (nonlinear networks, GD inference with step beta).

Networks are those of :mod:`resprop.numeric.theories.abcd.predictive_coding` (eqs 7-12, 95-98), drawn by its
``init_network`` (so the weights, layer multipliers N^{-a_l} L^{-alpha} and gamma = gamma_0 N^d are the theory
module's) and then run as pure JAX functions of the weight list: z_1 = c_1 W^(1) x, z_l = z_{l-1} +
c W^(l) phi(z_{l-1}) (l = 2..L-1), f = c_L W^(L) z_{L-1} (gamma folded into c_L), columns are samples.

* BP: gradient of the MSE L = 1/(2P) sum ||y - f||^2 (eq. 1).
* PC: the energy F = 1/(2P) sum_l ||z_l - mu_l(z_{l-1})||^2 (eq. 2) with z_0 = x and z_L = y clamped; inference to
  equilibrium (eq. 3), then the weight update is dF/dW at the equilibrium (eq. 4).  For linear networks the
  equilibrium is exact (``inference="exact"``: e_k* = B_k^T S^-1 r, S = I + sum_{k<L} B_k B_k^T, B_k = A_L ... A_{k+1},
  the Lagrange solution derived in `derive/theories/predictive_coding.py`); ``inference="gd"`` runs T steps of
  z <- z - beta dF_mu/dz from the feed-forward pass (the paper's numerical inference, §5), for any activation.
* Training: plain gradient descent on mini-batches with eta = eta_0 gamma^2 N^-c (eq. 14), PC-trained networks
  updated with the PC gradient and BP-trained ones with the BP gradient from the same initialisation and batches;
  along the PC trajectory cos(g_PC, g_BP) of the concatenated weight gradients is recorded at every step.

Targets are one-hot (10 classes), inputs the digits standardised onto the unit sphere times sqrt(64).  The paper
trains with Adam on CIFAR-10 / Fashion-MNIST at widths up to 2048; here GD (the setting of its theory, §2.3)
on digits at widths 16-256.  ``pcx`` (the other maintained JAX PC library) requires jax < 0.5 and cannot be
installed next to this project's JAX; ``fabricpc`` (jax >= 0.7) can, and the tests use it, when installed, as an
independent check of the equilibrium and of the PC weight gradient.

Depth: ``depth`` (``make_network``, ``train_pairs``, ``PCConfig.depths``, ``fig4_config``) is resprop's one depth,
the number of residual blocks between the read-in and the readout; the paper's L (weight matrices) is depth + 2.
Claims, summary keys (``<param>_depth<d>_N<N>_...``) and figures name the depth and give L = depth + 2.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.validation import ParameterError

__all__ = ["PARAMS", "PCConfig", "pc_config", "make_network", "forward", "mse_loss", "energy", "equilibrium",
           "bp_gradients", "pc_gradients", "gradient_cosine", "train_pairs", "width_depth_grid", "digits_columns"]

#: the parameterisations compared (Table 2): standard, muP and mean-field (the paper's Figs 1 and 4 use mean-field
#: with alpha = 1/2; muP is the same limit with eta = Theta(1))
PARAMS = ("sp", "mean_field", "mup")
N_CLASSES = 10


# --------------------------------------------------------------------------- data
def digits_columns(seed: int, n_train: int, n_test: int) -> tuple[np.ndarray, ...]:
    """Random split of scikit-learn digits as columns: x (64, P) standardised to norm sqrt(64), y one-hot (10, P),
    and the test set (x, labels)."""
    from resprop.numeric.theories.stable.experiments import load_digits_sphere

    X, lab = load_digits_sphere()
    n_train = V.integer("n_train", n_train, 1)
    n_test = V.integer("n_test", n_test, 1)
    if n_train + n_test > len(X):
        raise ParameterError("n_train, n_test", f"n_train + n_test must be <= {len(X)}")
    perm = np.random.default_rng(seed).permutation(len(X))
    tr, te = perm[:n_train], perm[n_train:n_train + n_test]
    X = X * math.sqrt(X.shape[1])
    return X[tr].T.copy(), np.eye(N_CLASSES)[lab[tr]].T.copy(), X[te].T.copy(), lab[te]


# --------------------------------------------------------------------------- network
@dataclass(frozen=True)
class Network:
    """Weights (float64 NumPy arrays, run in float32), layer multipliers, kinds and activation of a network."""

    weights: tuple[np.ndarray, ...]
    multipliers: tuple[float, ...]
    kinds: tuple[str, ...]
    activation: str
    eta_scale: float  # gamma^2 N^-c of eq. 14
    param: str
    width: int


def make_network(width: int, depth: int, param: str, activation: str = "linear", seed: int = 0,
                 d_in: int = 64, d_out: int = N_CLASSES, gamma0: float = 1.0) -> Network:
    """A residual PC network from ``predictive_coding.init_network`` (arch resnet, alpha the parameterisation's)
    with ``depth`` (>= 0) residual blocks, L = depth + 2 weight matrices."""
    from resprop.numeric.theories.abcd import predictive_coding as pc

    depth = V.integer("depth", depth, 0)
    # the random stream is keyed by the paper's L = depth + 2 (as before the depth convention: same weights)
    net = pc.init_network(width, depth, d_in=d_in, d_out=d_out, arch="resnet", param=param, activation=activation,
                          gamma0=gamma0, rng=np.random.default_rng([seed, width, depth + 2]))
    p = pc.PARAMETERISATIONS[net.param]
    eta_scale = (gamma0 * width**p.d) ** 2 * float(width) ** (-p.c)
    return Network(tuple(np.asarray(w, float) for w in net.weights), tuple(float(c) for c in net.multipliers),
                   tuple(net.kinds()), activation, float(eta_scale), net.param, width)


def _phi(activation, z):
    import jax.numpy as jnp

    return jnp.tanh(z) if activation == "tanh" else z


def _predict(net: Network, weights, l: int, z_prev):
    """mu_l(z_{l-1}) for layer l = 1..L."""
    W, c, kind = weights[l - 1], net.multipliers[l - 1], net.kinds[l - 1]
    if kind == "residual":
        return z_prev + c * (W @ _phi(net.activation, z_prev))
    return c * (W @ z_prev)


def forward(net: Network, weights, x) -> list:
    """Feed-forward activities [x, z_1, ..., z_{L-1}, f]."""
    zs = [x]
    for l in range(1, len(weights) + 1):
        zs.append(_predict(net, weights, l, zs[-1]))
    return zs


def mse_loss(net: Network, weights, x, y):
    """Eq. 1: 1/(2P) sum_mu ||y_mu - f(x_mu)||^2."""
    import jax.numpy as jnp

    return 0.5 * jnp.sum((y - forward(net, weights, x)[-1]) ** 2) / x.shape[-1]


def energy(net: Network, weights, hidden, x, y):
    """Eq. 2: F = 1/(2P) sum_mu sum_l ||z_l - mu_l(z_{l-1})||^2 with z_0 = x, z_L = y."""
    import jax.numpy as jnp

    zs = [x, *hidden, y]
    return 0.5 * sum(jnp.sum((zs[l] - _predict(net, weights, l, zs[l - 1])) ** 2)
                     for l in range(1, len(weights) + 1)) / x.shape[-1]


def _equilibrium_exact(net: Network, weights, x, y):
    """Linear networks: z*_l = A_l z*_{l-1} + B_l^T S^-1 r (the Lagrange solution of the clamped energy)."""
    import jax.numpy as jnp

    if net.activation != "linear":
        raise ParameterError("inference", "the exact equilibrium needs a linear network; use inference='gd'")
    L = len(weights)
    rows = [jnp.eye(weights[-1].shape[0])]  # B_L = I, then B_{k-1} = B_k A_k
    for l in range(L, 1, -1):
        W, c, kind = weights[l - 1], net.multipliers[l - 1], net.kinds[l - 1]
        B = rows[-1]
        rows.append(B + c * (B @ W) if kind == "residual" else c * (B @ W))
    rows = rows[::-1]  # rows[k - 1] = B_k
    S = sum(B @ B.T for B in rows)
    r = y - forward(net, weights, x)[-1]
    lam = jnp.linalg.solve(S, r)
    z, hidden = x, []
    for l in range(1, L):
        z = _predict(net, weights, l, z) + rows[l - 1].T @ lam
        hidden.append(z)
    return hidden


def _equilibrium_gd(net: Network, weights, x, y, beta: float, steps: int):
    """``steps`` GD steps z <- z - beta dF_mu/dz (per sample: beta P dF/dz) from the feed-forward pass."""
    import jax

    hidden = forward(net, weights, x)[1:-1]
    grad = jax.grad(lambda h: energy(net, weights, h, x, y))
    P = x.shape[-1]

    def body(_, h):
        g = grad(h)
        return [hi - beta * P * gi for hi, gi in zip(h, g)]

    return jax.lax.fori_loop(0, steps, body, hidden)


def equilibrium(net: Network, weights, x, y, inference: str = "exact", beta: float = 0.1, steps: int = 100):
    """Hidden activities at (or after ``steps`` GD steps toward) the PC equilibrium (eq. 3)."""
    if inference == "exact":
        return _equilibrium_exact(net, weights, x, y)
    if inference == "gd":
        return _equilibrium_gd(net, weights, x, y, beta, steps)
    raise ParameterError("inference", f"must be 'exact' or 'gd', got {inference!r}")


def bp_gradients(net: Network, weights, x, y):
    import jax

    return jax.grad(lambda w: mse_loss(net, w, x, y))(weights)


def pc_gradients(net: Network, weights, x, y, inference: str = "exact", beta: float = 0.1, steps: int = 100):
    """dF/dW at the equilibrium activities (held fixed): the PC weight update direction (eq. 4)."""
    import jax

    hidden = [jax.lax.stop_gradient(h) for h in equilibrium(net, weights, x, y, inference, beta, steps)]
    return jax.grad(lambda w: energy(net, w, hidden, x, y))(weights)


def gradient_cosine(g1, g2):
    """cos of the angle between two gradients (lists of arrays), concatenated over all weights."""
    import jax.numpy as jnp

    dot = sum(jnp.sum(a * b) for a, b in zip(g1, g2))
    n1 = jnp.sqrt(sum(jnp.sum(a * a) for a in g1))
    n2 = jnp.sqrt(sum(jnp.sum(b * b) for b in g2))
    return dot / (n1 * n2)


# --------------------------------------------------------------------------- training
@dataclass(frozen=True)
class PCConfig:
    """Sizes of the experiment; ``depths`` are residual blocks (L = depth + 2 weight matrices)."""

    widths: tuple[int, ...]
    depths: tuple[int, ...]
    steps: int
    batch: int
    n_train: int
    n_test: int
    eta0: float = 0.025
    params: tuple[str, ...] = ("sp", "mean_field")


def pc_config(quick: bool) -> PCConfig:
    if quick:
        return PCConfig(widths=(8, 32, 128), depths=(2, 14), steps=40, batch=64, n_train=1024, n_test=500)  # L 4, 16
    return PCConfig(widths=(16, 32, 64, 128, 256), depths=(2, 6, 14, 30), steps=200, batch=64, n_train=1280,
                    n_test=517)


@lru_cache(maxsize=64)
def _pair_runner(kinds: tuple[str, ...], activation: str, inference: str, inf_steps: int):
    """A jitted function training PC and BP copies of a stack of networks (vmapped over the leading axis of the
    weights, multipliers, learning rates and data): same initialisation and batches for the two copies."""
    import jax
    import jax.numpy as jnp

    def run(weights, multipliers, eta, beta, x_tr, y_tr, x_te, lab_te, batches):
        net = Network((), multipliers, kinds, activation, 1.0, "", 0)

        def step(carry, idx):
            w_pc, w_bp = carry
            x, y = x_tr[:, idx], y_tr[:, idx]
            g_pc = pc_gradients(net, w_pc, x, y, inference, beta, inf_steps)
            g_bp_at_pc = bp_gradients(net, w_pc, x, y)
            g_bp = bp_gradients(net, w_bp, x, y)
            cos = gradient_cosine(g_pc, g_bp_at_pc)
            loss_pc = mse_loss(net, w_pc, x, y)
            loss_bp = mse_loss(net, w_bp, x, y)
            w_pc = [w - eta * g for w, g in zip(w_pc, g_pc)]
            w_bp = [w - eta * g for w, g in zip(w_bp, g_bp)]
            return (w_pc, w_bp), (cos, loss_pc, loss_bp)

        (w_pc, w_bp), (cos, loss_pc, loss_bp) = jax.lax.scan(step, (list(weights), list(weights)), batches)

        def acc(w):
            f = forward(net, w, x_te)[-1]
            return jnp.mean(jnp.argmax(f, axis=0) == lab_te)

        return (cos, loss_pc, loss_bp, acc(w_pc), acc(w_bp), mse_loss(net, w_pc, x_tr, y_tr),
                mse_loss(net, w_bp, x_tr, y_tr))

    return jax.jit(jax.vmap(run))


def _batches(seed: int, cfg: PCConfig) -> np.ndarray:
    rng = np.random.default_rng([seed, 7])
    per_epoch = cfg.n_train // cfg.batch
    order = np.concatenate([rng.permutation(cfg.n_train)[:per_epoch * cfg.batch]
                            for _ in range(-(-cfg.steps // per_epoch))])
    return order[:cfg.steps * cfg.batch].reshape(cfg.steps, cfg.batch).astype(np.int32)


def train_pairs(width: int, depth: int, params, seeds, cfg: PCConfig, activation: str = "linear",
                inference: str = "exact", betas=(0.1,), inf_steps: int = 100) -> dict[str, list[dict[str, Any]]]:
    """Train a PC and a BP copy of each (parameterisation, seed) initialisation at one (width, depth) (``depth``
    residual blocks, L = depth + 2 weight matrices), all in one vmapped call (see module docstring); returns per
    parameterisation a list over seeds of: per step cos(g_PC, g_BP) along the PC trajectory and both mini-batch
    losses, final test accuracies and full training-set MSE.  With several ``betas`` (GD inference step sizes, per
    sample) the keys are ``"<param>@beta=<beta>"``."""
    import jax.numpy as jnp

    params, seeds, betas = tuple(params), tuple(seeds), tuple(float(b) for b in betas)
    combos = [(p, b, s) for p in params for b in betas for s in seeds]
    nets = {(p, s): make_network(width, depth, p, activation, s) for p in params for s in seeds}
    data = {s: digits_columns(s, cfg.n_train, cfg.n_test) for s in seeds}
    f32 = jnp.float32
    weights = [jnp.asarray(np.stack([nets[(p, s)].weights[l] for p, _, s in combos]), f32)
               for l in range(len(nets[combos[0][0], combos[0][2]].weights))]
    mults = jnp.asarray(np.array([nets[(p, s)].multipliers for p, _, s in combos]), f32)
    etas = np.array([cfg.eta0 * nets[(p, s)].eta_scale for p, _, s in combos])
    stack = lambda i, dt: jnp.asarray(np.stack([data[s][i] for _, _, s in combos]), dt)  # noqa: E731
    batches = jnp.asarray(np.stack([_batches(s, cfg) for _, _, s in combos]))
    fn = _pair_runner(nets[combos[0][0], combos[0][2]].kinds, activation, inference, int(inf_steps))
    out = fn(weights, mults, jnp.asarray(etas, f32), jnp.asarray([b for _, b, _ in combos], f32), stack(0, f32),
             stack(1, f32), stack(2, f32), stack(3, jnp.int32), batches)
    cos, loss_pc, loss_bp, acc_pc, acc_bp, full_pc, full_bp = (np.asarray(o, float) for o in out)
    res: dict[str, list[dict[str, Any]]] = {}
    for i, (p, b, _seed) in enumerate(combos):
        key = p if len(betas) == 1 else f"{p}@beta={b:g}"
        res.setdefault(key, []).append({
            "cosine": cos[i], "loss_pc": loss_pc[i], "loss_bp": loss_bp[i], "accuracy_pc": float(acc_pc[i]),
            "accuracy_bp": float(acc_bp[i]), "train_mse_pc": float(full_pc[i]), "train_mse_bp": float(full_bp[i]),
            "eta": float(etas[i])})
    return res


@dataclass(frozen=True)
class GridResult:
    config: PCConfig
    seeds: tuple[int, ...]
    #: runs[param][(depth, width)] -> list over seeds of train_pair's dicts (depth: residual blocks, L - 2)
    runs: dict[str, dict[tuple[int, int], list[dict[str, Any]]]]
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def cosine(self, param: str, which: str = "mean_over_training") -> np.ndarray:
        """(n_depths, n_widths, n_seeds): cos(PC, BP) averaged over the training steps where it is finite (or at the
        first / last step)."""
        cfg = self.config
        out = np.empty((len(cfg.depths), len(cfg.widths), len(self.seeds)))
        for i, dep in enumerate(cfg.depths):
            for j, N in enumerate(cfg.widths):
                for k, r in enumerate(self.runs[param][(dep, N)]):
                    c = r["cosine"]
                    finite = c[np.isfinite(c)]  # a diverging run (SP at depth) is averaged over its finite steps
                    out[i, j, k] = {"mean_over_training": finite.mean() if finite.size else np.nan, "first": c[0],
                                    "last": c[-1]}[which]
        return out

    def final(self, param: str, key: str) -> np.ndarray:
        cfg = self.config
        return np.array([[[r[key] for r in self.runs[param][(dep, N)]] for N in cfg.widths] for dep in cfg.depths])


def width_depth_grid(quick: bool = True, seeds=(0, 1, 2), cfg: PCConfig | None = None) -> GridResult:
    """Fig. 1 / A.5 / A.18 on digits: PC and BP trained linear residual networks on the width x depth grid, per
    parameterisation and seed."""
    cfg = pc_config(quick) if cfg is None else cfg
    seeds = tuple(V.integer("seeds", s, 0) for s in seeds)
    t0 = time.perf_counter()
    runs: dict[str, dict[tuple[int, int], list[dict[str, Any]]]] = {p: {} for p in cfg.params}
    for dep in cfg.depths:
        for N in cfg.widths:
            for p, r in train_pairs(N, dep, cfg.params, seeds, cfg).items():
                runs[p][(dep, N)] = r
    return GridResult(cfg, seeds, runs, time.perf_counter() - t0)


def fig4_config(quick: bool) -> dict[str, Any]:
    """Fig. 4 sizes: the paper's N = 2048, L in {2, 16} (weight matrices), 20 inference steps; here depths 1 and 14
    (L = 3 and 16: L = 2, depth 0, has no tanh block); run in the full experiment only (GD inference costs 20
    forward-backward passes a step)."""
    if quick:
        return {"width": 32, "depths": (1, 14), "betas": (0.05, 0.4), "steps": 4, "inf_steps": 20}
    return {"width": 256, "depths": (1, 14), "betas": (0.05, 0.1, 0.2, 0.4), "steps": 30, "inf_steps": 20}


def inference_step_sweep(seeds, settings: dict[str, Any]) -> dict[str, Any]:
    """Fig. 4 on digits: tanh mean-field ResNets (alpha = 1/2) trained by PC with ``inf_steps`` GD inference steps of
    per-sample size beta; cos(g_PC, g_BP) along training, per depth and beta: ``cosine[depth][beta]`` is
    (n_seeds, steps)."""
    cfg = PCConfig(widths=(settings["width"],), depths=settings["depths"], steps=settings["steps"], batch=64,
                   n_train=1024, n_test=500)
    out: dict[str, Any] = {"settings": settings, "cosine": {}}
    for dep in settings["depths"]:
        r = train_pairs(settings["width"], dep, ("mean_field",), seeds, cfg, activation="tanh", inference="gd",
                        betas=settings["betas"], inf_steps=settings["inf_steps"])
        out["cosine"][dep] = {float(b): np.stack([x["cosine"] for x in r[f"mean_field@beta={float(b):g}"]])
                            for b in settings["betas"]}
    return out


# --------------------------------------------------------------------------- the registered experiment
NAME = "abcd-pc-bp"
_PRETTY = {"sp": "SP", "mean_field": "mean-field (alpha = 1/2)", "mup": "muP (alpha = 1/2)"}


def _claims(g: GridResult) -> tuple[dict[str, Any], list[dict]]:
    from resprop.numeric.report.claims import row
    from resprop.numeric.training.experiments import beyond_spread, seed_stats

    cfg, n = g.config, len(g.seeds)
    Nmin, Nmax, Dmin, Dmax = cfg.widths[0], cfg.widths[-1], cfg.depths[0], cfg.depths[-1]
    summary: dict[str, Any] = {}
    cos = {p: g.cosine(p) for p in cfg.params}
    for p in cfg.params:
        for i, dep in enumerate(cfg.depths):
            for j, N in enumerate(cfg.widths):
                summary[f"{p}_depth{dep}_N{N}_cosine_mean_over_training"] = seed_stats(cos[p][i, j])
                for key in ("train_mse_pc", "train_mse_bp", "accuracy_pc", "accuracy_bp"):
                    summary[f"{p}_depth{dep}_N{N}_{key}"] = seed_stats(g.final(p, key)[i, j])
    rows = []
    mf = cos["mean_field"]

    def grid_values(c):
        return {f"depth={dep}, N={N}": seed_stats(c[i, j]) for i, dep in enumerate(cfg.depths) for j, N in
                enumerate(cfg.widths)}

    for i, dep in enumerate(cfg.depths):
        ok, st = beyond_spread(mf[i, -1], mf[i, 0])
        rows.append(row(
            f"Fig. 1 on digits: cos(g_PC, g_BP) (mean over {cfg.steps} training steps), mean-field linear ResNet "
            f"depth {dep} (L = {dep + 2}): width {Nmax} minus width {Nmin}",
            "PC gradients converge to BP's as the width grows (N >> L, Corollary 4.2)",
            {f"N={N}": seed_stats(mf[i, j]) for j, N in enumerate(cfg.widths)},
            {"mean": st["mean"], "se": st["sd"] / math.sqrt(n), "method": f"{n} seeds, paired"},
            passed=ok, check="mean(cos(N_max) - cos(N_min)) > 1 sd over seeds"))
    ok, st = beyond_spread(mf[0, 0], mf[-1, 0])
    rows.append(row(
        f"Fig. 1 on digits: cos(g_PC, g_BP), mean-field, width {Nmin}: depth {Dmin} minus depth {Dmax} "
        f"(L = {Dmin + 2}, {Dmax + 2})",
        "the PC-BP agreement degrades as depth approaches width (s - 1 = Theta(L/N), eq. 19)",
        grid_values(mf), {"mean": st["mean"], "se": st["sd"] / math.sqrt(n), "method": f"{n} seeds, paired"},
        passed=ok, check="mean(cos(L_min) - cos(L_max)) > 1 sd over seeds"))
    st = seed_stats(mf[0, -1])
    rows.append(row(
        f"Fig. 1 on digits: cos(g_PC, g_BP), mean-field, N = {Nmax} >> L = {Dmin + 2} (depth {Dmin})",
        "PC computes (nearly) the BP gradient when N >> L",
        st, {"mean": st["mean"], "se": st["sd"] / math.sqrt(n), "method": f"{n} seeds"},
        passed=st["mean"] - st["sd"] > 0.99, check="mean - sd > 0.99"))
    if "sp" in cos:
        for i, dep in enumerate(cfg.depths):
            bad = sum(int(np.sum(~np.isfinite(r["cosine"]))) for r in g.runs["sp"][(dep, Nmax)])
            ok, st = beyond_spread(mf[i, -1], cos["sp"][i, -1])
            rows.append(row(
                f"Fig. A.18 on digits: cos(g_PC, g_BP) at N = {Nmax}, depth {dep} (L = {dep + 2}): mean-field minus SP",
                "under SP the PC gradients differ from BP's (no convergence with width)",
                {"mean-field": seed_stats(mf[i, -1]), "SP": seed_stats(cos["sp"][i, -1])},
                {"mean": st["mean"], "se": st["sd"] / math.sqrt(n), "method": f"{n} seeds, paired"},
                passed=ok, check="mean(cos_MF - cos_SP) > 1 sd over seeds",
                note=f"SP BP-trained runs (all widths) with a non-finite final MSE at depth {dep}: "
                     f"{int(np.sum(~np.isfinite(g.final('sp', 'train_mse_bp')[i])))} of "
                     f"{g.final('sp', 'train_mse_bp')[i].size}" + (
                         f"; SP PC training diverged: {bad} non-finite steps of {cfg.steps} x "
                         f"{n} seeds, averaged over the finite ones (no depth scaling: the residual stream's "
                         f"variance grows as 2^depth)" if bad else "")))
    rel = np.abs(g.final("mean_field", "train_mse_pc") - g.final("mean_field", "train_mse_bp")) / \
        g.final("mean_field", "train_mse_bp")
    for i, dep in enumerate(cfg.depths):
        ok, st = beyond_spread(rel[i, 0], rel[i, -1])
        rows.append(row(
            f"Fig. A.17 (right) on digits: |MSE_PC - MSE_BP| / MSE_BP after {cfg.steps} steps, mean-field, depth {dep} "
            f"(L = {dep + 2}): width {Nmin} minus width {Nmax}",
            "PC- and BP-trained networks follow the same training curve at large width",
            {f"N={N}": seed_stats(rel[i, j]) for j, N in enumerate(cfg.widths)},
            {"mean": st["mean"], "se": st["sd"] / math.sqrt(n), "method": f"{n} seeds, paired"},
            passed=ok, check="mean(rel(N_min) - rel(N_max)) > 1 sd over seeds"))
    return summary, rows


def _figures(g: GridResult, out) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = g.config
    params = [p for p in ("sp", "mean_field", "mup") if p in cfg.params]
    fig, axes = plt.subplots(1, len(params), figsize=(4.4 * len(params), 3.6), squeeze=False)
    for ax, p in zip(axes[0], params):
        c = g.cosine(p).mean(-1)
        im = ax.imshow(c, vmin=0, vmax=1, cmap="viridis", origin="lower", aspect="auto")
        for i in range(c.shape[0]):
            for j in range(c.shape[1]):
                ax.text(j, i, f"{c[i, j]:.3f}", ha="center", va="center", fontsize=7,
                        color="w" if c[i, j] < 0.6 else "k")
        ax.set_xticks(range(len(cfg.widths)), [str(N) for N in cfg.widths])
        ax.set_yticks(range(len(cfg.depths)), [f"{dep} (L = {dep + 2})" for dep in cfg.depths])
        ax.set_xlabel("width N")
        ax.set_ylabel("depth (residual blocks; L = depth + 2)")
        ax.set_title(_PRETTY[p], fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="cos(g_PC, g_BP), mean over training")
    fig.suptitle(f"Innocenti et al. Fig. 1 on digits: linear ResNets, PC (exact equilibrium) vs BP, {cfg.steps} GD "
                 f"steps, {len(g.seeds)} seeds", fontsize=9)
    p1 = Path(out) / f"{NAME}.png"
    fig.savefig(p1, dpi=110, bbox_inches="tight")
    plt.close(fig)

    fig, axes = plt.subplots(2, len(cfg.depths), figsize=(4.6 * len(cfg.depths), 6.6), squeeze=False)
    steps = np.arange(cfg.steps)
    for i, dep in enumerate(cfg.depths):
        for j, N in enumerate(cfg.widths):
            col = plt.cm.viridis(j / max(1, len(cfg.widths) - 1))
            for p, ls in (("mean_field", "-"), ("sp", ":")):
                if p not in cfg.params:
                    continue
                c = np.stack([r["cosine"] for r in g.runs[p][(dep, N)]])
                axes[0, i].plot(steps, c.mean(0), ls, color=col, label=f"{_PRETTY[p].split(' ')[0]} N={N}")
            runs = g.runs["mean_field"][(dep, N)]
            axes[1, i].plot(steps, np.mean([r["loss_pc"] for r in runs], 0), "-", color=col, label=f"PC N={N}")
            axes[1, i].plot(steps, np.mean([r["loss_bp"] for r in runs], 0), "--", color=col, label=f"BP N={N}")
        axes[0, i].set_title(f"depth {dep} (L = {dep + 2})", fontsize=9)
        axes[0, i].set_ylabel("cos(g_PC, g_BP)")
        axes[0, i].set_ylim(-0.05, 1.02)
        axes[1, i].set_ylabel("mini-batch MSE (mean-field)")
        axes[1, i].set_xlabel("training step t")
        axes[0, i].legend(fontsize=6, ncol=2)
        axes[1, i].legend(fontsize=6, ncol=2)
    fig.suptitle("Cosine along the PC trajectory (solid mean-field, dotted SP) and PC vs BP training curves",
                 fontsize=9)
    fig.tight_layout()
    p2 = Path(out) / f"{NAME}_curves.png"
    fig.savefig(p2, dpi=110)
    plt.close(fig)
    return [p1, p2]


def _fig4_claims(f4: dict[str, Any]) -> list[dict]:
    from resprop.numeric.report.claims import row
    from resprop.numeric.training.experiments import beyond_spread, seed_stats

    st_ = f4["settings"]
    D_sh, D_dp = st_["depths"][0], st_["depths"][-1]  # depths (residual blocks), L = depth + 2
    b_lo, b_hi = float(st_["betas"][0]), float(st_["betas"][-1])
    c = {L: {b: v.mean(axis=1) for b, v in d.items()} for L, d in f4["cosine"].items()}  # mean over training
    n = len(next(iter(c[D_sh].values())))
    ok1, d1 = beyond_spread(c[D_sh][b_lo], c[D_dp][b_lo])
    ok2, d2 = beyond_spread(c[D_dp][b_hi], c[D_dp][b_lo])
    common = f"tanh mean-field ResNets, N = {st_['width']}, {st_['inf_steps']} GD inference steps"
    return [
        row(f"Fig. 4 on digits: cos(g_PC, g_BP) at beta = {b_lo:g}, depth {D_sh} minus depth {D_dp} ({common})",
            "deeper PCNs need larger activity step sizes beta for PC and BP gradients to align",
            {f"depth={dep}, beta={b:g}": seed_stats(v) for dep, d in c.items() for b, v in d.items()},
            {"mean": d1["mean"], "se": d1["sd"] / math.sqrt(n), "method": f"{n} seeds, paired"},
            passed=ok1, check="mean difference > 1 sd over seeds"),
        row(f"Fig. 4 on digits: cos(g_PC, g_BP) at depth {D_dp}, beta = {b_hi:g} minus beta = {b_lo:g} ({common})",
            "with a large enough beta the gradients align again at depth (as long as an equilibrium is reached)",
            {f"beta={b:g}": seed_stats(v) for b, v in c[D_dp].items()},
            {"mean": d2["mean"], "se": d2["sd"] / math.sqrt(n), "method": f"{n} seeds, paired"},
            passed=ok2 and float(np.mean(c[D_dp][b_hi])) > 0.9,
            check="mean difference > 1 sd over seeds and cos at the largest beta > 0.9",
            note=f"cos at depth {D_dp}, beta = {b_hi:g}: {float(np.mean(c[D_dp][b_hi])):.3f}; per-sample GD on the "
                 f"activities is unstable above beta = 2/lambda_max = 0.45 (Gauss-Newton lambda_max = 4.4-4.6 at "
                 f"initialisation, predictive_coding._max_curvature), and {st_['inf_steps']} steps carry the "
                 f"output error only part of the way down {D_dp + 2} layers"),
    ]


def _fig4_figure(f4: dict[str, Any], out) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    st_ = f4["settings"]
    fig, axes = plt.subplots(1, len(st_["depths"]), figsize=(4.6 * len(st_["depths"]), 3.5), squeeze=False)
    for ax, dep in zip(axes[0], st_["depths"]):
        for k, (b, v) in enumerate(f4["cosine"][dep].items()):
            t = np.arange(v.shape[1])
            ax.plot(t, v.mean(0), color=plt.cm.plasma(k / max(1, len(st_["betas"]) - 1)), label=f"beta = {b:g}")
        ax.set_ylim(-0.05, 1.02)
        ax.set_xlabel("training step t")
        ax.set_ylabel("cos(g_PC, g_BP)")
        ax.set_title(f"depth {dep} (L = {dep + 2})", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(f"Innocenti et al. Fig. 4 on digits: tanh mean-field ResNets, N = {st_['width']}, "
                 f"{st_['inf_steps']} GD inference steps", fontsize=9)
    fig.tight_layout()
    path = Path(out) / f"{NAME}_fig4.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(quick: bool, out, seeds: tuple[int, ...]):
    """The registered experiment (module docstring): the width x depth grid, claims and figures."""
    from resprop.numeric.training.experiments import ExperimentResult

    g = width_depth_grid(quick, seeds)
    summary, rows = _claims(g)
    figures = _figures(g, out)
    cfg = g.config
    per_seed: dict[int, dict[str, Any]] = {}
    for k, s in enumerate(g.seeds):
        per_seed[int(s)] = {f"{p}_depth{dep}_N{N}": {key: (v.tolist() if isinstance(v, np.ndarray) else v)
                                                     for key, v in g.runs[p][(dep, N)][k].items()}
                            for p in cfg.params for dep in cfg.depths for N in cfg.widths}
    settings: dict[str, Any] = {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}
    settings["inference"] = "exact equilibrium (linear networks)"
    if not quick:  # Fig. 4 (GD inference on tanh networks): full size only, see fig4_config
        f4 = inference_step_sweep(g.seeds, fig4_config(False))
        rows += _fig4_claims(f4)
        figures.append(_fig4_figure(f4, out))
        settings["fig4"] = f4["settings"]
        for k, s in enumerate(g.seeds):
            per_seed[int(s)]["fig4_cosine"] = {f"depth={dep}, beta={b:g}": v[k].tolist()
                                               for dep, d in f4["cosine"].items() for b, v in d.items()}
    return ExperimentResult(name=NAME, theory="abcd", quick=quick, seeds=tuple(seeds), per_seed=per_seed,
                            summary=summary, figures=figures, claims=rows, settings=settings)


def _experiments() -> dict[str, Any]:
    from resprop.numeric.training.experiments import Experiment

    return {NAME: Experiment(
        name=NAME, theory="abcd",
        title="Figs 1, A.17, A.18: PC (equilibrated energy) vs BP in trained linear ResNets, SP vs mean-field, "
              "width x depth",
        run=run, seeds=(0, 1, 2),
        description="Linear residual networks (eqs 95-98) on the ten digit classes with MSE, trained by GD with "
                    "eta = eta_0 gamma^2 N^-c; cos(g_PC, g_BP) at every step and PC/BP training curves.")}


EXPERIMENTS = _experiments()
