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
from pathlib import Path
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
    from resprop.numeric.engine.blas_threads import one_blas_thread
    from resprop.numeric.engine.kernel import kernel
    from resprop.numeric.theories.stable import stable_resnet as sr
    from resprop.numeric.theories.stable.experiments import load_digits_sphere

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
                    with one_blas_thread():  # threaded BLAS on small matrices oversubscribes two cores
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
                with one_blas_thread():
                    row["cond_float64"] = float(np.linalg.cond(K[np.ix_(perm, perm)]))
            else:
                row["cond_float64"] = math.nan
            out["rows"].append(row)
    out["seconds"] = time.perf_counter() - t0
    return out


# --------------------------------------------------------------------------- the registered experiment
NAME = "stable-table3"


def table1_config(quick: bool) -> dict[str, Any]:
    if quick:
        return {"depths": (10, 100, 200, 1100), "n_train": 300, "n_val": 100, "n_test": 200}
    return {"depths": (10, 50, 100, 132, 133, 200, 500, 1028, 1029, 1100), "n_train": 800, "n_val": 200,
            "n_test": 797}


def _fmt(st: dict[str, float]) -> str:
    return f"{st['mean']:.4f} +- {st['sd']:.2g}"


def _table3_claims(res: Table3Result) -> tuple[dict[str, Any], list[dict]]:
    from resprop.numeric.report.claims import row
    from resprop.numeric.training.experiments import beyond_spread, seed_stats

    cfg, n = res.config, len(res.seeds)
    deep, shallow = cfg.depths[-1], cfg.depths[0]
    summary: dict[str, Any] = {}
    for norm in cfg.norms:
        for sc in SCALINGS:
            for i, L in enumerate(cfg.depths):
                summary[f"{norm}_{sc}_L{L}_test_accuracy"] = seed_stats(res.accuracy[norm][sc][i])
            summary[f"{norm}_{sc}_diverged_runs"] = int(res.diverged[norm][sc].sum())
    rows = []
    what = {"batch": "with BatchNorm in the branch (the paper's Table 3 setting)",
            "none": "without normalisation (the network of eq. 2, Prop. 1)"}
    for norm in cfg.norms:
        for sc in ("decreasing", "uniform"):
            gap = res.gap(norm, sc)
            growth = gap[-1] - gap[0]
            ok, st = beyond_spread(growth)
            rows.append(row(
                f"Table 3 shape, {what[norm]}: growth of the {sc}-minus-unscaled test accuracy gap from L = {shallow} "
                f"to L = {deep} (FC ResNets, digits, width {cfg.width})",
                "the stable scaling's advantage is larger for larger depths (C-100: +1.05 at depth 32, +2.36 at 104)",
                {f"gap L={L}": seed_stats(gap[i]) for i, L in enumerate(cfg.depths)},
                {"mean": st["mean"], "se": st["sd"] / math.sqrt(n), "method": f"{n} seeds, paired gap(L={deep}) - "
                                                                             f"gap(L={shallow})"},
                passed=ok, check="mean(growth) > 1 sd over seeds",
                note=f"unscaled runs diverged (non-finite loss): {int(res.diverged[norm]['unscaled'].sum())} of "
                     f"{res.diverged[norm]['unscaled'].size}; accuracy at L = {deep}: unscaled "
                     f"{_fmt(seed_stats(res.accuracy[norm]['unscaled'][-1]))}, {sc} "
                     f"{_fmt(seed_stats(res.accuracy[norm][sc][-1]))}"))
        ok, st = beyond_spread(res.accuracy[norm]["decreasing"][-1], res.accuracy[norm]["uniform"][-1])
        rows.append(row(
            f"Table 3, {what[norm]}: decreasing minus uniform test accuracy at L = {deep}",
            "decreasing scaling consistently outperforms uniform scaling",
            {"decreasing": seed_stats(res.accuracy[norm]["decreasing"][-1]),
             "uniform": seed_stats(res.accuracy[norm]["uniform"][-1])},
            {"mean": st["mean"], "se": st["sd"] / math.sqrt(n), "method": f"{n} seeds, paired"},
            passed=ok, check="mean(decreasing - uniform) > 1 sd over seeds"))
    return summary, rows


def _table1_claims(t1: dict[str, Any]) -> tuple[dict[str, Any], list[dict]]:
    from resprop.numeric.report.claims import row
    from resprop.numeric.training.experiments import seed_stats

    rows_by = {(r["scaling"], r["depth"]): r for r in t1["rows"]}
    depths = t1["depths"]
    L32 = t1["predicted_overflow_depth"]["float32"]
    L64 = t1["predicted_overflow_depth"]["float64"]
    summary: dict[str, Any] = {}
    for (sc, L), r in rows_by.items():
        for dt in ("float32", "float64"):
            a = np.asarray(r[f"accuracy_{dt}"], float)
            summary[f"{sc}_L{L}_{dt}_accuracy"] = seed_stats(a) if np.all(np.isfinite(a)) else "numerical error"
        summary[f"{sc}_L{L}_log10_max"] = r["log10_max"]
    out = []
    for dt, Lc in (("float32", L32), ("float64", L64)):
        fails = [L for L in depths if not np.all(np.isfinite(rows_by[("unscaled", L)][f"accuracy_{dt}"]))]
        ok = all((L >= Lc) == (L in fails) for L in depths)
        out.append(row(
            f"Table 1 on digits: depths at which the unscaled NNGP posterior mean is a numerical error in {dt} "
            f"(depths tried {list(depths)})",
            "the unscaled NNGP explodes with depth and gives numerical errors (WRN depth 202, Table 1)",
            {"numerical error at": fails},
            {"value": f"L >= {Lc}", "method": "Lemma 1: Q_L(x, x) = 2^L Q_0 first exceeds the largest "
                                              f"{dt} at L = {Lc} (Q_0 = 2/64)"},
            passed=ok, check="numerical error exactly at the tried depths >= Lemma 1's overflow depth"))
    deep, shallow = max(depths), min(depths)
    for sc in ("uniform", "decreasing"):
        a_deep = np.asarray(rows_by[(sc, deep)]["accuracy_float32"], float)
        a_sh = np.asarray(rows_by[(sc, shallow)]["accuracy_float32"], float)
        finite = all(np.all(np.isfinite(rows_by[(sc, L)]["accuracy_float32"])) for L in depths)
        logmax = max(rows_by[(sc, L)]["log10_max"] for L in depths)
        d = a_deep - a_sh
        st = seed_stats(d)
        ok = finite and logmax < 1 and abs(st["mean"]) <= max(2 * st["sd"], 0.01)
        out.append(row(
            f"Table 1 on digits: {sc} NNGP in float32, test accuracy at L = {deep} minus L = {shallow}",
            "Stable ResNet NNGPs stay finite and keep their accuracy at depth (Scaled (D), (U) at depth 202 = 112)",
            {f"L={shallow}": seed_stats(a_sh) if np.all(np.isfinite(a_sh)) else "numerical error",
             f"L={deep}": seed_stats(a_deep) if np.all(np.isfinite(a_deep)) else "numerical error",
             "log10 max Q over depths": logmax},
            {"mean": st["mean"], "se": st["sd"] / math.sqrt(max(d.size, 1)), "method": f"{d.size} splits, paired"},
            passed=ok, check="finite at every depth, max Q < 10, |mean difference| <= max(2 sd, 0.01)"))
    return summary, out


def _figures(res: Table3Result, t1: dict[str, Any], out) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"unscaled": "C3", "uniform": "C0", "decreasing": "C2"}
    cfg = res.config
    fig, axes = plt.subplots(2, len(cfg.norms), figsize=(5.2 * len(cfg.norms), 7.6), squeeze=False)
    for j, norm in enumerate(cfg.norms):
        ax = axes[0, j]
        for sc in SCALINGS:
            a = res.accuracy[norm][sc]
            ax.errorbar(cfg.depths, a.mean(1), a.std(1, ddof=1) if a.shape[1] > 1 else None, marker="o",
                        color=colours[sc], capsize=3, label=sc)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("depth L")
        ax.set_ylabel("final test accuracy")
        ax.set_title("BatchNorm branch" if norm == "batch" else "no normalisation (eq. 2)")
        ax.legend()
        ax = axes[1, j]
        L = cfg.depths[-1]
        for sc in SCALINGS:
            c = res.curves[norm][sc][L]
            ep = np.arange(1, c.shape[1] + 1)
            ax.plot(ep, c.mean(0), color=colours[sc], label=sc)
            ax.fill_between(ep, c.min(0), c.max(0), color=colours[sc], alpha=0.2)
        ax.axvline(cfg.epochs * 0.5, color="grey", lw=0.6, ls=":")
        ax.axvline(cfg.epochs * 0.75, color="grey", lw=0.6, ls=":")
        ax.set_xlabel("epoch (lr x0.1 at the dotted lines)")
        ax.set_ylabel(f"test accuracy, L = {L}")
    fig.suptitle(f"Hayou et al. Table 3 shape: FC ResNets (width {cfg.width}) on digits, SGD, "
                 f"{len(res.seeds)} seeds (bars: sd; bands: min-max)", fontsize=10)
    fig.tight_layout()
    p1 = Path(out) / f"{NAME}.png"
    fig.savefig(p1, dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.9))
    depths = t1["depths"]
    rows_by = {(r["scaling"], r["depth"]): r for r in t1["rows"]}
    for sc in SCALINGS:
        lm = [rows_by[(sc, L)]["log10_max"] for L in depths]
        pred = [math.log10(2.0 / 64) + L * math.log10(2.0) for L in depths] if sc == "unscaled" else None
        axes[0].plot(depths, lm, "o-", color=colours[sc], label=sc)
        if pred is not None:
            axes[0].plot(depths, pred, ":", color=colours[sc], label="Lemma 1: 2^L Q_0")
        for dt, mk in (("float32", "o"), ("float64", "s")):
            acc = [np.mean(rows_by[(sc, L)][f"accuracy_{dt}"]) for L in depths]
            axes[1].plot(depths, acc, mk + ("-" if dt == "float32" else "--"), color=colours[sc], mfc="none"
                         if dt == "float64" else None, label=f"{sc} {dt}")
            bad = [L for L, a in zip(depths, acc) if not np.isfinite(a)]
            axes[1].plot(bad, [0.0] * len(bad), "x", color=colours[sc], ms=9)
    for dt, ls in (("float32", "--"), ("float64", "-.")):
        axes[0].axhline(math.log10(float(np.finfo(dt).max)), color="k", lw=0.7, ls=ls, label=f"{dt} max")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("depth L")
    axes[0].set_ylabel("log10 max Q_L (NNGP, resprop.kernel)")
    axes[0].legend(fontsize=7)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("depth L")
    axes[1].set_ylabel("test accuracy (x: numerical error)")
    axes[1].legend(fontsize=6, ncol=2)
    fig.suptitle(f"Hayou et al. Table 1 on digits: covariance NNGP posterior mean, N = {t1['n_train']}",
                 fontsize=10, y=1.02)
    fig.tight_layout()
    p2 = Path(out) / f"{NAME}_nngp_table1.png"
    fig.savefig(p2, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [p1, p2]


def run(quick: bool, out, seeds: tuple[int, ...]):
    """The registered experiment: Table 3's shape (trained networks) and Table 1 (covariance NNGP)."""
    from resprop.numeric.training.experiments import ExperimentResult

    res = table3(quick, seeds)
    t1 = nngp_table1(seeds=seeds, **table1_config(quick))
    s3, rows3 = _table3_claims(res)
    s1, rows1 = _table1_claims(t1)
    figures = _figures(res, t1, out)
    cfg = res.config
    per_seed: dict[int, dict[str, Any]] = {}
    for k, s in enumerate(seeds):
        d: dict[str, Any] = {}
        for norm in cfg.norms:
            for sc in SCALINGS:
                d[f"{norm}_{sc}_final_accuracy"] = res.accuracy[norm][sc][:, k].tolist()
                d[f"{norm}_{sc}_accuracy_per_epoch"] = {str(L): res.curves[norm][sc][L][k].tolist()
                                                        for L in cfg.depths}
                d[f"{norm}_{sc}_loss_every_10_steps"] = {str(L): res.losses[norm][sc][L][k][::10].tolist()
                                                        for L in cfg.depths}
        d["table1"] = [{key: (r[key][k] if isinstance(r[key], list) and len(r[key]) == len(seeds) else r[key])
                        for key in r} for r in t1["rows"]]
        per_seed[int(s)] = d
    settings = {"table3": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
                "table1": {k: v for k, v in t1.items() if k not in ("rows",)}, "seconds_table3": res.seconds}
    return ExperimentResult(name=NAME, theory="stable", quick=quick, seeds=tuple(seeds), per_seed=per_seed,
                            summary={**s3, **s1}, figures=figures, claims=rows3 + rows1, settings=settings)


def _experiments() -> dict[str, Any]:
    from resprop.numeric.training.experiments import Experiment

    return {NAME: Experiment(
        name=NAME, theory="stable",
        title="Table 3 shape (trained unscaled / uniform / decreasing ResNets vs depth) and Table 1 (covariance "
              "NNGP blow-up)",
        run=run, seeds=(0, 1, 2),
        description="Fully connected ReLU ResNets of eq. (2) on the ten digit classes, SGD with the paper's step "
                    "schedule, with and without BatchNorm, depths 4-64 (quick); NNGP posterior mean with "
                    "resprop.kernel in float32 and float64 at depths up to 1100.")}


EXPERIMENTS = _experiments()
