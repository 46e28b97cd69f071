"""The per-layer clipping rules (dpspec.torch.clipping) against the vmap reference (each example alone):
per-example norms and clipped sums to 1e-6 relative in float64, for every rule and their mixtures."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from dpspec.mechanisms.per_example import clipped_grad_sum, per_example_grads
from dpspec.torch.clipping import engine

torch.set_num_threads(1)
F64 = torch.float64


class SeqLinear(nn.Module):  # nn.Linear on (B, T, d) inputs, one layer applied twice
    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = nn.Linear(5, 7), nn.Linear(7, 7), nn.Linear(7, 3)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        h = torch.tanh(self.b(torch.tanh(self.b(h))))
        return self.head(h.mean(dim=1))


class Convs(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 4, 3, padding=1)
        self.n1 = nn.GroupNorm(2, 4)
        self.c2 = nn.Conv2d(4, 4, 3, stride=2, dilation=1, padding=1, bias=False)
        self.c3 = nn.Conv1d(4, 3, 2, dilation=2)
        self.fc = nn.Linear(3 * 14, 3)

    def forward(self, x):
        h = torch.relu(self.n1(self.c1(x)))
        h = torch.relu(self.c2(h))  # (B, 4, 4, 4)
        h = self.c3(h.flatten(2))  # (B, 3, 14)
        return self.fc(h.flatten(1))


class GroupedConvs(nn.Module):
    """Depthwise and grouped convolutions, "same" padding (odd and even kernels), the other padding modes."""

    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(2, 4, 3, padding=1, groups=2)  # 2 groups of 1 → 2 channels
        self.same = nn.Conv2d(4, 4, 4, padding="same", groups=4, bias=False)  # depthwise, even kernel
        self.refl = nn.Conv2d(4, 6, 3, padding=1, padding_mode="reflect", groups=2)
        self.circ = nn.Conv1d(6, 3, 3, padding=2, padding_mode="circular", dilation=2)
        self.rep = nn.Conv1d(3, 3, 2, padding="same", padding_mode="replicate", groups=3)
        self.fc = nn.Linear(3 * 32, 3)

    def forward(self, x):
        h = torch.tanh(self.dw(x))
        h = torch.tanh(self.same(h))
        h = torch.relu(self.refl(h))[:, :, ::2, :]  # (B, 6, 4, 8)
        h = self.circ(h.flatten(2))  # (B, 3, 32)
        return self.fc(self.rep(h).flatten(1))


class Norms(nn.Module):
    """RMSNorm (a sequence's features) and InstanceNorm with affine parameters (an image's channels)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(2, 3, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(3, affine=True)
        self.proj = nn.Linear(8, 6)
        self.rms = nn.RMSNorm(6)
        self.inorm1 = nn.InstanceNorm1d(3, affine=True)
        self.fc = nn.Linear(3 * 8 * 6, 3)

    def forward(self, x):
        h = torch.tanh(self.inorm(self.c(x)))  # (B, 3, 8, 8)
        h = self.rms(self.proj(h))  # (B, 3, 8, 6)
        h = self.inorm1(h.flatten(2))  # (B, 3, 48)
        return self.fc(h.flatten(1))


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6, padding_idx=0)
        self.norm = nn.LayerNorm(6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(self.norm(self.emb(x)).sum(dim=1))


class Attention(nn.Module):
    def __init__(self, need_weights):
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)
        self.fc = nn.Linear(8, 3)
        self.need_weights = need_weights

    def forward(self, x):
        h = self.emb(x)
        a, w = self.mha(h, h, h, key_padding_mask=x == 0, need_weights=self.need_weights)
        return self.fc(a[:, 0])


class Encoder(nn.Module):
    def __init__(self, batch_first=True):
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(8, 3)
        self.batch_first = batch_first

    def forward(self, x):
        h = self.emb(x)
        if not self.batch_first:
            return self.fc(self.enc(h.transpose(0, 1)).mean(dim=0))
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], dtype=h.dtype)
        return self.fc(self.enc(h, mask=mask, is_causal=True).mean(dim=1))


class LoRA(nn.Module):
    """A frozen linear layer plus a trainable low-rank update B·A (Hu et al. 2022)."""

    def __init__(self, base: nn.Linear, r=2):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.A = nn.Linear(base.in_features, r, bias=False)
        self.B = nn.Linear(r, base.out_features, bias=False)
        nn.init.normal_(self.B.weight, std=0.1)

    @property
    def weight(self):  # nn.TransformerEncoderLayer reads its linear layers' weight and bias
        return self.base.weight

    @property
    def bias(self):
        return self.base.bias

    def forward(self, x):
        return self.base(x) + self.B(self.A(x))


def adapted_encoder():
    m = Encoder()
    for p in m.parameters():
        p.requires_grad_(False)
    for layer in m.enc.layers:
        layer.linear1 = LoRA(layer.linear1)
    m.fc.requires_grad_(True)
    return m


def batch(kind, B=6, T=5):
    g = torch.Generator().manual_seed(1)
    if kind == "seq":
        x = torch.randn(B, T, 5, generator=g, dtype=F64)
    elif kind == "img":
        x = torch.randn(B, 2, 8, 8, generator=g, dtype=F64)
    else:
        x = torch.randint(0, 11, (B, T), generator=g)
        x[:, 0] = torch.randint(1, 11, (B,), generator=g)  # never a fully padded row
    return x, torch.randint(0, 3, (B,), generator=g)


MODELS = {
    "linear-3d-shared": (SeqLinear, "seq"),
    "conv-groupnorm": (Convs, "img"),
    "conv-grouped-padded": (GroupedConvs, "img"),
    "rmsnorm-instancenorm": (Norms, "img"),
    "embedding-layernorm": (Tokens, "tok"),
    "mha": (lambda: Attention(False), "tok"),
    "mha-weights": (lambda: Attention(True), "tok"),
    "transformer": (Encoder, "tok"),
    "lora-transformer": (adapted_encoder, "tok"),
}


def ce(o, t):
    return nn.functional.cross_entropy(o, t)


def close(a, b, rtol=1e-6):
    return float((a - b).abs().max()) <= rtol * max(float(b.abs().max()), 1e-300)


def agrees_by_the_rules(m, x, y, clip=0.5, reference="vmap", method="rules"):
    """``clipped_grad_sum``'s automatic choice on ``m`` is ``method`` (the rules unless said otherwise) and its
    norms and sums, of the parameters' shapes, agree with ``reference`` (each example alone)."""
    got = clipped_grad_sum(m, ce, x, y, clip=clip)
    assert got.method == method, got.fallback
    ref = clipped_grad_sum(m, ce, x, y, clip=clip, method=reference)
    assert close(got.norms, ref.norms)
    for k in ref.sums:
        assert got.sums[k].shape == ref.sums[k].shape and close(got.sums[k], ref.sums[k]), k


@pytest.mark.parametrize("name", list(MODELS))
def test_rule_equals_vmap(name):
    build, kind = MODELS[name]
    torch.manual_seed(0)
    m = build().to(F64)
    x, y = batch(kind)
    assert engine.supported(m) is None
    g = per_example_grads(m, ce, x, y)
    norms = torch.stack([v.reshape(len(x), -1).pow(2).sum(1) for v in g.values()], 1).sum(1).sqrt()
    srt = norms.sort().values
    clip = float(srt[2] + srt[3]) / 2  # half the examples are clipped
    got = clipped_grad_sum(m, ce, x, y, clip=clip, method="rules")
    ref = clipped_grad_sum(m, ce, x, y, clip=clip, method="vmap")
    assert got.method == "rules" and ref.method == "vmap"
    assert close(got.norms, ref.norms) and close(got.norms, norms)
    assert set(got.sums) == set(ref.sums) == set(g)
    for k in ref.sums:
        assert got.sums[k].dtype == F64 and close(got.sums[k], ref.sums[k]), k
    assert got.clipped_fraction == ref.clipped_fraction == 0.5
    # per-layer clipping: one norm per trainable tensor
    pcs = [0.3] * len(g)
    got = clipped_grad_sum(m, ce, x, y, per_layer_clips=pcs, method="rules")
    ref = clipped_grad_sum(m, ce, x, y, per_layer_clips=pcs, method="vmap")
    assert close(got.norms, ref.norms)
    for k in ref.sums:
        assert close(got.sums[k], ref.sums[k]), k


def test_auto_picks_the_rules_and_says_why_not():
    torch.manual_seed(0)
    x, y = batch("tok")
    assert clipped_grad_sum(Encoder().to(F64), ce, x, y, clip=1.0).method == "rules"
    cs = clipped_grad_sum(Encoder(batch_first=False).to(F64), ce, x, y, clip=1.0)
    assert cs.method == "vmap" and "batch_first=False" in cs.fallback
    rnn = nn.Sequential(nn.Embedding(11, 4), nn.GRU(4, 4, batch_first=True))
    assert "without a rule" in engine.supported(rnn)


class Coupled(nn.Module):
    """Centres each feature over the batch: example i's output depends on the others."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        return self.fc(x - x.mean(dim=0, keepdim=True))


def test_a_model_coupling_the_batch_is_caught_and_runs_by_vmap():
    torch.manual_seed(0)
    m = Coupled().to(F64)
    x, y = batch("seq")
    x = x[:, 0]
    ok, why = engine.verified(m, ce, x, y, dict(m.named_parameters()), per_example_grads)
    assert not ok and "differ" in why
    cs = clipped_grad_sum(m, ce, x, y, clip=1.0)
    assert cs.method == "vmap" and cs.fallback == why
    with pytest.raises(ValueError, match="rules"):
        clipped_grad_sum(m, ce, x, y, clip=1.0, method="rules")


def test_a_batch_of_one_example_or_its_copies_decides_nothing():
    """A batch of one example, or of copies of it (a batch padded by repeating its first row), goes through
    a layer coupling the batch as that example alone does: the check must not pass the model on it (the
    rules would then run every later batch through the coupling: one example moving the others' clipped
    gradients, the sum by up to 2C per coupled example)."""
    torch.manual_seed(0)
    m = Coupled().to(F64)
    x, y = batch("seq")
    x = x[:, 0]
    params = dict(m.named_parameters())
    for xs, ys in ((x[:1], y[:1]), (x[:1].expand(4, -1), y[:1].expand(4))):
        ok, why = engine.verified(m, ce, xs, ys, params, per_example_grads)
        assert not ok and "distinct" in why and m not in engine._VERDICTS
        assert clipped_grad_sum(m, ce, xs, ys, clip=1.0).method == "vmap"
    pad = torch.arange(4) >= 1
    assert clipped_grad_sum(m, ce, x[:1].expand(4, -1), y[:1].expand(4), clip=1.0, pad=pad).method == "vmap"
    # two distinct examples among copies (a batch of two padded to four): checked on those two
    xs, ys = torch.cat([x[:2], x[:1], x[:1]]), torch.cat([y[:2], y[:1], y[:1]])
    ok, why = engine.verified(m, ce, xs, ys, params, per_example_grads)
    assert not ok and "differ" in why
    cs = clipped_grad_sum(m, ce, x, y, clip=1.0)
    assert cs.method == "vmap"


def test_nonfinite_examples_are_zeroed_like_vmap():
    torch.manual_seed(0)
    m = Tokens().to(F64)
    x, y = batch("tok")
    x[x == 10] = 9
    engine.verified(m, ce, x, y, dict(m.named_parameters()), per_example_grads)  # checked on finite data
    with torch.no_grad():
        m.emb.weight[10] = float("inf")  # token 10: an infinite embedding, a NaN loss
    x[2, 1] = 10
    got = clipped_grad_sum(m, ce, x, y, clip=0.5, method="rules")
    ref = clipped_grad_sum(m, ce, x, y, clip=0.5, method="vmap")
    assert got.nonfinite == ref.nonfinite == 1 and got.nonfinite_index == ref.nonfinite_index == [2]
    for k in ref.sums:
        assert torch.isfinite(got.sums[k]).all() and close(got.sums[k], ref.sums[k]), k


def test_bfloat16_accumulates_in_float32():
    torch.manual_seed(0)
    m = Encoder().to(torch.bfloat16)
    x, y = batch("tok")
    cs = clipped_grad_sum(m, ce, x, y, clip=1.0)
    assert cs.method == "rules"
    assert all(v.dtype == torch.float32 for v in cs.sums.values())
    ref = clipped_grad_sum(Encoder().to(F64).requires_grad_(True), ce, x, y, clip=1.0, method="vmap")
    assert set(ref.sums) == set(cs.sums)


def test_autocast_runs_the_rules_and_accumulates_in_float32():
    torch.manual_seed(0)
    m = Encoder()  # float32 parameters, a bfloat16 autocast region around the step
    x, y = batch("tok")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cs = clipped_grad_sum(m, ce, x, y, clip=1.0)
    assert cs.method == "rules" and all(v.dtype == torch.float32 for v in cs.sums.values())
    ref = clipped_grad_sum(m, ce, x, y, clip=1.0, method="vmap")
    for k in ref.sums:  # bfloat16 matmuls: close, not equal
        assert float((cs.sums[k] - ref.sums[k]).norm()) <= 0.1 * float(ref.sums[k].norm()) + 1e-3, k


@pytest.mark.parametrize("method", ["ghost", "vmap"])
def test_autocast_sums_stay_float32_on_the_other_paths(method):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = batch("seq")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cs = clipped_grad_sum(m, ce, x[:, 0].float(), y, clip=0.5, method=method)
    assert cs.method == method and all(v.dtype == torch.float32 for v in cs.sums.values())


def test_a_float32_disagreement_is_rechecked_in_float64(monkeypatch):
    # deep float32 models on GPU kernels differ between a batch and each example alone by more than
    # float32's tolerance with no coupling: the check is repeated on a float64 copy, which decides
    torch.manual_seed(0)
    m = Attention(need_weights=False)  # float32
    x, y = batch("tok")
    seen: list = []
    compare = engine._compare

    def spy(*a):
        seen.append(a[-1])
        if a[-1] == torch.float32:  # as if float32 rounding exceeded the tolerance
            return False, "gradient sum differs", True
        return compare(*a)

    monkeypatch.setattr(engine, "_compare", spy)
    ok, why = engine.verified(m, ce, x, y, dict(m.named_parameters()), per_example_grads)
    assert seen == [torch.float32, torch.float64]
    assert ok and why == ""
    assert next(m.parameters()).dtype == torch.float32  # the model itself is untouched
    assert clipped_grad_sum(m, ce, x, y, clip=1.0).method == "rules"


def test_a_coupled_model_fails_the_float64_recheck_too(monkeypatch):
    torch.manual_seed(0)
    m = Coupled()  # float32
    x, y = batch("seq")
    x = x[:, 0].float()
    seen: list = []
    compare = engine._compare

    def spy(*a):
        seen.append(a[-1])
        return compare(*a)

    monkeypatch.setattr(engine, "_compare", spy)
    ok, why = engine.verified(m, ce, x, y, dict(m.named_parameters()), per_example_grads)
    assert not ok and "differ" in why
    assert seen == [torch.float32, torch.float64]


class FlatRows(nn.Module):  # a layer fed the batch's rows flattened: (B·T, d), no leading batch dimension
    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x):
        B, T, d = x.shape
        h = self.b(torch.tanh(self.a(x)).reshape(B * T, d)).reshape(B, T, d)
        return self.head(h.mean(dim=1))


def test_a_layer_fed_flattened_rows_falls_back_to_vmap():
    """The rules read example i off row i of every layer's output: a layer whose output has B·T rows is
    outside them (it made the rules' norms (B·T,) and the probe crash), so auto runs vmap and says why."""
    torch.manual_seed(0)
    model = FlatRows().to(F64)
    x, y = torch.randn(6, 3, 4, dtype=F64), torch.randint(0, 3, (6,))
    cs = clipped_grad_sum(model, nn.functional.cross_entropy, x, y, clip=0.5)
    assert cs.method == "vmap" and "leading batch dimension" in cs.fallback
    ref = clipped_grad_sum(model, nn.functional.cross_entropy, x, y, clip=0.5, method="vmap")
    for k in ref.sums:
        torch.testing.assert_close(cs.sums[k], ref.sums[k])
    with pytest.raises(ValueError, match="leading batch dimension"):
        clipped_grad_sum(model, nn.functional.cross_entropy, x, y, clip=0.5, method="rules")


def test_a_bias_removed_by_a_following_norm_is_not_taken_for_coupling():
    """A convolution's bias before an InstanceNorm has a zero gradient up to rounding (the norm removes any
    per-channel constant): its sums are rounding on their own scale, compared on the model's scale (as the
    norms are) — the rules run it (they fell back to vmap), and still agree with vmap."""

    class Styled(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(2, 4, 3, padding="same", groups=2, padding_mode="reflect")
            self.n1 = nn.GroupNorm(2, 4)
            self.c2 = nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4)
            self.n2 = nn.InstanceNorm2d(4, affine=True)
            self.fc = nn.Linear(4 * 3 * 3, 3)

        def forward(self, x):
            h = torch.relu(self.n1(self.c1(x)))
            return self.fc(torch.tanh(self.n2(self.c2(h))).flatten(1))

    torch.manual_seed(0)
    m = Styled().to(F64)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(5, 2, 5, 5, generator=g, dtype=F64), torch.randint(0, 3, (5,), generator=g)
    got = clipped_grad_sum(m, ce, x, y, clip=0.5)
    assert got.method == "rules", got.fallback
    ref = clipped_grad_sum(m, ce, x, y, clip=0.5, method="vmap")
    assert close(got.norms, ref.norms)
    scale = max(float(v.abs().max()) for v in ref.sums.values())
    for k in ref.sums:
        assert float((got.sums[k] - ref.sums[k]).abs().max()) <= 1e-9 * scale, k


def test_a_checkpointed_model_runs_by_the_rules():
    """``torch.utils.checkpoint`` (saved-tensor hooks, which torch.func refuses): the rules' one-time check
    takes its reference one example at a time, and the rules agree with the per-example loop."""
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.n, self.b = nn.Linear(5, 8), nn.LayerNorm(8), nn.Linear(8, 3)

        def block(self, x):
            return torch.tanh(self.n(self.a(x)))

        def forward(self, x):
            return self.b(checkpoint(self.block, x, use_reentrant=False).mean(dim=1))

    torch.manual_seed(0)
    m = Checkpointed().to(F64)
    x, y = batch("seq")
    agrees_by_the_rules(m, x, y, reference="loop")


class _HFConv1D(nn.Module):
    """Hugging Face's ``Conv1D`` as transformers ships it (``y = x W + b``, W of shape (d_in, d_out)),
    under its qualified name, so that the rule is tested without transformers installed."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.3)
        self.bias = nn.Parameter(torch.randn(nf) * 0.1)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


_HFConv1D.__module__, _HFConv1D.__qualname__ = "transformers.pytorch_utils", "Conv1D"


@pytest.mark.parametrize("seq", [False, True])
def test_hugging_face_conv1d_by_its_rule(seq):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_proj = _HFConv1D(12, 5), _HFConv1D(5, 12)
            self.fc = nn.Linear(5, 3)

        def forward(self, x):
            h = self.c_proj(torch.tanh(self.c_fc(x)))
            return self.fc(h.mean(dim=1) if seq else h)

    torch.manual_seed(0)
    m = Block().to(F64)
    x, y = batch("seq")
    if not seq:
        x = x[:, 0]
    agrees_by_the_rules(m, x, y, clip=0.3)


def test_gpt2_runs_by_the_rules():
    """A Hugging Face GPT-2: its Conv1D projections, LayerNorms, SDPA attention, token embedding and its
    position embedding — looked up once for the whole batch and broadcast (the rule spreads it to one row
    per example)."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(
        vocab_size=20,
        n_positions=8,
        n_embd=16,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.g, self.fc = transformers.GPT2Model(cfg), nn.Linear(16, 3)

        def forward(self, x):
            return self.fc(self.g(input_ids=x).last_hidden_state.mean(dim=1))

    torch.manual_seed(0)
    m = GPT().to(F64)
    x, y = batch("tok")
    agrees_by_the_rules(m, x % 20, y)


class Positions(nn.Module):
    """A position embedding looked up once for the batch (indices (1, T)) and broadcast; with ``first``, a
    lookup of one row read back as row 0 — not a broadcast: spreading it would give example 0 every
    example's gradient, which the one-time check against vmap must catch."""

    def __init__(self, first=False):
        super().__init__()
        self.tok, self.pos, self.fc = nn.Embedding(11, 6), nn.Embedding(5, 6), nn.Linear(6, 3)
        self.first = first

    def forward(self, x):
        p = self.pos(torch.arange(x.shape[1], device=x.device)[None])  # (1, T, 6)
        h = self.tok(x) + (p[0] if self.first else p)
        return self.fc(torch.tanh(h).mean(dim=1))


@pytest.mark.parametrize("first", [False, True])
def test_a_lookup_shared_by_the_batch(first):
    torch.manual_seed(0)
    m = Positions(first).to(F64)
    x, y = batch("tok")
    # broadcast: the rules, one row per example; read back as row 0: caught, and run by vmap
    agrees_by_the_rules(m, x, y, method="vmap" if first else "rules")


@pytest.mark.parametrize("family", ["bert", "distilbert", "roberta"])
def test_hugging_face_encoders_run_by_the_rules(family):
    """BERT, DistilBERT and RoBERTa sequence classifiers, fully trainable (their position embeddings looked
    up once for the batch), by the rules and in agreement with vmap."""
    transformers = pytest.importorskip("transformers")
    if family == "distilbert":
        cfg = transformers.DistilBertConfig(
            vocab_size=30,
            num_labels=3,
            dim=16,
            n_layers=1,
            n_heads=2,
            hidden_dim=32,
            max_position_embeddings=16,
            dropout=0.0,
            attention_dropout=0.0,
            seq_classif_dropout=0.0,
        )
        cls = transformers.DistilBertForSequenceClassification
    else:
        config = transformers.BertConfig if family == "bert" else transformers.RobertaConfig
        cfg = config(
            vocab_size=30,
            num_labels=3,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=16,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            pad_token_id=1,
        )
        cls = (
            transformers.BertForSequenceClassification
            if family == "bert"
            else transformers.RobertaForSequenceClassification
        )

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.hf = cls(cfg)

        def forward(self, x):
            return self.hf(input_ids=x).logits

    torch.manual_seed(0)
    m = Classifier().to(F64)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(2, 30, (6, 7), generator=g), torch.randint(0, 3, (6,), generator=g)
    agrees_by_the_rules(m, x, y)


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2"])
def test_hugging_face_decoders_run_by_the_rules(family):
    """Llama-family decoders, fully trainable: their RMSNorm classes and Gemma's scaled word embedding
    (matched by name), rotary attention by their nn.Linear projections — by the rules, in agreement
    with vmap (Gemma's norms compute in float32 inside a float64 model: agreement to its rounding)."""
    transformers = pytest.importorskip("transformers")
    names = {
        "llama": ("LlamaConfig", "LlamaModel"),
        "mistral": ("MistralConfig", "MistralModel"),
        "qwen2": ("Qwen2Config", "Qwen2Model"),
        "qwen3": ("Qwen3Config", "Qwen3Model"),
        "phi3": ("Phi3Config", "Phi3Model"),
        "gemma": ("GemmaConfig", "GemmaModel"),
        "gemma2": ("Gemma2Config", "Gemma2Model"),
    }[family]
    config, model = (getattr(transformers, n, None) for n in names)
    if config is None or model is None:
        pytest.skip(f"this transformers has no {names[1]}")
    cfg = config(
        vocab_size=30,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=16,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    )

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.hf, self.fc = model(cfg), nn.Linear(16, 3)

        def forward(self, x):
            return self.fc(self.hf(input_ids=x).last_hidden_state.mean(dim=1))

    torch.manual_seed(0)
    m = Classifier().to(F64)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(1, 30, (6, 7), generator=g), torch.randint(0, 3, (6,), generator=g)
    agrees_by_the_rules(m, x, y)
