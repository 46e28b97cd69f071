"""Hyper-parameter tuning charged to the budget: the ``tune`` block.

Not a mechanism family but a procedure over one: it names a training whose certificate has an RDP curve, a
PLD or an (ε, δ) guarantee, and certifies "draw K runs, each with a candidate setting, output the best" as one
guarantee (Papernot & Steinke 2022's Rényi bounds in ``dpspec.accounting.selection``, the privacy-profile bound in
``dpspec.accounting.selection_profile``; the minimum is certified). ``rules`` holds its check rules, ``compile``
its compile function (called by the compile driver for ``ir.Tuning`` targets), ``runtime`` the object
``compiled.mechanism`` returns (``dpspec.torch.tune`` runs it through ``make_private``), and ``audit`` the
auditor of ``tune`` certificates.
"""
