"""The Gaussian sliced Wasserstein mechanism (``mechanism swm``): a static release under Ave/Joint sliced Rényi
Pufferfish privacy (Zhang & Vorobeychik, Thms 4.5–4.8). Its hooks are the files of this folder
(``dpspec.families.FOLDER_HOOKS``: ``compile``, ``runtime``, ``audit``, ``rules``, ``verify``, ``demo``); its
theorem map is ``PROOF.md``. Its accountant stays public numerics in ``dpspec.accounting.swm`` (SRPP-SGD's
accountant and ``dpspec.pufferfish`` build on it); the Pufferfish machinery (worlds, sliced sensitivities) is the
shared runtime package ``dpspec.pufferfish``, and reading a scenario's data at compile time is the shared
``dpspec.compiler.scenario``; the scenario rules every Pufferfish family shares are ``dpspec.check.rules_pufferfish``.
"""
