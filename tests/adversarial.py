"""The adversarial case table of issue 11: bad and edge-case input for every CLI subcommand and the public Python API.

One :class:`Case` per input.  ``expect`` says what a correct program does with it:

* ``"error"``: a clean error that names ``param`` (CLI: exit 2 and one ``resprop: error:`` line; Python: a
  ``ValueError`` subclass whose message names it);
* ``"ok"``: a result, which ``check`` compares with an independent reference (SymPy at 30 digits, scipy.stats,
  the exact limit of a formula, the same call in float64, or a structural identity);
* ``"either"``: a clean error naming ``param`` *or* a result that passes ``check`` (huge values, where refusing
  and answering are both honest).

:func:`classify` runs one case and names its outcome: ``clean error``, ``correct``, ``silent wrong``,
``false error`` (a valid input refused, or an error that does not name the parameter), ``traceback`` or
``hang``.  tests/test_adversarial.py asserts every case ends in ``clean error`` or ``correct``;
tests/adversarial_census.py counts the outcomes (the before/after table of the closing note).

The table is built from parameter *kinds* (each with its allowed range), so every option of every subcommand
meets the same variants: NaN, inf, -inf, negative, zero, one ulp outside the range, huge, non-numeric, empty,
(Python) integer arrays and float32.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

OUTCOMES = ("clean error", "correct", "silent wrong", "false error", "traceback", "hang")


@dataclass(frozen=True)
class Case:
    id: str
    expect: str  # "error" | "ok" | "either"
    param: tuple[str, ...] = ()  # names an error must mention (any one of them)
    argv: tuple[str, ...] | None = None  # CLI case
    call: Callable[[], Any] | None = None  # Python API case
    check: Callable[[Any], bool] | None = None  # reference check of a result (CLI: the parsed stdout JSON)
    setup: Callable[[Path], Any] | None = None  # builds files in a scratch dir; returns argv/patch info
    after: Callable[[Path], bool] | None = None  # post-condition on the scratch dir (nothing lost)
    timeout: float = 120.0
    tags: tuple[str, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------------------------------------------------- kinds
ULP_BELOW_ZERO = "-5e-324"


def _float_variants(kind: str) -> list[tuple[str, str, str]]:
    """(label, text, expect) for a float option of this kind (CLI text)."""
    bad = [("nan", "nan", "error"), ("inf", "inf", "error"), ("-inf", "-inf", "error"),
           ("non-numeric", "abc", "error"), ("empty", "", "error")]
    if kind == "pos":  # (0, inf)
        return bad + [("negative", "-1", "error"), ("zero", "0", "error"), ("ulp-out", ULP_BELOW_ZERO, "error"),
                      ("ulp-in", "5e-324", "either"), ("huge", "1e300", "either")]
    if kind == "nonneg":  # [0, inf)
        return bad + [("negative", "-1", "error"), ("zero", "0", "ok"), ("ulp-out", ULP_BELOW_ZERO, "error"),
                      ("huge", "1e300", "either")]
    if kind == "unit_open":  # [0, 1)
        return bad + [("negative", "-1", "error"), ("zero", "0", "ok"), ("ulp-out", "1.0", "error"),
                      ("ulp-in", repr(np.nextafter(1.0, 0.0)), "either"), ("huge", "1e300", "error")]
    if kind == "angle":  # [0, pi]
        return bad + [("negative", "-1", "error"), ("zero", "0", "ok"), ("ulp-below", ULP_BELOW_ZERO, "error"),
                      ("ulp-out", repr(float(np.nextafter(math.pi, 4.0))), "error"),
                      ("upper-edge", repr(math.pi), "ok"), ("huge", "1e300", "error")]
    if kind == "real":
        return bad + [("negative", "-1", "either"), ("zero", "0", "either"), ("huge", "1e300", "either")]
    raise KeyError(kind)


def _int_variants(minimum: int) -> list[tuple[str, str, str]]:
    return [("negative", "-1", "error"), ("below-min", str(minimum - 1), "error"), ("fraction", "2.5", "error"),
            ("non-numeric", "abc", "error"), ("empty", "", "error"), ("nan", "nan", "error"),
            ("huge", str(10**12), "either"), ("overflow", str(10**30), "error")]


def _finite_json(obj) -> bool:
    """Every number in a JSON document is finite (None allowed: an honest 'no value')."""
    if isinstance(obj, dict):
        return all(_finite_json(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_finite_json(v) for v in obj)
    if isinstance(obj, float):
        return math.isfinite(obj)
    return True


# (subcommand argv without the option under test, {option: kind or ("int", min)}, base option values)
CLI_NUMERIC = {
    "rho-star": (["rho-star", "--json"],
                 {"--depth": ("int", 1), "--input-kernel": "pos", "--sigma-w2": "pos", "--sigma-b2": "nonneg",
                  "--sigma-w2-out": "pos"},
                 {"--depth": "10", "--input-kernel": "0.05", "--sigma-w2": "1.25", "--sigma-b2": "0.05"}),
    "response": (["response", "--json"],
                 {"--rho": "nonneg", "--depth": ("int", 1), "--input-kernel": "pos", "--sigma-w2": "pos",
                  "--sigma-b2": "nonneg", "--sigma-w2-out": "pos"},
                 {"--rho": "0.3", "--depth": "10", "--input-kernel": "0.05", "--sigma-w2": "1.25",
                  "--sigma-b2": "0.05"}),
    "log-gaussian": (["log-gaussian", "--balanced", "--json"],
                     {"--width": ("int", 2), "--depth": ("int", 1), "--alpha": "real", "--lam": "nonneg"},
                     {"--width": "10", "--depth": "5", "--alpha": "0.7", "--lam": "0.7"}),
    "nu": (["nu", "--json"], {"--gamma": "unit_open", "--n-out": ("int", 1)},
           {"--gamma": "0.5", "--activation": "relu"}),
    "residual-mlp": (["residual-mlp", "--json"], {"--gamma": "unit_open", "--depth": ("int", 0), "--width": ("int", 1)},
                     {"--activation": "relu", "--gamma": "0.5", "--depth": "2"}),
    "stable-kernel": (["stable-kernel", "--json"],
                      {"--depth": ("int", 1), "--angle": "angle", "--sigma-w2": "pos", "--sigma-b2": "nonneg",
                       "--d-in": ("int", 1)},
                      {"--depth": "10"}),
    "abcd": (["abcd", "--json"], {"--depth": ("int", 0), "--gamma0": "pos"}, {"--width": "10"}),
}

#: options that accept real numbers but where 'huge' cannot be answered (documented upper limits)
HUGE_MUST_REFUSE = {("rho-star", "--depth"), ("response", "--depth"), ("stable-kernel", "--depth"),
                    ("residual-mlp", "--depth")}


def _argv(base: list[str], values: dict[str, str]) -> tuple[str, ...]:
    out = list(base)
    for k, v in values.items():
        out += [k, v] if not v.startswith("-") else [f"{k}={v}"]
    return tuple(out)


def _write_inputs(tmp: Path) -> str:
    np.save(tmp / "X.npy", np.random.default_rng(0).normal(size=(5, 3)))
    return "out"


def kernel_cli_cases() -> list[Case]:
    """resprop kernel: every numeric option (NaN, negative, one ulp out, non-numeric), the expressions and paths."""
    base = {"--inputs": "{tmp}/X.npy", "--activation": "erf", "--depth": "3", "--sigma-w2": "1.5",
            "--sigma-b2": "0.1", "--out": "{tmp}/K.npz"}
    bad = {"--sigma-w2": ("nan", "-1", "0", ULP_BELOW_ZERO, "abc"), "--sigma-b2": ("nan", "-1", ULP_BELOW_ZERO),
           "--depth": ("-1", "1.5", "abc"), "--gamma": ("nan", "inf"), "--branch-scale": ("nan", "l**", "1/(l-1)"),
           "--activation": ("nosuch(x", "exp(x**2)*y", "__import__('os')"),
           "--inputs": ("{tmp}/missing.npy",), "--out": ("{tmp}/K.txt", "{tmp}"), "--backend": ("fast", "")}
    cases = []
    for opt, values in bad.items():
        for i, text in enumerate(values):
            argv = _argv(["kernel"], base | {opt: text})
            cases.append(Case(f"cli:kernel:{opt.lstrip('-')}={i}", "error", (opt.lstrip("-"),), argv=argv,
                              setup=_write_inputs, timeout=60.0))
    cases.append(Case("cli:kernel:ok", "ok", (), argv=_argv(["kernel", "--ntk"], base), setup=_write_inputs,
                      check=lambda out: "wrote" in out and "nngp, ntk" in out))
    # the spellings before issue 28 (--weight-var, --bias-var), accepted for one release with a deprecation line
    old = {("--weight-var" if k == "--sigma-w2" else "--bias-var" if k == "--sigma-b2" else k): v for k, v in base.items()}
    cases.append(Case("cli:kernel:deprecated-spellings:ok", "ok", (), argv=_argv(["kernel"], old), setup=_write_inputs,
                      check=lambda out: "wrote" in out))
    for opt, text in (("--weight-var", "nan"), ("--weight-var", "0"), ("--bias-var", "-1")):
        cases.append(Case(f"cli:kernel:deprecated:{opt.lstrip('-')}={text}", "error", (opt.lstrip("-"),),
                          argv=_argv(["kernel"], old | {opt: text}), setup=_write_inputs, timeout=60.0))
    cases.append(Case("cli:kernel:backend=compiled,sin", "error", ("backend",),
                      argv=_argv(["kernel"], base | {"--activation": "sin(x)", "--backend": "compiled"}),
                      setup=_write_inputs, timeout=60.0))
    cases.append(Case("cli:kernel:backend=numpy", "ok", (), argv=_argv(["kernel", "--ntk"], base | {"--backend": "numpy"}),
                      setup=_write_inputs, check=lambda out: "wrote" in out and "nngp, ntk" in out, timeout=60.0))
    # kernels to disk (issue 24): the store options, with --out K.zarr (and with a .npz, where they do not apply)
    store = base | {"--out": "{tmp}/K.zarr"}
    for opt, values in {"--tile": ("0", "-1", "abc", "1.5"), "--workers": ("0", "-2", "abc"),
                        "--dtype": ("float16", "")}.items():
        for i, text in enumerate(values):
            cases.append(Case(f"cli:kernel:store:{opt.lstrip('-')}={i}", "error", (opt.lstrip("-"),),
                              argv=_argv(["kernel"], store | {opt: text}), setup=_write_inputs, timeout=60.0))
    for opt, text in (("--tile", "64"), ("--workers", "2"), ("--dtype", "float32"), ("--scheduler", "tcp://x:1")):
        cases.append(Case(f"cli:kernel:npz-with-{opt.lstrip('-')}", "error", (opt.lstrip("-"),),
                          argv=_argv(["kernel"], base | {opt: text}), setup=_write_inputs, timeout=60.0))
    cases.append(Case("cli:kernel:store:ok", "ok", (), argv=_argv(["kernel", "--ntk"], store | {"--tile": "2"}),
                      setup=_write_inputs, check=lambda out: "wrote" in out and "nngp, ntk" in out,
                      after=lambda tmp: (tmp / "K.zarr" / "nngp").is_dir() and not (tmp / ".K.zarr.partial").exists(),
                      timeout=60.0))
    return cases


def _npy_cases() -> dict[str, tuple[Callable[[Path], Any], str]]:
    """Bad --inputs files of resprop kernel: (writer of tmp/X.npy, label)."""
    def header_only(shape):
        def make(p):
            with open(p, "wb") as fh:
                np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": shape})
                fh.write(b"\0" * 64)
        return make

    def truncated(p):
        np.save(p, np.ones((10, 3)))
        p.write_bytes(p.read_bytes()[:-8])

    def too_big(p):  # a valid file whose P x P kernel cannot fit in the memory available now
        from resprop.numeric.engine.inputs import PEAK_FACTOR, available_memory

        have = available_memory() or 2**40
        np.save(p, np.zeros((int(math.sqrt(have / (8 * PEAK_FACTOR[False]))) + 1000, 1)))

    return {
        "empty": lambda p: p.write_bytes(b""),
        "truncated": truncated,
        "header-1e12": header_only((10**6, 10**6)),
        "pickled-object": lambda p: np.save(p, np.array([[1.0, None]], dtype=object), allow_pickle=True),
        "ragged": lambda p: np.save(p, np.array([[1.0, 2.0], [3.0]], dtype=object), allow_pickle=True),
        "1-D": lambda p: np.save(p, np.ones(4)),
        "3-D": lambda p: np.save(p, np.ones((2, 2, 2))),
        "P=0": lambda p: np.save(p, np.ones((0, 3))),
        "complex": lambda p: np.save(p, np.ones((3, 2), complex)),
        "strings": lambda p: np.save(p, np.array([["1", "2"], ["3", "4"]])),
        "bool": lambda p: np.save(p, np.ones((3, 2), bool)),
        "nan": lambda p: np.save(p, np.array([[1.0, np.nan]])),
        "text": lambda p: p.write_text("1 2\n3 4\n"),
        "memory": too_big,
    }


def fluctuations_cli_cases() -> list[Case]:
    """resprop fluctuations (issue 27): every numeric option, the activation, the pairs file and the output path."""
    base = {"--inputs": "{tmp}/X.npy", "--activation": "tanh", "--depth": "2", "--width": "64", "--sigma-w2": "1.5",
            "--sigma-b2": "0.1", "--out": "{tmp}/F.npz"}
    bad = {"--sigma-w2": ("nan", "-1", "0", ULP_BELOW_ZERO, "abc"), "--sigma-b2": ("nan", "-1", ULP_BELOW_ZERO),
           "--depth": ("-1", "1.5", "abc", "10001"), "--width": ("0", "-3", "1.5", "abc"),
           "--gamma": ("nan", "inf"), "--branch-scale": ("nan", "l**", "1/(l-1)"),
           "--activation": ("nosuch(x", "sign(x)", "Heaviside(x)", "Abs(sin(x))", "floor(x)", "__import__('os')"),
           "--channels": ("1", "65", "abc"), "--rtol": ("0", "1", "nan", "-1e-6", "abc"),
           "--pairs": ("{tmp}/missing.npy", "{tmp}/X.npy"),
           "--inputs": ("{tmp}/missing.npy",), "--out": ("{tmp}/F.txt", "{tmp}", "{tmp}/F.npy")}
    cases = []
    for opt, values in bad.items():
        for i, text in enumerate(values):
            cases.append(Case(f"cli:fluctuations:{opt.lstrip('-')}={i}", "error", (opt.lstrip("-"),),
                              argv=_argv(["fluctuations"], base | {opt: text}), setup=_write_inputs, timeout=60.0))

    def with_pairs(tmp):
        _write_inputs(tmp)
        np.save(tmp / "Q.npy", np.array([[0, 1, 0, 1], [0, 1, 2, 3], [4, 4, 4, 4]]))
        return "out"

    def pairs_out_of_range(tmp):
        _write_inputs(tmp)
        np.save(tmp / "Q.npy", np.array([[0, 1, 0, 5]]))
        return "out"

    def read_back(tmp):
        with np.load(tmp / "F.npz") as f:
            return (f["variance"].shape == (5, 5) and np.allclose(f["covariance"][0], f["variance"][0, 1], rtol=1e-12)
                    and np.allclose(f["covariance"][2], f["variance"][4, 4], rtol=1e-12)
                    and bool(np.all(np.isfinite(f["mean_shift"]))))

    cases += [
        Case("cli:fluctuations:ok", "ok", (), argv=_argv(["fluctuations"], base | {"--pairs": "{tmp}/Q.npy"}),
             setup=with_pairs, check=lambda out: "wrote" in out and "covariance" in out, after=read_back,
             timeout=120.0),
        Case("cli:fluctuations:pairs-out-of-range", "error", ("pairs",),
             argv=_argv(["fluctuations"], base | {"--pairs": "{tmp}/Q.npy"}), setup=pairs_out_of_range,
             after=lambda tmp: not (tmp / "F.npz").exists(), timeout=60.0),
        Case("cli:fluctuations:deprecated-spellings:ok", "ok", (),
             argv=_argv(["fluctuations"], {("--weight-var" if k == "--sigma-w2" else "--bias-var" if k == "--sigma-b2"
                                             else k): v for k, v in base.items()}),
             setup=_write_inputs, check=lambda out: "wrote" in out, timeout=120.0),
        Case("cli:fluctuations:relu-gamma0-readout:ok", "ok", (),
             argv=_argv(["fluctuations", "--readout"], base | {"--activation": "relu", "--gamma": "0"}),
             setup=_write_inputs, check=lambda out: "wrote" in out, timeout=120.0),
    ]
    for label, make in _npy_cases().items():
        def setup(tmp, make=make):
            make(tmp / "X.npy")
            return "out"
        cases.append(Case(f"cli:fluctuations:inputs-file={label}", "error", ("inputs",),
                          argv=_argv(["fluctuations"], base), setup=setup,
                          after=lambda tmp: not (tmp / "F.npz").exists(), timeout=60.0))
    return cases


def kernel_file_cases() -> list[Case]:
    """Issue 23 items 4-5: resprop kernel's --out through output.py (foreign files, links, siblings, its own
    previous output) and its --inputs read header-first (bad .npy files, the memory of the P x P results)."""
    base = {"--inputs": "{tmp}/X.npy", "--activation": "erf", "--depth": "3", "--sigma-w2": "1.5",
            "--sigma-b2": "0.1", "--out": "{tmp}/K.npz"}
    cases = []
    for label, make in _npy_cases().items():
        def setup(tmp, make=make):
            make(tmp / "X.npy")
            return "out"
        cases.append(Case(f"cli:kernel:inputs-file={label}", "error", ("inputs",), argv=_argv(["kernel"], base),
                          setup=setup, after=lambda tmp: not (tmp / "K.npz").exists(), timeout=60.0))

    def foreign(tmp):
        _write_inputs(tmp)
        (tmp / "K.npz").write_bytes(b"user data")
        return "out"

    def link(tmp):
        _write_inputs(tmp)
        (tmp / "real.npz").write_bytes(b"user data")
        (tmp / "K.npz").symlink_to("real.npz")
        return "out"

    def sibling(tmp):
        _write_inputs(tmp)
        (tmp / "K.npz.partial.npz").write_bytes(b"user data")
        return "out"

    def own(tmp):
        from resprop.numeric.engine.output import write_manifest

        _write_inputs(tmp)
        np.savez(tmp / "K.npz", nngp=np.eye(5))
        write_manifest(tmp / "K.npz", "file", "resprop kernel")
        return "out"

    def refreshed(tmp):  # the own output was replaced by the result of this run
        with np.load(tmp / "K.npz") as f:
            return f["nngp"].shape == (5, 5) and not np.array_equal(f["nngp"], np.eye(5))

    cases += [
        Case("cli:kernel:out=foreign-file", "error", ("out", "K.npz"), argv=_argv(["kernel"], base), setup=foreign,
             after=lambda tmp: (tmp / "K.npz").read_bytes() == b"user data", timeout=60.0),
        Case("cli:kernel:out=symlink", "error", ("out", "symbolic link"), argv=_argv(["kernel"], base), setup=link,
             after=lambda tmp: (tmp / "K.npz").is_symlink() and (tmp / "real.npz").read_bytes() == b"user data",
             timeout=60.0),
        Case("cli:kernel:out=foreign-partial-sibling", "ok", (), argv=_argv(["kernel"], base), setup=sibling,
             after=lambda tmp: (tmp / "K.npz.partial.npz").read_bytes() == b"user data",
             check=lambda out: "wrote" in out, timeout=60.0),
        Case("cli:kernel:out=own-previous-output", "ok", (), argv=_argv(["kernel"], base), setup=own,
             after=refreshed, check=lambda out: "wrote" in out, timeout=60.0),
        Case("cli:kernel:out=foreign-and-inputs-missing", "error", ("out", "K.npz"),  # --out is checked first
             argv=_argv(["kernel"], base | {"--inputs": "{tmp}/missing.npy", "--depth": "1000000"}),
             setup=lambda tmp: (tmp / "K.npz").write_bytes(b"user data") and "out", timeout=60.0),
    ]

    def store_foreign(tmp):
        _write_inputs(tmp)
        (tmp / "K.zarr").mkdir()
        (tmp / "K.zarr" / "mine.txt").write_text("user data")
        return "out"

    def store_link(tmp):
        _write_inputs(tmp)
        (tmp / "real").mkdir()
        (tmp / "K.zarr").symlink_to("real")
        return "out"

    def partial_file(tmp):
        _write_inputs(tmp)
        (tmp / ".K.zarr.partial").write_text("user data")
        return "out"

    def partial_other_run(tmp):
        import json

        _write_inputs(tmp)
        (tmp / ".K.zarr.partial").mkdir()
        (tmp / ".K.zarr.partial" / ".resprop-partial.json").write_text(json.dumps({"key": "another run"}))
        return "out"

    store = base | {"--out": "{tmp}/K.zarr"}
    cases += [
        Case("cli:kernel:store:out=foreign-dir", "error", ("out", "K.zarr"), argv=_argv(["kernel"], store),
             setup=store_foreign, after=lambda tmp: (tmp / "K.zarr" / "mine.txt").read_text() == "user data",
             timeout=60.0),
        Case("cli:kernel:store:out=symlink", "error", ("out", "symbolic link"), argv=_argv(["kernel"], store),
             setup=store_link, after=lambda tmp: (tmp / "K.zarr").is_symlink() and not any((tmp / "real").iterdir()),
             timeout=60.0),
        Case("cli:kernel:store:partial=file", "error", ("out", "partial"), argv=_argv(["kernel"], store),
             setup=partial_file, after=lambda tmp: (tmp / ".K.zarr.partial").read_text() == "user data",
             timeout=60.0),
        Case("cli:kernel:store:partial=other-run", "error", ("out", "partial"), argv=_argv(["kernel"], store),
             setup=partial_other_run, after=lambda tmp: (tmp / ".K.zarr.partial" / ".resprop-partial.json").exists(),
             timeout=60.0),
    ]

    def api_memory():
        from resprop.numeric.engine.inputs import PEAK_FACTOR, available_memory
        from resprop.numeric.engine.kernel import kernel

        have = available_memory() or 2**40
        return kernel(np.zeros((int(math.sqrt(have / (8 * PEAK_FACTOR[True]))) + 1000, 1)), "erf", 2, 1.5, 0.1,
                      ntk=True)

    cases += [
        Case("py:kernel:X=ragged", "error", ("X",), call=_api("resprop.kernel", [[1.0, 2.0], [3.0]], "erf", 2, 1.5,
                                                              0.1)),
        Case("py:kernel:X=strings", "error", ("X",), call=_api("resprop.kernel", np.array([["1", "2"]]), "erf", 2,
                                                               1.5, 0.1)),
        Case("py:kernel:X=bool", "error", ("X",), call=_api("resprop.kernel", np.ones((2, 2), bool), "erf", 2, 1.5,
                                                            0.1)),
        Case("py:kernel:X=memory", "error", ("X",), call=api_memory, timeout=60.0),
        Case("py:kernel:sigma_w2=True", "error", ("sigma_w2",),
             call=_api("resprop.kernel", np.ones((2, 2)), "erf", 2, True, 0.1)),
        Case("py:kernel:sigma_b2=False", "error", ("sigma_b2",),
             call=_api("resprop.kernel", np.ones((2, 2)), "erf", 2, 1.5, False)),
    ]
    # the compiled PDLT trajectory (issue 25): its backend switch names the parameter
    cases += [Case(f"py:vertex_trajectory:backend={b!r}", "error", ("backend",),
                   call=_api("resprop.numeric.theories.pdlt.residual_mlp.vertex_trajectory", "relu", gamma=0.5,
                             depth=3, backend=b))
              for b in ("fast", "", None, 1)]
    # theories registered at run time (issue 26): a taken slug, derivation or subcommand names the field
    def _theory(**kw):
        from resprop.registry import Theory

        base = dict(slug="advtheory", title="t", citation="c", paper="p", citation_tex="c",
                    derivations={"advtheory_d": "m:f"})
        return Theory(**(base | kw))

    def _register(make):
        def call():
            from resprop import registry

            try:
                return registry.register(make())
            finally:
                registry._REGISTERED.pop("advtheory", None)
        return call

    cases += [
        Case("py:register:theory=dict", "error", ("theory",), call=_register(lambda: {"slug": "advtheory"})),
        Case("py:register:slug=taken", "error", ("slug",), call=_register(lambda: _theory(slug=_taken()[0]))),
        Case("py:register:derivation=taken", "error", ("derivations",),
             call=_register(lambda: _theory(derivations={_taken()[1]: "m:f"}))),
        Case("py:register:subcommand=kernel", "error", ("subcommands",),
             call=_register(lambda: _theory(cli="m:f", subcommands=("kernel",)))),
        Case("py:register:cli=no-colon", "error", ("cli",), call=_register(lambda: _theory(cli="module.function"))),
    ]
    cases.append(Case("cli:derive:slug=nope", "error", ("slug",), argv=("derive", "--check", "nope")))
    # the conformance suite (resprop.testing, issue 26 item 4): what it is asked to check names the parameter
    cases += [Case(f"py:{function}:theory={label}", "error", ("theory",), call=_conformance(function, value))
              for function in ("check_theory", "check_derivation", "check_latex_roundtrip", "check_kernel_domains",
                               "check_claims", "check_figures", "check_cli")
              for label, value in (("dict", {"slug": "x"}), ("None", None), ("unknown", "nosuch"))]
    cases += [Case(f"py:check_theory:{name}={label}", "error", (name,), call=_conformance("check_theory", **{name: v}))
              for name, label, v in (("checks", "unknown", ["nosuch"]), ("checks", "string", "cli"),
                                     ("checks", "empty", []), ("checks", "int", 3), ("quick", "1", 1),
                                     ("quick", "None", None), ("target", "missing", "/nonexistent/resprop-target"),
                                     ("target", "int", 3))]
    cases += [Case("py:check_cli:examples=unknown-subcommand", "error", ("examples",),
                   call=_conformance("check_cli", examples={"no-such-subcommand": []})),
              Case("py:check_cli:examples=not-strings", "error", ("examples",),
                   call=_conformance("check_cli", examples={"x": [1, 2]})),
              Case("py:check_theory:checks=['cli']", "ok", (), call=_conformance("check_theory", checks=["cli"]),
                   check=lambda out: list(out) == ["cli"] and out["cli"]["refused"] >= 0)]
    # symbolic Gaussian expectations of derivations (resprop.derive.expectation, issue 26 item 3)
    cases += [Case(f"py:expectation:{label}", "error", (param,), call=_expectation(build))
              for label, param, build in (
                  ("mean:q=-1", "q", lambda E: E.mean(E.phi(E.z) ** 2, -1)),
                  ("mean:q=I", "q", lambda E: E.mean(E.phi(E.z) ** 2, "I")),
                  ("mean:f=dict", "f", lambda E: E.mean({1: 2}, 1)),
                  ("mean2:K_aa=0", "K_aa", lambda E: E.mean2(E.phi(E.u) * E.phi(E.v), 0, 1, 0)),
                  ("mean2:K_ab=2", "K_ab", lambda E: E.mean2(E.phi(E.u) * E.phi(E.v), 1, 1, 2)),
                  ("resolve:activation=x*y", "activation", lambda E: E.resolve(E.mean(E.phi(E.z) ** 2, 1), "x*y")),
                  ("resolve:activation=(((", "activation", lambda E: E.resolve(E.mean(E.phi(E.z) ** 2, 1), "(((")),
                  ("resolve:expr=None", "expr", lambda E: E.resolve(None, "erf")))]
    # the registry's lookups of generated code (issue 26 item 1)
    cases += [Case("py:registry.generated_module:name=nosuch", "error", ("derivation",),
                   call=_api("resprop.registry.generated_module", "nosuch")),
              Case("py:registry.declared:derivation=nosuch", "error", ("derivation",),
                   call=_api("resprop.registry.declared", "nosuch", "q")),
              Case("py:registry.generated_module:name=gaussian", "ok", (),
                   call=_api("resprop.registry.generated_module", "gaussian"),
                   check=lambda out: out == "resprop.generated.gaussian")]
    cases.append(Case("py:expectation:resolve:relu", "ok", (), call=_expectation(
        lambda E: E.resolve(E.mean(E.phi(E.z) ** 2, 2), "relu")), check=lambda out: out == 1))
    cases.append(Case("py:vertex_trajectory:backend='numpy'", "ok", (),
                      call=_api("resprop.numeric.theories.pdlt.residual_mlp.vertex_trajectory", "relu", gamma=0.5,
                                depth=3, backend="numpy")))
    return cases


def _taken() -> tuple[str, str]:
    """A registered theory's slug and one of its derivation names (taken, so registering them again is refused)."""
    from resprop import registry

    th = next(iter(registry.theories().values()))
    return th.slug, next(iter(th.derivations))


def _expectation(build):
    """A call of resprop.derive.expectation through ``build(module)`` (the module carries sympy as ``sp``)."""
    def call():
        import sympy

        from resprop.derive import expectation

        expectation.sp = sympy
        return build(expectation)
    call.__qualname__ = "resprop.derive.expectation"
    return call


_FIRST = object()  # stands for the first registered theory


def _conformance(function: str, theory: Any = _FIRST, **kwargs) -> Callable[[], Any]:
    """``resprop.testing.<function>(theory, **kwargs)``, the theory the first registered one unless given."""
    def call():
        from resprop import registry, testing

        return getattr(testing, function)(registry.slugs()[0] if theory is _FIRST else theory, **kwargs)
    call.__qualname__ = f"resprop.testing.{function}"
    return call


def train_seed_cases() -> list[Case]:
    """Issue 23 item 7: seeds are integers in [0, 2^63 - 1], refused up front (nothing is trained or written)."""
    cases = [Case(f"cli:train:seed={text}", "error", ("seed",),
                  argv=("train", "fischer-fig7", "--quick", f"--seed={text}", "--out", "{tmp}/train"),
                  after=lambda tmp: not (tmp / "train").exists())
             for text in ("1.5", "True", str(2**63), "1,1", "", "1e3")]
    cases.append(Case("cli:train:deprecated-seeds=1,1", "error", ("seed",),
                      argv=("train", "fischer-fig7", "--quick", "--seeds=1,1", "--out", "{tmp}/train"),
                      after=lambda tmp: not (tmp / "train").exists()))
    cases += [Case(f"py:train:check_seeds={seeds!r}", "error", ("seeds",),
                   call=_api("resprop.numeric.training.experiments.check_seeds", seeds))
              for seeds in ([2**63], [-1], [True], [0.5], [], [3, 3])]
    cases.append(Case("py:train:seed_key(2^32+5)!=seed_key(5)", "ok", (),
                      call=lambda: [np.asarray(_seed_key(s)).tolist() for s in (5, 2**32 + 5)],
                      check=lambda keys: keys == [[0, 5], [1, 5]]))
    return cases


def _seed_key(seed):
    from resprop.numeric.training.loop import seed_key

    return seed_key(seed)


def activation_cases() -> list[Case]:
    """Issue 23 item 5: activations as a user writes them, through resprop kernel (CLI) and resprop.kernel."""
    base = {"--inputs": "{tmp}/X.npy", "--depth": "2", "--sigma-w2": "1.5", "--sigma-b2": "0.1",
            "--out": "{tmp}/K.npz"}
    refused = ("I*x", "x + I", "zoo*x", "sqrt(x)", "Integral(f(x), x)", "1e200*x", "exp(x**2)", "DiracDelta(x)",
               "floor(x**2)")
    cases = [Case(f"cli:kernel:activation={text}", "error", ("activation",),
                  argv=_argv(["kernel"], base | {"--activation": text}), setup=_write_inputs, timeout=60.0)
             for text in refused]
    cases += [Case(f"cli:kernel:activation={text}:ntk", "error", ("activation",),
                   argv=_argv(["kernel", "--ntk"], base | {"--activation": text}), setup=_write_inputs, timeout=60.0)
              for text in ("sign(x)", "Heaviside(x)", "floor(x)")]
    cases += [Case(f"cli:kernel:activation={text}", "ok", (), argv=_argv(["kernel"], base | {"--activation": text}),
                   setup=_write_inputs, check=lambda out: "wrote" in out, timeout=60.0)
              for text in ("abs(x)", "Max(x, 0)", "Piecewise((x, x > 0), (0, True))", "sign(x)", "Heaviside(x)",
                           "x*sign(x)", "floor(x)")]

    def one_layer(activation, pair):
        X = np.array([[1.0, 0.0], [0.6, 0.8]])
        K0 = 1.5 * X @ X.T / 2 + 0.1
        d = np.diag(K0)
        rho = np.clip(K0 / np.sqrt(np.outer(d, d)), -1, 1)
        ref = K0 + 1.5 * pair(rho, d[:, None], d[None, :]) + 0.1

        def call():
            from resprop.numeric.engine.kernel import kernel
            return kernel(X, activation, 1, 1.5, 0.1)
        return Case(f"py:kernel:activation={activation}", "ok", (), call=call,
                    check=lambda K: bool(np.allclose(K, ref, rtol=1e-11, atol=0)))

    cases += [one_layer("sign(x)", lambda r, a, b: 2 / np.pi * np.arcsin(r)),
              one_layer("Heaviside(x)", lambda r, a, b: 0.25 + np.arcsin(r) / (2 * np.pi)),
              one_layer("abs(x)", lambda r, a, b: 2 / np.pi * np.sqrt(a * b) * (np.sqrt(1 - r * r)
                                                                               + r * np.arcsin(r)))]
    return cases


def cli_numeric_cases() -> list[Case]:
    cases = []
    for sub, (base, options, defaults) in CLI_NUMERIC.items():
        for opt, kind in options.items():
            variants = _int_variants(kind[1]) if isinstance(kind, tuple) else _float_variants(kind)
            for label, text, expect in variants:
                if label in ("huge", "overflow"):  # layer-by-layer recursions refuse; closed forms answer
                    expect = "error" if (sub, opt) in HUGE_MUST_REFUSE else "either"
                values = dict(defaults)
                values[opt] = text
                name = opt.lstrip("-")
                cases.append(Case(f"cli:{sub}:{name}={label}", expect, (name,), argv=_argv(base, values),
                                  check=_finite_json, timeout=60.0))
    # options that are strings or lists
    cases += [
        Case("cli:rho-star:activation=unknown", "error", ("activation",),
             argv=_argv(["rho-star", "--json"], {"--depth": "10", "--input-kernel": "0.05", "--sigma-w2": "1.25",
                                                 "--sigma-b2": "0.05", "--activation": "nosuch(x"})),
        Case("cli:rho-star:input-kernel-offdiag>input-kernel", "error",
             ("input_kernel_offdiag", "input-kernel-offdiag"),
             argv=_argv(["rho-star", "--json"], {"--depth": "10", "--input-kernel": "0.05",
                                                 "--input-kernel-offdiag": "0.06", "--sigma-w2": "1.25",
                                                 "--sigma-b2": "0.05"})),
        Case("cli:rho-star:input-kernel-offdiag=nan", "error", ("input_kernel_offdiag", "input-kernel-offdiag"),
             argv=_argv(["rho-star", "--json"], {"--depth": "10", "--input-kernel": "0.05",
                                                 "--input-kernel-offdiag": "nan", "--sigma-w2": "1.25",
                                                 "--sigma-b2": "0.05"})),
        Case("cli:nu:activation=unknown", "error", ("activation",),
             argv=("nu", "--gamma", "0.5", "--activation", "softmax", "--json")),
        Case("cli:nu:activation=leaky-nan", "error", ("activation", "slope"),
             argv=("nu", "--gamma", "0.5", "--activation", "leaky_relu:nan", "--json")),
        Case("cli:residual-mlp:activation=unknown", "error", ("activation",),
             argv=("residual-mlp", "--activation", "softmax", "--gamma", "0.5", "--depth", "2", "--json")),
        Case("cli:residual-mlp:relu-d1", "ok", (),
             argv=("residual-mlp", "--activation", "relu", "--gamma", repr(math.sqrt(0.5)), "--depth", "1", "--json"),
             check=lambda out: abs(out["corrected"] - 4.25) < 1e-12 and abs(out["b26"] - 4.25) < 1e-12),
        # --gamma2 (gamma^2, deprecated since issue 28) keeps its meaning: gamma^2 = 0.5 is --gamma sqrt(0.5)
        Case("cli:residual-mlp:deprecated-gamma2:relu-d1", "ok", (),
             argv=("residual-mlp", "--activation", "relu", "--gamma2", "0.5", "--depth", "1", "--json"),
             check=lambda out: out["gamma2"] == 0.5 and abs(out["corrected"] - 4.25) < 1e-12
             and abs(out["b26"] - 4.25) < 1e-12),
        *[Case(f"cli:residual-mlp:deprecated-gamma2={text}", "error", ("gamma2",),
               argv=("residual-mlp", "--activation", "relu", f"--gamma2={text}", "--depth", "1", "--json"))
          for text in ("nan", "-1", "1", "abc")],
        Case("cli:stable-kernel:scaling=unknown", "error", ("scaling",),
             argv=("stable-kernel", "--depth", "10", "--scaling", "nosuch(", "--json")),
        Case("cli:stable-kernel:scaling=1/sqrt(l)", "either", ("scaling",),
             argv=("stable-kernel", "--depth", "10", "--scaling", "1/sqrt(l)", "--json"), check=_finite_json),
        *kernel_cli_cases(),
        *kernel_file_cases(),
        *fluctuations_cli_cases(),
        *train_seed_cases(),
        *activation_cases(),
        Case("cli:j2bar:theta=nan", "error", ("theta",), argv=("j2bar", "nan", "--json")),
        Case("cli:j2bar:theta=ulp-out", "error", ("theta",),
             argv=("j2bar", repr(float(np.nextafter(math.pi, 4.0))), "--digits", "10", "--json")),
        Case("cli:j2bar:theta=-0.1", "error", ("theta",), argv=("j2bar", "--", "-0.1")),
        Case("cli:j2bar:theta=abc", "error", ("theta",), argv=("j2bar", "abc")),
        Case("cli:j2bar:digits=0", "error", ("digits",), argv=("j2bar", "0.3", "--digits", "0")),
        Case("cli:j2bar:digits=101", "error", ("digits",), argv=("j2bar", "0.3", "--digits", "101")),
        Case("cli:j2bar:theta=0", "ok", (), argv=("j2bar", "0", "--digits", "10", "--json"),
             check=lambda out: out["closed_form"] == out["quadrature"]),
        Case("cli:abcd:width=0", "error", ("width",), argv=("abcd", "--width", "0", "--json")),
        Case("cli:abcd:width=nan", "error", ("width",), argv=("abcd", "--width", "nan", "--json")),
        Case("cli:abcd:deprecated-widths=0", "error", ("widths",), argv=("abcd", "--widths", "0", "--json")),
        Case("cli:abcd:check=garbage", "error", ("check",), argv=("abcd", "--check", "a1", "--json")),
        Case("cli:abcd:check=unknown-key", "error", ("check", "zz"), argv=("abcd", "--check", "zz=1", "--json")),
        Case("cli:figures:only=unknown", "error", ("only",),
             argv=("figures", "--out", "{tmp}/figs", "--only", "nosuch")),
        Case("cli:train:experiment=unknown", "error", ("experiment",),
             argv=("train", "nosuch", "--quick", "--out", "{tmp}/train")),
        Case("cli:train:out=missing", "error", ("out",), argv=("train", "fischer-fig7", "--quick")),
        Case("cli:train:seed=abc", "error", ("seed",),
             argv=("train", "fischer-fig7", "--quick", "--seed", "a,b", "--out", "{tmp}/train")),
        Case("cli:train:seed=-1", "error", ("seed",),
             argv=("train", "fischer-fig7", "--quick", "--seed=-1", "--out", "{tmp}/train")),
        Case("cli:log-gaussian:samples=1", "error", ("samples",),
             argv=("log-gaussian", "--width", "10", "--depth", "5", "--alpha", "0.7", "--lam", "0.7", "--simulate",
                   "--samples", "1", "--json")),
        Case("cli:log-gaussian:seed=-1", "error", ("seed",),
             argv=("log-gaussian", "--width", "10", "--depth", "5", "--alpha", "0.7", "--lam", "0.7", "--simulate",
                   "--samples", "50", "--seed", "-1", "--json")),
        Case("cli:log-gaussian:alpha=lam=0", "error", ("alpha", "lam"),
             argv=("log-gaussian", "--width", "10", "--depth", "5", "--alpha", "0", "--lam", "0", "--balanced",
                   "--json")),
        # the bias-dominated regime of the README: chi_out has no interior maximum, so rho* is null
        Case("cli:rho-star:bias-dominated", "ok", (),
             argv=("rho-star", "--depth", "10", "--input-kernel", "0.05", "--sigma-w2", "0.8", "--sigma-b2", "0.2",
                   "--json"),
             check=lambda out: out["rho_star"] == [None]),
        Case("cli:rho-star:relu-no-interior", "ok", (),
             argv=("rho-star", "--depth", "10", "--input-kernel", "0.05", "--sigma-w2", "1.25", "--sigma-b2", "0.05",
                   "--activation", "linear", "--json"),
             check=lambda out: out["rho_star"] == [None]),
        Case("cli:rho-star:identical-inputs", "ok", (),
             argv=("rho-star", "--depth", "10", "--input-kernel", "0.05", "--input-kernel-offdiag", "0.05",
                   "--sigma-w2", "1.25", "--sigma-b2", "0.05", "--json"),
             check=lambda out: _finite_json(out) and out["rho_star_offdiag"] in ([None], out["rho_star"])),
    ]
    return cases


# ------------------------------------------------------------------------------------------------------ paths
def _foreign_dir(tmp: Path, name: str) -> Path:
    d = tmp / name
    d.mkdir()
    (d / "results.csv").write_text("x\n")
    return d


def _foreign_kept(name: str) -> Callable[[Path], bool]:
    return lambda tmp: (tmp / name / "results.csv").read_text() == "x\n"


def _report_with_user_file(tmp: Path, name: str) -> Path:
    d = tmp / name
    d.mkdir()
    (d / "report.json").write_text("{}")
    (d / "my_notes.txt").write_text("x\n")
    return d


TINY_SWEEP = """kind = "residual_mlp"
[grid]
width = [8]
gamma = [0.5]
activation = ["relu"]
depth = [1]
[fixed]
samples = 64
[run]
seed = 1
chunk = 1
"""


def unwritable_dir() -> str:
    """A directory in which nobody, root included, may create anything (for root, a path under /sys)."""
    if os.geteuid() == 0:
        return "/sys/resprop-adversarial"
    d = Path(tempfile.mkdtemp(prefix="resprop-ro-"))
    d.chmod(0o500)
    return str(d / "sub")


#: (subcommand, argv with {out} and {tmp}, default output name)
PATH_COMMANDS = {
    "latex": ("latex", "--out", "{out}"),
    "figures": ("figures", "--out", "{out}", "--only", "abcd", "--quick", "--quiet"),
    "reproduce": ("reproduce", "abcd", "--quick", "--quiet", "--out", "{out}"),
    "sweep.nc": ("sweep", "{tmp}/tiny.toml", "--workers", "1", "--quiet", "--out", "{out}"),
    "sweep.zarr": ("sweep", "{tmp}/tiny.toml", "--workers", "1", "--quiet", "--out", "{out}"),
}


def path_cases() -> list[Case]:
    cases = []
    for sub, argv in PATH_COMMANDS.items():
        ext = {"sweep.nc": ".nc", "sweep.zarr": ".zarr"}.get(sub, "")
        name = "target" + ext

        def file_target(tmp, name=name):
            (tmp / name).write_text("user data\n")
            return name

        def under_file(tmp, name=name):
            (tmp / "afile").write_text("user data\n")
            return f"afile/{name}"

        def foreign(tmp, name=name):
            _foreign_dir(tmp, name)
            return name

        cases += [
            Case(f"path:{sub}:out-is-a-file", "error", ("target", "out"), argv=argv, setup=file_target,
                 after=lambda tmp, name=name: (tmp / name).read_text() == "user data\n", timeout=300),
            Case(f"path:{sub}:out-under-a-file", "error", ("afile", "out"), argv=argv, setup=under_file,
                 after=lambda tmp: (tmp / "afile").read_text() == "user data\n", timeout=300),
            Case(f"path:{sub}:out-unwritable", "error", ("resprop-adversarial", "resprop-ro", "out"), argv=argv,
                 setup=lambda tmp, name=name: f"{unwritable_dir()}/{name}", timeout=300),
            Case(f"path:{sub}:out-holds-foreign-files", "error", ("target", "out"), argv=argv, setup=foreign,
                 after=_foreign_kept(name), timeout=300),
        ]
    cases.append(Case("path:reproduce:report-json-plus-user-file", "error", ("target", "out"),
                      argv=PATH_COMMANDS["reproduce"],
                      setup=lambda tmp: (_report_with_user_file(tmp, "target"), "target")[1],
                      after=lambda tmp: (tmp / "target" / "my_notes.txt").read_text() == "x\n", timeout=300))
    return cases


def sweep_spec_cases() -> list[Case]:
    """Bad sweep specs: refused before any worker starts, with no OUT.parts/ left behind."""
    bad = {
        "width=0": ("width = [8]", "width = [0]", "width"),
        "width=-1": ("width = [8]", "width = [-1]", "width"),
        "width=string": ("width = [8]", 'width = ["abc"]', "width"),
        "gamma=nan": ("gamma = [0.5]", "gamma = [nan]", "gamma"),
        "gamma=inf": ("gamma = [0.5]", "gamma = [inf]", "gamma"),
        "gamma=1.5": ("gamma = [0.5]", "gamma = [1.5]", "gamma"),
        "gamma=empty": ("gamma = [0.5]", "gamma = []", "gamma"),
        "activation=unknown": ('activation = ["relu"]', 'activation = ["nosuch"]', "activation"),
        "depth=-1": ("depth = [1]", "depth = [-1]", "depth"),  # depth = 0 (the input alone) is valid
        "samples=0": ("samples = 64", "samples = 0", "samples"),
        "kind=unknown": ('kind = "residual_mlp"', 'kind = "nosuch"', "kind"),
        "seed=-1": ("seed = 1", "seed = -1", "seed"),
    }
    cases = []
    for label, (old, new, param) in bad.items():
        spec = TINY_SWEEP.replace(old, new)
        assert spec != TINY_SWEEP, label

        def setup(tmp, spec=spec):
            (tmp / "bad.toml").write_text(spec)
            return "out.nc"

        cases.append(Case(f"sweep-spec:{label}", "error", (param,),
                          argv=("sweep", "{tmp}/bad.toml", "--workers", "1", "--quiet", "--out", "{out}"),
                          setup=setup, after=lambda tmp: not (tmp / "out.nc.parts").exists()
                          and not (tmp / "out.nc").exists(), timeout=120))
    other_kinds = {  # values the old code let through to a Dask worker (a worker traceback, an empty OUT.parts/)
        "rho_star:depth=10^7": ('kind = "rho_star"\n[grid]\ndepth = [10000000]\nsigma_w2 = [1.25]\n'
                                '[fixed]\ninput_kernel = 0.05\nsigma_b2 = 0.05\n', "depth"),
        "rho_star:sigma_w2=1e300": ('kind = "rho_star"\n[grid]\ndepth = [3]\nsigma_w2 = [1e300]\n'
                                    '[fixed]\ninput_kernel = 0.05\nsigma_b2 = 0.05\n', "sigma_w2"),
        "log_gaussian:alpha=1e200": ('kind = "log_gaussian"\n[grid]\nwidth = [8]\ndepth = [2]\n[fixed]\n'
                                     'alpha = 1e200\nlam = 1.0\nsamples = 64\n', "alpha"),
        "residual_mlp:samples=10^12": (TINY_SWEEP.replace("samples = 64", "samples = 1000000000000"), "samples"),
    }
    for label, (spec, param) in other_kinds.items():
        def setup(tmp, spec=spec):
            (tmp / "bad.toml").write_text(spec)
            return "out.nc"

        cases.append(Case(f"sweep-spec:{label}", "error", (param,),
                          argv=("sweep", "{tmp}/bad.toml", "--workers", "1", "--quiet", "--out", "{out}"),
                          setup=setup, after=lambda tmp: not (tmp / "out.nc.parts").exists()
                          and not (tmp / "out.nc").exists(), timeout=120))
    cases.append(Case("sweep-spec:not-toml", "error", ("spec", "bad.toml"),
                      argv=("sweep", "{tmp}/bad.toml", "--quiet", "--out", "{out}"),
                      setup=lambda tmp: ((tmp / "bad.toml").write_text("kind = \n[[["), "out.nc")[1]))
    cases.append(Case("sweep-spec:missing", "error", ("nosuch.toml", "spec"),
                      argv=("sweep", "{tmp}/nosuch.toml", "--quiet", "--out", "{out}"),
                      setup=lambda tmp: "out.nc"))
    return cases


# -------------------------------------------------------------------------------------------------- Python API
def _api(path: str, *args, **kwargs) -> Callable[[], Any]:
    def call():
        import importlib

        module, name = path.rsplit(".", 1)
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    call.__qualname__ = path
    return call


def _sympy_value(theory: str, result: str, **values) -> float:
    """The derived expression evaluated by SymPy at 30 digits: independent of codegen and of float64."""
    import sympy as sp

    from resprop.registry import derivation

    r = derivation(theory)[result]
    subs = {i.symbol: sp.Float(repr(v), 40) if isinstance(v, float) else sp.Integer(v) for i, v in
            ((i, values[i.name]) for i in r.inputs)}  # 40-digit floats: exact rational powers of 1e6 would crawl
    return float(sp.N(r.expr.subs(subs), 30))


def _close(ref: float, rtol: float = 1e-10) -> Callable[[Any], bool]:
    return lambda out: np.all(np.isfinite(np.asarray(out, float))) and np.allclose(np.asarray(out, float), ref,
                                                                                 rtol=rtol, atol=0)


def _finite(out) -> bool:
    if hasattr(out, "__dataclass_fields__"):  # a typed result (resprop.numeric.engine.results)
        return _finite(vars(out))
    if isinstance(out, dict):
        return all(_finite(v) for v in out.values() if v is not None and not isinstance(v, str))
    try:
        arr = np.asarray(out, float)
    except (TypeError, ValueError):
        return True
    return bool(np.all(np.isfinite(arr)))


def _relu_collinear(out) -> bool:
    """x and 2x stay collinear through a bias-free ReLU network: K_ab = sqrt(K_aa K_bb) at every layer."""
    K = np.asarray(out["K_out"], float)
    return _finite(out) and math.isclose(K[0, 1], math.sqrt(K[0, 0] * K[1, 1]), rel_tol=1e-12)


def _log_chi2_reference(n_out: int) -> Callable[[Any], bool]:
    from scipy import stats

    y = math.log(n_out)
    ref = math.exp(stats.chi2.logpdf(math.exp(y), n_out) + y)  # density of ln X at y, X ~ chi^2(n_out)
    return _close(ref, 1e-9)


def _rho_star_none(out) -> bool:
    return list(np.atleast_1d(np.asarray(out["rho_star"], dtype=object))) == [None]


def _rho_star_ok(out) -> bool:
    """rho* is a finite number where chi_out has an interior maximum and None where it has none (its other
    fields, such as the boundary of a supremum, may be NaN/None where they do not apply)."""
    values = np.atleast_1d(np.asarray(out["rho_star"], dtype=object))
    return all(v is None or math.isfinite(float(v)) for v in values)


RESULT_CHECKS = {"resprop.numeric.theories.fischer.field_theory.rho_star": _rho_star_ok}


def api_cases() -> list[Case]:
    X2 = [[1.0, 2.0], [2.0, 4.0]]  # inputs x and 2x
    cases = [
        Case("api:relu_arccos1(rho=+1)", "ok", call=_api("resprop.generated.gaussian.relu_arccos1", 1.0, 4.0, 2.0),
             check=_close(1.0, 1e-14)),  # E[relu(u) relu(2u)] = 2 E[relu(u)^2] = 1
        Case("api:relu_arccos1(rho=-1)", "ok", call=_api("resprop.generated.gaussian.relu_arccos1", 1.0, 4.0, -2.0),
             check=lambda out: abs(float(out)) < 1e-15),
        Case("api:relu_arccos0(rho=+1)", "ok", call=_api("resprop.generated.gaussian.relu_arccos0", 1.0, 4.0, 2.0),
             check=_close(0.5, 1e-14)),
        Case("api:relu_arccos2(rho=+1)-continuous", "ok",
             call=lambda: [float(_api("resprop.generated.gaussian.relu_arccos2", 1.0, 1.0, r)()) for r in
                           (1.0, float(np.nextafter(1.0, 0.0)))],
             check=lambda out: np.all(np.isfinite(out)) and math.isclose(out[0], out[1], rel_tol=1e-6)),
        Case("api:relu_arccos1(rho=1+ulp)", "ok",
             call=_api("resprop.generated.gaussian.relu_arccos1", 1.0, 1.0, float(np.nextafter(1.0, 2.0))),
             check=_close(0.5, 1e-12)),
        Case("api:nngp-relu(x,2x)", "ok",
             call=_api("resprop.numeric.theories.fischer.field_theory.nngp", X2, depth=5, rho=0.5, sigma_w2=1.0, sigma_b2=0.0,
                       activation="relu"), check=_relu_collinear),
        Case("api:linearised_kernel(int64 depth)", "ok",
             call=_api("resprop.numeric.theories.fischer.generated.fischer.linearised_kernel", np.array([10**6], np.int64), 0.01, 1.25, 0.05, 1.0,
                       0.05),
             check=lambda out: _close(_sympy_value("fischer", "linearised_kernel", L=10**6, rho=0.01,
                                                   sigma_w2=1.25, sigma_b2=0.05, dphi0_sq=1.0, K0=0.05))(out)),
        Case("api:nu_scale_invariant(int slopes)", "ok",
             call=_api("resprop.numeric.theories.pdlt.generated.pdlt.nu_scale_invariant", 0.5, np.array([1]), np.array([60000])),
             check=lambda out: _close(_sympy_value("pdlt", "nu_scale_invariant", gamma=0.5, a_plus=1,
                                                   a_minus=60000))(out)),
        Case("api:beta(alpha=lam=1e5)", "ok",
             call=_api("resprop.numeric.theories.lognormal.generated.lognormal.beta", 100, 100, 10**5, 10**5),
             check=lambda out: _close(_sympy_value("lognormal", "beta", n=100, d=100, alpha=10**5,
                                                   lam=10**5), 1e-9)(out)),
        Case("api:unscaled_diagonal(L=2000)", "either", ("q0", "sigma_w2", "sigma_b2", "L", "depth"),
             call=_api("resprop.numeric.theories.stable.generated.stable.unscaled_diagonal", 1.0, 2.0, 0.0, 2000),
             check=lambda out: False),  # 2^2000 is not a float64: a clean error is the only honest answer
        Case("api:unscaled_diagonal(int L=1000)", "ok",
             call=_api("resprop.numeric.theories.stable.generated.stable.unscaled_diagonal", 1.0, 2.0, 0.0, 1000),
             check=_close(2.0**1000, 1e-12)),  # (1 + sigma_w^2/2)^L q0 with sigma_b = 0
        Case("api:log_chi2_density(n_out=344)", "ok",
             call=_api("resprop.numeric.theories.lognormal.generated.lognormal.log_chi2_density", math.log(344), 344),
             check=_log_chi2_reference(344)),
        Case("api:log_chi2_density(n_out=10000)", "ok",
             call=_api("resprop.numeric.theories.lognormal.generated.lognormal.log_chi2_density", math.log(10000), 10000),
             check=_log_chi2_reference(10000)),
        Case("api:output_corr_sq(1000)", "ok", call=_api("resprop.numeric.theories.lognormal.generated.lognormal.output_corr_sq", 1000.0),
             check=lambda out: _close(_sympy_value("lognormal", "output_corr_sq", var_G=1000.0), 1e-9)(out)),
        Case("api:extrapolate(3+5/n)", "ok", call=_api("resprop.numeric.engine.width_extrapolation.extrapolate",
             np.array([64, 128, 256, 512, 1024]), 3.0 + 5.0 / np.array([64, 128, 256, 512, 1024]), np.full(5, 0.05)),
             check=lambda out: abs(out.value - 3.0) < 1e-10 and out.model == "a/n"),
        Case("api:extrapolate(two widths)", "error", ("widths",),
             call=_api("resprop.numeric.engine.width_extrapolation.extrapolate", [64, 128], [1.0, 2.0], [0.1, 0.1])),
        Case("api:extrapolate(se=0)", "error", ("se",),
             call=_api("resprop.numeric.engine.width_extrapolation.extrapolate", [64, 128, 256], [1.0, 2.0, 3.0],
                       [0.1, 0.0, 0.1])),
        Case("api:extrapolate(values=nan)", "error", ("values",),
             call=_api("resprop.numeric.engine.width_extrapolation.extrapolate", [64, 128, 256], [1.0, math.nan, 3.0],
                       [0.1] * 3)),
        Case("api:simulate_finite_width(method=qr)", "error", ("method",),
             call=_api("resprop.numeric.engine.fluctuation_mc.simulate_finite_width", X2, "erf", 2, 8, 1.2, 0.1,
                       samples=5, seed=0, method="qr")),
        Case("api:simulate_finite_width(dense,width=5000)", "error", ("width",),
             call=_api("resprop.numeric.engine.fluctuation_mc.simulate_finite_width", X2, "erf", 2, 5000, 1.2, 0.1,
                       samples=5, seed=0, method="dense")),
        Case("api:simulate_finite_width(chunk_size=0)", "error", ("chunk_size",),
             call=_api("resprop.numeric.engine.fluctuation_mc.simulate_finite_width", X2, "erf", 2, 8, 1.2, 0.1,
                       samples=5, seed=0, chunk_size=0)),
        Case("api:simulate_finite_width(branch_scale=1/(l-1))", "error", ("branch_scale",),
             call=_api("resprop.numeric.engine.fluctuation_mc.simulate_finite_width", X2, "erf", 2, 8, 1.2, 0.1,
                       branch_scale="1/(l-1)", samples=5, seed=0)),
        Case("api:simulate_finite_width(relu overflow)", "either", ("sigma_w2",),
             call=_api("resprop.numeric.engine.fluctuation_mc.simulate_finite_width", X2, "relu", 3, 8, 1e200, 0.1,
                       samples=5, seed=0), check=_finite),
        Case("api:fluctuation_campaign(quadruple out of range)", "error", ("quadruples",),
             call=_api("resprop.numeric.engine.fluctuation_mc.fluctuation_campaign", X2, "erf", 1, 1.2, 0.1,
                       widths=(8, 16, 32), samples=40, seed=0, quadruples=[[0, 1, 0, 2]])),
        *[Case(f"api:width_scan({label})", "error", (param,),
               call=_api("resprop.numeric.theories.pdlt.kernel_distribution.width_scan",
                         "sign(x)" if param == "activation" else "relu", 2, **kw))
          for label, param, kw in (("widths=[8]", "widths", dict(widths=[8])),
                                   ("widths=[0,8,16]", "widths", dict(widths=[0, 8, 16])),
                                   ("samples=3", "samples", dict(widths=[8, 16, 32], samples=3)),
                                   ("seed=-1", "seed", dict(widths=[8, 16, 32], samples=40, seed=-1)),
                                   ("histogram_width=5", "histogram_width",
                                    dict(widths=[8, 16, 32], samples=40, histogram_width=5)),
                                   ("activation=sign", "activation",
                                    dict(widths=[8, 16, 32], samples=40, histogram_width=None)))],
        # resprop.fluctuations (issue 27): inputs x and 2x are collinear; with a bias they are not
        Case("api:fluctuations(x,2x,no bias,erf)", "either", ("X",),
             call=_api("resprop.numeric.engine.fluctuations.fluctuations", X2, "erf", 2, 64, 1.2, 0.0), check=_finite),
        Case("api:fluctuations(duplicate inputs)", "ok",
             call=lambda: _api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [1.0, 0.5], [0.2, 1.0]],
                               "relu", 3, 64, 1.2, 0.1)(),
             check=lambda out: bool(np.isclose(out.variance[0, 1], out.variance[0, 0], rtol=1e-13)
                                    and np.isclose(out.mean_shift[0, 1], out.mean_shift[0, 0], rtol=1e-13))),
        Case("api:fluctuations(depth 0 = Wick)", "ok",
             call=_api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]], "tanh", 0, 64,
                       1.2, 0.1),
             check=lambda out: bool(np.allclose(out.variance, np.diag(out.nngp)[:, None] * np.diag(out.nngp)[None, :]
                                                + out.nngp ** 2, rtol=1e-13) and not out.mean_shift.any())),
        Case("api:fluctuations(activation=sign)", "error", ("activation",),
             call=_api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]], "sign(x)", 2, 64,
                       1.2, 0.1)),
        Case("api:fluctuations(activation=callable)", "error", ("activation",),
             call=_api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]], np.tanh, 2, 64,
                       1.2, 0.1)),
        Case("api:fluctuations(rtol=0)", "error", ("rtol",),
             call=_api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]], "erf", 2, 64,
                       1.2, 0.1, rtol=0.0)),
        Case("api:fluctuations(collapse='yes')", "error", ("collapse",),
             call=_api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]], "erf", 2, 64,
                       1.2, 0.1, collapse="yes")),
        Case("api:fluctuations(channels=1)", "error", ("channels",),
             call=_api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]], "erf", 2, 64,
                       1.2, 0.1, channels=1)),
        Case("api:fluctuations(relu overflow)", "error", ("sigma_w2",),
             call=_api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]], "relu", 3, 64,
                       1e200, 0.1)),
        *[Case(f"api:Fluctuations.covariance(pairs={label})", "error", ("pairs",),
               call=lambda bad=bad: _api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]],
                                         "erf", 1, 64, 1.2, 0.1)().covariance(bad))
          for label, bad in (("out-of-range", [[0, 1, 0, 2]]), ("negative", [[0, -1, 0, 1]]),
                             ("float", [[0.0, 1.0, 0.0, 1.0]]), ("shape", [[0, 1, 0]]), ("text", "abcd"),
                             ("none", None))],
        Case("api:trajectory(two_time='yes')", "error", ("two_time",),
             call=_api("resprop.numeric.engine.fluctuations.trajectory", [[1.0, 0.5], [0.5, 1.0]], [1.0], [1.0],
                       [0.5], [0.1], "erf", two_time="yes")),
        Case("api:trajectory(K0 5 x 5)", "error", ("K0",),
             call=_api("resprop.numeric.engine.fluctuations.trajectory", np.eye(5), [1.0], [1.0], [0.5], [0.1],
                       "erf")),
        Case("api:multi_input_fluctuations(route='fast')", "error", ("route",),
             call=_api("resprop.numeric.theories.fischer.multi_input.multi_input_fluctuations", [[1.0]], 2, 100, 0.5,
                       1.2, 0.1, route="fast")),
        Case("api:multi_input_fluctuations(route='engine', response='c13')", "error", ("route", "response"),
             call=_api("resprop.numeric.theories.fischer.multi_input.multi_input_fluctuations", [[1.0]], 2, 100, 0.5,
                       1.2, 0.1, response="c13", route="engine")),
        Case("api:Fluctuations.covariance(truncation='yes')", "error", ("truncation",),
             call=lambda: _api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]],
                               "erf", 1, 64, 1.2, 0.1)().covariance([[0, 1, 0, 1]], truncation="yes")),
        *[Case(f"api:Fluctuations.covariance(rtol={label})", "error", ("rtol",),
               call=lambda bad=bad: _api("resprop.numeric.engine.fluctuations.fluctuations", [[1.0, 0.5], [0.2, 1.0]],
                                         "erf", 1, 64, 1.2, 0.1)().covariance([[0, 1, 0, 1]], rtol=bad))
          for label, bad in (("0", 0.0), ("1", 1.0), ("negative", -1e-3), ("nan", float("nan")), ("text", "tight"))],
        Case("api:cos_theta_k(0,0,1)", "error", ("alpha", "lam"),
             call=_api("resprop.numeric.theories.lognormal.log_gaussian.cos_theta_k", 0.0, 0.0, 1)),
        Case("api:interlayer_total(width=0)", "error", ("width",),
             call=_api("resprop.numeric.theories.lognormal.log_gaussian.interlayer_total", 0, 10, 0.7, 0.7)),
        Case("api:ode_limit(t=nan)", "error", ("t_eval",), timeout=30,
             call=_api("resprop.numeric.theories.stable.stable_resnet.ode_limit", [[1.0, 0.5], [0.5, 1.0]], [float("nan")])),
        Case("api:ode_limit(t=-1)", "error", ("t_eval",), timeout=30,
             call=_api("resprop.numeric.theories.stable.stable_resnet.ode_limit", [[1.0, 0.5], [0.5, 1.0]], [-1.0])),
        Case("api:rho_star(bias-dominated)", "ok",
             call=_api("resprop.numeric.theories.fischer.field_theory.rho_star", [10], 0.05, 0.8, 0.2), check=_rho_star_none),
        Case("api:kernel_fluctuations(depth=2000)", "either", ("depth",), timeout=120,
             call=_api("resprop.numeric.theories.fischer.fluctuations.kernel_fluctuations", 0.05, 2000, 100, 0.1, 1.25, 0.05),
             check=lambda out: _finite(out.var_K)),
    ]
    # one substitution per parameter, for functions with a cheap valid call
    table = [
        ("resprop.numeric.theories.fischer.field_theory.response",
         dict(input_kernel=0.05, depth=10, rho=0.3, sigma_w2=1.25, sigma_b2=0.05),
         dict(input_kernel="pos", depth=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg")),
        ("resprop.numeric.theories.fischer.field_theory.nngp", dict(input_kernel=[[1.0, 0.5], [0.5, 1.0]], depth=5, rho=0.3, sigma_w2=1.25,
                                           sigma_b2=0.05),
         dict(depth=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg")),
        ("resprop.numeric.theories.fischer.field_theory.rho_star",
         dict(depths=[10], input_kernel=0.05, sigma_w2=1.25, sigma_b2=0.05),
         dict(input_kernel="pos", sigma_w2="pos", sigma_b2="nonneg")),
        ("resprop.numeric.theories.fischer.fluctuations.kernel_fluctuations", dict(input_kernel=0.05, depth=10, width=100, rho=0.3, sigma_w2=1.25,
                                                          sigma_b2=0.05),
         dict(input_kernel="pos", depth=("int", 1), width=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg")),
        ("resprop.numeric.theories.stable.stable_resnet.two_input_kernels", dict(depths=[10], scaling="uniform", angle=1.0, sigma_w2=2.0, sigma_b2=0.0),
         dict(angle="angle", sigma_w2="pos", sigma_b2="nonneg")),
        ("resprop.numeric.theories.lognormal.log_gaussian.theory",
         dict(width=100, depth=10, alpha=0.7, lam=0.7, balanced=True),
         dict(width=("closed-form int", 2), depth=("closed-form int", 1), lam="nonneg")),
        ("resprop.numeric.theories.lognormal.log_gaussian.interlayer_total",
         dict(width=100, depth=10, alpha=0.7, lam=0.7),
         dict(width=("closed-form int", 2), depth=("int", 1), lam="nonneg")),
        ("resprop.numeric.theories.pdlt.residual_mlp.nu", dict(gamma=0.5, activation="relu"), dict(gamma="unit_open")),
        ("resprop.numeric.theories.pdlt.residual_mlp.r_star", dict(gamma=0.5, activation="relu", n_out=1),
         dict(gamma="unit_open", n_out=("closed-form int", 1))),
        ("resprop.numeric.theories.pdlt.residual_mlp.vertex_trajectory", dict(activation="tanh", gamma=0.5, depth=3),
         dict(gamma="unit_open", depth=("int", 0))),
        ("resprop.numeric.theories.pdlt.multi_input_corrected.multi_input_vertex_corrected",
         dict(input_kernel=[[1.0, 0.5], [0.5, 1.0]], activation="relu", gamma=0.5, depth=2),
         dict(gamma="unit_open", depth=("int", 0))),
        ("resprop.numeric.theories.fischer.multi_input.multi_input_fluctuations",
         dict(input_kernel=[[1.0, 0.5], [0.5, 1.0]], depth=2, width=100, rho=0.5, sigma_w2=1.2, sigma_b2=0.2),
         dict(depth=("int", 1), width=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg")),
        ("resprop.numeric.theories.pdlt.corrected.corrected_ratio", dict(activation="tanh", gamma2=0.5, depth=3),
         dict(gamma2="unit_open", depth=("int", 0))),
        ("resprop.numeric.theories.stable.residual_ntk.nngp_ntk", dict(input_kernel=[[1.0, 0.5], [0.5, 1.0]], depth=5, rho=0.3, sigma_w2=1.25,
                                               sigma_b2=0.05),
         dict(depth=("int", 1), rho="nonneg", sigma_w2="pos", sigma_b2="nonneg")),
        ("resprop.numeric.engine.monte_carlo.simulate_log_gaussian",
         dict(width=8, depth=2, alpha=0.7, lam=0.7, samples=50, seed=0),
         dict(width=("int", 2), depth=("int", 1), samples=("int", 2), lam="nonneg")),
        ("resprop.numeric.engine.monte_carlo.simulate_residual_mlp",
         dict(width=8, depth=1, gamma=0.5, C_W=0.75, samples=50, seed=0),
         dict(width=("int", 1), depth=("int", 0), samples=("int", 2), gamma="real", C_W="pos")),
        ("resprop.numeric.engine.fluctuations.fluctuations",
         dict(X=[[1.0, 0.5], [0.2, 1.0]], activation="erf", depth=2, width=64, sigma_w2=1.2, sigma_b2=0.1,
              gamma=0.5, branch_scale=0.8),
         dict(depth=("int", 0), width=("int", 1), sigma_w2="pos", sigma_b2="nonneg", gamma="real",
              branch_scale="real")),
        ("resprop.numeric.engine.fluctuation_mc.simulate_finite_width",
         dict(X=[[1.0, 0.5], [0.2, 1.0]], activation="erf", depth=2, width=8, sigma_w2=1.2, sigma_b2=0.1, gamma=0.5,
              samples=20, seed=0),
         dict(depth=("int", 0), width=("int", 1), samples=("int", 1), sigma_w2="pos", sigma_b2="nonneg", gamma="real")),
        ("resprop.numeric.engine.fluctuation_mc.fluctuation_campaign",
         dict(X=[[1.0, 0.5], [0.2, 1.0]], activation="erf", depth=1, sigma_w2=1.2, sigma_b2=0.1, gamma=0.5,
              widths=(8, 16, 32), samples=40, seed=0),
         dict(depth=("int", 0), samples=("int", 40), sigma_w2="pos", sigma_b2="nonneg", gamma="real")),
    ]
    for path, base, params in table:
        short = path.split(".", 1)[1]
        for name, kind in params.items():
            variants: list[tuple[str, Any, str]] = [("non-numeric", "abc", "error"), ("empty", [], "error"),
                                                    ("none", None, "error")]
            if isinstance(kind, tuple):
                lo = kind[1]
                huge = "either" if kind[0] == "closed-form int" else "error"  # loops and arrays must refuse
                variants += [("below-min", lo - 1, "error"), ("fraction", 2.5, "error"), ("nan", float("nan"), "error"),
                             ("bool", True, "error"), ("numpy-int", np.int64(base[name]), "same"),
                             ("float-integral", float(base[name]), "either"),
                             ("huge", 10**30, huge)]
            else:
                v = base[name]
                variants += [("nan", math.nan, "error"), ("inf", math.inf, "error"), ("-inf", -math.inf, "error"),
                             ("negative", -1.0, "either" if kind == "real" else "error"),
                             ("float32", np.float32(v), "same32"), ("int-array", np.array([1]) if kind != "unit_open"
                                                                    else np.array([0]), "either")]
                if kind == "pos":
                    variants += [("zero", 0.0, "error"), ("ulp-out", -5e-324, "error"), ("huge", 1e300, "either")]
                elif kind == "nonneg":
                    variants += [("zero", 0.0, "either"), ("ulp-out", -5e-324, "error"), ("huge", 1e300, "either")]
                elif kind == "unit_open":
                    variants += [("ulp-out", 1.0, "error"), ("ulp-in", float(np.nextafter(1.0, 0.0)), "either"),
                                 ("huge", 1e300, "error")]
                elif kind == "angle":
                    variants += [("ulp-out", float(np.nextafter(math.pi, 4.0)), "error"), ("huge", 1e300, "error"),
                                 ("edge", math.pi, "either")]
            for label, value, expect in variants:
                kwargs = dict(base)
                kwargs[name] = value
                if expect in ("same", "same32"):
                    ref_kwargs = dict(base)
                    ref_kwargs[name] = (float(np.float32(base[name])) if expect == "same32" else base[name])
                    check = _same_as(_api(path, **ref_kwargs))
                    expect = "ok"
                else:
                    check = RESULT_CHECKS.get(path, _finite)
                cases.append(Case(f"api:{short}:{name}={label}", expect, (name,), call=_api(path, **kwargs),
                                  check=check, timeout=60))
    return cases


def _same_as(reference: Callable[[], Any]) -> Callable[[Any], bool]:
    """The result equals the float64 call with the same value: integer and float32 input change nothing."""
    def check(out) -> bool:
        ref = reference()
        return _equal(out, ref)
    return check


def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if hasattr(a, "__dataclass_fields__"):
        return _equal(vars(a), vars(b))
    if a is None or b is None or isinstance(a, str):
        return a == b
    try:
        x, y = np.asarray(a, float), np.asarray(b, float)
    except (TypeError, ValueError):
        return a == b or repr(a) == repr(b)  # e.g. a SeedSequence (equal entropy, different object)
    return x.shape == y.shape and bool(np.allclose(x, y, rtol=1e-12, atol=0, equal_nan=True))


def all_cases() -> list[Case]:
    from adversarial_kernel_api import kernel_api_cases, predict_api_cases, predict_cli_cases
    from adversarial_writers import writer_cases  # signals and concurrency on every writer (subprocesses)

    return (cli_numeric_cases() + path_cases() + sweep_spec_cases() + api_cases() + kernel_api_cases()
            + predict_cli_cases() + predict_api_cases()
            + writer_cases())


# ------------------------------------------------------------------------------------------------------ running
def _names(message: str, params: tuple[str, ...]) -> bool:
    norm = message.replace("-", "_").lower()
    return not params or any(p.replace("-", "_").lower() in norm for p in params)


def run_cli(case: Case, tmp: Path) -> tuple[str, str]:
    """Run a CLI case in-process; returns (outcome, detail)."""
    from resprop.numeric.cli import main

    out_name = case.setup(tmp) if case.setup else "out"
    if case.id.startswith("path:sweep") or case.id.startswith("sweep-spec"):
        if not (tmp / "tiny.toml").exists():
            (tmp / "tiny.toml").write_text(TINY_SWEEP)
    out_path = out_name if str(out_name).startswith("/") else str(tmp / out_name)
    argv = [a.replace("{out}", out_path).replace("{tmp}", str(tmp)) for a in case.argv]
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
    except BaseException as exc:  # noqa: BLE001 - the point is to see what escapes
        return "traceback", f"{type(exc).__name__}: {exc}"
    err = stderr.getvalue()
    if "Traceback (most recent call last)" in err:
        return "traceback", err.strip().splitlines()[-1]
    if case.after is not None and not case.after(tmp):
        return "silent wrong", "user files changed or debris left behind"
    if code == 0:
        if case.expect == "error":
            return "silent wrong", f"exit 0 for bad input: {stdout.getvalue()[:200]!r}"
        try:
            result = json.loads(stdout.getvalue()) if "--json" in argv else stdout.getvalue()
        except json.JSONDecodeError:
            return "silent wrong", f"unparseable output {stdout.getvalue()[:200]!r}"
        ok = case.check(result) if case.check else True
        return ("correct", "") if ok else ("silent wrong", f"check failed on {stdout.getvalue()[:300]!r}")
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("resprop: ")]
    if code == 2 and lines and _names(lines[-1], case.param) and case.expect in ("error", "either"):
        return "clean error", lines[-1]
    return "false error", f"exit {code}: {err.strip()[-300:]!r}"


def run_api(case: Case) -> tuple[str, str]:
    try:
        result = case.call()
    except ValueError as exc:
        if case.expect in ("error", "either") and _names(str(exc), case.param):
            return "clean error", f"{type(exc).__name__}: {exc}"
        return "false error", f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001
        return "traceback", f"{type(exc).__name__}: {exc}"
    if case.expect == "error":
        return "silent wrong", f"returned {_brief(result)} for bad input"
    try:
        ok = case.check(result) if case.check else True
    except Exception as exc:  # noqa: BLE001 - a result the check cannot read is a wrong result
        return "silent wrong", f"check raised {type(exc).__name__}: {exc}"
    return ("correct", "") if ok else ("silent wrong", f"returned {_brief(result)}")


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:197] + "..."


def classify(case: Case) -> tuple[str, str]:
    """Run one case (in this process) and name its outcome."""
    if case.call is not None:
        return run_api(case)
    tmp = Path(tempfile.mkdtemp(prefix="resprop-adv-"))
    try:
        return run_cli(case, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
