"""Li, Nica & Roy (2021), App. C.1 and Fig. 6: vanilla vs balanced fully connected ResNets trained with Adam.

Network: eq. (1) of the paper (and of :mod:`resprop.numeric.engine.monte_carlo`'s dense path) with a read-in and a
linear read-out to the classes, ``alpha = lam = 1/sqrt(2)``::

    z^0 = W^0 x / sqrt(d_in),   z^l = alpha z^{l-1} + lam sqrt(2/n) W^l phi_l(z^{l-1}),   y = W_out z^d / sqrt(n),

all weights iid N(0, 1); vanilla: ``phi_l = relu``; balanced (Sec. 2.1): ``phi_l(z) = relu(s^l * z)`` with iid
uniform signs ``s^l in {+1, -1}^n`` frozen at initialisation.  Task: all ten classes of scikit-learn's digits
(standardised, d_in = 64), softmax cross-entropy, Adam with the paper's settings (learning rate 0.01, b1 = 0.9,
b2 = 0.999, eps = 1e-8, batch size 128), float32.  The paper trains n = 1000, d = 30 on MNIST and CIFAR-10 and
observes that "both architectures perform similarly in standard training regimes where the networks are much
wider than they are deep"; the theory (Theorems 1 and 4) says the log-norm variance of a vanilla ResNet grows
with d/n faster than a balanced one's (no hypoactivation), which suggests balanced networks train better when
d/n is large.  Here the width is scaled down and the depth runs from d/n << 1 to d/n = 1.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from resprop.numeric.training.experiments import Experiment, ExperimentResult, beyond_spread, seed_stats

ALPHA = LAM = 2**-0.5
#: Adam as in App. C.1
LR, BATCH = 0.01, 128
#: (quick, full): width n, depths d (d/n from "much wider than deep" to "as deep as wide"), epochs
SIZES: dict[str, tuple[Any, Any]] = {"width": (32, 64), "depths": ((2, 8, 32), (2, 8, 32, 64)),
                                     "epochs": (12, 30), "n_train": (1280, 1280), "n_test": (450, 450)}
ARCHS = ("vanilla", "balanced")


def _size(name: str, quick: bool):
    return SIZES[name][0 if quick else 1]


def init_params(rng: np.random.Generator, *, d_in: int, width: int, depth: int, n_out: int) -> dict:
    """W^0 (n, d_in), W^1..W^d stacked (d, n, n), W_out (n_out, n): iid N(0, 1), drawn in this order."""
    return {"w_in": rng.standard_normal((width, d_in)), "layers": rng.standard_normal((depth, width, width)),
            "w_out": rng.standard_normal((n_out, width))}


def draw_signs(rng: np.random.Generator, depth: int, width: int, balanced: bool) -> np.ndarray:
    """Frozen signs s^l (d, n): iid uniform +-1 for the balanced ResNet, all +1 for the vanilla one."""
    if not balanced:
        return np.ones((depth, width))
    return np.where(rng.random((depth, width)) < 0.5, -1.0, 1.0)


def logits(params: dict, signs, x, alpha: float = ALPHA, lam: float = LAM):
    """Eq. (1) in JAX for inputs x (B, d_in) -> (B, n_out); the layers run in a lax.scan."""
    import jax
    import jax.numpy as jnp

    width = params["w_in"].shape[0]
    z = x @ params["w_in"].T / math.sqrt(x.shape[1])
    scale = lam * math.sqrt(2.0 / width)

    def layer(z, ws):
        w, s = ws
        return alpha * z + scale * jax.nn.relu(s * z) @ w.T, None

    z, _ = jax.lax.scan(layer, z, (params["layers"], jnp.asarray(signs, z.dtype)))
    return z @ params["w_out"].T / math.sqrt(width)


def run_one(seed: int, depth: int, balanced: bool, quick: bool, data, fns) -> dict[str, Any]:
    from resprop.numeric.training.loop import train

    width = _size("width", quick)
    rng = np.random.default_rng([seed, depth, int(balanced)])
    params = init_params(rng, d_in=data.d_in, width=width, depth=depth, n_out=len(data.classes))
    params["signs"] = draw_signs(rng, depth, width, balanced)
    loss, metrics, opt = fns
    _, hist = train(params, loss, opt, data.x_train, data.t_train, epochs=_size("epochs", quick),
                    batch_size=BATCH, seed=seed, metrics=metrics,
                    desc=f"lognormal {'balanced' if balanced else 'vanilla'} n={width} d={depth} seed {seed}")
    return hist.to_dict()


def _functions(data):
    """(loss, metrics, optimizer) shared by every run on ``data``; the signs travel in params["signs"] with a
    zero gradient (jax.lax.stop_gradient) and a zero Adam update (optax.masked)."""
    import jax
    import jax.numpy as jnp
    import optax

    def net(p, x):
        return logits({k: v for k, v in p.items() if k != "signs"}, jax.lax.stop_gradient(p["signs"]), x)

    def loss(p, x, t):
        return jnp.mean(optax.softmax_cross_entropy(net(p, x), t))

    xte, yte = jnp.asarray(data.x_test, jnp.float32), jnp.asarray(data.y_test)
    xtr, ytr = jnp.asarray(data.x_train, jnp.float32), jnp.asarray(data.y_train)

    def metrics(p):
        out_tr, out_te = net(p, xtr), net(p, xte)
        return {"train_loss": jnp.mean(optax.softmax_cross_entropy_with_integer_labels(out_tr, ytr)),
                "test_loss": jnp.mean(optax.softmax_cross_entropy_with_integer_labels(out_te, yte)),
                "train_accuracy": jnp.mean(jnp.argmax(out_tr, axis=1) == ytr),
                "test_accuracy": jnp.mean(jnp.argmax(out_te, axis=1) == yte)}

    adam = optax.adam(LR, b1=0.9, b2=0.999, eps=1e-8)
    opt = optax.masked(adam, lambda p: {k: k != "signs" for k in p})
    return loss, metrics, opt


def run(quick: bool, out: Path, seeds: tuple[int, ...]) -> ExperimentResult:
    """Fig. 6 at reduced size over ``seeds``: test accuracy curves per (architecture, depth); claim rows."""
    from resprop.numeric.training.data import digits

    data = digits(tuple(range(10)), _size("n_train", quick), _size("n_test", quick), seed=0)
    fns = _functions(data)
    depths = _size("depths", quick)
    hist = {(arch, d, s): run_one(s, d, arch == "balanced", quick, data, fns)
            for d in depths for arch in ARCHS for s in seeds}
    per_seed: dict[int, dict[str, Any]] = {s: {} for s in seeds}
    for (arch, d, s), h in hist.items():
        per_seed[s][f"{arch}_d{d}"] = h
    summary, claims = _claims(hist, depths, seeds, _size("width", quick))
    figures = _figures(hist, depths, seeds, _size("width", quick), Path(out))
    settings = {"alpha": ALPHA, "lam": LAM, "lr": LR, "batch_size": BATCH, "dtype": "float32",
                "data": "sklearn digits, 10 classes", "width": _size("width", quick), "depths": list(depths),
                "epochs": _size("epochs", quick), "n_train": _size("n_train", quick), "n_test": _size("n_test", quick)}
    return ExperimentResult(name="lognormal-fig6", theory="lognormal", quick=quick, seeds=tuple(seeds),
                            per_seed=per_seed, summary=summary, figures=figures, claims=claims, settings=settings)


def _final(h: dict, key: str = "test_accuracy", last: int = 1) -> float:
    return float(np.mean(h[key][-last:]))


def _claims(hist, depths, seeds, width) -> tuple[dict, list[dict]]:
    from resprop.numeric.report.claims import row

    n = len(seeds)
    summary: dict[str, Any] = {}
    acc = {(a, d): np.array([_final(hist[(a, d, s)]) for s in seeds]) for a in ARCHS for d in depths}
    for (a, d), v in acc.items():
        summary[f"{a}_d{d}_test_accuracy"] = seed_stats(v)

    def fmt(st):
        return f"{st['mean']:.4f} +- {st['sd']:.2g}"

    rows = []
    deep, shallow = max(depths), min(depths)
    ok, diff = beyond_spread(acc[("balanced", deep)], acc[("vanilla", deep)])
    rows.append(row(
        f"final test accuracy, balanced vs vanilla ResNet at d/n = {deep}/{width} = {deep / width:.3g} (Fig. 6)",
        "balanced ResNets suggested to train better when d/n is large (Theorem 4: no excess log-norm variance)",
        {"vanilla": seed_stats(acc[("vanilla", deep)]), "balanced": seed_stats(acc[("balanced", deep)])},
        {"mean": diff["mean"], "se": diff["sd"] / math.sqrt(n), "method": f"{n} seeds, paired balanced - vanilla"},
        passed=ok, check="mean(balanced - vanilla) > 1 sd over seeds",
        note=f"vanilla {fmt(seed_stats(acc[('vanilla', deep)]))}, balanced {fmt(seed_stats(acc[('balanced', deep)]))}"))
    diff_sh = acc[("balanced", shallow)] - acc[("vanilla", shallow)]
    st = seed_stats(diff_sh)
    sd_each = max(seed_stats(acc[("balanced", shallow)])["sd"], seed_stats(acc[("vanilla", shallow)])["sd"])
    close = abs(st["mean"]) <= max(2 * st["sd"], 2 * sd_each, 0.01)
    rows.append(row(
        f"final test accuracy, balanced vs vanilla at d/n = {shallow}/{width} = {shallow / width:.3g} (Fig. 6)",
        "both architectures perform similarly when the networks are much wider than deep",
        {"vanilla": seed_stats(acc[("vanilla", shallow)]), "balanced": seed_stats(acc[("balanced", shallow)])},
        {"mean": st["mean"], "se": st["sd"] / math.sqrt(n), "method": f"{n} seeds, paired balanced - vanilla"},
        passed=close, check="|mean(balanced - vanilla)| <= max(2 sd of the difference, 2 sd of either, 0.01)",
        note=f"vanilla {fmt(seed_stats(acc[('vanilla', shallow)]))}, "
             f"balanced {fmt(seed_stats(acc[('balanced', shallow)]))}"))
    return summary, rows


def _figures(hist, depths, seeds, width, out: Path) -> list[Path]:
    from resprop.numeric.report.plotting import plt

    fig, axes = plt.subplots(1, len(depths), figsize=(3.6 * len(depths), 3.4), sharey=True)
    for ax, d in zip(np.atleast_1d(axes), depths):
        for i, arch in enumerate(ARCHS):
            curves = np.array([hist[(arch, d, s)]["test_accuracy"] for s in seeds])
            ep = hist[(arch, d, seeds[0])]["epochs"]
            m, sd = curves.mean(axis=0), curves.std(axis=0, ddof=1) if len(seeds) > 1 else 0 * curves[0]
            ax.plot(ep, m, color=f"C{i}", label=arch)
            ax.fill_between(ep, m - sd, m + sd, color=f"C{i}", alpha=0.25)
        ax.set(title=f"n = {width}, d = {d} (d/n = {d / width:.3g})", xlabel="epoch")
    np.atleast_1d(axes)[0].set_ylabel("test accuracy (mean +- sd over seeds)")
    np.atleast_1d(axes)[0].legend()
    fig.suptitle("Li, Nica & Roy Fig. 6 at reduced size: Adam (lr 0.01, batch 128) on digits")
    fig.tight_layout()
    p = out / "lognormal-fig6.png"
    fig.savefig(p, dpi=90)
    plt.close(fig)
    return [p]


EXPERIMENTS = {
    "lognormal-fig6": Experiment(
        name="lognormal-fig6", theory="lognormal",
        title="Fig. 6: vanilla vs balanced ResNets (alpha = lam = 1/sqrt(2)) trained with Adam, d/n from small to 1",
        run=run, seeds=(0, 1, 2, 3, 4),
        description="Fully connected ReLU ResNets of eq. (1) and Sec. 2.1 on the ten digit classes; test accuracy "
                    "over epochs, mean +- sd over seeds."),
}
