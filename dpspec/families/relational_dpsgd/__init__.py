"""Relational DP-SGD (``mechanism relational_dpsgd``): entity-level privacy with coupled sampling (Huang et al.).
Its hooks are the files of this folder (``dpspec.families.FOLDER_HOOKS``); ``sharding.py`` is the data-parallel
graph capping its distributed workload uses; its theorem map is ``PROOF.md``; its accountant stays public
numerics in ``dpspec.accounting.relational`` and its training machinery in the runtime package ``dpspec.relational``."""
