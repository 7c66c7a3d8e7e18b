"""Seeds of `resprop train` / resprop.numeric.training (issue 23, item 7): integers in [0, 2^63 - 1], checked up
front, and the JAX key built from all 64 bits (seeds that differ by 2^32 are different runs)."""
import numpy as np
import pytest

from resprop.numeric.cli import main
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.training.experiments import MAX_SEED, check_seed, check_seeds

BAD_SEEDS = [-1, 2**63, 2**64 + 3, True, False, np.bool_(True), 1.5, np.float64(2.5), "3", None, float("nan"),
             float("inf"), 2.0**60, 1 + 2j, [1]]


@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
def test_bad_seed_refused(seed):
    with pytest.raises(ParameterError) as info:
        check_seed(seed)
    assert info.value.parameter == "seed" and "[0, 2^63 - 1]" in str(info.value)


def test_good_seeds():
    assert check_seed(0) == 0 and check_seed(MAX_SEED) == 2**63 - 1 and check_seed(np.int64(7)) == 7
    assert check_seed(2.0) == 2  # an integral float is that integer
    assert check_seeds([3, 2**32 + 3]) == (3, 2**32 + 3)
    assert check_seeds(np.array([1, 2])) == (1, 2)


@pytest.mark.parametrize("seeds", [[], [1, 1], "12", 5, [0, True], [0, -1], [0.5]], ids=repr)
def test_bad_seed_lists_refused(seeds):
    with pytest.raises(ParameterError) as info:
        check_seeds(seeds)
    assert info.value.parameter == "seeds"


def test_run_experiment_refuses_before_running(tmp_path):
    from resprop.numeric.training.experiments import Experiment, run_experiment

    ran = []
    exp = Experiment("x", "fischer", "t", lambda quick, out, seeds: ran.append(seeds))
    for seeds in ([2**63], [True, 1], [1.5], [-3]):
        with pytest.raises(ParameterError, match="seeds"):
            run_experiment(exp, tmp_path, quick=True, seeds=seeds)
    assert ran == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["-1", "1.5", "True", str(2**63), "1,1", "", "0x10", "1e3", "2,nan"])
def test_cli_seeds_refused_before_work(text, tmp_path, capsys):
    code = main(["train", "fischer-fig7", "--quick", f"--seed={text}", "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("resprop: error: --seed:"), err
    assert not (tmp_path / "t").exists() and list(tmp_path.iterdir()) == []


def test_cli_deprecated_seeds_is_seed(tmp_path, capsys):
    """--seeds (the spelling before issue 28) still works for one release: a deprecation line, then --seed."""
    code = main(["train", "fischer-fig7", "--quick", "--seeds=1,1", "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[0] == "resprop: --seeds is deprecated; use --seed", err
    assert len(err) == 2 and err[1].startswith("resprop: error: --seed:"), err
    assert not (tmp_path / "t").exists()


def test_seed_key_uses_all_64_bits():
    jax = pytest.importorskip("jax")
    from resprop.numeric.training.loop import seed_key

    def data(key):
        return np.asarray(key).tolist()

    for s in (0, 1, 5, 2**32 - 1):  # unchanged for the seeds every run used so far
        assert data(seed_key(s)) == data(jax.random.PRNGKey(s))
    assert data(seed_key(5)) != data(seed_key(5 + 2**32))
    assert data(seed_key(0)) != data(seed_key(2**32)) != data(seed_key(2**33))
    assert data(seed_key(MAX_SEED)) == [2**31 - 1, 2**32 - 1]
    with jax.enable_x64(True):  # PRNGKey's own 64-bit form
        assert data(seed_key(5 + 2**32)) == data(jax.random.PRNGKey(5 + 2**32))
    # the draws differ, not only the key words
    a = jax.random.permutation(jax.random.split(seed_key(7))[0], 50)
    b = jax.random.permutation(jax.random.split(seed_key(7 + 2**32))[0], 50)
    assert data(a) != data(b)
    for bad in (-1, 2**63, True, 2.5):
        with pytest.raises(ParameterError, match="seed"):
            seed_key(bad)


def test_train_refuses_bad_seed():
    pytest.importorskip("optax")
    import optax

    from resprop.numeric.training.loop import train

    x, t = np.ones((4, 2)), np.ones((4, 1))
    params = {"w": np.zeros((2, 1))}

    def loss(p, x, t):
        return ((x @ p["w"] - t) ** 2).sum()

    for bad in (2**63, -1, True, 0.5):
        with pytest.raises(ParameterError, match="seed"):
            train(params, loss, optax.sgd(0.1), x, t, epochs=1, seed=bad, progress=False)
    p1, _ = train(params, loss, optax.sgd(0.01), x, t, epochs=3, batch_size=2, seed=1, progress=False)
    p2, _ = train(params, loss, optax.sgd(0.01), x, t, epochs=3, batch_size=2, seed=1 + 2**32, progress=False)
    assert np.all(np.isfinite(np.asarray(p1["w"]))) and np.all(np.isfinite(np.asarray(p2["w"])))
