"""Depth recursions as data, and their lowering to fused in-place NumPy code.

A :class:`Recursion` is a simultaneous one-step update ``state_l = update(state_{l-1}, ...)`` of elementwise
state arrays (say K_ab and Theta_ab of the P x P kernels), iterated over all layers inside one generated
function.  Its right-hand sides may read

* ``rows`` / ``cols``: per-layer quantities of the first / second input of a pair (the diagonal K_aa, K_bb of
  the previous layer), passed as arrays indexed by layer that broadcast against the state (``(L, h, 1)`` and
  ``(L, 1, n)`` for a strip of an upper triangle, or ``(L, M)`` for a list of pairs);
* ``sequences``: per-layer scalars (gamma^2, lambda_l^2 sigma_w^2, ...), arrays of length L;
* ``callbacks``: undefined functions of elementwise arguments, evaluated by the caller as
  ``f(layer, argument, out)`` (a tabulated dual kernel of an activation without a closed form), or
  ``f(layer, a, b, ..., out)`` for several arguments.

Without ``sequences`` the number of layers is the length of the first ``rows`` (or ``cols``) array; a quantity
that is constant over the layers but differs between elements (vector mode: a batch of hyperparameters) is a
row with a zero-stride layer axis, ``numpy.broadcast_to(x, (L,) + x.shape)``.  ``Min`` and ``Max`` lower to
``numpy.minimum`` and ``numpy.maximum`` (an explicit clip into [lo, hi]).

:func:`lower` turns a recursion into the body of a Python loop: ``sympy.cse`` finds the common
subexpressions; subexpressions that do not involve the state (row, column, per-layer and constant factors) are
hoisted out of the elementwise work and computed on arrays for a chunk of ``LAYER_CHUNK`` layers at once (one
call per chunk instead of one per layer and strip: the Python overhead of small calls is what limits cache-sized
strips); the elementwise rest becomes a
sequence of NumPy ufunc calls with ``out=`` into a fixed pool of preallocated buffers, reusing a buffer as
soon as its value is dead (liveness over the straight-line body).  At the end of each layer the buffer names are
permuted so that the state names refer to the new values: no array is allocated inside the loop.

Hardening by construction: the argument of every inverse sine or cosine is clipped into [-1, 1], the argument
of every elementwise square root is clamped at 0 (1 - t^2 and K_aa K_bb - K_ab^2 are >= 0 exactly and may
miss by an ulp), and :class:`UnitClip` clips a correlation explicitly where the derivation says so.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import sympy as sp
from sympy.codegen.cfunctions import expm1 as _expm1

from resprop.derive.results import Source


class UnitClip(sp.Function):
    """clip(t, -1, 1): a correlation that is in [-1, 1] exactly, clipped against round-off (printed as t)."""

    nargs = 1

    def _latex(self, printer, exp=None):
        inner = printer._print(self.args[0])
        return inner if exp is None else f"\\left({inner}\\right)^{{{exp}}}"

    def _numpycode(self, printer):
        return f"numpy.clip({printer._print(self.args[0])}, -1.0, 1.0)"

    def _eval_derivative(self, s):
        return self.args[0].diff(s)


@dataclass(frozen=True)
class Recursion:
    """A fused depth recursion: see the module docstring.

    ``state`` pairs each state symbol with its update (all updates use the values of the previous layer);
    ``domain`` is the docstring sentence stating the valid inputs; ``notes`` further docstring lines.
    """

    name: str
    description: str
    source: Source
    state: tuple[tuple[sp.Symbol, sp.Expr], ...]
    rows: tuple[sp.Symbol, ...] = ()
    cols: tuple[sp.Symbol, ...] = ()
    sequences: tuple[sp.Symbol, ...] = ()
    callbacks: tuple[str, ...] = ()
    domain: str = ""
    notes: tuple[str, ...] = ()
    #: intermediate quantities (symbol, expression), computed in order before the updates; they fix the form the
    #: kernel evaluates (SymPy would otherwise merge sqrt(1 + 2 K_aa) sqrt(1 + 2 K_bb) into one root)
    definitions: tuple[tuple[sp.Symbol, sp.Expr], ...] = ()

    @property
    def state_names(self) -> list[str]:
        return [s.name for s, _ in self.state]

    @property
    def args(self) -> list[str]:
        return self.state_names + [s.name for s in (*self.rows, *self.cols, *self.sequences)]


# --------------------------------------------------------------------------- lowering
@dataclass
class _Op:
    """One ufunc call: ``out = func(*operands)``; operands are temp ids (int) or per-layer value names (str)."""

    func: str
    operands: list
    kwargs: str = ""
    out: int = -1  # temp id written


@dataclass
class Lowered:
    """The loop body of a recursion: per-layer value lines, ufunc lines, the buffer permutation."""

    prelude: list[tuple[str, str, bool]]  # hoisted values: (name, expression over all layers, has a row/column)
    body: list[str]  # elementwise ufunc calls
    rotate: str  # the buffer permutation ending a layer
    buffers: list[str]  # names of the extra buffers to preallocate
    passes: int  # number of full-size array passes per layer (the cost)
    callbacks_used: list[str] = field(default_factory=list)


#: layers whose hoisted (non-elementwise) values are computed together
LAYER_CHUNK = 64

_UFUNC = {sp.asin: "numpy.arcsin", sp.acos: "numpy.arccos", sp.atan: "numpy.arctan", sp.exp: "numpy.exp",
          sp.log: "numpy.log", sp.sin: "numpy.sin", sp.cos: "numpy.cos", sp.tan: "numpy.tan",
          sp.sinh: "numpy.sinh", sp.cosh: "numpy.cosh", sp.tanh: "numpy.tanh", sp.Abs: "numpy.absolute",
          sp.erf: "scipy.special.erf", sp.erfc: "scipy.special.erfc", sp.sign: "numpy.sign",
          _expm1: "numpy.expm1"}  # expm1, sign: closed_forms.stable_dual (sin^2, ... at tiny and large K)


class _Lowering:
    def __init__(self, rec: Recursion, printer) -> None:
        self.rec = rec
        self.printer = printer
        self.state = {s for s, _ in rec.state}
        self.rows, self.cols = set(rec.rows), set(rec.cols)
        self.callbacks = set(rec.callbacks)
        self.ops: list[_Op] = []
        self.prelude: list[tuple[str, str, bool]] = []
        self.values: dict[sp.Expr, str] = {}  # non-elementwise subexpression -> per-layer name
        self.temps: dict[sp.Expr, int] = {}  # elementwise subexpression -> temp id
        self.n_temps = 0
        self.initial: dict[int, str] = {}  # temp id -> state name holding it at the start of a layer
        self.cse_values: dict[sp.Symbol, object] = {}  # cse symbol -> temp id or value name
        self.callbacks_used: list[str] = []
        self.clipped: set[int] = set()  # temps already clipped into [-1, 1]
        self.twin: dict[int, int] = {}  # temp -> its clipped copy
        self.unit_args: set[sp.Expr] = set()  # arguments of an arcsine / arccosine (set by `lower`)
        self.nonneg: set[int] = set()  # temps >= 0 by construction (1 - t^2 of a clipped t): no clamp
        self.sequence_names = {f"{s.name}_l" for s in rec.sequences}

    # -- classification
    def is_elem(self, e: sp.Expr) -> bool:
        if any(isinstance(f, sp.core.function.AppliedUndef) for f in e.atoms(sp.core.function.AppliedUndef)):
            return True
        syms = e.free_symbols
        if syms & self.state:
            return True
        if any(isinstance(self.cse_values.get(s), int) for s in syms):
            return True
        return bool(self._side(syms) == {"row", "col"})

    def _side(self, syms) -> set[str]:
        out = set()
        for s in syms:
            v = self.cse_values.get(s)
            if isinstance(v, tuple):  # a hoisted cse value: its sides
                out |= v[1]
            elif s in self.rows:
                out.add("row")
            elif s in self.cols:
                out.add("col")
        return out

    # -- values (hoisted, per layer)
    def value(self, e: sp.Expr) -> str:
        e = sp.sympify(e)
        if e.is_Number:
            return repr(float(e))
        if e in self.values:
            return self.values[e]
        if isinstance(e, sp.Symbol):
            v = self.cse_values.get(e)
            if isinstance(v, tuple):
                return v[0]
            return f"{e.name}_l"
        # computed for a chunk of layers at once (rows (c, h, 1), columns (c, 1, n) and sequences (c, 1, 1)
        # broadcast), so the per-layer loop only indexes the result (a Python float for a scalar value)
        subs = {s: sp.Symbol(f"{v[0]}_c") for s, v in self.cse_values.items()
                if isinstance(v, tuple) and s in e.free_symbols}
        subs.update({s: sp.Symbol(f"{s.name}_c") for s in e.free_symbols if s not in self.cse_values})
        name = f"v{len(self.values)}"
        self.prelude.append((name, self.printer.doprint(e.xreplace(subs)), bool(self._side(e.free_symbols))))
        self.values[e] = name
        return name

    # -- elementwise temps
    def new(self, func: str, operands: list, kwargs: str = "") -> int:
        t = self.n_temps
        self.n_temps += 1
        self.ops.append(_Op(func, operands, kwargs, t))
        return t

    def operand(self, e: sp.Expr):
        """A temp id for an elementwise expression, a value name otherwise."""
        return self.elem(e) if self.is_elem(e) else self.value(e)

    def elem(self, e: sp.Expr) -> int:
        if isinstance(e, sp.Symbol):
            if e in self.cse_values:
                v = self.cse_values[e]
                assert isinstance(v, int)
                return v
            if e in self.state:
                return self.temps[e]
        if e in self.temps:
            return self.temps[e]
        t = self._elem(e)
        self.temps[e] = t
        return t

    def _split(self, args):
        """Elementwise args, and the rest grouped into a row part, a column part and a scalar part."""
        elem, row, col, scalar = [], [], [], []
        for a in args:
            if self.is_elem(a):
                elem.append(a)
            else:
                side = self._side(a.free_symbols)
                (row if side == {"row"} else col if side == {"col"} else scalar).append(a)
        return elem, row, col, scalar

    def _coefficients(self, row, col, scalar, combine):
        """Fold the scalar part into the row part (or the column part); returns the value names to apply."""
        parts = []
        if row:
            parts.append(combine(row + scalar))
            scalar = []
        if col:
            parts.append(combine(col + scalar))
            scalar = []
        if scalar:
            parts.append(combine(scalar))
        return [self.value(p) for p in parts]

    def _elem(self, e: sp.Expr) -> int:
        if isinstance(e, sp.Add):
            return self._add(e)
        if isinstance(e, sp.Mul):
            return self._mul(e)
        if isinstance(e, sp.Pow):
            return self._pow(e)
        if isinstance(e, UnitClip):
            t = self.new("numpy.clip", [self.operand(e.args[0]), "-1.0", "1.0"])
            self.clipped.add(t)
            return t
        if isinstance(e, sp.core.function.AppliedUndef):
            name = type(e).__name__
            if name not in self.callbacks:
                raise ValueError(f"{self.rec.name}: unknown callback {name}")
            if name not in self.callbacks_used:
                self.callbacks_used.append(name)
            return self.new(f"@{name}", [self.operand(a) for a in e.args])
        if isinstance(e, (sp.Min, sp.Max)):  # elementwise minimum / maximum (a clip into [lo, hi])
            ufunc = "numpy.minimum" if isinstance(e, sp.Min) else "numpy.maximum"
            args = sorted((self.operand(a) for a in e.args), key=lambda a: not isinstance(a, int))
            acc = self.new(ufunc, args[:2])
            for a in args[2:]:
                acc = self.new(ufunc, [acc, a])
            return acc
        func = type(e)
        if func in (sp.asin, sp.acos):
            arg = self.operand(e.args[0])
            return self.new(_UFUNC[func], [self._clipped(arg)])
        if func in _UFUNC:
            return self.new(_UFUNC[func], [self.operand(e.args[0])])
        if e.is_Symbol and self.is_elem(e):  # both row and column: an outer product
            raise ValueError(f"{self.rec.name}: cannot lower {e}")
        # a product/sum of row and column values only: one broadcast pass
        raise ValueError(f"{self.rec.name}: cannot lower {e} ({type(e).__name__})")

    def _clipped(self, arg):
        """The copy of ``arg`` clipped into [-1, 1] (made once)."""
        if arg in self.clipped:
            return arg
        if arg not in self.twin:
            self.twin[arg] = self.new("numpy.clip", [arg, "-1.0", "1.0"])
            self.clipped.add(self.twin[arg])
        return self.twin[arg]

    def _add(self, e: sp.Add) -> int:
        elem, row, col, scalar = self._split(e.args)
        pos: list[sp.Expr] = []
        neg: list[sp.Expr] = []
        for a in elem:
            c, rest = a.as_coeff_Mul()
            (neg if c.is_Number and c < 0 else pos).append(-a if c.is_Number and c < 0 else a)
        extra = self._coefficients(row, col, scalar, lambda xs: sp.Add(*xs))
        if not pos and not neg:  # a row value plus a column value: one broadcast pass
            acc = self.new("numpy.add", [extra.pop(0), extra.pop(0)])
        elif not pos:  # start from a value: v - x
            start = extra.pop(0) if extra else "0.0"
            x = self.operand(neg.pop(0))
            acc = self.new("numpy.subtract", [start, x])
            if start == "1.0" and x in self.nonneg and not neg and not extra:  # 1 - t^2 with t in [-1, 1]
                self.nonneg.add(acc)
        else:
            acc = self.operand(pos.pop(0))
            if not isinstance(acc, int):
                raise ValueError(f"{self.rec.name}: elementwise sum without elementwise term: {e}")
        for a in pos:
            acc = self.new("numpy.add", [acc, self.operand(a)])
        for a in neg:
            acc = self.new("numpy.subtract", [acc, self.operand(a)])
        for v in extra:
            acc = self.new("numpy.add", [acc, v])
        return acc

    def _mul(self, e: sp.Mul) -> int:
        num, den = [], []
        for f in e.args:
            if isinstance(f, sp.Pow) and f.exp.is_Number and f.exp < 0 and self.is_elem(f):
                den.append(f.base ** (-f.exp))
            else:
                num.append(f)
        elem, row, col, scalar = self._split(num)
        coeffs = self._coefficients(row, col, scalar, lambda xs: sp.Mul(*xs))
        if elem:
            acc = self.operand(elem[0])
            for f in elem[1:]:
                acc = self.new("numpy.multiply", [acc, self.operand(f)])
        elif den:
            acc = self.new("numpy.divide", [coeffs.pop(0) if coeffs else "1.0", self.operand(den.pop(0))])
        elif len(coeffs) >= 2:  # row value times column value: an outer product
            acc = self.new("numpy.multiply", [coeffs.pop(0), coeffs.pop(0)])
        else:
            raise ValueError(f"{self.rec.name}: not elementwise: {e}")
        for d in den:
            acc = self.new("numpy.divide", [acc, self.operand(d)])
        for v in coeffs:
            acc = self.new("numpy.multiply", [acc, v])
        assert isinstance(acc, int)
        return acc

    def _pow(self, e: sp.Pow) -> int:
        base, ex = e.args
        b = self.operand(base)
        if ex == 2:
            if base in self.unit_args:  # the argument of an arcsine: square its clipped copy, so 1 - t^2 >= 0
                b = self._clipped(b)
                t = self.new("numpy.multiply", [b, b])
                self.nonneg.add(t)
                return t
            return self.new("numpy.multiply", [b, b])
        if ex == -1:
            return self.new("numpy.divide", ["1.0", b])
        if ex in (sp.S.Half, -sp.S.Half, sp.Rational(3, 2)):
            root = self.new("numpy.sqrt", [b if b in self.nonneg else self.new("numpy.maximum", [b, "0.0"])])
            if ex == sp.S.Half:
                return root
            if ex == -sp.S.Half:
                return self.new("numpy.divide", ["1.0", root])
            return self.new("numpy.multiply", [b, root])
        return self.new("numpy.power", [b, self.value(ex)])


def lower(rec: Recursion, printer) -> Lowered:
    """The loop body of ``rec`` (see the module docstring); ``printer`` prints the hoisted values."""
    low = _Lowering(rec, printer)
    for s in low.state:
        t = low.n_temps
        low.n_temps += 1
        low.temps[s] = t
        low.initial[t] = s.name
    for e in (*(u for _, u in rec.definitions), *(u for _, u in rec.state)):
        low.unit_args |= {f.args[0] for f in e.atoms(sp.asin, sp.acos)}
    for sym, sub in rec.definitions:
        if low.is_elem(sub):
            low.cse_values[sym] = low.elem(sub)
        else:
            low.cse_values[sym] = (low.value(sub), low._side(sub.free_symbols))
    names = sp.numbered_symbols("x")
    replacements, reduced = sp.cse([u for _, u in rec.state], symbols=names, order="none")
    for e in (*(u for _, u in replacements), *reduced):
        low.unit_args |= {f.args[0] for f in e.atoms(sp.asin, sp.acos)}
    for sym, sub in replacements:
        if low.is_elem(sub):
            low.cse_values[sym] = low.elem(sub)
        else:
            low.cse_values[sym] = (low.value(sub), low._side(sub.free_symbols))
    finals = []
    for expr in reduced:
        v = low.operand(expr)
        if not isinstance(v, int) or v in finals:  # a value or a duplicate: copy into a buffer of its own
            v = low.new("numpy.copyto", [v])
        finals.append(v)
    return _allocate(rec, low, finals)


def _allocate(rec: Recursion, low: _Lowering, finals: list[int]) -> Lowered:
    ops = low.ops
    last: dict[int, int] = {}
    for i, op in enumerate(ops):
        for a in op.operands:
            if isinstance(a, int):
                last[a] = i
    for t in finals:
        last[t] = len(ops)  # live until the end of the layer
    state_names = rec.state_names
    where: dict[int, str] = {t: name for t, name in low.initial.items()}
    free: list[str] = []
    extra: list[str] = []
    body: list[str] = []
    for i, op in enumerate(ops):
        # the buffer of an operand that dies here takes the result (elementwise ufuncs allow out = input);
        # a callback never writes over its own argument
        dying: list[str] = []
        for a in op.operands:
            if isinstance(a, int) and last.get(a, -1) == i and where[a] not in dying:
                dying.append(where[a])
        if dying and not op.func.startswith("@"):
            out = dying.pop(0)
        elif free:
            out = free.pop(0)
        else:
            out = f"b{len(extra)}"
            extra.append(out)
        free.extend(dying)
        args = [where[a] if isinstance(a, int) else a for a in op.operands]
        if op.func.startswith("@"):
            body.append(f"{op.func[1:]}(l, {', '.join(args)}, {out})")
        elif op.func == "numpy.copyto":
            body.append(f"numpy.copyto({out}, {args[0]})")
        elif op.func == "numpy.clip":
            body.append(f"numpy.clip({args[0]}, {args[1]}, {args[2]}, out={out})")
        elif (op.func == "numpy.multiply" and args[0] == out and args[1] in low.sequence_names):
            body.append(f"if {args[1]} != 1.0:")  # a gain of one (gamma = 1) costs no pass
            body.append(f"    {op.func}({', '.join(args)}, out={out})")
        else:
            body.append(f"{op.func}({', '.join(args)}, out={out})")
        where[op.out] = out
        if op.out not in last:  # never read: the buffer is free again
            free.append(out)
    new_home = [where[t] for t in finals]
    everything = state_names + extra
    rest = [b for b in everything if b not in new_home]
    rotate = f"{', '.join(everything)} = {', '.join(new_home + rest)}"
    return Lowered(prelude=low.prelude, body=body, rotate=rotate, buffers=extra, passes=len(ops),
                   callbacks_used=low.callbacks_used)


def recursion_spec(rec: Recursion, printer) -> dict:
    """Everything the recursion template needs for one recursion."""
    lowered = lower(rec, printer)
    per_layer = [s.name for s in (*rec.rows, *rec.cols, *rec.sequences)]
    body, hoisted = "\n".join(lowered.body), "\n".join(x for _, x, _ in lowered.prelude)
    return {"name": rec.name, "description": rec.description, "source": rec.source.cite(),
            "states": rec.state_names, "rows": [s.name for s in rec.rows], "cols": [s.name for s in rec.cols],
            "sequences": [s.name for s in rec.sequences], "callbacks": lowered.callbacks_used,
            "per_layer": per_layer,
            "used_per_layer": [n for n in per_layer if re.search(rf"\b{n}_l\b", body)],
            "used_chunk": [n for n in per_layer if re.search(rf"\b{n}_c\b", hoisted)],
            "domain": rec.domain, "notes": list(rec.notes),
            "updates": [(s.name, "=", str(u)) for s, u in rec.definitions]
            + [(s.name, "<-", str(u)) for s, u in rec.state],
            "prelude": [{"name": n, "expr": x, "sided": sided, "in_body": bool(re.search(rf"\b{n}\b", body))}
                        for n, x, sided in lowered.prelude],
            "chunk": LAYER_CHUNK, "body": lowered.body, "rotate": lowered.rotate,
            "buffers": lowered.buffers, "passes": lowered.passes}


def recursions_of(derivation) -> Sequence[Recursion]:
    """The fused recursions a derivation declares (``derivation.recursions``; none by default)."""
    return tuple(getattr(derivation, "recursions", ()) or ())
