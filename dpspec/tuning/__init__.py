"""Hyper-parameter tuning charged to the budget: the ``tune`` block.

Not a mechanism family but a procedure over one: it names a training of any family whose certificate has
an RDP curve, and certifies "draw K runs, each with a candidate setting, output the best" as one guarantee
(Papernot & Steinke 2022; the bounds are in ``dpspec.accounting.selection``). ``rules`` holds its check
rules, ``compile`` its compile function (called by the compile driver for ``ir.Tuning`` targets), and
``runtime`` the object ``compiled.mechanism`` returns.
"""
