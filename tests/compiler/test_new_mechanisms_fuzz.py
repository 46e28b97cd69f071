"""Property: any SRPP-SGD / relational DP-SGD spec with arbitrary (valid-looking or not) numbers either compiles to
a certificate that verifies and meets its target, or fails with located rule diagnostics — never an internal
error, never a certificate above the target."""

import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.families.relational_dpsgd.rules import spec as rel_spec

SRPP = """scenario s {{ secret share in {{low, high}} }}
train t {{
  protect s  mechanism srpp_sgd  dataset_size {n}  discrepancy {disc}  sampling {sampling}
  clipping flat(C = {clip})  steps {steps}  learning_rate {lr}  momentum {mom}  noise_units {units}
  guarantee {g}(alpha = {alpha}, epsilon = {eps})
}}
"""


def _certificate_or_clean_failure(text: str, label: str):
    """The first certificate entry, or None after checking that every error is a located rule diagnostic."""
    spec = dpspec.loads(text, name="fuzz.dps")
    event(f"{label}: {'check error' if not spec.ok else 'checked'}")
    if not spec.ok:
        assert all(d.rule.startswith("DPS") and d.span is not None for d in spec.diagnostics if d.severity == "error")
        return None
    try:
        c = dpspec.compile(spec)
    except dpspec.SpecError as e:
        assert all(d.rule.startswith("DPS") for d in e.diagnostics)
        return None
    event(f"{label}: certificate")
    return c.certificate.results[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(100, 5000), delta=st.integers(0, 150), b=st.integers(1, 300),
       clip=st.one_of(st.just(0), st.floats(0.01, 10)), steps=st.integers(1, 400),
       lr=st.one_of(st.just(-1), st.floats(1e-4, 2)), mom=st.sampled_from([0, 0.5, 0.9, 0.99]),
       units=st.sampled_from(["gradient", "parameter"]),
       g=st.sampled_from(["ave_srpp", "joint_srpp", "sa_ave_srpp", "sa_joint_srpp"]),
       alpha=st.one_of(st.just(1), st.floats(1.01, 64)), eps=st.one_of(st.just(0), st.floats(0.01, 1e3)),
       kind=st.sampled_from(["label_flip(differing = {d})", "localized(d_max = {d})", "iid(tv = {tv})",
                             "iid(tv = {tv}, tail_delta = 1e-7)"]),
       scheme=st.sampled_from(["without_replacement(batch_size = {b})", "poisson(expected_batch = {b})",
                               "with_replacement(batch_size = {b})", "full_batch"]),
       tv=st.floats(0, 1.2))
def test_srpp_specs_compile_or_fail_cleanly(n, delta, b, clip, steps, lr, mom, units, g, alpha, eps, kind, scheme, tv):
    text = SRPP.format(n=n, disc=kind.format(d=delta, tv=tv), sampling=scheme.format(b=b), clip=clip, steps=steps,
                       lr=lr, mom=mom, units=units, g=g, alpha=alpha, eps=eps)
    r = _certificate_or_clean_failure(text, "srpp")
    if r is None:
        return
    assert math.isfinite(r.guarantee.epsilon) and r.guarantee.epsilon <= eps * (1 + 1e-12)
    assert r.notion.name.startswith("sa_") == g.startswith("sa_")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(1, 80), k=st.integers(0, 5), cap=st.integers(0, 8), nm=st.floats(0.3, 50),
       clip=st.sampled_from(["per_tuple(C = 1.0)", "per_tuple(C = 2.0, threshold = standard)",
                             "frequency_adaptive(C = 1.0)"]))
def test_relational_specs_compile_or_fail_cleanly(batch, k, cap, nm, clip):
    text = rel_spec(negative=f"without_replacement(per_positive = {k})", positive=f"poisson(expected_batch = {batch})",
                    cap=f"degree_cap {cap}\n  ", clip=clip).replace(
        "  guarantee  dp(epsilon = 4, delta = 1e-5)", f"  noise_multiplier {nm!r}\n  guarantee  dp(delta = 1e-5)")
    r = _certificate_or_clean_failure(text, "relational")
    if r is None:
        return
    assert math.isfinite(r.guarantee.epsilon) and r.guarantee.epsilon >= 0
    p = r.mechanism.parameters
    assert r.guarantee.epsilon <= min(v for key, v in p.items() if key.startswith("epsilon_")) * (1 + 1e-12)

