"""Sliced ∞-Wasserstein sensitivity on Dask (samples on disk as np.memmap, chunked by samples and
directions) equals the in-memory path."""

import numpy as np
import pytest

from dpspec.accounting.swm import SoundnessError
from dpspec.distributed.sensitivity import dask_slice_sensitivities, dask_sliced_sensitivity_report
from dpspec.pufferfish.profiles import sphere_profile
from dpspec.pufferfish.queries import BoxSupport
from dpspec.pufferfish.sensitivity import sliced_sensitivity_report


def _samples(rng, d, lo=None, hi=None):
    s = {("w0", "a"): rng.normal(size=(3000, d)), ("w0", "b"): rng.normal(0.3, 1, size=(2500, d)),
         ("w0", "c"): 1.2 * rng.normal(size=(3000, d)), ("w1", "a"): rng.normal(size=(1000, d)),
         ("w1", "b"): rng.normal(size=(1700, d))}
    if lo is not None:
        s = {k: np.clip(v, lo, hi) for k, v in s.items()}
    return s


def _to_memmap(samples, path):
    out = {}
    for i, (k, v) in enumerate(samples.items()):
        mm = np.memmap(path / f"s{i}.f64", dtype=np.float64, mode="w+", shape=v.shape)
        mm[:] = v
        mm.flush()
        out[k] = np.memmap(path / f"s{i}.f64", dtype=np.float64, mode="r", shape=v.shape)
    return out


@pytest.mark.parametrize("chunks", [(700, 7), (4096, 40)])
def test_dask_equals_in_memory_on_memmapped_samples(tmp_path, chunks):
    rng = np.random.default_rng(0)
    d = 5
    samples = _samples(rng, d)
    U = sphere_profile(40, d, seed=1).directions
    pairs = [("a", "b"), ("b", "a"), ("a", "c")]
    ref = sliced_sensitivity_report(samples, pairs, U)
    mm = _to_memmap(samples, tmp_path)
    got = dask_sliced_sensitivity_report(mm, pairs, U, sample_chunk=chunks[0], direction_chunk=chunks[1])
    assert got.instances == ref.instances
    np.testing.assert_allclose(got.instance_deltas, ref.instance_deltas, rtol=1e-12, atol=0)
    np.testing.assert_allclose(got.deltas, ref.deltas, rtol=1e-12, atol=0)
    # without the margin too (raw plug-in W∞ values)
    np.testing.assert_allclose(dask_slice_sensitivities(mm, pairs, U, fp_margin=False, sample_chunk=512),
                               sliced_sensitivity_report(samples, pairs, U, fp_margin=False).deltas, rtol=1e-12)


def test_dask_dkw_matches_and_checks_support(tmp_path):
    rng = np.random.default_rng(1)
    d = 3
    samples = _samples(rng, d, -2.0, 2.0)
    sup = BoxSupport(np.full(d, -2.0), np.full(d, 2.0))
    U = sphere_profile(12, d, seed=2).directions
    ref = sliced_sensitivity_report(samples, [("a", "b")], U, estimator="dkw", support=sup, rho=1e-3)
    got = dask_sliced_sensitivity_report(_to_memmap(samples, tmp_path), [("a", "b")], U, estimator="dkw",
                                         support=sup, rho=1e-3, sample_chunk=999, direction_chunk=5)
    np.testing.assert_allclose(got.deltas, ref.deltas, rtol=1e-12)
    assert got.dkw == ref.dkw
    narrow = BoxSupport(np.full(d, -1.0), np.full(d, 1.0))
    with pytest.raises(SoundnessError, match="outside the declared support"):
        dask_sliced_sensitivity_report(samples, [("a", "b")], U, estimator="dkw", support=narrow, rho=1e-3)
    bad = dict(samples)
    bad[("w0", "a")] = bad[("w0", "a")].copy()
    bad[("w0", "a")][5, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        dask_sliced_sensitivity_report(bad, [("a", "b")], U)
    with pytest.raises(ValueError, match="no world"):
        dask_sliced_sensitivity_report(samples, [("a", "zz")], U)
