"""The kinds of grid point that ``resprop sweep`` can compute (see numeric/sweep/runner.py for the engine).

A :class:`Kind` names its parameters (with their checks, defaults, units and descriptions), its outputs (units,
description, paper equation) and the function that computes one grid point from its parameters, its flat grid
index and the root seed.  Monte Carlo kinds draw from ``SeedSequence(root_seed, spawn_key=(flat_index,))``.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.validation import ParameterError

#: the largest depth / number of layers each kind accepts (as the functions it calls)
MAX_DEPTH = 10**6    # resprop.numeric.theories.fischer.field_theory.MAX_DEPTH
MAX_LAYERS = 10**7   # resprop.numeric.engine.monte_carlo.MAX_LAYERS

# --------------------------------------------------------------------------- parameter checks
def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _int_check(minimum: int, maximum: int | None = None) -> Callable[[str, Any], int]:
    allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"

    def check(name, v):
        if (not _is_real(v) or not math.isfinite(float(v)) or not float(v).is_integer() or int(v) < minimum
                or (maximum is not None and int(v) > maximum)):
            raise ParameterError(name, f"must be an integer {allowed}, got {v!r}")
        return int(v)
    check.kind = "int"  # type: ignore[attr-defined]
    return check


def _float_check(validator, allowed: str) -> Callable[[str, Any], float]:
    def check(name, v):
        if not _is_real(v):
            raise ParameterError(name, f"must be a real number in {allowed}, got {v!r}")
        return float(validator(name, float(v)))
    check.kind = "float"  # type: ignore[attr-defined]
    return check


def _bool_check(name, v):
    if not isinstance(v, (bool, np.bool_)):
        raise ParameterError(name, f"must be true or false, got {v!r}")
    return bool(v)


_bool_check.kind = "bool"  # type: ignore[attr-defined]


def _choice_check(allowed: tuple[str, ...]):
    def check(name, v):
        if not isinstance(v, str):
            raise ParameterError(name, f"unknown value {v!r}; allowed: {', '.join(allowed)}")
        return V.choice(name, v, allowed)
    check.kind = "str"  # type: ignore[attr-defined]
    return check


def _string_check(parse: Callable[[str], Any], allowed: str) -> Callable[[str, Any], str]:
    """A check for a string parameter that ``parse`` accepts; its error is re-raised under the spec key."""
    def check(name, v):
        if not isinstance(v, str):
            raise ParameterError(name, f"must be {allowed}, got {v!r}")
        try:
            parse(v)
        except ParameterError as exc:
            raise ParameterError(name, str(exc).split(": ", 1)[-1]) from None
        return v
    check.kind = "str"  # type: ignore[attr-defined]
    return check



@dataclass(frozen=True)
class Param:
    check: Callable[[str, Any], Any]
    required: bool = True
    default: Any = None
    units: str = "1"
    description: str = ""


@dataclass(frozen=True)
class Output:
    units: str
    description: str
    equation: str
    dtype: str = "float64"


@dataclass(frozen=True)
class Kind:
    """A kind of grid point, declared by a theory (its registry entry's ``sweep_kinds``).  ``output_names``, when
    given, picks the outputs present for the parameters present (default: all of ``outputs``)."""

    params: dict[str, Param]
    outputs: dict[str, Output]
    compute: Callable[[dict, int, int], dict[str, Any]]
    cross_check: Callable[[dict, dict[str, str]], None]
    output_names: Callable[[set[str]], tuple[str, ...]] | None = None



def _memory_check(p: dict, where: dict[str, str], outputs: dict[str, int], work_arrays: int) -> None:
    """resprop.numeric.engine.monte_carlo's memory bound for this point, with the error under the spec key."""
    from resprop.numeric.engine import monte_carlo as mc
    method = p.get("method", "reduced")
    size = min(p["samples"], mc._auto_chunk(p["width"], method))
    try:
        mc._check_memory(outputs, size, p["width"], method, work_arrays)
    except ParameterError as exc:
        key = exc.parameter.split(",")[0].strip()
        raise ParameterError(where.get(key, key), str(exc).split(": ", 1)[-1]) from None


def kinds() -> dict[str, Kind]:
    """Every sweep kind, collected from the registered theories (name -> Kind)."""
    from resprop import registry

    out: dict[str, Kind] = {}
    for th in registry.theories().values():
        if th.sweep_kinds:
            out.update(th.load("sweep_kinds"))
    return out


def __getattr__(name: str):
    if name == "KINDS":
        return kinds()
    raise AttributeError(name)


def _output_names(kind: str, present: set[str]) -> tuple[str, ...]:
    k = kinds()[kind]
    return k.output_names(present) if k.output_names else tuple(k.outputs)
