"""Per-example clipping without per-example gradients: a registry of per-layer rules.

For a layer whose per-example weight gradient is a sum of outer products — ``nn.Linear`` on inputs of
any rank (∇W_i = Σ_t δ_{i,t} a_{i,t}ᵀ over the sequence positions t), a convolution (the same after
``unfold``), the projections inside ``nn.MultiheadAttention`` — the squared norm is

    ‖∇W_i‖² = Σ_{t,s} (a_{i,t}·a_{i,s}) (δ_{i,t}·δ_{i,s})                      (ghost norm)

(Goodfellow 2015; Li et al., ICLR 2022, §4 "ghost clipping"), or ‖Σ_t δ_{i,t} a_{i,t}ᵀ‖² computed from the
(B, d_out, d_in) per-example gradient when that is cheaper — the per-layer choice of Bu et al.,
ICML 2023 ("mixed ghost clipping": ghost when 2T² < d_in·d_out). The clipped sum
Σ_i s_i ∇W_i = (s ⊙ δ)ᵀ a is one matrix product on the activations and output gradients kept from
the one backward pass (book-keeping, Bu et al. 2023 §3): no second backward, no (B, d) gradients
of the large layers. Embeddings use ‖∇E_i‖² = Σ_{t,s} [x_t = x_s] δ_t·δ_s; the normalisation layers'
affine weights and every bias have small per-example gradients that are formed directly.

One file per layer kind registers its rules: :mod:`.linear`, :mod:`.conv`, :mod:`.embedding`,
:mod:`.norm`, :mod:`.attention`, :mod:`.hf_conv1d` and :mod:`.hf_rmsnorm` (Hugging Face's GPT-2 ``Conv1D``
and Llama-family RMSNorms, matched by name). :func:`dpspec.torch.clipping.engine.clipped_sum` runs them;
``dpspec.mechanisms.per_example.clipped_grad_sum`` picks them automatically when every trainable
parameter belongs to a layer with a rule (else ``torch.func.vmap``, else a loop) and says which in
``ClippedSum.method``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Rule", "RULES", "register", "rule_for", "Outer", "Direct", "Embed", "Unsupported", "total"]


class Unsupported(Exception):
    """This model (or this call of a layer) is outside the rules: the caller falls back to vmap."""


@dataclass
class Outer:
    """A gradient Σ_t D_t A_tᵀ per example: A (B, T, d_in), D (B, T, d_out) → (d_out, d_in)."""

    A: Any
    D: Any
    G: Any = None  # the (B, d_out, d_in) per-example gradients, when the norm formed them


@dataclass
class Direct:
    """A per-example gradient formed directly: G (B, *shape)."""

    G: Any


@dataclass
class Embed:
    """An embedding's gradient Σ_t e_{x_t} D_tᵀ per example: idx (B, T), D (B, T, dim), ``rows`` rows."""

    idx: Any
    D: Any
    rows: int


class Rule:
    """How one layer kind's per-example gradients are formed from its inputs and output gradients.

    ``types``: the exact module classes it covers (a subclass may change ``forward``: not covered).
    ``params(m)``: {local name: parameter} it owns (including its children's, for a composite layer).
    ``install(m, record)``: capture ``record(m, inputs, output)`` for each call (default: a forward hook);
    returns a callable that undoes it. ``parts(m, calls, deltas)``: {local name: [part, …]}, the
    parameter's per-example gradient being the parts concatenated along dim 0 and reshaped."""

    types: tuple = ()

    def check(self, m) -> str | None:
        """None if ``m`` is covered, else why not."""
        return None

    def params(self, m) -> dict:
        return dict(m.named_parameters(recurse=False))

    def install(self, m, record):
        h = m.register_forward_hook(lambda mod, inp, out: record(mod, inp, out))
        return h.remove

    def per_example(self, m, inputs, out, B: int):
        """(inputs, output) with one row per example where this call is shared by the whole batch (a
        broadcast lookup, made once for B examples), so that each example's output gradient can be read;
        None to leave the call as it is (the default). The value returned replaces the layer's output: it
        must equal it broadcast. Checked like every rule, once per model, against each example alone."""
        return None

    def outputs(self, out) -> list:
        """The tensors of one call's output whose gradients the parts need (default: the output)."""
        return [out]

    def parts(self, m, calls, deltas) -> dict:
        raise NotImplementedError


def total(terms):
    """The terms added in order: what ``sum(terms)`` computes, without its leading ``0 +`` (a kernel and a
    pass over the data per call)."""
    it = iter(terms)
    out = next(it)
    for t in it:
        out = out + t
    return out


RULES: dict = {}
RULES_BY_NAME: dict = {}  # "module.Class" → rule, for a library's class dpspec does not import


def register(rule: Rule) -> Rule:
    for t in rule.types:
        RULES[t] = rule
    for name in getattr(rule, "type_names", ()):
        RULES_BY_NAME[name] = rule
    return rule


def rule_for(m) -> Rule | None:
    _load()
    t = type(m)
    hit = RULES.get(t)
    if hit is None and RULES_BY_NAME:
        hit = RULES_BY_NAME.get(f"{t.__module__}.{t.__qualname__}")
    return hit


_LOADED = False


def _load() -> None:
    global _LOADED
    if not _LOADED:
        from . import attention, conv, embedding, hf_conv1d, hf_rmsnorm, linear, norm  # noqa: F401  (each registers its rules)

        _LOADED = True
