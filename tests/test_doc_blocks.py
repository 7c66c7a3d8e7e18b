"""Docs that cannot rot: every code block of README.md and docs/ runs, every repository path and ``resprop.*``
name they mention exists, every inline ``resprop ...`` command names real options, and docs/index.md lists every
page (issue 28).

Blocks.  A fenced block tagged ``python``, ``bash``, ``sh`` or ``console`` is one test item, named
``PAGE:LINE:LANG`` (LINE: the opening fence).  The blocks of one page run in document order and share

* one scratch working directory (it holds a link to the checkout's ``examples/``, which the pages read), and
* for Python, one namespace: a later block may use the names and files of an earlier block of its page.

Running one block first runs the earlier blocks of its page that have not run yet.  Python blocks are
``exec``-ed in this process (their stdout is discarded; tracebacks give the markdown line).  Shell blocks run
through ``bash -e -o pipefail`` with this interpreter's directory first on PATH, so ``resprop`` is the installed
console script and ``python`` this interpreter.  In a ``console`` block, and in any shell block with a line
starting with ``$ ``, the ``$ `` lines (with their ``\\`` continuations) are the commands and the other lines are
their output, which is not compared.

An HTML comment on the line before a block marks it (reasons are required):

    <!-- doc-test: slow (reason) -->   more than ~20 s: runs under ``pytest -m slow`` only, never as an earlier
                                       block of another one (so a later block must not need it)
    <!-- doc-test: skip (reason) -->   cannot run here (a cluster, a peer library, an install); every skip is
                                       listed in SKIPPED below, so that they stay few and visible

Fences of other languages are not run (``toml`` blocks must parse, and a sweep spec must validate); a fence
without a language must not hold commands.

Paths.  Every path below a top-level folder of the repository (``derive/``, ``numeric/``, ``docs/``, ...) that
a page mentions, in prose or code, and every relative link target, must exist (relative to the repository root,
or for links and ``../`` paths to the page).  ``<slug>`` and ``*`` match any name, ``{a,b}`` each alternative.
Every ``resprop.x.y`` name in backticks must import (a module, or an attribute of one).  A page may declare paths
and names that are deliberately not in the tree (the layout before a refactoring, files a worked example would
create, an entry-point group) with ``<!-- doc-test: absent NAME ... (reason) -->``; those must be absent and
mentioned.  Inline ``resprop SUB --opt`` (or ``SUB --opt``) spans, and the command lines of skipped blocks, must
name a subcommand and options that exist (and ``--only`` theory slugs that draw figures).
"""
from __future__ import annotations

import contextlib
import glob
import importlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
#: pages whose paths, links and names are checked (CONTRIBUTING.md's blocks are install and CI commands)
PATH_PAGES = [*PAGES, ROOT / "CONTRIBUTING.md"]
RUN = {"python", "bash", "sh", "console"}

#: every skipped block, (page, its first line): a new skip must be added here and say why in its page
SKIPPED = {
    ("README.md", "pip install -e . && resprop reproduce all --out report --quick"),
    ("README.md", "pip install -e '.[dev]' && python -m pytest -q"),
    ("README.md", "resprop derive            # regenerate the generated code (about 20 s on an idle machine; [SLUG ...])"),
    ("docs/adding-a-theory.md", "$ resprop theories                 # lists linear with its title, citation and subcommands"),
    ("docs/index.md", "resprop derive                # regenerate generated/ and docs/reference/"),
    ("docs/design/fluctuations-engine.md", "resprop.fluctuations(X, activation, depth, width, sigma_w2, sigma_b2, gamma=1.0, branch_scale=1.0, *,"),
    ("docs/kernel.md", "from neural_tangents import stax"),
    ("docs/scaling.md", "resprop kernel --inputs X.npy --activation erf --depth 10 --sigma-w2 1 --sigma-b2 0.05 --ntk \\"),
    ("docs/scaling.md", "from dask_jobqueue import SLURMCluster"),
    ("docs/sweeps.md", "resprop sweep examples/sweeps/rho_star.toml --out rho_star.nc --scheduler tcp://127.0.0.1:8786"),
    ("docs/training.md", "resprop train all --out DIR                   # full size (tens of minutes; `pytest -m slow` runs these)"),
}

FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<kind>skip|slow)\s*\((?P<reason>.+)\)\s*-->\s*$")
ABSENT = re.compile(r"<!--\s*doc-test:\s*absent\s+(?P<paths>[^(]+?)\s*\((?P<reason>[^)]+)\)\s*-->")
COMMENT = re.compile(r"<!--.*?-->", re.S)


@dataclass
class Block:
    page: Path
    line: int                    # 1-based line of the opening fence
    lang: str
    code: str
    mark: str | None = None      # "skip" | "slow" | None
    reason: str = ""
    index: int = 0               # position among the page's blocks

    @property
    def rel(self) -> str:
        return self.page.relative_to(ROOT).as_posix()

    @property
    def id(self) -> str:
        return f"{self.rel}:{self.line}:{self.lang}"

    @property
    def first_line(self) -> str:
        return next((ln.strip() for ln in self.code.splitlines() if ln.strip()), "")


def parse(page: Path) -> tuple[list[Block], str]:
    """The fenced blocks of ``page`` (any language) and its prose (the text with the blocks blanked out)."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        indent, start = len(m["indent"]), i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        assert i < len(lines), f"{page}:{start + 1}: unclosed fence"
        mark = reason = None
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and (mk := MARKER.match(lines[j])):
            mark, reason = mk["kind"], mk["reason"]
        blocks.append(Block(page, start + 1, m["lang"], "\n".join(body) + "\n", mark, reason or "", len(blocks)))
        prose += [""] * (i - start + 1)
        i += 1
    return blocks, "\n".join(prose)


PARSED = {page: parse(page) for page in PATH_PAGES}
BLOCKS = [b for page in PAGES for b in PARSED[page][0] if b.lang in RUN]


def shell_script(block: Block) -> str:
    """The script of a shell block: the whole body, or in prompt style only the ``$ `` commands."""
    lines = block.code.splitlines()
    if block.lang != "console" and not any(ln.startswith("$ ") for ln in lines):
        return block.code
    commands, continued = [], False
    for ln in lines:
        if ln.startswith("$ ") or continued:
            commands.append(ln[2:] if ln.startswith("$ ") and not continued else ln)
            continued = ln.rstrip().endswith("\\")
    return "\n".join(commands) + "\n"


# --------------------------------------------------------------------------------------------- running blocks
@dataclass
class PageState:
    workdir: Path
    namespace: dict = field(default_factory=dict)
    done: set[int] = field(default_factory=set)


class Runner:
    def __init__(self, factory: pytest.TempPathFactory):
        self.factory = factory
        self.pages: dict[Path, PageState] = {}
        self.env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1",
                        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))

    def state(self, page: Path) -> PageState:
        if page not in self.pages:
            work = self.factory.mktemp(re.sub(r"\W", "_", page.relative_to(ROOT).as_posix()))
            (work / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
            self.pages[page] = PageState(work, {"__name__": f"doc_{page.stem.replace('-', '_')}"})
        return self.pages[page]

    def run(self, block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
        st = self.state(block.page)
        monkeypatch.chdir(st.workdir)
        earlier = [b for b in BLOCKS if b.page == block.page and b.index < block.index
                   and b.mark is None and b.index not in st.done]
        for b in [*earlier, block]:
            st.done.add(b.index)
            try:
                self._run_one(b, st)
            except BaseException as exc:
                if b is not block:
                    raise AssertionError(f"an earlier block of the page, {b.id}, failed: {exc}") from exc
                raise

    def _run_one(self, block: Block, st: PageState) -> None:
        if block.lang == "python":
            code = compile("\n" * block.line + block.code, str(block.page), "exec")  # tracebacks: markdown lines
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, st.namespace)
            return
        script = shell_script(block)
        timeout = 3600 if block.mark == "slow" else 300
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=st.workdir, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, (f"{block.id} exited {proc.returncode}\n--- script\n{script}--- stdout (tail)\n"
                                      f"{proc.stdout[-3000:]}\n--- stderr (tail)\n{proc.stderr[-3000:]}")
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        bad = re.findall(r".*\b(?:NaN|nan|Infinity)\b.*", proc.stdout)
        assert not bad, f"{block.id}: a command printed NaN or inf: {bad[:3]}"


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner(tmp_path_factory)


def _param(b: Block):
    marks = {"slow": [pytest.mark.slow], "skip": [pytest.mark.skip(reason=b.reason)]}.get(b.mark or "", [])
    return pytest.param(b, id=b.id, marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_block_runs(block, runner, monkeypatch):
    runner.run(block, monkeypatch)


def test_shell_blocks_use_the_installed_console_script(runner):
    """`resprop` in a shell block is the console script installed next to this interpreter, not another one."""
    found = shutil.which("resprop", path=runner.env["PATH"])
    assert found and Path(found).parent == Path(sys.executable).parent, found
    python = shutil.which("python", path=runner.env["PATH"])
    assert python and os.path.realpath(python) == os.path.realpath(sys.executable), python


def test_every_page_block_is_collected_and_skips_are_listed():
    assert {b.rel for b in BLOCKS} >= {"README.md", "docs/quickstart/fischer.md", "docs/quickstart/lognormal.md",
                                       "docs/quickstart/pdlt.md", "docs/quickstart/stable.md",
                                       "docs/quickstart/abcd.md", "docs/sweeps.md", "docs/scaling.md"}
    skipped = {(b.rel, b.first_line) for b in BLOCKS if b.mark == "skip"}
    assert skipped == SKIPPED, (f"new skips (add them to SKIPPED, or better make them run): {skipped - SKIPPED}; "
                                f"no longer skipped (remove from SKIPPED): {SKIPPED - skipped}")
    for b in BLOCKS:
        assert b.mark is None or len(b.reason) >= 10, f"{b.id}: say why it is {b.mark}"
    # markers must sit right before a block: a stray marker marks nothing
    for page in PAGES:
        text = page.read_text()
        assert len(re.findall(r"<!--\s*doc-test:\s*(?:skip|slow)", text)) == \
            sum(b.page == page and b.mark is not None for b in PARSED[page][0]), page


def test_unlabelled_fences_hold_no_commands():
    """A command in a fence without a language would escape the tests: shell blocks are tagged ```bash."""
    for page in PAGES:
        for b in PARSED[page][0]:
            if b.lang == "":
                bad = [ln for ln in b.code.splitlines() if re.match(r"\s*(\$ |resprop |python |pip )", ln)]
                assert not bad, f"{b.id}: tag the block ```bash (or ```python): {bad}"


def test_toml_blocks_parse_and_sweep_specs_validate():
    from resprop.numeric.sweep.runner import normalize_spec

    found = 0
    for page in PAGES:
        for b in PARSED[page][0]:
            if b.lang == "toml":
                spec = tomllib.loads(b.code)
                if "kind" in spec:
                    normalize_spec(spec)
                found += 1
    assert found


# --------------------------------------------------------------------------------------------- paths and names
TOP = [p.name for p in ROOT.iterdir() if p.is_dir() and p.name in
       {"derive", "numeric", "generated", "templates", "tests", "docs", "benchmarks", "examples", "resprop", ".ci"}]
PATH = re.compile(r"(?<![\w./\-])((?:\.\./)*(?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./<>{},*\-]*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
ROOT_FILE = re.compile(r"`([A-Z][A-Z0-9_-]*\.md|pyproject\.toml|setup\.py)`")


def _expand(path: str) -> list[str]:
    path = re.sub(r"<[^>]*>", "*", path)
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m[1].split(",") for x in _expand(path[:m.start()] + alt + path[m.end():])]


def _exists(path: str, page: Path, page_relative_only: bool = False) -> bool:
    bases = [page.parent] if page_relative_only or path.startswith("../") else [ROOT, page.parent]
    return all(any(glob.glob(str(base / alt)) for base in bases) for alt in _expand(path))


def mentioned_paths(page: Path) -> list[tuple[int, str, bool]]:
    """(line, path, page-relative only) for every repository path the page mentions (HTML comments left out)."""
    text = COMMENT.sub(lambda m: "\n" * m[0].count("\n"), page.read_text())
    found = []
    for m in PATH.finditer(text):
        found.append((text.count("\n", 0, m.start()) + 1, m[1].rstrip(".,;:"), False))
    for m in LINK.finditer(text):
        target = m[1].split("#")[0]
        if target and "://" not in target and not target.startswith("mailto:"):
            found.append((text.count("\n", 0, m.start()) + 1, target, True))
    for m in ROOT_FILE.finditer(text):
        found.append((text.count("\n", 0, m.start()) + 1, m[1], False))
    return found


def declared_absent(page: Path) -> dict[str, str]:
    return {p: m["reason"] for m in ABSENT.finditer(page.read_text()) for p in m["paths"].split()}


@pytest.mark.parametrize("page", PATH_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_mentioned_paths_exist(page):
    absent = declared_absent(page)
    missing = [f"{page.relative_to(ROOT)}:{line}: {path}" for line, path, rel in mentioned_paths(page)
               if path not in absent and not _exists(path, page, rel)]
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)
    named = {path for _, path, _ in mentioned_paths(page)}
    for path in (p for p in absent if "/" in p):
        assert path in named, f"{page.name}: declared absent but not mentioned: {path}"
        assert not _exists(path, page), f"{page.name}: declared absent but it exists: {path}"


DOTTED = re.compile(r"`[^`\n]*?\b(resprop(?:\.[A-Za-z_]\w*)+)")


def _resolve(name: str):
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ModuleNotFoundError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


@pytest.mark.parametrize("page", PATH_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_mentioned_resprop_names_resolve(page):
    """``resprop.numeric.engine.validation.ParameterError`` and friends in the prose import and exist."""
    bad = []
    names = set(DOTTED.findall(PARSED[page][1]))
    for name in (p for p in declared_absent(page) if "/" not in p):
        assert name in names, f"{page.name}: declared absent but not mentioned: {name}"
        with pytest.raises((ImportError, AttributeError)):
            _resolve(name)
    for name in sorted(names - set(declared_absent(page))):
        try:
            _resolve(name)
        except (ImportError, AttributeError) as exc:
            bad.append(f"{name}: {type(exc).__name__}: {exc}")
    assert not bad, f"{page.relative_to(ROOT)}:\n" + "\n".join(bad)


# --------------------------------------------------------------------------------------------- inline commands
def _subparsers():
    from resprop.numeric.cli import build_parser

    return next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices


def _figure_slugs() -> set[str]:
    from resprop import registry

    return {th.slug for th in registry.theories().values() if th.figures}


def command_problems(command: str) -> list[str]:
    """What is wrong with one ``resprop SUB --opt ...`` line (placeholders such as DIR and [...] allowed)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    words = [w.strip("[]") for w in words]
    if len(words) < 2 or not re.fullmatch(r"[a-z][a-z0-9-]*", words[1]):
        return []
    subs = _subparsers()
    if words[1] not in subs:
        return [f"unknown subcommand {words[1]!r}"]
    options = subs[words[1]]._option_string_actions
    problems = []
    for k, w in enumerate(words[2:], start=2):
        opt = w.split("=")[0]
        if re.fullmatch(r"--[a-z][\w-]*", opt) and opt not in options and opt != "--debug":
            problems.append(f"{words[1]}: unknown option {opt}")
        if opt == "--only" and k + 1 < len(words) and not words[k + 1].startswith("-"):
            unknown = set(words[k + 1].split(",")) - _figure_slugs()
            if unknown:
                problems.append(f"figures --only: unknown slug(s) {sorted(unknown)}")
    return problems


def inline_commands(page: Path) -> list[str]:
    """``resprop SUB ...`` spans of the prose, ``SUB --opt ...`` spans naming a subcommand, and the command lines
    of skipped blocks."""
    prose = PARSED[page][1]
    subs = _subparsers()
    commands = re.findall(r"`(resprop [^`\n]+)`", prose)
    commands += [f"resprop {m[1]}" for m in re.finditer(r"`([a-z][a-z0-9-]* --[^`\n]*)`", prose)
                 if m[1].split()[0] in subs]
    # the `resprop` lines of skipped blocks are not run: check their options at least
    for b in PARSED[page][0]:
        if b.lang in RUN and b.mark == "skip":
            commands += [ln.strip().lstrip("$ ") for ln in shell_script(b).splitlines()
                         if re.search(r"(^|&& )resprop ", ln.strip().lstrip("$ "))]
    return [c[c.index("resprop "):] for c in commands]


@pytest.fixture
def example_theory_registered():
    """docs/adding-a-theory.md shows the commands of its worked example (tests/example_theory/) once registered."""
    from example_theory import THEORY

    from resprop import registry

    registry.register(THEORY)
    yield
    registry.unregister(THEORY.slug)


@pytest.mark.parametrize("page", PATH_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_inline_commands_name_real_options(page, example_theory_registered):
    bad = [f"`{c}`: {p}" for c in inline_commands(page) for p in command_problems(c)]
    assert not bad, f"{page.relative_to(ROOT)}:\n" + "\n".join(bad)


def test_command_check_can_fail():
    assert command_problems("resprop figures --out f/ --only pc")
    assert command_problems("resprop nosuch --json")
    assert command_problems("resprop rho-star --k0 0.05")
    assert not command_problems("resprop figures --out figures/ [--quick] [--only lognormal,pdlt,stable,abcd,fischer]")


# --------------------------------------------------------------------------------------------- the index
def test_readme_links_the_documentation_index():
    assert "](docs/index.md)" in (ROOT / "README.md").read_text()


def test_index_lists_every_page_under_docs():
    """Every page (.md) under docs/ is linked from docs/index.md; other files (the campaigns' JSON) through their
    page or their folder."""
    text = (DOCS / "index.md").read_text()
    links = {(DOCS / t.split("#")[0]).resolve() for t in LINK.findall(text) if "://" not in t}
    missing = [p.relative_to(DOCS).as_posix() for p in sorted(DOCS.rglob("*"))
               if p.is_file() and p.name != "index.md" and p.resolve() not in links
               and (p.suffix == ".md" or p.parent.resolve() not in links)]
    assert not missing, f"docs/index.md does not link: {missing}"
