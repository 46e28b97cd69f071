"""Audit of DP-SGD (``mechanism dpsgd``) with a gradient canary (Nasr et al. 2021, "adversary
instantiation"; white-box threat model of the certificate: every noisy step is observed).

The runtime object is driven exactly as in training — ``mechanism.batches`` draws each step's batch
and the mechanism's certified step (``_noisy_sum``: clip, sum, charge the ledger, add noise once;
``private_gradients`` is that step plus the batch caps and the public normaliser) — on a tiny model
whose loss is linear in the parameters, so a record's gradient does not depend on the model state:

* the dataset has ``dataset_size`` records; all of them have gradient 0 except the canary slot(s)
  (K slots for a group unit of size K). On D₁ a canary has a gradient of norm ``canary_scale``·C
  (clipped to C by a correct mechanism); on D₀ the slot holds a zero-gradient record (add/remove:
  with the sum un-normalised, this is distributed exactly as removing the canary) or, for the
  substitution relation, an anti-canary of gradient −canary_scale·C (the worst substitution);
* the adversary sees the un-normalised noisy sum of the canary coordinate(s) at each of the first k
  steps (the normaliser is a public constant of the certificate; :mod:`dpspec.audit.runtime` audits
  that it is).

Many independent trials run in one certified step: trial r owns parameter r of a block model and its
records touch only that parameter, so per-example clipping and per-coordinate noise act on each trial
separately; every trial has its own batch stream from ``batches``. Each chunk of trials runs on a
fresh copy of the mechanism (its own ledger: every trial is one run of at most T steps).

:mod:`dpspec.audit.runtime` adds the runtime audits of the same certificate entry (the public
normaliser, non-finite gradients, the step budget and the per-batch cap).

Statistics (chosen on the selection split): the log-likelihood ratio of the certified model
(mixture over the canary's inclusion; Poisson, without replacement, groups), the sum and the
maximum of the standardised canary coordinates.

Claim: the certified ε at δ of the **k-step prefix** (the same accountant with ``steps = k``; the
transcript of the first k steps is a post-processing of the full one), and the headline ε of
all T steps for reference. With k = T (the default when T ≤ ``max_steps``) they coincide.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp

from dpspec.audit.base import AuditContext, AuditTarget, Claim, tick

__all__ = ["DpSgdAudit"]


def _block_model(R: int, L: int):
    import torch

    class BlockLinear(torch.nn.Module):
        """Parameter r of every tensor belongs to trial r. A record is a vector of R·L inputs that is
        zero outside its trial's R-block positions; its loss is Σ_l ⟨w_l, x_l⟩, so its gradient is x."""

        def __init__(self):
            super().__init__()
            self.ws = torch.nn.ParameterList(
                [torch.nn.Parameter(torch.zeros(R, dtype=torch.float64)) for _ in range(L)]
            )

        def forward(self, x):
            out = 0.0
            for layer, w in enumerate(self.ws):
                out = out + (x[:, layer * R : (layer + 1) * R] * w).sum(dim=1)
            return out

    return BlockLinear()


def _linear_loss(out, y):
    return out.sum()


class DpSgdAudit(AuditTarget):
    mechanism = "dpsgd"
    default_trials = 4000

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        p = ctx.record.mechanism.parameters
        o = ctx.options
        self.sigma = float(p["noise_multiplier"])
        self.C = float(p["clip_norm"])
        self.sampling = str(p["sampling"])
        self.rate = float(p["sample_rate"])
        self.T = int(p["steps"])
        self.K = int(p.get("group_size") or 1)
        n = int(p["dataset_size"]) if p.get("dataset_size") else None
        self.batch = p.get("batch_size")
        self.relation = ctx.record.protected.relation or "add_remove"
        per_layer = p.get("per_layer_clip_norms")
        self.layer_clips = [float(x) for x in str(per_layer).split(",")] if per_layer else [self.C]
        mech = ctx.mechanism
        self.L = len(mech.per_layer_clip) if getattr(mech, "per_layer_clip", None) else len(self.layer_clips)
        if self.L != len(self.layer_clips):
            self.layer_clips = [self.C / math.sqrt(self.L)] * self.L
        self.k = int(o.get("steps") or min(self.T, int(o.get("max_steps", 16))))
        self.scale = float(o.get("canary_scale", 10.0))
        self._chunk = o.get("chunk")
        # Poisson without a declared size: the size does not enter the analysis
        self.n: int = n if n is not None else self.K + 1
        if self.K >= self.n:
            raise ValueError(f"group size {self.K} leaves no room in a dataset of {self.n} records")
        self.u = np.array(self.layer_clips) / math.sqrt(sum(c * c for c in self.layer_clips))
        self._claim = self._compute_claim()

    # --- the claim ---------------------------------------------------------------------------------
    def _accountant(self) -> tuple[str, int | None]:
        if self.sampling == "without_replacement":
            return ("wor_substitution" if self.relation == "substitution" else "wor"), self.n
        return "poisson", None

    def _compute_claim(self) -> Claim:
        from dpspec import accounting as acc

        g = self.ctx.record.guarantee
        delta = self.ctx.delta
        if delta is None:
            delta = g.delta if g.delta is not None else g.dp[0].delta
        head = None
        for pt in g.dp:
            if pt.delta == delta:
                head = float(pt.epsilon)
        if head is None:
            head = float(acc.rdp_to_dp(g.rdp_alphas, g.rdp_epsilons, delta)[0])
        if self.k == self.T:
            return Claim(head, float(delta), "(ε, δ)-DP", head)
        name, n = self._accountant()
        curve = acc.dpsgd_rdp_curve(
            self.sigma,
            self.rate,
            self.k,
            sampling=name,
            group_size=self.K,
            dataset_size=n,
            alphas=np.asarray(g.rdp_alphas),
        )
        eps = float(acc.dp_from_curve(curve, delta).epsilon)
        a = getattr(self.ctx.record, "accounting", None)
        if a is not None and a.accountant == "pld":  # the certificate's family: min(RDP, PLD) at k steps
            from dpspec.accounting.pld_select import dpsgd_pld_epsilon

            eps = min(eps, dpsgd_pld_epsilon(self.sigma, self.rate, self.k, float(delta), name, self.K, n))
        eps = min(eps, head)  # the k-step prefix is a post-processing of the certified T-step run
        return Claim(
            eps,
            float(delta),
            "(ε, δ)-DP",
            head,
            note=f"first {self.k} of {self.T} steps observed: compared with the certified ε of {self.k} "
            f"steps (same accountant); all {self.T} steps: ε = {head:.4g}",
        )

    def claim(self) -> Claim:
        return self._claim

    def neighbours(self) -> str:
        other = "an anti-canary (gradient −v)" if self.relation == "substitution" else "a zero-gradient record"
        unit = f"a group of {self.K} canaries" if self.K > 1 else "one canary"
        return (
            f"{self.n} records with zero gradient plus {unit} of gradient norm {self.scale:g}·C on D₁, "
            f"{other} in its slot on D₀; {self.k} step(s) of the noisy canary coordinate observed"
        )

    # --- sampling ----------------------------------------------------------------------------------
    def _chunk_size(self) -> int:
        """Trials per block model: the cost per call grows like (examples × trials); ~2 ms of fixed overhead
        per call sets the balance."""
        batch = max(1.0, float(self.ctx.mechanism.expected_batch(self.n)))
        return int(self._chunk or min(256, max(16, int(math.sqrt(2e4 / (batch * self.L))))))

    @property
    def pilot_trials(self) -> int:  # type: ignore[override]
        """One block model's worth of trials (a smaller pilot would undercount the cost per trial)."""
        return min(self._chunk_size(), 64)

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import dataclasses

        import torch

        mech = self.ctx.mechanism
        out = np.empty((n, self.k * self.L))
        seeds = rng.integers(0, 2**63 - 1, size=n + 1)
        gen = torch.Generator().manual_seed(int(seeds[-1] % (2**62)))
        base = self.scale * np.array(self.layer_clips)
        slot_value = base if world else (-base if self.relation == "substitution" else np.zeros_like(base))
        chunk = self._chunk_size()
        for c0 in range(0, n, chunk):
            R = min(chunk, n - c0)
            model = _block_model(R, self.L)
            run = dataclasses.replace(mech)  # a fresh run (its own ledger) of the same mechanism
            streams = [run.batches(self.n, np.random.default_rng(int(seeds[c0 + r])), self.k) for r in range(R)]
            for t in range(self.k):
                batches = [np.asarray(next(it)) for it in streams]
                sizes = [b.size for b in batches]
                x = np.zeros((sum(sizes), R * self.L))
                row = 0
                for r, idx in enumerate(batches):
                    for pos in np.flatnonzero(idx < self.K):
                        x[row + pos, r + R * np.arange(self.L)] = slot_value
                    row += idx.size
                xb = torch.from_numpy(x)
                yb = torch.zeros(len(x), dtype=torch.float64)
                sums, _cs = run._noisy_sum(model, _linear_loss, xb, yb, generator=gen)
                for layer, key in enumerate(sorted(sums, key=lambda s: int(s.split(".")[-1]))):
                    out[c0 : c0 + R, t * self.L + layer] = sums[key].detach().numpy()
            tick(R)
        return out

    # --- statistics --------------------------------------------------------------------------------
    def _z(self, x: np.ndarray) -> np.ndarray:
        """Standardised canary coordinate per step: ⟨o_t, u⟩ / (σC), shape (n, k)."""
        o = x.reshape(x.shape[0], self.k, self.L)
        return (o @ self.u) / (self.sigma * self.C)

    def _lr_step(self, z: np.ndarray) -> np.ndarray:
        mu = 1.0 / self.sigma
        if self.sampling == "without_replacement":
            w = float(self.batch) / self.n if self.batch else self.rate
            lw1, lw0 = math.log(w), math.log1p(-w) if w < 1 else -np.inf
            if self.relation == "substitution":
                num = np.logaddexp(lw0 - z * z / 2, lw1 - (z - mu) ** 2 / 2)
                den = np.logaddexp(lw0 - z * z / 2, lw1 - (z + mu) ** 2 / 2)
                return num - den
            return np.logaddexp(lw0, lw1 + mu * z - mu * mu / 2)
        q = 1.0 if self.sampling == "full_batch" else self.rate
        K = self.K
        j = np.arange(K + 1)
        with np.errstate(divide="ignore"):
            logpmf = (
                gammaln(K + 1)
                - gammaln(j + 1)
                - gammaln(K - j + 1)
                + j * np.log(q)
                + (K - j) * (np.log1p(-q) if q < 1 else np.where(K - j > 0, -np.inf, 0.0))
            )
        terms = logpmf[None, None, :] + j[None, None, :] * mu * z[..., None] - (j * j)[None, None, :] * mu * mu / 2
        return logsumexp(terms, axis=-1)

    def statistics(self, x0, x1):
        return {
            "likelihood_ratio": lambda x: self._lr_step(self._z(x)).sum(axis=1),
            "sum": lambda x: self._z(x).sum(axis=1),
            "max": lambda x: self._z(x).max(axis=1),
        }
