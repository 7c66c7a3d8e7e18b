"""numeric/engine/blas_threads.py: BLAS runs one thread inside the limit, and the previous counts come back."""
import numpy as np
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from resprop.numeric.engine.blas_threads import one_blas_thread  # noqa: E402


def _blas_threads() -> list[int]:
    import scipy.linalg.blas  # noqa: F401 - SciPy's own OpenBLAS is what the engine's syrk calls

    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_restored_after():
    before = _blas_threads()
    assert before, "no BLAS library found by threadpoolctl"
    with one_blas_thread():
        assert _blas_threads() == [1] * len(before)
        inside = np.ones((64, 64)) @ np.ones((64, 64))  # BLAS still works under the limit
    assert _blas_threads() == before
    assert float(inside[0, 0]) == 64.0


def test_nested_and_repeated():
    before = _blas_threads()
    for _ in range(3):
        with one_blas_thread():
            with one_blas_thread():
                assert set(_blas_threads()) == {1}
            assert set(_blas_threads()) == {1}
    assert _blas_threads() == before
