"""GCON's public plan of a training (classes, loss nodes, dimension, split). Shared by the compile step,
the runtime mechanism and the auditor, so it lives on the runtime side: the runtime must not import the
compiler. The graph itself is loaded by ``dpspec.data.bind.load_graph``."""

from __future__ import annotations

from dpspec.errors import DpspecError
from dpspec.families.gcon.settings import GconSettings
from dpspec.ir import models as ir


class GraphPlanError(DpspecError, ValueError):
    """A configuration the plan cannot serve; the compiler reports it as diagnostic ``rule``."""

    def __init__(self, rule: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.rule, self.message, self.hint = rule, message, hint


def plan(t: ir.Training, ds) -> dict:
    """Public quantities the calibration needs: classes, loss nodes, dimension, the split."""
    st = t.settings_as(GconSettings)
    from dpspec.data.graphs import planetoid_split

    split = st.split or ir.SplitSpec()
    train_idx, val_idx, test_idx = planetoid_split(ds.labels, per_class=split.per_class, seed=split.seed)
    c = int(ds.num_classes)
    enc = st.encoder or ir.EncoderSpec(kind="mlp")
    d1 = c if enc.kind == "mlp" else int(ds.features.shape[1]) if ds.features is not None else None
    if d1 is None:
        raise GraphPlanError(
            "DPS726",
            f"graph `{ds.name}` has raw text, not features: it needs an encoder",
            hint="use `encoder mlp(...)` (a TF-IDF of the text feeds the encoder)",
        )
    assert st.propagation is not None  # a GCON training states its propagation (DPS726)
    steps = list(st.propagation.steps)
    n1 = int(ds.num_nodes) if st.pseudo_labels else int(len(train_idx))
    return {
        "classes": c,
        "d1": d1,
        "dim": len(steps) * d1,
        "num_train": n1,
        "train_idx": train_idx,
        "val_idx": val_idx,
        "test_idx": test_idx,
        "steps": steps,
    }
