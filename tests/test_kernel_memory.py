"""Peak memory of `resprop.kernel` (issue 25, item 4: no more than the output plus 10%).

tracemalloc's peak of a warm call (NumPy buffers included), above what was allocated before it, against the bytes
of the returned kernels.  Deterministic (no timing): a block schedule, table budget or temporary that grows with
P^2 or depth x P shows up here."""
from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

import resprop


def _peak_over_output(X, act, depth, ntk, **kw) -> float:
    call = lambda: resprop.kernel(X, act, depth, 1.25, 0.05, branch_scale=0.1, ntk=ntk, **kw)  # noqa: E731
    call()  # warm: compiled kernels loaded, tables cached (twice: the caches of the diagonal moments settle too)
    call()
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    out = call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    nbytes = sum(a.nbytes for a in (out if ntk else (out,)))
    return (peak - base) / nbytes - 1


def _rows(P: int, equal: bool, seed: int = 0) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((P, 40))
    if equal:
        X /= np.linalg.norm(X, axis=1, keepdims=True) / np.sqrt(40)
    return X * 0.25


@pytest.mark.parametrize("act", ["erf", "relu", "gelu"])
@pytest.mark.parametrize("ntk", [False, True])
@pytest.mark.parametrize("P, depth, equal", [(200, 50, True), (1000, 100, False), (1000, 100, True)],
                         ids=["P200-L50", "P1000-L100-unequal", "P1000-L100-equal"])
def test_peak_is_the_output_plus_at_most_ten_percent(act, ntk, P, depth, equal):
    extra = _peak_over_output(_rows(P, equal), act, depth, ntk)
    assert extra <= 0.10, f"peak is the output + {100 * extra:.1f}%"


def test_a_deep_tabulated_run_keeps_its_tables_and_stays_near_the_output():
    """tanh at depth 200 > the 128 tables a count-bounded cache held: the byte-bounded cache keeps them all, so a
    second call builds none and its peak stays near the output (it was the output + 91%).  The configuration of
    benchmarks/bench_kernel_engine.py (P = 1000 on a sphere, K^(0)_aa = 0.1, branch scale 0.1).  A layer's rho table
    and its packed copy (~30-60 KiB, more at larger variances) do not shrink with P: at P = 200 one layer's tables
    alone pass 10% of the output, and at larger K_aa the block of tables passes it at P = 1000 too (BENCHMARKS.md
    states those peaks)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 100))
    X *= np.sqrt((0.1 - 0.05) * 100 / 1.25) / np.linalg.norm(X, axis=1, keepdims=True)
    extra = _peak_over_output(X, "tanh", 200, False)
    assert extra <= 0.10, f"peak is the output + {100 * extra:.1f}%"


def test_packed_tables_are_reused_and_change_nothing():
    """The compiled kernels' packed rho tables are cached by block (`residual_kernel._PACKED`): a second call with
    the same layers' tables reuses them, and the numbers are the same bits with and without the cache."""
    from resprop.numeric.engine import residual_kernel as RK

    X = _rows(64, True, seed=3)
    call = lambda: resprop.kernel(X, "tanh", 40, 1.25, 0.05, branch_scale=0.3)  # noqa: E731
    RK._PACKED.clear()
    first = call()
    hits = RK._PACKED.hits
    second = call()
    assert RK._PACKED.hits > hits
    RK._PACKED.clear()
    third = call()
    assert np.array_equal(first, second) and np.array_equal(first, third)
