"""Generic training loops over explicit parameter pytrees (JAX + optax; the optional extra ``resprop[train]``).

A network is a plain function ``apply(params, x)`` of a pytree of arrays (dicts/lists of ``jax.Array``); the
loss a function ``loss(params, x, t) -> scalar``.  :func:`train` runs any ``optax.GradientTransformation``
(Adam, SGD, ...) for a number of epochs, full-batch or in shuffled minibatches, and records
``metrics(params) -> {name: scalar}`` every ``eval_every`` epochs (and at epoch 0, before training).
:func:`langevin` is the optax transformation of Langevin gradient descent (Naveh et al. (2021), Phys. Rev. E 104,
064301, as used by Fischer, Dahmen & Helias (2025), Sec. IV D): with learning rate ``lr``, temperature ``T`` and a
Gaussian prior of variance ``prior_var`` per parameter,

    theta <- theta - lr (grad loss(theta) + T theta / prior_var) + sqrt(2 lr T) xi,   xi ~ N(0, 1),

whose stationary law is the Bayesian posterior ``exp(-loss/T) N(0, prior_var)`` (in the limit of small ``lr``).

Precision and determinism: a loop trains in ``dtype`` (default float32, :data:`DTYPE`: about six times faster
than float64 on CPU; ``dtype="float64"`` runs inside ``jax.enable_x64(True)``), without changing JAX's global
configuration; estimators that need float64 (finite differences) convert the trained weights with
:func:`to_numpy`, which returns float64 numpy arrays.  Randomness (minibatch order, Langevin noise) flows only
from the integer ``seed`` through ``jax.random``; XLA on CPU is deterministic for a fixed thread count, so a run
is reproducible bit for bit on one machine (tests/test_training.py checks it).  Steps between two evaluations run
inside one ``jax.lax.scan`` (compiled once); a tqdm bar advances per evaluation.

Importing this module without JAX/optax raises :class:`resprop.numeric.training.TrainingExtraMissing` (the
engine's other modules do not need JAX).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from resprop.numeric.training import progress as _progress_default
from resprop.numeric.training import require_jax

__all__ = ["History", "train", "langevin", "DTYPE", "DTYPES", "to_numpy", "seed_key"]

#: the default floating-point type of a training run
DTYPE = "float32"
DTYPES = ("float32", "float64")

require_jax()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

Params = Any
Metrics = Callable[[Params], dict[str, Any]]


@dataclass
class History:
    """Metrics recorded during a run: ``epochs`` (the epochs at which they were measured, 0 = initialisation)
    and ``metrics[name]`` (one value per entry of ``epochs``)."""

    epochs: list[int] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)

    def record(self, epoch: int, values: dict[str, Any]) -> None:
        self.epochs.append(int(epoch))
        for k, v in values.items():
            self.metrics.setdefault(k, []).append(float(v))

    def to_dict(self) -> dict[str, Any]:
        return {"epochs": list(self.epochs), **{k: list(v) for k, v in self.metrics.items()}}

    def last(self, name: str) -> float:
        return self.metrics[name][-1]


def to_numpy(tree: Params) -> Params:
    """A pytree of JAX arrays (trained weights) as float64 numpy arrays, for the numpy estimators."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=np.float64), tree)


def langevin(lr: float, temperature: float, prior_var: float | Params) -> optax.GradientTransformationExtraArgs:
    """Langevin gradient descent as an optax transformation (see the module docstring).  ``prior_var``: one
    variance for every parameter, or a pytree matching the parameters (each leaf a scalar or an array).  The noise
    comes from the extra argument ``noise_key`` that :func:`train` passes at every step (drawn from its ``seed``),
    so one optimizer object serves every seed and its compiled loop is reused."""
    if not lr > 0 or not temperature >= 0:
        from resprop.numeric.engine.validation import ParameterError

        raise ParameterError("lr, temperature", f"need lr > 0 and temperature >= 0, got {lr}, {temperature}")
    scale = float(np.sqrt(2.0 * lr * temperature))

    def init(params):
        return optax.EmptyState()

    def update(grads, state, params=None, *, noise_key=None, **extra):
        if params is None or noise_key is None:
            raise ValueError("params, noise_key: langevin needs the parameters and a key (resprop's train passes both)")
        leaves, treedef = jax.tree_util.tree_flatten(grads)
        keys = jax.random.split(noise_key, len(leaves))
        noise = jax.tree_util.tree_unflatten(
            treedef, [jax.random.normal(k, g.shape, g.dtype) for k, g in zip(keys, leaves)])
        var = prior_var if isinstance(prior_var, dict | list | tuple) else jax.tree_util.tree_map(
            lambda _: prior_var, params)
        updates = jax.tree_util.tree_map(
            lambda g, p, v, xi: -lr * (g + temperature * p / v) + scale * xi, grads, params, var, noise)
        return updates, state

    return optax.GradientTransformationExtraArgs(init, update)


#: compiled loops by (loss, optimizer, metrics, batch_size, training-set size, dtype); a few are kept
_COMPILED: dict[tuple, tuple[Any, Any]] = {}
_COMPILED_MAX = 16


def _compiled(loss, optimizer, metrics, batch_size: int | None, n: int, dtype: str):
    key = (loss, optimizer, metrics, batch_size, n, dtype)
    if key in _COMPILED:
        return _COMPILED[key]
    grad = jax.grad(loss)
    opt = optax.with_extra_args_support(optimizer)

    def step(carry, batch):
        p, s = carry
        bx, bt, k = batch
        updates, s = opt.update(grad(p, bx, bt), s, p, noise_key=k)
        return (optax.apply_updates(p, updates), s), None

    def epoch_step(carry, inputs):
        key, xj, tj = inputs
        if batch_size is None:
            return step(carry, (xj, tj, key))
        nb = n // batch_size
        k_perm, k_noise = jax.random.split(key)
        perm = jax.random.permutation(k_perm, n)[: nb * batch_size].reshape(nb, batch_size)
        carry, _ = jax.lax.scan(step, carry, (xj[perm], tj[perm], jax.random.split(k_noise, nb)))
        return carry, None

    @jax.jit
    def run(carry, keys, xj, tj):
        carry, _ = jax.lax.scan(lambda c, k: epoch_step(c, (k, xj, tj)), carry, keys)
        return carry

    entry = (run, None if metrics is None else jax.jit(metrics))
    if len(_COMPILED) >= _COMPILED_MAX:
        _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = entry
    return entry


def seed_key(seed: int) -> jax.Array:
    """The raw ``jax.random`` key (uint32[2], threefry2x32) of an integer seed in [0, 2^63 - 1], from all 64 bits:
    ``[seed >> 32, seed & 0xFFFFFFFF]``.  This is ``jax.random.PRNGKey(seed)`` for seeds below 2^32 (so runs with
    small seeds are unchanged) and PRNGKey's own 64-bit form for larger ones, which PRNGKey itself truncates to
    the low 32 bits unless x64 is enabled: seeds that differ by 2^32 get different keys.  A bad seed (negative,
    >= 2^63, boolean, fractional) is a ParameterError naming ``seed``."""
    from resprop.numeric.training.experiments import check_seed

    seed = check_seed(seed)
    return jnp.asarray(np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32))


def train(params: Params, loss: Callable[[Params, Any, Any], Any], optimizer: optax.GradientTransformation,
          x: np.ndarray, t: np.ndarray, *, epochs: int, batch_size: int | None = None, seed: int = 0,
          metrics: Metrics | None = None, eval_every: int = 1, progress: bool | None = None,
          desc: str = "training", dtype: str = DTYPE) -> tuple[Params, History]:
    """Train ``params`` on ``(x, t)`` for ``epochs`` epochs; returns the final parameters and the history.

    ``batch_size`` None: one full-batch step per epoch; otherwise the training set is reshuffled every epoch
    (``jax.random`` from ``seed``) and split into ``len(x) // batch_size`` minibatches (the remainder of the
    shuffled order is left out of that epoch).  Every step passes ``noise_key`` (from ``seed``) to optimizers
    that take extra arguments (:func:`langevin`).  ``metrics(params)`` is called at epoch 0 and every
    ``eval_every`` epochs (and at the last one); it may return JAX or numpy scalars.  ``progress`` None: the
    package setting (:func:`resprop.numeric.training.set_progress`).  ``dtype``: "float32" or "float64" (the
    parameters, data and optimizer state; the returned parameters are JAX arrays of that type).  Pass the same
    ``loss``, ``optimizer`` and ``metrics`` objects for every seed: the compiled loop is then reused.
    """
    from resprop.numeric.engine.validation import ParameterError, integer
    from resprop.numeric.training.experiments import check_seed

    seed = check_seed(seed)
    epochs = integer("epochs", epochs, 0)
    eval_every = integer("eval_every", eval_every, 1)
    n = int(np.shape(x)[0])
    if batch_size is not None:
        batch_size = integer("batch_size", batch_size, 1)
        if batch_size > n:
            raise ParameterError("batch_size", f"must be <= the training set size {n}, got {batch_size}")
    if dtype not in DTYPES:
        raise ParameterError("dtype", f"must be one of {', '.join(DTYPES)}, got {dtype!r}")
    history = History()
    with jax.enable_x64(dtype == "float64"):
        ftype = jnp.float64 if dtype == "float64" else jnp.float32
        xj, tj = jnp.asarray(x, ftype), jnp.asarray(t, ftype)
        params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, ftype), params)
        state = optimizer.init(params)
        run, measure = _compiled(loss, optimizer, metrics, batch_size, n, dtype)
        keys = jax.random.split(seed_key(seed), max(epochs, 1))
        if measure is not None:
            history.record(0, measure(params))
        from tqdm.auto import tqdm

        done = 0
        show = _progress_default() if progress is None else progress
        with tqdm(total=epochs, desc=desc, disable=not show, leave=False) as bar:
            while done < epochs:
                chunk = min(eval_every, epochs - done)
                params, state = run((params, state), keys[done:done + chunk], xj, tj)
                done += chunk
                bar.update(chunk)
                if measure is not None:
                    history.record(done, measure(params))
        params = jax.block_until_ready(params)
    return params, history
