"""What each mechanism consumes and produces — read by the checker, never imports torch.

As in OpenDP, every mechanism declares its input (the privacy units and neighbouring relations
its analysis covers) and its output (the privacy notions it can certify). Chaining mismatched
pieces is an error naming both sides, never a silent conversion.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MechanismDecl:
    name: str
    block: str  # "release" or "train"
    units: tuple[str, ...]  # unit kinds whose neighbouring relation the analysis covers
    relations: tuple[str, ...]  # for record/group units: relations covered
    notions: tuple[str, ...]  # guarantee notions it certifies: dp, rdp, srpp, sa_srpp
    summary: str
    source: str
    available: bool = True
    # Whether two certificates of this mechanism compose by adding RDP curves.
    composable: bool = True
    settings: tuple[str, ...] = ()  # settings that mean something for it (others are errors)
    unavailable_reason: str = ""


MECHANISMS: dict[str, MechanismDecl] = {
    "gaussian": MechanismDecl(
        name="gaussian",
        block="release",
        units=("record", "group", "node", "edge"),
        relations=("add_remove", "substitution"),
        notions=("dp", "rdp"),
        summary="Gaussian noise on a query with declared ℓ2 sensitivity w.r.t. the protected unit",
        source="Mironov 2017 Prop. 7; Balle et al. 2020 Thm 21",
        settings=("protect", "mechanism", "query", "sensitivity", "noise", "guarantee", "description"),
    ),
    "dpsgd": MechanismDecl(
        name="dpsgd",
        block="train",
        units=("record", "group"),
        relations=("add_remove", "substitution"),
        notions=("dp", "rdp"),
        summary="DP-SGD: per-example clipping, Gaussian noise, subsampled steps",
        source="Abadi et al. 2016; Mironov–Talwar–Zhang 2019; Schuchardt et al. 2024",
        settings=("protect", "mechanism", "sampling", "clipping", "steps", "epochs", "learning_rate", "momentum",
                  "noise", "guarantee", "dataset_size", "model", "description"),
    ),
    "swm": MechanismDecl(
        name="swm",
        block="release",
        units=("secret",),
        relations=(),
        notions=("srpp",),
        summary="Gaussian sliced Wasserstein mechanism (static release under Ave/Joint-SRPP)",
        source="Zhang & Vorobeychik, Sliced Rényi Pufferfish Privacy, Thms 4.5–4.8",
        composable=False,
        settings=("protect", "mechanism", "query", "slices", "guarantee", "noise", "description"),
    ),
    "srpp_sgd": MechanismDecl(
        name="srpp_sgd",
        block="train",
        units=("secret",),
        relations=(),
        notions=("srpp",),
        summary="SRPP-SGD with the History-Uniform Cap accountants",
        source="Zhang & Vorobeychik, Sliced Rényi Pufferfish Privacy, Thms 5.6–5.8",
        settings=("protect", "mechanism", "sampling", "clipping", "steps", "epochs", "learning_rate", "momentum",
                  "lr_schedule", "noise_units", "accountant", "discrepancy", "dataset_size", "noise", "guarantee",
                  "model", "execution", "description"),
    ),
    "relational_dpsgd": MechanismDecl(
        name="relational_dpsgd",
        block="train",
        units=("node",),
        relations=(),
        notions=("dp", "rdp"),
        summary="relational DP-SGD with entity-level privacy and coupled sampling",
        source="Huang et al., Differentially Private Relational Learning with Entity-level Privacy Guarantees",
        settings=("protect", "mechanism", "sampling", "degree_cap", "clipping", "loss", "encoder", "split", "steps",
                  "epochs", "learning_rate", "noise", "guarantee", "execution", "description"),
    ),
    "gcon": MechanismDecl(
        name="gcon",
        block="train",
        units=("edge",),
        relations=(),
        notions=("dp",),
        summary="GCON: edge-DP graph convolution by objective perturbation",
        source="Wei et al., GCON, Thm 1",
        composable=False,
        settings=("protect", "mechanism", "propagation", "loss", "regularization", "encoder", "pseudo_labels",
                  "split", "inference", "guarantee", "description"),
    ),
}


def unit_phrase(unit) -> str:
    """`a record unit (add_remove)`, `a node unit`, … for messages naming both sides."""
    rel = getattr(unit, "relation", None)
    extra = f" of size {unit.size}" if getattr(unit, "size", None) else ""
    return f"a {unit.kind} unit{extra}" + (f" ({rel})" if rel else "")
