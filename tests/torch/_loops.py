"""The ordinary training loop the make_private tests run to the end of the certified budget."""

from __future__ import annotations


def train_to_the_end(model, opt, loader, criterion) -> None:
    """``criterion(model(x), y).backward()`` and ``opt.step()`` on every batch, until no certified step is left."""
    while opt.steps_remaining:
        for xb, yb in loader:
            opt.zero_grad()
            criterion(model(xb), yb).backward()
            opt.step()
