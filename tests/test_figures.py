"""Smoke tests of the Li-Nica-Roy and PDLT reproduction figures in quick mode, plus the histogram helper."""
import hashlib
import math

import matplotlib.image as mpimg
import numpy as np
import pytest

from resprop.numeric.engine.monte_carlo import simulate_log_gaussian
from resprop.numeric.report.plotting import histogram_density
from resprop.numeric.theories.lognormal import figures as lognormal_figures
from resprop.numeric.theories.lognormal.figures import log_output_norm_sq
from resprop.numeric.theories.pdlt import figures as pdlt_figures

FIGURE_NAMES = lognormal_figures.FIGURE_NAMES + pdlt_figures.FIGURE_NAMES


def make_figures(out, **kw):
    return lognormal_figures.make_figures(out, **kw) + pdlt_figures.make_figures(out, **kw)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures") / "nested"  # make_figures must create missing directories
    return out, make_figures(out, quick=True, seed=0)


def test_all_four_pngs_written(figures):
    out, paths = figures
    assert [p.name for p in paths] == list(FIGURE_NAMES)
    for p in paths:
        assert p.parent == out and p.is_file()


def test_pngs_are_valid_images(figures):
    _, paths = figures
    for p in paths:
        assert p.read_bytes()[:8] == PNG_MAGIC
        img = mpimg.imread(p)
        assert img.ndim == 3 and img.size > 0 and img.shape[2] in (3, 4)
        assert img.shape[0] > 200 and img.shape[1] > 200
        assert float(np.ptp(img[..., :3])) > 0.5  # not a blank canvas


def test_figures_are_distinct(figures):
    _, paths = figures
    hashes = {hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    assert len(hashes) == len(paths)


def test_histogram_density_integrates_to_one():
    rng = np.random.default_rng(3)
    x = rng.normal(1.0, 2.0, size=20000)
    centres, dens, edges = histogram_density(x, bins=50)
    assert centres.shape == dens.shape == (50,) and edges.shape == (51,)
    assert np.sum(dens * np.diff(edges)) == pytest.approx(1.0, abs=1e-12)
    # the histogram tracks the normal density it was drawn from
    ref = np.exp(-((centres - 1.0) ** 2) / 8.0) / math.sqrt(8.0 * math.pi)
    assert np.max(np.abs(dens - ref)) < 0.03


def test_log_output_norm_sq_rescales_to_unit_input():
    # d = 1 with alpha = 1, lam = 0: z^1 = z^0 ~ N(0, I_n) (||x||^2 = n_in), so ||z_out||^2 ~ (||z^0||^2/n) chi^2_{n_out};
    # after the rescaling to ||x|| = 1 the mean of ||z_out||^2 is n_out / n_in.
    s = simulate_log_gaussian(width=50, depth=1, alpha=1.0, lam=0.0, samples=20000, seed=1, n_out=10)
    y = log_output_norm_sq(s, n_in=10)
    assert y.shape == (20000,)
    m = np.exp(y).mean()
    assert m == pytest.approx(1.0, rel=0.02)
