"""The answer keys of the book's exercises, computed here so that no notebook holds them.

A chapter's check cell is ``answer_check("ex-ch1-one-token", answer, tokens=tokens, ...)``: the label
names an entry of :data:`KEYS`, and the keywords hand over the chapter's objects that the key is computed
from (the example's tokens, a chapter's own quadrature), none of which gives the answer away. A student
copy of a notebook therefore holds the exercise and its check call only; the key is computed by the
function registered here, from softlin's closed forms or a simulation, never a pasted number. The keys
ship with softlin, so a reader who opens this file finds them: the exercises are self-checks, not graded
work (the graded problem sets keep their hidden tests out of softlin).
"""

# ruff: noqa: RUF001 (the step hints write their mathematics in Unicode)
from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import dataclass, field

import numpy as np
import torch

import softlin as sl
from softlin import concentration as cc
from softlin import icl
from softlin import stability as st

__all__ = ["KEYS", "Key", "key_of"]


@dataclass(frozen=True)
class Key:
    """One exercise's key: ``compute(*args, **objects)``, its tolerances (``digits``: the significant
    digits the exercise's statement asks for, which then decide), hint and test inputs."""

    compute: object
    rtol: float = 1e-6
    atol: float = 0.0
    digits: int | None = None  # the precision the exercise asks ("to three significant digits")
    hint: str = ""
    inputs: list | None = None  # argument tuples when the answer is a function
    objects: tuple = field(default=())  # the chapter objects ``compute`` needs, by keyword
    # a function answer whose exercise also asks for one value ("evaluate it at u = 0.5"): the
    # arguments of that value and how the site names it ("C(0.5)"); the site's answer box asks for it
    site_at: tuple | None = None
    site_what: str = ""
    # the exercise's "show that" part, as hints a reader unfolds one at a time (plain text, Unicode
    # mathematics: they show in every front end); the check cell shows them while it has no answer
    steps: tuple[str, ...] = ()


#: Every exercise with a numerical answer, by its label in the book.
KEYS: dict[str, Key] = {}


def _key(label: str, **options):
    def register(fn):
        names = tuple(
            p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY
        )
        KEYS[label] = Key(fn, objects=names, **options)
        return fn

    return register


def key_of(label: str) -> Key:
    """The registered key of exercise ``label``; KeyError with the known labels if there is none."""
    if not isinstance(label, str):
        raise TypeError(f"label must be an exercise label (str), got {type(label).__name__}")
    try:
        return KEYS[label]
    except KeyError:
        raise KeyError(
            f"no answer key for exercise {label!r}; known labels: {', '.join(sorted(KEYS))}"
        ) from None


# --- Chapter 1 --------------------------------------------------------------------------------------


@_key(
    "ex-ch1-one-token",
    digits=3,
    hint="Hint: how many weights does a one-token softmax have, what do they sum to?",
)
def _ch1_one_token(*, tokens, query, U, V):
    return sl.softmax_attention(tokens[:1], query, U, V)[0]


@_key(
    "ex-ch1-query-key",
    digits=3,
    hint="Hint: let L grow in the exact expression; the moment generating function of "
    "N(0, Gamma) is exp(a'Gamma a / 2).",
)
def _ch1_query_key(*, mu, z, U2, V2):
    a = U2 @ z[0]
    weight = torch.exp(z[0] @ a - mu.log_mgf(a))  # e^{z'Uz} / M_mu(Uz)
    return weight * (V2 @ z[0] - sl.attention_limit(mu, z, U2, V2)[0])


# --- Chapter 2 (default dtype, as the chapter's own tensors) ------------------------------------------


@_key(
    "ex-ch2-mixture",
    digits=3,
    inputs=[
        (torch.linspace(-3, 3, 13, dtype=torch.float64),),
        (torch.tensor([0.1, 5.0], dtype=torch.float64),),
    ],
    hint="Hint: the MGF of a mixture is the mixture of the MGFs; take the log's slope.",
    site_at=(torch.tensor([1.0], dtype=torch.float64),),
    site_what="T[μ](1), the limit at the query z = 1",
)
def _ch2_mixture(q):
    one = torch.eye(1)
    mixture = sl.GaussianMixtureMeasure(
        torch.tensor([[-1.5], [1.5]]), torch.ones(2, 1, 1), torch.tensor([0.5, 0.5])
    )
    return sl.attention_limit(mixture, q[:, None], 0.7 * one, one)[:, 0]


@_key("ex-ch2-agree", digits=3, hint="Hint: the two limits differ by V(m - m m^T U z).")
def _ch2_agree():
    """Where V(m + Gamma U z) = V(Gamma + m m^T) U z in D = 1, m = 2, Gamma = 1, U = 0.3, V = 1."""
    one = torch.eye(1)
    mu1 = sl.GaussianMeasure(2 * torch.ones(1), torch.eye(1))

    def gap(q):
        return float(
            (
                sl.attention_limit(mu1, q, 0.3 * one, one)
                - sl.linear_attention_limit(mu1, q, 0.3 * one, one)
            )[0, 0]
        )

    g0, g1 = gap(torch.zeros(1, 1)), gap(torch.ones(1, 1))
    return -g0 / (g1 - g0)  # the root of an affine function


@_key(
    "ex-ch2-wrong-limit",
    digits=3,
    hint="Hint: where do the outputs converge, how far is that from 1.5?",
)
def _ch2_wrong_limit():
    one = torch.eye(1)
    limit = sl.attention_limit(sl.RademacherMeasure(1), torch.ones(1, 1), 1.5 * one, one)
    return abs(float(limit) - 1.5)


# --- Chapter 3 --------------------------------------------------------------------------------------


@_key(
    "ex-ch3-constant",
    digits=3,
    inputs=[(0.1,), (0.3,), (0.5,), (0.65,)],
    hint="Hint: differentiate E exp(u^2 z^2) = (1 - 2u^2)^(-1/2) with respect to u^2.",
    site_at=(0.5,),
    site_what="C(0.5)",
)
def _ch3_constant(u):
    one = torch.ones(1, 1, dtype=torch.float64)
    return cc.query_averaged_expansion(u * one, one, one)[0]


@_key(
    "ex-ch3-sigma",
    digits=3,
    inputs=[(1.5, 0.6), (2.0, 0.5), (1.0, 1.5), (3.0, 0.4)],
    hint="Hint: the tokens enter only through the scores x_i (sigma u) z.",
    site_at=(1.5, 0.6),
    site_what="the exponent at sigma = 1.5, u = 0.6",
)
def _ch3_sigma(sigma, u):
    return float(cc.heuristic_rate_exponent(sigma * u))


@_key(
    "ex-ch3-bounded",
    digits=3,
    inputs=[(0.0,), (0.5,), (1.0,), (2.5,)],
    hint="Hint: the tilted law puts mass e^(±a) / (2 cosh a) on ±1.",
    site_at=(1.0,),
    site_what="the constant at the tilt a = 1",
)
def _ch3_bounded(a):
    """e^{Lambda(2a) - 2 Lambda(a)} (Var_{2a} + (m_{2a} - m_a)^2) for Rademacher tokens."""
    rad = sl.RademacherMeasure(1)
    t = torch.tensor([[a], [2 * a]], dtype=torch.float64)
    lam, m = rad.log_mgf(t), rad.tilted_mean(t)[:, 0]
    var = rad.tilted_covariance(t)[1, 0, 0]
    return float(torch.exp(lam[1] - 2 * lam[0]) * (var + (m[1] - m[0]) ** 2))


# --- Chapter 4 --------------------------------------------------------------------------------------


@_key("ex-ch4-gronwall", digits=3, hint="Hint: divide (e^x - 1)/x by e^x at x = 5.")
def _ch4_gronwall():
    t = np.linspace(0.0, 5.0, 501)  # beta_inf = 1, so beta_inf t runs up to 5
    lemma_d1 = 0.3 * t[-1] * math.exp(t[-1])  # g t e^{beta_inf t}
    return st.gronwall_envelope(t, 0.3, 1.0)[-1] / lemma_d1


# --- Chapter 5 --------------------------------------------------------------------------------------


@_key(
    "ex-ch5-invariant",
    rtol=1e-6,
    digits=4,
    hint="Hint: the flow keeps ||A||_F^2 - b^2; at the limit, b Sigma A = I.",
)
def _ch5_invariant(*, Sigma):
    d = Sigma.shape[0]
    A0, b0 = 0.3 * torch.eye(d, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64)
    # the slowest local rate is about 0.23: by t = 100 the flow is within e^-23 of its limit
    return icl.infinite_prompt_flow(A0, b0, Sigma, [0.0, 100.0], rtol=1e-8, atol=1e-10).b[-1]


@_key(
    "ex-ch5-linear",
    rtol=1e-6,
    digits=3,
    hint="Hint: the risk is quadratic in the product bA; on an eigenvector of Sigma every matrix "
    "in it is a number.",
)
def _ch5_linear(*, Sigma):
    G = (1 + 1 / 30) * Sigma @ Sigma + torch.trace(Sigma) * Sigma / 30
    one = torch.tensor(1.0, dtype=torch.float64)
    bA = torch.linalg.solve(G, Sigma)
    grid = [icl.linear_finite_prompt_risk(s * bA, one, Sigma, 30) for s in (0.999, 1.0, 1.001)]
    if not grid[1] <= min(grid[0], grid[2]):  # the stationary point is the minimum along the ray
        raise RuntimeError("ex-ch5-linear: the key is not the minimum along its ray")
    return float(torch.linalg.eigvals(Sigma @ bA).real.min())  # the smallest of b Sigma A


@_key(
    "ex-ch5-tail",
    rtol=1e-9,
    digits=3,
    inputs=[(5,), (8,), (16,)],
    hint="Hint: |x_q|^2 is chi-squared with d degrees of freedom, and E e^(t chi2_d) = "
    "(1 - 2t)^(-d/2) for t < 1/2.",
    site_at=(8,),
    site_what="the factor at d = 8",
)
def _ch5_tail(dim):
    # E exp(|a|^2) with a = A* x_q, x_q ~ N(0, I): the Gaussian integral det(I - 2 A*^T A*)^(-1/2)
    eye = torch.eye(dim, dtype=torch.float64)
    A, _ = icl.bayes_optimal_parameters(eye)
    return float(torch.linalg.det(eye - 2 * A.T @ A) ** -0.5)


# --- Chapter 6 --------------------------------------------------------------------------------------


@_key(
    "ex-ch6-linear",
    digits=3,
    hint="Hint: Sigma and H commute; per eigenvalue s of Sigma the error's term is "
    "tau^2 s / (1 + k/L) with k = 1 + (tau^2 tr Sigma + gamma^2) / (tau^2 s).",
)
def _ch6_linear():
    # the coefficient of 1/L^2 in the best linear attention's error, read off the library's exact error
    # at two long prompts (Richardson extrapolation of L^2 (error - gamma^2 - l1 / L), l1 from C_lin)
    sigma = torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    tau2, noise, d = 0.5, 1.0, 3
    l1 = icl.large_prompt_constants(sigma, tau2=tau2, noise_var=noise).linear + noise * d

    def scaled(L):
        error = float(icl.linear_class_optimum(sigma, L, tau2=tau2, noise_var=noise)[1])
        return L * L * (error - noise - l1 / L)

    return 2 * scaled(20_000) - scaled(10_000)


@_key(
    "ex-ch6-match",
    digits=3,
    hint="Hint: a test error is the Bayes risk plus the excess, and the Bayes risk has a 1/L term "
    "of its own, gamma^2 d / L.",
)
def _ch6_match():
    from softlin import experiment

    # the first-order terms of the two test errors, each read off the library's exact best
    # attention of its class (linear) or its constant (softmax), plus the ridge Bayes risk's
    P = experiment.INTENDED
    sigma = P.covariance()
    c = icl.large_prompt_constants(sigma, tau2=P.tau2, noise_var=0.5)

    def scaled(L):  # L (error - gamma^2) = l1 + l2 / L + O(L^-2), l1 = C_lin + gamma^2 d
        return L * (float(icl.linear_class_optimum(sigma, L, tau2=P.tau2, noise_var=0.5)[1]) - 0.5)

    linear = 2 * scaled(20_000) - scaled(10_000)  # Richardson: the 1/L term cancels
    return 1000 * linear / (c.softmax + 0.5 * P.d)


@_key(
    "ex-ch6-tilt",
    digits=3,
    hint="Hint: written in u^2 = r^2 / b*^2, the constant sees Sigma only through tr Sigma; "
    "what does that leave to change between the two covariances?",
)
def _ch6_tilt():
    from softlin import experiment

    P = experiment.INTENDED
    eye = torch.eye(P.d, dtype=torch.float64)
    return icl.large_prompt_constants(eye, tau2=P.tau2, noise_var=P.noise_var).scale


# --- Chapter 7 --------------------------------------------------------------------------------------


@_key(
    "ex-ch7-lookup",
    rtol=1e-9,
    digits=3,
    inputs=[(0.3,), (1.0,), (2.5,)],
    hint="Hint: on {-1, 1}, tanh(u x) is a multiple of x.",
    site_at=(1.0,),
    site_what="b(1)",
)
def _ch7_lookup(u, *, scale_profile):
    return scale_profile("Rademacher", [u])[0][0]


@_key(
    "ex-ch7-ess",
    rtol=1e-6,
    digits=3,
    hint="Hint: E e^{a x} for the uniform law on [-h, h] is sinh(h a) / (h a).",
)
def _ch7_ess():
    log_mgf = sl.UniformMeasure(1).log_mgf  # ESS / L -> exp(2 Lambda(a) - Lambda(2 a))
    tilts = torch.tensor([[1.0], [3.0]], dtype=torch.float64)  # a = 1 and a = 3
    return torch.exp(2 * log_mgf(tilts) - log_mgf(2 * tilts)).tolist()


@_key(
    "ex-ch7-floor",
    rtol=1e-9,
    digits=3,
    hint="Hint: with A = Sigma^-1 / b the tilt at x_q = m is a multiple of Sigma^-1 m.",
)
def _ch7_floor(*, m):
    sigma = torch.eye(2, dtype=torch.float64)
    A = sigma / 0.7  # b A = Sigma^-1 with b = 0.7
    a = A @ m - torch.linalg.solve(sigma, m)  # the tilt A x_q + v at x_q = m
    mu = sl.GaussianMeasure(m, sigma)  # 1 / (ESS / L) = exp(Lambda(2a) - 2 Lambda(a))
    return float(torch.exp(mu.log_mgf(2 * a) - 2 * mu.log_mgf(a)))


# --- Step hints for the "show that" parts -----------------------------------------------------------

_STEPS = {
    "ex-ch1-query-key": (
        "Write the output over the prompt as a ratio of sums, not averages: numerator "
        "N = Σᵢ e^(zᵢᵀUz) Vzᵢ, denominator D = Σᵢ e^(zᵢᵀUz) = L e^(Λ_μ̂(Uz)), so T = N/D.",
        "The query as a token adds e^(zᵀUz)·Vz to N and e^(zᵀUz) to D. Subtract N/D from the new "
        "ratio over the common denominator D(D + e^(zᵀUz)).",
        "The change's numerator stays bounded while D grows like L: the change is O(1/L). For the "
        "limit of L × change, let Λ_μ̂ → Λ_μ(a) = aᵀΓa/2 and T[μ̂_L] → VΓa, with a = Uz.",
    ),
    "ex-ch3-sigma": (
        "Write each token as zᵢ = σxᵢ with xᵢ ~ N(0, 1). What are the scores zᵢ·u·z in terms of xᵢ?",
        "The scores are xᵢ(σu)z: the weights are the standard model's at scale σu. The output, a "
        "weighted mean of σxᵢ, is σ times that model's output; check that the limit σ²uz is also σ "
        "times its limit.",
        "So the squared error is σ² times the standard model's at σu. Replace u by σu in the "
        "heuristic exponent −1/(2u²) and in its threshold u² = ½.",
    ),
    "ex-ch4-gronwall": (
        "Multiply by the integrating factor: compute (e^(−β∞t) E(t))′ and bound it with the hypothesis.",
        "Integrate that bound from 0 to t, using E(0) = 0, then multiply by e^(β∞t).",
        "For the second bound, write e^x − 1 as the integral of e^y from 0 to x and bound the integrand. "
        "For attainment, look for an E that satisfies the hypothesis with equality.",
    ),
    "ex-ch5-invariant": (
        "Differentiate: d/dt ‖A‖²_F = 2⟨A, Ȧ⟩ and d/dt b² = 2bḃ. Insert the flow's Ȧ and ḃ and "
        "compare the two traces.",
        "Zero risk: R∞ = ½ tr(ΔΣΔᵀ) with Δ = bΣA − I, and Σ is positive definite, so R∞ = 0 forces "
        "Δ = 0, that is A = Σ⁻¹/b.",
        "Balance then reads ‖Σ⁻¹‖²_F / b² = b². For an unbalanced start, the conserved value "
        "k = ‖A‖²_F − b² replaces 0: solve tr(Σ⁻²)/b² − b² = k for b² > 0.",
    ),
    "ex-ch7-ess": (
        "Write ESS/L = ((1/L)Σᵢ ωᵢ)² / ((1/L)Σᵢ ωᵢ²) with ωᵢ = e^(a xᵢ), dividing 1/Σᵢpᵢ² by L.",
        "Apply the law of large numbers to the numerator's mean and to the denominator's: their "
        "limits are e^(Λ(a)) and e^(Λ(2a)), finite when E e^(2ax) < ∞.",
        "For the uniform law, e^(Λ(a)) = sinh(√3 a)/(√3 a). At large a, compare how the tilted law "
        "piles its mass near the edge √3 with a Gaussian's, pushed ever further out.",
    ),
    "ex-ch7-floor": (
        "With the bias the tilt is a = Ax_q + a₀. By Lemma 2.1 the tilted mean of x is m + Σa: write "
        "the prediction b wᵀ(m + ΣAx_q + Σa₀).",
        "Choose a₀ so that the constant part m + Σa₀ vanishes; what is left equals wᵀx_q when bΣA = I.",
        "The effective sample size is divided by e^(aᵀΣa): evaluate the tilt at x_q = m and at x_q = 0, "
        "with and without a₀, for A = Σ⁻¹/b.",
    ),
}
for _label, _steps in _STEPS.items():
    KEYS[_label] = dataclasses.replace(KEYS[_label], steps=_steps)
