"""Helpers the `resprop` subcommands share (the engine's and every theory's)."""
from __future__ import annotations

import json
import sys

import numpy as np


def interrupted(exc: KeyboardInterrupt, out=None) -> int:
    """Ctrl-C, or SIGTERM raised as resprop.numeric.engine.output.Interrupted: one line, exit 128 + the signal number."""
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
