"""The report's claims at quick size, and the Monte Carlo's power: networks of a different sigma_w^2 than the map
fail the same rule."""
import numpy as np

from resprop_schoenholz import claims as C
from resprop_schoenholz.driver import trajectory
from resprop_schoenholz.network import first_order_bias, simulate


def test_every_claim_agrees_at_quick_size():
    steps = []
    rows, extra = C.claims(True, lambda: steps.append(1))
    assert [r["claim"] for r in rows] == [c.key for c in C.CLAIMS] and len(steps) == len(C.CLAIMS)
    bad = [(r["claim"], r["check"], r["note"]) for r in rows if r["verdict"] != "agrees"]
    assert not bad, bad
    assert set(extra["divergence"]) >= {"sigma_c2", "ordered", "chaotic"}


def _rule_holds(sample, tr, bias):
    q = sample.length()
    mean, se = q.mean(axis=0), q.std(axis=0, ddof=1) / np.sqrt(q.shape[0])
    return bool(np.all(np.abs(mean - tr.q_aa) <= 4 * se + 2 * np.abs(bias["q"])))


def test_the_monte_carlo_rule_detects_a_wrong_map():
    setting = dict(input_kernel=1.0, input_correlation=0.6, depth=C.DEPTH)
    sample = simulate("tanh", 2.5, 0.05, width=128, networks=64, seed=2017, **setting)
    right = trajectory("tanh", 2.5, 0.05, **setting)
    assert _rule_holds(sample, right, first_order_bias("tanh", 2.5, 0.05, right, sample))
    for wrong in (trajectory("tanh", 2.8, 0.05, **setting), trajectory("tanh", 2.5, 0.15, **setting),
                  trajectory("erf", 2.5, 0.05, **setting)):
        assert not _rule_holds(sample, wrong, first_order_bias("tanh", 2.5, 0.05, right, sample))


def test_the_finite_width_bias_is_predicted():
    """At width 16 the bias is several standard errors of 8192 networks; the delta method predicts it."""
    setting = dict(input_kernel=1.0, input_correlation=0.6, depth=C.DEPTH)
    sample = simulate("tanh", 2.5, 0.05, width=16, networks=8192, seed=16, **setting)
    tr = trajectory("tanh", 2.5, 0.05, **setting)
    bias = first_order_bias("tanh", 2.5, 0.05, tr, sample)
    c_mean, c_se = sample.mean_se("c")
    assert np.any(np.abs(c_mean - tr.c) > 4 * c_se)  # the uncorrected map fails at width 16 ...
    assert np.all(np.abs(c_mean - tr.c - bias["c"]) <= 4 * c_se)  # ... and map + first-order bias holds
