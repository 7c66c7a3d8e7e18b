"""Compile the exported LaTeX documents to PDF with a real TeX engine (pdflatex from TeX Live).

:func:`compile_pdf` runs ``pdflatex`` in a private temporary directory (so the .aux/.log litter never lands
next to the .tex), reruns it while the log asks for a rerun (labels, at most ``max_runs`` passes) and moves the
PDF next to the .tex, replacing an older PDF atomically.  A missing engine or a failed compilation raises
:class:`LatexError` with a message that names the problem (the engine, or the TeX error and its line).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

__all__ = ["LatexError", "find_engine", "compile_pdf", "compile_all", "pdf_page_count", "INSTALL_HINT"]

INSTALL_HINT = ("install TeX Live, e.g. on Debian/Ubuntu: apt-get install texlive-latex-base "
                "texlive-latex-recommended texlive-fonts-recommended lmodern")
_RERUN = re.compile(r"Rerun to get|Label\(s\) may have changed|There were undefined references")


class LatexError(RuntimeError):
    """pdflatex is missing, timed out, or the document does not compile."""


def find_engine(engine: str = "pdflatex") -> str | None:
    """Absolute path of the TeX engine on PATH, or None."""
    return shutil.which(engine)


def _tex_error(log: str, stdout: str) -> str:
    """The first TeX error ('! ...') with the line number that follows it, else the tail of the output."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("!"):
            where = next((ln.strip() for ln in lines[i + 1:i + 12] if re.match(r"l\.\d+", ln)), "")
            return f"{line.strip()} at {where}" if where else line.strip()
    tail = [ln for ln in (log or stdout).splitlines() if ln.strip()][-5:]
    return " | ".join(tail) or "no output"


def compile_pdf(tex: Path, *, engine: str = "pdflatex", max_runs: int = 3, timeout: float = 180.0) -> Path:
    """Compile ``tex`` to ``tex.with_suffix('.pdf')`` and return the PDF path.

    Runs ``engine -interaction=nonstopmode -halt-on-error -no-shell-escape`` in a temporary directory, once,
    then again while the log asks for a rerun (at most ``max_runs`` passes).  Raises :class:`LatexError`
    if the engine is missing, a pass fails or times out, or no PDF is produced.
    """
    tex = Path(tex).resolve()
    if not tex.is_file():
        raise LatexError(f"{tex}: no such .tex file")
    exe = find_engine(engine)
    if exe is None:
        raise LatexError(f"{engine} not found on PATH; cannot build PDFs ({INSTALL_HINT})")
    pdf = tex.with_suffix(".pdf")
    with tempfile.TemporaryDirectory(prefix="resprop-tex-") as tmp:
        work = Path(tmp)
        shutil.copy2(tex, work / tex.name)
        env = dict(os.environ, TEXMFOUTPUT=str(work))
        log_path = work / (tex.stem + ".log")
        for run in range(1, max_runs + 1):
            try:
                proc = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                                       "-output-directory", str(work), tex.name], cwd=work, env=env,
                                      stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                raise LatexError(f"{tex.name}: {engine} timed out after {timeout:.0f} s (pass {run})") from None
            log = log_path.read_text(errors="replace") if log_path.exists() else ""
            if proc.returncode != 0:
                raise LatexError(f"{tex.name}: {engine} failed (exit {proc.returncode}, pass {run}): "
                                 f"{_tex_error(log, proc.stdout)}")
            if not _RERUN.search(log):
                break
        built = work / (tex.stem + ".pdf")
        if not built.exists() or built.stat().st_size == 0:
            raise LatexError(f"{tex.name}: {engine} produced no PDF: {_tex_error(log, proc.stdout)}")
        staged = pdf.with_name(f".{pdf.name}.{os.getpid()}.tmp")
        try:
            shutil.copyfile(built, staged)
            os.replace(staged, pdf)
        finally:  # no half-copied PDF left next to the .tex
            # (the CLI compiles inside resprop.numeric.engine.output's temporary)
            if staged.exists():
                staged.unlink()
    return pdf


def compile_all(paths, *, engine: str = "pdflatex", progress=None) -> list[Path]:
    """Compile every .tex of ``paths``; ``progress`` (e.g. a tqdm bar) is updated once per document."""
    out = []
    for p in paths:
        out.append(compile_pdf(Path(p), engine=engine))
        if progress is not None:
            progress.update(1)
    return out


def pdf_page_count(pdf: Path) -> int:
    """Number of page objects (/Type /Page) in a PDF, looking inside compressed object streams too."""
    data = Path(pdf).read_bytes()
    chunks = [data]
    for m in re.finditer(rb"stream\r?\n", data):
        start = m.end()
        end = data.find(b"endstream", start)
        if end < 0:
            continue
        try:
            chunks.append(zlib.decompress(data[start:end]))
        except zlib.error:
            continue
    return sum(len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", c)) for c in chunks)
