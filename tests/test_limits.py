"""The infinite-prompt limit (Lemma 2.1) and the three independent checks of chapter 2: Gauss-Hermite
quadrature, Monte Carlo with a fitted L^{-1/2} rate, and the re-weighted (tilted) samples. Each check is
also shown to FAIL when the closed form is wrong, at the chapter's own tolerances."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import softlin as sl  # noqa: E402
from softlin import limits  # noqa: E402

F64 = torch.float64
ROOT = Path(__file__).resolve().parents[1]


def _t(x):
    return torch.tensor(x, dtype=F64)


# The chapter's law A (shifted, full rank), law B (regression tokens z = (x, w^T x), rank 2), U, V and z.
M_A = _t([0.5, -0.3, 0.2])
GAMMA_A = _t([[1.0, 0.3, 0.0], [0.3, 0.8, 0.2], [0.0, 0.2, 0.5]])
J = torch.cat([torch.eye(2, dtype=F64), _t([[0.8, -0.6]])])
GAMMA_B = J @ _t([[1.0, 0.5], [0.5, 1.0]]) @ J.T
U = _t([[0.4, -0.2, 0.1], [0.3, 0.2, -0.3], [0.0, 0.25, 0.35]])
V = _t([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]])
Z = _t([[1.0, -0.5, 0.8]])

LAWS = {"shifted full rank": (M_A, GAMMA_A), "regression tokens": (torch.zeros(3, dtype=F64), GAMMA_B),
        "shifted rank 2": (J @ _t([0.3, 0.4]), GAMMA_B), "D=1": (_t([0.7]), _t([[1.3]]))}


def _problem(gen, mean, cov, Q=16):
    D = mean.shape[0]
    queries = 1.5 * torch.randn(Q, D, generator=gen, dtype=F64)
    U_q = 0.5 * torch.randn(D, D, generator=gen, dtype=F64)
    return queries, U_q, torch.randn(2, D, generator=gen, dtype=F64)


# -- gaussian_range_factor and gauss_hermite_rule ------------------------------------------------------

@pytest.mark.parametrize("name", list(LAWS))
def test_range_factor_reproduces_cov_with_rank_columns(name):
    _, cov = LAWS[name]
    B = limits.gaussian_range_factor(cov)
    assert B.shape == (cov.shape[0], int(torch.linalg.matrix_rank(cov)))
    torch.testing.assert_close(B @ B.T, cov, rtol=0, atol=1e-14)  # eigh reconstruction: rounding only


def test_range_factor_of_zero_cov_has_no_columns_and_rule_is_a_dirac():
    assert limits.gaussian_range_factor(torch.zeros(2, 2, dtype=F64)).shape == (2, 0)
    nodes, weights = limits.gauss_hermite_rule(_t([1.0, 2.0]), torch.zeros(2, 2, dtype=F64), 5)
    torch.testing.assert_close(nodes, _t([[1.0, 2.0]]))
    torch.testing.assert_close(weights, _t([1.0]))


@pytest.mark.parametrize("name", list(LAWS))
def test_rule_integrates_low_degree_polynomials_exactly(name):
    mean, cov = LAWS[name]
    nodes, weights = limits.gauss_hermite_rule(mean, cov, 4)  # exact up to degree 7 per coordinate
    assert abs(float(weights.sum()) - 1) < 1e-14
    torch.testing.assert_close(weights @ nodes, mean, rtol=0, atol=1e-14)
    xc = nodes - mean
    torch.testing.assert_close(xc.T @ (weights[:, None] * xc), cov, rtol=0, atol=1e-14)
    a = torch.linspace(0.3, -0.4, mean.shape[0], dtype=F64)
    fourth = weights @ (xc @ a) ** 4  # E (a^T (X - m))^4 = 3 (a^T cov a)^2 for a Gaussian
    assert abs(float(fourth) - 3 * float(a @ cov @ a) ** 2) < 1e-13


def test_rule_nodes_of_a_singular_gaussian_stay_on_its_range():
    nodes, _ = limits.gauss_hermite_rule(torch.zeros(3, dtype=F64), GAMMA_B, 6)
    null = torch.cat([_t([0.8, -0.6]), _t([-1.0])])  # GAMMA_B @ null = 0
    assert nodes.shape == (36, 3)  # 6^rank nodes, rank 2
    assert float((nodes @ null).abs().max()) < 1e-12


def test_rule_rejects_bad_inputs():
    with pytest.raises(ValueError, match="n_nodes"):
        limits.gauss_hermite_rule(M_A, GAMMA_A, 0)
    with pytest.raises(ValueError, match="exceeds"):
        limits.gauss_hermite_rule(torch.zeros(4, dtype=F64), torch.eye(4, dtype=F64), 60)
    with pytest.raises(ValueError, match="positive semi-definite"):
        limits.gauss_hermite_rule(M_A, -GAMMA_A, 5)
    with pytest.raises(ValueError, match="cov must have shape"):
        limits.gauss_hermite_rule(M_A, torch.eye(2, dtype=F64), 5)
    with pytest.raises(TypeError, match="mean"):
        limits.gauss_hermite_rule([0.0, 0.0], torch.eye(2, dtype=F64), 5)


# -- check 1: quadrature against the closed form ------------------------------------------------------

@pytest.mark.parametrize("name", list(LAWS))
def test_quadrature_matches_lemma_2_1(gen, name):
    mean, cov = LAWS[name]
    queries, U_q, V_q = _problem(gen, mean, cov)
    quad = limits.quadrature_attention_limit(queries, U_q, V_q, mean, cov, n_nodes=60)
    closed = sl.gaussian_attention_limit(queries, U_q, V_q, mean, cov)
    # truncation of the 60-point rule is < 1e-20 for these |B^T U z| (< 6); what remains is rounding
    assert float((quad - closed).abs().max()) < 1e-10


WRONG_LIMITS = {
    "mean dropped": lambda q, U, V, m, G: q @ U.T @ G @ V.T,
    "U transposed": lambda q, U, V, m, G: (m + q @ U @ G) @ V.T,
    "linear-attention limit V(G + m m^T) U z": lambda q, U, V, m, G: q @ U.T @ (G + torch.outer(m, m)) @ V.T,
    "offset of 1e-8": lambda q, U, V, m, G: sl.gaussian_attention_limit(q, U, V, m, G) + 1e-8,
}


@pytest.mark.parametrize("wrong", list(WRONG_LIMITS))
def test_quadrature_check_fails_for_a_wrong_formula(gen, wrong):
    """The chapter asserts max |quadrature - closed form| < 1e-10; each wrong formula must break it."""
    mean, cov = LAWS["shifted full rank"]
    queries, U_q, V_q = _problem(gen, mean, cov)
    quad = limits.quadrature_attention_limit(queries, U_q, V_q, mean, cov, n_nodes=60)
    assert float((quad - WRONG_LIMITS[wrong](queries, U_q, V_q, mean, cov)).abs().max()) > 1e-10


def test_quadrature_of_non_gaussian_shaped_limit_is_not_affine(gen):
    """Sanity of the method: quadrature values are affine in z exactly when the closed form says so."""
    mean, cov = LAWS["regression tokens"]
    z0, z1 = torch.randn(2, 3, generator=gen, dtype=F64)
    pts = torch.stack([z0, 0.5 * (z0 + z1), z1])
    T = limits.quadrature_attention_limit(pts, U, V, mean, cov, n_nodes=40)
    torch.testing.assert_close(T[1], 0.5 * (T[0] + T[2]), rtol=0, atol=1e-12)


def test_quadrature_validates_queries():
    with pytest.raises(ValueError, match="queries must have shape"):
        limits.quadrature_attention_limit(Z[0], U, V, M_A, GAMMA_A)
    with pytest.raises(ValueError, match="last dimension"):
        limits.quadrature_attention_limit(torch.zeros(2, 2, dtype=F64), U, V, M_A, GAMMA_A)


# -- check 2: Monte Carlo and the fitted rate -----------------------------------------------------------

def test_fit_recovers_an_exact_power_law():
    base = torch.randn(50, 1, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    lengths = [10, 100, 1000, 10_000]
    fit = limits.fit_rmse_rate(lengths, [L**-0.3 * base for L in lengths])
    assert abs(fit.slope + 0.3) < 1e-12 and fit.chi2_reduced < 1e-20  # identical shapes: exact line
    expected = torch.tensor([L**-0.3 for L in lengths], dtype=F64) * fit.rmse[0] / 10**-0.3
    torch.testing.assert_close(fit.rmse, expected)


def test_fit_slope_error_is_calibrated():
    """Gaussian errors with variance 1/L: across 200 seeds the fitted slope is -1/2 within its s.e. about 68%
    of the time (binomial s.e. ~3.3%, allow 4 s.e.) and the mean of (slope + 1/2)/se is near 0."""
    lengths, P = [10, 100, 1000, 10_000], 40
    zs = []
    gen = torch.Generator().manual_seed(1)
    for _ in range(200):
        errs = [torch.randn(P, 1, 2, generator=gen, dtype=F64) / math.sqrt(L) for L in lengths]
        fit = limits.fit_rmse_rate(lengths, errs)
        zs.append((fit.slope + 0.5) / fit.slope_se)
    zs = torch.tensor(zs)
    assert abs(float((zs.abs() < 1).double().mean()) - 0.683) < 4 * 0.033
    assert abs(float(zs.mean())) < 4 / math.sqrt(200) + 0.05  # delta-method log bias is O(1/P)


def _chapter_mc_checks(errors, lengths):
    """The chapter's two Monte Carlo assertions, returned as booleans (same tolerances)."""
    fit = limits.fit_rmse_rate(lengths, errors)
    slope_ok = abs(fit.slope + 0.5) < 4 * fit.slope_se and abs(fit.slope + 0.5) < 0.1
    e = errors[-1][:, 0]
    bias_ok = bool((e.mean(0).abs() < 4 * e.std(0) / math.sqrt(e.shape[0])).all())
    return slope_ok, bias_ok


@pytest.mark.parametrize("law", ["shifted full rank", "regression tokens"])
def test_monte_carlo_checks_pass_for_lemma_2_1_and_fail_for_a_wrong_limit(law):
    """Fast-mode sizes of the chapter. With the right limit both checks pass; with the limit moved by 0.05
    (well above the fast-mode detection limit, about 0.01) the mean-error check fails; with the mean
    dropped from the formula both fail."""
    mean, cov = LAWS[law]
    mu = sl.GaussianMeasure(mean, cov)
    lengths, prompts = [100, 1000, 10_000], [400, 200, 50]
    gen = torch.Generator().manual_seed(0)
    outs = [limits.finite_prompt_outputs(mu, Z, U, V, L, P, generator=gen) for L, P in zip(lengths, prompts)]
    right = sl.gaussian_attention_limit(Z, U, V, mean, cov)
    assert _chapter_mc_checks([o - right for o in outs], lengths) == (True, True)
    assert _chapter_mc_checks([o - (right + 0.05) for o in outs], lengths)[1] is False
    if float(mean.abs().max()) > 0:
        no_mean = Z @ U.T @ cov @ V.T
        assert _chapter_mc_checks([o - no_mean for o in outs], lengths) == (False, False)


def test_finite_prompt_outputs_match_softmax_and_linear_attention():
    mu = sl.GaussianMeasure(M_A, GAMMA_A)
    queries = _t([[1.0, 0.0, 0.0], [0.0, 1.0, -1.0]])
    for kind, fn in (("softmax", sl.softmax_attention), ("linear", sl.linear_attention)):
        outs = limits.finite_prompt_outputs(mu, queries, U, V, 30, 5, attention=kind, max_batch_tokens=10**6,
                                            generator=torch.Generator().manual_seed(3))
        tokens = mu.sample(150, generator=torch.Generator().manual_seed(3)).reshape(5, 30, 3)
        torch.testing.assert_close(outs, fn(tokens, queries.expand(5, 2, 3), U, V))


def test_finite_prompt_outputs_batches_and_per_prompt_queries():
    mu = sl.GaussianMeasure(M_A, GAMMA_A)
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(7, 1, 3, generator=gen, dtype=F64)
    outs = limits.finite_prompt_outputs(mu, q, U, V, 50, 7, generator=gen, max_batch_tokens=100,
                                        chunk_size=16)
    assert outs.shape == (7, 1, 2) and torch.isfinite(outs).all()
    # An empirical law with one atom: every prompt is that token, so the output is V times it, per query.
    atom = sl.EmpiricalMeasure(_t([[1.0, 2.0, 3.0]]))
    one = limits.finite_prompt_outputs(atom, q, U, V, 4, 7, generator=gen)
    torch.testing.assert_close(one, (V @ _t([1.0, 2.0, 3.0])).expand(7, 1, 2))


def test_finite_prompt_outputs_rejects_bad_inputs():
    mu = sl.GaussianMeasure(M_A, GAMMA_A)
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(TypeError, match="generator"):
        limits.finite_prompt_outputs(mu, Z, U, V, 10, 2, generator=None)
    with pytest.raises(ValueError, match="L must be a positive integer"):
        limits.finite_prompt_outputs(mu, Z, U, V, 0, 2, generator=gen)
    with pytest.raises(ValueError, match="attention must be"):
        limits.finite_prompt_outputs(mu, Z, U, V, 10, 2, generator=gen, attention="relu")
    with pytest.raises(ValueError, match="queries must have shape"):
        limits.finite_prompt_outputs(mu, torch.zeros(3, 1, 3, dtype=F64), U, V, 10, 2, generator=gen)
    with pytest.raises(ValueError, match="last dimension"):
        limits.finite_prompt_outputs(mu, torch.zeros(1, 2, dtype=F64), U, V, 10, 2, generator=gen)
    with pytest.raises(TypeError, match="measure"):
        limits.finite_prompt_outputs("gauss", Z, U, V, 10, 2, generator=gen)


def test_fit_rejects_bad_inputs():
    e = [torch.ones(3, 1) * k for k in (1.0, 2.0, 3.0)]
    with pytest.raises(ValueError, match="at least three"):
        limits.fit_rmse_rate([1, 2], e[:2])
    with pytest.raises(ValueError, match="distinct"):
        limits.fit_rmse_rate([1, 1, 2], e)
    with pytest.raises(ValueError, match="one tensor per length"):
        limits.fit_rmse_rate([1, 2, 3, 4], e)
    with pytest.raises(ValueError, match="identically zero"):
        limits.fit_rmse_rate([1, 2, 3], [torch.zeros(3, 1)] * 3)
    with pytest.raises(ValueError, match="vary across prompts"):
        limits.fit_rmse_rate([1, 2, 3], e)


# -- check 3: the tilted law ---------------------------------------------------------------------------

def test_tilted_moments_of_a_prompt_are_softmax_attention(gen):
    x = torch.randn(40, 3, generator=gen, dtype=F64)
    a = _t([0.3, -0.2, 0.5])
    tm = limits.tilted_moments(x, a)
    eye = torch.eye(3, dtype=F64)
    # with U = I the tilt direction is the query itself
    torch.testing.assert_close(tm.mean, sl.softmax_attention(x, a[None], eye, eye)[0])
    torch.testing.assert_close(tm.cov, sl.EmpiricalMeasure(x).tilted_covariance(a))  # Hessian of log-MGF
    p = torch.softmax(x @ a, 0)
    assert abs(tm.ess - float(1 / (p**2).sum())) < 1e-9


def test_tilted_standard_errors_are_calibrated():
    """Across 300 independent sample sets of N = 3000, (estimate - truth)/se is about standard normal:
    its standard deviation is 1 within 4 x its own sampling s.e. (~0.04) plus 0.05 for the delta method."""
    mu = sl.GaussianMeasure(M_A, GAMMA_A)
    a = _t([0.6, -0.4, 0.5])
    gen = torch.Generator().manual_seed(5)
    zm, zc = [], []
    for _ in range(300):
        tm = limits.tilted_moments(mu.sample(3000, generator=gen), a)
        zm.append((tm.mean - (M_A + GAMMA_A @ a)) / tm.mean_se)
        zc.append(((tm.cov - GAMMA_A) / tm.cov_se).flatten())
    for zs in (torch.stack(zm), torch.stack(zc)):
        assert (abs(zs.std(0) - 1) < 4 * 0.041 + 0.05).all()


@pytest.mark.parametrize("law", ["shifted full rank", "regression tokens"])
def test_tilt_check_passes_for_lemma_and_fails_for_wrong_tilted_law(law):
    """The chapter's check (4 s.e. per entry, + 1e-12) at its fast-mode size, and two wrong tilted laws:
    the mean moved by Gamma a / 2 instead of Gamma a, and a covariance that changed with the tilt."""
    mean, cov = LAWS[law]
    a = _t([0.6, -0.4, 0.5])
    samples = sl.GaussianMeasure(mean, cov).sample(100_000, generator=torch.Generator().manual_seed(0))
    tm = limits.tilted_moments(samples, a)

    def passes(tilted_mean, tilted_cov):
        return bool(((tm.mean - tilted_mean).abs() < 4 * tm.mean_se + 1e-12).all()
                    and ((tm.cov - tilted_cov).abs() < 4 * tm.cov_se + 1e-12).all())

    assert passes(mean + cov @ a, cov)
    assert not passes(mean + cov @ a / 2, cov)
    assert not passes(mean + cov @ a, cov + 0.1 * torch.outer(cov @ a, cov @ a))


def test_tilted_moments_rejects_bad_inputs():
    with pytest.raises(ValueError, match="N >= 2"):
        limits.tilted_moments(torch.zeros(1, 3, dtype=F64), torch.zeros(3, dtype=F64))
    with pytest.raises(ValueError, match="a must have shape"):
        limits.tilted_moments(torch.zeros(5, 3, dtype=F64), torch.zeros(2, dtype=F64))
    with pytest.raises(ValueError, match="dtype"):
        limits.tilted_moments(torch.zeros(5, 3, dtype=F64), torch.zeros(3, dtype=torch.float32))


# -- push-forward --------------------------------------------------------------------------------------

def test_pushforward_is_the_law_of_the_affine_limit(gen):
    m_q, G_q = _t([0.5, 0.0, -0.5]), _t([[1.0, 0.2, 0.0], [0.2, 0.7, 0.1], [0.0, 0.1, 0.4]])
    mean_o, cov_o = limits.gaussian_pushforward(m_q, G_q, U, V, M_A, GAMMA_A)
    A = V @ GAMMA_A @ U
    torch.testing.assert_close(mean_o, V @ M_A + A @ m_q)
    torch.testing.assert_close(cov_o, A @ G_q @ A.T)
    # Sample: the exact limit at 200 000 Gaussian queries has this mean and covariance (s.e. ~1e-3; 5e-3).
    q = sl.GaussianMeasure(m_q, G_q).sample(200_000, generator=gen)
    n = q.shape[0]
    out = sl.gaussian_attention_limit(q[:, None], U, V, M_A.expand(n, 3), GAMMA_A.expand(n, 3, 3))[:, 0]
    torch.testing.assert_close(out.mean(0), mean_o, rtol=0, atol=5e-3)
    torch.testing.assert_close(torch.cov(out.T), cov_o, rtol=0, atol=5e-3)


def test_pushforward_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="query_mean"):
        limits.gaussian_pushforward(_t([0.0, 0.0]), torch.eye(2, dtype=F64), U, V, M_A, GAMMA_A)
    with pytest.raises(ValueError, match="U must have shape"):
        limits.gaussian_pushforward(M_A, GAMMA_A, torch.eye(2, dtype=F64), V, M_A, GAMMA_A)


# -- the explorer's plotting function ------------------------------------------------------------------

def test_plot_prompt_cloud_draws_outputs_around_the_limit():
    fig, (ax0, ax1) = plt.subplots(1, 2)
    short = limits.plot_prompt_cloud(ax0, 10, 1.0, n_prompts=80, seed=1)
    long = limits.plot_prompt_cloud(ax1, 10_000, 1.0, n_prompts=80, seed=1)
    U_c = limits.CLOUD_U
    torch.testing.assert_close(long["limit"], limits.CLOUD_COV @ U_c @ limits.CLOUD_QUERY[0])
    assert short["outputs"].shape == (80, 2)
    xs, ys = ax0.lines[0].get_data()
    assert len(xs) == 80 and len(ax0.lines) == 2  # the cloud and the limit star
    assert "L = 10" in ax0.get_title() and "scale = 1" in ax0.get_title()
    # RMS distance ~ sqrt(C / L): 1000x more tokens shrink it ~30x; allow a factor 2 either way (80 prompts)
    assert 15 < short["rms"] / long["rms"] < 60
    plt.close(fig)


def test_plot_prompt_cloud_scale_zero_gives_the_token_mean_limit():
    fig, ax = plt.subplots()
    out = limits.plot_prompt_cloud(ax, 50, 0.0, n_prompts=5)
    torch.testing.assert_close(out["limit"], limits.CLOUD_MEAN)
    plt.close(fig)


@pytest.mark.parametrize("kwargs, err", [
    ({"L": 0, "scale": 1.0}, ValueError), ({"L": 10, "scale": -1.0}, ValueError),
    ({"L": 10, "scale": float("nan")}, ValueError), ({"L": 10, "scale": 1.0, "seed": 1.5}, TypeError),
])
def test_plot_prompt_cloud_rejects_bad_parameters(kwargs, err):
    fig, ax = plt.subplots()
    with pytest.raises(err):
        limits.plot_prompt_cloud(ax, **kwargs)
    plt.close(fig)


# -- the chapter itself fails when the formula is wrong ------------------------------------------------

@pytest.mark.book
def test_chapter_2_fails_when_lemma_2_1_is_perturbed():
    """Execute chapter 2 (fast mode) with `softlin.gaussian_attention_limit` replaced by the formula plus
    1e-6: far below what Monte Carlo could see, yet the chapter must stop with an AssertionError at its
    quadrature check."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = jupytext.read(ROOT / "book" / "02_infinite_prompt_limit.md")
    i = next(k for k, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    patch = ("mode = 'fast'\nimport softlin\n_right = softlin.gaussian_attention_limit\n"
             "softlin.gaussian_attention_limit = lambda *args: _right(*args) + 1e-6")
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(patch))
    nb.cells = [c for c in nb.cells if "google.colab" not in c.source]
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}})
    with pytest.raises(CellExecutionError) as info:
        client.execute()
    msg = str(info.value)
    assert "AssertionError" in msg and "quad_errors[name] < 1e-10" in msg
