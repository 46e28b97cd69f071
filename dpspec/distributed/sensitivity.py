"""Sliced ∞-Wasserstein sensitivity (ZV25 eq. 6) on Dask, for sample sets that do not fit in memory.

Same quantity, same algorithm and the same floating-point safety margin as the in-memory
:func:`dpspec.pufferfish.sensitivity.sliced_sensitivity_report`; only the execution differs:

1. every (world, secret) sample matrix becomes a ``dask.array`` chunked by **samples**
   (``da.from_array`` on an ``np.memmap`` reads a row block only when a task needs it);
2. the directions U (m, d) are chunked by **directions**; the projections U Zᵀ are one task per
   (direction chunk, sample chunk) block;
3. per direction chunk, the sample axis is gathered and sorted (W∞ of 1-D empirical laws needs the
   whole sorted quantile function — there is no exact sketch, see the in-memory module), and each
   instance (world, s_i, s_j) gets its row-wise W∞ (plug-in or the sound DKW upper bound);
4. the margin γ_d (‖z‖_max,a + ‖z‖_max,b) and the upward rounding are applied exactly as in memory,
   and Δ^u is the column maximum over instances.

Peak memory per task is one direction chunk's sorted projections of one secret, k·n_s floats —
the in-memory path's streaming bound; the samples themselves stay on disk. Results agree with the
in-memory path to float rounding of the projections (the BLAS block shapes differ); both are
upper bounds on the exact-arithmetic value thanks to the margin, which dominates that rounding.

Why Dask (not Ray): the computation is a blocked linear-algebra map over a two-axis
(samples × directions) grid followed by a per-direction reduction — exactly ``dask.array``'s model
(``from_array`` on a memmap, ``blockwise``, ``rechunk``), running unchanged on the local threaded
scheduler (numpy's matmul and sort release the GIL) or on a ``dask.distributed`` cluster by passing
``scheduler=client.get`` or ``scheduler="distributed"``. Ray offers tasks and actors but no chunked
array, so the block bookkeeping would be home-made, which the design rules out.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from dpspec.accounting.concentration import dkw_radius
from dpspec.accounting.errors import SoundnessError
from dpspec.pufferfish.sensitivity import SensitivityReport, _order, pair_instances, validated_inputs
from dpspec.pufferfish.wasserstein import w_inf_dkw_upper_sorted_rows, w_inf_sorted_rows

__all__ = ["dask_sliced_sensitivity_report", "dask_slice_sensitivities"]


def _row_norm_sq(z_blk):
    z = np.asarray(z_blk, dtype=float)
    return np.einsum("ij,ij->i", z, z)


def dask_sliced_sensitivity_report(
    samples: Mapping[tuple[Hashable, Hashable], Any],
    pairs: Sequence[tuple],
    directions,
    *,
    estimator: str = "plugin",
    support=None,
    rho: float | None = None,
    dkw_cells=None,
    sample_chunk: int = 1 << 18,
    direction_chunk: int | None = None,
    fp_margin: bool = True,
    scheduler: str | None = "threads",
    num_workers: int | None = None,
) -> SensitivityReport:
    """:func:`~dpspec.pufferfish.sensitivity.sliced_sensitivity_report` on Dask (see the module doc).

    ``samples`` values may be numpy arrays, ``np.memmap`` s or dask arrays (re-chunked to
    ``sample_chunk`` rows). ``direction_chunk`` defaults to ⌈m / 8⌉. ``scheduler`` / ``num_workers``
    are passed to ``dask.compute``."""
    import dask
    import dask.array as da

    U, samples, pairs = validated_inputs(directions, samples, pairs, estimator, support, rho)
    m, d = U.shape
    _worlds, instances = pair_instances(samples, pairs)
    sizes = {k: int(v.shape[0]) for k, v in samples.items()}
    k = int(direction_chunk) if direction_chunk else max(1, -(-m // 8))
    k = max(1, min(k, m))
    sample_chunk = int(max(1, sample_chunk))

    def as_dask(arr):
        if isinstance(arr, da.Array):
            return arr.astype(float).rechunk((sample_chunk, d))
        return da.from_array(arr, chunks=(sample_chunk, d), asarray=True).astype(float)

    Zd = {key: as_dask(v) for key, v in samples.items()}
    Ud = da.from_array(U, chunks=(k, d))
    # (m, n_s) projections, one task per (direction chunk, sample chunk); then the sample axis is
    # gathered per direction chunk and sorted
    proj = {}
    for key, z in Zd.items():
        blocks = da.matmul(Ud, z.T)  # chunks (k, sample_chunk)
        proj[key] = blocks.rechunk({1: -1}).map_blocks(lambda b: np.sort(b, axis=1), dtype=float)

    radii, lo_all, hi_all = {}, None, None
    if estimator == "dkw":
        assert rho is not None and support is not None  # validated_inputs refuses DKW without them (DPS402)
        cells = set(sizes) if dkw_cells is None else set(dkw_cells)
        radii = {key: (dkw_radius(n, rho) if key in cells else 0.0) for key, n in sizes.items()}
        lo_all, hi_all = support.project(U)
        lo_all = np.asarray(lo_all, dtype=float)
        hi_all = np.asarray(hi_all, dtype=float)

    def check_support(p, lo, hi, key):
        tol = 1e-9 * (1.0 + np.abs(lo) + np.abs(hi))
        if np.any(p[:, 0] < lo - tol) or np.any(p[:, -1] > hi + tol):
            raise SoundnessError(
                f"samples of (world {key[0]!r}, secret {key[1]!r}) fall outside the declared support",
                rule="DPS404",
                hint="clip the query output to its declared bounds or widen them",
            )

    unordered: dict = {}
    for idx, (w, si, sj) in enumerate(instances):
        pair = (w, si, sj) if _order(si, sj) else (w, sj, si)
        unordered.setdefault(pair, []).append(idx)
    rows = {}
    for w, a, b in unordered:
        A, B = proj[(w, a)], proj[(w, b)]
        if estimator == "plugin":

            def f(pa, pb):
                if not (np.all(np.isfinite(pa)) and np.all(np.isfinite(pb))):
                    raise ValueError("samples contain non-finite values (nan or inf)")
                return w_inf_sorted_rows(pa, pb)

            rows[(w, a, b)] = da.blockwise(f, "i", A, "ij", B, "ik", dtype=float, concatenate=True)
        else:
            lo_d = da.from_array(lo_all, chunks=(k,))
            hi_d = da.from_array(hi_all, chunks=(k,))

            def g(pa, pb, lo, hi, ka=(w, a), kb=(w, b)):
                check_support(pa, lo, hi, ka)
                check_support(pb, lo, hi, kb)
                return w_inf_dkw_upper_sorted_rows(pa, pb, radii[ka], radii[kb], lo, hi)

            rows[(w, a, b)] = da.blockwise(
                g, "i", A, "ij", B, "ik", lo_d, "i", hi_d, "i", dtype=float, concatenate=True
            )
    maxnorm_d = {}
    if fp_margin:
        for key, z in Zd.items():
            maxnorm_d[key] = z.map_blocks(_row_norm_sq, drop_axis=1, dtype=float).max()
    keys = list(rows)
    kw: dict[str, str | int] = {} if scheduler is None else {"scheduler": scheduler}
    if num_workers is not None:
        kw["num_workers"] = num_workers
    computed = dask.compute([rows[q] for q in keys], {q: v for q, v in maxnorm_d.items()}, **kw)
    vals = dict(zip(keys, computed[0]))
    maxnorm = {q: float(np.sqrt(v)) * (1.0 + 1e-15) for q, v in computed[1].items()}
    Z = np.zeros((len(instances), m))
    u = 2.0**-53
    gamma_d = d * u / (1.0 - d * u)
    for q, idxs in unordered.items():
        for r in idxs:
            w, a, b = instances[r]
            if fp_margin:
                margin = gamma_d * (maxnorm[(w, a)] + maxnorm[(w, b)])
                Z[r] = (vals[q] + margin) * (1.0 + 4.0 * u)
            else:
                Z[r] = vals[q]
    dkw = None
    if estimator == "dkw":
        assert rho is not None  # validated_inputs refuses DKW without it
        dkw = {"rho_per_band": float(rho), "radii": {f"{q[0]}|{q[1]}": v for q, v in radii.items()}}
    return SensitivityReport(
        deltas=Z.max(axis=0),
        instance_deltas=Z,
        instances=tuple(instances),
        estimator=estimator,
        sample_sizes={f"{q[0]}|{q[1]}": v for q, v in sizes.items()},
        dkw=dkw,
        chunk_size=k,
        buffer_bytes=8 * k * max(sizes.values()),
    )


def dask_slice_sensitivities(samples, pairs, directions, **kwargs) -> np.ndarray:
    """Δ^u per direction on Dask (the ``deltas`` of :func:`dask_sliced_sensitivity_report`)."""
    return dask_sliced_sensitivity_report(samples, pairs, directions, **kwargs).deltas
