"""Helpers the `resprop` subcommands share (the engine's and every theory's)."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator

import numpy as np


def interrupted(exc: KeyboardInterrupt, out=None) -> int:
    """Ctrl-C, or SIGTERM raised as resprop.numeric.engine.output.Interrupted: one line, exit 128 + the signal
    number.  The line says whether ``out`` was left as it was or had already been written in full."""
    from resprop.numeric.engine.output import published_here

    if out is not None and published_here(out):  # the signal landed after the commit, on the way out
        where = f" after {out} was written (it is complete)"
    else:
        where = f"; {out} left as it was" if out is not None else ""
    print(f"resprop: interrupted{where}", file=sys.stderr)
    return 128 + getattr(exc, "signum", 2)


# --------------------------------------------------------------------------- test hook: checkpoints
#: test-only (tests/interrupting.py ``interrupt_at``; CONTRIBUTING.md, "Tests that interrupt a run"): a file, or
#: a pipe as ``/dev/fd/N``, to which :func:`checkpoint` appends the name of every checkpoint reached
CHECKPOINTS_ENV = "RESPROP_TEST_CHECKPOINTS"
#: test-only: ``NAME`` or ``NAME:N``, the checkpoint (and its N-th arrival, default the first) to pause at
PAUSE_ENV = "RESPROP_TEST_PAUSE"
#: a pause that no signal ends is given up after this many seconds (the run then carries on)
PAUSE_LIMIT = 600.0
_arrivals: dict[str, int] = {}


def checkpoint(name: str) -> None:
    """Mark that the run has reached the point ``name``, so that a test can interrupt it exactly there instead of
    guessing the moment from the wall clock.  Without ``RESPROP_TEST_CHECKPOINTS`` in the environment (normal
    use) this does nothing.

    With it set to a path, each call appends the line ``NAME`` to that file.  If ``RESPROP_TEST_PAUSE`` is
    ``NAME`` or ``NAME:N`` as well, the N-th arrival (default the first) appends ``paused NAME`` and sleeps until
    a signal ends the sleep: Ctrl-C raises KeyboardInterrupt here, SIGTERM raises ``Interrupted`` while a
    Publication is open, SIGKILL kills; after ``PAUSE_LIMIT`` seconds the run carries on.

    The points (main thread only): ``locked`` (every writer but ``kernel --out K.zarr/K.npy``: the output lock is
    held, nothing written yet), ``computing`` (``kernel``: inputs read, before the kernel), ``latex-exported``
    (``reproduce``: the LaTeX sources are in the temporary report; PDFs, claims and figures to come),
    ``part-written`` (``sweep``: once per chunk, after its part file is written and counted).
    """
    path = os.environ.get(CHECKPOINTS_ENV)
    if not path:
        return
    count = _arrivals[name] = _arrivals.get(name, 0) + 1
    target, _, nth = os.environ.get(PAUSE_ENV, "").partition(":")
    pause = target == name and count == (int(nth) if nth else 1)
    with open(path, "a") as fh:
        fh.write(f"{name}\n" + (f"paused {name}\n" if pause else ""))
    if pause:
        end = time.monotonic() + PAUSE_LIMIT
        while time.monotonic() < end:
            time.sleep(min(1.0, max(end - time.monotonic(), 0.0)))


# --------------------------------------------------------------------------- progress bars
#: seconds before a command's progress bar appears (shorter runs print nothing), as in resprop.kernel's bar
PROGRESS_DELAY = 1.0


class Progress:
    """A tqdm bar on stderr driven by the ``progress(done, total, label)`` callbacks of
    ``resprop.derive.codegen.generated_files`` / ``write_generated`` / ``stale_files`` and
    ``resprop.derive.latex.export_latex``: call the object with those arguments (the bar's total is set by the
    first call), or :meth:`step` once per unit of a known ``total``.  Hidden entirely when ``quiet`` (the commands'
    ``--quiet``); otherwise shown after ``delay`` seconds (default :data:`PROGRESS_DELAY`).  Use as a context
    manager (:func:`progress_bar`)."""

    def __init__(self, desc: str, *, quiet: bool = False, unit: str = "step", total: int | None = None,
                 delay: float | None = None, leave: bool = False):
        self.quiet, self.total = quiet, total
        self.options = {"desc": desc, "unit": unit, "delay": PROGRESS_DELAY if delay is None else delay,
                        "leave": leave}
        self.bar = None  # made on the first report, once the total is known

    def _made(self, total: int | None):
        if self.bar is None and not self.quiet:
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=sys.stderr, dynamic_ncols=True, **self.options)
        return self.bar

    def __call__(self, done: int, total: int, label: str = "") -> None:
        bar = self._made(total)
        if bar is None:
            return
        if bar.total != total:
            bar.total = total
        if label:
            bar.set_postfix_str(label, refresh=False)
        bar.update(done - bar.n)
        if done >= total and bar.format_dict["elapsed"] >= self.options["delay"]:
            bar.refresh()  # the last step is always shown (tqdm skips updates within mininterval of the previous)

    def step(self, label: str = "") -> None:
        """One more unit of the ``total`` given at construction done (``label``: the unit just finished)."""
        bar = self._made(self.total)
        if bar is not None:
            self(bar.n + 1, bar.total, label)

    def finish(self) -> None:
        """Show the bar complete (a step that reported no units, e.g. a stand-in, still ends at 100%)."""
        bar = self._made(self.total)
        if bar is not None:
            total = bar.total or max(bar.n, 1)
            self(total, total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@contextlib.contextmanager
def progress_bar(desc: str, *, quiet: bool = False, unit: str = "step", total: int | None = None,
                 delay: float | None = None, leave: bool = False) -> Iterator[Progress]:
    """A :class:`Progress` bar for the ``with`` block, closed at its end."""
    bar = Progress(desc, quiet=quiet, unit=unit, total=total, delay=delay, leave=leave)
    try:
        yield bar
    finally:
        bar.close()


def emit(obj: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj, default=lambda v: v.tolist() if hasattr(v, "tolist") else float(v)))
        return
    for key, val in obj.items():
        val = np.asarray(val)
        text = np.array2string(val, precision=6, max_line_width=100) if val.ndim else f"{float(val):.10g}" \
            if val.dtype.kind in "fi" else str(val)
        print(f"{key}: {text}")


def _parse_number(text: str, integer: bool):
    """The number an option's text spells: an int for integer text (any size: the check refuses int64 overflow),
    else a float ('nan' and 'inf' included: the check refuses them with the declared range)."""
    text = text.strip()
    if integer:
        try:
            return int(text)
        except ValueError:
            pass
    return float(text)


class OptionRefused(Exception):
    """A declared option's value refused by the validation layer.  Not a ValueError, so that argparse does not
    reword it: ``resprop.numeric.cli.main`` prints ``resprop: error: NAME: must lie in ..., got ...`` (the same
    form as every other bad input) and exits 2."""

    def __init__(self, error: ValueError) -> None:
        super().__init__(str(error))
        self.error = error


def parameter_type(parameter, flag: str):
    """An argparse ``type`` that parses a number and checks it against the declaration ``parameter`` by the one
    validation layer; a refused value raises :class:`OptionRefused` naming the option's destination
    (``--sigma-w2-out`` -> ``sigma_w2_out``)."""
    from resprop.numeric.engine.validation import ParameterError, check, describe

    name = flag.lstrip("-").replace("-", "_")

    def convert(text: str):
        try:
            value = _parse_number(text, parameter.integer)
        except ValueError:
            raise OptionRefused(ParameterError(name, f"must be {describe(parameter)}, got {text!r}")) from None
        try:
            return check(parameter, value, name=name)
        except ParameterError as exc:
            raise OptionRefused(exc) from None

    convert.__name__ = parameter.name  # argparse names the type in its fallback message
    return convert


def add_parameter_option(parser, parameter, flag: str | None = None, help: str | None = None, **kwargs):
    """Add ``--flag`` (default ``--`` + the parameter's name with ``-`` for ``_``) for a declared parameter (a
    ``resprop.derive.symbols.Parameter`` or its run-time copy in ``resprop.generated.parameters``).

    The help text is built from the declaration (``help`` first if given, then meaning, allowed range and
    convention); the value is parsed and checked by the one validation layer (exit 2 naming the option).  Other
    keyword arguments (``required``, ``default``, ``nargs``, ``dest``, ``metavar``) go to ``add_argument``; a
    default is shown in the help.
    """
    flag = flag or "--" + parameter.name.replace("_", "-")
    text = parameter.describe() if hasattr(parameter, "describe") else f"{parameter.meaning}; {parameter.domain}"
    if help:
        text = f"{help}; {text}"
    if kwargs.get("default") is not None:
        text += f" [default: {kwargs['default']}]"
    return parser.add_argument(flag, type=parameter_type(parameter, flag), help=text.replace("%", "%%"), **kwargs)
