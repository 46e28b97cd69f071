"""Lint, format and type checks (settings in pyproject.toml).

``ruff check`` and ``ruff format --check`` hold for the whole package. mypy holds for the packages and
modules listed in ``TYPED``: the numbers and types every stage rests on, the registry and its hook types,
the extension API, the shared stages and the families' own modules; the rest of the package (runtime
modules, the Pufferfish, GCON and SWM code, the statistics family) is being brought under it. Each check
is skipped when its tool is not installed (`pip install -e .[test]` installs both).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["dpspec"]
TYPED = [
    # the numbers and types every stage rests on, the registry and its hook types, the extension API
    "dpspec/accounting",
    "dpspec/ir",
    "dpspec/errors.py",
    "dpspec/families/__init__.py",
    "dpspec/families/hooks.py",
    "dpspec/families/template",
    "dpspec/compiler/api.py",
    "dpspec/torch/clipping",
    "dpspec/tuning",
    # the shared stages: front end, checker, compiler driver, certificate, audit, tools
    "dpspec/__init__.py",
    "dpspec/__main__.py",
    "dpspec/diagnostics.py",
    "dpspec/docs.py",
    "dpspec/editors.py",
    "dpspec/frontend.py",
    "dpspec/limits.py",
    "dpspec/progress.py",
    "dpspec/parse",
    "dpspec/lower",
    "dpspec/check/__init__.py",
    "dpspec/check/framework.py",
    "dpspec/check/rules.py",
    "dpspec/check/rules_conformance.py",
    "dpspec/check/rules_distributed.py",
    "dpspec/check/rules_numbers.py",
    "dpspec/check/rules_pufferfish.py",
    "dpspec/check/rules_runtime.py",
    "dpspec/check/rules_schedule.py",
    "dpspec/compiler/__init__.py",
    "dpspec/compiler/accountant_selection.py",
    "dpspec/compiler/common.py",
    "dpspec/compiler/compile.py",
    "dpspec/compiler/errors.py",
    "dpspec/compiler/formulas.py",
    "dpspec/compiler/hooks.py",
    "dpspec/compiler/sensitivity.py",
    "dpspec/certificate/__init__.py",
    "dpspec/certificate/explain.py",
    "dpspec/certificate/model.py",
    "dpspec/certificate/run.py",
    "dpspec/certificate/run_record.py",
    "dpspec/certificate/verify.py",
    "dpspec/audit/__init__.py",
    "dpspec/audit/api.py",
    "dpspec/audit/base.py",
    "dpspec/audit/mutations.py",
    "dpspec/audit/runtime.py",
    "dpspec/audit/stats.py",
    "dpspec/cli",
    "dpspec/data",
    "dpspec/demo/__init__.py",
    "dpspec/demo/__main__.py",
    "dpspec/plot",
    "dpspec/distributed/__init__.py",
    "dpspec/distributed/comm.py",
    "dpspec/distributed/examples.py",
    "dpspec/distributed/sampling.py",
    "dpspec/mechanisms/__init__.py",
    "dpspec/mechanisms/errors.py",
    "dpspec/mechanisms/ledger.py",
    "dpspec/mechanisms/noise_device.py",
    "dpspec/mechanisms/per_example.py",
    "dpspec/mechanisms/registry.py",
    "dpspec/mechanisms/release.py",
    # the families' folders (their runtime and torch backend modules are not yet typed)
    "dpspec/families/gaussian/__init__.py",
    "dpspec/families/gaussian/audit.py",
    "dpspec/families/gaussian/compile.py",
    "dpspec/families/gaussian/demo.py",
    "dpspec/families/gaussian/plot.py",
    "dpspec/families/gaussian/rules.py",
    "dpspec/families/dpsgd/__init__.py",
    "dpspec/families/dpsgd/audit.py",
    "dpspec/families/dpsgd/canary.py",
    "dpspec/families/dpsgd/compile.py",
    "dpspec/families/dpsgd/demo.py",
    "dpspec/families/dpsgd/distributed.py",
    "dpspec/families/dpsgd/plot.py",
    "dpspec/families/dpsgd/rules.py",
    "dpspec/families/dpsgd/wrapper_audit.py",
    "dpspec/families/srpp_sgd/__init__.py",
    "dpspec/families/srpp_sgd/audit.py",
    "dpspec/families/srpp_sgd/compile.py",
    "dpspec/families/srpp_sgd/compose.py",
    "dpspec/families/srpp_sgd/demo.py",
    "dpspec/families/srpp_sgd/distributed.py",
    "dpspec/families/srpp_sgd/plot.py",
    "dpspec/families/srpp_sgd/rules.py",
    "dpspec/families/relational_dpsgd/__init__.py",
    "dpspec/families/relational_dpsgd/audit.py",
    "dpspec/families/relational_dpsgd/compile.py",
    "dpspec/families/relational_dpsgd/demo.py",
    "dpspec/families/relational_dpsgd/distributed.py",
    "dpspec/families/relational_dpsgd/plot.py",
    "dpspec/families/relational_dpsgd/rules.py",
    "dpspec/families/relational_dpsgd/sharding.py",
]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which(tool) or shutil.which(tool, path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip(f"{tool} is not installed")
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check():
    r = _run("ruff", "check", *PACKAGES)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format():
    r = _run("ruff", "format", "--check", *PACKAGES)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_mypy():
    r = _run("mypy", *TYPED)
    assert r.returncode == 0, r.stdout + r.stderr
