"""Shared compiled specs for the audit tests (compiled once per worker)."""

from pathlib import Path

import pytest

import dpspec
from tests.conftest import load_example

SPECS = Path(__file__).resolve().parents[2] / "specs"

# Poisson DP-SGD small enough to audit all of its steps in CI time; the mutants of
# dpspec.audit.mutations are detectable at this size (see test_dpsgd_audit.py).
DPSGD_POISSON = """
privacy people { unit record  dataset_size 20 }
train model {
  protect   people
  mechanism dpsgd
  sampling  poisson(rate = 0.1)
  clipping  flat(C = 1.0)
  steps     4
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""

DPSGD_FULL_BATCH = """
privacy people { unit record  dataset_size 8 }
train model {
  protect   people
  mechanism dpsgd
  sampling  full_batch
  clipping  flat(C = 1.0)
  steps     3
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""

DPSGD_SUBSTITUTION = """
privacy patients { unit record(relation = substitution)  dataset_size 20 }
train model {
  protect   patients
  mechanism dpsgd
  sampling  without_replacement(batch_size = 20)
  clipping  per_layer(C = [0.6, 0.8])
  steps     2
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""

DPSGD_GROUP = """
privacy users { unit group(size = 2)  dataset_size 20 }
train model {
  protect   users
  mechanism dpsgd
  sampling  poisson(rate = 0.2)
  clipping  flat(C = 1.0)
  steps     3
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""

GCON_SMALL = """
privacy links { unit edge  data synthetic(generator = sbm_graph, size = 300, seed = 1) }
train clf {
  mechanism      gcon
  propagation    appr(restart = 0.6, steps = [2])
  loss           pseudo_huber(delta = 0.5)
  regularization 0.2
  encoder        mlp(hidden = 16, epochs = 30, seed = 0)
  pseudo_labels  true
  split          planetoid(per_class = 5, seed = 0)
  guarantee      dp(epsilon = 1, delta = 1e-4)
}
"""

# Pufferfish with records whose value nearly reveals the secret: the W∞ sensitivity is close to the
# real leakage, so an under-estimated Δ is visible to the per-record (Ave) audit.
SWM_SEPARATED = """
scenario membership {
  data    dataset(rows)
  secret  group in {A, B}
  prior   empirical
}
release value {
  protect   membership
  mechanism swm
  query     mean(x, bounds = [0, 10])
  slices    axes
  guarantee ave_srpp(alpha = 4, epsilon = 2.0)
}
"""


def separated_rows():
    import numpy as np

    rng = np.random.default_rng(0)
    n = 400
    group = np.array(["A"] * n + ["B"] * n, dtype=object)
    x = np.concatenate([rng.uniform(0, 1, n), rng.uniform(9, 10, n)])
    return {"group": group, "x": x}


@pytest.fixture(scope="session")
def compiled_specs():
    cache = {}

    def get(key: str):
        if key not in cache:
            if key == "swm_separated":
                data = {"rows": separated_rows()}
                cache[key] = (dpspec.compile(SWM_SEPARATED, data=data), data)
            elif key.endswith(".dps"):
                cache[key] = dpspec.compile(load_example(SPECS / key))
            else:
                cache[key] = dpspec.compile(globals()[key])
        return cache[key]

    return get
