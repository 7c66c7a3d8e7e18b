"""Helpers the `resprop` subcommands share (the engine's and every theory's)."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import json
import os
import sys
import time
from collections.abc import Iterator

import numpy as np

from resprop.numeric.engine.validation import Declared


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
    (``--sigma-w2-out`` -> ``sigma_w2_out``).  The converter keeps the declaration as ``.parameter``."""
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
    convert.parameter = parameter  # type: ignore[attr-defined]
    return convert


# --------------------------------------------------------------------------- one command-line vocabulary
#: The command line's own concepts that no derivation declares, one flag and one meaning each in every subcommand
#: (issue 28 item 2); a subcommand narrows the range with ``add_parameter_option(..., domain=...)``.  The
#: derivations' parameters (``--sigma-w2``, ``--gamma``, ``--rho``, ``--alpha``, ...) come from their declarations
#: in the generated parameters modules (``resprop.generated.parameters.declared``) instead.
VOCABULARY = {
    "depth": Declared("depth", "[0, inf)", "number of residual layers (blocks) after the input (the input is layer "
                      "0)", integer=True),
    "width": Declared("width", "[1, inf)", "hidden width n (neurons per layer)", integer=True),
    "samples": Declared("samples", "[1, inf)", "number of independently initialised networks simulated",
                        integer=True),
    "seed": Declared("seed", "[0, inf)", "seed of the random numbers (the same seed gives the same numbers)",
                     integer=True),
}


def option_help(parameter, help: str | None = None, *, default=None, default_text: str | None = None,
                required: bool = False, each: bool = False) -> str:
    """The help line of a declared option: its meaning (then ``help``, the subcommand's own remark), its range and
    convention, and its default (``default_text`` when the default is described in words) or 'required'."""
    from resprop.numeric.engine.validation import describe

    text = parameter.meaning + (f", {help}" if help else "")
    text += f"; {'each ' if each else ''}{describe(parameter)}"
    if getattr(parameter, "convention", ""):
        text += f" ({parameter.convention})"
    if default_text:
        text += f"; default: {default_text}"
    elif default is not None:
        text += f"; default: {' '.join(map(str, default)) if isinstance(default, (list, tuple)) else default}"
    elif required:
        text += "; required"
    return text


def add_parameter_option(parser, parameter, flag: str | None = None, help: str | None = None, *,
                         domain: str | None = None, integer: bool | None = None, default_text: str | None = None,
                         deprecated=(), **kwargs):
    """Add ``--flag`` (default ``--`` + the parameter's name with ``-`` for ``_``) for a declared parameter: a
    ``resprop.derive.symbols.Parameter``, its run-time copy in the generated parameters modules, or the name of a
    :data:`VOCABULARY` entry (``"depth"``, ``"width"``, ``"samples"``, ``"seed"``).  ``domain`` narrows the
    declared range for this subcommand, ``integer`` overrides whether it takes integers only.

    The help line is :func:`option_help` (meaning, ``help``, range, convention, default); the value is parsed and
    checked by the one validation layer (exit 2 naming the option).  ``deprecated`` lists old spellings of the
    option, accepted through :func:`add_deprecated_alias` (hidden from --help, one deprecation line on stderr).
    Other keyword arguments (``required``, ``default``, ``nargs``, ``dest``, ``metavar``) go to
    ``add_argument``.  The action keeps the declaration as ``.parameter``.
    """
    if isinstance(parameter, str):
        parameter = VOCABULARY[parameter]
    if domain is not None:
        parameter = dataclasses.replace(parameter, domain=domain)
    if integer is not None:
        parameter = dataclasses.replace(parameter, integer=integer)
    flag = flag or "--" + parameter.name.replace("_", "-")
    text = option_help(parameter, help, default=kwargs.get("default"), default_text=default_text,
                       required=bool(kwargs.get("required")), each=kwargs.get("nargs") in ("+", "*"))
    action = parser.add_argument(flag, type=parameter_type(parameter, flag), help=text.replace("%", "%%"), **kwargs)
    action.parameter = parameter
    for old in deprecated:
        add_deprecated_alias(parser, old, action)
    return action


class DeprecatedAlias(argparse.Action):
    """The old spelling of a renamed option, accepted for one release: hidden from --help, it prints
    ``resprop: OLD is deprecated; use NEW`` on stderr and stores its value where the new option does (or in its
    own ``dest`` when the old option meant something else, e.g. gamma^2 for gamma)."""

    def __init__(self, option_strings, dest, replacement: str = "", note: str = "", target=None, **kwargs):
        kwargs["help"] = argparse.SUPPRESS
        super().__init__(option_strings, dest, **kwargs)
        self.replacement, self.note, self.target = replacement, note, target

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"resprop: {option_string} is deprecated; use {self.replacement}{self.note}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_deprecated_alias(parser, old: str, target, *, dest: str | None = None, type=None, note: str = ""):
    """Accept ``old`` as a deprecated spelling of the option ``target`` (the action ``add_argument`` returned).

    By default the alias parses its value as ``target`` does (a declared option's check then names ``old``) and
    stores it in ``target.dest``; give ``dest`` and ``type`` when the old option meant another quantity, and
    ``note`` to say how to convert (it follows ``use NEW`` in the deprecation line).  When ``target`` is
    required, giving ``old`` instead satisfies it (:class:`Parser`).  Listed in docs/api-renames.md."""
    if type is None:
        type = parameter_type(target.type.parameter, old) if hasattr(target.type, "parameter") else target.type
    kwargs = {"nargs": target.nargs} if target.nargs is not None else {}
    return parser.add_argument(old, action=DeprecatedAlias, dest=dest or target.dest, type=type,
                               default=argparse.SUPPRESS, metavar=target.metavar, replacement=target.option_strings[0],
                               note=note, target=target, **kwargs)


def deprecated_aliases(parser) -> list[DeprecatedAlias]:
    """The deprecated aliases of ``parser`` (one subcommand's parser)."""
    return [a for a in parser._actions if isinstance(a, DeprecatedAlias)]


def did_you_mean(word: str, candidates, quote: bool = False) -> str:
    """'; did you mean X?' for the closest of ``candidates`` to a mistyped ``word`` (difflib), else ''."""
    close = difflib.get_close_matches(word, [str(c) for c in candidates], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close and quote else f"; did you mean {close[0]}?" if close else ""


class Parser(argparse.ArgumentParser):
    """The parser of ``resprop`` and of each subcommand: errors on one line after the usage of the parser that
    found them (a subcommand's own usage for its options), exit 2; an unknown option is named, with the closest
    option of that subcommand ("did you mean"), before a missing required option is reported; an unknown
    subcommand or choice gets the closest valid one; a deprecated alias stands in for the required option it
    renames."""

    def error(self, message):  # argparse already exits 2; keep its message on one line
        self.print_usage(sys.stderr)
        self.exit(2, f"resprop: error: {message}\n")

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            names = [str(c) for c in action.choices]
            what = "subcommand" if isinstance(action, argparse._SubParsersAction) else "choice"
            hint = did_you_mean(str(value), names, quote=True)
            raise argparse.ArgumentError(action, f"invalid {what} {value!r}{hint} (choose from {', '.join(names)})")
        super()._check_value(action, value)

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        options = self._option_args(args)
        for arg in options:
            head = arg.split("=", 1)[0]
            if self._lookup(head) is None:
                visible = [o for a in self._actions if a.help != argparse.SUPPRESS for o in a.option_strings]
                self.error(f"unrecognized option {head}{did_you_mean(head, visible)}")
        relaxed = []
        for arg in options:
            action = self._lookup(arg.split("=", 1)[0])
            target = getattr(action, "target", None)
            if isinstance(action, DeprecatedAlias) and target is not None and target.required:
                target.required = False
                relaxed.append(target)
        try:
            return super().parse_known_args(args, namespace)
        finally:
            for target in relaxed:
                target.required = True

    def _option_args(self, args) -> list[str]:
        """The arguments that argparse will read as options of this parser: up to ``--``, and for the top-level
        parser up to the subcommand; numbers (``-1``, ``-5e-324``) and text with spaces are values."""
        has_sub = any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        out = []
        for arg in args:
            if arg == "--":
                break
            if not arg or arg[0] not in self.prefix_chars or len(arg) == 1 or " " in arg or _is_number(arg):
                if has_sub:
                    break
                continue
            out.append(arg)
        return out

    def _lookup(self, head: str):
        """The action an option string selects: exact, a short option with its value attached (``-n5``) or a
        unique abbreviation of a long option (an ambiguous one is left to argparse, which names the matches)."""
        if head in self._option_string_actions:
            return self._option_string_actions[head]
        if not head.startswith("--"):
            return self._option_string_actions.get(head[:2])
        matches = {a for opt, a in self._option_string_actions.items() if opt.startswith(head)} \
            if self.allow_abbrev else set()
        return next(iter(matches)) if len(matches) == 1 else (True if matches else None)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
