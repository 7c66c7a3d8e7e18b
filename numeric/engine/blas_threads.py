"""BLAS on one thread while the engine's own threads hold the cores.

OpenBLAS (NumPy's and SciPy's) keeps its worker threads spinning for ~0.1 s after every threaded call, waiting for
the next one.  A threaded BLAS call just before the engine's thread pool starts (K^(0) by syrk, a Chebyshev fit)
therefore leaves a spinning thread on one of the cores the pool needs: on 2 cores it cost the gelu NNGP at
P = 1000, L = 200 (unequal norms) 0.113 s instead of 0.068 s (benchmarks/bench_kernel_engine.py, BENCHMARKS.md).
Calls made under `one_blas_thread` run on the calling thread only, so no BLAS thread is left spinning.

The controller (threadpoolctl's scan of the loaded libraries, ~1-2 ms) is built once per process, after SciPy's
BLAS is loaded, and reused: entering and leaving the limit then costs microseconds.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any

_LOCK = threading.Lock()


@functools.cache
def _controller() -> Any:
    try:
        import scipy.linalg.blas  # noqa: F401 - loaded first, so that the controller sees SciPy's OpenBLAS too
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - scikit-learn (a dependency) brings threadpoolctl
        return None
    return ThreadpoolController()


def one_blas_thread() -> contextlib.AbstractContextManager:
    """A context in which every loaded BLAS library runs one thread (the previous counts are restored on exit).

    The limit is process-wide (OpenBLAS has one thread count), as with ``threadpoolctl.threadpool_limits``."""
    with _LOCK:
        controller = _controller()
    if controller is None:  # pragma: no cover
        return contextlib.nullcontext()
    return controller.limit(limits=1, user_api="blas")
