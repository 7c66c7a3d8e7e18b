"""Shared test helpers: adaptive SciPy quadrature (a reference route independent of the generated kernels).
Interrupting a command-line run at a point it reports: tests/interrupting.py."""
import os
import tempfile
from pathlib import Path

import numpy as np
from scipy import integrate

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--registry-only", action="store_true",
                     help="only the tests that read the theory registry: those marked `registry` and every case "
                          "whose parameters name an installed plugin theory (.ci/run runs them again with the "
                          "worked plugin, examples/theory-plugin, installed)")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--registry-only"):
        return
    from resprop import registry

    plugins = [slug for slug, th in registry.theories().items() if th.package not in registry.BUILTIN]
    keep, drop = [], []
    for item in items:
        params = item.nodeid.partition("[")[2]
        chosen = item.get_closest_marker("registry") is not None or any(slug in params for slug in plugins)
        (keep if chosen else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep

# resprop's per-machine cache (numeric/engine/disk_cache.py) in a scratch directory of this test session, never the
# user's ~/.cache; subprocesses inherit it
os.environ.setdefault("RESPROP_CACHE_DIR", tempfile.mkdtemp(prefix="resprop-test-cache-"))

_INF = np.inf


def bivariate_mean_quad(f, g, K_aa, K_bb, K_ab, tol=1e-13):
    """E[f(u) g(v)] for a centred bivariate Gaussian by nested adaptive quadrature (kinks at 0 on endpoints)."""
    sa = np.sqrt(K_aa)
    c = K_ab / sa
    s = np.sqrt(K_bb - c * c)
    norm = 1 / np.sqrt(2 * np.pi)

    def inner(z1):
        cut = -c * z1 / s
        h = lambda z2: g(c * z1 + s * z2) * np.exp(-z2 * z2 / 2) * norm  # noqa: E731
        return sum(integrate.quad(h, a, b, epsabs=tol, epsrel=tol, limit=200)[0] for a, b in ((-_INF, cut), (cut, _INF)))

    outer = lambda z1: f(sa * z1) * inner(z1) * np.exp(-z1 * z1 / 2) * norm  # noqa: E731
    return sum(integrate.quad(outer, a, b, epsabs=tol, epsrel=tol, limit=200)[0] for a, b in ((-_INF, 0), (0, _INF)))


def univariate_mean_quad(f, K, tol=1e-14):
    norm = 1 / np.sqrt(2 * np.pi * K)
    h = lambda u: f(u) * np.exp(-u * u / (2 * K)) * norm  # noqa: E731
    return sum(integrate.quad(h, a, b, epsabs=tol, epsrel=tol, limit=200)[0] for a, b in ((-_INF, 0), (0, _INF)))
