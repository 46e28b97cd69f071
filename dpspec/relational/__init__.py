"""Relational DP-SGD with entity-level (node) privacy (Huang et al. 2025, Alg. 1-3).

Modules: ``graph`` (validation, node-disjoint splits), ``capping`` (degree capping),
``samplers`` (Poisson positives, NEG-SAMPLE-WOR), ``clipping`` (static / standard / FREQ-CLIP and
their sensitivities), ``losses`` (InfoNCE, hinge), ``encoders`` (MLP, MiniLM), ``trainer``
(Alg. 3), ``metrics`` (MRR, Hits@k).  Accountants: :mod:`dpspec.accounting.relational`.
torch is imported only by ``losses``, ``encoders`` and ``trainer``.
"""

from .capping import cap_degrees, capping_change, max_degree
from .clipping import CLIP_MODES, clipped_sum, freq_counts, neighbouring_batch, static_threshold, tuple_thresholds
from .graph import RelationalGraph, from_graph_dataset, node_disjoint_split, validate_edges
from .samplers import PoissonEdgeSampler, TupleBatch, make_negative_sampler, make_positive_sampler, neg_sample_wor

__all__ = [
    "CLIP_MODES",
    "PoissonEdgeSampler",
    "RelationalGraph",
    "TupleBatch",
    "cap_degrees",
    "capping_change",
    "clipped_sum",
    "freq_counts",
    "from_graph_dataset",
    "make_negative_sampler",
    "make_positive_sampler",
    "max_degree",
    "neg_sample_wor",
    "neighbouring_batch",
    "node_disjoint_split",
    "static_threshold",
    "tuple_thresholds",
    "validate_edges",
]
