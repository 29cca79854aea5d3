"""The infinite-prompt limit of Lemma 2.1 against Gauss-Hermite quadrature (a rule is a weighted prompt,
so the quadrature value is softmax attention over its nodes). Chapter 2 failing when the lemma's
implementation is perturbed is in tests/test_perturbed_chapters.py, beside the other chapters."""

from __future__ import annotations

import pytest
import softlin as sl
import torch

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them

F64 = torch.float64


def _t(x):
    return torch.tensor(x, dtype=F64)


# Chapter 2's law A (shifted, full rank) and law B (regression tokens z = (x, w^T x), rank 2), and more.
M_A = _t([0.5, -0.3, 0.2])
GAMMA_A = _t([[1.0, 0.3, 0.0], [0.3, 0.8, 0.2], [0.0, 0.2, 0.5]])
J = torch.cat([torch.eye(2, dtype=F64), _t([[0.8, -0.6]])])
GAMMA_B = J @ _t([[1.0, 0.5], [0.5, 1.0]]) @ J.T
U = _t([[0.4, -0.2, 0.1], [0.3, 0.2, -0.3], [0.0, 0.25, 0.35]])
V = _t([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]])

LAWS = {
    "shifted full rank": (M_A, GAMMA_A),
    "regression tokens": (torch.zeros(3, dtype=F64), GAMMA_B),
    "shifted rank 2": (J @ _t([0.3, 0.4]), GAMMA_B),
    "D=1": (_t([0.7]), _t([[1.3]])),
}


def _problem(gen, mean, Q=16):
    D = mean.shape[0]
    queries = 1.5 * torch.randn(Q, D, generator=gen, dtype=F64)
    U_q = 0.5 * torch.randn(D, D, generator=gen, dtype=F64)
    return queries, U_q, torch.randn(2, D, generator=gen, dtype=F64)


def _quadrature(queries, U_q, V_q, mean, cov, n_nodes):
    nodes, weights = sl.gauss_hermite_rule(mean, cov, n_nodes)
    return sl.softmax_attention(nodes, queries, U_q, V_q, weights=weights)


@pytest.mark.parametrize("name", list(LAWS))
def test_quadrature_matches_lemma_2_1(gen, name):
    mean, cov = LAWS[name]
    queries, U_q, V_q = _problem(gen, mean)
    b = queries @ U_q.T @ sl.gaussian_range_factor(cov)
    assert float(b.norm(dim=-1).max()) < 6  # so the 60-point rule's error estimate is below 1e-20
    quad = _quadrature(queries, U_q, V_q, mean, cov, 60)
    closed = sl.gaussian_attention_limit(queries, U_q, V_q, mean, cov)
    assert float((quad - closed).abs().max()) < 1e-10  # what remains is rounding (~1e-13)


WRONG_LIMITS = {
    "mean dropped": lambda q, U, V, m, G: q @ U.T @ G @ V.T,
    "U transposed": lambda q, U, V, m, G: (m + q @ U @ G) @ V.T,
    "linear-attention limit V(G + m m^T) U z": lambda q, U, V, m, G: (
        q @ U.T @ (G + torch.outer(m, m)) @ V.T
    ),
    "offset of 1e-8": lambda q, U, V, m, G: sl.gaussian_attention_limit(q, U, V, m, G) + 1e-8,
}


@pytest.mark.parametrize("wrong", list(WRONG_LIMITS))
def test_quadrature_check_fails_for_a_wrong_formula(gen, wrong):
    """The chapter asserts max |quadrature - closed form| < 1e-10; each wrong formula must break it."""
    mean, cov = LAWS["shifted full rank"]
    queries, U_q, V_q = _problem(gen, mean)
    quad = _quadrature(queries, U_q, V_q, mean, cov, 60)
    assert float((quad - WRONG_LIMITS[wrong](queries, U_q, V_q, mean, cov)).abs().max()) > 1e-10


def test_quadrature_values_are_affine_in_the_query(gen):
    """Computed without the closed form, T[mu] at the midpoint of two queries is the mean of the two."""
    mean, cov = LAWS["regression tokens"]
    z0, z1 = torch.randn(2, 3, generator=gen, dtype=F64)
    T = _quadrature(torch.stack([z0, 0.5 * (z0 + z1), z1]), U, V, mean, cov, 40)
    torch.testing.assert_close(T[1], 0.5 * (T[0] + T[2]), rtol=0, atol=1e-12)
