"""Typed results of the public Python API: frozen dataclasses with one name per concept across theories.

Every theory names its quantities the same way (``width`` the hidden width, ``depth`` the number of residual
layers, ``input_kernel`` the input kernel K^(0) / Q_0 / K^(1), ...); docs/api-renames.md lists the renames.
A result class is ``@dataclass(frozen=True)`` and mixes in :class:`ResultRecord`:

* attribute access (``res.chi_out``) is the interface; ``res["chi_out"]`` does the same for the field names;
* ``res.to_dict()`` gives plain JSON-ready data (arrays -> lists, NumPy scalars -> Python numbers, nested
  records -> dicts); fields that are None (an optional part not computed) are left out;
* ``res.fields()`` names the fields that are set.

The CLI's ``--json`` output is built from ``to_dict()``, so it uses the same names.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import numpy as np

__all__ = ["ResultRecord", "plain"]


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python data: records and mappings -> dicts, arrays and sequences -> lists,
    NumPy scalars -> Python scalars; non-finite floats stay floats (the JSON writer decides about them)."""
    if isinstance(value, ResultRecord):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [plain(v) for v in value.tolist()] if value.ndim else plain(value.item())
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return value
    return value


class ResultRecord:
    """Mixin for the frozen result dataclasses of the public API (see the module docstring)."""

    __slots__ = ()
    #: not a mapping: no iteration (and so no ``in``) over field names; use :meth:`fields` or :meth:`to_dict`
    __iter__ = None

    def fields(self) -> tuple[str, ...]:
        """The names of the fields that are set (not None), in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cast(Any, self)) if getattr(self, f.name) is not None)

    def __getitem__(self, name: str) -> Any:
        if not isinstance(name, str) or name not in {f.name for f in dataclasses.fields(cast(Any, self))}:
            raise KeyError(name)
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        """The set fields as plain JSON-ready data (arrays -> lists, nested records -> dicts)."""
        return {name: plain(getattr(self, name)) for name in self.fields()}
