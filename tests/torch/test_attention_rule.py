"""The ``nn.MultiheadAttention`` rule (dpspec.torch.clipping.attention): its per-example norms and clipped
sums against the vmap reference (each example alone, float64, 1e-10 relative) for encoder layers with
every kind of mask, cross-attention and attention weights; its shadow forward against PyTorch's own
forward; the packed projection of self-attention as one part."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from dpspec.mechanisms.per_example import clipped_grad_sum, per_example_grads
from dpspec.torch.clipping import Direct, Outer, engine, rule_for

torch.set_num_threads(1)
F64 = torch.float64
V, E, H, T = 11, 8, 2, 5
pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop")


def pad_masks(x, kind, dtype):
    """The key-padding mask of token batch ``x`` (token 0 is padding): None, boolean or float."""
    pad = x == 0
    if kind is None:
        return None
    if kind == "bool":
        return pad
    if kind == "float-inf":
        return torch.zeros(pad.shape, dtype=dtype).masked_fill(pad, float("-inf"))
    return -2.5 * pad.to(dtype) + 0.25 * (x % 3).to(dtype)  # an additive bias, finite everywhere


class Layer(nn.Module):
    """Embedding → nn.TransformerEncoderLayer (batch_first) → mean → linear."""

    def __init__(self, kpm=None, causal=False, norm_first=False, layers=1):
        super().__init__()
        self.emb = nn.Embedding(V, E)
        layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, batch_first=True, norm_first=norm_first)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False) if layers > 1 else layer
        self.fc = nn.Linear(E, 3)
        self.kpm, self.causal, self.layers = kpm, causal, layers

    def forward(self, x):
        h = self.emb(x)
        kpm = pad_masks(x, self.kpm, h.dtype)
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], dtype=h.dtype) if self.causal else None
        if self.layers > 1:
            h = self.enc(h, mask=mask, src_key_padding_mask=kpm, is_causal=self.causal or None)
        else:
            h = self.enc(h, src_mask=mask, src_key_padding_mask=kpm, is_causal=self.causal)
        return self.fc(h.mean(dim=1))


class Bare(nn.Module):
    """A bare nn.MultiheadAttention: self-attention, cross-attention (key is value, or not), its weights."""

    def __init__(self, kind="self", need_weights=False, kpm="bool", attn_mask=None, bias=True, twice=False):
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.mem = nn.Embedding(V, E) if kind != "self" else None
        self.mha = nn.MultiheadAttention(E, H, batch_first=True, bias=bias)
        self.fc = nn.Linear(E, 3)
        self.kind, self.need_weights, self.kpm, self.attn_mask, self.twice = kind, need_weights, kpm, attn_mask, twice

    def forward(self, x):
        q = self.emb(x)
        if self.kind == "self":
            k = v = q
            src = x
        else:
            src = x[:, 1:]  # S = T - 1 source positions
            k = self.mem(src)
            v = k if self.kind == "cross-kv" else torch.tanh(k)
        L, S = x.shape[1], src.shape[1]
        kpm = pad_masks(src, self.kpm, q.dtype)
        am = None
        if self.attn_mask == "2d-float":
            am = torch.linspace(-1.0, 1.0, L * S, dtype=q.dtype).reshape(L, S)
        elif self.attn_mask == "2d-bool":
            am = torch.zeros(L, S, dtype=torch.bool)
            am[0, -1] = True
        elif self.attn_mask == "3d":  # one mask per example and head, from the example's own tokens
            am = (0.1 * (x[:, :, None] - src[:, None, :]).to(q.dtype)).repeat_interleave(H, dim=0)
        a, w = self.mha(q, k, v, key_padding_mask=kpm, attn_mask=am, need_weights=self.need_weights)
        if self.twice:  # the same module again, as self-attention on its output
            a2, _ = self.mha(a, a, a, need_weights=False)
            a = a + a2
        out = self.fc(a[:, 0])
        if w is not None:  # the gradient flows through the weights too
            out = out + w.pow(2).sum(dim=(1, 2))[:, None]
        return out


def batch(B=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V, (B, T), generator=g)
    x[:, :2] = torch.randint(1, V, (B, 2), generator=g)  # never a fully padded row (nor source)
    return x, torch.randint(0, 3, (B,), generator=g)


def ce(o, t):
    return nn.functional.cross_entropy(o, t)


def close(a, b, rtol):
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max()) <= rtol * max(float(b.abs().max()), 1e-300)


MODELS = {
    "layer": lambda: Layer(),
    "layer norm_first": lambda: Layer(norm_first=True),
    "layer kpm bool": lambda: Layer(kpm="bool"),
    "layer kpm float -inf": lambda: Layer(kpm="float-inf"),
    "layer kpm float bias norm_first": lambda: Layer(kpm="float-bias", norm_first=True),
    "layer causal": lambda: Layer(causal=True),
    "layer causal norm_first": lambda: Layer(causal=True, norm_first=True),
    "layer causal + kpm float": lambda: Layer(kpm="float-inf", causal=True),
    "encoder 2 layers causal": lambda: Layer(causal=True, layers=2),
    "encoder 2 layers kpm float": lambda: Layer(kpm="float-inf", layers=2, norm_first=True),
    "mha self, 2d float mask": lambda: Bare("self", attn_mask="2d-float", kpm="float-bias"),
    "mha self, 3d mask, no bias": lambda: Bare("self", attn_mask="3d", kpm=None, bias=False),
    "mha cross (key is value)": lambda: Bare("cross-kv"),
    "mha cross (key, value apart)": lambda: Bare("cross", kpm="float-bias"),
    "mha cross, 2d bool mask": lambda: Bare("cross-kv", attn_mask="2d-bool"),
    "mha need_weights": lambda: Bare("self", need_weights=True),
    "mha cross need_weights": lambda: Bare("cross", need_weights=True, attn_mask="2d-float", kpm="float-inf"),
    "mha called twice (cross, then self)": lambda: Bare("cross-kv", twice=True),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_rules_equal_vmap(name):
    torch.manual_seed(0)
    m = MODELS[name]().to(F64)
    x, y = batch()
    assert engine.supported(m) is None
    g = per_example_grads(m, ce, x, y)
    norms = torch.stack([v.reshape(len(x), -1).pow(2).sum(1) for v in g.values()], 1).sum(1).sqrt()
    srt = norms.sort().values
    clip = float(srt[2] + srt[3]) / 2  # half the examples are clipped
    got = clipped_grad_sum(m, ce, x, y, clip=clip, method="rules")
    ref = clipped_grad_sum(m, ce, x, y, clip=clip, method="vmap")
    assert got.method == "rules" and ref.method == "vmap"
    assert close(got.norms, ref.norms, 1e-10) and close(got.norms, norms, 1e-10)
    assert set(got.sums) == set(ref.sums) == set(g)
    for k in ref.sums:
        assert got.sums[k].shape == ref.sums[k].shape and close(got.sums[k], ref.sums[k], 1e-10), k
    assert got.clipped_fraction == ref.clipped_fraction == 0.5
    pcs = [0.3] * len(g)  # per-layer clipping: one norm per trainable tensor
    got = clipped_grad_sum(m, ce, x, y, per_layer_clips=pcs, method="rules")
    ref = clipped_grad_sum(m, ce, x, y, per_layer_clips=pcs, method="vmap")
    assert close(got.norms, ref.norms, 1e-10)
    for k in ref.sums:
        assert close(got.sums[k], ref.sums[k], 1e-10), k


def _parts(m, x, y):
    """The rule's parts as it made them (the engine lets go of a part's activations and output gradients
    once its per-example gradients are formed: kept here to inspect them)."""
    from unittest import mock

    names = [k for k, p in m.named_parameters() if p.requires_grad]
    with mock.patch.object(engine, "_compact", lambda part: None):
        return engine._grads(m, ce, x, y, names)[3]


def test_self_attention_is_one_packed_part():
    torch.manual_seed(0)
    m = Layer(kpm="bool").to(F64)
    x, y = batch()
    parts = _parts(m, x, y)
    (w,) = parts["enc.self_attn.in_proj_weight"]
    (b,) = parts["enc.self_attn.in_proj_bias"]
    assert isinstance(w, Outer) and tuple(w.D.shape) == (6, T, 3 * E) and tuple(w.A.shape) == (6, T, E)
    assert isinstance(b, Direct) and tuple(b.G.shape) == (6, 3 * E)
    # the part is the per-example gradient of the whole (3E, E) weight
    G = torch.einsum("bto,bti->boi", w.D, w.A)
    ref = per_example_grads(m, ce, x, y)["enc.self_attn.in_proj_weight"]
    assert G.shape == ref.shape and close(G, ref, 1e-10)
    assert close(b.G, per_example_grads(m, ce, x, y)["enc.self_attn.in_proj_bias"], 1e-10)


@pytest.mark.parametrize(
    "kind, twice, rows",
    [
        ("cross-kv", False, [E, 2 * E]),
        ("cross", False, [E, E, E]),
        ("cross-kv", True, [E, 2 * E]),
        ("cross", True, [E, E, E]),
    ],
)
def test_other_calls_are_row_blocks(kind, twice, rows):
    # q alone and k, v packed; q, k and v apart; a module called as cross- and as self-attention: the row
    # blocks common to its calls (each call's output gradient cut to them)
    torch.manual_seed(0)
    m = Bare(kind, twice=twice).to(F64)
    x, y = batch()
    ws = _parts(m, x, y)["mha.in_proj_weight"]
    assert [p.D.shape[-1] for p in ws] == rows
    ref = per_example_grads(m, ce, x, y)["mha.in_proj_weight"]
    G = torch.cat([torch.einsum("bto,bti->boi", p.D, p.A) for p in ws], dim=1)
    assert close(G, ref, 1e-10)


# --- the shadow forward against PyTorch's own ---------------------------------------------------------------


def _shadowed(m):
    """``m``'s forward replaced by the rule's (records dropped); returns the undo."""
    return rule_for(m).install(m, lambda mod, inputs, outs: None)


CASES = {  # name -> (MHA keyword arguments, call keyword arguments(x, dtype), query/key/value kind)
    "self": ({}, lambda x, d: {}, "self"),
    "self kpm bool, need_weights=False": ({}, lambda x, d: {"key_padding_mask": x == 0, "need_weights": False}, "self"),
    "self kpm float, 2d float mask": (
        {},
        lambda x, d: {
            "key_padding_mask": pad_masks(x, "float-bias", d),
            "attn_mask": torch.linspace(-1, 1, T * T, dtype=d).reshape(T, T),
            "need_weights": False,
        },
        "self",
    ),
    "self causal hint": (
        {},
        lambda x, d: {
            "attn_mask": nn.Transformer.generate_square_subsequent_mask(T, dtype=d),
            "is_causal": True,
            "need_weights": False,
        },
        "self",
    ),
    "self causal hint + kpm bool, bool mask": (
        {},
        lambda x, d: {
            "attn_mask": torch.triu(torch.ones(T, T, dtype=torch.bool), 1),
            "key_padding_mask": x == 0,
            "is_causal": True,
            "need_weights": False,
        },
        "self",
    ),
    "self causal, weights per head": (
        {},
        lambda x, d: {
            "attn_mask": nn.Transformer.generate_square_subsequent_mask(T, dtype=d),
            "is_causal": True,
            "average_attn_weights": False,
        },
        "self",
    ),
    "self 3d mask, no bias": (
        {"bias": False},
        lambda x, d: {"attn_mask": torch.randn(x.shape[0] * H, T, T, dtype=d), "need_weights": False},
        "self",
    ),
    "self seq-first": ({"batch_first": False}, lambda x, d: {"need_weights": False}, "self"),
    "cross kv seq-first, weights": ({"batch_first": False}, lambda x, d: {"key_padding_mask": x == 0}, "cross-kv"),
    "cross kv": ({}, lambda x, d: {"key_padding_mask": x == 0, "need_weights": False}, "cross-kv"),
    "cross": ({}, lambda x, d: {"key_padding_mask": pad_masks(x, "float-inf", d), "need_weights": False}, "cross"),
    "cross, weights": ({}, lambda x, d: {"key_padding_mask": x == 0}, "cross"),
}


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (F64, 1e-12)])
@pytest.mark.parametrize("case", list(CASES))
def test_the_shadow_forward_is_torchs(case, dtype, tol):
    kw, call, kind = CASES[case]
    torch.manual_seed(0)
    m = nn.MultiheadAttention(E, H, batch_first=kw.pop("batch_first", True), **kw).to(dtype)
    assert m.training and m.dropout == 0.0
    x, _ = batch()
    g = torch.Generator().manual_seed(5)
    q = torch.randn(6, T, E, generator=g, dtype=dtype)
    k = q if kind == "self" else torch.randn(6, T, E, generator=g, dtype=dtype)
    v = k if kind != "cross" else torch.randn(6, T, E, generator=g, dtype=dtype)
    if not m.batch_first:  # (T, B, E), the same tensor where it was
        qt = q.transpose(0, 1)
        kt = qt if k is q else k.transpose(0, 1)
        q, k, v = qt, kt, kt if v is k else v.transpose(0, 1)
    args = call(x, dtype)
    want = m(q, k, v, **args)
    undo = _shadowed(m)
    try:
        got = m(q, k, v, **args)
    finally:
        undo()
    assert "forward" not in m.__dict__
    assert close(got[0], want[0], tol)
    assert (got[1] is None) == (want[1] is None)
    if want[1] is not None:
        assert got[1].shape == want[1].shape and close(got[1], want[1], tol)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (F64, 1e-12)])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masks", ["none", "kpm bool", "kpm float", "causal", "causal + kpm"])
def test_an_encoder_layer_under_the_shadow_forward_is_torchs(masks, norm_first, dtype, tol):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, batch_first=True, norm_first=norm_first).to(dtype)
    x, _ = batch()
    h = torch.randn(6, T, E, generator=torch.Generator().manual_seed(3), dtype=dtype)
    kw: dict = {}
    if "kpm" in masks:
        kw["src_key_padding_mask"] = (x == 0) if "bool" in masks else pad_masks(x, "float-inf", dtype)
    if "causal" in masks:
        kw["src_mask"] = nn.Transformer.generate_square_subsequent_mask(T, dtype=dtype)
        kw["is_causal"] = True
    want = layer(h, **kw)
    undo = _shadowed(layer.self_attn)
    try:
        got = layer(h, **kw)
    finally:
        undo()
    assert close(got, want, tol)


@pytest.mark.parametrize("need_weights", [False, True])
def test_dropout_draws_the_same_masks_as_torch(need_weights):
    # with dropout on, the shadow forward calls the same random kernel on the same shapes: the same draws
    torch.manual_seed(0)
    m = nn.MultiheadAttention(E, H, dropout=0.5, batch_first=True).to(F64)
    h = torch.randn(6, T, E, generator=torch.Generator().manual_seed(3), dtype=F64)
    torch.manual_seed(7)
    want = m(h, h, h, need_weights=need_weights)
    undo = _shadowed(m)
    try:
        torch.manual_seed(7)
        got = m(h, h, h, need_weights=need_weights)
        torch.manual_seed(8)
        other = m(h, h, h, need_weights=need_weights)
    finally:
        undo()
    assert close(got[0], want[0], 1e-12)
    assert not close(other[0], want[0], 1e-3)  # the dropout is on
    if need_weights:
        assert close(got[1], want[1], 1e-12)


def test_the_causal_hint_without_a_mask_is_refused_like_torch():
    m = nn.MultiheadAttention(E, H, batch_first=True)
    h = torch.randn(2, T, E)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(h, h, h, is_causal=True, need_weights=False)
    undo = _shadowed(m)
    try:
        with pytest.raises(RuntimeError, match="Need attn_mask"):
            m(h, h, h, is_causal=True, need_weights=False)
    finally:
        undo()
