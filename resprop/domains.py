"""Domains of declared parameters: the interval strings ("(0, inf)", "[-1, 1]", "real", "|K_ab| <= sqrt(K_aa K_bb)").

Parsed at derive time (resprop.derive.results, resprop.derive.symbols) and at run time by the one validation layer
(resprop.numeric.engine.validation, which the generated kernels call): so this module depends on neither layer,
only on the standard library.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: relative round-off tolerated on |K_ab| <= sqrt(K_aa K_bb) before it is an error; K_ab is then clipped
COVARIANCE_RTOL = 1e-12

_BOUND = {"inf": math.inf, "-inf": -math.inf, "pi": math.pi, "-pi": -math.pi}
_INTERVAL = re.compile(r"^([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])$")
_COVARIANCE = re.compile(r"^\|(\w+)\| <= sqrt\((\w+) (\w+)\)$")


@dataclass(frozen=True)
class Domain:
    """A parsed domain: an interval (``lo``, ``hi`` with closed flags) or the covariance constraint
    ``|x| <= sqrt(var_a var_b)`` on the named variances (``kind == "covariance"``)."""

    text: str
    kind: str = "interval"
    lo: float = -math.inf
    hi: float = math.inf
    lo_closed: bool = False
    hi_closed: bool = False
    var_a: str = ""
    var_b: str = ""

    @property
    def correlation_type(self) -> bool:
        """A correlation or covariance: 1 - rho^2 (or K_aa K_bb - K_ab^2) may reach 0 on the boundary."""
        return self.kind == "covariance" or (self.lo, self.hi) == (-1.0, 1.0)

    def contains(self, x: float) -> bool:
        """x lies in the interval (a covariance domain contains every real: it needs the variances)."""
        if self.kind != "interval":
            return True
        return (x >= self.lo if self.lo_closed else x > self.lo) and (x <= self.hi if self.hi_closed else x < self.hi)


def _bound(token: str, text: str) -> float:
    if token in _BOUND:
        return _BOUND[token]
    try:
        return float(int(token)) if re.fullmatch(r"-?\d+", token) else float(token)
    except ValueError:
        raise ValueError(f"unparseable domain {text!r}: bound {token!r} is not a number, inf or pi") from None


def parse_domain(text: str) -> Domain:
    """'real', '[a, b]', '(a, b)', '[a, b)', '(a, b]' (a, b numbers, +-inf or +-pi) or '|x| <= sqrt(a b)'."""
    if text == "real":
        return Domain(text)
    m = _INTERVAL.match(text)
    if m:
        lo, hi = _bound(m.group(2), text), _bound(m.group(3), text)
        lo_closed, hi_closed = m.group(1) == "[", m.group(4) == "]"
        if not lo < hi or (lo_closed and math.isinf(lo)) or (hi_closed and math.isinf(hi)):
            raise ValueError(f"unparseable domain {text!r}: need lo < hi and open infinite ends")
        return Domain(text, "interval", lo, hi, lo_closed, hi_closed)
    m = _COVARIANCE.match(text)
    if m:
        return Domain(text, "covariance", var_a=m.group(2), var_b=m.group(3))
    raise ValueError(f"unparseable domain {text!r}; expected 'real', an interval such as '[0, inf)' "
                     "or '|K_ab| <= sqrt(K_aa K_bb)'")
