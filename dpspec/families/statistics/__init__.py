"""The statistics releases: counts, sums, means and quantiles of tabular data, with Laplace, discrete
Laplace, Gaussian or discrete Gaussian noise (``mechanism auto`` picks the most accurate), grouped over
declared keys or by DP partition selection, filtered by ``where``, and sharing one budget through
``compose … split``. Modules: ``accountant`` (numbers), ``compile`` (certificate, composition), ``split``
(joint calibration), ``runtime`` (the release object), ``rules``, ``audit``; derivations in PROOF.md."""
