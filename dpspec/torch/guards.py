"""What ``optimizer.step()`` of :func:`dpspec.torch.make_private` checks before anything moves (issue 22).

* Every parameter the wrapped optimizer would step is one the private step noises: a parameter of the
  model that requires a gradient (its ``.grad`` is replaced by the certified noisy gradient), or a
  frozen parameter of the model whose ``.grad`` is empty or the noisy gradient an earlier private step
  left there (post-processing). Anything else — a parameter added with ``add_param_group`` that the model
  does not hold, a frozen parameter given a gradient by hand — would be stepped on a gradient the
  certificate does not cover (its exact data gradient, say), so the step is refused with
  :class:`UnnoisedParameterError` (DPS166) before the ledger is charged or any noise is drawn.
* The loop's loss is compared with the per-example criterion on the examples whose values are finite
  only. The private step zeroes a non-finite example's gradient (inside the clip ball) and goes on,
  as the runtime does (:mod:`dpspec.mechanisms.per_example`); a check that refused a step because one
  example's loss is NaN would stop the run at the step that samples it, and the stop step would tell
  when the record was sampled.
* A private optimizer cannot be copied or pickled (:class:`PrivateCopyError`): its copy would hold
  copies of the parameters and of the run's session. Its ``state_dict()`` is the checkpoint.

torch is imported lazily.
"""

from __future__ import annotations

from dpspec.errors import DpspecError
from dpspec.mechanisms.errors import CertificateGuardError

__all__ = [
    "UnnoisedParameterError",
    "PrivateCopyError",
    "check_stepped_parameters",
    "close_on_finite_rows",
    "close_on_finite_rows_any",
    "same_values",
]


class UnnoisedParameterError(CertificateGuardError, ValueError):
    """The wrapped optimizer holds a parameter that the private step does not noise (DPS166)."""

    rule = "DPS166"


class PrivateCopyError(DpspecError, TypeError):
    """A private optimizer is not copied or pickled: save ``state_dict()`` and call make_private again."""


def check_stepped_parameters(module, param_groups, assigned: dict, target: str, named=None) -> None:
    """Raise :class:`UnnoisedParameterError` unless every parameter in ``param_groups`` is noised by the
    private step (see the module docstring). ``assigned``: name -> (id, version) of the gradients the
    last private step left on the model's parameters. ``named``: ``module.named_parameters()`` as a list,
    when the caller has just walked the model."""
    held = {id(p): (k, p) for k, p in (module.named_parameters() if named is None else named)}
    for gi, group in enumerate(param_groups):
        for p in group["params"]:
            if id(p) not in held:
                raise UnnoisedParameterError(
                    f"`{target}`: the optimizer steps a parameter (shape {tuple(p.shape)}, param group {gi}) that the "
                    "model does not hold, so the private step never noises its gradient: it would be stepped on "
                    "its exact data gradient. Make it a parameter of the model (it is then clipped and noised with "
                    "the others) or leave it out of the optimizer."
                )
            k, q = held[id(p)]
            g = q.grad
            if q.requires_grad or g is None:
                continue
            if assigned.get(k) != (id(g), g._version):
                raise UnnoisedParameterError(
                    f"`{target}`: parameter `{k}` does not require a gradient (so the private step does not noise "
                    "it) but holds one that the private step did not leave there; the optimizer would step it on "
                    "that gradient. Set its `.grad` to None (`optimizer.zero_grad()`), or let it require a gradient."
                )


def close_on_finite_rows(a, b, rel: float | None = None) -> bool:
    """``a`` ≈ ``b`` (relative ℓ2) on the rows (first dimension) where both are finite: a non-finite
    example's gradient is zeroed by the private step, and is not compared. One host read."""
    return bool(close_on_finite_rows_any(a, [b], rel))


def close_on_finite_rows_any(a, bs, rel: float | None = None):
    """A 0-dim bool tensor on ``a``'s device: ``a`` ≈ one of ``bs`` in the sense of
    :func:`close_on_finite_rows` (no host read; the caller reads the verdict once). ``rel`` defaults to
    1e-4, or a few units of the inputs' precision for 16-bit tensors (bfloat16 rounds the batch mean's
    1/B to 2⁻⁸ relative, a wrong loss differs by O(1)). The candidates of ``a``'s shape are compared
    together (stacked), in a fixed number of kernels whatever their number.

    A row (example) is compared where its ℓ2 norm is finite in ``a``, in the candidate and in their
    difference: a row holding an infinity or a NaN is left out (the private step zeroes that example), and
    so is a row too large for its squared norm to be represented (beyond ~1e19 in float32), whose norm
    could only make the comparison read ∞ ≤ ∞. From the rows' norms: ‖a − b‖ ≤ rel · max(‖a‖, ‖b‖) + 1e-12
    over the compared rows, for some candidate b."""
    import torch

    from dpspec.mechanisms.noise_device import accumulation_dtype
    from dpspec.torch.clipping.kernels import constant

    if rel is None:
        rel = max(1e-4, 4 * torch.finfo(a.dtype).eps) if a.is_floating_point() else 1e-4
    acc = accumulation_dtype(a.dtype) if a.is_floating_point() else torch.float32
    bs = [b for b in bs if b.shape == a.shape]
    if not bs:
        return torch.zeros((), dtype=torch.bool, device=a.device)
    # rows: (B, F) (a 1-D tensor's entries are its rows, a 0-dim tensor one row)
    x = a.to(acc)
    x = x.flatten(1) if x.dim() > 1 else x.reshape(-1, 1)
    y = torch.stack([b.to(acc) for b in bs])
    if y.dim() != 3:
        y = y.reshape((len(bs),) + tuple(x.shape))  # (K, B, F)
    norm = torch.linalg.vector_norm
    # each row's norm in a, in each candidate and in their difference: (3, K, B)
    ny, nd = norm(y, dim=2), norm(x - y, dim=2)
    rows = torch.stack([norm(x, dim=1).expand_as(ny), ny, nd])
    # a non-finite value in a row makes its norm ∞ or NaN (the norms are ≥ 0: finite ⟺ their sum < ∞)
    ok = rows.sum(dim=0) < float("inf")  # (K, B)
    # over the compared rows: ‖a‖, ‖b‖, ‖a − b‖ per candidate (3, K), without a data-dependent shape
    n = norm(torch.where(ok, rows, constant(0.0, rows)), dim=2)
    # ‖a − b‖ ≤ rel · max(‖a‖, ‖b‖) + 1e-12 ⟺ ‖a − b‖ − rel · ‖a‖ ≤ 1e-12 or ‖a − b‖ − rel · ‖b‖ ≤ 1e-12
    return (torch.sub(n[2:], n[:2], alpha=rel) <= 1e-12).any()


def same_values(x, drawn) -> bool:
    """``x`` holds the values of ``drawn`` (a NaN equals a NaN: a record holding one is the same record)."""
    if x.shape != drawn.shape or x.dtype != drawn.dtype:
        return False
    import torch

    x = x.detach().to(drawn.device)
    if torch.equal(x, drawn):
        return True
    if not (x.is_floating_point() or x.is_complex()):
        return False
    return bool(((x == drawn) | (x.isnan() & drawn.isnan())).all())
