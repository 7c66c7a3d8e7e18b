"""The theory registry: one entry per theory, and every list of theories in resprop is read from here.

A theory is a folder ``numeric/theories/<slug>/`` whose ``__init__.py`` declares ``THEORY = Theory(...)``: its
slug, title and citation, its derivations (``derive/theories/<name>.py``; each becomes ``generated/<name>.py`` and
a LaTeX document), its CLI subcommands, its report claims and its figures.  ``BUILTIN`` below lists the packages
of the five theories of the seed papers; :func:`register` adds one at run time (a test's example theory, a
notebook), and installed distributions can add one through the ``resprop.theories`` entry-point group (the
entry point names the package that holds ``THEORY``).

Everything here is referenced by dotted name (``"package.module:function"``) and imported only when used, so
``resprop derive`` can regenerate a theory's kernels before its numeric code (which imports them) is importable.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

#: the built-in theories, in report order (one line per theory: the "registry entry")
BUILTIN = (
    "resprop.numeric.theories.fischer",
    "resprop.numeric.theories.lognormal",
    "resprop.numeric.theories.pdlt",
    "resprop.numeric.theories.stable",
    "resprop.numeric.theories.abcd",
)

#: the shared foundation (not a theory): Gaussian expectations used by several theories
FOUNDATION = {"gaussian": "resprop.derive.gaussian:derive_gaussian",
              "residual": "resprop.derive.residual:derive_residual"}
FOUNDATION_PAPERS = {"cho_saul2009": "Cho \\& Saul (2009), Kernel methods for deep learning",
                     "hendrycks2016": "Hendrycks \\& Gimpel (2016), Gaussian error linear units (GELUs)"}

_SLUG = re.compile(r"^[a-z][a-z0-9]*$")
#: a lazily imported reference: "package.module:attribute"
_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
#: the subcommands of resprop itself (numeric/cli.py; tests/test_registry.py checks the two agree): no theory may
#: declare one of them
CORE_SUBCOMMANDS = ("derive", "latex", "sweep", "kernel", "fluctuations", "predict", "theories", "figures", "train",
                    "reproduce")
#: the prefix of a theory's own generated files among ``resprop.derive.codegen.generated_files``' keys
#: (``theories/<slug>/<file>``: the file lives in the theory's generated package)
OWN_PREFIX = "theories/"
#: the ``Theory`` fields that hold a "module:attribute" reference (or None)
REFERENCE_FIELDS = ("cli", "claims", "figures", "cross_claims", "sweep_kinds", "experiments")


def source_root(package_dir: Path | None = None) -> Path | None:
    """The root of the source checkout that the ``resprop`` package (``package_dir``, default this one) runs from
    (an editable install, or the checkout on ``sys.path``), or None: a wheel installs the packages, not docs/."""
    root = (package_dir or Path(__file__).resolve().parent).parent
    return root if (root / "pyproject.toml").is_file() and (root / "docs").is_dir() else None


#: what each reference field must resolve to: (the parameters it is called with, or None for a dict; the documented
#: signature).  `Theory.load` checks the loaded object against it and names the field when it does not fit.
SIGNATURES: dict[str, tuple[tuple[str, ...] | None, str]] = {
    "cli": (("sub",), "cli(sub) -> None: add the theory's subcommands to argparse's sub-parsers object `sub`"),
    "claims": (("quick", "step", "figures_dir"),
               "claims(quick: bool, step: Callable[[], None], figures_dir: Path | None = None) -> (rows, extra): "
               "evaluate the theory's CLAIMS; step() once per unit of progress (Theory.steps units); extra is "
               "passed to figures as data="),
    "figures": (("out_dir", "quick", "seed", "data", "progress"),
                "figures(out_dir: Path, *, quick: bool, seed: int, data=None, progress: bool = False) -> list[Path]: "
                "draw the theory's PNGs (names start with the slug); data: the claims' extra (resprop reproduce), "
                "progress: show a bar (resprop figures)"),
    "cross_claims": (("quick", "step"), "cross_claims(quick: bool, step: Callable[[], None]) -> rows"),
    "sweep_kinds": (None, "a dict kind name -> sweep kind (resprop sweep)"),
    "experiments": (None, "a dict name -> resprop.numeric.training.experiments.Experiment (resprop train)"),
}


def check_signature(field_name: str, obj: Any, where: str = "") -> None:
    """ValueError naming ``field_name`` when ``obj`` cannot be called the way resprop calls that field (see
    ``SIGNATURES``), or is not a dict where one is expected."""
    import inspect

    params, doc = SIGNATURES[field_name]
    if params is None:
        if not isinstance(obj, dict):
            raise ValueError(f"{field_name}: {where}must be {doc}, got {type(obj).__name__}")
        return
    if not callable(obj):
        raise ValueError(f"{field_name}: {where}must be callable as {doc}")
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return  # a builtin or C function: nothing to inspect
    kinds = {p.name: p.kind for p in sig.parameters.values()}
    if inspect.Parameter.VAR_KEYWORD in kinds.values():
        return
    missing = [n for n in params[1:] if n not in kinds]
    positional = [p for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    if missing or not positional:
        raise ValueError(f"{field_name}: {where}must be callable as {doc}; "
                         f"{'it lacks ' + ', '.join(missing) if missing else 'it takes no positional argument'}")


class UnknownTheoryError(ValueError):
    """A theory slug that is not registered (names the parameter and the allowed slugs)."""


def resolve(ref: str) -> Any:
    """``"package.module:attribute"`` -> the attribute (imported now)."""
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Theory:
    """Everything resprop knows about one theory, declared once in ``numeric/theories/<slug>/__init__.py``.

    ``derivations`` maps each derivation name (the stem of ``generated/<name>.py`` and ``latex/<name>.tex``) to
    the ``"module:function"`` returning its :class:`resprop.derive.results.Derivation`.  ``cli`` is a
    ``"module:function"`` called with argparse's sub-parsers object to add ``subcommands``.  ``claims`` is a
    ``"module:function"`` ``(quick, step, figures_dir=None) -> (rows, extra)`` whose module declares the theory's
    claims once as ``CLAIMS`` (:class:`resprop.numeric.report.claims.Claim`; the report and tests/test_claims.py
    both evaluate them); ``figures`` a
    ``"module:function"`` ``(out_dir, quick=..., seed=...) -> [paths]`` drawing the theory's PNGs (names start
    with the slug).  ``cross_claims`` (optional) gives claims that compare this theory with others; they run
    when any of ``cross_with`` (or this theory) is reproduced.  ``figures_before_claims``: the claims read a file
    the figures write (``figures_dir``), so the report draws the figures first.  ``generated_shared`` lists generated
    files
    outside its own derivations that its numbers depend on (for the report's freshness row).  ``sweep_kinds``
    (optional) is a ``"module:KINDS"`` dict of the `resprop sweep` kinds it adds.  ``experiments`` (optional) is
    a ``"module:EXPERIMENTS"`` dict name -> :class:`resprop.numeric.training.experiments.Experiment` of its
    trained-network experiments (`resprop train`; docs/training.md).  ``docs`` is its quickstart page as a path
    relative to the root of resprop's source repository (``docs/quickstart/<slug>.md``); the pages are not
    package data, so :meth:`docs_file` gives a local file only when the package runs from a checkout.  ``steps``
    is how many times ``claims`` calls its ``step`` (the report's progress bar).  ``package`` is the dotted name
    of the package that declares ``THEORY`` (filled in by the registry for built-in theories and plugins); the
    theory's generated code (kernels, recursions, compiled kernels, its parameters module, LaTeX and reference
    pages) is written into and checked inside ``<package>.generated`` (`generated_package`), so a plugin owns
    its generated code and installing or removing one never makes another theory stale.

    The signature of every function field is in ``SIGNATURES`` (figures are called with ``data=`` by
    ``resprop reproduce`` and ``progress=`` by ``resprop figures``); `load` checks it when the field is first
    used and names the field when it does not fit.
    """

    slug: str
    title: str
    citation: str
    paper: str
    citation_tex: str
    derivations: dict[str, str]
    summary: str = ""
    cli: str | None = None
    subcommands: tuple[str, ...] = ()
    claims: str | None = None
    figures: str | None = None
    cross_claims: str | None = None
    cross_with: tuple[str, ...] = ()
    generated_shared: tuple[str, ...] = ()
    figures_before_claims: bool = False
    sweep_kinds: str | None = None
    experiments: str | None = None
    steps: int = 1
    docs: str = ""
    package: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.slug, str) or not _SLUG.match(self.slug):
            raise ValueError(f"slug: must match {_SLUG.pattern} (one lower-case word), got {self.slug!r}")
        for name in ("title", "citation", "paper", "citation_tex", "summary", "docs", "package"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name}: theory {self.slug!r}: must be a string, got "
                                 f"{type(getattr(self, name)).__name__}")
        if not isinstance(self.derivations, dict) or not self.derivations:
            raise ValueError(f"derivations: theory {self.slug!r} declares none (a dict name -> 'module:function')")
        for name, ref in self.derivations.items():
            if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_]*$", name):
                raise ValueError(f"derivations: theory {self.slug!r}: the name {name!r} must be a lower-case "
                                 "Python identifier (it names generated/<name>.py)")
            if not isinstance(ref, str) or not _REF.match(ref):
                raise ValueError(f"derivations: theory {self.slug!r}: {name!r} must map to 'module:function', "
                                 f"got {ref!r}")
        for field_name in REFERENCE_FIELDS:
            ref = getattr(self, field_name)
            if ref is not None and (not isinstance(ref, str) or not _REF.match(ref)):
                raise ValueError(f"{field_name}: theory {self.slug!r}: must be 'module:attribute' or None, got {ref!r}")
        for field_name in ("subcommands", "cross_with", "generated_shared"):
            value = getattr(self, field_name)
            if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"{field_name}: theory {self.slug!r}: must be a tuple of names, got {value!r}")
        if self.subcommands and self.cli is None:
            raise ValueError(f"cli: theory {self.slug!r} declares subcommands {list(self.subcommands)} but no cli "
                             "function to add them")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps: theory {self.slug!r}: must be an integer >= 1, got {self.steps!r}")
        if self.package and not re.match(r"^[^\s:.]+(\.[^\s:.]+)*$", self.package):
            raise ValueError(f"package: theory {self.slug!r}: must be a dotted module name, got {self.package!r}")

    @property
    def generated_package(self) -> str:
        """The dotted name of the package its generated code is written into and imported from:
        ``<package>.generated`` (a ValueError naming ``package`` when the theory has none)."""
        if not self.package:
            raise ValueError(f"package: theory {self.slug!r} declares no package, so its generated code has nowhere "
                             "to go; declare package='your_plugin' (where THEORY lives) or generate into a target "
                             "directory")
        return f"{self.package}.generated"

    def generated_dir(self) -> Path:
        """The directory of `generated_package` (it need not exist yet: `resprop derive` creates it)."""
        import importlib.util

        spec = importlib.util.find_spec(self.generated_package.rpartition(".")[0])
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"package: theory {self.slug!r}: {self.package!r} is not an importable package")
        return Path(list(spec.submodule_search_locations)[0]) / "generated"

    @property
    def generated_files(self) -> tuple[str, ...]:
        """The generated files its numbers depend on, as keys of ``resprop.derive.codegen.generated_files``: its
        own (``theories/<slug>/...``: one kernel module and one LaTeX document per derivation) and the shared
        foundation files it lists in ``generated_shared`` (relative to resprop's generated/)."""
        own = tuple(f"{OWN_PREFIX}{self.slug}/{f}" for name in self.derivations
                    for f in (f"{name}.py", f"latex/{name}.tex"))
        return own + tuple(self.generated_shared)

    def derivation(self, name: str):
        return derivation(name)

    def load(self, what: str) -> Any:
        """The object the field ``what`` names (a function; for ``sweep_kinds`` and ``experiments`` a dict),
        imported now and checked against its signature (``SIGNATURES``; a ValueError naming the field)."""
        ref = getattr(self, what)
        if ref is None:
            raise ValueError(f"{what}: theory {self.slug!r} declares no {what}")
        obj = resolve(ref)
        if what in SIGNATURES:
            check_signature(what, obj, f"theory {self.slug!r}: {ref} ")
        return obj

    def docs_file(self) -> str | None:
        """The absolute path of the quickstart page when it is on this machine (a source checkout), else None."""
        root = source_root()
        if not self.docs or root is None or not (root / self.docs).is_file():
            return None
        return str(root / self.docs)

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-ready data (``resprop theories --json``).  ``generated`` lists the generated files
        its numbers depend on as package paths (`display_path`: its own ``<package>/generated/...``, the shared
        ``generated/...`` of resprop), ``generated_package`` where its own are; ``docs_repository_path`` is
        relative to the root of the source repository (a wheel does not install it) and ``docs_file`` is that
        page on this machine, or None where it is not."""
        return {"slug": self.slug, "title": self.title, "citation": self.citation, "summary": self.summary,
                "derivations": list(self.derivations), "subcommands": list(self.subcommands),
                "generated": [display_path(f) for f in self.generated_files],
                "generated_package": self.generated_package if self.package else None,
                "docs_repository_path": self.docs or None,
                "docs_file": self.docs_file()}


_REGISTERED: dict[str, Theory] = {}
_LOADED = False
#: plugins (entry points of the ``resprop.theories`` group) and theories that could not be loaded: name -> reason
_BROKEN: dict[str, str] = {}


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for pkg in BUILTIN:  # resprop's own: a failure here is a bug, and raises
        _add(_with_package(importlib.import_module(pkg).THEORY, pkg))
    for ep in entry_points(group="resprop.theories"):
        try:
            module = importlib.import_module(ep.value)
            if not hasattr(module, "THEORY"):
                raise ValueError(f"{ep.value} declares no THEORY")
            _add(_with_package(module.THEORY, ep.value))
        except Exception as exc:  # noqa: BLE001 - a plugin must not take resprop down; it is reported instead
            mark_broken(f"plugin {ep.name}", f"{type(exc).__name__}: {exc}")


def _with_package(theory: Any, package: str) -> Any:
    """``theory`` with ``package`` (where its THEORY was found) filled in when it declares none."""
    import dataclasses

    if isinstance(theory, Theory) and not theory.package:
        return dataclasses.replace(theory, package=package)
    return theory


def display_path(rel: str) -> str:
    """A key of ``resprop.derive.codegen.generated_files`` as a path inside the installed packages: a theory's own
    file (``theories/<slug>/<file>``) as ``<its generated package>/<file>`` (numeric/theories/<slug>/generated/...
    for a built-in theory, the plugin's package for a plugin), ``docs/...`` as is, and a shared file as
    ``generated/<file>``."""
    if rel.startswith("docs/"):
        return rel
    if rel.startswith(OWN_PREFIX):
        slug, _, own = rel.removeprefix(OWN_PREFIX).partition("/")
        package = theory(slug).generated_package.removeprefix("resprop.")
        return f"{package.replace('.', '/')}/{own}"
    return f"generated/{rel}"


def mark_broken(name: str, reason: str, slug: str | None = None) -> None:
    """Record that ``name`` (a plugin, or the theory ``slug``) could not be loaded: one warning line on stderr, an
    entry in `broken` (``resprop theories`` lists it), and the theory ``slug`` leaves the registry, so that every
    other command and theory keeps working."""
    import sys

    reason = " ".join(str(reason).split())[:300]
    if name not in _BROKEN:
        print(f"resprop: warning: {name} is broken and was skipped: {reason}", file=sys.stderr)
    _BROKEN[name] = reason
    if slug is not None:
        _REGISTERED.pop(slug, None)


def broken() -> dict[str, str]:
    """Plugins and theories that failed to load: name -> reason."""
    _load()
    return dict(_BROKEN)


def _add(theory: Theory, replace: bool = False) -> None:
    if not isinstance(theory, Theory):
        raise ValueError(f"theory: expected a resprop.registry.Theory, got {type(theory).__name__}")
    others = [other for other in _REGISTERED.values() if other.slug != theory.slug]
    if theory.slug in _REGISTERED and not replace:
        raise ValueError(f"slug: {theory.slug!r} is already registered ({_REGISTERED[theory.slug].title}); pass "
                         "replace=True to replace it")
    clash = [name for other in others for name in theory.derivations
             if name in other.derivations or name in FOUNDATION]
    clash += [name for name in theory.derivations if name in FOUNDATION and name not in clash]
    if clash:
        raise ValueError(f"derivations: {clash} already belong to another theory or the foundation")
    taken = {c: "resprop" for c in CORE_SUBCOMMANDS} | {c: o.slug for o in others for c in o.subcommands}
    clash_cmd = [f"{c} (of {taken[c]})" for c in theory.subcommands if c in taken]
    if clash_cmd:
        raise ValueError(f"subcommands: {', '.join(clash_cmd)} already exist")
    _REGISTERED[theory.slug] = theory


def register(theory: Theory, replace: bool = False) -> Theory:
    """Add a theory at run time; returns it.  A slug, derivation name or subcommand that is already taken is a
    ValueError naming the field, unless ``replace=True`` (which replaces the theory of the same slug).  See
    docs/adding-a-theory.md."""
    _load()
    _add(theory, replace=replace)
    return theory


def unregister(slug: str) -> None:
    """Remove a run-time theory (tests use this to clean up)."""
    _load()
    _REGISTERED.pop(slug, None)


def theories() -> dict[str, Theory]:
    """All registered theories by slug, in report order."""
    _load()
    return dict(_REGISTERED)


def slugs() -> tuple[str, ...]:
    return tuple(theories())


def theory(slug: str) -> Theory:
    try:
        return theories()[slug]
    except KeyError:
        raise UnknownTheoryError(f"theory: unknown theory {slug!r}; allowed: {', '.join(theories())}") from None


def derivations() -> dict[str, tuple[str, str]]:
    """Every derivation, foundation first: name -> (``"module:function"``, theory slug or "foundation")."""
    out = {name: (ref, "foundation") for name, ref in FOUNDATION.items()}
    for th in theories().values():
        out.update({name: (ref, th.slug) for name, ref in th.derivations.items()})
    return out


#: derivations already run in this process, by "module:function" (a SymPy derivation takes seconds; codegen, the
#: LaTeX export and the reference pages all read the same one, and none of them modifies it)
_DERIVED: dict[str, Any] = {}


def derivation(name: str):
    """The :class:`~resprop.derive.results.Derivation` called ``name`` (a generated module's stem), computed once
    per process."""
    table = derivations()
    if name not in table:
        raise UnknownTheoryError(f"derivation: unknown derivation {name!r}; allowed: {', '.join(table)}")
    ref = table[name][0]
    if ref not in _DERIVED:
        _DERIVED[ref] = resolve(ref)()
    return _DERIVED[ref]


def _generated_package_of(derivation_name: str) -> str:
    """The generated package holding derivation ``derivation_name``'s code (an UnknownTheoryError when unknown)."""
    table = derivations()
    if derivation_name not in table:
        raise UnknownTheoryError(f"derivation: unknown derivation {derivation_name!r}; allowed: {', '.join(table)}")
    owner = table[derivation_name][1]
    return "resprop.generated" if owner == "foundation" else theory(owner).generated_package


def generated_module(name: str) -> str:
    """The dotted name of the generated kernel module of derivation ``name`` (``resprop.generated.<name>`` for
    the foundation, ``<theory package>.generated.<name>`` for a theory's own); append ``_recursions`` or
    ``_compiled`` for those modules."""
    return f"{_generated_package_of(name)}.{name}"


def declared(derivation_name: str, name: str):
    """The run-time declaration (``resprop.numeric.engine.validation.Declared``) of the parameter ``name`` of the
    derivation ``derivation_name``, read from the generated parameters module of its owner (no SymPy)."""
    return importlib.import_module(f"{_generated_package_of(derivation_name)}.parameters").PARAMETERS[
        derivation_name][name]


def derivation_source(name: str) -> str:
    """Path of the module defining derivation ``name``, relative to the source tree (e.g. derive/theories/x.py)."""
    module = derivations()[name][0].partition(":")[0]
    parts = module.split(".")
    if parts[0] == "resprop":
        parts = parts[1:]
    return "/".join(parts) + ".py"


def papers() -> dict[str, str]:
    """Paper key -> TeX citation, for every theory and the foundation."""
    out = dict(FOUNDATION_PAPERS)
    out.update({th.paper: th.citation_tex for th in theories().values()})
    return out
