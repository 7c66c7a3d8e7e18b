"""The conformance suite of a theory: ``check_theory(theory)``, like scikit-learn's ``check_estimator``.

A theory (built in, or a plugin of the ``resprop.theories`` entry-point group) conforms when

``derivation``  every derivation it declares runs, states each result with declared inputs, and regenerates: the
                files ``resprop derive SLUG`` writes equal the ones installed (``resprop derive --check SLUG``);
``latex``       every exported equation parses back (SymPy's LaTeX parser) and equals its SymPy result;
``kernels``     every generated kernel validates its declared domains: inside them (hypothesis, over the
                declared ``Parameter`` domains) a finite float64 or an error naming its inputs, outside them (one
                ulp out, NaN, inf, non-numeric) a ``ParameterError`` naming the parameter; at an interior point the
                value equals the SymPy result evaluated by mpmath at 50 digits;
``claims``      its claims compute at quick size, each row with the fields the report needs, the declared verdict
                and independent evidence (a Monte Carlo mean and standard error, or a reference value, naming
                its method);
``figures``     its figures render into a scratch directory: valid, non-blank, distinct PNGs named after the slug;
``cli``         its subcommands are the ones it declares, parse, print their help, and refuse bad input (an
                unknown option, non-numeric, NaN or infinite numbers) with exit 2 and one line naming the option.

:func:`check_theory` runs them (all, or the names given in ``checks``) and raises :class:`ConformanceError`, an
``AssertionError`` naming the theory and the failing checks; each check is also a function of its own
(:data:`CHECKS`), so a test suite can run them one by one (``tests/test_conformance.py`` runs every registered
theory through every check; docs/adding-a-theory.md shows a plugin doing the same).  Every check returns a
summary of what it verified (counts), and writes only into temporary directories: the suite works from an
installed wheel as from a checkout, and never writes into an installed package.

Optional dependencies: the ``kernels`` check needs ``hypothesis`` and the ``latex`` check SymPy's LaTeX parser
(``antlr4-python3-runtime`` 4.11); ``pip install 'resprop[testing]'`` installs both, and a missing one is an
``ImportError`` saying so.  pytest is not needed.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import io
import json
import math
import re
import shlex
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from resprop import registry
from resprop.numeric.engine.validation import ParameterError
from resprop.registry import Theory

__all__ = ["CHECKS", "ConformanceError", "check_theory", "check_derivation", "check_latex_roundtrip",
           "check_kernel_domains", "check_claims", "check_figures", "check_cli"]


class ConformanceError(AssertionError):
    """A theory fails a conformance check.  ``theory`` is its slug, ``check`` the (first) failing check and
    ``failures`` maps each failing check to what failed."""

    def __init__(self, theory: str, check: str, message: str, failures: Mapping[str, str] | None = None):
        self.theory, self.check, self.message = theory, check, message
        self.failures = dict(failures) if failures else {check: message}
        checks = ", ".join(repr(c) for c in self.failures)
        plural = "s" if len(self.failures) > 1 else ""
        super().__init__(f"theory {theory!r} fails the conformance check{plural} {checks}: {message}")


def _abort(theory: Theory, check: str, message: str) -> NoReturn:
    raise ConformanceError(theory.slug, check, message)


def _fail(theory: Theory, check: str, problems: Sequence[str], limit: int = 12) -> None:
    """Raise one ConformanceError listing (the first ``limit`` of) ``problems``; nothing when there are none."""
    if problems:
        shown = list(problems[:limit]) + ([f"... and {len(problems) - limit} more"] if len(problems) > limit else [])
        raise ConformanceError(theory.slug, check, f"{len(problems)} problem(s):\n  - " + "\n  - ".join(shown))


# ----------------------------------------------------------------------------------------------- arguments
def _theory(theory: Any) -> Theory:
    """The registered :class:`Theory` that ``theory`` (a Theory, or the slug of a registered one) stands for."""
    if isinstance(theory, str):
        if theory not in registry.slugs():
            raise ParameterError("theory", f"unknown theory {theory!r}; registered: {', '.join(registry.slugs())}")
        return registry.theory(theory)
    if not isinstance(theory, Theory):
        raise ParameterError("theory", "must be a resprop.registry.Theory (or the slug of a registered theory), got "
                                       f"{type(theory).__name__}")
    registered = registry.theories().get(theory.slug)
    if registered is None:
        raise ParameterError("theory", f"{theory.slug!r} is not registered: register it first "
                                       "(resprop.registry.register(THEORY), or a resprop.theories entry point)")

    def declared(th: Theory) -> dict[str, Any]:  # the registry fills in `package`; everything else must agree
        return {f.name: getattr(th, f.name) for f in dataclasses.fields(th) if f.name != "package"}

    if declared(registered) != declared(theory):
        raise ParameterError("theory", f"another theory is registered under the slug {theory.slug!r} "
                                       f"({registered.title!r})")
    return registered


def _quick(quick: Any) -> bool:
    if not isinstance(quick, bool):
        raise ParameterError("quick", f"must be True or False, got {quick!r}")
    return quick


def _target(target: Any) -> Path | None:
    if target is None:
        return None
    if not isinstance(target, (str, Path)) or not str(target):
        raise ParameterError("target", f"must be a directory path or None, got {target!r}")
    path = Path(target)
    if not path.is_dir():
        raise ParameterError("target", f"must be an existing directory (where the theory's generated files were "
                                       f"written), got {str(target)!r}")
    return path


# ----------------------------------------------------------------------------------------------- derivation
def _module_name(derivation: str) -> str:
    """The dotted name of the generated kernel module of ``derivation`` (the registry knows where it lives)."""
    finder = getattr(registry, "generated_module", None)
    return finder(derivation) if finder is not None else f"resprop.generated.{derivation}"


def _own_files(theory: Theory) -> dict[str, str]:
    """Key -> text of the files `resprop derive SLUG` writes for ``theory`` (resprop.derive.codegen)."""
    from resprop.derive import codegen

    return codegen.generated_files(slugs=[theory.slug])


def _file_key(files: Iterable[str], filename: str) -> str | None:
    """The key among ``files`` (codegen keys) of the generated file called ``filename`` (e.g. ``name.py``)."""
    keys = [k for k in files if k == filename or k.endswith("/" + filename)]
    return keys[0] if len(keys) == 1 else None


def check_derivation(theory: Any, *, target: Any = None) -> dict[str, int]:
    """Each declared derivation runs and returns a :class:`resprop.derive.results.Derivation` owned by the theory,
    with results that state where they come from and inputs declared once (domain and meaning as in the
    ``Parameter``); each has a kernel module and a LaTeX document among the generated files; and the files
    ``resprop derive SLUG`` would write equal those on disk (``resprop derive --check SLUG``), in the theory's
    generated package or, with ``target``, below that directory (as ``write_generated(target, slugs)`` writes).
    Returns the counts of derivations, results and files checked."""
    from resprop.derive import codegen
    from resprop.derive.results import Derivation

    theory, target = _theory(theory), _target(target)
    problems: list[str] = []
    owners = registry.derivations()
    results = 0
    for name, ref in theory.derivations.items():
        if owners.get(name, (None, None))[1] != theory.slug:
            problems.append(f"derivation {name!r} ({ref}) is not registered as the theory's own")
            continue
        try:
            d = registry.derivation(name)
        except Exception as exc:  # noqa: BLE001 - a broken derivation is this check's finding
            problems.append(f"derivation {name!r} ({ref}) raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(d, Derivation):
            problems.append(f"derivation {name!r} ({ref}) returned {type(d).__name__}, not a Derivation")
            continue
        if not d.results:
            problems.append(f"derivation {name!r} has no results")
        for r in d.results:
            results += 1
            if not (r.statement and r.statement[0].isupper()):
                problems.append(f"{name}.{r.name}: no statement (one sentence, capitalised) for the LaTeX export")
            if not (r.source.paper and r.source.equation):
                problems.append(f"{name}.{r.name}: no source (paper and equation)")
            for i in r.inputs:
                p = d.symbols.get(i.symbol)
                if p is None:
                    problems.append(f"{name}.{r.name}: input {i.name} is not a declared Parameter")
                elif (p.domain, p.meaning) != (i.domain, i.description):
                    problems.append(f"{name}.{r.name}: input {i.name} has domain {i.domain!r} ({i.description!r}) "
                                    f"but its Parameter declares {p.domain!r} ({p.meaning!r})")
    if problems:
        _fail(theory, "derivation", problems)
    try:
        files = _own_files(theory)
        stale = codegen.stale_files(target=target, slugs=[theory.slug])
    except Exception as exc:  # noqa: BLE001
        _abort(theory, "derivation", f"rendering its generated files raised {type(exc).__name__}: {exc}")
    for name in theory.derivations:
        for filename in (f"{name}.py", f"{name}.tex"):
            if _file_key(files, filename) is None:
                problems.append(f"no generated file {filename} for derivation {name!r}")
    for rel, diff in stale.items():
        head = "\n      ".join(diff.splitlines()[:6])
        problems.append(f"{codegen.display_path(rel)} is stale (run `resprop derive {theory.slug}`"
                        f"{'' if target is None else ' into ' + str(target)}):\n      {head}")
    _fail(theory, "derivation", problems)
    return {"derivations": len(theory.derivations), "results": results, "files": len(files)}


# ----------------------------------------------------------------------------------------------- LaTeX
#: one exported equation: body, theory, result name and tag (templates/theory.tex.j2)
_EQUATION = re.compile(r"\\begin\{equation\}\n(.*?)\n\\label\{eq:(\w+):(\w+)\}\\tag\{([^}]*)\}\n\\end\{equation\}",
                       re.S)


def _latex_parser() -> Callable[[str], Any]:
    from sympy.parsing.latex import parse_latex

    try:
        parse_latex("x")
    except ImportError as exc:
        raise ImportError("resprop.testing.check_latex_roundtrip needs SymPy's LaTeX parser, which needs "
                          "antlr4-python3-runtime 4.11 (pip install 'resprop[testing]')") from exc
    return parse_latex


def _parse_tex(tex: str) -> Any:
    import sympy as sp
    from sympy.core.function import AppliedUndef

    # "\pi \left(x\right)^{2}" is pi times a square; the parser would read a call pi(x), squared
    tex = re.sub(r"\\pi\s*\\left\(", r"\\pi \\cdot \\left(", tex)
    expr = _latex_parser()(tex)
    # the parser reads a letter followed by parentheses, ``\pi \left(2 K + 1\right)``, as a function call: in the
    # exported equations that juxtaposition is a product (\Gamma(...) excepted, the gamma function)
    expr = expr.replace(lambda e: isinstance(e, AppliedUndef) and e.func.__name__ != "Gamma" and len(e.args) == 1,
                        lambda e: sp.Symbol(e.func.__name__) * e.args[0])
    expr = expr.subs(sp.Symbol("pi"), sp.pi).subs(sp.Symbol("e"), sp.E)
    return expr.replace(sp.Function("Gamma"), sp.gamma)


def _placeholders(rhs: str, names: Mapping[Any, str]) -> tuple[str, dict[Any, Any]]:
    """Replace each input's rendered LaTeX by a parenthesised placeholder ``Z_{k}``, longest first and only as a
    whole token: SymPy's parser cannot read ``\\langle ... \\rangle`` or ``K^{(\\ell)}`` as one symbol.  A name
    the printer did not emit verbatim stays in the text and makes the comparison fail."""
    import sympy as sp

    back = {}
    for k, (sym, tex) in enumerate(sorted(names.items(), key=lambda kv: -len(kv[1]))):
        ph = sp.Symbol(f"Z_{{{k}}}")
        pattern = (r"(?<![\\A-Za-z])" if tex[0].isalpha() else "") + re.escape(tex) + \
                  (r"(?![A-Za-z_'])" if tex[-1].isalnum() or tex[-1] == "}" else "")
        replacement = rf"\left(Z_{{{k}}}\right)"
        rhs = re.sub(pattern, replacement.replace("\\", "\\\\"), rhs)  # the template's backslashes literal
        back[ph] = sym
    return rhs, back


def _equal_expr(parsed: Any, source: Any) -> bool:
    """``parsed == source`` symbolically, or at a generic rational point to 25 digits where simplify cannot close
    the difference."""
    import sympy as sp

    diff = sp.simplify(parsed - source)
    if diff == 0:
        return True
    pt = {s: sp.Rational(3 + k, 7) for k, s in enumerate(sorted(diff.free_symbols, key=str))}
    try:
        value = complex(sp.N(diff.subs(pt), 30))
    except TypeError:  # something left that is not a number (an unparsed expectation): not equal
        return False
    return abs(value) < 1e-25


def _latex_problems(name: str, text: str) -> list[str]:
    """What is wrong with the LaTeX document ``text`` of the derivation ``name``: a missing or extra equation, a
    wrong tag, or an equation that does not parse back to its SymPy result ([] when it round-trips)."""
    from resprop.derive.expectation import GaussianMean, GaussianMean2, TabulatedMean, TabulatedMean2
    from resprop.derive.latex import expression_tex, symbol_tex

    expectations = (GaussianMean, GaussianMean2, TabulatedMean, TabulatedMean2)
    d = registry.derivation(name)
    results = {r.name: r for r in d.results}
    problems = []
    if text.count(r"\begin{equation}") != text.count(r"\end{equation}") or r"\end{document}" not in text:
        problems.append(f"{name}.tex: unbalanced equations or no \\end{{document}}")
    found = _EQUATION.findall(text)
    labels = {label for _, _, label, _ in found}
    if labels != set(results):
        problems.append(f"{name}.tex: equations {sorted(labels)} but results {sorted(results)}")
    for body, owner, label, tag in found:
        res = results.get(label)
        if res is None:
            continue
        where = f"{name}.tex, {label}"
        if owner != name:
            problems.append(f"{where}: labelled eq:{owner}:{label}")
        if tag != res.source.equation.replace(",", ";"):
            problems.append(f"{where}: tag {tag!r}, but the result cites equation {res.source.equation!r}")
        names = symbol_tex(res, d)
        if len(set(names.values())) != len(names):
            problems.append(f"{where}: two inputs print the same LaTeX {sorted(names.values())}")
            continue
        # a Gaussian expectation (resprop.derive.expectation) prints as <...>, which the parser cannot read: it is
        # compared like an input, by its own printed LaTeX
        names = {**names, **{node: expression_tex(node, names) for node in res.expr.atoms(*expectations)}}
        lhs_rhs = body.split(" = ", 1)
        if len(lhs_rhs) != 2:
            problems.append(f"{where}: no ' = ' in {body!r}")
            continue
        rhs_tex, back = _placeholders(lhs_rhs[1], names)
        try:
            parsed = _parse_tex(rhs_tex).xreplace(back)
        except ImportError:
            raise
        except Exception as exc:  # noqa: BLE001 - an unparseable equation is the finding
            problems.append(f"{where}: does not parse back ({type(exc).__name__}: {exc}): {lhs_rhs[1]}")
            continue
        if not parsed.free_symbols <= res.expr.free_symbols:
            problems.append(f"{where}: parses to symbols {sorted(map(str, parsed.free_symbols))} that the result "
                            "does not have")
        elif not _equal_expr(parsed, res.expr):
            problems.append(f"{where}: parses back to {parsed}, not the result {res.expr}")
    return problems


def check_latex_roundtrip(theory: Any) -> dict[str, int]:
    """Export the theory's LaTeX documents (``resprop latex``'s export, into a temporary directory) and parse every
    equation back with SymPy: it must equal its result, carry the paper's equation number as its tag and print
    distinct inputs distinctly; every result has an equation and a statement paragraph.  Returns the counts of
    documents and equations checked."""
    from resprop.derive.latex import export_latex

    theory = _theory(theory)
    _latex_parser()
    problems: list[str] = []
    equations = 0
    with tempfile.TemporaryDirectory(prefix="resprop-conformance-tex-") as tmp:
        paths = {p.stem: p for p in export_latex(Path(tmp), names=list(theory.derivations))}
        for name in theory.derivations:
            if name not in paths:
                problems.append(f"no LaTeX document exported for derivation {name!r}")
                continue
            text = paths[name].read_text()
            equations += len(_EQUATION.findall(text))
            paragraphs = re.findall(r"^\\paragraph\{[^}]*\} (.*)$", text, re.M)
            if not paragraphs or any(len(s.split()) < 5 for s in paragraphs):
                problems.append(f"{name}.tex: a result without a statement paragraph of at least five words")
            problems += _latex_problems(name, text)
    _fail(theory, "latex", problems)
    return {"documents": len(theory.derivations), "equations": equations}


# ----------------------------------------------------------------------------------------------- kernels
def _load_kernels(theory: Theory, name: str, target: Path | None, files: Iterable[str]):
    """The generated kernel module of derivation ``name``: imported from the theory's generated package, or with
    ``target`` executed from the file there (under a private name: nothing is added to ``sys.modules``)."""
    if target is None:
        return importlib.import_module(_module_name(name))
    from resprop.derive import codegen

    key = _file_key(files, f"{name}.py")
    path = None if key is None else codegen.file_path(key, target)
    if path is None or not path.is_file():
        raise FileNotFoundError(f"no kernel module of derivation {name!r} below {target}")
    spec = importlib.util.spec_from_file_location(f"_resprop_conformance_{theory.slug}_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def integer_like(inp) -> bool:
    """Depths, widths, lags and output dimensions: domains [1, inf) and [2, inf)."""
    d = inp.parsed
    return d.kind == "interval" and d.lo_closed and d.lo in (1.0, 2.0) and math.isinf(d.hi)


def inside_domain(st, inp):
    """A hypothesis strategy for points of the interval domain of the kernel input ``inp`` (``st``: the module
    ``hypothesis.strategies``): random interior, closed ends, one ulp inside each end.  Shared with resprop's own
    domain tests (tests/test_kernel_domains.py)."""
    import numpy as np

    d = inp.parsed
    lo, hi = d.lo, d.hi
    specials = []
    if not math.isinf(lo):
        specials += ([lo] if d.lo_closed else []) + [float(np.nextafter(lo, np.inf))]
    if not math.isinf(hi):
        specials += ([hi] if d.hi_closed else []) + [float(np.nextafter(hi, -np.inf))]
    if math.isinf(lo) and math.isinf(hi):
        body = st.floats(-1e3, 1e3) | st.sampled_from([0.0, 1.0, -1.0])
    elif math.isinf(hi):
        if integer_like(inp):
            body = st.integers(int(lo), 10**9).map(float) | st.sampled_from([1e9, lo + 1.0])
        else:
            body = st.floats(-6, 6).map(lambda u, lo=lo: lo + 10.0 ** u)
    elif math.isinf(lo):
        body = st.floats(-6, 6).map(lambda u, hi=hi: hi - 10.0 ** u)
    else:
        body = st.floats(lo, hi, exclude_min=not d.lo_closed, exclude_max=not d.hi_closed)
    return st.sampled_from(specials) | body if specials else body


def _point(st, res):
    """A strategy for a whole argument list of ``res`` inside its domains (covariances from their variances)."""
    parts = {}
    for i in res.inputs:
        if i.parsed.kind == "covariance":
            parts[i.name] = st.sampled_from([1.0, -1.0, 0.0]) | st.floats(-1, 1)
        else:
            parts[i.name] = inside_domain(st, i)

    def assemble(values):
        out = []
        for i in res.inputs:
            v = values[i.name]
            if i.parsed.kind == "covariance":
                v = v * math.sqrt(values[i.parsed.var_a]) * math.sqrt(values[i.parsed.var_b])
            out.append(v)
        return out

    return st.fixed_dictionaries(parts).map(assemble)


def _moderate_point(res) -> list[float]:
    """A fixed interior point of moderate size."""
    vals = {}
    for i in res.inputs:
        d = i.parsed
        if d.kind == "covariance":
            continue
        if integer_like(i):
            vals[i.name] = d.lo + 3.0
        elif math.isinf(d.lo) and math.isinf(d.hi):
            vals[i.name] = 0.7
        elif math.isinf(d.hi):
            vals[i.name] = d.lo + 0.6
        elif math.isinf(d.lo):
            vals[i.name] = d.hi - 0.6
        else:
            vals[i.name] = d.lo + 0.37 * (d.hi - d.lo)
    for i in res.inputs:
        if i.parsed.kind == "covariance":
            vals[i.name] = 0.3 * math.sqrt(vals[i.parsed.var_a] * vals[i.parsed.var_b])
    return [vals[i.name] for i in res.inputs]


def _outside_values(inp, args, names) -> list[float]:
    """One ulp outside each finite end of an interval; 1e-9 relative beyond a covariance's bound."""
    import numpy as np

    d = inp.parsed
    if d.kind == "covariance":
        b = math.sqrt(args[names.index(d.var_a)]) * math.sqrt(args[names.index(d.var_b)])
        return [b * (1 + 1e-9), -b * (1 + 1e-9)]
    out = []
    if not math.isinf(d.lo):
        out.append(float(np.nextafter(d.lo, -np.inf)) if d.lo_closed else d.lo)
    if not math.isinf(d.hi):
        out.append(float(np.nextafter(d.hi, np.inf)) if d.hi_closed else d.hi)
    return out


def _names_inputs(message: str, argnames: Sequence[str]) -> bool:
    """The message starts with one or more of the kernel's argument names (``"a, b: ..."``)."""
    head = message.split(":", 1)[0]
    return ":" in message and bool(head) and all(n.strip() in argnames for n in head.split(","))


def _mp_reference(res):
    """``res.expr`` as an mpmath function (exp(u) - 1 and log(1 + x) written as expm1 and log1p, so that 50 digits
    do not cancel): the independent route of the value check."""
    import sympy as sp
    from sympy.codegen.cfunctions import expm1, log1p

    expr = res.expr.replace(lambda e: e.is_Add and len(e.args) == 2 and sp.S.NegativeOne in e.args
                            and any(isinstance(a, sp.exp) for a in e.args),
                            lambda e: expm1(next(a for a in e.args if isinstance(a, sp.exp)).args[0]))
    expr = expr.replace(lambda e: isinstance(e, sp.log) and e.args[0].is_Add and sp.S.One in e.args[0].args,
                        lambda e: log1p(e.args[0] - 1))
    return sp.lambdify([i.symbol for i in res.inputs], expr, "mpmath")


def _mp_value(res, args) -> float | None:
    """The exact value at ``args`` (50 digits), or None where mpmath cannot evaluate it or it is not real, or where
    the result holds an expectation left to the engine's quadrature (a 50-digit mpmath quadrature, 2-D for a pair,
    takes minutes; its value is the theory's own tests' business, as resprop's tests/test_expectation.py does)."""
    import mpmath

    from resprop.derive.expectation import TabulatedMean, TabulatedMean2

    if res.expr.has(TabulatedMean, TabulatedMean2):
        return None
    with mpmath.workdps(50):
        try:
            v = _mp_reference(res)(*[mpmath.mpf(float(a)) for a in args])
            if isinstance(v, mpmath.mpc):
                if abs(v.imag) > mpmath.mpf(10) ** -30 * max(1, abs(v.real)):
                    return None
                v = v.real
            v = mpmath.mpf(v)
        except Exception:  # noqa: BLE001 - no mpmath route for this expression: the value check is skipped
            return None
        return float(v) if abs(v) < 1e308 else math.inf


def _kernel_problems(res, fn, st, settings_, examples: int) -> tuple[list[str], bool]:
    """Problems of one kernel, and whether its value was compared with mpmath."""
    import numpy as np
    from hypothesis import given

    problems: list[str] = []
    argnames = res.argnames
    where = res.name

    def call(args):
        try:
            return fn(*args), None
        except ParameterError as exc:
            return None, exc
        except Exception as exc:  # noqa: BLE001 - anything else is the finding
            return None, exc

    # inside the declared domains: a finite float64, or an error naming the inputs (a compound constraint the
    # intervals cannot express, or a float64 overflow of the result)
    seen: list[Any] = []

    @settings_
    @given(_point(st, res))
    def inside(args):
        out, err = call(args)
        if err is not None:
            msg = str(err)
            if not (isinstance(err, ParameterError) and _names_inputs(msg, argnames)
                    and ("must satisfy" in msg or "not finite in float64" in msg)):
                seen.append(f"{where}{tuple(args)}: inside the domains it raised {type(err).__name__}: {msg}")
                raise AssertionError(seen[-1])
            return
        arr = np.asarray(out)
        if arr.dtype != np.float64 or not np.isfinite(arr).all():
            seen.append(f"{where}{tuple(args)}: inside the domains it returned {out!r} (want finite float64)")
            raise AssertionError(seen[-1])

    try:
        inside()
    except AssertionError:
        problems.append(seen[-1] if seen else f"{where}: the inside-domain search failed")
    # outside: one ulp out of each end, NaN, inf and non-numeric values name the parameter
    base = _moderate_point(res)
    out, err = call(base)
    if err is not None:
        if "must satisfy" in str(err):  # a compound constraint the moderate point misses: no base point
            return problems, False
        problems.append(f"{where}{tuple(base)}: an interior point raised {type(err).__name__}: {err}")
        return problems, False
    for k, inp in enumerate(res.inputs):
        bad_values = _outside_values(inp, base, argnames) + [math.nan, math.inf, -math.inf, "abc", None,
                                                             np.array([1.0, math.nan]), 1j]
        for bad in bad_values:
            args: list[Any] = list(base)
            args[k] = bad
            got, err = call(args)
            msg = "" if err is None else str(err)
            if not isinstance(err, ParameterError) or not msg.startswith(f"{inp.name}:"):
                problems.append(f"{where}: {inp.name}={bad!r} (domain {inp.domain}) gave "
                                f"{'no error' if err is None else type(err).__name__ + ': ' + msg}, not a "
                                f"ParameterError naming {inp.name}")
            elif isinstance(bad, float) and math.isfinite(bad) and not (inp.domain in msg and repr(bad) in msg):
                problems.append(f"{where}: the error for {inp.name}={bad!r} does not state the domain "
                                f"{inp.domain} and the value: {msg}")
    # dtypes: float32 and integer arrays give the float64 answer
    got32, err32 = call([np.array([a], dtype=np.float32) for a in base])
    want32, _ = call([np.array([a], dtype=np.float32).astype(np.float64) for a in base])
    if err32 is not None or np.asarray(got32).dtype != np.float64 or not np.array_equal(got32, want32):
        problems.append(f"{where}: float32 input does not give the float64 result ({got32!r} vs {want32!r})")
    for k, inp in enumerate(res.inputs):
        if integer_like(inp):
            int_args: list[Any] = list(base)
            int_args[k] = np.array([int(base[k])], dtype=np.int64)
            got, err = call(int_args)
            want, _ = call([np.asarray(a, dtype=float) for a in int_args])
            if err is not None or np.asarray(got).dtype != np.float64 or not np.array_equal(got, want):
                problems.append(f"{where}: an int64 {inp.name} does not give the float64 result")
    # the value at the interior point against the SymPy result in mpmath (no NumPy, no float64 round-off)
    ref = _mp_value(res, base)
    if ref is None or not math.isfinite(ref):
        return problems, False
    scale = max(1.0, *(abs(a) for a in base)) ** 2
    value = float(np.asarray(out).reshape(-1)[0])
    if not abs(value - ref) <= max(1e-9 * abs(ref), 1e-11 * scale):
        problems.append(f"{where}{tuple(base)} = {value!r}, but its SymPy result in mpmath gives {ref!r}")
    return problems, True


def check_kernel_domains(theory: Any, *, quick: bool = True, target: Any = None) -> dict[str, int]:
    """Every generated kernel of the theory (each result with inputs) validates its declared domains.

    For hypothesis points inside the declared ``Parameter`` domains (random interior values, closed ends, one
    ulp inside open ends; 10 per kernel with ``quick``, else 100) it returns a finite float64 array, or raises a
    ``ParameterError`` naming its inputs for a compound constraint or a float64 overflow.  One ulp outside each
    end, NaN, +-inf, a string, None, an array holding NaN and a complex number raise a ``ParameterError`` whose
    message starts with the parameter (and states the domain and value).  float32 and int64 arrays give the
    float64 result.  At an interior point the value equals the SymPy result evaluated by mpmath at 50 digits
    (1e-9 relative).  The kernels are imported from the theory's generated package, or with ``target`` from the
    files below that directory.  Returns the counts of kernels checked and of kernels compared with mpmath."""
    theory, quick, target = _theory(theory), _quick(quick), _target(target)
    try:
        from hypothesis import HealthCheck, settings
        from hypothesis import strategies as st
    except ImportError as exc:
        raise ImportError("resprop.testing.check_kernel_domains needs hypothesis "
                          "(pip install 'resprop[testing]')") from exc
    examples = 10 if quick else 100
    settings_ = settings(derandomize=True, max_examples=examples, deadline=None, database=None,
                         suppress_health_check=list(HealthCheck), print_blob=False)
    files = _own_files(theory) if target is not None else ()
    problems: list[str] = []
    kernels = compared = 0
    for name in theory.derivations:
        try:
            module = _load_kernels(theory, name, target, files)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"the kernel module of {name!r} does not import: {type(exc).__name__}: {exc}")
            continue
        table = getattr(module, "RESULTS", {})
        for res in registry.derivation(name).results:
            if not res.inputs:
                continue
            kernels += 1
            fn = getattr(module, res.name, None)
            if not callable(fn) or not callable(getattr(fn, "unchecked", None)):
                problems.append(f"{name}.{res.name}: no generated kernel (with .unchecked) in {module.__name__}")
                continue
            declared = table.get(res.name, {}).get("inputs")
            if declared != {i.name: i.domain for i in res.inputs}:
                problems.append(f"{name}.{res.name}: RESULTS declares the inputs {declared}, the derivation "
                                f"{ {i.name: i.domain for i in res.inputs} }")
            found, exact = _kernel_problems(res, fn, st, settings_, examples)
            problems += [f"{name}.{p}" for p in found]
            compared += exact
    _fail(theory, "kernels", problems)
    return {"kernels": kernels, "compared_with_mpmath": compared, "examples_per_kernel": examples}


# ----------------------------------------------------------------------------------------------- claims
#: what the report shows of a row's independent check: a Monte Carlo estimate or a reference value
EVIDENCE = ("{'mean', 'se', 'method'} (resprop.numeric.report.claims.mc) or {'value', 'method'} "
            "(resprop.numeric.report.claims.ref)")
#: figures' data from the claims of the same theory (``data=`` as ``resprop reproduce`` passes it), by slug and size
_CLAIMS_DATA: dict[tuple[str, bool], Any] = {}


def _evidence_problem(simulation: Any) -> str | None:
    """What is wrong with a row's independent check ``simulation``, or None: it must be a Monte Carlo estimate
    (finite ``mean``, finite ``se`` >= 0) or a reference ``value``, and name its ``method``."""
    if simulation is None:
        return f"no independent evidence (simulation is None; want {EVIDENCE})"
    if not isinstance(simulation, dict):
        return f"the evidence is a {type(simulation).__name__}, not {EVIDENCE}"
    method = simulation.get("method")
    if not isinstance(method, str) or not method.strip():
        return f"the evidence names no method: {simulation!r:.200}"
    if "mean" in simulation or "se" in simulation:
        mean, se = simulation.get("mean"), simulation.get("se")
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (mean, se))
        if not ok or se is None or se < 0:
            return f"a Monte Carlo estimate needs a finite mean and a finite se >= 0, got mean={mean!r}, se={se!r}"
        return None
    if "value" not in simulation or simulation["value"] is None or simulation["value"] == "":
        return f"the evidence has neither a Monte Carlo mean and se nor a reference value: {simulation!r:.200}"
    return None


def _row_fields() -> set[str]:
    """The fields of a report row, from the report's own row builder."""
    from resprop.numeric.report.claims import row

    return set(row("q", "p", 0.0, None, passed=True))


def _row_problems(r: Any, declared: Any, fields: set[str]) -> list[str]:
    from resprop.numeric.report.claims import AGREES, DOCUMENTED

    if not isinstance(r, dict):
        return [f"a row is a {type(r).__name__}, not a dict"]
    name = r.get("claim") or r.get("quantity") or "?"
    problems = []
    missing = sorted(fields - set(r))
    if missing:
        problems.append(f"{name}: the row lacks {missing}")
    if not isinstance(r.get("quantity"), str) or not r.get("quantity", "").strip():
        problems.append(f"{name}: no quantity")
    if not isinstance(r.get("check"), str) or not r.get("check", "").strip():
        problems.append(f"{name}: no check (the rule in words)")
    verdict = r.get("verdict")
    if verdict not in (AGREES, DOCUMENTED):
        problems.append(f"{name}: verdict {verdict!r}: {r.get('check')}; {r.get('note')}")
    elif declared is not None and verdict != declared.expected:
        problems.append(f"{name}: verdict {verdict!r}, declared {declared.expected!r}: {r.get('note')}")
    if declared is not None and declared.documented and not str(r.get("note", "")).startswith(declared.reason):
        problems.append(f"{name}: a documented disagreement whose note does not start with its reason")
    wrong = _evidence_problem(r.get("simulation"))
    if wrong:
        problems.append(f"{name}: {wrong}")
    try:
        json.dumps(r)
    except (TypeError, ValueError) as exc:
        problems.append(f"{name}: the row is not JSON data ({exc})")
    return problems


def _declared(theory: Theory, field_name: str, attr: str) -> list[Any] | None:
    """The ``CLAIMS`` (or ``CROSS_CLAIMS``) a theory's claims module declares, or None when it declares none."""
    ref = getattr(theory, field_name)
    if not ref:
        return None
    found = getattr(registry.resolve(ref.partition(":")[0]), attr, None)
    return None if found is None else list(found)


def _compare_keys(rows: list[Any], declared: list[Any] | None, what: str) -> tuple[list[str], dict[str, Any]]:
    if declared is None:
        return [], {}
    keys = [c.key for c in declared]
    problems = []
    if len(keys) != len(set(keys)):
        problems.append(f"{what}: claim ids declared twice: {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    got = [r.get("claim") for r in rows if isinstance(r, dict)]
    if got != keys:
        problems.append(f"{what}: rows {got} are not the declared claims {keys}")
    return problems, {c.key: c for c in declared}


def check_claims(theory: Any, *, quick: bool = True) -> dict[str, int]:
    """Run the theory's claims as the report does (``claims(quick, step, figures_dir)``, after its figures when it
    declares ``figures_before_claims``; then its ``cross_claims``) and check every row: the fields of a report row
    (``resprop.numeric.report.claims.row``), a quantity and a rule in words, the verdict it declares ("agrees" or
    its documented disagreement, whose note starts with the reason), JSON data, and independent evidence: a Monte
    Carlo mean and standard error or a reference value, naming its method.  Declared ``CLAIMS`` (and
    ``CROSS_CLAIMS``) give exactly the rows, in order, once each.  Returns the counts of rows checked."""
    theory, quick = _theory(theory), _quick(quick)
    if theory.claims is None:
        _abort(theory, "claims", "the theory declares no claims (Theory.claims): the report would show nothing")
    problems: list[str] = []
    fields = _row_fields()
    steps = [0]

    def step() -> None:
        steps[0] += 1

    with tempfile.TemporaryDirectory(prefix="resprop-conformance-claims-") as tmp:
        figures_dir = Path(tmp)
        try:
            if theory.figures and theory.figures_before_claims:
                theory.load("figures")(figures_dir, quick=quick, seed=0)
            out = theory.load("claims")(quick, step, figures_dir=figures_dir)
        except Exception as exc:  # noqa: BLE001
            _abort(theory, "claims", f"the claims raised {type(exc).__name__}: {exc}")
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], list)):
        _abort(theory, "claims", f"claims(...) must return (rows, extra) with a list of rows, got {type(out).__name__}")
    rows, extra = out
    _CLAIMS_DATA[(theory.slug, quick)] = extra
    if not rows:
        problems.append("the claims gave no rows")
    if steps[0] < 1:
        problems.append("the claims never called step() (the report's progress)")
    found, declared = _compare_keys(rows, _declared(theory, "claims", "CLAIMS"), "claims")
    problems += found
    cross: list[Any] = []
    if theory.cross_claims:
        try:
            cross = theory.load("cross_claims")(quick, lambda: None)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"the cross-theory claims raised {type(exc).__name__}: {exc}")
        if not isinstance(cross, list):
            problems.append(f"cross_claims(...) must return a list of rows, got {type(cross).__name__}")
            cross = []
        found, declared_cross = _compare_keys(cross, _declared(theory, "cross_claims", "CROSS_CLAIMS"), "cross_claims")
        problems += found
        declared |= declared_cross
    for c in declared.values():
        if c.theory != theory.slug:
            problems.append(f"{c.key}: declared for the theory {c.theory!r}, not {theory.slug!r}")
    for r in rows + cross:
        problems += _row_problems(r, declared.get(str(r.get("claim"))) if isinstance(r, dict) else None, fields)
    _fail(theory, "claims", problems, limit=20)
    return {"rows": len(rows), "cross_rows": len(cross),
            "with_monte_carlo": sum(isinstance(r.get("simulation"), dict) and "se" in r["simulation"]
                                    for r in rows + cross)}


# ----------------------------------------------------------------------------------------------- figures
_PNG = b"\x89PNG\r\n\x1a\n"


def check_figures(theory: Any, *, quick: bool = True) -> dict[str, int]:
    """Draw the theory's figures (``figures(out_dir, quick=..., seed=0, data=...)``) into a directory that does
    not exist yet, inside a temporary one; ``data`` is what its claims returned when :func:`check_claims` ran
    before in this process (as ``resprop reproduce`` passes it), else None (as ``resprop figures``).  Every
    returned path must be a file in that directory; the PNGs (at least one) must be named after the slug, decode
    as images of at least 100 x 100 pixels, not be blank, and differ from each other.  A theory without figures
    passes with nothing drawn.  Returns the count of PNGs checked."""
    theory, quick = _theory(theory), _quick(quick)
    if theory.figures is None:
        return {"figures": 0}
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.image as mpimg
    import numpy as np

    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="resprop-conformance-figures-") as tmp:
        out = Path(tmp) / "figures"
        try:
            paths = theory.load("figures")(out, quick=quick, seed=0, data=_CLAIMS_DATA.get((theory.slug, quick)))
        except Exception as exc:  # noqa: BLE001
            _abort(theory, "figures", f"the figures raised {type(exc).__name__}: {exc}")
        if not isinstance(paths, list) or not all(isinstance(p, (str, Path)) for p in paths):
            _abort(theory, "figures", f"figures(...) must return a list of paths, got {paths!r:.200}")
        paths = [Path(p) for p in paths]
        pngs = [p for p in paths if p.suffix == ".png"]
        if not pngs:
            problems.append("no PNG drawn")
        digests: dict[str, str] = {}
        for p in paths:
            if not p.is_file() or p.resolve().parent != out.resolve():
                problems.append(f"{p}: not a file in the output directory {out}")
                continue
            if p.suffix != ".png":
                continue
            if not p.name.startswith(theory.slug):
                problems.append(f"{p.name}: a figure's name must start with the slug {theory.slug!r}")
            if p.read_bytes()[:8] != _PNG:
                problems.append(f"{p.name}: not a PNG")
                continue
            img = mpimg.imread(p)
            if img.ndim != 3 or img.shape[0] < 100 or img.shape[1] < 100:
                problems.append(f"{p.name}: an image of shape {img.shape}")
            elif float(np.ptp(img[..., :3])) <= 0.1:
                problems.append(f"{p.name}: blank")
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            if digest in digests:
                problems.append(f"{p.name}: the same image as {digests[digest]}")
            digests[digest] = p.name
    _fail(theory, "figures", problems)
    return {"figures": len(pngs)}


# ----------------------------------------------------------------------------------------------- CLI
def _run_cli(argv: Sequence[str]) -> tuple[int | None, str, str]:
    """``resprop ARGV`` in this process: (exit code, stdout, stderr); a code of None means an exception escaped
    (its type and message are the stderr)."""
    from resprop.numeric.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse: --help, usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except Exception as exc:  # noqa: BLE001 - an escaping exception is the finding
        return None, out.getvalue(), f"{type(exc).__name__}: {exc}"
    return code, out.getvalue(), err.getvalue()


def _numeric(action) -> str | None:
    """'int' or 'float' for an option whose value is a number (argparse ``type``), else None."""
    t = action.type
    parameter = getattr(t, "parameter", None)
    if parameter is not None:
        return "int" if getattr(parameter, "integer", False) else "float"
    if t is int:
        return "int"
    if t is float:
        return "float"
    return None


def _guess(action, kind: str | None) -> list[str] | None:
    """A plausible value for a required option, or None."""
    if action.choices:
        return [str(next(iter(action.choices)))]
    if kind == "int":
        return ["3"]
    if kind == "float":
        return ["0.5"]
    return None


def _documented(theory: Theory, command: str) -> list[str] | None:
    """The first ``resprop COMMAND ...`` line of the theory's quickstart page, when the page is on this machine."""
    page = theory.docs_file()
    if page is None:
        return None
    blocks = re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", Path(page).read_text(), re.S | re.M)
    for body in blocks:
        for line in body.splitlines():
            line = line.strip().removeprefix("$ ").strip()
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            if words[:2] == ["resprop", command]:
                return words[2:]
    return None


def _without(argv: Sequence[str], option_strings: Sequence[str]) -> list[str]:
    """``argv`` without the option (and its values)."""
    out, skipping = [], False
    for word in argv:
        if word in option_strings:
            skipping = True
            continue
        if any(word.startswith(o + "=") for o in option_strings):
            skipping = False
            continue
        if skipping and (not word.startswith("-") or re.fullmatch(r"-\d[\d.e+-]*", word)):
            continue
        skipping = False
        out.append(word)
    return out


def _base(theory: Theory, command: str, parser, examples: Mapping[str, Sequence[str]] | None):
    """(argv of a valid call of ``command`` without the subcommand, where it came from), or (None, reason)."""
    if examples and command in examples:
        return list(examples[command]), "the example given"
    documented = _documented(theory, command)
    if documented is not None:
        return documented, f"the first `resprop {command}` line of {theory.docs}"
    argv = []
    for action in parser._actions:
        if not action.required or isinstance(action, _HELP_TYPES):
            continue
        value = _guess(action, _numeric(action))
        if value is None:
            return None, f"no example and no guess for the required {action.dest}"
        argv += ([action.option_strings[-1]] if action.option_strings else []) + value
    return argv, "values guessed for the required options"


_HELP_TYPES = (argparse._HelpAction, argparse._VersionAction)


def _subparsers(parser) -> dict[str, Any]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _error_line(err: str, names: Sequence[str]) -> bool:
    """The last ``resprop...error`` line of stderr names one of ``names`` (``-`` and ``_`` alike)."""
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("resprop") and "error" in ln]
    if not lines or "Traceback" in err:
        return False
    text = lines[-1].replace("-", "_").lower()
    return any(n.lstrip("-").replace("-", "_").lower() in text for n in names)


def check_cli(theory: Any, *, examples: Mapping[str, Sequence[str]] | None = None) -> dict[str, int]:
    """The theory's ``cli`` adds exactly its declared ``subcommands``; ``resprop`` has them, and ``resprop theories
    --json`` lists them.  Each prints its help (exit 0) and refuses an unknown option (exit 2, no traceback).
    Each numeric option (``type`` int or float, or a declared parameter's converter) refuses a non-numeric,
    an empty, a NaN and an infinite value (and an integer option a fraction) with exit 2 and one ``resprop ...
    error`` line naming the option, no traceback, when given with the other options of a valid call: the call in
    ``examples[subcommand]`` (argv after the subcommand), else the first ``resprop SUBCOMMAND`` line of the
    theory's quickstart page (when the page is on this machine), else values guessed for the required options
    (a choice, 3, 0.5).  That call must parse.  Nothing runs to completion except ``theories --json``.
    Returns the counts of subcommands and of refused values checked."""
    theory = _theory(theory)
    if examples is not None and (not isinstance(examples, Mapping) or not all(
            isinstance(k, str) and isinstance(v, (list, tuple)) and all(isinstance(w, str) for w in v)
            for k, v in examples.items())):
        raise ParameterError("examples", "must map a subcommand to its arguments (a list of strings)")
    unknown = sorted(set(examples or ()) - set(theory.subcommands))
    if unknown:
        raise ParameterError("examples", f"{unknown} are not subcommands of {theory.slug!r} "
                                         f"({', '.join(theory.subcommands) or 'none'})")
    if theory.cli is None:
        return {"subcommands": 0, "refused": 0}
    from resprop.numeric.cli import build_parser

    problems: list[str] = []
    fresh = argparse.ArgumentParser(prog="resprop")
    try:
        theory.load("cli")(fresh.add_subparsers(dest="command"))
    except Exception as exc:  # noqa: BLE001
        _abort(theory, "cli", f"its cli function raised {type(exc).__name__}: {exc}")
    added = set(_subparsers(fresh))
    if added != set(theory.subcommands):
        problems.append(f"its cli adds {sorted(added)}, it declares {sorted(theory.subcommands)}")
    parsers = _subparsers(build_parser())
    missing = [c for c in theory.subcommands if c not in parsers]
    if missing:
        problems.append(f"`resprop` lacks the subcommands {missing}")
    code, out, err = _run_cli(["theories", "--json"])
    try:
        entry = next(e for e in json.loads(out) if e.get("slug") == theory.slug)
        if entry.get("subcommands") != list(theory.subcommands):
            problems.append(f"`resprop theories --json` lists the subcommands {entry.get('subcommands')}")
    except (StopIteration, ValueError, AttributeError):
        problems.append(f"`resprop theories --json` does not list the theory (exit {code}): {err.strip()[-200:]}")
    refused = 0
    for command in theory.subcommands:
        parser = parsers.get(command)
        if parser is None:
            continue
        code, out, err = _run_cli([command, "--help"])
        if code != 0 or command not in out:
            problems.append(f"`resprop {command} --help`: exit {code}, {err.strip()[-200:] or out[:200]!r}")
        code, out, err = _run_cli([command, "--conformance-no-such-option"])
        if code != 2 or "Traceback" in err or "error" not in err:
            problems.append(f"`resprop {command} --conformance-no-such-option`: exit {code} (want 2 and one error "
                            f"line), {err.strip()[-200:]!r}")
        base, source = _base(theory, command, parser, examples)
        if base is not None:
            try:
                with contextlib.redirect_stderr(io.StringIO()) as e:
                    build_parser().parse_args([command, *base])
            except SystemExit:
                problems.append(f"`resprop {command} {shlex.join(base)}` ({source}) does not parse: "
                                f"{e.getvalue().strip()[-200:]}")
                base = None
            except Exception as exc:  # noqa: BLE001 - e.g. a declared option refusing the example's value
                problems.append(f"`resprop {command} {shlex.join(base)}` ({source}) does not parse: {exc}")
                base = None
        for action in parser._actions:
            kind = _numeric(action)
            if kind is None or not action.option_strings:
                continue
            option = action.option_strings[-1]
            names = [*action.option_strings, action.dest]
            bad = ["abc", ""] + (["nan", "inf", "-inf"] if base is not None else [])
            bad += ["2.5"] if kind == "int" else []
            for value in bad:
                argv = [command, *_without(base or [], action.option_strings), f"{option}={value}"]
                code, out, err = _run_cli(argv)
                refused += 1
                if code != 2 or not _error_line(err, names):
                    problems.append(f"`resprop {shlex.join(argv)}`: exit {code}, "
                                    f"{(err.strip().splitlines() or ['no error'])[-1][:200]!r} (want exit 2 and "
                                    f"one line naming {option})")
    _fail(theory, "cli", problems)
    return {"subcommands": len(theory.subcommands), "refused": refused}


# ----------------------------------------------------------------------------------------------- all of it
#: the checks, by name, in the order :func:`check_theory` runs them
CHECKS: dict[str, Callable[..., dict[str, int]]] = {
    "derivation": check_derivation,
    "latex": check_latex_roundtrip,
    "kernels": check_kernel_domains,
    "claims": check_claims,
    "figures": check_figures,
    "cli": check_cli,
}


def check_theory(theory: Any, *, quick: bool = True, checks: Iterable[str] | None = None, target: Any = None,
                 cli_examples: Mapping[str, Sequence[str]] | None = None) -> dict[str, dict[str, int]]:
    """Run the conformance checks ``checks`` (names of :data:`CHECKS`; default all, in that order) on ``theory``
    (a registered :class:`~resprop.registry.Theory`, or its slug).

    ``quick``: claims and figures at their quick sizes and 10 hypothesis examples per kernel (else full sizes and
    100).  ``target``: the directory the theory's generated files were written to (``write_generated(target,
    slugs=[slug])``), when they are not installed in its generated package.  ``cli_examples``: a valid call of
    each subcommand (``{"my-command": ["--depth", "3"]}``) for the ``cli`` check.

    Every check runs; if any fails, a :class:`ConformanceError` (an ``AssertionError``) names the theory and the
    failing checks with what failed (``.failures``).  Returns each check's summary of what it verified."""
    theory, quick, target = _theory(theory), _quick(quick), _target(target)
    if checks is None:
        names = list(CHECKS)
    else:
        if isinstance(checks, str) or not isinstance(checks, Iterable):
            raise ParameterError("checks", f"must be a list of check names ({', '.join(CHECKS)}), got {checks!r}")
        names = list(checks)
        unknown = [c for c in names if c not in CHECKS]
        if unknown or not names:
            raise ParameterError("checks", f"unknown check(s) {unknown}; allowed: {', '.join(CHECKS)}" if unknown
                                 else f"must name at least one of {', '.join(CHECKS)}")
    options: dict[str, dict[str, Any]] = {
        "derivation": {"target": target}, "latex": {}, "kernels": {"quick": quick, "target": target},
        "claims": {"quick": quick}, "figures": {"quick": quick}, "cli": {"examples": cli_examples}}
    summaries: dict[str, dict[str, int]] = {}
    failures: dict[str, str] = {}
    for name in names:
        try:
            summaries[name] = CHECKS[name](theory, **options[name])
        except ConformanceError as exc:
            failures[name] = exc.message
    if failures:
        message = failures[next(iter(failures))] if len(failures) == 1 else "\n".join(
            f"[{name}] {text}" for name, text in failures.items())
        raise ConformanceError(theory.slug, next(iter(failures)), message, failures)
    return summaries

