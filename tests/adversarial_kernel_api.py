"""Adversarial cases of the Python API ``resprop.kernel`` (issue 23, item 7): every parameter meets NaN, inf,
booleans, strings, None, wrong shapes and dtypes, one-past-the-limit values and huge values.

A valid input must give a result equal to an independent reference: the textbook dual kernels iterated by a plain
NumPy loop here (erf: Williams 1997; ReLU: Cho & Saul 2009; sign: (2/pi) asin(rho)), not the engine's generated
recursions.  Imported by tests/adversarial.py's ``all_cases``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

SW, SB, DEPTH = 1.25, 0.05, 3


def _duals(act: str, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.diagonal(K)
    if act == "erf":
        s = np.sqrt(np.outer(1 + 2 * d, 1 + 2 * d))
        return 2 / np.pi * np.arcsin(2 * K / s), 4 / np.pi / np.sqrt(s * s - 4 * K * K)
    r = np.sqrt(np.outer(d, d))
    c = np.clip(K / r, -1.0, 1.0)
    th = np.arccos(c)
    if act == "relu":
        return r * (np.sin(th) + (np.pi - th) * c) / (2 * np.pi), (np.pi - th) / (2 * np.pi)
    if act == "sign":
        return 2 / np.pi * np.arcsin(c), np.full_like(K, np.nan)
    raise KeyError(act)


def reference(X, act: str = "erf", depth: int = DEPTH, sw: float = SW, sb: float = SB, gamma: float = 1.0,
              lam=1.0, ntk: bool = False):
    X = np.asarray(X, dtype=float)
    K = sw * X @ X.T / X.shape[1] + sb
    T = K.copy()
    lam = np.broadcast_to(np.asarray(lam, dtype=float), (depth,))
    for la in lam:
        ff, dd = _duals(act, K)
        K, T = gamma**2 * K + la**2 * (sw * ff + sb), gamma**2 * T + la**2 * (sw * ff + sb + sw * dd * T)
    return (K, T) if ntk else K


def _matches(ref) -> Callable[[Any], bool]:
    def check(out) -> bool:
        got = out if isinstance(out, tuple) else (out,)
        want = ref if isinstance(ref, tuple) else (ref,)
        return len(got) == len(want) and all(
            isinstance(g, np.ndarray) and g.shape == w.shape and g.dtype == np.float64 and np.all(np.isfinite(g))
            and np.allclose(g, w, rtol=1e-11, atol=0) for g, w in zip(got, want))
    return check


def _call(*args, **kwargs) -> Callable[[], Any]:
    def call():
        import resprop

        return resprop.kernel(*args, **kwargs)
    return call


def kernel_api_cases():
    import adversarial

    Case = adversarial.Case
    rng = np.random.default_rng(7)
    X = rng.standard_normal((5, 3)) * np.array([0.5, 1.0, 1.5, 2.0, 3.0])[:, None]  # unequal norms
    base = dict(X=X, activation="erf", depth=DEPTH, sigma_w2=SW, sigma_b2=SB)
    cases: list = []

    def add(label: str, expect: str, param: tuple[str, ...], check=None, **change):
        kw = {**base, **change}
        args = (kw.pop("X"), kw.pop("activation"), kw.pop("depth"), kw.pop("sigma_w2"), kw.pop("sigma_b2"))
        cases.append(Case(f"api:kernel:{label}", expect, param, call=_call(*args, **kw), check=check))

    # X
    for label, value in [("X=nan", np.where(np.eye(5, 3) > 0, np.nan, X)), ("X=inf", np.where(np.eye(5, 3) > 0, np.inf, X)),
                         ("X=empty-rows", np.empty((0, 3))), ("X=empty-cols", np.empty((5, 0))),
                         ("X=1-D", X[:, 0]), ("X=3-D", X[None]), ("X=ragged", [[1.0, 2.0], [3.0]]),
                         ("X=strings", np.array([["a", "b"], ["c", "d"]])), ("X=object", np.array([[1.0, None]], dtype=object)),
                         ("X=complex", X + 1j), ("X=None", None), ("X=zero-row,sigma_b2=0", np.vstack([X, np.zeros(3)]))]:
        extra = {"sigma_b2": 0.0} if "sigma_b2=0" in label else {}
        add(label, "error", ("X", "inputs"), X=value, **extra)
    add("X=int64", "ok", (), check=_matches(reference(np.arange(15).reshape(5, 3) - 7)), X=np.arange(15).reshape(5, 3) - 7)
    add("X=float32", "ok", (), check=_matches(reference(X.astype(np.float32).astype(float))), X=X.astype(np.float32))
    add("X=list", "ok", (), check=_matches(reference(X)), X=X.tolist())
    add("X=huge", "either", ("X", "sigma_w2"), check=lambda out: bool(np.all(np.isfinite(out))), X=X * 1e160)
    # activation
    for label, value in [("activation=None", None), ("activation=123", 123), ("activation=empty", ""),
                         ("activation=syntax", "nosuch("), ("activation=dunder", "__import__('os').getcwd()"),
                         ("activation=unknown-name", "swish2"), ("activation=two-symbols", "x*y"),
                         ("activation=I*x", "I*x"), ("activation=x+I", "x + I"), ("activation=zoo*x", "zoo*x"),
                         ("activation=exp(x**2)", "exp(x**2)"), ("activation=constant", "2")]:
        add(label, "error", ("activation",), activation=value)
    add("activation=sign,ntk", "error", ("activation",), activation="sign(x)", ntk=True)
    add("activation=sign", "ok", (), check=_matches(reference(X, "sign")), activation="sign(x)")
    add("activation=Max(x,0),ntk", "ok", (), check=_matches(reference(X, "relu", ntk=True)), activation="Max(x, 0)",
        ntk=True)
    add("activation=relu,ntk", "ok", (), check=_matches(reference(X, "relu", ntk=True)), activation="relu", ntk=True)
    # depth
    for label, value in [("depth=-1", -1), ("depth=1.5", 1.5), ("depth=True", True), ("depth=str", "3"),
                         ("depth=None", None), ("depth=nan", math.nan), ("depth=huge", 10**7)]:
        add(label, "error", ("depth",), depth=value)
    add("depth=int64", "ok", (), check=_matches(reference(X)), depth=np.int64(DEPTH))
    add("depth=0", "ok", (), check=_matches(reference(X, depth=0)), depth=0)
    # variances
    for name in ("sigma_w2", "sigma_b2"):
        for label, value in [("nan", math.nan), ("inf", math.inf), ("negative", -1.0), ("True", True),
                             ("str", "1"), ("None", None), ("array", np.array([1.0, 2.0]))]:
            add(f"{name}={label}", "error", (name,), **{name: value})
    add("sigma_w2=0", "error", ("sigma_w2",), sigma_w2=0.0)
    add("sigma_w2=huge", "either", ("sigma_w2", "X"), check=lambda out: bool(np.all(np.isfinite(out))), sigma_w2=1e300)
    add("sigma_b2=0", "ok", (), check=_matches(reference(X, sb=0.0)), sigma_b2=0.0)
    # gamma, branch_scale, flags
    for label, value in [("nan", math.nan), ("inf", math.inf), ("True", True), ("str", "1")]:
        add(f"gamma={label}", "error", ("gamma",), gamma=value)
    add("gamma=0.5", "ok", (), check=_matches(reference(X, gamma=0.5)), gamma=0.5)
    for label, value in [("nan", math.nan), ("1/0", "1/0"), ("dunder", "__class__"), ("unknown-symbol", "x"),
                         ("complex", "sqrt(-1)"), ("wrong-length", np.ones(DEPTH + 1)), ("True", True),
                         ("syntax", "1/(")]:
        add(f"branch_scale={label}", "error", ("branch_scale",), branch_scale=value)
    add("branch_scale=1/sqrt(L)", "ok", (), check=_matches(reference(X, lam=1 / math.sqrt(DEPTH))),
        branch_scale="1/sqrt(L)")
    add("branch_scale=array", "ok", (), check=_matches(reference(X, lam=np.array([0.1, 0.2, 0.3]))),
        branch_scale=np.array([0.1, 0.2, 0.3]))
    for flag in ("ntk", "readout"):
        for label, value in [("1", 1), ("str", "yes"), ("None", None), ("nan", math.nan)]:
            add(f"{flag}={label}", "error", (flag,), **{flag: value})
    add("ntk=True", "ok", (), check=_matches(reference(X, ntk=True)), ntk=True)
    # backend (issue 25): the compiled and the NumPy kernels both match the independent reference
    for label, value in [("bogus", "fast"), ("None", None), ("int", 1), ("upper", "NUMPY")]:
        add(f"backend={label}", "error", ("backend",), backend=value)
    add("backend=compiled,sin", "error", ("backend",), activation="sin(x)", backend="compiled")
    for act in ("erf", "relu"):
        for be in ("compiled", "numpy"):
            add(f"backend={be},{act},ntk", "ok", (), check=_matches(reference(X, act, ntk=True)), activation=act,
                backend=be, ntk=True)
    for label, value in [("1", 1), ("str", "no"), ("None", None)]:
        add(f"collapse={label}", "error", ("collapse",), collapse=value)
    Xs = X / np.linalg.norm(X, axis=1, keepdims=True)  # one norm: the collapse applies (P >= COLLAPSE_MIN_P only)
    add("collapse=False,erf,ntk", "ok", (), check=_matches(reference(Xs, ntk=True)), X=Xs, collapse=False, ntk=True)
    add("backend=auto,sign", "ok", (), check=_matches(reference(X, "sign")), activation="sign(x)",
        backend="auto")
    # kernels written to disk (issue 24): out, dtype, tile, workers, scheduler
    for label, change, param in [
            ("out=.h5", {"out": "K.h5"}, ("out",)), ("out=npy,ntk", {"out": "K.npy", "ntk": True}, ("out",)),
            ("out=123", {"out": 123}, ("out",)),
            ("dtype=float16", {"dtype": "float16"}, ("dtype",)), ("dtype=None", {"dtype": None}, ("dtype",)),
            ("tile=0", {"tile": 0}, ("tile",)), ("tile=-1", {"tile": -1}, ("tile",)),
            ("tile=1.5", {"tile": 1.5}, ("tile",)), ("tile=True", {"tile": True}, ("tile",)),
            ("tile=str", {"tile": "64"}, ("tile",)), ("workers=0", {"workers": 0}, ("workers",)),
            ("workers=1.5", {"workers": 1.5}, ("workers",)), ("workers=str", {"workers": "2"}, ("workers",)),
            ("workers+scheduler", {"workers": 2, "scheduler": "tcp://127.0.0.1:1"}, ("workers", "scheduler")),
            ("scheduler=unreachable", {"scheduler": "tcp://127.0.0.1:1"}, ("scheduler",))]:
        cases.append(Case(f"api:kernel:{label}", "error", param, call=_disk_call(X, **change), timeout=60))
    cases.append(Case("api:kernel:workers-without-out", "error", ("workers",),
                      call=_call(X, "erf", DEPTH, SW, SB, workers=2)))
    cases.append(Case("api:kernel:out=zarr,tile=2", "ok", (), call=_disk_call(X, ntk=True, tile=2),
                      check=_store_matches(reference(X, ntk=True))))
    cases.append(Case("api:kernel:out=npy,float32", "ok", (), call=_disk_call(X, out="K.npy", dtype="float32"),
                      check=_store_matches(reference(X), rtol=1e-6)))
    return cases


def _disk_call(X, out="K.zarr", **kwargs) -> Callable[[], Any]:
    """resprop.kernel(X, erf, ...) into ``out`` inside a fresh temporary directory (a non-str ``out`` as is)."""
    def call():
        import tempfile
        from pathlib import Path

        import resprop

        target = Path(tempfile.mkdtemp(prefix="resprop-adv-")) / out if isinstance(out, str) else out
        return resprop.kernel(X, "erf", DEPTH, SW, SB, out=target, **kwargs)
    return call


def _store_matches(ref, rtol: float = 1e-11) -> Callable[[Any], bool]:
    def check(path) -> bool:
        from pathlib import Path

        want = ref if isinstance(ref, tuple) else (ref,)
        path = Path(path)
        if path.suffix == ".npy":
            got = (np.load(path),)
        else:
            import zarr

            group = zarr.open_group(str(path), mode="r")
            got = tuple(group[n][:] for n in ("nngp", "ntk") if n in group)
        return len(got) == len(want) and all(g.shape == w.shape and np.allclose(g, w, rtol=rtol, atol=0)
                                             for g, w in zip(got, want))
    return check


def _predict_files(tmp):
    """K.npz (nngp, ntk) of 30 digits-like inputs and Y.npy (30, 3); returns the output name."""
    import resprop

    rng = np.random.default_rng(11)
    X = rng.standard_normal((30, 4)) * np.linspace(0.5, 2.0, 30)[:, None]
    K, T = resprop.kernel(X, "erf", 2, 1.25, 0.05, ntk=True)
    np.savez(tmp / "K.npz", nngp=K, ntk=T)
    np.savez(tmp / "K_nngp_only.npz", nngp=K)
    np.save(tmp / "Y.npy", np.sin(X[:, :3]))
    np.save(tmp / "Y_short.npy", np.ones(7))
    np.save(tmp / "Y_obj.npy", np.array([None] * 30, dtype=object), allow_pickle=True)
    np.save(tmp / "Y_str.npy", np.array(["a"] * 30))
    return "P.npz"


def _predict_reference(out) -> bool:
    """The JSON summary of an accepted run: the GP with s^2 = 1e-3 on the 20 training rows, recomputed by a direct
    solve here."""
    import resprop

    rng = np.random.default_rng(11)
    X = rng.standard_normal((30, 4)) * np.linspace(0.5, 2.0, 30)[:, None]
    K = reference(X, "erf", depth=2)
    Y = np.sin(X[:, :3])
    mean = K[20:, :20] @ np.linalg.solve(K[:20, :20] + 1e-3 * np.eye(20), Y[:20])
    del resprop
    return isinstance(out, dict) and out.get("regulariser") == 1e-3 and math.isclose(
        out["test_mse"], float(np.mean((mean - Y[20:]) ** 2)), rel_tol=1e-8)


def predict_cli_cases():
    import adversarial

    Case = adversarial.Case
    base = {"--kernel": "{tmp}/K.npz", "--train": "20", "--targets": "{tmp}/Y.npy", "--regulariser": "1e-3",
            "--out": "{out}"}

    def argv(extra=(), **change):
        values = {**base, **change}
        return ("predict", *[a for kv in values.items() for a in kv], "--json", *extra)

    cases = [Case("cli:predict:ok", "ok", (), argv=argv(), setup=_predict_files, check=_predict_reference)]
    for opt, bad in [("--train", ["nan", "-1", "0", "30", "31", "abc", ""]),
                     ("--regulariser", ["nan", "-1", "inf", "abc", "-5e-324"]),
                     ("--learning-rate", ["nan", "0", "-1", "inf"]),
                     ("--validation-fraction", ["nan", "0", "1", "-0.1", "2"]),
                     ("--seed", ["-1", "abc"]),
                     ("--kernel", ["{tmp}/missing.npz", "{tmp}", "{tmp}/Y.npy", "{tmp}/Y_str.npy"]),
                     ("--targets", ["{tmp}/missing.npy", "{tmp}/Y_short.npy", "{tmp}/Y_obj.npy", "{tmp}/Y_str.npy",
                                    "{tmp}/K.npz"])]:
        for i, text in enumerate(bad):
            cases.append(Case(f"cli:predict:{opt.lstrip('-')}={i}", "error", (opt.lstrip("-"),),
                              argv=argv(**{opt: text}), setup=_predict_files))
    for i, text in enumerate(["-1", "nan", "abc"]):
        cases.append(Case(f"cli:predict:time={i}", "error", ("time",), argv=argv(("--ntk", "--time", text)),
                          setup=_predict_files))
    cases.append(Case("cli:predict:ntk-missing", "error", ("kernel",),
                      argv=argv(("--ntk",), **{"--kernel": "{tmp}/K_nngp_only.npz"}), setup=_predict_files))
    cases.append(Case("cli:predict:no-regulariser", "ok", (), argv=argv(**{"--regulariser": "1e-3"}),
                      setup=_predict_files, check=_predict_reference))
    return cases


def predict_api_cases():
    import adversarial

    Case = adversarial.Case
    K = reference(np.random.default_rng(12).standard_normal((12, 3)), "erf", depth=2)
    y = np.arange(12.0)

    def call(**change):
        def run():
            import resprop

            kw = dict(k_train=K[:8, :8], y_train=y[:8], k_test=K[8:, :8], regulariser=1e-3)
            kw.update(change)
            return resprop.predict(kw.pop("k_train"), kw.pop("y_train"), kw.pop("k_test"), **kw)
        return run

    mean = K[8:, :8] @ np.linalg.solve(K[:8, :8] + 1e-3 * np.eye(8), y[:8])
    cases = [Case("api:predict:ok", "ok", (), call=call(),
                  check=lambda r: bool(np.allclose(r.mean, mean, rtol=1e-9, atol=0)))]
    for name, values in [("k_train", [None, np.ones((8, 7)), np.full((8, 8), np.nan), "K", np.ones((8, 8), bool)]),
                         ("y_train", [None, np.ones(7), np.array(["a"] * 8), np.full(8, np.inf)]),
                         ("k_test", [None, np.ones((4, 7)), np.full((4, 8), np.nan)]),
                         ("regulariser", [-1.0, math.nan, math.inf, True, "1e-3"]),
                         ("learning_rate", [0.0, -1.0, math.nan, True]),
                         ("validation_fraction", [0.0, 1.0, math.nan]),
                         ("seed", [-1, 1.5, True, 2**64]),
                         ("block_rows", [0, -3, 1.5]),
                         ("k_test_diag", [np.ones(3), np.full(4, np.nan)])]:
        for i, v in enumerate(values):
            cases.append(Case(f"api:predict:{name}={i}", "error", (name,), call=call(**{name: v})))
    cases.append(Case("api:predict:t-without-ntk", "error", ("t",), call=call(t=3.0)))
    cases.append(Case("api:predict:ntk-t-negative", "error", ("t",),
                      call=call(ntk_train=K[:8, :8], ntk_test=K[8:, :8], t=-1.0)))
    return cases
