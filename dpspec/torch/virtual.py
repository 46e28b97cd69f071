"""Virtual batches for ``make_private``: a logical batch larger than memory, in physical chunks.

    model, optimizer, loader = make_private(compiled, model, optimizer, data, max_physical_batch_size=64)
    for x, y in loader:              # chunks of ≤ 64 rows of each certified (logical) batch
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()             # accumulates; at the last chunk: noise once, ledger, step

or, on a loader ``make_private`` returned, ``with virtual_batches(loader, optimizer, 64) as chunks:``
(the shape of Opacus's ``BatchMemoryManager``). The loop stays the ordinary loop.

The certified step is unchanged: the logical batch is drawn as the certificate says (one draw per
step), each example is clipped alone in every chunk, the clipped sums of the chunks are added, and
the noise σC is drawn once, the ledger charged once and the batch checked once (its caps, the
batch-of-this-step rule) at the logical batch's last chunk — the same call to
``DpSgd.private_gradients`` as without chunks, on the same generator. The noise, the batch and the
ledger are bit-identical to the unchunked step's; a physical batch size m defines one step, the same
bit for bit here and in ``DpSgd.train(..., max_physical_batch_size=m)``; across different m the clipped
sum agrees up to the order of its floating-point additions (docs/training.md says why no design that
keeps the fast clipping paths makes it bit-identical). With ``make_private(..., block_size=k)`` the step is
the same bit for bit for every m that is a multiple of k, at the speed of batches of k rows: each chunk's
blocks are added into the running total of the chunks before it (:class:`_ChunkBackend`). Only DP-SGD
trainings: SRPP-SGD's step is its own.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from dpspec.mechanisms.ledger import CapExceededError

__all__ = ["VirtualDataLoader", "virtual_batches"]


class _ChunkBackend:
    """Stands for the training's backend while a logical batch is processed in chunks: ``clipped_sum``
    and ``step`` of a chunk accumulate; the step of the last chunk is the backend's step on the whole
    logical batch with the accumulated clipped sum."""

    def __init__(self, backend, logical):
        self._b, self.logical = backend, logical
        self.parts: list = []
        self.final = False
        # with make_private's block_size: the running total of the chunks stepped on so far, which the next
        # chunk's blocks are added into (the same additions, in the same order, as the unchunked step's)
        self.blocked = getattr(backend, "block_size", None) is not None
        self.running: dict | None = None

    def __getattr__(self, name):
        return getattr(self._b, name)

    def clipped_sum(self, x, y):
        if self.blocked:
            return self._b.clipped_sum(x, y, start=self.running)
        return self._b.clipped_sum(x, y)

    def step(self, x, y, idx, clipped=None, named=None) -> None:
        from dpspec.mechanisms.per_example import combine_clipped

        if clipped is None and x.shape[0] > 0:
            clipped = self.clipped_sum(x, y)
        if clipped is not None:
            self.parts.append(clipped)
            if self.blocked:  # this chunk's sums continue the earlier chunks': the total so far, the rest let go
                self.running = clipped.sums
                for p in self.parts[:-1]:
                    p.sums = {}
        if not self.final:
            self._b.model.zero_grad(set_to_none=True)  # nothing reaches the parameters before the last chunk
            return
        L = self.logical
        total = combine_clipped(self.parts, self.running) if self.parts else None
        # the logical batch's rows are only counted (checked against the drawn indices): the clipped sum is
        # the chunks' (an empty batch has none, and its zero sum is formed on the parameters' device)
        self._b.step(L.x, L.y, L.idx, total, named=named)


class VirtualDataLoader:
    """Iterates the certified batches of a private loader in chunks of at most ``max_physical_batch_size``
    rows; ``optimizer.step()`` steps once per logical batch (see the module docstring)."""

    def __init__(self, loader, max_physical_batch_size: int):
        from dpspec.mechanisms.per_example import whole_rows

        m = whole_rows(max_physical_batch_size)
        s = loader._s
        if getattr(s.backend, "clipped_sum", None) is None:
            raise ValueError("virtual batches need a DP-SGD training (the SRPP-SGD step computes its own)")
        k = getattr(s.backend, "block_size", None)
        if k is not None:
            from dpspec.mechanisms.per_example import whole_blocks

            whole_blocks(k, m)  # (ValueError: m not a multiple of k)
        self._loader, self._s, self.max_physical_batch_size = loader, s, m
        self.dataset = loader.dataset
        self.sample_rate = loader.sample_rate

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self):
        s, m = self._s, self.max_physical_batch_size
        s.ledger.require(1)
        backend = s.backend
        try:
            for _ in range(len(self._loader)):
                if s.ledger.remaining == 0:
                    break
                x, y = s.next_batch()
                logical = s.pending
                B = int(x.shape[0])
                bounds = [(i, min(i + m, B)) for i in range(0, B, m)] or [(0, 0)]
                proxy = _ChunkBackend(backend, logical)
                s.backend = proxy
                for j, (lo, hi) in enumerate(bounds):
                    proxy.final = j == len(bounds) - 1
                    chunk = replace(
                        logical,
                        idx=np.asarray(logical.idx)[lo:hi],
                        x=x[lo:hi],
                        y=y[lo:hi],
                        x_model=None,
                        out=None,
                        out_grad=None,
                        clipped=None,
                    )
                    s.pending = chunk
                    yield chunk.x, chunk.y
                    if s.pending is chunk:
                        raise CapExceededError(
                            f"`{s.ledger.target}`: a chunk of the logical batch was not stepped on; every chunk "
                            "must be used by `optimizer.step()` (the step of the last chunk is the private step)"
                        )
                s.backend = backend
            s.settle_loss_check(wait=True)  # the last chunks' loss checks (read late)
        finally:
            s.backend = backend


@contextmanager
def virtual_batches(loader, optimizer, max_physical_batch_size: int):
    """``with virtual_batches(loader, optimizer, m) as chunks: for x, y in chunks: ...`` — the loader
    ``make_private`` returned, in chunks of at most ``m`` rows (``optimizer`` is accepted for the shape
    of Opacus's ``BatchMemoryManager``; the private optimizer already steps once per logical batch)."""
    yield VirtualDataLoader(loader, max_physical_batch_size)
