"""The peak-memory measure of benchmarks/bench_gpu.py (`step_peak_mib`) on steps whose peak is known by hand:
the allocations above the start, frees of earlier tensors included, on the CPU (torch.profiler's memory
events) and, where present, on CUDA (the caching allocator's statistics)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20


def _script(name):
    """benchmarks/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _script("bench_gpu")


DEVICES = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_one_known_allocation(bench, dev):
    held = []

    def step():  # 3 MiB of float32 each step, kept past the step's end
        held.append(torch.empty(3 * MIB // 4, dtype=torch.float32, device=dev))

    step()  # warm-up
    assert bench.step_peak_mib(step, dev) == pytest.approx(3.0)
    assert len(held) == 3
    assert bench.step_peak_mib(lambda: None, dev) == 0.0


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_peak_is_above_the_start_with_frees(bench, dev):
    """A step that first frees what the step before left (as ``zero_grad`` frees ``.grad``): those bytes are
    below the start, so the peak is 1.5 MiB, not the 4.5 MiB the allocations alone add up to."""
    state = {"kept": torch.empty(3 * MIB, dtype=torch.uint8, device=dev)}

    def step():
        state.clear()  # −3 MiB: the previous step's tensor
        a = torch.empty(MIB, dtype=torch.uint8, device=dev)  # −2
        b = torch.empty(MIB // 2, dtype=torch.uint8, device=dev)  # −1.5
        del a  # −2.5
        state["kept"] = torch.empty(3 * MIB, dtype=torch.uint8, device=dev)  # +0.5
        c = torch.empty(MIB, dtype=torch.uint8, device=dev)  # +1.5: the peak
        del b, c  # 0: the step holds what it held at its start

    step()  # warm-up
    assert bench.step_peak_mib(step, dev) == pytest.approx(1.5)


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_a_step_that_replaces_what_it_holds(bench, dev):
    """Free 1 MiB, then allocate 1 MiB: nothing above the start (0, not 1)."""
    state = {"kept": torch.empty(MIB, dtype=torch.uint8, device=dev)}

    def step():
        state.clear()
        state["kept"] = torch.empty(MIB, dtype=torch.uint8, device=dev)

    step()
    assert bench.step_peak_mib(step, dev) == 0.0


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_the_loop_memory_counts_what_a_loop_keeps(bench, dev):
    """`loop_memory` (CUDA only): a loop that keeps 30 MiB per step holds 60 MiB after two steps, and takes two
    30 MiB segments (a request of 10 MiB or more is rounded up to 2 MiB); a loop that keeps nothing holds
    nothing at its peak beyond a step's working memory, and takes at most the smallest segment (2 MiB)."""
    held = []

    def keeps():
        held.append(torch.empty(30 * MIB // 4, dtype=torch.float32, device=dev))

    def small():
        torch.ones(16, device=dev).sum()

    memory = bench.loop_memory(keeps, dev, steps=2)
    if dev.type != "cuda":
        assert memory is None and held == []
        return
    assert memory == {"footprint": 60.0, "peak": 60.0}
    held.clear()
    small_memory = bench.loop_memory(small, dev, steps=2)
    assert small_memory["footprint"] == pytest.approx(2.0, abs=2.0)
    assert small_memory["peak"] < 0.01


def test_one_loop_alone(bench):
    """`loops(..., only=...)` builds that loop and nothing else, and runs nothing (a process measuring one loop's
    memory holds no other loop's model, and nothing ran before the measure): no clipping method found."""
    build, make, b = next(iter(bench.models(False).values()))
    fns, method = bench.loops(build, make, b, torch.device("cpu"), 8, only="non-private")
    assert list(fns) == ["non-private"] and method is None
    fns, method = bench.loops(build, make, b, torch.device("cpu"), 8, only="dpspec")
    assert list(fns) == ["dpspec"] and method is None
    fns["dpspec"]()
    fns, method = bench.loops(build, make, b, torch.device("cpu"), 8)
    assert {"non-private", "dpspec"} <= set(fns) and method is not None


def test_memory_cells_name_the_pool_and_the_captures(bench):
    """The footprint cell of a graphed loop names its pool and how many captures the clipped sum took (a graph
    captured again after the pool was released for a new batch size counts again)."""
    mem = {
        "non-private": {"footprint": 68.0, "peak": 67.0},
        "dpspec graph poisson": {"footprint": 144.0, "peak": 136.0, "pool": 6.0, "captures": 9},
        "opacus ghost": {"footprint": 72.0, "peak": 70.0},
    }
    cells = bench.memory_cells(mem, ["dpspec", "dpspec graph poisson", "opacus ghost"])
    assert cells.split(" | ")[0] == "68 / — / 144 (pool 6, 9 captures) / 72"


@pytest.fixture(scope="module")
def snapshot_report():
    return _script("gpu_memory_snapshot")


def _frame(path, line, name):
    return {"filename": path, "line": line, "name": name}


def test_the_memory_snapshot_report_on_a_made_up_snapshot(snapshot_report):
    """benchmarks/gpu_memory_snapshot.py's report: segments per pool, the segment taken in each step by the code
    that asked, and the live blocks by that code."""
    ours = _frame("/x/dpspec/torch/cuda_graph.py", 700, "_record")
    inner = _frame("/x/torch/nn/functional.py", 10, "linear")
    snap = {
        "segments": [
            {"device": 0, "address": 100, "total_size": 4 * MIB, "allocated_size": 3 * MIB, "segment_pool_id": (0, 0),
             "blocks": [{"state": "active_allocated", "size": 3 * MIB, "frames": [inner, ours]},
                        {"state": "inactive", "size": 1 * MIB, "frames": []}]},
            {"device": 0, "address": 200, "total_size": 8 * MIB, "allocated_size": 2 * MIB, "segment_pool_id": (1, 0),
             "blocks": [{"state": "active_allocated", "size": 2 * MIB, "frames": [ours]}]},
        ],
        "device_traces": [[
            {"action": "segment_alloc", "addr": 100, "size": 4 * MIB, "frames": [inner, ours]},  # step 0
            {"action": "alloc", "addr": 100, "size": 3 * MIB, "frames": [inner, ours]},
            {"action": "segment_alloc", "addr": 300, "size": 16 * MIB, "frames": [inner]},  # step 1
            {"action": "segment_free", "addr": 300, "size": 16 * MIB, "frames": [inner]},
            {"action": "segment_alloc", "addr": 200, "size": 8 * MIB, "frames": [ours]},  # step 2
        ]],
    }
    text = snapshot_report.summarize(snap, [2, 4, 5])
    assert "default: 4.0 / 3.0, 1" in text and "pool (1, 0): 8.0 / 2.0, 1" in text
    assert "step   0       +4.0  default            dpspec/torch/cuda_graph.py:700 _record ← torch/nn/functional.py:10 linear" in text
    assert "step   1      +16.0  freed by the end   torch/nn/functional.py:10 linear" in text
    assert "step   1      −16.0" in text
    assert "step   2       +8.0  pool (1, 0)        dpspec/torch/cuda_graph.py:700 _record" in text
    assert "step 0: 4, step 1: 4, step 2: 12" in text
    live = text.split("allocated at the end")[1]
    assert "3.0  default" in live and "2.0  pool (1, 0)" in live


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_memory_snapshot_report_on_a_recorded_history(snapshot_report):
    dev = torch.device("cuda")
    torch.cuda.empty_cache()  # (each allocation below takes a segment of its own)
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    try:
        ends, held = [], []
        for _ in range(2):
            held.append(torch.empty(66 * MIB, dtype=torch.uint8, device=dev))
            ends.append(len(torch.cuda.memory._snapshot()["device_traces"][0]))
        text = snapshot_report.summarize(torch.cuda.memory._snapshot(), ends)
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    assert "step   1" in text and "test_bench_memory.py" in text
