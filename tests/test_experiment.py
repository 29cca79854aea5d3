"""softlin.experiment, the paper's Section 5 experiment written once, and the large-prompt constants of
lesson 6 (softlin.icl.large_prompt_constants) against independent computations:

- the protocol holds the authors' settings, and a results file's settings give it back;
- the committed file's trained models, rebuilt from their effective matrices, reproduce its errors;
- the block ratios are invariant under the symmetries of the weights and vanish for the reduced model;
- C_lin agrees with the first-order expansion of the linear class optimum derived by hand (lesson 6's
  exercise), and C_soft with a Monte Carlo simulation of the reduced softmax model at the best scale,
  extrapolated over four prompt lengths; the Bayes risk's constant with a simulation of ridge.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from softlin import experiment, icl
from softlin.montecarlo import fit_limit, mean_and_stderr

P = experiment.INTENDED


def test_the_protocol_holds_the_authors_settings():
    assert (P.d, P.rho, P.tau2, P.noise_var, P.lr, P.batch, P.steps) == (
        5,
        0.5,
        0.2,
        0.1,
        1e-3,
        128,
        300_000,
    )
    assert P.lengths == tuple(range(10, 100, 10)) + tuple(range(100, 1001, 100))
    assert experiment.RELEASED == P.replace(released=True, separate_starts=True)
    assert P.name == "intended" and experiment.RELEASED.name == "released"
    run = experiment.load_results()["intended"][100]
    assert run.protocol == P.replace(n_test=run.protocol.n_test)
    with pytest.raises(ValueError, match="lr"):
        P.replace(lr=0.0)


def test_the_committed_models_reproduce_the_files_errors():
    """The file keeps each start's effective matrices to 4 digits and its test error to 6: the rebuilt
    models' errors on the same 8 192 test prompts agree to about 1e-3 relative (the 4-digit rounding
    of the weights moves them by that much at most)."""
    run = experiment.load_results()["intended"][10]
    ev = experiment.evaluate(run.models(), run.protocol, 10, baselines=False)
    for kind in ("softmax", "linear"):
        np.testing.assert_allclose(
            ev.errors(kind).mean(1).numpy(), getattr(run.final_mse, kind), rtol=2e-3
        )


def test_block_ratios_are_invariant_and_vanish_for_the_reduced_model(gen):
    U = torch.randn(3, 6, 6, generator=gen, dtype=torch.float64)
    v = torch.randn(3, 6, generator=gen, dtype=torch.float64)
    for a, b in zip(experiment.block_ratios(U, v), experiment.block_ratios(2.5 * U, -0.3 * v)):
        torch.testing.assert_close(a, b)
    A, b = icl.bayes_optimal_parameters(icl.kms_covariance(5, 0.5))
    U_red, V_red = icl.reduced_attention_matrices(A, b)
    label_row, readout = experiment.block_ratios(U_red, V_red[-1])
    assert float(label_row) == 0 and float(readout) == 0
    assert float(experiment.zero_block_size(U, v)[0]) == float(
        sum(x[0] for x in experiment.block_ratios(U, v))
    )


@pytest.mark.parametrize("which", ["kms", "random"])
def test_the_linear_constant_is_the_hand_expansion(which, gen):
    """C_lin = tau^2 (d + 1) tr Sigma (lesson 6's exercise: H^-1 to first order in 1/L); the library
    reads it off the closed-form class optimum by Richardson extrapolation (its O(L^-2) remainder at
    L = 10^6 is below 1e-9)."""
    if which == "kms":
        Sigma = P.covariance()
    else:
        G = torch.randn(4, 4, generator=gen, dtype=torch.float64)
        Sigma = G @ G.T + 0.5 * torch.eye(4, dtype=torch.float64)
    c = icl.large_prompt_constants(Sigma, tau2=0.3, noise_var=0.2)
    d = Sigma.shape[0]
    assert abs(c.linear - 0.3 * (d + 1) * float(Sigma.trace())) < 1e-6
    assert c.bayes == pytest.approx(0.2 * d) and c.ratio == pytest.approx(c.softmax / c.linear)
    assert 0 < c.scale < float(icl.bayes_optimal_parameters(Sigma)[1]) / math.sqrt(2)


def test_the_softmax_constant_matches_monte_carlo_at_the_best_scale():
    """L (error - noise) of the reduced softmax model at (r* A*, b*/r*), simulated with the task and
    noise integrated exactly (icl.finite_prompt_risk), at four lengths, extrapolated by a fit c + D/L
    (montecarlo.fit_limit): the intercept must match the delta-method V(r*) = C_soft + gamma^2 d within
    4 standard errors. The delta method and the simulation share nothing but the model."""
    Sigma = P.covariance()
    c = icl.large_prompt_constants(Sigma, tau2=P.tau2, noise_var=P.noise_var)
    A, b = icl.bayes_optimal_parameters(Sigma)
    gen = torch.Generator().manual_seed(11)
    Ls, values, errors = [250, 500, 1000, 2000], [], []
    for L in Ls:
        R, se = icl.finite_prompt_risk(
            c.scale * A,
            b / c.scale,
            Sigma.float(),
            L,
            n_prompts=12_000,
            generator=gen,
            tau2=P.tau2,
            noise_var=P.noise_var,
            dtype=torch.float32,
        )
        values.append(L * (2 * R - P.noise_var))
        errors.append(2 * L * se)
    fit = fit_limit(Ls, values, errors)
    assert abs(fit.limit - (c.softmax + c.bayes)) < 4 * fit.limit_stderr, (fit, c)
    # and away from the tilt the constant is larger: r* is the minimum
    V = [
        2 * icl.risk_fluctuation_constant(r * A, b / r, Sigma, tau2=P.tau2, noise_var=P.noise_var)
        for r in (0.9 * c.scale, c.scale, 1.1 * c.scale)
    ]
    assert V[1] < V[0] and V[1] < V[2]


def test_the_bayes_constant_matches_a_simulation_of_ridge():
    """L (Bayes risk - noise) -> noise d, from E (X^T X)^-1 = Sigma^-1 / (L - d - 1); at L = 2 000 the
    relative correction is about (d + 1) / L: allowed as 10 noise d^2 / L, plus 4 SE."""
    L = 2_000
    p = icl.sample_prompts(
        P.covariance(),
        L,
        3_000,
        tau2=P.tau2,
        noise_var=P.noise_var,
        generator=torch.Generator().manual_seed(12),
    )
    risk, _ = experiment.bayes_errors(p, tau2=P.tau2, noise_var=P.noise_var)
    m, se, _ = mean_and_stderr(L * (risk - P.noise_var))
    target = icl.large_prompt_constants(P.covariance(), tau2=P.tau2, noise_var=P.noise_var).bayes
    assert abs(m - target) < 4 * se + 10 * P.noise_var * P.d**2 / L, (m, se, target)


def test_train_and_evaluate_refuse_what_is_not_a_protocol():
    with pytest.raises(TypeError, match="protocol must be a Protocol"):
        experiment.train({"steps": 3}, 10)
    with pytest.raises(TypeError, match="protocol must be a Protocol"):
        experiment.evaluate(experiment.INTENDED.initial_models(), "intended", 10)
