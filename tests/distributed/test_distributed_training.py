"""Two gloo processes on localhost (torch.multiprocessing.spawn) against the single-process run.

Float tolerance: the only difference to the single-process trainer is the order of the summation
(each rank sums its shard, the all-reduce adds the two partial sums and rank 0's noise), so the
trajectories agree to float32 rounding — we allow 1e-5 absolute on the final parameters (observed
≈ 4e-8 after 30 steps). The two ranks agree bit for bit (the all-reduce result is the same tensor).
"""

import numpy as np
import pytest
import torch

from dpspec.distributed import examples as ex
from dpspec.distributed.comm import Comm, DistributedSoundnessError, shard_indices, spawn
from dpspec.families.relational_dpsgd.sharding import max_node_tuples

import _dist_workers as workers  # importable by the spawned children (tests/distributed is on sys.path)

torch.set_num_threads(1)
ATOL = 1e-5


def _same_params(a, b, atol=ATOL):
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a) <= atol


def _check_noise(inj, std, tol=0.03):
    """The injected vector of every step (reduced − noiseless reduced) is N(0, std²): empirical
    std within ±3 % (≈ 4–6 standard errors at ≥ 9 000 draws); a second copy of the noise (noise
    on both ranks) would give √2 · std and fail."""
    z = torch.as_tensor(inj, dtype=torch.float64).reshape(-1)
    assert z.numel() >= 9000
    emp = float(z.std())
    assert abs(emp / std - 1.0) < tol, (emp, std)
    assert abs(float(z.mean())) < 5 * std / z.numel() ** 0.5
    # the fourth moment of a Gaussian: kurtosis 3 (sanity: it is one Gaussian, not a mixture)
    k = float(((z - z.mean()) ** 4).mean() / z.var() ** 2)
    assert abs(k - 3.0) < 0.3, k


def test_dpsgd_two_ranks_match_single_process_and_inject_certified_noise():
    cfg = {"steps": 30}
    single = ex.run_dpsgd(Comm(), {**cfg, "single": True})
    r0, r1 = spawn(ex.run_dpsgd, 2, (cfg,), record_noise=True)
    assert r0["batch_sizes"] == single["batch_sizes"] == r1["batch_sizes"]  # the same global Poisson batches
    assert _same_params(r0["params"], single["params"])
    assert _same_params(r0["params"], r1["params"], atol=0.0)
    inj = r0["injected"]
    assert inj.shape[0] == 30
    _check_noise(inj, single["noise_std"])
    # the injected noise IS the single-process trainer's noise: same generator, same order, drawn once
    rng = np.random.default_rng(0)
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    shapes = [p.shape for p in single["params"].values()]
    ref = torch.stack([torch.cat([torch.normal(0.0, single["noise_std"], size=s, generator=gen).reshape(-1)
                                  for s in shapes]) for _ in range(30)])
    assert float((inj - ref).abs().max()) < 1e-4


def test_srpp_two_ranks_match_single_process():
    cfg = {"steps": 20}
    single = ex.run_srpp(Comm(), {**cfg, "single": True})
    r0, r1 = spawn(ex.run_srpp, 2, (cfg,), record_noise=True)
    assert r0["batch_sizes"] == single["batch_sizes"] == [40] * 20
    assert _same_params(r0["params"], single["params"])
    assert _same_params(r0["params"], r1["params"], atol=0.0)
    _check_noise(r0["injected"], single["noise_std"])


def test_relational_two_ranks_match_and_respect_degree_cap():
    cfg = {"steps": 12}
    single = ex.run_relational(Comm(), {**cfg, "single": True})
    r0, r1 = spawn(ex.run_relational, 2, (cfg,), record_noise=True)
    K = ex.DEFAULTS["relational"]["K"]
    assert single["raw_max_degree"] > K >= r0["max_degree"]  # capping binds, the capped graph is global
    assert r0["batch_sizes"] == single["batch_sizes"] == r1["batch_sizes"]
    assert _same_params(r0["params"], single["params"])
    assert _same_params(r0["params"], r1["params"], atol=0.0)
    # the shards partition each step's global batch, and no node is in more than K positive tuples
    # across the two workers
    for step, b in enumerate(single["batch_sizes"]):
        sizes = [len(p) for s, p in r0["shards"] + r1["shards"] if s == step]
        assert sum(sizes) == b
        pos = np.concatenate([p for s, p in r0["shards"] + r1["shards"] if s == step])
        assert len({tuple(e) for e in pos.tolist()}) == b
    assert 1 <= max_node_tuples([r0["shards"], r1["shards"]], r0["num_nodes"]) <= K
    _check_noise(r0["injected"], single["noise_std"])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs a GPU per rank: two")
@pytest.mark.parametrize("workload", ["dpsgd", "srpp", "relational"])
def test_two_ranks_over_nccl_match_one_process_on_the_device(workload):
    """Each family's example on two GPUs over NCCL (each rank's model and data on its own GPU, the reduction
    there) against one process on the first GPU: the same global batches and, to float32 rounding, the same
    parameters; the two ranks agree bit for bit."""
    cfg = {"steps": 6}
    single = ex.RUNNERS[workload](Comm(), {**cfg, "single": True, "device": "cuda:0"})
    r0, r1 = spawn(ex.RUNNERS[workload], 2, (cfg,), backend="nccl")
    assert r0["batch_sizes"] == single["batch_sizes"] == r1["batch_sizes"]
    assert _same_params(r0["params"], single["params"])
    assert _same_params(r0["params"], r1["params"], atol=0.0)


def test_examples_train_where_the_collectives_run():
    """An example's model and data go to ``cfg["device"]`` when given, else to the process group's collective
    device: the CPU under gloo (and alone), a rank's GPU under NCCL (which reduces CUDA tensors only)."""
    assert ex.device(Comm(), {}) == torch.device("cpu")
    assert ex.device(Comm(backend="gloo"), {"device": "meta"}) == torch.device("meta")
    if torch.cuda.is_available():
        assert ex.device(Comm(backend="nccl"), {}).type == "cuda"


def test_consensus_check_catches_ranks_that_draw_different_batches():
    assert spawn(workers.consensus_probe, 2) == ["DPS806", "DPS806"]


def test_sharding_partitions_and_backend_errors():
    idx = np.arange(11) * 3
    parts = [shard_indices(idx, r, 3) for r in range(3)]
    assert np.array_equal(np.concatenate(parts), idx) and [len(p) for p in parts] == [3, 4, 4]
    c = Comm()
    assert c.noisy_sum({"a": torch.ones(2)}, lambda i, v: torch.zeros_like(v))["a"].tolist() == [1.0, 1.0]
    with pytest.raises(DistributedSoundnessError, match="DPS805"):
        spawn(workers.consensus_probe, 2, backend="mpi")
    if not torch.cuda.is_available():
        with pytest.raises(DistributedSoundnessError, match="nccl needs CUDA"):
            spawn(workers.consensus_probe, 2, backend="nccl")



@pytest.mark.slow
def test_runtime_guards_hold_on_every_rank():
    """Same ledger on every rank (refusing the step beyond the budget together; a rank resumed from another
    checkpoint caught at the first step), non-finite examples zeroed on the rank that clips them exactly as
    in one process, user-batch caps refused on every rank before any collective."""
    single = workers.nonfinite_shard(Comm(), single=True)
    r0, r1 = spawn(workers.runtime_guards, 2)
    assert r0["budget"] == r1["budget"] and r0["budget"]["refused"] == "DPS161" and r0["budget"]["steps"] == 4
    assert r0["diverging"] == r1["diverging"] == "DPS806"
    n0, n1 = r0["nonfinite"], r1["nonfinite"]
    assert single["nonfinite"]  # the example was sampled at least once
    assert all(torch.isfinite(v).all() for v in n0["params"].values())
    assert _same_params(n0["params"], single["params"])
    assert _same_params(n0["params"], n1["params"], atol=0.0)
    assert n1["nonfinite"] == single["nonfinite"] and not n0["nonfinite"]  # counted where it was clipped
    assert r0["srpp_cap"] == r1["srpp_cap"] == "DPS162"


def test_spawn_keeps_results_of_a_worker_killed_after_saving_them_only():
    """A worker killed by a signal once every rank has saved its result (a gloo teardown abort) leaves the
    results; one killed before saving is an error."""
    import torch.multiprocessing as mp

    assert spawn(workers.dies_after_its_work, 2, ("after",)) == [0, 10]
    with pytest.raises(mp.ProcessExitedException):
        spawn(workers.dies_after_its_work, 2, ("before",))
