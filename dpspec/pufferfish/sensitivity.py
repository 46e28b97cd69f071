"""Per-slice ∞-Wasserstein sensitivity Δ^u (ZV25 eq. 6) from samples of the query output.

Δ^{u_ℓ} = max_{θ ∈ Θ̂, (s_i, s_j) ∈ 𝒬̂} W∞(Ψ^{u_ℓ}_# P_θ^{f,s_i}, Ψ^{u_ℓ}_# P_θ^{f,s_j}).

Algorithm (ZV25 §4.3.2, Prop 4.1): for each direction, project every (θ, s) sample once, sort once
(O(n log n)), and evaluate each pair on the merged quantile grid (O(n)). Memory is bounded by
streaming over *directions* in chunks: at any time only a (k, n_s) block of sorted projections per
secret of one world is held (k chosen from ``memory_limit``). Samples themselves are read in row
blocks, so they may be a ``numpy.memmap`` (or any object with ``.shape`` and row slicing) and need
not be in RAM. Exactness is never traded for memory: there is no sketching — an exact quantile
summary of n numbers needs Θ(n) memory in general, so the samples are kept (in memory or on disk)
and the stream is over directions.

Two estimators:
* ``"plugin"`` — the exact W∞ of the empirical laws. It *is* Δ^u when the world's conditional law is
  the empirical distribution itself (θ = θ_D, ZV25 App. W.1), or when the samples enumerate the law.
* ``"dkw"`` — a sound upper bound for i.i.d. samples from a law with declared support (digest §4.1 ⚠):
  per-CDF DKW bands of radius e_n(ρ) plus support clamping of the tails, see
  :func:`dpspec.pufferfish.wasserstein.w_inf_dkw_upper_sorted_rows`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpspec.accounting.concentration import dkw_radius
from dpspec.accounting.swm import SoundnessError

from .profiles import check_directions
from .wasserstein import w_inf_dkw_upper_sorted_rows, w_inf_sorted_rows

__all__ = ["SensitivityReport", "slice_sensitivities", "sliced_sensitivity_report", "check_pairs"]

_ROW_BLOCK = 1 << 16


@dataclass(frozen=True, eq=False)
class SensitivityReport:
    """Per-direction sensitivities and the per-instance matrix they are the column maxima of.

    ``instance_deltas[i, ℓ]`` = W∞ (or its DKW upper bound) for instance ``instances[i]`` =
    (world, s_i, s_j) on direction ℓ; ``deltas`` = column maxima (eq. 6).
    """

    deltas: np.ndarray
    instance_deltas: np.ndarray
    instances: tuple
    estimator: str
    sample_sizes: dict
    dkw: dict | None = None
    chunk_size: int = 0
    buffer_bytes: int = 0

    @property
    def sha256(self) -> str:
        return hashlib.sha256(np.ascontiguousarray(self.deltas, "<f8").tobytes()).hexdigest()


def check_pairs(pairs: Sequence, secrets: Sequence | None = None) -> list[tuple]:
    """Validate discriminative pairs: a non-empty list of (s_i, s_j) with s_i ≠ s_j."""
    out = []
    try:
        pairs = list(pairs)
    except TypeError:
        raise ValueError("pairs must be a sequence of (s_i, s_j) tuples") from None
    if not pairs:
        raise ValueError("pairs is empty: a Pufferfish scenario needs at least one discriminative pair")
    known = None if secrets is None else set(secrets)
    for p in pairs:
        try:
            si, sj = p
        except (TypeError, ValueError):
            raise ValueError(f"each pair must be a 2-tuple (s_i, s_j), got {p!r}") from None
        if si == sj:
            raise ValueError(f"pair {p!r} compares a secret with itself")
        if known is not None and (si not in known or sj not in known):
            raise ValueError(f"pair {p!r} names a secret that is not declared ({sorted(map(str, known))})")
        if (si, sj) not in out:
            out.append((si, sj))
    return out


def _validate_samples(samples: Mapping, d: int) -> dict:
    if not isinstance(samples, Mapping) or not samples:
        raise ValueError("samples must be a non-empty mapping {(world, secret): array (n, d)}")
    out = {}
    for key, arr in samples.items():
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"samples keys must be (world, secret) tuples, got {key!r}")
        shape = getattr(arr, "shape", None)
        if shape is None:
            arr = np.asarray(arr, dtype=float)
            shape = arr.shape
        if len(shape) == 1 and d == 1:
            arr = np.asarray(arr, dtype=float)[:, None]
            shape = arr.shape
        if len(shape) != 2:
            raise ValueError(f"samples[{key!r}] must be 2-D (n, d), got shape {tuple(shape)}")
        if shape[0] == 0:
            raise ValueError(f"samples[{key!r}] is empty: secret {key[1]!r} has no samples in world {key[0]!r}")
        if shape[1] != d:
            raise ValueError(f"samples[{key!r}] has dimension {shape[1]} but directions have d = {d}")
        out[key] = arr
    return out


def _project_sorted(Z, U: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out[:, :n] = sort(U @ Zᵀ) row-wise; Z read in row blocks (memmap friendly); checks finiteness."""
    n = Z.shape[0]
    for r0 in range(0, n, _ROW_BLOCK):
        blk = np.asarray(Z[r0 : r0 + _ROW_BLOCK], dtype=float)
        np.matmul(U, blk.T, out=out[:, r0 : r0 + blk.shape[0]])
    if not np.all(np.isfinite(out)):
        raise ValueError("samples contain non-finite values (nan or inf)")
    out.sort(axis=1)
    return out


def pair_instances(samples, pairs) -> tuple[dict, list[tuple]]:
    """({world: [secrets with samples]}, [(world, s_i, s_j)]) — every discriminative pair in every world
    where both secrets have samples; a pair with no such world is an error."""
    worlds: dict = {}
    for w, s in samples:
        worlds.setdefault(w, []).append(s)
    instances: list[tuple] = []
    seen = set()
    for w, secs in worlds.items():
        present = set(secs)
        for si, sj in pairs:
            if si in present and sj in present:
                instances.append((w, si, sj))
                seen.add((si, sj))
    missing = [p for p in pairs if p not in seen]
    if missing:
        raise ValueError(
            f"pair(s) {missing!r} have no world in which both secrets have samples "
            "(empty secret class or zero prior mass everywhere)"
        )
    return worlds, instances


def validated_inputs(directions, samples, pairs, estimator: str, support, rho):
    """(U, samples, pairs) checked for the sensitivity estimators (in memory and on Dask)."""
    U = check_directions(directions)
    samples = _validate_samples(samples, U.shape[1])
    pairs = check_pairs(pairs)
    if estimator not in ("plugin", "dkw"):
        raise ValueError(f"estimator must be 'plugin' or 'dkw', got {estimator!r}")
    if estimator == "dkw":
        if support is None:
            raise SoundnessError(
                "the DKW estimator needs declared support bounds of the query output",
                rule="DPS402",
                hint="declare bounds on the query (e.g. mean(col, lo, hi))",
            )
        if rho is None or not (0.0 < float(rho) < 1.0):
            raise ValueError(f"rho (per-band failure probability) must lie in (0, 1), got {rho!r}")
    return U, samples, pairs


def sliced_sensitivity_report(
    samples: Mapping[tuple[Hashable, Hashable], Any],
    pairs: Sequence[tuple],
    directions,
    *,
    estimator: str = "plugin",
    support=None,
    rho: float | None = None,
    dkw_cells=None,
    chunk_size: int | None = None,
    memory_limit: int = 256 * 2**20,
    progress: Callable[[int, int], None] | None = None,
    fp_margin: bool = True,
) -> SensitivityReport:
    """Compute Δ^u for every direction, streaming over directions in chunks (see module doc).

    ``samples``: {(world, secret): (n, d)} — a pair is evaluated in every world holding both of its
    secrets (secrets with zero prior mass in a world are simply absent from that world's samples);
    a pair evaluated in no world is an error. ``estimator="dkw"`` needs ``support`` (an object with
    ``project(U) -> (lo, hi)``, e.g. :class:`~dpspec.pufferfish.queries.BoxSupport`) and ``rho``,
    the failure probability of *each* per-(world, secret, direction) DKW band; ``dkw_cells`` (default
    all) limits the bands to the sampled (world, secret) cells — the others are exact (radius 0).
    Time O(M m n + S m n log n) for S (world, secret) cells, M instances; memory O(k Σ_s n_s) + samples.

    ``fp_margin`` (default on) adds a rigorous bound on the floating-point error of the projections,
    γ_d (‖z‖_max,a + ‖z‖_max,b) with γ_d = d·2⁻⁵³/(1 − d·2⁻⁵³) (Higham, Thm 3.1 — valid for any
    summation order, so for any BLAS kernel), and rounds the result up, so the reported Δ^u is an
    upper bound on the exact-arithmetic value whatever the chunking (≈1e-14 relative for d = 100).
    """
    U, samples, pairs = validated_inputs(directions, samples, pairs, estimator, support, rho)
    m, d = U.shape

    worlds, instances = pair_instances(samples, pairs)
    unordered: dict = {}  # (world, frozenset) -> list of instance rows
    for idx, (w, si, sj) in enumerate(instances):
        key = (w, si, sj) if _order(si, sj) else (w, sj, si)
        unordered.setdefault(key, []).append(idx)

    sizes = {k: int(v.shape[0]) for k, v in samples.items()}
    per_world_total = {w: sum(sizes[(w, s)] for s in secs) for w, secs in worlds.items()}
    biggest = max(per_world_total.values())
    if chunk_size is None:
        chunk_size = max(1, min(m, int(memory_limit // (8 * biggest * 1.5))))
    chunk_size = int(max(1, min(chunk_size, m)))

    radii = {}
    lo_all = hi_all = None
    if estimator == "dkw":
        assert rho is not None and support is not None  # validated_inputs refuses DKW without them (DPS402)
        cells = set(sizes) if dkw_cells is None else set(dkw_cells)
        radii = {k: (dkw_radius(n, rho) if k in cells else 0.0) for k, n in sizes.items()}
        lo_all, hi_all = support.project(U)
        lo_all = np.asarray(lo_all, dtype=float)
        hi_all = np.asarray(hi_all, dtype=float)

    margins = {}
    if fp_margin:
        u = 2.0**-53
        gamma_d = d * u / (1.0 - d * u)
        maxnorm = {k: _max_row_norm(v) for k, v in samples.items()}
        for idx, (w, a, b) in enumerate(instances):
            margins[idx] = gamma_d * (maxnorm[(w, a)] + maxnorm[(w, b)])
    Z = np.zeros((len(instances), m))
    cache: dict = {}
    done = 0
    buffer_bytes = 0
    from dpspec.progress import progress as bar

    directions_bar = bar(total=m, desc="sliced sensitivity", unit="direction")
    for c0 in range(0, m, chunk_size):
        Uc = np.ascontiguousarray(U[c0 : c0 + chunk_size])
        k = Uc.shape[0]
        for w, secs in worlds.items():
            proj = {}
            for s in secs:
                buf = np.empty((k, sizes[(w, s)]))
                proj[s] = _project_sorted(samples[(w, s)], Uc, buf)
                if estimator == "dkw":
                    assert lo_all is not None and hi_all is not None  # projected above under DKW
                    lo, hi = lo_all[c0 : c0 + k], hi_all[c0 : c0 + k]
                    tol = 1e-9 * (1.0 + np.abs(lo) + np.abs(hi))
                    if np.any(buf[:, 0] < lo - tol) or np.any(buf[:, -1] > hi + tol):
                        raise SoundnessError(
                            f"samples of (world {w!r}, secret {s!r}) fall outside the declared support",
                            rule="DPS404",
                            hint="clip the query output to its declared bounds or widen them",
                        )
            buffer_bytes = max(buffer_bytes, sum(p.nbytes for p in proj.values()))
            for (ww, a, b), rows in unordered.items():
                if ww != w:
                    continue
                if estimator == "plugin":
                    vals = w_inf_sorted_rows(proj[a], proj[b], cache)
                else:
                    assert lo_all is not None and hi_all is not None  # projected above under DKW
                    vals = w_inf_dkw_upper_sorted_rows(
                        proj[a], proj[b], radii[(w, a)], radii[(w, b)], lo_all[c0 : c0 + k], hi_all[c0 : c0 + k]
                    )
                for r in rows:  # both orientations share the (symmetric) bound
                    if fp_margin:
                        Z[r, c0 : c0 + k] = (vals + margins[r]) * (1.0 + 4.0 * 2.0**-53)
                    else:
                        Z[r, c0 : c0 + k] = vals
            del proj
        done += k
        directions_bar.update(k)
        if progress is not None:
            progress(done, m)
    directions_bar.close()
    dkw = None
    if estimator == "dkw":
        assert rho is not None  # validated_inputs refuses DKW without it
        dkw = {"rho_per_band": float(rho), "radii": {f"{k[0]}|{k[1]}": v for k, v in radii.items()}}
    return SensitivityReport(
        deltas=Z.max(axis=0),
        instance_deltas=Z,
        instances=tuple(instances),
        estimator=estimator,
        sample_sizes={f"{k[0]}|{k[1]}": v for k, v in sizes.items()},
        dkw=dkw,
        chunk_size=chunk_size,
        buffer_bytes=buffer_bytes,
    )


def _max_row_norm(Z) -> float:
    best = 0.0
    for r0 in range(0, Z.shape[0], _ROW_BLOCK):
        blk = np.asarray(Z[r0 : r0 + _ROW_BLOCK], dtype=float)
        best = max(best, float(np.sqrt(np.max(np.einsum("ij,ij->i", blk, blk)))))
    return best * (1.0 + 1e-15)


def _order(a, b) -> bool:
    try:
        return bool(a <= b)
    except TypeError:
        return str(a) <= str(b)


def slice_sensitivities(samples, pairs, directions, **kwargs) -> np.ndarray:
    """Δ^u for each direction: max over worlds and pairs of the projected W∞ (ZV25 eq. 6).

    ``samples``: {(world, secret): array (n, d)}; ``pairs``: [(s_i, s_j)]; ``directions``: (m, d)
    unit rows. Equal and unequal sample sizes are exact (F7/F7b). Keyword arguments are passed to
    :func:`sliced_sensitivity_report` (``chunk_size``, ``memory_limit``, ``estimator``, ...).
    """
    return sliced_sensitivity_report(samples, pairs, directions, **kwargs).deltas
