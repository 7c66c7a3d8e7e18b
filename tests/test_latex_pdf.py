"""`resprop latex --pdf`: every exported document compiles with pdflatex to a PDF with at least one page.

Without pdflatex the compile test is skipped, unless the environment variable CI is set (then it fails).
"""
import os
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from resprop.numeric.cli import main
from resprop.numeric.report.latex_pdf import LatexError, compile_pdf


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        msg = f"{tool} not found on PATH (Debian: texlive-latex-base texlive-latex-recommended " \
              "texlive-fonts-recommended lmodern)"
        if os.environ.get("CI"):
            pytest.fail(msg + "; required when CI is set")
        pytest.skip(msg)
    return path


def _pages(pdf: Path) -> int:
    """Page count: pdfinfo when installed, else /Type /Page objects, looking inside compressed object streams."""
    if shutil.which("pdfinfo"):
        out = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
        return int(re.search(r"^Pages:\s+(\d+)", out, re.M).group(1))
    data = pdf.read_bytes()
    blobs = [data]
    for m in re.finditer(rb"stream\r?\n", data):
        end = data.find(b"endstream", m.end())
        try:
            blobs.append(zlib.decompress(data[m.end():end]))
        except zlib.error:
            pass
    return sum(len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", b)) for b in blobs)


def test_latex_pdf_compiles_every_document(tmp_path, capsys):
    _require("pdflatex")
    out = tmp_path / "tex"
    assert main(["latex", "--out", str(out), "--pdf"]) == 0
    texs = sorted(out.glob("*.tex"))
    assert len(texs) >= 7  # one per theory of resprop.derive.registry
    for tex in texs:
        pdf = tex.with_suffix(".pdf")
        assert pdf.exists(), f"no PDF for {tex.name}"
        assert pdf.read_bytes()[:5] == b"%PDF-"
        assert _pages(pdf) >= 1, pdf.name
    # the TeX auxiliary files stay in the temporary build directory
    assert not list(out.glob("*.aux")) and not list(out.glob("*.log"))
    printed = capsys.readouterr().out
    assert printed.count(".pdf") == len(texs)


def test_latex_pdf_reports_a_tex_error(tmp_path):
    _require("pdflatex")
    bad = tmp_path / "bad.tex"
    bad.write_text("\\documentclass{article}\n\\begin{document}\n\\undefinedmacro\n\\end{document}\n")
    with pytest.raises(LatexError, match=r"bad\.tex.*Undefined control sequence.*l\.3"):
        compile_pdf(bad)
    assert not bad.with_suffix(".pdf").exists()


def test_latex_pdf_without_pdflatex_names_the_problem(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["latex", "--out", str(tmp_path / "tex"), "--pdf"]) == 2  # a missing optional tool, as elsewhere
    err = capsys.readouterr().err
    assert "optional tool pdflatex" in err and "not on PATH" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "tex").exists()  # nothing written
    with pytest.raises(LatexError, match="pdflatex not found"):
        (tmp_path / "x.tex").write_text("x")
        compile_pdf(tmp_path / "x.tex")
