"""The main job: reproduce every theory with Monte Carlo checks into DIR/report.json + DIR/index.html.

``reproduce(out, theory)`` runs, per theory (fischer, lognormal, pdlt, stable, abcd):

1. a freshness check of ``generated/`` (``resprop.derive.codegen.stale_files``): a stale file is a FAILS row;
2. the theory's claims (``CLAIMS`` in ``numeric/theories/<slug>/claims.py``,
   :class:`resprop.numeric.report.claims.Claim`, run through the registry's ``claims`` entry): the paper's value or
   claim, resprop's theory value, Monte Carlo (or another independent route) with its standard error, the tolerance
   rule, and a verdict "agrees", "documented disagreement" or "FAILS" (tests/test_claims.py checks the same claim
   objects);
3. its figures (the existing figure makers, quick settings with ``quick``) in DIR/figures/;
4. its LaTeX documents (``resprop.derive.latex.export_latex``) in DIR/latex/, compiled to PDF when pdflatex exists;

then the cross-theory checks.  An exception inside a theory becomes a FAILS row; it does not stop the run.

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
from resprop.numeric.cli_support import checkpoint
from resprop.numeric.engine.output import OutputPathError, Publication
from resprop.numeric.report.claims import ref, row

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
def _fresh_row(theory: str, stale: list[str] | None, error: str | None) -> dict:
    mine = registry.theory(theory).generated_files
    specific = _specific()
    if error is not None:
        return row("generated/ is fresh (resprop.derive.codegen.stale_files)", "-", "could not be checked",
                   ref("exception", error), passed=False, check="stale_files() runs and reports no stale file")
    assert stale is not None  # the list, when the check ran
    relevant = [f for f in stale if f in mine or f not in specific]
    return row("generated/ is fresh (resprop.derive.codegen.stale_files)", "-",
               "fresh" if not relevant else "stale: " + ", ".join(relevant),
               ref(f"{len(relevant)} stale", "SymPy derivations re-rendered and compared with generated/"),
               passed=not relevant, check="no generated file of this theory (or shared) differs from a fresh render",
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
            "fails": sum(r["verdict"] == "FAILS" for r in rows)}


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

    from resprop.numeric.report.latex_pdf import LatexError, compile_pdf, find_engine, pdf_page_count

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401

    t_start = time.time()
    figdir, texdir = work / "figures", work / "latex"
    figdir.mkdir()
    stale, stale_error = [], None
    if check_generated:
        with tqdm(total=1, desc="generated/ freshness", disable=quiet, file=sys.stderr) as bar:
            try:
                from resprop.derive.codegen import stale_files

                stale = sorted(stale_files())
            except Exception as exc:  # reported as a failed row
                stale_error = traceback.format_exception_only(type(exc), exc)[-1].strip()
            bar.update(1)
    tex_paths: dict[str, Path] = {}
    tex_error = None
    try:
        from resprop.derive.latex import export_latex

        tex_paths = {p.stem: p for p in export_latex(texdir)}
    except Exception as exc:
        tex_error = exc
    checkpoint("latex-exported")
    engine = find_engine() if build_pdf else None
    report_theories: dict[str, dict[str, Any]] = {}
    for th in theories:
        info = registry.theory(th)
        t0 = time.time()
        rows, figures, docs = [], [], []
        bar = tqdm(total=(_declared_count(info) or info.steps) + 2, desc=th, disable=quiet, file=sys.stderr)
        step = lambda: bar.update(1)  # noqa: E731
        if check_generated:
            rows.append(_fresh_row(th, stale, stale_error))
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
        figures = [p for p in figures if p.suffix == ".png"]
        # LaTeX documents
        if tex_error is not None:
            rows.append(_error_row("LaTeX export (resprop.derive.latex.export_latex)", tex_error))
        for stem in info.derivations:
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
                                f"{doc['pages']} pages" if doc["pdf"] else "no PDF",
                                ref(doc["error"] or "ok", "pdflatex, run until labels settle"),
                                passed=doc["pdf"] is not None and (doc["pages"] or 0) >= 1,
                                check="the exported document compiles to a PDF with at least one page"))
            docs.append(doc)
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
            "latex": docs, "seconds": round(time.time() - t0, 1), "counts": _counts(rows),
            "training": trained,
        }
    cross = []
    run = set(theories)
    crossing = [th for th in registry.theories().values()
                if th.cross_claims and run & ({th.slug} | set(th.cross_with))]
    if crossing:
        with tqdm(total=len(crossing), desc="cross-theory", disable=quiet, file=sys.stderr) as bar:
            for other in crossing:
                try:
                    cross += other.load("cross_claims")(quick, lambda: None)
                except Exception as exc:
                    cross.append(_error_row(f"cross-theory checks ({other.slug})", exc))
                bar.update(1)
    all_rows = [r for t in report_theories.values() for r in t["rows"]] + cross
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
        "theories": report_theories,
        "cross_theory": {"title": "Cross-theory checks", "rows": cross, "counts": _counts(cross)},
        "summary": {**counts, "failed": counts["fails"], "seconds": round(time.time() - t_start, 1), "quick": quick},
    }


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


_CLASS = {"agrees": "ok", "documented disagreement": "doc", "FAILS": "fail"}

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
    el.textContent = bad.length === 0 ? ('all ' + imgs.length + ' figures loaded')
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
    env.filters.update(fmt=fmt, se=lambda v: format(v, ".2g"), sim_extra=_sim_extra)
    gen = report["generated"]
    fresh = ("not checked" if not gen["checked"] else "fresh" if gen["fresh"] else
             "STALE: " + ", ".join(gen["stale_files"]) + (f" ({gen['error']})" if gen["error"] else ""))
    return env.get_template("report.html.j2").render(report=report, fresh=fresh, style=_STYLE, script=_SCRIPT,
                                                     verdict_class=_CLASS)
