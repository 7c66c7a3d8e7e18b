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
    return _peak_over_output_of(lambda: resprop.kernel(X, act, depth, 1.25, 0.05, branch_scale=0.1, ntk=ntk, **kw))


def _peak_over_output_of(call) -> float:
    """tracemalloc's peak of a warm call above what was allocated before it, over the bytes it returned."""
    call()  # warm: compiled kernels loaded, tables cached (twice: the caches of the diagonal moments settle too)
    call()
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    out = call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    nbytes = sum(a.nbytes for a in (out if isinstance(out, tuple) else (out,)))
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


@pytest.mark.parametrize("ntk", [False, True])
def test_a_small_tabulated_run_on_equal_norms_stays_within_ten_percent(ntk):
    """tanh at P = 200, L = 50 on equal norms (one cached rho table per layer, the compiled kernels): the issue's
    output + 10%.  It was + 30% / + 17%: SymPy's check of the activation ran every layer, a block held 8 layers'
    diagonals and prepared values at P = 200, the row values were stored twice (as rows and as columns) and the
    compiled kernel's column buffers had 512 lanes for rows of 200."""
    extra = _peak_over_output(_rows(200, True), "tanh", 50, ntk)
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


@pytest.mark.parametrize("act, equal", [("tanh", True), ("tanh", False), ("erf", False)])
def test_a_call_leaves_no_reference_cycles(act, equal):
    """Nothing a call builds is kept alive by a reference cycle: a cycle (the diagonal moments' callbacks once held
    their own object) keeps every block's data until the garbage collector runs, which tracemalloc counted in the
    peak (tanh, P = 200: ~60 KiB above a 313 KiB output)."""
    X = _rows(48, equal, seed=5)
    resprop.kernel(X, act, 12, 1.25, 0.05, branch_scale=0.3, ntk=True)  # warm: caches filled outside the count
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        resprop.kernel(X, act, 12, 1.25, 0.05, branch_scale=0.3, ntk=True)
        gc.collect()
        kinds = sorted({type(o).__name__ for o in gc.garbage})
        n = len(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert n == 0, f"{n} objects in reference cycles: {kinds}"


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
def test_the_general_path_holds_one_layer_of_hermite_data_beside_the_output(backend):
    """tanh on inputs of unequal norm (the general path, `dual_tables.general_data` per layer).  On the fused
    kernels (`tabulated_*_series_run`: a few row-length work arrays per thread, blocks of one layer) the peak is the
    issue's output + 10% (measured + 8.5%).  On the NumPy kernels it is at most the output + 10% + the largest
    single layer's Hermite data + the work arrays of one piece per thread (two float64 buffers and the series'
    level and row arrays, budgeted at 3 x 8 bytes an element of ``GENERAL_PIECE``); before, two layers built at
    once, their build temporaries and pieces of STRIP elements came to the output + 47-65% at P = 1000
    (BENCHMARKS.md); this bound is 26% here, the measured peak ~20%."""
    from resprop.numeric.engine import dual_tables
    from resprop.numeric.engine import residual_kernel as RK

    P = 1000
    X = np.random.default_rng(2).standard_normal((P, 100)) * np.sqrt(0.05 / 1.25)  # Gaussian rows: norms spread
    largest = [0]
    original = dual_tables.general_data

    def recording(*args, **kwargs):
        data = original(*args, **kwargs)
        held = [a if a.base is None else a.base for a in (data.coefT, data.logtail_f, data.logtail_g, data.values)
                if a is not None]
        largest[0] = max(largest[0], sum(a.nbytes for a in held))
        return data

    dual_tables.general_data = recording
    try:
        extra = _peak_over_output_of(lambda: resprop.kernel(X, "tanh", 12, 1.25, 0.05, branch_scale=0.1,
                                                            backend=backend))
    finally:
        dual_tables.general_data = original
    out_bytes = 8 * P * P
    assert largest[0] > 0, "the general path did not run"
    pieces = RK.workers() * RK.GENERAL_PIECE * 3 * 8
    if backend == "compiled":
        assert extra <= 0.10, f"peak is the output + {100 * extra:.1f}%"
        return
    allowed = 0.10 * out_bytes + largest[0] + pieces
    assert extra * out_bytes <= allowed, \
        f"peak is the output + {100 * extra:.1f}%, allowed {100 * allowed / out_bytes:.1f}% (one layer's data " \
        f"{100 * largest[0] / out_bytes:.1f}%, pieces {100 * pieces / out_bytes:.1f}%)"
