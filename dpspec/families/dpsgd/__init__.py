"""DP-SGD (``mechanism dpsgd``): per-example clipping, Gaussian noise, subsampled steps. Its hooks are the
files of this folder (``dpspec.families.FOLDER_HOOKS``); its theorem map is ``PROOF.md``; the accountants
it rests on are shared numerics (``dpspec.accounting``: Poisson, without replacement, groups, PLD)."""
