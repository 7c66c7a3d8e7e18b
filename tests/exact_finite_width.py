"""Exact O(1/n) moments of the empirical kernel of a finite-width residual MLP with a polynomial activation.

An independent reference for ``resprop.numeric.engine.fluctuation_recursion`` (docs/design/fluctuations-engine.md,
sections 2-3, check S2 of section 7).  Nothing here uses the engine, the mean-field process or the channel theory:
only the exact step law of the finite network (section 2).

Network (width n, P inputs).  Read-in rows h_i^0 iid N(0, K0).  Block l = 1..L:
h^l = gamma h^(l-1) + lambda_l (W^l phi(h^(l-1)) + b^l), W ~ N(0, sigma_w2/n), b ~ N(0, sigma_b2) shared by the
inputs.  Given F_(l-1), the neurons' increments xi_i^l are iid N(0, Sigma^) with
Sigma^ = sigma_w2 G^ + sigma_b2 J, G^_ab = (1/n) sum_j phi(h_j(x_a)) phi(h_j(x_b)).

Method.  Every quantity is a polynomial in eps = 1/n and in *normalised power sums* p_m = (1/n) sum_i h_i^m of one
layer (m a multi-index over the P inputs, h_i^m = prod_a h_i(x_a)^(m_a)); K^_ab = p_(e_a + e_b), G^_ab is a linear
combination of p's for polynomial phi.  Given F_(l-1) the summands of the p's of layer l are independent over the
neurons, so the conditional joint cumulant of r such averages is n^(1-r) times an average over the neurons of the
one-neuron joint cumulant.  By the moment-cumulant formula

    E[p_m1 ... p_mr | F_(l-1)] = prod_k mu(m_k) + eps sum_(j<k) kappa(m_j, m_k) prod_(others) mu + O(eps^2),

    mu(m)       = (1/n) sum_i E_xi[(gamma h_i + lambda xi)^m]                      (exact)
    kappa(m, m') = (1/n) sum_i Cov_xi[(gamma h_i + lambda xi)^m, (gamma h_i + lambda xi)^m']   (exact),

both polynomials in the p's of layer l-1 (Isserlis moments of xi ~ N(0, Sigma^), Sigma^ linear in those p's).  The
dropped terms are eps^2 times expectations of polynomials in normalised power sums, which are O(1).  Layer 0 is the
same formula with gamma = 0, lambda = 1, Sigma = K0 (h^0 iid N(0, K0)).  Two bookkeepings of it (``route``):

* "expand": keep eps^0 and eps^1 and pull the polynomials K^_ab and K^_ab K^_cd back layer by layer, fully
  expanded, down to constants A0 + A1/n; then M = A1[K^_ab], V = A1[K^_ab K^_cd] - K_ab M_cd - M_ab K_cd (the O(1)
  part of E[K^ K^] must equal K_ab K_cd: asserted).  Slow beyond depth 2 for two inputs (products blow up).
* "delta" (default): the same expansion closed on the first two moments of the single power sums per layer
  (``exact_moments`` docstring); polynomial in the number of power sums, fast for depth <= 5.

Both give the O(1/n) coefficients EXACTLY, in rational arithmetic (``fractions.Fraction``, returned as SymPy
``Rational``): E K^_ab = K_ab + M_ab / n + O(n^-2) and n Cov(K^_ab, K^_cd) = V_(ab)(cd) + O(1/n).  They agree
exactly wherever both were run (tests/test_fluctuations_exact.py).
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from functools import cache
from math import comb

import sympy as sp

__all__ = ["ExactResult", "exact_moments"]

# A polynomial in eps (power 0 or 1) and the p's of one layer: {(k, vars): coeff}, vars a sorted tuple of
# multi-indices (each a tuple of P ints, not all zero; p_0 = 1 is never stored).
Poly = dict


def _add_into(out: Poly, a: Poly, scale: Fraction = Fraction(1), shift: int = 0) -> None:
    for (k, v), c in a.items():
        k2 = k + shift
        if k2 > 1:
            continue
        key = (k2, v)
        val = out.get(key, 0) + scale * c
        if val:
            out[key] = val
        else:
            out.pop(key, None)


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for (k1, v1), c1 in a.items():
        for (k2, v2), c2 in b.items():
            k = k1 + k2
            if k > 1:
                continue
            key = (k, tuple(sorted(v1 + v2)))
            val = out.get(key, 0) + c1 * c2
            if val:
                out[key] = val
            else:
                out.pop(key, None)
    return out


def _const(c) -> Poly:
    c = Fraction(c)
    return {(0, ()): c} if c else {}


def _var(m: tuple) -> Poly:
    return _const(1) if not any(m) else {(0, (m,)): Fraction(1)}


@cache
def _isserlis(j: tuple) -> dict:
    """E[xi^j] for xi ~ N(0, S) as {exponents of (S_ab, a <= b) in row-major upper order: int}."""
    P = len(j)
    pairs = [(a, b) for a in range(P) for b in range(a, P)]
    if not any(j):
        return {(0,) * len(pairs): 1}
    if sum(j) % 2:
        return {}
    a = next(i for i, x in enumerate(j) if x)
    rest = list(j)
    rest[a] -= 1
    out: dict = {}
    for b in range(P):  # Stein: E[xi_a f] = sum_b S_ab E[d_b f]
        if rest[b] == 0:
            continue
        r2 = list(rest)
        r2[b] -= 1
        idx = pairs.index((min(a, b), max(a, b)))
        for e, c in _isserlis(tuple(r2)).items():
            e2 = list(e)
            e2[idx] += 1
            e2 = tuple(e2)
            out[e2] = out.get(e2, 0) + rest[b] * c
    return out


class _Step:
    """One layer: the new neuron is gamma h + lam xi, xi ~ N(0, Sigma) with Sigma a matrix of Polys in the old p's."""

    def __init__(self, gamma: Fraction, lam: Fraction, Sigma: list[list[Poly]]):
        self.P = len(Sigma)
        self.gamma, self.lam = Fraction(gamma), Fraction(lam)
        self.sig = [Sigma[a][b] for a in range(self.P) for b in range(a, self.P)]
        self._pow: dict = {}
        self._mom: dict = {}
        self._mu: dict = {}
        self._kap: dict = {}
        self._prod: dict = {(): _const(1)}

    def _sigpow(self, idx: int, e: int) -> Poly:
        key = (idx, e)
        if key not in self._pow:
            self._pow[key] = _const(1) if e == 0 else _mul(self._sigpow(idx, e - 1), self.sig[idx])
        return self._pow[key]

    def moment(self, j: tuple) -> Poly:
        """E_xi[xi^j] as a Poly in the old p's."""
        if j not in self._mom:
            out: Poly = {}
            for e, c in _isserlis(j).items():
                term = _const(c)
                for idx, x in enumerate(e):
                    if x:
                        term = _mul(term, self._sigpow(idx, x))
                _add_into(out, term)
            self._mom[j] = out
        return self._mom[j]

    def neuron(self, m: tuple) -> list[tuple[tuple, Fraction, tuple]]:
        """E_xi[(gamma h + lam xi)^m] = sum coeff * h^(m - j) * E[xi^j]: the list of (m - j, coeff, j)."""
        out = []
        for j in itertools.product(*(range(x + 1) for x in m)):
            if sum(j) % 2:
                continue
            c = Fraction(1)
            for x, y in zip(m, j):
                c *= comb(x, y)
            c *= self.gamma ** (sum(m) - sum(j)) * self.lam ** sum(j)
            if c:
                out.append((tuple(x - y for x, y in zip(m, j)), c, j))
        return out

    def mu(self, m: tuple) -> Poly:
        """(1/n) sum_i E_xi[(gamma h_i + lam xi)^m]."""
        if m not in self._mu:
            out: Poly = {}
            for rest, c, j in self.neuron(m):
                _add_into(out, _mul(_var(rest), self.moment(j)), c)
            self._mu[m] = out
        return self._mu[m]

    def kappa(self, m1: tuple, m2: tuple) -> Poly:
        """(1/n) sum_i Cov_xi[(gamma h_i + lam xi)^m1, (gamma h_i + lam xi)^m2]."""
        key = (m1, m2) if m1 <= m2 else (m2, m1)
        if key not in self._kap:
            out = dict(self.mu(tuple(x + y for x, y in zip(m1, m2))))
            for r1, c1, j1 in self.neuron(m1):
                for r2, c2, j2 in self.neuron(m2):
                    rr = tuple(x + y for x, y in zip(r1, r2))
                    _add_into(out, _mul(_var(rr), _mul(self.moment(j1), self.moment(j2))), -c1 * c2)
            self._kap[key] = out
        return self._kap[key]

    def mean_field(self, m0) -> _MeanField:
        """mu and kappa evaluated at the old layer's mean-field values m0 (a function multi-index -> Fraction)."""
        return _MeanField(self, m0)

    def prod_mu(self, vs: tuple) -> Poly:
        if vs not in self._prod:
            self._prod[vs] = _mul(self.mu(vs[0]), self.prod_mu(vs[1:]))
        return self._prod[vs]

    def pull(self, T: Poly) -> Poly:
        """E[T | previous layer] to O(eps), T a Poly in the p's of this layer."""
        out: Poly = {}
        for (k, vs), c in T.items():
            _add_into(out, self.prod_mu(vs), c, shift=k)
            if k == 0 and len(vs) >= 2:
                for a, b in itertools.combinations(range(len(vs)), 2):
                    others = tuple(v for i, v in enumerate(vs) if i not in (a, b))
                    _add_into(out, _mul(self.kappa(vs[a], vs[b]), self.prod_mu(others)), c, shift=1)
        return out


class _MeanField:
    """Numeric mu(m)[m0] and kappa(m, m')[m0]: polynomials evaluate factor by factor at the deterministic limit."""

    def __init__(self, step: _Step, m0):
        self.step, self.m0 = step, m0
        self.sig = [_eval_const(s, m0) for s in step.sig]
        self._mom: dict = {}

    def moment(self, j: tuple) -> Fraction:
        if j not in self._mom:
            tot = Fraction(0)
            for e, c in _isserlis(j).items():
                x = Fraction(c)
                for idx, k in enumerate(e):
                    if k:
                        x *= self.sig[idx] ** k
                tot += x
            self._mom[j] = tot
        return self._mom[j]

    def _p(self, m: tuple) -> Fraction:
        return Fraction(1) if not any(m) else self.m0(m)

    def mu(self, m: tuple) -> Fraction:
        return sum((c * self._p(rest) * self.moment(j) for rest, c, j in self.step.neuron(m)), Fraction(0))

    def kappa(self, m1: tuple, m2: tuple) -> Fraction:
        tot = self.mu(tuple(x + y for x, y in zip(m1, m2)))
        for r1, c1, j1 in self.step.neuron(m1):
            for r2, c2, j2 in self.step.neuron(m2):
                tot -= c1 * c2 * self._p(tuple(x + y for x, y in zip(r1, r2))) * self.moment(j1) * self.moment(j2)
        return tot


def _eval_const(poly: Poly, m0) -> Fraction:
    tot = Fraction(0)
    for (_, vs), c in poly.items():
        for v in vs:
            c *= m0(v)
        tot += c
    return tot


def _unit2(P: int, a: int, b: int) -> tuple:
    m = [0] * P
    m[a] += 1
    m[b] += 1
    return tuple(m)


def _sigma_hat(P: int, phi: list, sw2: Fraction, sb2: Fraction) -> list[list[Poly]]:
    """Sigma^_ab = sw2 (1/n) sum_i phi(h_ia) phi(h_ib) + sb2, phi = sum_k phi[k] z^k, as Polys in the p's."""
    S = [[None] * P for _ in range(P)]
    for a in range(P):
        for b in range(P):
            out = _const(sb2)
            for s, cs in enumerate(phi):
                for t, ct in enumerate(phi):
                    if cs and ct:
                        m = [0] * P
                        m[a] += s
                        m[b] += t
                        _add_into(out, _var(tuple(m)), sw2 * cs * ct)
            S[a][b] = out
    return S


class ExactResult:
    """K (P, P), M (P, P) and V[(a, b, c, d)] (all index orders) as SymPy Rationals."""

    def __init__(self, K, M, V):
        self.K, self.M, self.V = K, M, V


def _steps(K0, phi, depth, gamma, lam, sw2, sb2) -> list[_Step]:
    P = len(K0)
    lams = list(lam) if isinstance(lam, (list, tuple)) else [lam] * depth
    gammas = list(gamma) if isinstance(gamma, (list, tuple)) else [gamma] * depth
    assert len(lams) == len(gammas) == depth
    phif = [Fraction(c) for c in phi]
    steps = [_Step(Fraction(0), Fraction(1), [[_const(Fraction(x)) for x in row] for row in K0])]  # read-in
    steps += [_Step(Fraction(g), Fraction(lm), _sigma_hat(P, phif, Fraction(sw2), Fraction(sb2)))
              for g, lm in zip(gammas, lams)]
    return steps


def _rationals(P, K, M, V) -> ExactResult:
    R = lambda x: sp.Rational(x.numerator, x.denominator)  # noqa: E731
    out = {}
    for (x, y), v in V.items():
        for xx, yy in ((x, y), (y, x)):
            for a, b in (xx, xx[::-1]):
                for c, d in (yy, yy[::-1]):
                    out[a, b, c, d] = R(v)
    return ExactResult([[R(K[min(a, b), max(a, b)]) for b in range(P)] for a in range(P)],
                       [[R(M[min(a, b), max(a, b)]) for b in range(P)] for a in range(P)], out)


def exact_moments(K0, phi, depth: int, gamma, lam, sw2, sb2, route: str = "delta") -> ExactResult:
    """Exact K, M (E K^ = K + M/n + O(n^-2)) and V (n Cov K^ -> V) of the empirical kernel at layer ``depth``.

    K0: P x P nested list of rationals (str, int or Fraction); phi: coefficients [c0, c1, ...] of the polynomial
    activation; gamma, lam (each one number or a per-layer list), sw2, sb2: rationals.

    route="delta" (default): the moment-cumulant formula above closes on the first two moments of the power sums.
    With p = m0 + delta, E delta = m1/n + O(n^-2), E delta delta' = c/n + O(n^-2) and E delta^3 = O(n^-2):

        m0_l(v) = mu(v)[m0],   m1_l(v) = the eps coefficient of E[mu(v)],   c_l(v, v') = n Cov(mu(v), mu(v')) + kappa(v, v')[m0],

    where E[prod_u p_u] = prod m0 + eps (sum_u m1(u) prod_(others) m0 + sum_(u<u') c(u, u') prod_(others) m0) + O(eps^2)
    and n Cov(prod_alpha p, prod_beta p) = sum_(u in alpha, u' in beta) c(u, u') prod_(alpha - u) m0 prod_(beta - u') m0
    (both exact at this order because everything is polynomial).  Memoised per layer and power sum.
    route="expand": the fully expanded pull-back of the module docstring (independent bookkeeping, slow)."""
    P = len(K0)
    steps = _steps(K0, phi, depth, gamma, lam, sw2, sb2)
    ij = [(a, b) for a in range(P) for b in range(a, P)]
    if route == "expand":
        return _expand(P, steps, ij)
    assert route == "delta"

    @cache
    def m0(l: int, u: tuple) -> Fraction:
        return mf(l).mu(u)

    @cache
    def mf(l: int) -> _MeanField:
        return steps[l].mean_field(lambda v: m0(l - 1, v))

    def _eval1(poly: Poly, l: int) -> Fraction:
        """The eps coefficient of E[poly(p^l)]."""
        tot = Fraction(0)
        if l < 0:
            return tot
        for (_, vs), c in poly.items():
            r = len(vs)
            base = [m0(l, v) for v in vs]
            for i in range(r):
                rest = c * m1(l, vs[i])
                for k in range(r):
                    if k != i:
                        rest *= base[k]
                tot += rest
                for j in range(i + 1, r):
                    rest = c * cov(l, vs[i], vs[j])
                    for k in range(r):
                        if k not in (i, j):
                            rest *= base[k]
                    tot += rest
        return tot

    @cache
    def grad(l: int, u: tuple) -> tuple:
        """d mu_l(u) / d p^(l-1) at the mean-field point, as a tuple of (v, coefficient)."""
        g: dict = {}
        for (_, vs), c in steps[l].mu(u).items():
            base = [m0(l - 1, v) for v in vs]
            for i, v in enumerate(vs):
                x = c
                for k in range(len(vs)):
                    if k != i:
                        x *= base[k]
                g[v] = g.get(v, 0) + x
        return tuple(g.items())

    @cache
    def m1(l: int, u: tuple) -> Fraction:
        return _eval1(steps[l].mu(u), l - 1)

    @cache
    def cov(l: int, u: tuple, v: tuple) -> Fraction:
        if v < u:
            return cov(l, v, u)
        tot = mf(l).kappa(u, v)
        if l > 0:
            for x, gx in grad(l, u):
                for y, gy in grad(l, v):
                    tot += gx * gy * cov(l - 1, x, y)
        return tot

    L = len(steps) - 1
    K = {x: m0(L, _unit2(P, *x)) for x in ij}
    M = {x: m1(L, _unit2(P, *x)) for x in ij}
    V = {(x, y): cov(L, _unit2(P, *x), _unit2(P, *y)) for x, y in itertools.combinations_with_replacement(ij, 2)}
    return _rationals(P, K, M, V)


def _expand(P: int, steps: list[_Step], ij: list) -> ExactResult:
    targets = {x: _var(_unit2(P, *x)) for x in ij}
    for x, y in itertools.combinations_with_replacement(ij, 2):
        targets[x + y] = _mul(targets[x], targets[y])
    for step in reversed(steps):  # from the last layer down to the read-in, shared caches per step
        targets = {key: step.pull(T) for key, T in targets.items()}

    def coeff(T: Poly, k: int) -> Fraction:
        assert all(not vs for (_, vs) in T), "the pulled-back polynomial must be a constant"
        return T.get((k, ()), Fraction(0))

    K = {x: coeff(targets[x], 0) for x in ij}
    M = {x: coeff(targets[x], 1) for x in ij}
    V = {}
    for x, y in itertools.combinations_with_replacement(ij, 2):
        T = targets[x + y]
        assert coeff(T, 0) == K[x] * K[y], "law of large numbers at O(1)"
        V[x, y] = coeff(T, 1) - K[x] * M[y] - M[x] * K[y]
    return _rationals(P, K, M, V)
