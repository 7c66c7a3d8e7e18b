"""Shared engine of the trained-network experiments (``resprop train``; docs/training.md).

* :mod:`.data` -- scikit-learn's bundled digits: class subsets, a fixed-seed train/test split, standardisation;
* :mod:`.loop` -- generic training loops (any optax optimizer, Langevin gradient descent) over explicit parameter
  pytrees, float64, with tqdm progress and metrics per epoch (needs the optional extra ``resprop[train]``: JAX and
  optax);
* :mod:`.experiments` -- the :class:`~.experiments.Experiment` interface a theory registers
  (``Theory(experiments="module:EXPERIMENTS")``), its :class:`~.experiments.ExperimentResult`, and the verdict
  over seeds.

This package never imports a theory; it imports JAX only in :mod:`.loop`, so ``resprop train --list`` and the report
work without the extra.
"""
from __future__ import annotations

import importlib.util

__all__ = ["TrainingExtraMissing", "missing_modules", "extra_message", "require_jax", "set_progress", "progress"]

_EXTRA = ("jax", "optax")
_PROGRESS = [True]


class TrainingExtraMissing(ImportError):
    """JAX or optax is not installed: the message names the ``train`` extra."""


def missing_modules() -> list[str]:
    """The modules of the ``train`` extra that cannot be imported."""
    return [m for m in _EXTRA if importlib.util.find_spec(m) is None]


def extra_message() -> str:
    """'' when JAX and optax are importable, else the one-line error naming the extra."""
    missing = missing_modules()
    if not missing:
        return ""
    return (f"resprop train needs the optional dependencies of resprop[train] (missing: {', '.join(missing)}); "
            "install them with: pip install 'resprop[train]'")


def require_jax() -> None:
    """Raise :class:`TrainingExtraMissing` (naming the extra) unless JAX and optax are importable."""
    message = extra_message()
    if message:
        raise TrainingExtraMissing(message)


def set_progress(enabled: bool) -> None:
    """Show (default) or hide the tqdm bars of every training loop (``resprop train --quiet``)."""
    _PROGRESS[0] = bool(enabled)


def progress() -> bool:
    return _PROGRESS[0]
