"""Certificate mutation fuzzing of ``dpspec verify`` (bounded budget; the long budget is
benchmarks/fuzz_certificates.py --minutes N), and the committed corpus of past findings replayed.

Properties, for every mutated and resealed certificate (tests/fuzz/certmut.py): verify never raises and
reports no internal error, stays within a time bound, never runs code named by the certificate, never
verifies a certificate whose spec names code hooks, and never accepts a document that differs from the
genuine one beyond a privacy bound rounded up by at most a relative 1e-9.
"""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import certmut

FAST_BASES = ("gaussian_release", "digits_srpp", "groups_swm", "sbm_gcon", "gen_rdp_release", "gen_two_releases",
              "gen_hooks")
CORPUS_FILES = sorted(certmut.CORPUS.glob("*.json"))


def _check(out: certmut.Outcome):
    assert out.finding is None, f"{out.finding}: {out.detail} (seed {out.case.seed}, {out.case.base}: " \
                                f"{out.case.mutations})"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_certificates_are_never_accepted_and_never_crash(seed):
    case = certmut.make_case(seed, bases=FAST_BASES)
    _check(certmut.run_case(case, seconds=20))


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_dpsgd_and_composition_certificates(seed):
    case = certmut.make_case(seed, bases=("composition", "dpsgd_records", "gen_dpsgd_wor"))
    _check(certmut.run_case(case, seconds=30))


def test_the_oracle_accepts_only_rounded_up_bounds():
    text = certmut.base_certificates()["gaussian_release"]
    doc = json.loads(text)
    assert certmut.is_legit_variant(doc, text)
    up = json.loads(text)
    up["results"][0]["guarantee"]["epsilon"] *= 1 + 1e-12
    assert certmut.is_legit_variant(doc, json.dumps(up))
    for scale in (1 - 1e-12, 1 + 1e-6):
        bad = json.loads(text)
        bad["results"][0]["guarantee"]["epsilon"] *= scale
        assert not certmut.is_legit_variant(doc, json.dumps(bad))
    bad = json.loads(text)
    bad["results"][0]["mechanism"]["parameters"]["sample_rate"] = 0.5
    assert not certmut.is_legit_variant(doc, json.dumps(bad))
    assert not certmut.is_legit_variant(doc, text[:-1] + ', "content_hash": "x"}')


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_corpus_case_is_refused(path: Path):
    """Every crash, hang, code execution or accepted edit found so far stays fixed."""
    case = certmut.Case(base="corpus", seed=-1, mutations=[path.name],
                        text=path.read_text(encoding="utf-8", errors="surrogatepass"))
    out = certmut.run_case(case, original_text="{}", seconds=30)
    assert out.finding in (None, "accepted_semantic_edit"), f"{out.finding}: {out.detail}"
    assert not out.ok, "a corpus certificate verified"
