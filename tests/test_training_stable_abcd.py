"""Trained-network experiments of the stable (Hayou et al. 2021, Tables 1 and 3) and abcd (Innocenti, Achour &
Bogacz 2025, Figs 1, 4, A.18) theories: the JAX networks against independent routes, determinism, and (``-m
slow``) the full experiments with their paper claims."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("optax")
jnp = jax.numpy

from resprop.numeric.theories.abcd import predictive_coding as pc  # noqa: E402
from resprop.numeric.theories.abcd import training as PT  # noqa: E402
from resprop.numeric.theories.stable import training as ST  # noqa: E402


# --------------------------------------------------------------------------- predictive coding
def _small_problem(param="mean_field", width=6, depth=2, d_in=5, d_out=3, P=7, seed=0):  # depth 2: L = 4
    rng = np.random.default_rng(seed)
    net_np = pc.init_network(width, depth, d_in=d_in, d_out=d_out, arch="resnet", param=param, rng=rng)
    x = rng.standard_normal((d_in, P))
    y = rng.standard_normal((d_out, P))
    net = PT.Network(tuple(net_np.weights), tuple(net_np.multipliers), tuple(net_np.kinds()), "linear", 1.0, param,
                     width)
    w32 = [jnp.asarray(w, jnp.float32) for w in net.weights]
    return net_np, net, w32, jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), x, y


def _rel(a, b):
    a, b = np.concatenate([np.ravel(v) for v in a]), np.concatenate([np.ravel(v) for v in b])
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("param", ["mean_field", "sp"])
def test_pc_equilibrium_and_gradient_against_numpy_and_gd(param):
    """JAX exact equilibrium (Lagrange form) = JAX GD inference (eq. 3) = the NumPy module's least-squares-checked
    equilibrium; the PC weight gradient = the NumPy module's, and the BP gradient = its hand-written backprop.
    float32 in JAX: 1e-4 relative."""
    net_np, net, w, x, y, x64, y64 = _small_problem(param)
    h_exact = PT.equilibrium(net, w, x, y, "exact")
    h_gd = PT.equilibrium(net, w, x, y, "gd", beta=0.1, steps=3000)
    h_np = pc.equilibrium_linear(net_np, x64, y64)
    assert _rel(h_exact, h_np) < 1e-4
    assert _rel(h_gd, h_np) < 1e-4
    g_pc = PT.pc_gradients(net, w, x, y, "exact")
    g_np, _, _ = pc.pc_weight_gradients(net_np, x64, y64)
    assert _rel(g_pc, g_np) < 1e-4
    assert _rel(PT.bp_gradients(net, w, x, y), pc.bp_weight_gradients(net_np, x64, y64)) < 1e-5
    # the cosine against the generated law-of-cosines kernel of eq. 26 (grad L, grad s, L/s: no equilibrium solved)
    cf = pc.pc_bp_cosine_closed_form(dataclasses.replace(net_np, weights=tuple(net_np.weights)), x64, y64[:1]) \
        if y64.shape[0] == 1 else None
    assert cf is None or abs(float(PT.gradient_cosine(g_pc, PT.bp_gradients(net, w, x, y))) - float(cf.cosine)) < 1e-4


def test_pc_cosine_against_closed_form_scalar_output():
    """cos(g_PC, g_BP) of the JAX networks (scalar output) = the generated kernel of eq. 26 from grad L and grad s."""
    net_np, net, w, x, y, x64, y64 = _small_problem("mean_field", d_out=1, seed=3)
    cos = float(PT.gradient_cosine(PT.pc_gradients(net, w, x, y), PT.bp_gradients(net, w, x, y)))
    assert abs(cos - float(pc.pc_bp_cosine_closed_form(net_np, x64, y64).cosine)) < 2e-5


def test_pc_gradient_against_fabricpc():
    """Independent library: fabricpc's SGD inference and local Hebbian weight gradients on a linear chain with the
    same weights (fabricpc stores W^T, sums over the batch; energy weights 1/2 ||e||^2 as eq. 2)."""
    fab = pytest.importorskip("fabricpc", reason="fabricpc (optional; pip install fabricpc) not installed")
    del fab
    from fabricpc.core.inference import InferenceSGD, run_inference
    from fabricpc.core.learning import compute_local_weight_gradients
    from fabricpc.core.topology import Edge
    from fabricpc.graph_assembly import TaskMap, graph
    from fabricpc.graph_initialization import initialize_params
    from fabricpc.graph_initialization.state_initializer import FeedforwardStateInit, initialize_graph_state
    from fabricpc.nodes import Linear

    D, N, K, P = 5, 4, 3, 7
    rng = np.random.default_rng(0)
    Ws = [rng.standard_normal((N, D)) / np.sqrt(D), rng.standard_normal((N, N)) / np.sqrt(N),
          rng.standard_normal((K, N)) / np.sqrt(N)]
    x, y = rng.standard_normal((D, P)), rng.standard_normal((K, P))
    nodes = [Linear(shape=(d,), name=n, use_bias=False) for d, n in ((D, "x"), (N, "h1"), (N, "h2"), (K, "y"))]
    st = graph(nodes=nodes, edges=[Edge(source=nodes[i], target=nodes[i + 1].slot("in")) for i in range(3)],
               task_map=TaskMap(x=nodes[0], y=nodes[-1]), inference=InferenceSGD(eta_infer=0.3, infer_steps=600))
    params = initialize_params(st, jax.random.PRNGKey(0))
    new = dict(params.nodes)
    for name, W in zip(("h1", "h2", "y"), Ws):
        (key,) = params.nodes[name].weights.keys()
        new[name] = dataclasses.replace(params.nodes[name], weights={key: jnp.asarray(W.T, jnp.float32)}) \
            if dataclasses.is_dataclass(params.nodes[name]) else \
            params.nodes[name]._replace(weights={key: jnp.asarray(W.T, jnp.float32)})
    params = type(params)(nodes=new)
    clamps = {"x": jnp.asarray(x.T, jnp.float32), "y": jnp.asarray(y.T, jnp.float32)}
    state = initialize_graph_state(st, P, jax.random.PRNGKey(1), clamps, state_init=FeedforwardStateInit(),
                                   params=params)
    final = run_inference(params, state, clamps, st)
    grads = compute_local_weight_gradients(params, final, st)
    g_fab = [np.asarray(next(iter(grads.nodes[n].weights.values()))).T / P for n in ("h1", "h2", "y")]
    net = PT.Network(tuple(Ws), (1.0, 1.0, 1.0), ("linear",) * 3, "linear", 1.0, "sp", N)
    g = PT.pc_gradients(net, [jnp.asarray(W, jnp.float32) for W in Ws], jnp.asarray(x, jnp.float32),
                        jnp.asarray(y, jnp.float32))
    assert _rel(g, g_fab) < 1e-3  # 600 inference steps: converged to ~1e-4


def test_pc_training_deterministic_and_mup_equals_mean_field():
    """Two runs are bit-for-bit equal; and muP and mean-field, which differ by an abc reparameterisation (Table 2),
    compute the same function along the whole GD trajectory with eta = eta_0 gamma^2 N^-c: equal cosines and
    losses up to float32 rounding."""
    cfg = PT.PCConfig(widths=(8,), depths=(1,), steps=4, batch=16, n_train=64, n_test=32)  # depth 1: L = 3
    r1 = PT.train_pairs(8, 1, ("sp", "mean_field", "mup"), (0, 1), cfg)
    r2 = PT.train_pairs(8, 1, ("sp", "mean_field", "mup"), (0, 1), cfg)
    for p in r1:
        for a, b in zip(r1[p], r2[p]):
            assert np.array_equal(a["cosine"], b["cosine"]) and np.array_equal(a["loss_bp"], b["loss_bp"])
    for a, b in zip(r1["mean_field"], r1["mup"]):
        np.testing.assert_allclose(a["loss_pc"], b["loss_pc"], rtol=1e-4)
        np.testing.assert_allclose(a["cosine"], b["cosine"], rtol=1e-4)


# --------------------------------------------------------------------------- Stable ResNet
def test_branch_scales_are_the_theory_scalings():
    L = 7
    l = np.arange(1, L + 1)
    np.testing.assert_allclose(ST.branch_scales("uniform", L), np.full(L, L**-0.5), rtol=1e-15)
    np.testing.assert_allclose(ST.branch_scales("decreasing", L), 1 / (np.sqrt(l) * np.log(l + 1)), rtol=1e-14)
    np.testing.assert_array_equal(ST.branch_scales("unscaled", L), np.ones(L))


def test_overflow_depth_is_where_the_kernel_engine_overflows():
    """Lemma 1 (sigma_b = 0): Q_L(x, x) = 2^L q0; the generated engine (resprop.kernel) is finite one layer before
    the predicted float64 overflow depth and raises at it."""
    from resprop.numeric.engine.kernel import kernel
    from resprop.numeric.engine.validation import ParameterError

    X = np.zeros((2, 64))
    X[0, 0] = 1.0
    X[1, :2] = [0.6, 0.8]
    L64 = ST.overflow_depth(np.float64)
    assert np.isfinite(kernel(X, "relu", L64 - 1, 2.0, 0.0)).all()
    with pytest.raises(ParameterError):
        kernel(X, "relu", L64, 2.0, 0.0)
    K = kernel(X, "relu", 100, 2.0, 0.0)
    assert abs(np.log2(K[0, 0]) - (100 + np.log2(2 / 64))) < 1e-9
    assert ST.overflow_depth(np.float32) == 133 and L64 == 1029  # 2^128 = 2^133/32 > f32max > 2^127


def test_forward_matches_the_nngp_at_initialisation():
    """Mean over networks and outputs of logit^2 from the JAX forward pass (unscaled, no norm; the readout is one
    more layer of eq. 1's form, so Var logit = sigma_w^2 E relu(y_L)^2 = Q_L(x, x)) against the NNGP diagonal of
    the generated engine: 4 SE + the O(L/N) finite-width allowance 2 sum(lambda^2)/N Q used in the stable claims
    (finite-q)."""
    from resprop.numeric.engine.kernel import kernel

    L, N, n_nets = 3, 256, 64
    x = np.zeros((1, 64), np.float32)
    x[0, 0] = 8.0  # x.x/d = 1
    nets = [ST.init_params(np.random.default_rng(s), 64, N, L) for s in range(n_nets)]
    stacked = {k: jnp.asarray(np.stack([p[k] for p in nets])) for k in nets[0]}
    logits = jax.vmap(lambda p: ST.forward(p, jnp.ones(L, jnp.float32), jnp.asarray(x)))(stacked)
    per_net = np.asarray(jnp.mean(logits[:, 0, :] ** 2, axis=-1), float)
    q = kernel(x.astype(float), "relu", L, 2.0, 0.0)[0, 0]
    m, se = per_net.mean(), per_net.std(ddof=1) / np.sqrt(n_nets)
    assert abs(m - q) <= 4 * se + 2 * L / N * q


def test_stable_training_is_deterministic_and_scalings_share_data():
    cfg = dataclasses.replace(ST.table3_config(True), depths=(3,), width=8, epochs=2, n_train=128, n_test=64)
    r1 = ST.train_scalings(3, 0, cfg, "batch")
    r2 = ST.train_scalings(3, 0, cfg, "batch")
    for sc in ST.SCALINGS:
        assert np.array_equal(r1[sc]["loss"], r2[sc]["loss"])
        assert np.array_equal(r1[sc]["test_accuracy"], r2[sc]["test_accuracy"])
    assert r1["unscaled"]["loss"][0] != r1["uniform"]["loss"][0]  # only lambda differs, and it matters


def test_table1_small():
    out = ST.nngp_table1(depths=(10, 150), seeds=(0,), n_train=60, n_val=30, n_test=60)
    rows = {(r["scaling"], r["depth"]): r for r in out["rows"]}
    assert np.isnan(rows[("unscaled", 150)]["accuracy_float32"][0])  # beyond float32 (Lemma 1: L > 132)
    assert rows[("unscaled", 150)]["accuracy_float64"][0] > 0.5
    for sc in ("uniform", "decreasing"):
        assert rows[(sc, 150)]["accuracy_float32"][0] > 0.5 and rows[(sc, 150)]["log10_max"] < 1


# --------------------------------------------------------------------------- full experiments
def _full(name, tmp_path):
    from resprop.numeric.training.experiments import experiment, run_experiment

    res = run_experiment(experiment(name), tmp_path, quick=False)
    assert all(p.exists() for p in res.figures) and (tmp_path / f"{name}.json").exists()
    return res


@pytest.mark.slow
def test_stable_table3_full(tmp_path):
    """Full size: the stable scalings' advantage grows with depth (with and without BatchNorm) and Table 1's
    overflow depths and depth-stable scaled kernels; 'decreasing > uniform' is reported, not asserted."""
    res = _full("stable-table3", tmp_path)
    for r in res.claims:
        if "growth" in r["quantity"] or r["quantity"].startswith("Table 1"):
            assert r["passed"], r


@pytest.mark.slow
def test_abcd_pc_bp_full(tmp_path):
    """Full size: under mean-field cos(g_PC, g_BP) grows with width at every depth, and PC != BP under SP."""
    res = _full("abcd-pc-bp", tmp_path)
    for r in res.claims:
        if "width" in r["quantity"] and "mean-field linear ResNet" in r["quantity"] or "minus SP" in r["quantity"]:
            assert r["passed"], r
