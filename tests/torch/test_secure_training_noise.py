"""Secure mode of DP-SGD (dpspec.mechanisms.secure_noise_training): the OS CSPRNG for the batches and
the noise, the noise as integer noise on a power-of-two grid added exactly.

Checked independently: the grid and its noise scale with exact fractions; the arithmetic bit for bit
against an mpmath re-implementation on mocked OS bytes; the law of the noise by a Kolmogorov–Smirnov
test on real OS bytes; every output on the grid and independent of the input's low-order bits; fresh
bytes at every step (none reused); the samplers' exact rates; the trainers' wiring and refusals; and
that a seeded (non-secure) run still draws the same noise as before."""

from __future__ import annotations

import hashlib
import math
import sys
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
from dpspec.mechanisms import secure_noise_training as sn

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings(
    "ignore::dpspec.torch.SamplingOverrideWarning", "ignore:There is a performance drop"
)

SPEC = """
privacy people {{ unit record  dataset_size 64 }}
train model {{
  protect   people
  mechanism dpsgd
  sampling  {sampling}
  clipping  flat(C = 1.0)
  steps     4
  guarantee dp(epsilon = 2, delta = 1e-5)
}}
"""
POISSON = SPEC.format(sampling="poisson(rate = 0.25)")


class Stream:
    """A deterministic stand-in for os.urandom: SHAKE-256 of a counter, consumed in order; records every
    request."""

    def __init__(self, key: bytes = b"dpspec"):
        self.key, self.pos, self.requests = key, 0, []

    def block(self, start: int, n: int) -> bytes:
        return hashlib.shake_256(self.key).digest(start + n)[start:]

    def __call__(self, n: int) -> bytes:
        out = self.block(self.pos, n)
        self.requests.append((self.pos, n))
        self.pos += n
        return out


def ceil_sqrt(d: int) -> int:
    mpmath.mp.dps = 40
    r = int(mpmath.ceil(mpmath.sqrt(d)))
    assert (r - 1) ** 2 < d <= r * r
    return r


# --- the grid and its noise scale -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    sigma=st.floats(0.3, 50.0),
    clip=st.floats(1e-3, 1e3),
    d=st.integers(1, 10**9),
)
def test_grid_is_the_largest_power_of_two_and_the_noise_covers_the_rounding(sigma, clip, d):
    e, s = sn.grid(sigma, clip, d)
    lam, r, eta = Fraction(2) ** e, ceil_sqrt(d), Fraction(1, 2**sn.ETA_BITS)
    C = Fraction(clip)
    assert lam * r <= eta * C < 2 * lam * r  # the largest power of two with Λ⌈√d⌉ ≤ ηC
    need = Fraction(sigma) * (C / lam + r)  # σ(C/Λ + ⌈√d⌉): the rounded query's shift over σC
    assert Fraction(s) >= need and Fraction(s) <= need * (1 + Fraction(1, 2**48))
    std = Fraction(sn.SecureGaussianNoise().noise_std(sigma, clip, d))
    assert Fraction(sigma) * C <= std <= Fraction(sigma) * C * (1 + eta) * (1 + Fraction(1, 2**48))


def test_grid_refuses_a_noise_too_large_for_float64():
    with pytest.raises(ValueError, match="too large"):
        sn.grid(1e6, 1.0, 10**10)


# --- the arithmetic, bit for bit, against mpmath ---------------------------------------------------------


def reference_normals(raw: bytes, scale=1) -> list:
    """``scale`` times the Box–Muller normals from the little-endian 64-bit words of ``raw`` (16 bytes a pair),
    in mpmath (60 digits): the cosines of the pairs, then their sines."""
    mpmath.mp.dps = 60
    cos, sin = [], []
    for w0, w1 in np.frombuffer(raw, dtype="<u8").reshape(-1, 2).tolist():
        u1 = (mpmath.mpf(w0 % 2**63) + mpmath.mpf(0.5)) / 2**63
        theta = 2 * mpmath.pi * mpmath.mpf(w1 % 2**53) / 2**53
        rad = scale * mpmath.sqrt(-2 * mpmath.log(u1))
        cos.append(rad * mpmath.cos(theta))
        sin.append(rad * mpmath.sin(theta))
    return cos + sin


@pytest.mark.skipif(sys.byteorder != "little", reason="the reference reads little-endian words")
def test_box_muller_to_float64_precision():
    raw = Stream(b"normals")(16 * 500)
    words = torch.frombuffer(bytearray(raw), dtype=torch.int64).reshape(-1, 2)
    got = sn.standard_normal_pairs(words).tolist()
    want = reference_normals(raw)
    assert len(got) == 1000
    assert max(abs(a - float(b)) for a, b in zip(got, want)) < 1e-14
    # the extreme words: u₁ at its smallest (radius √(128 ln 2) ≈ 9.42) and at 1 (radius 0)
    ext = torch.tensor([[0, 0], [-1, -1]], dtype=torch.int64)
    n = sn.standard_normal_pairs(ext)  # cos₀, cos₁, sin₀, sin₁
    assert abs(float(n[0]) - math.sqrt(128 * math.log(2))) < 1e-12
    assert float(n[1]) == 0.0 and float(n[2]) == 0.0 and float(n[3]) == 0.0


def reference_add(sums: dict, sigma: float, clip: float, stream: Stream) -> dict:
    """Λ·(round(g/Λ) + round(s·N)) with N by Box–Muller from the stream's words, in mpmath (60 digits) and
    exact fractions; a coordinate whose s·N lies within 2⁻²⁰ of a half-integer is returned as None."""
    mpmath.mp.dps = 60
    d = sum(v.numel() for v in sums.values())
    r = ceil_sqrt(d)
    e = math.floor(math.log2(clip / 2**sn.ETA_BITS / r)) + 1
    while Fraction(2) ** e * r > Fraction(clip) / 2**sn.ETA_BITS:
        e -= 1
    lam = Fraction(2) ** e
    s = sn.grid(sigma, clip, d)[1]  # the scale itself is checked exactly above
    out = {}
    for name, g in sums.items():
        m = g.numel()
        pairs = (m + 1) // 2
        normals = reference_normals(stream(16 * pairs), s)
        vals = []
        for gj, x in zip(g.reshape(-1).tolist(), normals):
            if abs(x - mpmath.floor(x) - mpmath.mpf(0.5)) < mpmath.mpf(2) ** -20:
                vals.append(None)
                continue
            z = int(mpmath.nint(x))
            q = Fraction(gj) / lam
            k = math.floor(q + Fraction(1, 2))
            if q + Fraction(1, 2) == k and k % 2:  # torch.round: half to even
                k -= 1
            vals.append(float(lam * (k + z)))
        out[name] = vals
    return out


@pytest.mark.skipif(sys.byteorder != "little", reason="the reference reads little-endian words")
def test_arithmetic_matches_an_independent_reimplementation(monkeypatch):
    g = torch.Generator().manual_seed(0)
    sums = {
        "w": torch.randn(3, 5, generator=g, dtype=torch.float64) * 7,
        "b": torch.randn(7, generator=g, dtype=torch.float64),
    }
    sigma, clip = 1.3, 0.7
    stream = Stream()
    monkeypatch.setattr(sn, "urandom", stream)
    noise = sn.SecureGaussianNoise()
    got = [noise.add(sums, sigma, clip) for _ in range(2)]  # two steps: fresh bytes each
    ref_stream = Stream()
    want = [reference_add(sums, sigma, clip, ref_stream) for _ in range(2)]
    skipped = 0
    for step in range(2):
        for name in sums:
            for a, b in zip(got[step][name].reshape(-1).tolist(), want[step][name]):
                if b is None:
                    skipped += 1
                else:
                    assert a == b
    assert skipped <= 1
    assert stream.requests == ref_stream.requests  # the same bytes, in the same order
    assert not torch.equal(got[0]["w"], got[1]["w"])


def test_every_output_is_on_the_grid_and_blind_to_the_inputs_low_bits(monkeypatch):
    """Λ·(k + Z) for every input: the output is a multiple of Λ, and two inputs in the same grid cell give
    the same output bit for bit on the same bytes (no low-order bit of the output depends on the data)."""
    sigma, clip = 1.1, 1.0
    g = torch.Generator().manual_seed(1)
    a = torch.randn(1000, generator=g, dtype=torch.float64) * 3
    e, _ = sn.grid(sigma, clip, a.numel())
    lam = 2.0**e
    a = (torch.round(a / lam) + 0.25) * lam  # a quarter cell from a grid point
    b = a + torch.rand(1000, generator=g, dtype=torch.float64) * (lam / 8)  # the same cell, other low bits
    assert not torch.equal(a, b)
    outs = []
    for x in (a, b):
        monkeypatch.setattr(sn, "urandom", Stream())
        outs.append(sn.SecureGaussianNoise().add({"x": x}, sigma, clip)["x"])
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0] / lam, torch.round(outs[0] / lam))
    for dtype in (torch.float32, torch.bfloat16):  # the sums' dtype is kept (the cast is post-processing)
        y = sn.SecureGaussianNoise().add({"x": a.to(dtype)}, sigma, clip)["x"]
        assert y.dtype == dtype and y.shape == a.shape


# --- the law of the noise, on real OS bytes ----------------------------------------------------------------


def test_noise_is_gaussian_with_the_certified_scale():
    from scipy import stats

    sigma, clip, d = 1.7, 0.5, 200_000
    noise = sn.SecureGaussianNoise()
    y = noise.add({"x": torch.zeros(d, dtype=torch.float64)}, sigma, clip)["x"]
    std = noise.last["noise_std"]
    assert sigma * clip <= std <= sigma * clip * (1 + 2.0**-sn.ETA_BITS) * (1 + 1e-12)
    p = stats.kstest((y / std).numpy(), "norm").pvalue
    assert p > 1e-6  # a fixed sample size and a loose threshold: fails by chance once in a million runs
    z = (y / std).numpy()
    assert abs(z.mean()) < 6 / math.sqrt(d) and abs(z.std() - 1) < 6 / math.sqrt(2 * d)


def test_fresh_bytes_every_step(monkeypatch):
    """Every call reads new bytes from the OS (none kept, none reused), 16 per pair of coordinates."""
    calls = []

    def spy(n):
        b = sn.os.urandom(n)
        calls.append(b)
        return b

    monkeypatch.setattr(sn, "urandom", spy)
    sums = {"w": torch.zeros(4, 3), "b": torch.zeros(5)}
    noise = sn.SecureGaussianNoise()
    y1, y2 = noise.add(sums, 1.0, 1.0), noise.add(sums, 1.0, 1.0)
    assert [len(c) for c in calls] == [16 * 6, 16 * 3] * 2
    assert len(set(calls)) == len(calls)
    assert not torch.equal(y1["w"], y2["w"])


def test_large_reads_are_split_over_threads(monkeypatch):
    """A read above PARALLEL_BYTES is split into pieces read concurrently and joined in order: every byte
    is fresh OS output, none is repeated, the total is what was asked."""
    calls = []

    def spy(n):
        b = sn.os.urandom(n)
        calls.append(b)
        return b

    monkeypatch.setattr(sn, "urandom", spy)
    monkeypatch.setattr(sn, "PARALLEL_BYTES", 1000)
    monkeypatch.setattr(sn.os, "cpu_count", lambda: 8)
    out = sn._random_bytes(16 * 1001)
    assert len(out) == 16 * 1001 and len(calls) == 4 and sum(map(len, calls)) == len(out)
    assert len(set(calls)) == 4
    assert out == b"".join(sorted(calls, key=out.index))  # the pieces tile the output, each whole
    y = sn.SecureGaussianNoise().add({"x": torch.zeros(2002, dtype=torch.float64)}, 1.0, 1.0)["x"]
    assert torch.isfinite(y).all() and len(set(y.tolist())) > 1500


# --- the sampler ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("q", [0.1, 0.25 + 2.0**-40])
def test_sampler_uniforms_never_exceed_the_rate(monkeypatch, q):
    x = Fraction(q) * 2**53
    t = math.floor(x) if x.denominator != 1 else int(x) - 1  # u < q ⟺ k < t, so P(u < q) = t·2^-53 ≤ q
    assert Fraction(t, 2**53) <= Fraction(q)
    ks = [0, t - 2, t - 1, t, t + 1, 2**53 - 1]
    words = np.array([k << 11 for k in ks], dtype="<u8").tobytes()
    monkeypatch.setattr(sn, "urandom", lambda n: words[:n])
    u = sn.SecureSampler().random(len(ks))
    assert [(k + 1) * 2.0**-53 for k in ks] == u.tolist()
    assert (u < q).tolist() == [k < t for k in ks]


def test_sampler_rejects_the_biased_tail(monkeypatch):
    # b = 3: 2^64 ≡ 1 (mod 3), so w = 2^64 − 1 must be rejected and the next word used
    words = np.array([2**64 - 1, 5], dtype="<u8").tobytes()
    stream = iter([words[:8], words[8:]])
    monkeypatch.setattr(sn, "urandom", lambda n: next(stream))
    assert sn.SecureSampler()._below(np.array([3])).tolist() == [5 % 3]


def test_sampler_choice_is_uniform():
    from scipy import stats

    s = sn.SecureSampler()
    counts: dict = {}
    for _ in range(6000):
        c = s.choice(5, 2, replace=False)
        assert len(set(c.tolist())) == 2 and all(0 <= i < 5 for i in c)
        counts[tuple(c.tolist())] = counts.get(tuple(c.tolist()), 0) + 1
    assert len(counts) == 20
    assert stats.chisquare(list(counts.values())).pvalue > 1e-6


# --- the trainers ------------------------------------------------------------------------------------------


def data(n=64):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


@pytest.mark.parametrize("sampling", ["poisson(rate = 0.25)", "without_replacement(batch_size = 16)"])
def test_train_secure_reads_the_os_for_batches_and_noise(monkeypatch, sampling):
    stream = Stream()
    monkeypatch.setattr(sn, "urandom", stream)
    c = dpspec.compile(SPEC.format(sampling=sampling))
    X, y = data()
    m = mlp()
    before = [p.detach().clone() for p in m.parameters()]
    rep = c.mechanism.train(m, X, y, secure=True)
    assert rep.noise == "secure" and len(rep.injected_noise_std) == 4
    assert any(not torch.equal(a, b) for a, b in zip(before, m.parameters()))
    noise_bytes = sum(16 * ((p.numel() + 1) // 2) for p in m.parameters())
    if sampling.startswith("poisson"):
        assert stream.pos == 4 * (8 * 64 + noise_bytes)  # 64 uniforms and the noise, every step
    else:
        assert stream.pos >= 4 * (8 * 16 + noise_bytes)  # 16 draws (rejections read more) and the noise


def test_secure_step_is_the_grid_mechanism_on_the_clipped_sum(monkeypatch):
    """private_gradients in secure mode: the noisy sum is SecureGaussianNoise.add of the clipped sum (the
    same bytes give the same numbers), divided by the certificate's normaliser."""
    c = dpspec.compile(POISSON)
    mech = c.mechanism
    X, y = data()
    m = mlp().double()
    idx = np.arange(10)
    cs = mech._clipped_sum(m, nn.functional.cross_entropy, X[idx].double(), y[idx])
    monkeypatch.setattr(sn, "urandom", Stream())
    want = sn.SecureGaussianNoise().add(cs.sums, mech.noise_multiplier, mech.clip_norm)
    monkeypatch.setattr(sn, "urandom", Stream())
    got = mech.private_gradients(
        m, nn.functional.cross_entropy, X[idx].double(), y[idx], 64, generator=sn.SecureGaussianNoise(), idx=idx
    )
    for k in want:
        assert torch.equal(got[k], want[k] / mech.normalizer)


def test_secure_mode_refusals():
    from dpspec.distributed import Comm

    c = dpspec.compile(POISSON)
    X, y = data()
    with pytest.raises(ValueError, match="no seed"):
        c.mechanism.train(mlp(), X, y, secure=True, seed=0)
    with pytest.raises(ValueError, match="one process"):
        c.mechanism.train(mlp(), X, y, secure=True, comm=Comm())
    m = mlp()
    with pytest.raises(ValueError, match="no seed"):
        dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), TensorDataset(X, y), seed=1, secure=True)
    assert c.mechanism.ledger.steps_taken == 0


def test_srpp_has_no_secure_mode():
    srpp = dpspec.compile("""scenario prevalence { secret share in {low, high} }
train model {
  protect       prevalence
  mechanism     srpp_sgd
  dataset_size  32
  discrepancy   label_flip(differing = 3)
  sampling      without_replacement(batch_size = 8)
  clipping      flat(C = 1.0)
  steps         3
  learning_rate 0.2
  noise_units   gradient
  guarantee     ave_srpp(alpha = 8, epsilon = 2)
}
""")
    X, y = data(32)
    m = mlp()
    with pytest.raises(dt.UnsupportedTrainingError, match="secure mode"):
        dt.make_private(srpp, m, None, TensorDataset(X, y % 2), secure=True)


def test_make_private_secure_keeps_no_generator_state():
    c = dpspec.compile(POISSON)
    X, y = data()
    m = mlp()
    model, opt, loader = dt.make_private(
        c, m, torch.optim.SGD(m.parameters(), lr=0.1), TensorDataset(X, y), secure=True
    )
    for xb, yb in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    assert opt.steps_taken == 4
    state = opt.state_dict()["dpspec"]
    assert "rng" not in state and "generator" not in state


def test_seeded_runs_draw_the_noise_they_drew_before():
    """Not secure: the batches from numpy's generator with the seed, the noise from torch's CPU generator
    seeded by its first draw — the stream of earlier versions, recomputed by hand here."""
    c = dpspec.compile(POISSON)
    X, y = data()
    m = mlp()
    ref = mlp()
    c.mechanism.train(m, X, y, seed=5)
    mech = dpspec.compile(POISSON).mechanism
    rng = np.random.default_rng(5)
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    opt = torch.optim.SGD(ref.parameters(), lr=mech.learning_rate, momentum=mech.momentum)
    for idx in mech.batches(64, rng, 4):
        cs = mech._clipped_sum(ref, nn.functional.cross_entropy, X[idx], y[idx])
        for p, s in zip(ref.parameters(), cs.sums.values()):
            noise = torch.normal(0.0, mech.noise_std, size=tuple(s.shape), generator=gen, dtype=s.dtype)
            p.grad = (s + noise) / mech.normalizer
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), ref.parameters()))
