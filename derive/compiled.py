"""Lowering of a pair recursion to a fused compiled (Numba) kernel: one pass over a tile, layers inside.

The NumPy lowering (:mod:`resprop.derive.recursion`) turns a :class:`Recursion` into a sequence of ufunc passes
over a strip per layer; each pass reads and writes the whole strip, so the kernel is bound by memory traffic and
by the ufuncs' own speed.  This lowering emits scalar code instead, for a compiled loop that keeps an element's
state in registers while it goes through the layers of a block:

* every right-hand side (the recursion's ``definitions``, the common subexpressions of ``sympy.cse``, the
  updates) is classified by what it reads: the per-layer scalars only (``layer``), the first input's diagonal
  (``row``), the second input's (``col``), or the pair state / both inputs (``elem``);
* the maximal non-elementwise factors and summands of every elementwise expression are hoisted (``2 w_l / pi``,
  ``g_l`` ...), so that the innermost loop does only what depends on the pair;
* ``prepare`` evaluates the layer, row and column values once per block of layers for all P inputs (O(P L));
  ``run`` takes a tile of the state through the block: rows of the tile outside, then a block of ``JB`` columns
  whose state stays in L1, layers inside it and the columns innermost (the loop the compiler vectorises);
* arcsine and arccosine are the division-free polynomial evaluations of
  :mod:`resprop.derive.approximations` (vectorisable; <= 2 ulp), their arguments clipped into [-1, 1]; every
  square root's argument is clamped at 0 -- the same hardening as the NumPy lowering.

Recursions with rows and columns and without callbacks other than the rho tables are lowered this way (the pair
recursions); recursions without rows, columns or callbacks (`ElementwiseSpec`: one input's trajectory, the
diagonal of the kernel engine) are lowered to a loop over layers with the elements innermost, each layer's state
optionally written into a trajectory array; the others keep their NumPy kernels.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

from resprop.derive.recursion import Recursion

#: columns of a tile whose state is kept together while the layers of a block run (4 KiB per state: L1)
JB = 512
#: the column loop runs a multiple of this many elements (see the generated module's LANES): a multiple of every
#: vector width times unroll factor LLVM picks for these loops (8 doubles x up to 4 on AVX-512)
LANES = 64


class ScalarPrinter(PythonCodePrinter):
    """Scalar Python for Numba: arcsine/arccosine through the polynomial kernels (argument clipped), square roots
    clamped at 0, small integer powers as products, numbers as float literals."""

    def _print_Symbol(self, expr):
        return expr.name

    def _clip(self, arg) -> str:
        return f"min(max({self._print(arg)}, -1.0), 1.0)"

    def _print_asin(self, expr):
        return f"_asin({self._clip(expr.args[0])})"

    def _print_acos(self, expr):
        return f"_acos({self._clip(expr.args[0])})"

    def _print_UnitClip(self, expr):
        return self._clip(expr.args[0])

    def _print_Pi(self, expr):
        return repr(float(sp.pi))

    def _print_Rational(self, expr):
        return repr(float(expr))

    def _print_Integer(self, expr):
        return repr(float(expr))

    def _print_Float(self, expr):
        return repr(float(expr))

    def _print_Pow(self, expr, rational=False):
        base, ex = expr.args
        b = f"({self._print(base)})"
        if ex == sp.S.Half:
            return f"math.sqrt(max({self._print(base)}, 0.0))"
        if ex == -sp.S.Half:
            return f"(1.0 / math.sqrt(max({self._print(base)}, 0.0)))"
        if ex == sp.Rational(3, 2):
            return f"({b} * math.sqrt(max({self._print(base)}, 0.0)))"
        if ex.is_Integer and 1 <= abs(int(ex)) <= 4:
            prod = " * ".join([b] * abs(int(ex)))
            return f"({prod})" if ex > 0 else f"(1.0 / ({prod}))"
        return f"({b} ** {self._print(ex)})"


@dataclass
class CompiledSpec:
    """What the compiled-module template needs for one recursion."""

    name: str
    source: str
    states: list[str]
    sequences: list[str]
    layer: list[tuple[str, str]]     # (name, scalar expression over sequences and earlier layer values)
    row: list[tuple[str, str]]       # (name, expression over K_aa, layer values and earlier row values)
    col: list[tuple[str, str]]
    elem: list[tuple[str, str]]      # (name, expression) computed per element and layer, in order
    finals: list[str]                # the new value of each state
    layer_used: list[str]            # layer values read by the elementwise code (stored per layer)
    row_used: list[str]
    col_used: list[str]
    row_symbol: str
    col_symbol: str
    #: the rho-table callbacks used (in TABLE_CALLBACKS order) and the printed argument; empty for closed forms
    table: list[str]
    table_arg: str
    #: the name of the lookup statement in ``elem`` and the statements before it
    table_names: str = ""
    elem_before_table: list[tuple[str, str]] | None = None
    #: where the run reads each used row value: ("rows", i) stored per row, or ("cols", j) when it is the same
    #: function of the diagonal as column value j (the per-layer data then holds it once: a symmetric quantity
    #: such as 1/sqrt(K_aa) need not be stored twice)
    row_source: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    #: the row values stored in ``rows`` (those not read from ``cols``)
    row_stored: list[str] = dataclasses.field(default_factory=list)
    #: the row statements the prepare step evaluates: those the stored values need
    row_prepare: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: ``elem`` without the statements only the table argument needs: the update once the table values are given
    #: (the general path's series kernels and their patch)
    elem_update: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: the row, column and state names that ``elem_update`` reads
    update_reads: list[str] = dataclasses.field(default_factory=list)


class _Classifier:
    def __init__(self, rec: Recursion) -> None:
        self.rec = rec
        self.kind: dict[sp.Symbol, str] = {}
        for s, _ in rec.state:
            self.kind[s] = "elem"
        for s in rec.rows:
            self.kind[s] = "row"
        for s in rec.cols:
            self.kind[s] = "col"
        for s in rec.sequences:
            self.kind[s] = "layer"
        self.defs: dict[str, list[tuple[sp.Symbol, sp.Expr]]] = {"layer": [], "row": [], "col": [], "elem": []}
        self.hoisted: dict[sp.Expr, sp.Symbol] = {}
        self.counter = 0
        self.exprs: dict[sp.Symbol, sp.Expr] = {}      # elementwise definitions, as lowered
        self.reciprocal: dict[sp.Expr, sp.Symbol] = {}  # base -> a symbol defined as 1 / base

    def kind_of(self, e: sp.Expr) -> str:
        kinds = {self.kind[s] for s in e.free_symbols}
        if "elem" in kinds or {"row", "col"} <= kinds:
            return "elem"
        if "row" in kinds:
            return "row"
        if "col" in kinds:
            return "col"
        return "layer"

    def add(self, sym: sp.Symbol, e: sp.Expr) -> None:
        e = self.fewer_divisions(e)
        k = self.kind_of(e)
        if k == "elem":
            e = self.hoist(e)
            self.exprs[sym] = e
        self.kind[sym] = k
        self.defs[k].append((sym, e))
        if isinstance(e, sp.Pow) and e.exp == -1:
            self.reciprocal.setdefault(e.base, sym)

    def fewer_divisions(self, e: sp.Expr) -> sp.Expr:
        """Divisions are the slowest vector operation: reuse a reciprocal already computed (1/r**2 -> x1**2 when
        x1 = 1/r), and divide by a product of a row and a column value (R = s_a s_b) by multiplying with their
        reciprocals, which are hoisted out of the pair loop.  The results differ from the divisions by an ulp."""
        def split(base):
            d = self.exprs.get(base) if isinstance(base, sp.Symbol) else None
            if d is not None and isinstance(d, sp.Mul) and all(self.kind_of(f) in ("row", "col", "layer")
                                                                 for f in d.args):
                return d.args
            return None

        def better(x):
            return isinstance(x, sp.Pow) and x.exp.is_Integer and x.exp < 0 and (
                x.base in self.reciprocal or split(x.base) is not None)

        def rewrite(x):
            n = -int(x.exp)
            if x.base in self.reciprocal:
                return self.reciprocal[x.base] ** n
            return sp.Mul(*[sp.Pow(f, -n) for f in split(x.base)])

        return e.replace(better, rewrite)

    def _value(self, e: sp.Expr) -> sp.Expr:
        """A symbol holding the non-elementwise ``e`` (numbers and plain symbols are used as they are)."""
        if e.is_Number or isinstance(e, sp.Symbol):
            return e
        if e not in self.hoisted:
            sym = sp.Symbol(f"h{self.counter}", real=True)
            self.counter += 1
            self.hoisted[e] = sym
            k = self.kind_of(e)
            self.kind[sym] = k
            self.defs[k].append((sym, e))
        return self.hoisted[e]

    def hoist(self, e: sp.Expr) -> sp.Expr:
        """``e`` with its maximal non-elementwise parts replaced by hoisted symbols."""
        if self.kind_of(e) != "elem":
            return self._value(e)
        if isinstance(e, (sp.Add, sp.Mul)):
            elem = [a for a in e.args if self.kind_of(a) == "elem"]
            groups: dict[str, list[sp.Expr]] = {"row": [], "col": [], "layer": []}
            for a in e.args:
                k = self.kind_of(a)
                if k != "elem":
                    groups[k].append(a)
            # fold the layer part into the row part (or the column part): one value per side
            if groups["layer"] and groups["row"]:
                groups["row"] += groups.pop("layer")
            elif groups["layer"] and groups["col"]:
                groups["col"] += groups.pop("layer")
            parts = [self._value(e.func(*g)) for g in groups.values() if g]
            return e.func(*[self.hoist(a) for a in elem], *parts, evaluate=False)
        if isinstance(e, sp.Pow):
            return sp.Pow(self.hoist(e.base), e.exp if e.exp.is_Number else self.hoist(e.exp), evaluate=False)
        if e.args:
            return e.func(*[self.hoist(a) for a in e.args], evaluate=False)
        return e


#: callbacks a compiled kernel evaluates itself, from per-layer rho tables (`dual_tables.DualTable`: piecewise
#: polynomials in theta = arccos(rho)); both read the same interval
TABLE_CALLBACKS = ("mean_phi_phi", "mean_dphi_dphi")


def _table_calls(rec: Recursion) -> dict[str, sp.Expr]:
    """callback name -> its argument, over the updates of ``rec`` (one argument per callback)."""
    calls: dict[str, sp.Expr] = {}
    for _, e in (*rec.definitions, *rec.state):
        for f in e.atoms(sp.core.function.AppliedUndef):
            name = type(f).__name__
            if name in calls and calls[name] != f.args[0]:
                raise ValueError(f"{rec.name}: {name} called with two arguments")
            calls[name] = f.args[0]
    return calls


def _add_updates(cl: _Classifier, updates: list[sp.Expr]) -> list[sp.Symbol]:
    """The state updates' common subexpressions (``sympy.cse``) and the new states ``new0, new1, ...`` added to
    ``cl`` in order; returns the new-state symbols."""
    replacements, reduced = sp.cse(updates, symbols=sp.numbered_symbols("x"), order="none")
    for sym, sub in replacements:
        cl.add(sym, sub)
    finals = []
    for i, expr in enumerate(reduced):
        sym = sp.Symbol(f"new{i}", real=True)
        cl.add(sym, expr)
        finals.append(sym)
    return finals


def compilable(rec: Recursion) -> bool:
    """Pair recursions with one row and one column quantity, and no callbacks other than the rho tables of
    TABLE_CALLBACKS, all at one argument (the closed-form and the tabulated pair kernels)."""
    if len(rec.rows) != 1 or len(rec.cols) != 1:
        return False
    if not rec.callbacks:
        return True
    calls = _table_calls(rec)
    return set(calls) <= set(TABLE_CALLBACKS) and len(set(calls.values())) == 1


def _row_sources(cl: _Classifier, row_used: list[str], col_used: list[str], row_symbol: sp.Symbol,
                 col_symbol: sp.Symbol) -> tuple[list[tuple[str, str, int]], list[str]]:
    """For each used row value, ("cols", j) when it is the same expression of the diagonal as the used column
    value j (K_aa in place of K_bb; layer values alike), else ("rows", i) with i its place among the stored rows."""
    def expanded(kind: str) -> dict[str, sp.Expr]:
        full: dict[sp.Symbol, sp.Expr] = {}
        for sym, e in cl.defs[kind]:
            full[sym] = e.xreplace(full)
        return {sym.name: e for sym, e in full.items()}

    rows, cols = expanded("row"), expanded("col")
    col_exprs = [cols[name].xreplace({col_symbol: row_symbol}) for name in col_used]
    source: list[tuple[str, str, int]] = []
    stored: list[str] = []
    for name in row_used:
        same = [j for j, e in enumerate(col_exprs) if e == rows[name]]
        if same:
            source.append((name, "cols", same[0]))
        else:
            source.append((name, "rows", len(stored)))
            stored.append(name)
    return source, stored


def compiled_spec(rec: Recursion) -> CompiledSpec:
    """Classify, hoist and print the scalar code of ``rec`` (see the module docstring)."""
    if not compilable(rec):
        raise ValueError(f"{rec.name}: only pair recursions without callbacks other than rho tables are compiled")
    cl = _Classifier(rec)
    calls = _table_calls(rec)
    table = [name for name in TABLE_CALLBACKS if name in calls]
    values = {name: sp.Symbol(f"{name}_v", real=True) for name in table}
    for v in values.values():
        cl.kind[v] = "elem"
    swap = {f: values[type(f).__name__] for _, e in (*rec.definitions, *rec.state)
            for f in e.atoms(sp.core.function.AppliedUndef)}
    for sym, sub in rec.definitions:
        cl.add(sym, sub.xreplace(swap))
    table_arg = ""
    if table:  # one table lookup per element and layer, after the definitions (its argument is one of them)
        arg = next(iter(calls.values())).xreplace(swap)
        if cl.kind_of(arg) != "elem":
            raise ValueError(f"{rec.name}: the table argument {arg} is not elementwise")
        table_arg = ScalarPrinter({"fully_qualified_modules": False}).doprint(cl.hoist(arg))
        cl.defs["elem"].append((sp.Symbol("__table__"), sp.S.Zero))
    finals = _add_updates(cl, [u.xreplace(swap) for _, u in rec.state])
    # a state update that is not elementwise (cannot happen for a recursion that reads its state) stays correct:
    # it is computed where its kind says and read below
    pr = ScalarPrinter({"fully_qualified_modules": False})
    elem_text = [(s.name, pr.doprint(e)) for s, e in cl.defs["elem"]]
    if table:  # the lookup's place among the statements (the template evaluates it in loops of its own)
        names = ", ".join(f"{n}_v" for n in table)
        elem_text = [(names, "") if n == "__table__" else (n, t) for n, t in elem_text]
    used = " ".join(t for _, t in elem_text) + " " + " ".join(s.name for s in finals) + " " + table_arg

    def read(k):
        return [s.name for s, _ in cl.defs[k] if re.search(rf"\b{s.name}\b", used)] + \
            ([s.name for s in rec.sequences if re.search(rf"\b{s.name}\b", used)] if k == "layer" else [])

    row_used, col_used = read("row"), read("col")
    row_source, row_stored = _row_sources(cl, row_used, col_used, rec.rows[0], rec.cols[0])
    needed = set(row_stored)
    for sym, e in reversed(cl.defs["row"]):
        if sym.name in needed:
            needed |= {f.name for f in e.free_symbols}
    row_prepare = [(s.name, pr.doprint(e)) for s, e in cl.defs["row"] if s.name in needed]
    elem_update = _live_statements(elem_text, [s.name for s in finals], keep=", ".join(f"{n}_v" for n in table))
    update_text = " ".join(t for _, t in elem_update) + " " + " ".join(s.name for s in finals)
    update_reads = [n for n in row_used + col_used + list(rec.state_names)
                    if re.search(rf"\b{re.escape(n)}\b", update_text)]
    return CompiledSpec(
        elem_update=elem_update, update_reads=update_reads,
        name=rec.name, source=rec.source.cite(), states=rec.state_names, sequences=[s.name for s in rec.sequences],
        layer=[(s.name, pr.doprint(e)) for s, e in cl.defs["layer"]],
        row=[(s.name, pr.doprint(e)) for s, e in cl.defs["row"]],
        col=[(s.name, pr.doprint(e)) for s, e in cl.defs["col"]],
        elem=elem_text, finals=[s.name for s in finals],
        layer_used=read("layer"), row_used=row_used, col_used=col_used,
        row_symbol=rec.rows[0].name, col_symbol=rec.cols[0].name, row_source=row_source, row_stored=row_stored,
        row_prepare=row_prepare,
        table=table, table_arg=table_arg,
        table_names=", ".join(f"{n}_v" for n in table),
        elem_before_table=elem_text[:[n for n, _ in elem_text].index(", ".join(f"{n}_v" for n in table))]
        if table else [])


def _live_statements(statements: list[tuple[str, str]], outputs: list[str], keep: str) -> list[tuple[str, str]]:
    """The statements (name, printed expression) that ``outputs`` depend on, in order; ``keep`` (the table lookup's
    line) is kept whatever reads it."""
    live: list[tuple[str, str]] = []
    needed = " ".join(outputs)
    for name, text in reversed(statements):
        if name == keep or any(re.search(rf"\b{re.escape(n.strip())}\b", needed) for n in name.split(",")):
            live.append((name, text))
            needed += " " + text
    return live[::-1]


# --------------------------------------------------------------------------- elementwise recursions
@dataclass
class ElementwiseSpec:
    """What the template needs for an elementwise recursion (no row or column quantities, no callbacks): every
    element of the state arrays goes through the layers on its own (one input's K and V, a diagonal)."""

    name: str
    source: str
    states: list[str]
    sequences: list[str]
    layer: list[tuple[str, str]]
    elem: list[tuple[str, str]]
    finals: list[str]


def elementwise_compilable(rec: Recursion) -> bool:
    """Recursions without rows, columns or callbacks (PDLT's single-input trajectories, the diagonals of the kernel
    engine)."""
    return not rec.rows and not rec.cols and not rec.callbacks and bool(rec.sequences)


def elementwise_spec(rec: Recursion) -> ElementwiseSpec:
    """Classify (per layer / per element), hoist and print the scalar code of an elementwise recursion."""
    if not elementwise_compilable(rec):
        raise ValueError(f"{rec.name}: only recursions without rows, columns or callbacks are compiled elementwise")
    cl = _Classifier(rec)
    for sym, sub in rec.definitions:
        cl.add(sym, sub)
    finals = _add_updates(cl, [u for _, u in rec.state])
    pr = ScalarPrinter({"fully_qualified_modules": False})
    # a final that is not elementwise (a state set from the layer's scalars alone) is still written per element
    elem = [(s.name, pr.doprint(e)) for s, e in cl.defs["elem"]]
    return ElementwiseSpec(name=rec.name, source=rec.source.cite(), states=rec.state_names,
                           sequences=[s.name for s in rec.sequences],
                           layer=[(s.name, pr.doprint(e)) for s, e in cl.defs["layer"]], elem=elem,
                           finals=[f.name for f in finals])
