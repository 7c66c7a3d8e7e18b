"""The main job: reproduce every theory with Monte Carlo checks into DIR/report.json + DIR/index.html.

``reproduce(out, theory)`` runs once, in the report's first section ("shared"):

- a freshness check of ``generated/`` (``resprop.derive.codegen.stale_files``): one row for the whole run; a stale
  file of a theory of the run (or one shared by all) makes it a FAILS row;
- the LaTeX export of the shared foundation's derivations and of the run's theories (nothing else is written),
  the foundation's documents compiled to PDF when pdflatex exists;

then, per theory (fischer, lognormal, pdlt, stable, abcd):

1. the theory's claims (``CLAIMS`` in ``numeric/theories/<slug>/claims.py``,
   :class:`resprop.numeric.report.claims.Claim`, run through the registry's ``claims`` entry): the paper's value or
   claim, resprop's theory value, Monte Carlo (or another independent route) with its standard error, the tolerance
   rule, and a verdict "agrees", "documented disagreement" or "FAILS" (tests/test_claims.py checks the same claim
   objects);
2. its figures (the existing figure makers, quick settings with ``quick``) in DIR/figures/;
3. its LaTeX documents (``resprop.derive.latex.export_latex``) in DIR/latex/, compiled to PDF when pdflatex exists;

then the cross-theory checks.  An exception inside a theory becomes a FAILS row; it does not stop the run.  Every
file written into DIR is linked from index.html (tests/test_reproduce.py checks it).  ``timings`` in report.json
lists the seconds of each step (the freshness check, the LaTeX export, each theory, the cross-theory checks).

Everything is written into a temporary directory next to DIR, which replaces DIR only at the end
(:class:`resprop.numeric.engine.output.Publication`: DIR is replaced only when empty or exactly a previous report as
recorded in its ``.resprop-manifest.json``; SIGINT/SIGTERM leave the previous complete report or none and no temporary).
index.html is generated from the same dict that is written to report.json.
"""
from __future__ import annotations

import json
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from resprop import registry
from resprop.numeric.cli_support import checkpoint, progress_bar
from resprop.numeric.engine.output import OutputPathError, Publication
from resprop.numeric.report.claims import FAILS, ref, row
from resprop.numeric.report.words import count_words, plural

__all__ = ["reproduce", "resolve_theories", "render_html", "ReportDirError"]

GENERATOR = "resprop reproduce"


def _specific() -> set[str]:
    """Generated files that belong to one theory (the rest are shared by all)."""
    return {f for th in registry.theories().values() for f in th.generated_files if f not in _SHARED}


#: generated files every theory depends on
_SHARED = frozenset({"_domain.py", "__init__.py"})


#: refused output directory (kept as a name for callers of earlier versions)
ReportDirError = OutputPathError


# --------------------------------------------------------------------------- pieces of a theory
#: the quantity of the report's one freshness row
FRESH_QUANTITY = "generated/ is fresh (resprop.derive.codegen.stale_files)"


def _fresh_row(theories: list[str], stale: list[str] | None, error: str | None) -> dict:
    """The one freshness row of a run: fresh when no generated file of the theories ``theories`` (or shared by
    all) is stale; a stale file that only another theory uses is not counted against this run."""
    mine = {f for th in theories for f in registry.theory(th).generated_files}
    specific = _specific()
    if error is not None:
        return row(FRESH_QUANTITY, "-", "could not be checked",
                   ref("exception", error), passed=False, check="stale_files() runs and reports no stale file")
    assert stale is not None  # the list, when the check ran
    relevant = [f for f in stale if f in mine or f not in specific]
    return row(FRESH_QUANTITY, "-",
               "fresh" if not relevant else "stale: " + ", ".join(relevant),
               ref(plural(len(relevant), "stale file"), "SymPy derivations re-rendered and compared with generated/ "
                   "where an owner's input fingerprint or file hashes do not hold (as `resprop derive --check`)"),
               passed=not relevant,
               check="no generated file of the theories run (or shared by all) differs from a fresh render",
               note="" if not relevant else "run `resprop derive`", details={"stale_files": relevant})



def _error_row(what: str, exc: BaseException) -> dict:
    tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return row(what, "-", "exception", ref(tb[:300], "traceback"), passed=False,
               check="runs without an exception", note=tb[:300])


def _declared_count(info) -> int:
    """How many claims a theory declares (``CLAIMS`` of its claims module; one progress step each), 0 if unknown."""
    try:
        return len(getattr(registry.resolve(info.claims.partition(":")[0]), "CLAIMS", ()))
    except Exception:  # an import error becomes the theory's FAILS row below
        return 0


# --------------------------------------------------------------------------- the run
def _counts(rows: list[dict]) -> dict:
    return {"rows": len(rows), "agrees": sum(r["verdict"] == "agrees" for r in rows),
            "documented_disagreements": sum(r["verdict"] == "documented disagreement" for r in rows),
            "fails": sum(r["verdict"] == FAILS for r in rows)}


#: keys of report.json kept for one release under an old name (docs/api-renames.md, "report.json"):
#: old key -> the key to read instead
DEPRECATED_KEYS = {"summary.failed": "summary.fails"}


def _latex_docs(stems, tex_paths: dict[str, Path], engine: str | None, build_pdf: bool) -> tuple[list, list]:
    """The LaTeX documents of the derivations ``stems`` (those exported) and, when pdflatex runs, one row per
    document saying whether it compiled."""
    from resprop.numeric.report.latex_pdf import LatexError, compile_pdf, pdf_page_count

    docs, rows = [], []
    for stem in stems:
        tex = tex_paths.get(stem)
        if tex is None:
            continue
        doc: dict[str, Any] = {"name": stem, "tex": f"latex/{tex.name}", "pdf": None, "pages": None, "error": None}
        if engine is None:
            doc["error"] = ("pdflatex not found: PDF not built" if build_pdf else "PDF not requested")
        else:
            try:
                pdf = compile_pdf(tex)
                doc.update(pdf=f"latex/{pdf.name}", pages=pdf_page_count(pdf))
            except LatexError as exc:
                doc["error"] = str(exc)
            rows.append(row(f"LaTeX document {tex.name} compiles (pdflatex)", "-",
                            plural(doc["pages"], "page") if doc["pdf"] else "no PDF",
                            ref(doc["error"] or "ok", "pdflatex, run until labels settle"),
                            passed=doc["pdf"] is not None and (doc["pages"] or 0) >= 1,
                            check="the exported document compiles to a PDF with at least one page"))
        docs.append(doc)
    return docs, rows


def resolve_theories(theory) -> list[str]:
    """"all", one slug or a list of slugs -> the registered slugs in report order."""
    slugs = registry.slugs()
    names = [theory] if isinstance(theory, str) else list(theory)
    if "all" in names:
        return list(slugs)
    unknown = sorted(set(names) - set(slugs))
    if unknown or not names:
        raise registry.UnknownTheoryError(f"theory: unknown {unknown or names}; allowed: {', '.join(slugs)}, all")
    return [t for t in slugs if t in names]


def _training_block(info, training: Path | None, figdir: Path) -> dict | None:
    """The theory's trained-network experiments as saved by ``resprop train`` in ``training`` (docs/training.md):
    their claim rows (shown in a table of their own, outside the verdict counts: they test the papers' statements
    about trained networks at reduced size, not resprop's theory) and figures (copied into ``figdir``).  None when
    no ``training`` directory was given or the theory registers no experiments."""
    if training is None or not info.experiments:
        return None
    import shutil

    from resprop.numeric.training.experiments import RESULT_SUFFIX, load_result

    block: dict[str, Any] = {"source": str(training), "experiments": [], "missing": []}
    for name in registry.resolve(info.experiments):
        path = Path(training) / f"{name}{RESULT_SUFFIX}"
        if not path.is_file():
            block["missing"].append(name)
            continue
        res = load_result(path)
        figs = []
        for fig in res.get("figures", []):
            src = Path(training) / fig
            if src.is_file() and src.suffix == ".png":
                shutil.copyfile(src, figdir / src.name)
                figs.append({"path": f"figures/{src.name}", "name": src.name})
        block["experiments"].append({"name": name, "quick": res["quick"], "seeds": res["seeds"],
                                     "seconds": res["seconds"], "rows": res["claims"], "figures": figs})
    return block


def _build(work: Path, theories: list[str], quick: bool, quiet: bool, check_generated: bool,
           build_pdf: bool, training: Path | None = None) -> dict:
    # Import the plotting stack before any output exists: a Ctrl-C that lands while a C extension initialises
    # surfaces as "ImportError: initialization failed" instead of KeyboardInterrupt, and the run would report
    # the figures as failed rather than stop (seen in tests/test_reproduce.py's interrupt test).
    import matplotlib

    from resprop.numeric.report.latex_pdf import find_engine

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401

    t_start = time.time()
    timings: list[dict[str, Any]] = []  # one entry per step, in run order

    def timed(step: str, t0: float) -> float:
        seconds = round(time.time() - t0, 1)
        timings.append({"step": step, "seconds": seconds})
        return seconds

    figdir, texdir = work / "figures", work / "latex"
    figdir.mkdir()
    # ---- the shared section: generated/ freshness (one row for the run) and the foundation's LaTeX
    shared_rows: list[dict] = []
    stale, stale_error = [], None
    t0 = time.time()
    if check_generated:
        with progress_bar("generated/ freshness", quiet=quiet, unit="derivation", delay=0, leave=True) as bar:
            try:
                from resprop.derive.codegen import stale_files

                # as `resprop derive --check`: an owner whose input fingerprint and file hashes hold is fresh
                # without re-deriving (the full re-derivation took ~100 s of a quick run on a slow 2-core
                # machine; a hand-edited file or a changed derivation fails the fingerprint and is re-derived)
                stale = sorted(stale_files(progress=bar, fast=True))
            except Exception as exc:  # reported as a failed row
                stale_error = traceback.format_exception_only(type(exc), exc)[-1].strip()
            bar.finish()
        shared_rows.append(_fresh_row(theories, stale, stale_error))
        shared_seconds = timed("generated/ freshness", t0)
    else:
        shared_seconds = 0.0
    t0 = time.time()
    owners = registry.derivations()
    foundation = [name for name, (_, owner) in owners.items() if owner == "foundation"]
    exported = [name for name, (_, owner) in owners.items() if owner == "foundation" or owner in theories]
    tex_paths: dict[str, Path] = {}
    try:
        from resprop.derive.latex import export_latex

        with progress_bar("LaTeX export", quiet=quiet, unit="document", delay=0, leave=True) as bar:
            tex_paths = {p.stem: p for p in export_latex(texdir, names=exported, progress=bar)}
            bar.finish()
    except Exception as exc:
        shared_rows.append(_error_row("LaTeX export (resprop.derive.latex.export_latex)", exc))
    checkpoint("latex-exported")
    engine = find_engine() if build_pdf else None
    shared_docs, pdf_rows = _latex_docs(foundation, tex_paths, engine, build_pdf)
    shared_rows += pdf_rows
    shared_seconds += timed("LaTeX export", t0)
    shared = {"title": "Shared by every theory: generated/ freshness and the foundation's derivations",
              "rows": shared_rows, "latex": shared_docs, "counts": _counts(shared_rows),
              "seconds": round(shared_seconds, 1)}
    # ---- the theories
    report_theories: dict[str, dict[str, Any]] = {}
    for th in theories:
        info = registry.theory(th)
        t0 = time.time()
        rows, figures = [], []
        bar = tqdm(total=(_declared_count(info) or info.steps) + 2, desc=th, disable=quiet, file=sys.stderr)
        step = lambda: bar.update(1)  # noqa: E731
        extra: dict = {}
        try:
            # a theory whose claims read its figures' data (Stable ResNet's digits table) draws them first
            if info.figures and info.figures_before_claims:
                figures = info.load("figures")(figdir, quick=quick, seed=0)
        except Exception as exc:
            rows.append(_error_row(f"figures ({th})", exc))
        step()
        try:
            r, extra = info.load("claims")(quick, step, figures_dir=figdir)
            rows.extend(r)
        except Exception as exc:
            rows.append(_error_row(f"{th} rows", exc))
        try:
            if info.figures and not info.figures_before_claims:
                figures = info.load("figures")(figdir, quick=quick, seed=0, data=extra)
        except Exception as exc:
            rows.append(_error_row(f"figures ({th})", exc))
        data = [p for p in figures if p.suffix != ".png" and p.parent == figdir]  # what a figure is drawn from
        figures = [p for p in figures if p.suffix == ".png"]
        docs, pdf_rows = _latex_docs(info.derivations, tex_paths, engine, build_pdf)
        rows += pdf_rows
        try:
            trained = _training_block(info, training, figdir)
        except Exception as exc:
            trained = None
            rows.append(_error_row(f"trained-network results ({th}) in {training}", exc))
        step()
        bar.close()
        report_theories[th] = {
            "title": info.title, "paper": info.citation, "rows": rows,
            "figures": [{"path": f"figures/{p.name}", "name": p.name} for p in figures],
            "data": [{"path": f"figures/{p.name}", "name": p.name} for p in data],
            "latex": docs, "seconds": timed(th, t0), "counts": _counts(rows),
            "training": trained,
        }
    # ---- the cross-theory checks
    cross = []
    run = set(theories)
    crossing = [th for th in registry.theories().values()
                if th.cross_claims and run & ({th.slug} | set(th.cross_with))]
    t0 = time.time()
    if crossing:
        with tqdm(total=len(crossing), desc="cross-theory", disable=quiet, file=sys.stderr) as bar:
            for other in crossing:
                try:
                    cross += other.load("cross_claims")(quick, lambda: None)
                except Exception as exc:
                    cross.append(_error_row(f"cross-theory checks ({other.slug})", exc))
                bar.update(1)
    cross_seconds = timed("cross-theory", t0)
    _drop_unlinked(figdir, report_theories)
    all_rows = shared_rows + [r for t in report_theories.values() for r in t["rows"]] + cross
    counts = _counts(all_rows)
    return {
        "generator": GENERATOR,
        "created": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "resprop reproduce " + (" ".join(theories) if set(theories) != set(registry.slugs()) else "all")
                   + (" --quick" if quick else ""),
        "quick": quick,
        "theories_run": theories,
        "generated": {"checked": check_generated, "fresh": check_generated and not stale and stale_error is None,
                      "stale_files": stale, "error": stale_error},
        "pdflatex": engine,
        "shared": shared,
        "theories": report_theories,
        "cross_theory": {"title": "Cross-theory checks", "rows": cross, "counts": _counts(cross),
                         "seconds": cross_seconds},
        "timings": timings,
        # "failed" repeats "fails" for one release (DEPRECATED_KEYS; docs/api-renames.md)
        "summary": {**counts, "failed": counts["fails"], "seconds": round(time.time() - t_start, 1), "quick": quick},
        "deprecated_keys": DEPRECATED_KEYS,
    }


def _drop_unlinked(figdir: Path, report_theories: dict[str, dict[str, Any]]) -> None:
    """Remove what the figure makers leave in ``figdir`` beyond the figures and data files they return (which the
    page links): every file of the report is linked from index.html, or not written."""
    shown = {Path(f["path"]).name for t in report_theories.values() for f in t["figures"] + t["data"]}
    shown |= {Path(f["path"]).name for t in report_theories.values() if t.get("training")
              for e in t["training"]["experiments"] for f in e["figures"]}
    for p in figdir.iterdir():
        if p.name not in shown:
            p.unlink()


def reproduce(out, theory="all", quick: bool = True, quiet: bool = False, *, check_generated: bool = True,
              build_pdf: bool = True, training=None) -> dict:
    """Run the reproduction of ``theory`` ("all", one name or a list) and write ``out``/report.json + index.html.

    The whole report is built in a temporary directory next to ``out`` and replaces ``out`` at the end
    (:class:`resprop.numeric.engine.output.Publication`); on an exception, Ctrl-C or SIGTERM the temporary directory is
    removed and ``out`` is left as it was.  ``out`` that holds anything but a previous report (checked against its
    manifest) raises :class:`resprop.numeric.engine.output.OutputPathError` before any work.  ``training``: a
    directory written by ``resprop train``; its saved results are shown in each theory's section (no training
    happens here; docs/training.md).
    """
    theories = resolve_theories(theory)
    if training is not None and not Path(training).is_dir():
        from resprop.numeric.engine.validation import ParameterError

        raise ParameterError("training", f"must be a directory written by `resprop train`, got {str(training)!r}")
    with Publication(out, "dir", GENERATOR) as pub:
        tmp = pub.path
        checkpoint("locked")
        report = _build(tmp, theories, bool(quick), bool(quiet), check_generated, build_pdf,
                        None if training is None else Path(training))
        text = json.dumps(report, indent=1, allow_nan=True)
        (tmp / "report.json").write_text(text)
        (tmp / "index.html").write_text(render_html(json.loads(text)))
        pub.commit()
    return report


# --------------------------------------------------------------------------- HTML (from the report dict only)
def fmt(v) -> str:
    """Display form of a report value: floats to 6 significant digits, lists and dicts inline."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "0" if v == 0 else f"{v:.6g}"
    if isinstance(v, list):
        if len(v) > 8:
            return "[" + ", ".join(fmt(x) for x in v[:3]) + f", ..., {fmt(v[-1])}] ({len(v)} values)"
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {fmt(x)}" for k, x in v.items())
    return str(v)


_CLASS = {"agrees": "ok", "documented disagreement": "doc", FAILS: "fail"}

_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:1500px;padding:0 1em;
color:#222;line-height:1.35}
h1{margin-bottom:.2em}h2{margin-top:2em;border-bottom:2px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;width:100%;margin:.8em 0}
th,td{border:1px solid #ccc;padding:4px 6px;vertical-align:top;font-size:13px;text-align:left}
th{background:#f3f3f3}td.num{font-family:ui-monospace,monospace;font-size:12px;white-space:nowrap}
td.num{white-space:normal;word-break:break-word;max-width:26em}
.method{color:#666;font-family:system-ui,sans-serif;font-size:11px;white-space:normal}
td.ok{background:#e7f6e7}td.doc{background:#fff4d6}td.fail{background:#fbdcdc;font-weight:bold}
.check{color:#555;font-size:12px}.note{font-size:12px}
.summary span{display:inline-block;margin-right:1.2em}
figure{display:inline-block;margin:.6em;vertical-align:top;max-width:100%}
figure img{max-width:100%;height:auto;border:1px solid #ddd}figcaption{font-size:12px;color:#555}
nav a{margin-right:1em}#image-check{font-size:12px;color:#555}
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var bad = [];
  var imgs = document.querySelectorAll('img');
  for (var i = 0; i < imgs.length; i++) {
    if (!(imgs[i].complete && imgs[i].naturalWidth > 0)) { bad.push(imgs[i].getAttribute('src')); }
  }
  document.body.setAttribute('data-images-checked', String(imgs.length));
  document.body.setAttribute('data-images-failed', bad.join(' '));
  document.body.setAttribute('data-images-ok', bad.length === 0 ? 'true' : 'false');
  var el = document.getElementById('image-check');
  if (el) {
    el.textContent = bad.length === 0 ? (imgs.length === 1 ? 'the 1 figure loaded'
                                                            : 'all ' + imgs.length + ' figures loaded')
                                      : ('figures that failed to load: ' + bad.join(', '));
  }
});
"""


def _sim_extra(sim: dict) -> str:
    """The Monte Carlo cell's further fields (sample sizes, seeds, ...) as one line."""
    return "; ".join(f"{k}: {fmt(v)}" for k, v in sim.items() if k not in ("mean", "se", "value", "method"))


def render_html(report: dict) -> str:
    """DIR/index.html from the report's JSON, through the Jinja2 template templates/report.html.j2 (autoescaped)."""
    import jinja2

    from resprop.derive.codegen import template_loader

    env = jinja2.Environment(loader=template_loader(), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=False)
    env.filters.update(fmt=fmt, se=lambda v: format(v, ".2g"), sim_extra=_sim_extra, plural=plural,
                       count_words=count_words)
    gen = report["generated"]
    fresh = ("not checked" if not gen["checked"] else "fresh" if gen["fresh"] else
             "STALE: " + ", ".join(gen["stale_files"]) + (f" ({gen['error']})" if gen["error"] else ""))
    return env.get_template("report.html.j2").render(report=report, fresh=fresh, style=_STYLE, script=_SCRIPT,
                                                     verdict_class=_CLASS)
