"""Shared plotting helpers for the theories' figures (matplotlib "Agg" backend)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

DPI = 110


def histogram_density(values, bins: int = 60, range_=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bin centres, density, edges) of a normalised histogram (integral over the edges = 1).

    ``range_`` defaults to the 0.05%..99.95% quantiles of the finite values, so that a few extreme
    samples do not squash the plot; the density is normalised by the number of samples *inside* the range.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size < 2:
        raise ValueError("histogram_density needs at least 2 finite values")
    if range_ is None:
        lo, hi = np.quantile(x, [0.0005, 0.9995])
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        range_ = (float(lo), float(hi))
    density, edges = np.histogram(x, bins=int(bins), range=range_, density=True)
    return 0.5 * (edges[1:] + edges[:-1]), density, edges


def finish(fig, path: Path, caption: str) -> Path:
    """Add ``caption`` under the figure, save it as ``path`` and close it."""
    fig.text(0.5, 0.005, caption, ha="center", va="bottom", fontsize=7.5, wrap=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
