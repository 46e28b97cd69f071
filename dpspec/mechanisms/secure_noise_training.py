"""Secure mode for the private trainers: every random bit from the OS CSPRNG, integer noise added exactly.

Why
---
By default a trainer draws its noise with torch's generator (the CPU Mersenne Twister, CUDA's Philox),
seeded from a seed the caller gives or the OS: it is reproducible, and predictable to whoever learns its
state or enough outputs. And the noisy gradient is the floating-point sum fl(g + n): which floats it can
take depends on g, so its low-order bits carry information about the data (Mironov 2012, "On
significance of the least significant bits for differential privacy"; the precision-based attacks of
Haney et al. 2022, arXiv 2207.13793, and Jin et al. 2022 read the rounding of that addition).

What secure mode does at every step
-----------------------------------
For the clipped sum g ∈ ℝ^d of a step (all trainable tensors together, d coordinates), the
certificate's clip norm C (the total √Σ C_l² under per-layer clipping) and noise multiplier σ:

1. a grid Λ = 2^e, the largest power of two with Λ·⌈√d⌉ ≤ η·C, η = 2⁻¹⁰ (:func:`grid`);
2. k = round(clamp(g/Λ, ±2⁵²)) ∈ ℤ^d (g/Λ is exact: Λ is a power of two);
3. Z ∈ ℤ^d, Z_j = round(s·N_j), with s = σ·(C/Λ + ⌈√d⌉) (rounded up, and at most 2³⁶) and N_j a
   standard normal by Box–Muller in float64 from 128 bits of ``os.urandom`` per pair of coordinates
   (:func:`standard_normal_pairs`);
4. the output is Λ·(k + Z): k + Z is an integer below 2⁵³ in absolute value (|k| ≤ 2⁵², |Z| < 2⁴⁰),
   so the float64 sum and the multiplication by Λ are exact; it is then cast to the sums' dtype
   (post-processing).

Guarantee (the ideal sampler). If N_j were exactly N(0, 1), then k + Z = round(k + s·N) (k is an
integer vector): a post-processing of the Gaussian mechanism k ↦ k + N(0, s² I). Two neighbouring
batches move g by at most Δ in ℓ2 — C for one example, K·C for a group of K, 2C under substitution:
the certificate's analysis charges Δ/(σC) — and the clamp (a projection: it does not increase
distances) and rounding (≤ ½ per coordinate) move k by at most Δ/Λ + ⌈√d⌉ ≤ (Δ/C)·(C/Λ + ⌈√d⌉),
because Δ ≥ C. The ratio to s is at most Δ/(σC), the certified mechanism's, for every batch. For the
subsampled mechanisms the certificate accounts (Poisson, without replacement; RDP and PLD), a
batch-dependent shift of at most that norm is covered by the same bound: the divergence of a mixture
over the batches is at most the largest over the batches (joint quasi-convexity of the Rényi
divergence, van Erven & Harremoës 2014 Thm 13; joint convexity of the hockey-stick divergence), and
for each batch the subsampled Gaussian's divergence grows with the shift's norm (a smaller shift is a
post-processing: scale, then add independent Gaussian noise). So every certified number holds; the
noise is Λ·s ≤ σC·(1 + 2⁻¹⁰) in real units — at most 0.1 % more than certified.

Floating point. The output is always in Λ·ℤ^d and is formed by exact integer addition: no bit of it
depends on the data through a rounding, so the attacks above, which read the rounding of fl(g + n),
do not apply. What remains is the sampler: Z's law P̃ is a fixed distribution on ℤ, the same for every
input, which the certificate treats as the rounded Gaussian round(N(0, s²)) (its assumption
``noise_sampling``). It is not exactly that: the Box–Muller radius is cut at √(128 ln 2) ≈ 9.42
(u₁ ≥ 2⁻⁶⁴; the Gaussian mass beyond is about 5·10⁻²¹), u₁, u₂ are 53-bit floats, and float64 log,
sqrt, cos and sin are correct to a few units in the last place, which can move round(s·N) by one only
where s·N is within about 2⁻¹² of a half-integer (|s·N| < 2⁴⁰). dpspec does not bound the distance
between P̃ and the rounded Gaussian (the exact discrete Gaussian of :mod:`dpspec.mechanisms.secure_noise`
has such a proof and costs hundreds of microseconds per coordinate); it is the one floating-point
assumption left, and it no longer involves the data.

Why not Opacus's secure mode. Opacus (``secure_mode=True``) draws from torchcsprng and sums four
Gaussian draws divided by two (Holohan & Braghin 2021, §5.1), which makes the noise's own set of values
harder to exploit; the output is still fl(g + n), whose rounding depends on g, and the precision-based
attacks apply to it (Haney et al. 2022; Opacus issue #616). dpspec makes the addition exact on a grid
instead, with one draw per coordinate.

Randomness. Every random bit comes from ``os.urandom`` (the kernel's CSPRNG, ``getrandom``), fresh
at every call: nothing is seeded, no generator state exists to leak through a checkpoint, and no
byte is used twice. :class:`SecureSampler` draws the batches from it too. A seed is refused.

Cost: 8 bytes of ``os.urandom`` per coordinate and step (copied to the device once per tensor), and
about fifteen float64 operations per coordinate on the device; see docs/training.md.
"""

from __future__ import annotations

import math
import os

import numpy as np

__all__ = [
    "ETA_BITS",
    "SecureGaussianNoise",
    "SecureSampler",
    "grid",
    "standard_normal_pairs",
    "urandom",
]

ETA_BITS = 10  # η = 2^-10: the grid's rounding raises the noise by at most this fraction
MAX_GRID_SIGMA = 2.0**36  # s·|N| < 2^40: float64 resolves s·N to 2^-12 before it is rounded
CLAMP = 2.0**52  # |k| ≤ 2^52 and |Z| < 2^40: k + Z is an integer below 2^53, exact in float64
CHUNK_PAIRS = 1 << 22  # pairs of normals per os.urandom call (64 MiB of bytes)


PARALLEL_BYTES = 1 << 22  # above this, a read is split over threads (os.urandom releases the GIL)
_POOL: list = []


def urandom(n: int) -> bytes:
    """``n`` bytes from the operating system's CSPRNG (the tests replace it to check the arithmetic)."""
    return os.urandom(n)


def _random_bytes(n: int) -> bytes:
    """``n`` bytes of :func:`urandom`; a large read is split into pieces read by a few threads at once (the
    kernel's CSPRNG runs per CPU: a 100M-parameter step needs 800 MB) and joined in order."""
    workers = min(8, (os.cpu_count() or 1) // 2)
    if n <= PARALLEL_BYTES or workers < 2:
        return urandom(n)
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.append(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpspec-urandom"))
    piece = -(-n // workers)
    sizes = [min(piece, n - i) for i in range(0, n, piece)]
    return b"".join(_POOL[0].map(urandom, sizes))


def _ceil_sqrt(d: int) -> int:
    r = math.isqrt(d)
    return r if r * r == d else r + 1


def grid(noise_multiplier: float, clip: float, d: int) -> tuple[int, float]:
    """(e, s): the grid Λ = 2^e, the largest power of two with Λ·⌈√d⌉ ≤ 2^-ETA_BITS·C, and the noise
    std in grid units s ≥ σ·(C/Λ + ⌈√d⌉) (rounded up). ValueError where s would exceed
    :data:`MAX_GRID_SIGMA` (σ·√d above about 2^25)."""
    sigma, C, d = float(noise_multiplier), float(clip), int(d)
    if not (sigma > 0 and math.isfinite(sigma) and C > 0 and math.isfinite(C) and d >= 1):
        raise ValueError(f"secure noise needs σ > 0, C > 0 and d ≥ 1, got {sigma!r}, {C!r}, {d!r}")
    r = _ceil_sqrt(d)
    target = math.ldexp(C, -ETA_BITS)  # exact
    e = math.frexp(target / r)[1] - 1  # about ⌊log2(ηC/r)⌋; fixed up exactly below
    while math.ldexp(r, e) > target:  # ldexp of an integer < 2^53: exact comparisons
        e -= 1
    while math.ldexp(r, e + 1) <= target:
        e += 1
    s = sigma * (math.ldexp(C, -e) + r)
    s = math.nextafter(math.nextafter(s, math.inf), math.inf)  # above the two roundings of the line before
    if not s <= MAX_GRID_SIGMA:
        raise ValueError(
            f"secure noise: σ·√d = {sigma * math.sqrt(d):.3g} is too large for the grid (noise of {s:.3g} grid "
            f"units; at most 2^36 keep float64 exact enough before rounding)"
        )
    return e, s


def standard_normal_pairs(words, scale: float = 1.0):
    """``scale`` times standard normals by Box–Muller from (P, 2) 64-bit words (an int64 tensor), in float64:
    per pair, u₁ = (w₀ mod 2⁶³ + ½)·2⁻⁶³ ∈ (0, 1] and θ = 2π·(w₁ mod 2⁵³)·2⁻⁵³ give the radius
    ρ = scale·√(−2 ln u₁) (at most scale·√(128 ln 2) ≈ 9.42·scale) and the normals ρ·cos θ, ρ·sin θ (Box &
    Muller 1958). Returns the (2P,) values: the P cosines, then the P sines."""
    import torch

    f64 = torch.float64
    u1 = (words[:, 0] & 0x7FFFFFFFFFFFFFFF).to(f64).add_(0.5).mul_(2.0**-63)
    theta = (words[:, 1] & 0x1FFFFFFFFFFFFF).to(f64).mul_(2.0 * math.pi * 2.0**-53)
    rho = u1.log_().mul_(-2.0).sqrt_().mul_(float(scale))
    out = torch.empty(2 * rho.numel(), dtype=f64, device=rho.device)
    P = rho.numel()
    torch.mul(rho, torch.cos(theta), out=out[:P])
    torch.mul(rho, theta.sin_(), out=out[P:])
    return out


def _words(pairs: int, device):
    """(pairs, 2) fresh 64-bit words from :func:`urandom` on ``device`` (int64): the bytes are copied once,
    through pinned memory without waiting on a CUDA device."""
    import torch

    buf = torch.frombuffer(bytearray(_random_bytes(16 * pairs)), dtype=torch.int64)
    if device.type == "cuda":
        buf = buf.pin_memory().to(device, non_blocking=True)
    elif device.type != "cpu":
        buf = buf.to(device)
    return buf.reshape(pairs, 2)


def _wide(device):
    """The device and dtype of the noise arithmetic: float64 on the tensor's device (a device without
    float64 — Apple's MPS — computes on the CPU and copies the result)."""
    import torch

    return device if device.type != "mps" else torch.device("cpu")


class SecureGaussianNoise:
    """The secure-mode noise of a DP-SGD step (module docstring): ``add(sums, σ, C)`` returns
    Λ·(round(g/Λ) + Z) for the clipped sums g, each tensor on its own device in its own dtype.

    It holds no state: every call reads fresh bytes from the OS CSPRNG. ``last`` records the grid of the
    last call ({"d", "grid_exponent", "grid_sigma", "noise_std"}) for the run report."""

    secure = True

    def __init__(self):
        self.last: dict = {}

    def __repr__(self) -> str:
        return "SecureGaussianNoise(os.urandom)"

    def noise_std(self, noise_multiplier: float, clip: float, d: int) -> float:
        """The noise's std in the gradient's units, Λ·s ∈ [σC, σC·(1 + 2^-ETA_BITS)] (rounded up)."""
        e, s = grid(noise_multiplier, clip, d)
        return math.ldexp(s, e)

    def add(self, sums: dict, noise_multiplier: float, clip: float) -> dict:
        import torch

        d = sum(int(v.numel()) for v in sums.values())
        if d == 0:
            return dict(sums)
        e, s = grid(noise_multiplier, clip, d)
        self.last = {"d": d, "grid_exponent": e, "grid_sigma": s, "noise_std": math.ldexp(s, e)}
        inv, lam = math.ldexp(1.0, -e), math.ldexp(1.0, e)
        out = {}
        for name, g in sums.items():
            dev = _wide(g.device)
            # k = round(clamp(g/Λ, ±2^52)): integers held exactly in float64 (g/Λ is exact: Λ = 2^e)
            k = g.detach().reshape(-1).to(device=dev, dtype=torch.float64, copy=True).mul_(inv)
            k = torch.nan_to_num_(k, nan=0.0).clamp_(-CLAMP, CLAMP).round_()
            m, done = k.numel(), 0
            while done < m:
                pairs = min(CHUNK_PAIRS, (m - done + 1) // 2)
                z = standard_normal_pairs(_words(pairs, dev), s)[: m - done].round_()  # Z = round(s·N)
                k[done : done + z.numel()].add_(z)  # k + Z: |k| ≤ 2^52, |Z| < 2^40, so the sum is exact
                done += z.numel()
            out[name] = k.mul_(lam).reshape(g.shape).to(device=g.device, dtype=g.dtype)  # Λ(k + Z): exact
        return out


class SecureSampler:
    """The samplers' randomness from :func:`urandom`: stands for the ``numpy.random.Generator`` that
    ``DpSgd.batches`` draws with (``random`` and ``choice(..., replace=False)``)."""

    secure = True

    def __repr__(self) -> str:
        return "SecureSampler(os.urandom)"

    def random(self, n: int) -> np.ndarray:
        """``n`` uniforms (k + 1)·2⁻⁵³, k uniform on 0 … 2⁵³ − 1: P(u < q) = ⌊q·2⁵³⌋·2⁻⁵³ ≤ q for a float q
        that is not a multiple of 2⁻⁵³ (and q − 2⁻⁵³ otherwise): a record is never sampled more often than
        the certificate's rate."""
        n = int(n)
        w = np.frombuffer(urandom(8 * n), dtype=np.uint64) >> np.uint64(11)
        return (w.astype(np.float64) + 1.0) * 2.0**-53

    def _below(self, bounds: np.ndarray) -> np.ndarray:
        """One uniform integer in [0, b) for each b of ``bounds`` (b < 2^63), by rejection (exact)."""
        bounds = np.asarray(bounds, dtype=np.uint64)
        out = np.empty(bounds.shape, dtype=np.uint64)
        todo = np.arange(bounds.size)
        while todo.size:
            w = np.frombuffer(urandom(8 * todo.size), dtype=np.uint64)
            b = bounds[todo]
            limit = np.uint64(2**64 - 1) - (np.uint64(2**64 - 1) % b + np.uint64(1)) % b  # w ≤ limit: unbiased
            ok = w <= limit
            out[todo[ok]] = w[ok] % b[ok]
            todo = todo[~ok]
        return out.astype(np.int64)

    def choice(self, n: int, size: int, replace: bool = False) -> np.ndarray:
        """``size`` distinct indices of 0 … n − 1, uniformly (a partial Fisher–Yates shuffle)."""
        if replace:
            raise ValueError("secure sampling draws without replacement only")
        n, size = int(n), int(size)
        if not 0 <= size <= n:
            raise ValueError(f"cannot draw {size} of {n} without replacement")
        picks = np.arange(size) + self._below(np.arange(n, n - size, -1))
        perm: dict[int, int] = {}
        out = np.empty(size, dtype=np.int64)
        for i, j in enumerate(picks.tolist()):
            out[i] = perm.get(j, j)
            perm[j] = perm.get(i, i)
        return out
