"""Issue 27 item 4: the kernel of width-n networks against resprop.fluctuations (numeric/theories/pdlt/
kernel_distribution.py), its report figure (pdlt_kernel_distribution.png) and examples/fluctuations_width.py.

References are the simulation of explicit networks (fixed seeds); the breakdown width is not hard-coded: the tests
check that the rule finds one inside the simulated range for ReLU at depth 4, that the simulation there shows the
theory off by more than 10% at the smallest width and within 4 SE at the largest (where the next order, n Var /
variance - 1 ~ 3/n for this network, is 0.6% at n = 512: about a third of a standard error, the allowance left
inside the 4 SE)."""
import importlib.util
import io
import math
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.pdlt import figures as F
from resprop.numeric.theories.pdlt import kernel_distribution as kd

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (8, 32, 128, 512)


@pytest.fixture(scope="module")
def relu4():
    return kd.width_scan("relu", 4, widths=WIDTHS, samples=8000, seed=0, histogram_width=32)


def test_breakdown_width_rule():
    w = (8, 16, 32, 64)
    assert kd.breakdown_width(w, [True] * 4) == (8, True)
    assert kd.breakdown_width(w, [False, False, True, True]) == (32, False)
    assert kd.breakdown_width(w, [True, False, True, True]) == (32, False)  # from which on: every larger width
    assert kd.breakdown_width(w, [True, True, True, False]) == (None, False)
    with pytest.raises(ParameterError, match="widths"):
        kd.breakdown_width((16, 8), [True, True])
    with pytest.raises(ParameterError, match="widths"):
        kd.breakdown_width(w, [True])


def test_accuracy_score():
    # |1.05 - 1| + 2 * 0.01 = 0.07 against 10% of 1: 0.7; the mean's scale is its own argument
    assert kd.accuracy_score(1.05, 0.01, 1.0, 1.0) == pytest.approx(0.7)
    assert kd.accuracy_score(1.0, 0.06, 1.0, 1.0) == pytest.approx(1.2)  # unresolved: 2 SE alone exceed 10%
    assert kd.accuracy_score(0.0, 0.0, 0.0, 0.0) == math.inf


def test_relu_depth4_breakdown_inside_the_range(relu4):
    s = relu4
    assert s.breakdown_width in WIDTHS and not s.engine.at_edge
    assert s.breakdown_width & (s.breakdown_width - 1) == 0  # a power of two
    # the rule can fail: at width 8 the simulation shows the O(1/n) variance off by more than 10%
    assert s.engine.status(0) == "inaccurate"
    assert np.all(s.engine.accurate[s.widths.index(s.breakdown_width):])
    # at the largest width the engine agrees with the simulation within 4 SE, variance and mean shift
    V = s.variance[s.pairs[:, 0], s.pairs[:, 1]]
    M = s.mean_shift[s.pairs[:, 0], s.pairs[:, 1]]
    assert np.all(np.abs(s.R[-1] - V) <= 4 * s.R_se[-1]), (s.R[-1], V, s.R_se[-1])
    assert np.all(np.abs(s.shift[-1] - M) <= 4 * s.shift_se[-1])
    # the first correction is the larger effect: n Var decreases towards the engine's value from above
    assert np.all(s.R[0] > s.R[-1])


def test_histogram_summary_against_the_samples(relu4):
    h = relu4.histogram_summary(0, 1)
    x = relu4.histogram_samples[:, 0, 1]
    assert h["width"] == 32 and h["samples"] == 8000
    assert h["mean_simulated"] == pytest.approx(x.mean()) and h["sd_simulated"] == pytest.approx(x.std(ddof=1))
    n = 32
    assert h["mean_predicted"] == pytest.approx(relu4.nngp[0, 1] + relu4.mean_shift[0, 1] / n)
    assert h["sd_predicted"] == pytest.approx(math.sqrt(relu4.variance[0, 1] / n))
    assert 0.0 < h["ks_distance"] < 1.0 and 0.5 < h["within_1sd"] < 0.9


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ParameterError, match="widths"):
        kd.width_scan("relu", 1, widths=(16, 8), samples=40)
    with pytest.raises(ParameterError, match="samples"):
        kd.width_scan("relu", 1, widths=(8, 16), samples=10)
    with pytest.raises(ParameterError, match="histogram_width"):
        kd.width_scan("relu", 1, widths=(8, 16), samples=40, histogram_width=64)


def test_figure_quick_mode(tmp_path):
    """The report's figure as `resprop figures --quick` draws it (its own quick simulation of the four cases)."""
    path = F.kernel_distribution_figure(tmp_path / F.FIGURE_NAMES[3], quick=True, seed=0)
    assert path.name == "pdlt_kernel_distribution.png" and path.is_file()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    assert img.shape[0] > 500 and img.shape[1] > 1000 and float(np.ptp(img[..., :3])) > 0.5


def test_example_runs_and_prints_the_table():
    spec = importlib.util.spec_from_file_location("fluctuations_width", ROOT / "examples" / "fluctuations_width.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = io.StringIO()
    (scan,) = example.run(quick=True, samples=400, cases=(("tanh", 2),), out=out)
    text = out.getvalue()
    assert "(c) n* = " in text and "tanh, depth 2" in text and "extrap. z" in text
    assert scan.widths == kd.QUICK_WIDTHS and scan.samples == 400
