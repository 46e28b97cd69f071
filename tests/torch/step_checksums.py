"""Checksums of the parameters after a few seeded private steps, for a grid of configurations (models with
the ghost, per-layer-rules, vmap and loop clipping paths × float32 / float64 / bfloat16 × whole or chunked
batches × flat / per-layer clipping, ``make_private`` and ``DpSgd.train``). A change that must not change
any result (an overhead cut) leaves every checksum as it was:

    python tests/torch/step_checksums.py OUT.json          # record
    python tests/torch/step_checksums.py OUT.json --check  # compare with a recording
    python tests/torch/step_checksums.py OUT.json --device cuda [--check]  # on a GPU (deterministic kernels)

To compare two commits, run this file from a checkout of each (it imports the dpspec beside it).

``tests/torch/test_step_overhead.py`` compares against ``tests/torch/data/step_checksums.json`` (recorded
before the overhead cut), where this machine's kernels give the recording's non-private checksums.
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import dpspec  # noqa: E402
import dpspec.torch as dt  # noqa: E402

SPEC = """
privacy people {{ unit record  dataset_size {n} }}
train model {{ protect people  mechanism dpsgd  sampling {sampling}
  clipping {clipping}  steps 6  guarantee dp(epsilon = 4, delta = 1e-5) }}
"""
N = 48
DEVICE = torch.device("cpu")  # main(): --device


class CNN(nn.Module):
    def __init__(self, w=4):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, w, 3, padding=1), nn.GroupNorm(2, w)
        self.c2, self.n2 = nn.Conv2d(w, 2 * w, 3, padding=1, stride=2), nn.GroupNorm(2, 2 * w)
        self.fc = nn.Linear(2 * w * 4 * 4, 3)

    def forward(self, x):
        x = torch.relu(self.n1(self.c1(x)))
        x = torch.relu(self.n2(self.c2(x)))
        return self.fc(x.flatten(1))


class Encoder(nn.Module):
    def __init__(self, d=16, pad=None):
        super().__init__()
        self.emb = nn.Embedding(50, d, padding_idx=pad)
        layer = nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(d, 3)

    def forward(self, x):
        return self.fc(self.enc(self.emb(x)).mean(dim=1))


class Mixed(nn.Module):
    """Embedding with a padding row, Conv1d, LayerNorm, a linear layer applied twice."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 6, padding_idx=0)
        self.conv = nn.Conv1d(6, 5, 3, padding=1)
        self.norm = nn.LayerNorm(5)
        self.lin = nn.Linear(5, 5)
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        h = self.conv(self.emb(x).transpose(1, 2)).transpose(1, 2)
        h = self.lin(torch.tanh(self.lin(self.norm(h))))
        return self.fc(h.mean(dim=1))


class Scaled(nn.Module):
    """A bare parameter outside every rule: vmap."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 3)
        self.s = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return self.a(x) * self.s


class Recurrent(nn.Module):
    """nn.GRU: vmap has no batching rule, the loop."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 5, batch_first=True)
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        return self.fc(self.gru(x)[0][:, -1])


def adapted():
    from dpspec.torch.lora import add_lora

    m = Encoder(16)
    add_lora(m, 2, include=lambda name: "linear" in name)
    m.fc.requires_grad_(True)
    return m


def _vec(d):
    return lambda g: torch.randn(N, d, generator=g)


def _tok(g):
    x = torch.randint(0, 50, (N, 6), generator=g)
    x[::7, -2:] = 0
    return x


MODELS = {  # name -> (build, data maker, a NaN can be planted)
    "mlp": (lambda: nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)), _vec(6), True),
    "cnn": (lambda: CNN(), lambda g: torch.randn(N, 3, 8, 8, generator=g), True),
    "encoder": (lambda: Encoder(16, pad=0), _tok, False),
    "adapters": (adapted, _tok, False),
    "mixed": (Mixed, lambda g: torch.randint(0, 30, (N, 7), generator=g), False),
    "vmap": (Scaled, _vec(6), True),
    "loop": (Recurrent, lambda g: torch.randn(N, 5, 4, generator=g), True),
}


def _digest(model) -> str:
    h = hashlib.sha256()
    for k, p in model.state_dict().items():
        h.update(k.encode())
        h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:24]


def _per_layer(model) -> str:
    k = sum(1 for p in model.parameters() if p.requires_grad)
    return "per_layer(C = [" + ", ".join(f"{0.3 + 0.1 * (i % 5):.1f}" for i in range(k)) + "])"


def _setup(name, dtype, clipping, sampling):
    build, make, nan = MODELS[name]
    g = torch.Generator().manual_seed(1)
    X, y = make(g), torch.randint(0, 3, (N,), generator=g)
    if X.is_floating_point():
        X = X.to(dtype)
        if nan:
            X[3].view(-1)[0] = float("nan")  # a non-finite example: zeroed by the step
    torch.manual_seed(0)
    m = build().to(DEVICE, dtype)
    X, y = X.to(DEVICE), y.to(DEVICE)
    clip = "flat(C = 1.0)" if clipping == "flat" else _per_layer(m)
    samp = "poisson(rate = 0.25)" if sampling == "poisson" else "without_replacement(batch_size = 12)"
    return m, X, y, dpspec.compile(SPEC.format(n=N, sampling=samp, clipping=clip))


def run_make_private(name, dtype, chunk, clipping="flat", sampling="poisson", steps=3):
    m, X, y, c = _setup(name, dtype, clipping, sampling)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = dt.make_private(
            c,
            m,
            torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1, momentum=0.5),
            TensorDataset(X, y),
            seed=3,
            max_physical_batch_size=chunk,
        )
        it = iter(loader)
        for _ in range(steps):
            xb, yb = next(it)
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    return f"{_digest(m)} nonfinite={opt.nonfinite_examples}"


def run_train(name, dtype, chunk, clipping="flat", sampling="poisson", steps=3):
    m, X, y, c = _setup(name, dtype, clipping, sampling)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = c.mechanism.train(m, X, y, steps=steps, seed=3, max_physical_batch_size=chunk)
    return f"{_digest(m)} nonfinite={rep.nonfinite_events} clipping={rep.clipping}"


def run_nonprivate(name, dtype, steps=3):
    """The same models trained without privacy: a canary for this machine's kernels (the recording holds
    only where they give the recording's numbers)."""
    build, make, _ = MODELS[name]
    g = torch.Generator().manual_seed(1)
    X, y = make(g), torch.randint(0, 3, (N,), generator=g)
    X = (X.to(dtype) if X.is_floating_point() else X).to(DEVICE)
    y = y.to(DEVICE)
    torch.manual_seed(0)
    m = build().to(DEVICE, dtype)
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1)
    for i in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(m(X[8 * i : 8 * i + 12]), y[8 * i : 8 * i + 12]).backward()
        opt.step()
    return _digest(m)


DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


def configs(quick: bool = False):
    """(key, thunk) for every configuration (``quick``: a subset for the test suite)."""
    out = []
    dts = ["float32", "bfloat16"] if quick else list(DTYPES)
    for name in MODELS:
        for d in dts:
            out.append((f"nonprivate {name} {d}", lambda n=name, d=d: run_nonprivate(n, DTYPES[d])))
            for chunk in (None, 5):
                if quick and name in ("loop", "adapters") and (chunk or d != "float32"):
                    continue
                key = f"make_private {name} {d} chunk={chunk}"
                out.append((key, lambda n=name, d=d, c=chunk: run_make_private(n, DTYPES[d], c)))
    for name in ("mlp", "cnn", "encoder", "mixed", "vmap"):
        out.append(
            (
                f"make_private {name} float32 per_layer wor",
                lambda n=name: run_make_private(n, torch.float32, None, "per_layer", "without_replacement"),
            )
        )
        if not quick:
            out.append(
                (
                    f"make_private {name} float64 per_layer chunk=5",
                    lambda n=name: run_make_private(n, torch.float64, 5, "per_layer"),
                )
            )
    for name in ("mlp", "cnn", "encoder", "vmap"):
        for d in dts:
            for chunk in (None, 5):
                if quick and chunk:
                    continue
                out.append((f"train {name} {d} chunk={chunk}", lambda n=name, d=d, c=chunk: run_train(n, DTYPES[d], c)))
    return out


def main(argv) -> int:
    global DEVICE
    torch.set_num_threads(1)
    if "--device" in argv:
        DEVICE = torch.device(argv[argv.index("--device") + 1])
        if DEVICE.type == "cuda":  # the same kernels in every process
            import os

            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.cudnn.benchmark = False
    path = Path(argv[0])
    check = "--check" in argv
    got = {}
    for key, fn in configs(quick="--quick" in argv):
        got[key] = fn()
        print(key, got[key], flush=True)
    if not check:
        path.write_text(json.dumps({"torch": torch.__version__, "checksums": got}, indent=1) + "\n")
        return 0
    want = json.loads(path.read_text())["checksums"]
    diff = [k for k in got if k in want and want[k] != got[k]]
    print(f"{len(got)} configurations, {len(diff)} differ: {diff}")
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
