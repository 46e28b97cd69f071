#!/usr/bin/env bash
# On a machine with a CUDA GPU: the tests that exercise the private steps on the device, then the
# full-size step benchmark (time, peak step memory, each loop's memory in a process of its own, dispatched
# operations; against Opacus where installed), written to benchmarks/results/bench_gpu_<gpu name>.md (or to
# $BENCH_OUT/bench_gpu_<gpu name>.md). Uses $PYTHON, else the python (or python3) on PATH.
# Where a graphed Poisson loop's footprint is above its prediction (bench_gpu_h200.md), the allocator's history
# over that loop says where it goes, in a call of its own (about a minute each):
#   python benchmarks/gpu_memory_snapshot.py --model Transformer --out benchmarks/results/snapshot_transformer.txt
#   python benchmarks/gpu_memory_snapshot.py --model BERT --out benchmarks/results/snapshot_bert.txt
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python || command -v python3)}"
"$PY" - <<'PY'
import torch, sys
if not torch.cuda.is_available():
    sys.exit("no CUDA device")
print(torch.__version__, torch.cuda.get_device_name(0))
PY
"$PY" -m pytest -q -p no:cacheprovider \
  tests/torch/test_cuda_steps.py tests/torch/test_step_overhead.py tests/torch/test_host_syncs.py \
  tests/torch/test_clipping_rules.py tests/torch/test_attention_rule.py tests/torch/test_device_dtype.py \
  tests/torch/test_secure_training_noise.py tests/torch/test_clipping_memory.py \
  tests/torch/test_matmul_precision.py tests/torch/test_rules_sensitivity.py tests/torch/test_cuda_graph.py \
  tests/torch/test_bench_memory.py
# the data-parallel examples over NCCL, a GPU per rank (skipped with fewer than two)
"$PY" -m pytest -q -p no:cacheprovider tests/distributed/test_distributed_training.py -k nccl
name="$("$PY" -c 'import torch; print(torch.cuda.get_device_name(0).split()[1].lower())')"
"$PY" benchmarks/bench_gpu.py --full --secure --out "${BENCH_OUT:-benchmarks/results}/bench_gpu_${name}.md"
