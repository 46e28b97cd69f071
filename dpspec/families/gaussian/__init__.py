"""The Gaussian release (``mechanism gaussian``): the analytic Gaussian mechanism on a query with a
derived or declared ℓ2 sensitivity. Its hooks are the files of this folder (``dpspec.families.FOLDER_HOOKS``);
its theorem map is ``PROOF.md``; the accountants it rests on are shared numerics
(``dpspec.accounting.analytic_gaussian``, ``dpspec.accounting.gaussian``)."""
