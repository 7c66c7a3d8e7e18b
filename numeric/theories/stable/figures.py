"""Stable ResNet (Hayou et al. 2021) figures: see
:func:`resprop.numeric.theories.stable.experiments.make_stable_figures`."""

from __future__ import annotations

from pathlib import Path

from resprop.numeric.theories.stable.experiments import STABLE_FIGURE_NAMES, make_stable_figures

__all__ = ["make_figures", "FIGURE_NAMES"]

FIGURE_NAMES = STABLE_FIGURE_NAMES


def make_figures(out: Path, *, quick: bool = False, seed: int = 0, data=None, progress: bool = False) -> list[Path]:
    """The five Stable ResNet PNGs (and ``stable_table2_digits.json``, which the report's claims read)."""
    return make_stable_figures(out, quick=quick, seed=seed)
