"""GCON (``mechanism gcon``): edge-level DP graph convolution by objective perturbation (Wei et al. 2024).

Its hooks are the files of this folder (``dpspec.families.FOLDER_HOOKS``: ``compile``, ``runtime``, ``audit``,
``rules``, ``demo``, ``tuning``); its theorem map is ``PROOF.md``. The runtime's machinery lives beside them:

* ``graph``       -- ``Graph`` (canonical undirected 0/1 adjacency, validation, counts)
* ``propagation`` -- ``A~ = D^-1(A+I)``, APPR/PPR features, inference features (F1-F3, F14)
* ``encoder``     -- edge-free encoder: ``MLPEncoder``, ``tfidf_features``, ``normalise_rows``
* ``noise``       -- Erlang-radius / uniform-direction sampler (Alg. 2), AMP Gaussian noise
* ``objective``   -- perturbed objective (eq. (13)), certified Newton solver
* ``trainer``     -- ``GconConfig``, ``train_gcon``, ``GconResult`` (certificate-ready)
* ``plan``        -- the public plan of a training (classes, loss nodes, dimension, split)

The calibration is public numerics in ``dpspec.accounting.gcon`` (pure numpy/scipy; ``GconError``); the graph
a spec names is loaded by ``dpspec.data.bind.load_graph`` (shared with relational DP-SGD). Nothing is imported
here: the checker loads ``rules`` without the trainer.
"""
