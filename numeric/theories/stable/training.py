"""Trained Stable ResNets on scikit-learn digits (Hayou et al. (2021), Stable ResNet, Table 3) and the covariance
NNGP's numerical blow-up with depth (Table 1), at a size that runs on two CPU cores.

Table 3 (trained networks)
    Fully connected ResNets of eq. (2), y_0 = W_0 x + B_0, y_l = y_{l-1} + lambda_{l,L} F_l(y_{l-1}), read out as
    logits = W_out phi(y_L) + B_out (one more layer of eq. 1's form), phi = ReLU, with the paper's initialisation
    W_l ~ N(0, sigma_w^2 / N_{l-1}), B_l ~ N(0, sigma_b^2) (section 2.1) and lambda_{l,L} from
    :func:`resprop.numeric.theories.stable.stable_resnet.parse_scaling` (``unscaled`` 1, ``uniform`` 1/sqrt(L),
    ``decreasing`` lambda_l^-1 = sqrt(l) log(l + 1)).  Two branches:

    * ``norm="none"``: F(y) = W phi(y) + B, the network the theory is about (eq. 2);
    * ``norm="batch"``: F(y) = BN(W phi(y)), batch normalisation without affine parameters after the linear map,
      lambda applied after it as in the paper's Table 3 ("after all convolution, ReLU and BatchNorm layers").
      Batch statistics are used in training and, at evaluation, the statistics of the evaluated set (here the
      whole test set in one batch; no running averages).

    Trained by SGD (momentum 0.9, weight decay 1e-4, He et al. 2016) with the paper's step schedule: learning
    rate 0.1, multiplied by 0.1 at 50% and 75% of training (section 7), cross-entropy loss, batch 64.
    Each seed draws its own train/test split, initialisation and batch order; the three scalings of one seed
    share the split, the batch order and the raw Gaussian weights (only lambda differs), so their difference
    isolates the scaling.  The paper uses convolutional ResNets of depth 32-104 on CIFAR and TinyImageNet;
    this is the fully connected analogue at depths 4-64 on 8x8 digits.

Table 1 (covariance NNGP on digits)
    The NNGP Q_L of eq. (5) for the three scalings from the generated kernel engine :func:`resprop.kernel`
    (ReLU, sigma_w^2 = 2, sigma_b^2 = 0, digits standardised onto the unit sphere as in section 7), and the
    posterior-predictive mean Q_N(.) (Q_NN + sigma^2 I)^-1 Y (eq. 10) with sigma^2 tuned on a validation set,
    evaluated in float32 (the precision of GPU kernel libraries such as neural-tangents) and float64.  For the
    unscaled network Lemma 1 gives Q_L(x, x) = (1 + sigma_w^2/2)^L Q_0(x, x) exactly (sigma_b = 0), so the
    kernel leaves float32 at L > log(f32max / Q_0)/log 2 = 133 and float64 at L > 1029 (Q_0 = 2/64); the scaled
    kernels stay O(1) (sum lambda^2 bounded).  Where the kernel is not finite the posterior mean is a numerical
    error (reported as such, accuracy NaN), which is Table 1's missing unscaled depth-202 entry.  A convolutional
    NNGP (the paper's Wide-ResNet) is left out: the CNN-GP of an 8x8 image needs the (64 P)^2 pixel-pair
    covariance per layer (1.5e9 entries at P = 600, ~12 GB in float64), beyond two cores; the fully connected
    kernel shows the same overflow mechanism (Lemma 1).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.validation import ParameterError

__all__ = ["SCALINGS", "NORMS", "Table3Config", "table3_config", "branch_scales", "init_params", "forward",
           "train_scalings", "table3", "nngp_table1", "overflow_depth", "digits_for_training"]

SCALINGS = ("unscaled", "uniform", "decreasing")
NORMS = ("none", "batch")
N_CLASSES = 10


def branch_scales(scaling: str, depth: int) -> np.ndarray:
    """lambda_{l,L}, l = 1..L, of the theory's scaling (``stable_resnet.parse_scaling``)."""
    from resprop.numeric.theories.stable import stable_resnet as sr

    depth = V.integer("depth", depth, minimum=1, maximum=sr.MAX_DEPTH)
    return sr.parse_scaling(scaling).lambdas(depth)


# --------------------------------------------------------------------------- data
def digits_for_training(seed: int, n_train: int, n_test: int) -> tuple[np.ndarray, ...]:
    """Random split of scikit-learn's bundled digits (no download): images standardised as in section 7
    (own mean removed, unit norm) and multiplied by sqrt(64) so that x.x/d = 1; returns X_tr, y_tr, X_te, y_te."""
    from resprop.numeric.theories.stable.experiments import load_digits_sphere

    X, lab = load_digits_sphere()
    n_train = V.integer("n_train", n_train, 10)
    n_test = V.integer("n_test", n_test, 10)
    if n_train + n_test > len(X):
        raise ParameterError("n_train, n_test", f"n_train + n_test must be <= {len(X)}")
    perm = np.random.default_rng(seed).permutation(len(X))
    tr, te = perm[:n_train], perm[n_train:n_train + n_test]
    X = X * math.sqrt(X.shape[1])
    return X[tr].astype(np.float32), lab[tr], X[te].astype(np.float32), lab[te]


# --------------------------------------------------------------------------- network (pure JAX)
def init_params(rng: np.random.Generator, d_in: int, width: int, depth: int, sigma_w2: float = 2.0,
                sigma_b2: float = 0.0, n_out: int = N_CLASSES) -> dict[str, np.ndarray]:
    """Section 2.1: W_l ~ N(0, sigma_w^2 / N_{l-1}), B_l ~ N(0, sigma_b^2) (float32 arrays; ``w``, ``b`` stack the
    L residual blocks)."""
    sw, sb = math.sqrt(sigma_w2), math.sqrt(sigma_b2)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    return {"w_in": normal(d_in, width) * np.float32(sw / math.sqrt(d_in)), "b_in": normal(width) * np.float32(sb),
            "w": normal(depth, width, width) * np.float32(sw / math.sqrt(width)),
            "b": normal(depth, width) * np.float32(sb),
            "w_out": normal(width, n_out) * np.float32(sw / math.sqrt(width)), "b_out": normal(n_out) * np.float32(sb)}


def _batchnorm(h, eps: float = 1e-5):
    import jax.numpy as jnp

    mu = jnp.mean(h, axis=0, keepdims=True)
    var = jnp.var(h, axis=0, keepdims=True)
    return (h - mu) / jnp.sqrt(var + eps)


def forward(params, lam, x, norm: str = "none"):
    """Logits of the ResNet (2) for a batch x (B, d): lambda ``lam`` (L,), ``norm`` as in the module docstring."""
    import jax

    y = x @ params["w_in"] + params["b_in"]

    def block(y, layer):
        w, b, la = layer
        h = jax.nn.relu(y) @ w
        h = _batchnorm(h) if norm == "batch" else h + b
        return y + la * h, None

    y, _ = jax.lax.scan(block, y, (params["w"], params["b"], lam))
    return jax.nn.relu(y) @ params["w_out"] + params["b_out"]


def _loss(params, lam, x, labels, norm):
    import jax.numpy as jnp
    import optax

    logits = forward(params, lam, x, norm)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


@lru_cache(maxsize=16)
def _trainer(norm: str, steps: int, epochs: int, lr: float, momentum: float, weight_decay: float):
    """A jitted function training a stack of networks (vmapped over the leading axis of params and lam)."""
    import jax
    import jax.numpy as jnp
    import optax

    schedule = optax.piecewise_constant_schedule(lr, {int(0.5 * steps): 0.1, int(0.75 * steps): 0.1})
    opt = optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(schedule, momentum=momentum))
    per_epoch = steps // epochs

    def train_one(params, lam, x_tr, y_tr, x_te, y_te, batches):
        state = opt.init(params)
        grad = jax.value_and_grad(_loss)

        def step(carry, idx):
            p, s = carry
            value, g = grad(p, lam, x_tr[idx], y_tr[idx], norm)
            upd, s = opt.update(g, s, p)
            return (optax.apply_updates(p, upd), s), value

        def epoch(carry, idx_epoch):
            carry, losses = jax.lax.scan(step, carry, idx_epoch)
            logits = forward(carry[0], lam, x_te, norm)
            acc = jnp.mean(jnp.argmax(logits, axis=1) == y_te)
            return carry, (losses, acc)

        (params, _), (losses, acc) = jax.lax.scan(epoch, (params, state),
                                                  batches.reshape(epochs, per_epoch, -1))
        return losses.reshape(-1), acc

    return jax.jit(jax.vmap(train_one, in_axes=(0, 0, None, None, None, None, None)))


@dataclass(frozen=True)
class Table3Config:
    """Sizes of the Table 3 experiment (``table3_config(quick)``)."""

    depths: tuple[int, ...]
    width: int
    epochs: int
    n_train: int
    n_test: int
    batch: int = 64
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    sigma_w2: float = 2.0
    sigma_b2: float = 0.0
    norms: tuple[str, ...] = NORMS


def table3_config(quick: bool) -> Table3Config:
    if quick:
        return Table3Config(depths=(4, 16, 64), width=64, epochs=8, n_train=1024, n_test=500)
    return Table3Config(depths=(4, 16, 64, 128), width=128, epochs=30, n_train=1280, n_test=517)


def train_scalings(depth: int, seed: int, cfg: Table3Config, norm: str = "none",
                   scalings: tuple[str, ...] = SCALINGS) -> dict[str, Any]:
    """Train one network per scaling (same split, raw weights and batch order) at ``depth``; returns per scaling
    the loss per step, the test accuracy after every epoch and whether training diverged (non-finite loss)."""
    import jax.numpy as jnp

    norm = V.choice("norm", norm, NORMS)
    x_tr, y_tr, x_te, y_te = digits_for_training(seed, cfg.n_train, cfg.n_test)
    rng = np.random.default_rng([seed, depth])
    raw = init_params(rng, x_tr.shape[1], cfg.width, depth, cfg.sigma_w2, cfg.sigma_b2)
    per_epoch = cfg.n_train // cfg.batch
    steps = per_epoch * cfg.epochs
    batches = np.concatenate([rng.permutation(cfg.n_train)[:per_epoch * cfg.batch] for _ in range(cfg.epochs)])
    batches = batches.reshape(steps, cfg.batch).astype(np.int32)
    S = len(scalings)
    params = {k: jnp.asarray(np.broadcast_to(v, (S,) + v.shape)) for k, v in raw.items()}
    lam = jnp.asarray(np.stack([branch_scales(sc, depth) for sc in scalings]).astype(np.float32))
    fn = _trainer(norm, steps, cfg.epochs, cfg.lr, cfg.momentum, cfg.weight_decay)
    losses, acc = fn(params, lam, jnp.asarray(x_tr), jnp.asarray(y_tr), jnp.asarray(x_te), jnp.asarray(y_te),
                     jnp.asarray(batches))
    losses, acc = np.asarray(losses, float), np.asarray(acc, float)
    return {sc: {"loss": losses[i], "test_accuracy": acc[i], "final_accuracy": float(acc[i, -1]),
                 "diverged": bool(not np.all(np.isfinite(losses[i])))} for i, sc in enumerate(scalings)}


@dataclass(frozen=True)
class Table3Result:
    config: Table3Config
    seeds: tuple[int, ...]
    #: accuracy[norm][scaling] -> (n_depths, n_seeds) final test accuracy
    accuracy: dict[str, dict[str, np.ndarray]]
    diverged: dict[str, dict[str, np.ndarray]]
    #: curves[norm][scaling][depth] -> (n_seeds, epochs) test accuracy per epoch, and loss per step
    curves: dict[str, dict[str, dict[int, np.ndarray]]]
    losses: dict[str, dict[str, dict[int, np.ndarray]]]
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def gap(self, norm: str, scaling: str) -> np.ndarray:
        """(n_depths, n_seeds) accuracy of ``scaling`` minus the unscaled network's, per seed."""
        return self.accuracy[norm][scaling] - self.accuracy[norm]["unscaled"]


def table3(quick: bool = True, seeds=(0, 1, 2), cfg: Table3Config | None = None) -> Table3Result:
    """Table 3's shape on digits: final test accuracy per norm, scaling, depth and seed (see module docstring)."""
    cfg = table3_config(quick) if cfg is None else cfg
    seeds = tuple(V.integer("seeds", s, 0) for s in seeds)
    t0 = time.perf_counter()
    acc: dict[str, dict[str, np.ndarray]] = {}
    div: dict[str, dict[str, np.ndarray]] = {}
    curves: dict[str, dict[str, dict[int, np.ndarray]]] = {}
    losses: dict[str, dict[str, dict[int, np.ndarray]]] = {}
    for norm in cfg.norms:
        acc[norm] = {sc: np.empty((len(cfg.depths), len(seeds))) for sc in SCALINGS}
        div[norm] = {sc: np.zeros((len(cfg.depths), len(seeds)), bool) for sc in SCALINGS}
        curves[norm] = {sc: {} for sc in SCALINGS}
        losses[norm] = {sc: {} for sc in SCALINGS}
        for i, L in enumerate(cfg.depths):
            runs = [train_scalings(L, s, cfg, norm) for s in seeds]
            for sc in SCALINGS:
                for k, r in enumerate(runs):
                    acc[norm][sc][i, k] = r[sc]["final_accuracy"]
                    div[norm][sc][i, k] = r[sc]["diverged"]
                curves[norm][sc][L] = np.stack([r[sc]["test_accuracy"] for r in runs])
                losses[norm][sc][L] = np.stack([r[sc]["loss"] for r in runs])
    return Table3Result(cfg, seeds, acc, div, curves, losses, time.perf_counter() - t0)


# --------------------------------------------------------------------------- Table 1: covariance NNGP
def overflow_depth(dtype, sigma_w2: float = 2.0, q0: float = 2.0 / 64) -> int:
    """First depth at which the unscaled NNGP diagonal q0 (1 + sigma_w^2/2)^L (Lemma 1, sigma_b = 0) is not finite
    in ``dtype`` (the product taken in that dtype, layer by layer, as a kernel library would)."""
    dt = np.dtype(dtype).type
    gain, q = dt(1 + sigma_w2 / 2), dt(q0)
    with np.errstate(over="ignore"):
        for L in range(1, 100_000):
            q = dt(q * gain)
            if not np.isfinite(q):
                return L
    raise ParameterError("sigma_w2", "no overflow below depth 100000")


def _posterior_accuracy(K, n_train, n_val, y_train, lab_val, lab_test, grid, dtype):
    """Eq. (10) posterior mean in ``dtype`` with sigma^2 chosen on the validation set: (test accuracy or NaN for a
    numerical error, chosen sigma^2, reason)."""
    import scipy.linalg as sla

    with np.errstate(all="ignore"):
        Kd = K.astype(dtype)
    if not np.all(np.isfinite(Kd)):
        return math.nan, math.nan, f"kernel not finite in {np.dtype(dtype).name}"
    Ktr = Kd[:n_train, :n_train]
    Kx = Kd[n_train:, :n_train]
    Y = (np.eye(N_CLASSES)[y_train] - 0.1).astype(dtype)
    best = (-1.0, math.nan, math.nan)
    failures = 0
    for s2 in grid:
        A = Ktr + dtype(s2) * np.eye(n_train, dtype=dtype)
        try:
            with np.errstate(all="ignore"):
                c = sla.cho_factor(A, check_finite=True)
                pred = Kx @ sla.cho_solve(c, Y, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            failures += 1
            continue
        if not np.all(np.isfinite(pred)):
            failures += 1
            continue
        acc_va = float(np.mean(pred[:n_val].argmax(1) == lab_val))
        if acc_va >= best[0]:
            best = (acc_va, float(s2), float(np.mean(pred[n_val:].argmax(1) == lab_test)))
    if best[0] < 0:
        return math.nan, math.nan, f"Cholesky failed or non-finite for every sigma^2 in {np.dtype(dtype).name}"
    return best[2], best[1], "" if not failures else f"{failures} of {len(grid)} sigma^2 failed"


def nngp_table1(depths=(10, 100, 200, 1100), seeds=(0, 1, 2), n_train: int = 300, n_val: int = 100,
                n_test: int = 200, sigma_w2: float = 2.0, sigma_b2: float = 0.0) -> dict[str, Any]:
    """Table 1 on digits: per scaling and depth, log10 of the largest NNGP entry, the float64 condition number of
    Q_NN (first split), and the posterior-mean test accuracy (mean and spread over the seeds' splits) in float32
    and float64; NaN marks a numerical error.  The kernel is computed once on a fixed pool of images
    (``resprop.kernel``, float64; a ParameterError there is float64 overflow) and the splits index into it."""
    from resprop.numeric.engine.kernel import kernel
    from resprop.numeric.theories.stable import stable_resnet as sr
    from resprop.numeric.theories.stable.experiments import _single_blas, load_digits_sphere

    X, lab = load_digits_sphere()
    pool = n_train + n_val + n_test
    idx = np.random.default_rng(12345).permutation(len(X))[:pool]
    Xp, labp = X[idx], lab[idx]
    grid = np.logspace(-6, 1, 15)
    out: dict[str, Any] = {"depths": list(depths), "seeds": list(seeds), "n_train": n_train, "n_val": n_val,
                           "n_test": n_test, "noise_grid": grid.tolist(), "rows": [],
                           "predicted_overflow_depth": {"float32": overflow_depth(np.float32, sigma_w2),
                                                        "float64": overflow_depth(np.float64, sigma_w2)}}
    t0 = time.perf_counter()
    for sc in SCALINGS:
        for L in depths:
            row: dict[str, Any] = {"scaling": sc, "depth": int(L)}
            try:
                K = kernel(Xp, "relu", int(L), sigma_w2, sigma_b2, branch_scale=sr.NAMED_SCALINGS[sc])
                row["log10_max"] = float(np.log10(np.max(np.abs(K))))
                row["float64_kernel"] = "finite"
            except ParameterError as err:
                K = None
                row["log10_max"] = math.nan
                row["float64_kernel"] = f"overflow ({err})"
            for dtype in (np.float32, np.float64):
                name = np.dtype(dtype).name
                accs, noises, notes = [], [], []
                for s in seeds:
                    perm = np.random.default_rng(s).permutation(pool)
                    tr, va, te = perm[:n_train], perm[n_train:n_train + n_val], perm[n_train + n_val:]
                    if K is None:
                        accs.append(math.nan)
                        noises.append(math.nan)
                        notes.append("kernel not finite in float64")
                        continue
                    order = np.concatenate([tr, va, te])
                    with _single_blas():  # threaded BLAS on small matrices oversubscribes two cores
                        a, s2, note = _posterior_accuracy(K[np.ix_(order, order)], n_train, n_val, labp[tr],
                                                          labp[va], labp[te], grid, dtype)
                    accs.append(a)
                    noises.append(s2)
                    notes.append(note)
                row[f"accuracy_{name}"] = accs
                row[f"noise_{name}"] = noises
                row[f"note_{name}"] = sorted(set(n for n in notes if n))
            if K is not None:
                perm = np.random.default_rng(seeds[0]).permutation(pool)[:n_train]
                with _single_blas():
                    row["cond_float64"] = float(np.linalg.cond(K[np.ix_(perm, perm)]))
            else:
                row["cond_float64"] = math.nan
            out["rows"].append(row)
    out["seconds"] = time.perf_counter() - t0
    return out
