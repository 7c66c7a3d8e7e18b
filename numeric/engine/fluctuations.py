"""``resprop.fluctuations``: the kernel of a finite-width residual network to O(1/width), for P inputs.

For the network of ``resprop.kernel`` (the same read-in K^(0) = sigma_w2 X X^T / d_in + sigma_b2, the same residual
update h^l = gamma h^(l-1) + lambda_l (W^l phi(h^(l-1)) + b^l), the same depth convention) with every hidden layer
of width n, the empirical kernel K^_ab = (1/n) sum_i h_i(x_a) h_i(x_b) of the last layer satisfies, at fixed depth,

    E[K^] = nngp + mean_shift / n + O(n^-2),     n Cov[K^_ab, K^_cd] = V_(ab)(cd) + O(1/n),

with ``variance[a, b] = V_(ab)(ab)`` and ``covariance(pairs)`` the general entries.  The recursion
(`fluctuation_recursion`, derived in docs/design/fluctuations-engine.md) keeps the same-neuron cross-layer terms that
PDLT App. B's closure (B.23-B.26) drops; ``closure_variance`` / ``closure_mean_shift`` are that closure's values,
for comparison.  ``law_variance`` is n Var of the law kernel (Fischer et al.'s auxiliary field K = sum_k C^(k),
``simulate_kernels``' ``K``), which is the C part of V.

A pair (a, b) depends only on the network restricted to x_a, x_b, so ``variance`` and ``mean_shift`` cost one
two-input recursion per pair (O(P^2 depth) time, O(P^2) memory, independent of depth).
"""
from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.blas_threads import one_blas_thread
from resprop.numeric.engine.fluctuation_recursion import Rule, propagate_subproblems
from resprop.numeric.engine.results import ResultRecord

__all__ = ["fluctuations", "Fluctuations", "trajectory", "Trajectory", "DEFAULT_CHANNELS", "MAX_DEPTH",
           "MAX_CHANNELS", "LADDER", "MANY_INPUT_LADDER", "AUTO_RTOL"]

#: Hermite channels kept per subproblem size p (1 input, a pair, 3 or 4 inputs of ``covariance``)
DEFAULT_CHANNELS = {1: 48, 2: 24, 3: 12, 4: 8}
MAX_CHANNELS = {1: 160, 2: 64, 3: 40, 4: 16}
#: the channel counts tried, in order, until the truncation estimate is below rtol
LADDER = (16, 24, 32, 48, 64, 96, 128, 160)
#: the same for the 3- and 4-input recursions of ``covariance`` and ``trajectory`` (their basis grows as
#: channels^p / p!: one recursion at depth 6 took ~0.6 s at 12-20 channels, 1.8 s at 32 and 4.8 s at 40 for
#: p = 3; 2.5 s at 12 and 7 s at 16 for p = 4, on the 2-core dev machine)
MANY_INPUT_LADDER = {3: (12, 16, 24, 32, 40), 4: (8, 12, 16)}
#: theory modules with an independent quadrature route (fischer.multi_input, pdlt.multi_input_corrected) keep, with
#: route="auto", the engine's result at 3-4 inputs when its relative truncation estimate is at most this, and
#: otherwise take the quadrature route (~1e-5): either way within ~1e-4 (4 strongly correlated inputs end their
#: 16-channel ladder at ~5e-4, 3 inputs at 40 channels at ~1e-5 .. 1e-4 up to depth ~10)
AUTO_RTOL = 1e-4
#: a fixed-depth O(1/width) theory; beyond this depth the cross-layer terms would need the next order anyway
MAX_DEPTH = 10_000
MAX_WIDTH = 10**9
#: pairs per batch of the two-input recursion (an internal setting: results do not depend on it)
BATCH = 48
#: threads that run batches of the two-input recursion at once (None: one per core); an internal setting, the
#: results do not depend on it (each batch is computed alone, with BLAS on one thread)
WORKERS: int | None = None
#: the angles (quantiles of the pairs') at which the interpolated routes probe the channel ladder once: every
#: evaluation of an interpolant then uses that one count (values truncated at different counts differ by up to
#: rtol, a jump that no interpolant certified to 1e-2 rtol can follow)
PROBE_QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class _Network:
    K0: np.ndarray
    gammas: np.ndarray
    g: np.ndarray
    w: np.ndarray
    s: np.ndarray
    phi: Any
    rule: Rule
    #: the pair projections by certified Mehler sums (smooth activations, `fluctuation_mehler`); None: the 2-D rule
    expansion: Any = None


@dataclass(frozen=True)
class Fluctuations(ResultRecord):
    """The O(1/width) kernel of :func:`fluctuations` (P x P arrays; all but ``nngp`` are width-independent
    coefficients).

    ``nngp``: K^(L) (the numbers of ``resprop.kernel``); ``mean_shift``: M with E[K^] = nngp + M / width;
    ``variance``: width Var[K^_ab] at leading order; ``law_variance``: width Var of the law kernel;
    ``variance_truncation``, ``mean_shift_truncation``: |value - the same recursion with half the Hermite
    channels|, the estimate of the channel truncation (an upper bound in every case measured; the channels are
    raised until it is below ``rtol`` of the value, up to the cap); ``channels``: (P, P) channels used per element
    (for interpolated pairs, the most any node of their interpolant used);
    ``closure_variance``, ``closure_mean_shift``: PDLT
    App. B's closure (B.25 / B.26) for the same network."""

    nngp: np.ndarray
    mean_shift: np.ndarray
    variance: np.ndarray
    law_variance: np.ndarray
    variance_truncation: np.ndarray
    mean_shift_truncation: np.ndarray
    closure_variance: np.ndarray
    closure_mean_shift: np.ndarray
    depth: int
    width: int
    activation: str
    sigma_w2: float
    sigma_b2: float
    gamma: float
    branch_scale: np.ndarray
    channels: np.ndarray
    rtol: float
    _network: _Network = field(repr=False, compare=False)

    def fields(self) -> tuple[str, ...]:
        return tuple(f for f in super().fields() if not f.startswith("_"))

    def to_dict(self) -> dict:
        out = super().to_dict()
        out.pop("_network", None)
        return out

    def expected_kernel(self) -> np.ndarray:
        """E[K^] to O(1/width): nngp + mean_shift / width."""
        return self.nngp + self.mean_shift / self.width

    def standard_deviation(self) -> np.ndarray:
        """The standard deviation of K^_ab at this width, sqrt(variance / width)."""
        return np.sqrt(np.maximum(self.variance, 0.0) / self.width)

    def covariance(self, pairs, channels: int | None = None, truncation: bool = False, rtol=None):
        """width Cov[K^_ab, K^_cd] at leading order for index quadruples ``pairs`` (M, 4) of ints (a, b, c, d) in
        [0, P): one recursion on the 1-4 distinct inputs of each quadruple (O(depth) per quadruple).  One or two
        distinct inputs use the channels of their ``variance`` element, so covariance([(a, b, a, b)]) is
        variance[a, b] to round-off (or, for pairs filled by the angle interpolation (``collapse``), within its
        certification, 1e-2 rtol).  Three and four distinct inputs use rotated pair rules
        (`fluctuation_quadrature`) and raise the channels along MANY_INPUT_LADDER (3 inputs: 12 .. 40, 4 inputs:
        8 .. 16) until every truncation estimate of the group is below ``rtol`` (default: the result's) of its
        value, or the ladder ends; ``channels`` fixes the count instead.  The truncation converges slowly there
        (erf, correlated inputs of variance ~1.4, depth 6: ~1e-3 of the value at 12 channels, 3e-6 at 40 for three
        inputs; 4e-4 at 16 for four), so at the default rtol the ladder usually ends at its cap: pass a larger
        ``rtol`` where that accuracy is not needed (a Monte Carlo check, say).

        ``truncation=True`` returns (values, estimates): per quadruple |V(N) - V(N/2)|, the same channel-truncation
        estimate as ``variance_truncation`` (an upper bound of |V(N) - V(cap)| in every case measured)."""
        P = self.nngp.shape[0]
        q = _quadruples(pairs, P)
        truncation = V.flag("truncation", truncation)
        tol = self.rtol if rtol is None else V.scalar("rtol", rtol, lambda name, v: V.interval(
            name, v, 0.0, 1.0, False, False, "(0, 1)"))
        out = np.empty(len(q))
        est = np.empty(len(q))
        groups: dict[tuple[int, ...], list[int]] = {}
        for k, row in enumerate(q):
            groups.setdefault(tuple(sorted(set(row.tolist()))), []).append(k)
        net = self._network
        for inputs, rows in groups.items():
            p = len(inputs)
            # one or two inputs: the channels their element of ``variance`` used, so the two agree to round-off
            if channels is not None:
                ladder = [_channels(channels, p)]
            elif p <= 2:
                ladder = [int(self.channels[inputs[0], inputs[-1]])]
            else:
                ladder = list(MANY_INPUT_LADDER[p])
            K0 = net.K0[np.ix_(inputs, inputs)][None]
            where = {a: i for i, a in enumerate(inputs)}
            local = [tuple(where[int(t)] for t in q[k]) for k in rows]

            def attempt(n_ch: int, K0=K0, local=local) -> tuple[tuple[np.ndarray, np.ndarray], float]:
                res = _run(net, K0, n_ch, mean_shift=False)
                full = np.array([res.V["full"][(0,) + idx] for idx in local])
                low = np.array([res.V["low"][(0,) + idx] for idx in local])
                # the largest relative estimate of the group (an estimate on a zero value: 0 when it is 0, else inf)
                gap, size = np.abs(full - low), np.abs(full)
                worst = float(np.max(np.where(size > 0, gap / np.where(size > 0, size, 1.0),
                                              np.where(gap > 0, np.inf, 0.0))))
                return (full, low), worst

            full, low = _climb(ladder, attempt, tol, jump=True)
            out[rows] = full
            est[rows] = np.abs(full - low)
        return (out, est) if truncation else out


def _quadruples(pairs, P: int) -> np.ndarray:
    arr = np.asarray(pairs)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise V.ParameterError("pairs", f"must be an (M, 4) array of integer indices in [0, {P}), got dtype "
                                        f"{arr.dtype}")
    if arr.ndim == 1 and arr.size == 4:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise V.ParameterError("pairs", f"must have shape (M, 4) (rows a, b, c, d), got {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= P):
        raise V.ParameterError("pairs", f"indices must lie in [0, {P}) (P = {P} inputs)")
    return arr.astype(np.int64)


def _channels(channels, p: int) -> int:
    if channels is None:
        return DEFAULT_CHANNELS[p]
    return V.integer("channels", channels, minimum=2, maximum=MAX_CHANNELS[p])


@cache
def _activation(text: str):
    """The NumPy phi of the simulator (`fluctuation_mc.activation_function`) for a checked activation; refuses a
    jump (no finite G') and a lattice of breakpoints (the rules split at finitely many)."""
    from resprop.numeric.engine.activation_check import check_activation

    checked = check_activation(text)
    if checked.jumps:
        raise V.ParameterError("activation", f"{checked.expr} jumps at x = {checked.jumps[0]:g}: phi' contains a "
                                             "Dirac delta, so G' (the response of the kernel) and the O(1/width) "
                                             "recursion built on it do not exist; use a continuous activation")
    if checked.piecewise and checked.lattices:
        raise V.ParameterError("activation", f"{checked.expr} has a lattice of breakpoints (periodic pieces); the "
                                             "fluctuation engine splits its rules at finitely many breakpoints "
                                             "(relu, Max(-1, Min(1, x)), Min(Max(x, 0), 6), ...)")
    from resprop.numeric.engine.fluctuation_mc import activation_function

    return activation_function(text)


@cache
def _rule(text: str) -> Rule:
    """The quadrature orders for a checked activation, split at its breakpoints when it is piecewise with a
    breakpoint away from 0 (hardtanh, ReLU6, hard-swish); the default rule otherwise."""
    from resprop.numeric.engine.activation_check import check_activation

    checked = check_activation(text)
    points = tuple(sorted(float(t) for t in checked.breakpoints)) if checked.piecewise else ()
    return Rule(breakpoints=points) if points and points != (0.0,) else Rule()


#: smooth activations take their pair projections from certified Mehler sums over per-input Hermite tables
#: (`fluctuation_mehler`) instead of the 2-D rule; the projections agree to ~1e-13 and the results to <= 1e-9
#: (tests/test_fluctuation_mehler.py)
PAIR_EXPANSION = True


def _expansion(text: str):
    """A fresh `fluctuation_mehler.PairExpansion` (its tables are cached per variance) for a smooth activation that
    the expectation engine's Hermite tables accept (`dual_tables.activation`); None for a piecewise one, or with
    PAIR_EXPANSION off."""
    if not PAIR_EXPANSION:
        return None
    from resprop.numeric.engine import dual_tables
    from resprop.numeric.engine.activation_check import check_activation
    from resprop.numeric.engine.fluctuation_mehler import PairExpansion

    checked = check_activation(text)
    if checked.piecewise:
        return None
    try:
        return PairExpansion(dual_tables.activation(checked.expr))
    except V.ParameterError:  # e.g. too oscillatory for the tables: the 2-D rule
        return None


def _run(net: _Network, K0: np.ndarray, channels: int, mean_shift: bool, record=None, two_time: bool = False):
    """propagate_subproblems with the engine's errors: a singular pair (LinAlgError) and values beyond float64 are
    ParameterErrors naming the inputs."""
    try:
        with np.errstate(all="ignore"):
            res = propagate_subproblems(K0, net.gammas, net.g, net.w, net.s, net.phi, channels, net.rule,
                                        mean_shift=mean_shift, record=record, two_time=two_time,
                                        expansion=net.expansion)
    except np.linalg.LinAlgError:
        raise V.ParameterError("X", "two inputs have correlation +-1 at some layer (collinear or nearly so) "
                                    "other than exact duplicates; the O(1/width) expansion of such a pair is not "
                                    "uniform (docs/fluctuations.md)") from None
    for name, d in (("V", res.V), ("M", res.M)):
        if not all(np.all(np.isfinite(v)) for v in d.values()):
            raise V.ParameterError("X, sigma_w2, sigma_b2, gamma, branch_scale, depth",
                                   f"the O(1/width) coefficients ({name}) leave the float64 range; use values of "
                                   "moderate size")
    return res


def fluctuations(X, activation, depth: int, width: int, sigma_w2, sigma_b2, gamma=1.0, branch_scale=1.0, *,
                 readout: bool = False, channels: int | None = None, rtol: float = 1e-6,
                 collapse: bool = True, progress: bool | None = None) -> Fluctuations:
    """The kernel of a width-``width`` residual network to O(1/width) (module docstring): mean shift, variance
    and (``.covariance``) covariance of the empirical kernel of the last layer, for inputs X (P, d_in).

    Arguments as :func:`resprop.kernel` (``activation``: a name or a SymPy expression in x; piecewise ones with
    finitely many breakpoints; jumps and lattices refused), plus ``width`` (>= 1; enters ``expected_kernel`` and
    ``standard_deviation`` only) and ``channels`` (Hermite channels of the pair recursion; by default raised along
    LADDER until the truncation estimate is below ``rtol`` of each value: per input up to 160 channels, per pair
    up to 64, the larger of its two inputs' counts; a given count is used as is, twice it for the diagonal).
    ``readout=True`` adds the dense readout layer of ``resprop.kernel(readout=True)``.  ``collapse``: where at
    least COLLAPSE_MIN_PAIRS pairs share their two inputs' norms (normalised data), their elements come from
    certified piecewise Chebyshev interpolants in the angle (`fluctuation_collapse`, to 1e-2 rtol of each field's
    scale), so P in the thousands costs O(P^2) plus a few hundred pair recursions; False runs every pair.
    Derivation: docs/design/fluctuations-engine.md (eqs. 3.1-3.9); PDLT App. B (B.23-B.26) and Fischer et al.
    (C18-C20) are its closure and its law-kernel part.  Raises ParameterError (a ValueError naming the parameter)
    for bad input.
    """
    from resprop.numeric.engine.inputs import check_inputs
    from resprop.numeric.engine.kernel import _sequences, branch_scales, input_kernel, kernel

    depth = V.integer("depth", depth, minimum=0, maximum=MAX_DEPTH)
    width = V.integer("width", width, minimum=1, maximum=MAX_WIDTH)
    sw = V.scalar("sigma_w2", sigma_w2, V.positive)
    sb = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    g = V.scalar("gamma", gamma, V.real)
    readout = V.flag("readout", readout)
    collapse = V.flag("collapse", collapse)
    lam = branch_scales(branch_scale, depth)
    n_ch = _channels(channels, 2)
    rtol = V.scalar("rtol", rtol, lambda name, v: V.interval(name, v, 0.0, 1.0, False, False, "(0, 1)"))
    if not isinstance(activation, str):
        raise V.ParameterError("activation", f"must be a name or a SymPy expression in x (text), got "
                                             f"{type(activation).__name__}")
    phi = _activation(activation.strip())
    X = check_inputs(X, check_memory=False)
    P = X.shape[0]
    from resprop.numeric.engine.inputs import check_kernel_memory

    # the nine P x P results (nngp and the kernel's own peak, seven float64 fields, the channel counts)
    check_kernel_memory(P, False, extra=9 * 8 * P * P, name="X")
    K0 = input_kernel(X, sw, sb)
    if not np.all(np.isfinite(K0)):
        raise V.ParameterError("X, sigma_w2", "K^(0) = sigma_w2 X X^T / d_in + sigma_b2 is not finite in float64")
    diag = np.diagonal(K0).copy()
    if np.any(diag <= 0):
        raise V.ParameterError("X", "every input needs K^(0)_aa > 0 (a zero input with sigma_b2 = 0)")
    skip, weight, bias = _sequences(depth, g, lam, sw, sb, readout)
    gammas = np.append(np.full(depth, g), [0.0] if readout else [])
    net = _Network(K0=K0, gammas=gammas, g=skip, w=weight, s=bias, phi=phi, rule=_rule(activation.strip()),
                   expansion=_expansion(activation.strip()))
    nngp = kernel(X, activation, depth, sw, sb, g, branch_scale if depth == 0 else lam, readout=readout,
                  progress=False)

    fields = _FIELDS
    out = {k: np.empty((P, P)) for k in fields}
    used = np.zeros((P, P), dtype=np.int64)
    # one-input recursions: channels raised along LADDER until converged (or the given count, doubled)
    ladder = [min(MAX_CHANNELS[1], 2 * n_ch)] if channels is not None else list(LADDER)
    # one recursion per norm class (K^(0)_aa equal to CLASS_RTOL; normalised data: one)
    reps, cls = _norm_classes(diag)
    rep_values, rep_used = _ladder_values(net, reps.reshape(-1, 1, 1), ladder, rtol, (0, 0))
    ii = np.arange(P)
    for name in fields:
        out[name][ii, ii] = rep_values[name][cls]
    used[ii, ii] = rep_used[cls]
    iu, ju = np.triu_indices(P, 1)
    # exact duplicates (a 2 x 2 block of rank one with equal diagonals) are the diagonal element
    dup = (K0[iu, ju] == diag[iu]) & (diag[iu] == diag[ju])
    for d in np.flatnonzero(dup):
        for name in fields:
            out[name][iu[d], ju[d]] = out[name][ju[d], iu[d]] = out[name][iu[d], iu[d]]
        used[iu[d], ju[d]] = used[ju[d], iu[d]] = used[iu[d], iu[d]]
    iu, ju = iu[~dup], ju[~dup]
    pair_ladder = [n_ch] if channels is not None else [n for n in LADDER if n <= MAX_CHANNELS[2]]
    bar = _progress_bar(len(iu), progress)
    if collapse:
        iu, ju = _collapsed(net, K0, diag, iu, ju, out, used, pair_ladder, rtol, bar)
        if len(iu) >= COLLAPSE_NORMS_MIN_PAIRS:
            iu, ju = _collapsed_norms(net, K0, diag, iu, ju, out, used, pair_ladder, rtol, bar)
    first = _ladder_start(pair_ladder, np.diagonal(used)[iu], np.diagonal(used)[ju])
    direct = _direct_network(net, len(iu), cls[np.concatenate([iu, ju])])
    for k0 in np.unique(first):
        group = np.flatnonzero(first == k0)
        a, b = iu[group], ju[group]
        block = _pair_block(K0[a, a], K0[b, b], K0[a, b])
        values, n_used = _batched_pair_values(direct, block, pair_ladder[int(k0):], rtol,
                                              None if bar is None else lambda batch: bar.update(batch.stop
                                                                                               - batch.start))
        for name in fields:
            out[name][a, b] = out[name][b, a] = values[name]
        used[a, b] = used[b, a] = n_used
    if bar is not None:
        bar.close()
    return Fluctuations(nngp=nngp, depth=depth, width=width, activation=activation.strip(), sigma_w2=sw,
                        sigma_b2=sb, gamma=g, branch_scale=lam, channels=used, rtol=rtol, _network=net, **out)


#: pairs of one norm-class pair from which the angle interpolation (`fluctuation_collapse`) is used
COLLAPSE_MIN_PAIRS = 512
#: pairs of inputs of unequal norms from which the log-norm and angle interpolation is used (its grids cost a few
#: hundred to a few thousand pair recursions)
COLLAPSE_NORMS_MIN_PAIRS = 2048
#: inputs whose K^(0)_aa agree to this relative tolerance form one norm class
CLASS_RTOL = 1e-12


#: the direct route takes the Mehler sums (`fluctuation_mehler`) when its pairs' inputs fall in at most
#: MEHLER_MAX_CLASSES norm classes with at least PAIRS_PER_TABLE pairs per class: a batch then shares a few
#: variances per layer, whose tables (~5 ms each) cost less than the 2-D rule they replace (~0.7 ms per pair).
#: Pairs of many different norms (a batch of 48 has ~49 variances per layer) keep the rule.
PAIRS_PER_TABLE = 16
MEHLER_MAX_CLASSES = 4


def _direct_network(net: _Network, n_pairs: int, classes: np.ndarray) -> _Network:
    """The network for the direct route's pairs: with the Mehler sums when their tables pay for themselves (see
    PAIRS_PER_TABLE), else with the 2-D rule.  A choice fixed by the input set, not by batching or threads (the
    two routes agree to ~1e-12)."""
    n_classes = len(np.unique(classes))
    if net.expansion is not None and n_pairs >= PAIRS_PER_TABLE * n_classes and n_classes <= MEHLER_MAX_CLASSES:
        return net
    return replace(net, expansion=None)


def _ladder_start(ladder: list, need_a: np.ndarray, need_b: np.ndarray) -> np.ndarray:
    """Where a pair starts on its ladder: at the largest rung not above half the channels its two inputs needed
    (a pair's channels decay like its inputs'; the rungs below would be run and discarded), at least the first."""
    target = np.maximum(need_a, need_b) // 2
    rungs = np.asarray(ladder)
    return np.maximum(np.searchsorted(rungs, target, side="right") - 1, 0)


def _norm_classes(diag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group the K^(0)_aa into classes equal to CLASS_RTOL (relative, chained from the smallest): the classes'
    values (their smallest member) and each input's class."""
    order = np.argsort(diag, kind="stable")
    cls = np.empty(len(diag), dtype=np.int64)
    reps: list[float] = []
    for i in order:
        if not reps or abs(diag[i] - reps[-1]) > CLASS_RTOL * reps[-1]:
            reps.append(float(diag[i]))
        cls[i] = len(reps) - 1
    return np.array(reps), cls


def _pair_block(k_aa: np.ndarray, k_bb: np.ndarray, k_ab: np.ndarray) -> np.ndarray:
    """A batch of two-input kernels (B, 2, 2) from its entries."""
    return np.stack([np.stack([k_aa, k_ab], -1), np.stack([k_ab, k_bb], -1)], -2)


def _pair_values(net: _Network, block: np.ndarray, ladder: list, rtol: float) -> tuple[dict, np.ndarray]:
    """The (0, 1) elements of a batch of two-input problems (B, 2, 2), by `_ladder_values`."""
    return _ladder_values(net, block, ladder, rtol, (0, 1))


def _batched_pair_values(net: _Network, block: np.ndarray, ladder: list, rtol: float,
                         done: Callable[[slice], None] | None = None) -> tuple[dict, np.ndarray]:
    """`_pair_values` of any number of two-input problems, in batches of BATCH run by WORKERS threads (the compiled
    projections and second quantisation release the GIL); ``done(batch)`` is called as each batch ends."""
    n = block.shape[0]
    values = {k: np.empty(n) for k in _FIELDS}
    used = np.zeros(n, dtype=np.int64)
    batches = [slice(start, min(start + BATCH, n)) for start in range(0, n, BATCH)]

    def run(batch: slice) -> slice:
        part, n_used = _pair_values(net, block[batch], ladder, rtol)
        for k in _FIELDS:
            values[k][batch] = part[k]
        used[batch] = n_used
        return batch

    workers = max(1, min(len(batches), WORKERS if WORKERS is not None else (os.cpu_count() or 1)))
    if workers == 1:
        for batch in batches:
            run(batch)
            if done is not None:
                done(batch)
        return values, used
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        with one_blas_thread():
            for batch in pool.map(run, batches):
                if done is not None:
                    done(batch)
    finally:  # on an error or ctrl-c the batches not yet started are dropped, not waited for
        pool.shutdown(wait=True, cancel_futures=True)
    return values, used


def _ladder_values(net: _Network, block: np.ndarray, ladder: list, rtol: float, element: tuple[int, int]
                   ) -> tuple[dict, np.ndarray]:
    """The ``element`` of a batch of 1- or 2-input problems (B, p, p): each problem's channels raised along
    ``ladder`` until its truncation estimates are below rtol (or the ladder ends); (values, channels used)."""
    B = block.shape[0]
    values = {k: np.empty(B) for k in _FIELDS}
    used = np.zeros(B, dtype=np.int64)
    todo = np.arange(B)
    for k, n_try in enumerate(ladder):
        res = _run(net, block[todo], int(n_try), mean_shift=True)
        part = _fields(res, *element)
        for name in _FIELDS:
            values[name][todo] = part[name]
        used[todo] = n_try
        if k + 1 == len(ladder):
            break
        todo = todo[~_converged_values(part, rtol)]
        if not todo.size:
            break
    return values, used


def _collapsed(net: _Network, K0: np.ndarray, diag: np.ndarray, iu: np.ndarray, ju: np.ndarray, out: dict,
               used: np.ndarray, ladder: list, rtol: float, bar) -> tuple[np.ndarray, np.ndarray]:
    """Fill the pairs of every norm-class pair with at least COLLAPSE_MIN_PAIRS members from angle interpolants;
    return the pairs left to the direct route."""
    from resprop.numeric.engine import fluctuation_collapse as fc

    reps, cls = _norm_classes(diag)
    ca, cb = np.minimum(cls[iu], cls[ju]), np.maximum(cls[iu], cls[ju])
    left = np.ones(len(iu), dtype=bool)
    # class pairs with enough members, found by one sort (a scan per class pair is O(P^4) for all-distinct norms)
    code = ca * len(reps) + cb
    uniq, counts = np.unique(code, return_counts=True)
    for c in uniq[counts >= COLLAPSE_MIN_PAIRS]:
        c1, c2 = divmod(int(c), len(reps))
        members = np.flatnonzero(code == c)
        a, b = iu[members], ju[members]
        r0 = np.clip(K0[a, b] / np.sqrt(diag[a] * diag[b]), -1.0, 1.0)
        theta = np.arccos(r0)
        inner = (theta > fc.THETA_FLOOR) & (theta < np.pi - fc.THETA_FLOOR)
        if not inner.any():
            continue
        ka, kb = float(reps[c1]), float(reps[c2])
        diag_need = np.diagonal(used)
        k0 = int(_ladder_start(ladder, np.array([diag_need[a].max()]), np.array([diag_need[b].max()]))[0])

        def evaluate(t: np.ndarray, rungs: list, ka=ka, kb=kb) -> tuple[dict, int]:
            kab = np.cos(t) * np.sqrt(ka * kb)
            block = _pair_block(np.full_like(t, ka), np.full_like(t, kb), kab)
            values, n_used = _batched_pair_values(net, block, rungs, rtol)
            return values, int(n_used.max())

        # one channel count for every evaluation, as in `_collapsed_norms`: the ladder's answer at the probe angles
        _, n_fixed = evaluate(np.quantile(theta[inner], PROBE_QUANTILES), ladder[k0:])

        def fixed(t: np.ndarray, n: int = n_fixed) -> dict:
            return evaluate(t, [n])[0]

        values, done = fc.interpolate_pairs(fixed, theta[inner], tol=1e-2 * rtol)
        sel = members[inner][done]
        _store_interpolated(out, used, iu[sel], ju[sel], values, done, n_fixed)
        left[sel] = False
        if bar is not None:
            bar.update(len(sel))
    return iu[left], ju[left]


def _store_interpolated(out: dict, used: np.ndarray, pa: np.ndarray, pb: np.ndarray, values: dict,
                        done: np.ndarray, channels: int) -> None:
    """Write the certified interpolated values (``values[name][done]``) to the pairs (pa, pb) of the symmetric
    results; the interpolated truncation estimates as magnitudes."""
    for name in _FIELDS:
        v = values[name][done]
        if name.endswith("truncation"):
            v = np.abs(v)
        out[name][pa, pb] = out[name][pb, pa] = v
    used[pa, pb] = used[pb, pa] = channels


def _collapsed_norms(net: _Network, K0: np.ndarray, diag: np.ndarray, iu: np.ndarray, ju: np.ndarray, out: dict,
                     used: np.ndarray, ladder: list, rtol: float, bar) -> tuple[np.ndarray, np.ndarray]:
    """Fill the remaining pairs (inputs of unequal norms) from interpolants in (log K0_aa, log K0_bb, angle)
    (`fluctuation_collapse.interpolate_norm_pairs`, certified to 1e-2 rtol of each field's scale); return the
    pairs left to the direct route (angles within THETA_FLOOR of 0 or pi, uncertified boxes or pieces)."""
    from resprop.numeric.engine import fluctuation_collapse as fc

    theta = np.arccos(np.clip(K0[iu, ju] / np.sqrt(diag[iu] * diag[ju]), -1.0, 1.0))
    inner = np.flatnonzero((theta > fc.THETA_FLOOR) & (theta < np.pi - fc.THETA_FLOOR))
    if not inner.size:
        return iu, ju
    s = np.log(diag)
    a, b = iu[inner], ju[inner]
    s_a, s_b = np.minimum(s[a], s[b]), np.maximum(s[a], s[b])
    need = int(np.diagonal(used).max())
    rungs = ladder[int(_ladder_start(ladder, np.array([need]), np.array([need]))[0]):]

    def evaluate(sa: np.ndarray, sb: np.ndarray, t: np.ndarray, rungs=rungs) -> tuple[dict, int]:
        ka, kb = np.exp(sa), np.exp(sb)
        block = _pair_block(ka, kb, np.cos(t) * np.sqrt(ka * kb))
        values, n_used = _batched_pair_values(net, block, rungs, rtol)
        return values, int(n_used.max())

    # One channel count for every evaluation: values truncated at different counts differ by up to rtol, a
    # jump no interpolant certified to 1e-2 rtol can follow.  The count is the ladder's answer on a probe of
    # the corners and the centre of the (s_a, s_b) range at five angles spanning the pairs'.
    lo, hi = float(s_a.min()), float(s_b.max())
    corners = [(lo, lo), (lo, hi), (hi, hi), ((lo + hi) / 2, (lo + hi) / 2)]
    angles = np.quantile(theta[inner], PROBE_QUANTILES)
    probe_a = np.repeat([c[0] for c in corners], angles.size)
    probe_b = np.repeat([c[1] for c in corners], angles.size)
    _, n_fixed = evaluate(probe_a, probe_b, np.tile(angles, len(corners)))

    def fixed(sa: np.ndarray, sb: np.ndarray, t: np.ndarray) -> dict:
        return evaluate(sa, sb, t, rungs=[n_fixed])[0]

    values, done = fc.interpolate_norm_pairs(fixed, s_a, s_b, theta[inner], tol=1e-2 * rtol)
    sel = inner[done]
    _store_interpolated(out, used, iu[sel], ju[sel], values, done, n_fixed)
    if bar is not None:
        bar.update(len(sel))
    left = np.ones(len(iu), dtype=bool)
    left[sel] = False
    return iu[left], ju[left]


_FIELDS = ("variance", "law_variance", "variance_truncation", "mean_shift_truncation", "closure_variance",
           "mean_shift", "closure_mean_shift")


def _fields(res, i: int, j: int) -> dict:
    return {
        "variance": res.V["full"][:, i, j, i, j],
        "law_variance": res.C["full"][:, i, j, i, j],
        "variance_truncation": np.abs(res.V["full"][:, i, j, i, j] - res.V["low"][:, i, j, i, j]),
        "mean_shift_truncation": np.abs(res.M["full"][:, i, j] - res.M["low"][:, i, j]),
        "closure_variance": res.V["closure"][:, i, j, i, j],
        "mean_shift": res.M["full"][:, i, j],
        "closure_mean_shift": res.M["closure"][:, i, j],
    }


def _converged_values(v: dict, rtol: float) -> np.ndarray:
    """Whether the truncation estimates are below rtol: of |variance| for the variance, of |mean_shift| +
    sqrt|variance| (the kernel's own scale; the mean shift may vanish) for the mean shift."""
    var = np.abs(v["variance"])
    return ((v["variance_truncation"] <= rtol * var)
            & (v["mean_shift_truncation"] <= rtol * (np.abs(v["mean_shift"]) + np.sqrt(var))))


def _progress_bar(total: int, progress):
    import sys

    show = bool(getattr(sys.stderr, "isatty", lambda: False)()) if progress is None else bool(progress)
    if not show or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="pairs", unit="pair", delay=1.0, file=sys.stderr)


@dataclass(frozen=True)
class Trajectory(ResultRecord):
    """:func:`trajectory`: per layer l = 0..L (leading axis) for one set of p <= 4 inputs: the kernel ``K``
    (L+1, p, p), ``V`` = width Cov[K^_ab, K^_cd] (L+1, p, p, p, p), its closure value ``V_closure`` (B.25/B.26),
    the law-kernel covariance ``C``, the mean shift ``M`` and ``M_closure`` (L+1, p, p); ``U`` (L+1, p, p, p, p):
    at l >= 1 width Cov of G^ of layer l - 1 (the post-activation kernel feeding layer l), 0 at l = 0; ``Delta``
    (L+1, p, p, p, p): Cov(e^l, T_perp^l), the same-neuron cross-layer source that PDLT's closure drops (0 at
    l = 0; the last layer's by one more projection); ``channels`` used and ``truncation`` (L+1,), the largest
    |V - V(half the channels)| / |V| of the layer."""

    K: np.ndarray
    V: np.ndarray
    V_closure: np.ndarray
    C: np.ndarray
    M: np.ndarray
    M_closure: np.ndarray
    U: np.ndarray
    Delta: np.ndarray
    channels: int
    truncation: np.ndarray
    #: with ``two_time=True``: width Cov[K~^k_ab, K~^l_cd] of the law kernel (L+1, L+1, p, p, p, p), else None
    two_time: np.ndarray | None = None


def trajectory(K0, gammas, g, w, s, activation: str, *, channels: int | None = None, rtol: float = 1e-10,
               mean_shift: bool = True, two_time: bool = False) -> Trajectory:
    """The low-level engine for theory modules that pass the input kernel and the per-layer sequences themselves
    (PDLT's C_W, C_b, gamma; Fischer's rho): K0 (p, p), p <= 4; ``gammas`` the signed skip gain of each layer,
    g = gamma^2, w = lambda^2 sigma_w2, s = lambda^2 sigma_b2 (arrays of one length, the depth).  Channels:
    raised along LADDER (p <= 2) or MANY_INPUT_LADDER (p = 3, 4) until every layer's truncation estimate is below
    ``rtol`` (or the cap: ``Trajectory.truncation`` says how far it got), or as given.
    ``two_time``: also the law kernel's two-time covariances (``Trajectory.two_time``; O(depth^2) work)."""
    K0 = V.kernel_matrix("K0", K0)
    two_time = V.flag("two_time", two_time)
    p = K0.shape[0]
    if not 1 <= p <= 4:
        raise V.ParameterError("K0", f"trajectory takes 1 to 4 inputs, got {p}")
    seqs = []
    for name, v in (("gammas", gammas), ("g", g), ("w", w), ("s", s)):
        arr = np.asarray(v, dtype=float).reshape(-1)  # may be empty: depth 0
        if arr.size and not np.all(np.isfinite(V.real(name, arr))):
            raise V.ParameterError(name, "must be finite")
        seqs.append(arr)
    if len({len(x) for x in seqs}) != 1:
        raise V.ParameterError("gammas, g, w, s", "must have one entry per layer each")
    # one more layer (a copy of the last) gives the last layer's Delta; its own outputs are dropped
    ext = [np.append(x, x[-1:]) if len(x) else x for x in seqs]
    net = _Network(K0=K0, gammas=ext[0], g=ext[1], w=ext[2], s=ext[3], phi=_activation(activation.strip()),
                   rule=_rule(activation.strip()), expansion=_expansion(activation.strip()))
    depth = len(seqs[0])
    ladder = [_channels(channels, p)] if channels is not None else (
        [n for n in LADDER if n <= MAX_CHANNELS[p]] if p <= 2 else list(MANY_INPUT_LADDER[p]))

    def attempt(n_try: int) -> tuple[tuple, float]:
        layers: list = []
        _run_recorded(net, K0[None], n_try, mean_shift, layers, two_time)
        delta = np.array([np.zeros_like(layers[0].C["full"][0])] + [r.Delta[0] for r in layers[1:]])[1:]
        layers = layers[:depth + 1]
        Vf = np.array([r.V["full"][0] for r in layers])
        scale = np.abs(Vf).reshape(len(layers), -1).max(axis=1)
        Vl = np.array([r.V["low"][0] for r in layers])
        trunc = np.abs(Vf - Vl).reshape(len(layers), -1).max(axis=1) / np.where(scale > 0, scale, 1.0)
        return (n_try, layers, delta, Vf, trunc), float(trunc.max())

    n_try, layers, delta, Vf, trunc = _climb(ladder, attempt, rtol, jump=p >= 3)
    return Trajectory(K=np.array([r.K[0] for r in layers]), V=Vf,
                      V_closure=np.array([r.V["closure"][0] for r in layers]),
                      C=np.array([r.C["full"][0] for r in layers]), M=np.array([r.M["full"][0] for r in layers]),
                      M_closure=np.array([r.M["closure"][0] for r in layers]),
                      U=np.array([np.zeros_like(layers[0].C["full"][0])] + [r.U[0] for r in layers[1:]]),
                      Delta=delta if depth else np.zeros((1,) + (p,) * 4), channels=n_try, truncation=trunc,
                      two_time=_two_time(layers) if two_time else None)


def _climb(ladder: list[int], attempt: Callable[[int], tuple[Any, float]], rtol: float, jump: bool) -> Any:
    """Run ``attempt(channels)`` (-> (result, relative truncation estimate)) up ``ladder`` until the estimate is
    at most ``rtol`` or the ladder ends; the last result.  ``jump``: skip the rungs that cannot end it
    (`_next_rung`)."""
    tried: list[tuple[int, float]] = []
    step = 0
    while True:
        result, worst = attempt(ladder[step])
        if worst <= rtol or step + 1 == len(ladder):
            return result
        tried.append((ladder[step], worst))
        step = _next_rung(ladder, step, tried, rtol) if jump else step + 1


def _next_rung(ladder: list[int], step: int, tried: list[tuple[int, float]], rtol: float) -> int:
    """The index of the next channel count to run after ``ladder[step]`` failed ``rtol``: the next rung, or the cap
    (the last) at once when the estimates of the last two rungs (``tried``: (channels, estimate)), extrapolated
    geometrically in the channel count, predict that even the cap misses ``rtol`` (or they do not decrease).  The
    3- and 4-input recursions' estimates fall roughly geometrically (erf, correlated inputs: ~0.8 per channel), and
    each rung is a whole run whose cost grows as channels^p: skipping rungs that cannot end the ladder gives the
    same result (the cap's) sooner."""
    if len(tried) < 2 or step + 2 >= len(ladder):
        return step + 1
    (n0, e0), (n1, e1) = tried[-2:]
    if not (e0 > 0 and e1 > 0) or e1 >= e0:
        return len(ladder) - 1
    rate = (e1 / e0) ** (1.0 / (n1 - n0))
    return len(ladder) - 1 if e1 * rate ** (ladder[-1] - n1) > rtol else step + 1


def _two_time(layers: list) -> np.ndarray:
    """width Cov[K~^k, K~^l] for k, l = 0..L from the recorded Cov(e^k, e^l), l <= k (the transpose above)."""
    n, p = len(layers), layers[0].K.shape[-1]
    out = np.empty((n, n) + (p,) * 4)
    for k, r in enumerate(layers):
        assert r.two_time is not None
        for l in range(k + 1):
            out[k, l] = r.two_time[0, l]
            out[l, k] = r.two_time[0, l].transpose(2, 3, 0, 1)
    return out


def _run_recorded(net: _Network, K0: np.ndarray, channels: int, mean_shift: bool, layers: list,
                  two_time: bool = False) -> None:
    """`_run` keeping every layer's state in ``layers`` (the errors name K0, the input of `trajectory`)."""
    try:
        _run(net, K0, channels, mean_shift, record=lambda layer, res: layers.append(res), two_time=two_time)
    except V.ParameterError as exc:
        raise V.ParameterError("K0" if exc.parameter == "X" else "K0, w, s, depth", str(exc).split(": ", 1)[1]) \
            from None
