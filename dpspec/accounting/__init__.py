"""dpspec.accounting -- the numerical accounting core.

Pure functions of numpy/scipy floats (no torch, no global state besides a cache of
log-factorials).  Every public function validates its inputs and raises
``ValueError`` naming the parameter and its valid range.

Invariants
----------
1. **Upper bounds.**  Every returned RDP / epsilon is an upper bound on the exact
   value of the cited bound: float results are rounded *up* by a stated error
   bound (exact sums: a few ulps times the log-magnitudes involved; quadrature:
   10x the step-halving difference plus closed-form tail bounds).  An
   :class:`RdpCurve` records these errors per order: exact <= rdp <= exact + abs_errors.
2. **No cancellation for tiny values.**  Renyi moments are evaluated as
   Psi - 1 = (sum / integral of non-negative terms), then log1p; never as
   log(sum of binomially weighted moments) - 0.  Tiny values (1e-12 ... 1e-20)
   keep ~1e-12 relative accuracy.
3. **Never NaN, never negative.**  ``inf`` only where the bound is infinite or where
   no finite bound could be certified (a quadrature out of budget falls back to
   the no-amplification bound alpha K^2 / (2 sigma^2) first).
4. **Theorem ids** name the paper and result evaluated, e.g.
   ``"Mironov-Talwar-Zhang 2019 §3.3 (Poisson SGM)"``,
   ``"Schuchardt et al. 2024 Thm 4.2 (tight group amplification)"``,
   ``"Balle et al. 2020 Thm 21"``.

Public surface
--------------
Scalar RDP: :func:`gaussian_rdp`, :func:`poisson_gaussian_rdp`,
:func:`poisson_gaussian_rdp_baseline`, :func:`wor_gaussian_rdp`,
:func:`poisson_rr_rdp`, :func:`wor_rr_rdp`.
Curves and conversion: :data:`DEFAULT_ALPHAS`, :class:`RdpCurve`,
:class:`DpResult`, :func:`dpsgd_rdp_curve`, :func:`compose`,
:func:`dp_from_curve`, :func:`rdp_to_dp`.
DP-SGD: :func:`dpsgd_epsilon`, :func:`calibrate_dpsgd_sigma`.
SRPP-SGD: :func:`huc`, :func:`sa_huc`, :func:`hypergeometric_k2`, :func:`binomial_k2`,
:func:`srpp_sgd_sigma2`, :func:`srpp_sgd_epsilon`, :func:`calibrate_srpp_sgd`.
Relational DP-SGD: :func:`coupled_sampling_rdp`, :func:`coupled_sampling_rdp_standard_clipping`,
:func:`relational_accountants`, :func:`calibrate_relational_sigma`, :func:`certify_relational`.
PLD (privacy-loss distributions, pessimistic with a stated error bound): :class:`Pld`,
:class:`PldResult`, :class:`PldCurve`, :func:`pld_gaussian`, :func:`pld_dpsgd`,
:func:`pld_laplace` (Laplace and discrete Laplace), :func:`pld_pure` (any ε-DP step),
:func:`pld_compose`, :func:`pld_epsilon`, :func:`calibrate_pld_sigma`,
:func:`pld_group_lemma_epsilon`.
Private selection (tuning): :class:`RunCount`, :func:`candidate_envelope`, :func:`selection_dp`,
:func:`calibrate_selection` (Papernot & Steinke 2022 Thms 2 and 6; Liu & Talwar 2019).
Errors: :class:`SoundnessError` (every family's unprovable configuration, with a rule id).
"""

from .calibrate import calibrate_dpsgd_sigma
from .conversion import dp_from_curve, rdp_to_dp
from .curve import DEFAULT_ALPHAS, DpResult, RdpCurve, compose
from .dpsgd import dpsgd_epsilon, dpsgd_rdp_curve
from .errors import SoundnessError
from .gaussian import gaussian_rdp
from .gcon import gcon_calibration  # GCON objective perturbation (Wei et al. Thm 1, F4-F11)
from .huc import (  # SRPP-SGD History-Uniform Cap accountants (Zhang & Vorobeychik Prop 5.1, Thms 5.6-5.8)
    binomial_k2,
    calibrate_srpp_sgd,
    huc,
    hypergeometric_k2,
    sa_huc,
    srpp_sgd_epsilon,
    srpp_sgd_sigma2,
)
from .pld import (  # PLD accounting (dominating pairs, Zhu-Dong-Wang 2022; CTD, Doroshenko et al. 2022)
    Pld,
    PldCurve,
    PldResult,
    pld_compose,
    pld_dpsgd,
    pld_epsilon,
    pld_gaussian,
    pld_laplace,
    pld_pure,
)
from .pld_calibrate import calibrate_pld_sigma
from .pld_group import pld_group_lemma_epsilon  # group lemma comparison (Vadhan 2017 Lemma 2.2)
from .poisson import poisson_gaussian_rdp, poisson_gaussian_rdp_baseline
from .relational import (  # relational DP-SGD coupled sampling (Huang et al. Eq. (3), Thm C.1)
    calibrate_relational_sigma,
    certify_relational,
    coupled_sampling_rdp,
    coupled_sampling_rdp_standard_clipping,
    relational_accountants,
)
from .rr import poisson_rr_rdp, wor_rr_rdp
from .selection import (  # private selection / hyper-parameter tuning (Papernot & Steinke 2022 Thms 2, 6)
    RunCount,
    SelectionResult,
    calibrate_selection,
    candidate_envelope,
    selection_dp,
)
from .swm import swm_sigma2  # Pufferfish SWM calibration (Zhang & Vorobeychik Thms 4.5-4.8)
from .wor import wor_gaussian_rdp

__all__ = [
    "DEFAULT_ALPHAS",
    "Pld",
    "PldCurve",
    "PldResult",
    "calibrate_pld_sigma",
    "pld_compose",
    "pld_dpsgd",
    "pld_epsilon",
    "pld_gaussian",
    "pld_group_lemma_epsilon",
    "pld_laplace",
    "pld_pure",
    "DpResult",
    "RunCount",
    "SelectionResult",
    "calibrate_selection",
    "candidate_envelope",
    "selection_dp",
    "RdpCurve",
    "SoundnessError",
    "binomial_k2",
    "calibrate_relational_sigma",
    "calibrate_srpp_sgd",
    "certify_relational",
    "coupled_sampling_rdp",
    "coupled_sampling_rdp_standard_clipping",
    "huc",
    "hypergeometric_k2",
    "relational_accountants",
    "sa_huc",
    "srpp_sgd_epsilon",
    "srpp_sgd_sigma2",
    "calibrate_dpsgd_sigma",
    "compose",
    "dp_from_curve",
    "dpsgd_epsilon",
    "dpsgd_rdp_curve",
    "gaussian_rdp",
    "gcon_calibration",
    "poisson_gaussian_rdp",
    "poisson_gaussian_rdp_baseline",
    "poisson_rr_rdp",
    "rdp_to_dp",
    "swm_sigma2",
    "wor_gaussian_rdp",
    "wor_rr_rdp",
]
