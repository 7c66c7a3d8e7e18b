"""Helpers the `resprop` subcommands share (the engine's and every theory's)."""
from __future__ import annotations

import json
import sys

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
