"""Device- and dtype-correct noise and accumulation for the private trainers (torch, imported lazily).

Every tensor a private step creates follows the parameters' device; clipping and noise run in the
*accumulation dtype* — the parameters' dtype when it is at least as wide as float32, float32 for
16-bit floats (bfloat16, float16) — and the noisy gradient is cast to the parameter's dtype only
when it is written to ``.grad`` (docs/training.md, "Devices and dtypes").

* :func:`accumulation_dtype` — float32 or wider for a floating dtype.
* :func:`device_generator` — a ``torch.Generator`` on the parameters' device seeded with the seed a
  trainer draws today: on CPU it is the same generator as before (CPU runs are bit-identical); on a
  CUDA device it is that device's Philox generator with the same seed (a CPU generator cannot feed
  a CUDA ``torch.normal``).
* :func:`gaussian_like` — N(0, std²) noise with a tensor's shape, drawn on its device, in the
  accumulation dtype. A generator on another device than the tensor (a caller's CPU generator and a
  CUDA model) feeds a device generator derived from it once (seeded by one draw from it), so the
  noise is still drawn where the gradient lives and no tensor crosses the bus per step.

Secure mode: the per-coordinate discrete Gaussian of :mod:`dpspec.mechanisms.secure_noise` costs
hundreds of microseconds per coordinate and is not used for gradients; without a seed a trainer's
generator is seeded from the operating system's entropy (``numpy.random.default_rng(None)``).
"""

from __future__ import annotations

import weakref

__all__ = ["accumulation_dtype", "device_generator", "gaussian_like", "standard_normal_like", "parameter_device"]

_DERIVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def accumulation_dtype(dtype):
    """``dtype`` if it is not a floating dtype narrower than 32 bits, else float32."""
    import torch

    if dtype.is_floating_point and torch.finfo(dtype).bits < 32:
        return torch.float32
    return dtype


def parameter_device(model):
    """The device of ``model``'s first trainable parameter (CPU for a model without parameters)."""
    import torch

    for p in model.parameters():
        if p.requires_grad:
            return p.device
    return torch.device("cpu")


def device_generator(seed: int, device=None):
    """A generator on ``device`` (default CPU) seeded with ``seed``."""
    import torch

    dev = torch.device("cpu") if device is None else torch.device(device)
    if dev.type == "meta":
        dev = torch.device("cpu")
    return torch.Generator(device=dev).manual_seed(int(seed))


def _generator_for(generator, device):
    """``generator`` if it lives on ``device``, else a generator on ``device`` derived from it once."""
    import torch

    if generator is None or generator.device.type == device.type:
        return generator
    per = _DERIVED.setdefault(generator, {})
    key = str(device)
    if key not in per:
        seed = int(torch.randint(0, 2**62, (), generator=generator, device=generator.device))
        per[key] = device_generator(seed, device)
    return per[key]


def gaussian_like(t, std: float, generator=None):
    """N(0, std²) noise of ``t``'s shape on ``t``'s device, in ``accumulation_dtype(t.dtype)``."""
    import torch

    dt = accumulation_dtype(t.dtype)
    g = _generator_for(generator, t.device)
    return torch.normal(0.0, float(std), size=tuple(t.shape), generator=g, dtype=dt, device=t.device)


def standard_normal_like(t, generator=None):
    """N(0, 1) noise of ``t``'s shape on ``t``'s device, in ``accumulation_dtype(t.dtype)`` (``torch.randn``:
    the trainers that scale a standard normal keep their CPU streams)."""
    import torch

    g = _generator_for(generator, t.device)
    return torch.randn(tuple(t.shape), generator=g, dtype=accumulation_dtype(t.dtype), device=t.device)
