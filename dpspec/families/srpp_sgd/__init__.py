"""SRPP-SGD (``mechanism srpp_sgd``): SGD under sliced Rényi Pufferfish privacy with the History-Uniform Cap
accountants (Zhang & Vorobeychik, §5). Its hooks are the files of this folder (``dpspec.families.FOLDER_HOOKS``);
its theorem map is ``PROOF.md``; its accountant stays in ``dpspec.accounting.huc`` (public numerics) and its
training machinery in the runtime package ``dpspec.srpp``."""
