"""Rules for what the runtime may read (DPS16x): every normaliser, rate and batch size is public.

DPS160 is checked on the spec, by DP-SGD's rules (``dpspec/families/dpsgd/rules.py``): a DP-SGD training
whose noisy gradient sum would be divided by a size read from the data. DPS161–DPS163 are the runtime's refusals
(:mod:`dpspec.mechanisms.ledger`): they
are raised by the mechanism objects as named exceptions and listed here so that the catalogue
documents them.
"""

from __future__ import annotations

from dpspec.check.framework import register_front_end

NORMALISER_HINT = (
    "add `dataset_size N` (the public number of training records) to the privacy block or the train "
    "block: the noisy sum is then divided by the constant q·N (or N for full batch)"
)


def _spec(sampling: str, size: str = "") -> str:
    return (
        f"privacy people {{ unit record{size} }}\n"
        f"train t {{ mechanism dpsgd  sampling {sampling}  clipping flat(C = 1)  steps 100  "
        "guarantee dp(epsilon = 8, delta = 1e-6) }"
    )


GOOD = _spec("poisson(rate = 0.004)", "  dataset_size 60000")


register_front_end(
    "DPS161",
    "more steps than the certificate covers",
    "run",
    bad="(see tests/runtime/test_ledger.py)",
    good=GOOD,
    explanation="Every trainer charges its privacy ledger before a step's noise is drawn; a step, a "
    "`batches(steps = …)` request, a `train(steps)` or a second run on the same object "
    "beyond the certified number of steps raises BudgetExceededError (nothing is "
    "released). Compile a spec with more steps (and more noise or a larger ε).",
)
register_front_end(
    "DPS162",
    "a batch that breaks a per-batch cap of the certificate",
    "run",
    bad="(see tests/torch/test_virtual_batches.py and tests/review/test_issue13_review.py)",
    good=GOOD,
    explanation="A step's sensitivity assumes each record at most once per batch (DP-SGD, SRPP-SGD "
    "without replacement or Poisson), exactly B records for fixed-size sampling, and for "
    "relational DP-SGD at most K positive tuples per node and each node a negative of at "
    "most one tuple. A batch passed by the user's own loop that breaks one of them raises "
    "CapExceededError; pass the batch's training-set indices (`idx=`) or draw batches "
    "with `.batches()`.",
)
register_front_end(
    "DPS163",
    "data or a checkpoint that differs from the certificate",
    "run",
    bad="(see tests/runtime/test_run_certificate.py)",
    good=GOOD,
    explanation="Where the certificate's analysis uses a size (sampling without replacement, "
    "SRPP-SGD's N, the capped graph of relational DP-SGD, GCON's calibration), data of "
    "another size raises DataMismatchError; so does a ledger state (checkpoint) written "
    "under another certificate.",
)
register_front_end(
    "DPS164",
    "a layer whose per-example gradients the analysis cannot cover",
    "run",
    bad="(see tests/torch/test_validator.py) dpspec.torch.make_private(compiled, nn.Sequential("
    "nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)), optimizer, loader)",
    good=GOOD,
    explanation="DP-SGD bounds what one example changes in a step by one clipped per-example "
    "gradient. BatchNorm (and SyncBatchNorm) normalises by the statistics of the whole "
    "batch, so each example's gradient depends on the others, and it stores running "
    "statistics of the private data in the model without noise; InstanceNorm with "
    "track_running_stats=True stores them too. `dpspec.torch.validate(model)` lists such "
    "layers (make_private raises ModuleValidationError); `dpspec.torch.fix(model)` returns "
    "a copy with each replaced: BatchNorm -> GroupNorm, InstanceNorm without running "
    "statistics.",
)
register_front_end(
    "DPS165",
    "a training loop whose loss is not the per-example criterion",
    "run",
    bad="(see tests/torch/test_make_private.py) loss = ce(model(x), y, label_smoothing=0.3) with "
    "make_private(..., criterion=ce)",
    good=GOOD,
    explanation="The private step of `dpspec.torch.make_private` computes each example's gradient "
    "from `criterion` on that example alone (so it depends on that example only) and "
    "replaces `.grad` with the clipped, noised sum. The loss a loop back-propagates must "
    "be that criterion, averaged or summed over the batch, and nothing may reach the "
    "parameters around the model's output (a regulariser: use the optimizer's "
    "weight_decay); otherwise `optimizer.step()` raises CriterionMismatchError before "
    "anything is charged or drawn — for a loss that differs after the first step, at the next step, "
    "naming the step taken (its verdict is read a step late, so that no step waits for the device; "
    "that step's update was the criterion's private gradient). Pass the loss you train with as "
    "`criterion=`.",
)
register_front_end(
    "DPS166",
    "an optimizer that steps a parameter the private step does not noise",
    "run",
    bad="(see tests/torch/test_private_promises.py) optimizer.add_param_group({'params': [temp]}) "
    "with a parameter temp that the model does not hold",
    good=GOOD,
    explanation="`dpspec.torch.make_private`'s `optimizer.step()` replaces the `.grad` of every "
    "trainable parameter of the model by the certified noisy gradient; a parameter the "
    "wrapped optimizer holds but the model does not (added with `add_param_group`, say), "
    "or a frozen parameter given a gradient by hand, would be stepped on a gradient the "
    "certificate does not cover — its exact data gradient. `add_param_group` refuses such "
    "a parameter at once and `step()` refuses the step before anything is charged or "
    "moves (UnnoisedParameterError). Make it a parameter of the model, or leave it out "
    "of the optimizer.",
)
register_front_end(
    "DPS167",
    "a checkpoint that would rewind a run's ledger",
    "run",
    bad="(see tests/torch/test_private_promises.py) ckpt = opt.state_dict() at step 0, train, then "
    "opt.load_state_dict(ckpt)",
    good=GOOD,
    explanation="A ledger's run has a high-water mark: the steps charged against it never go down. "
    "Copies, deep copies and unpickled copies of a mechanism share one count per run; "
    "loading a state of the run older than that count (an earlier checkpoint) raises "
    "LedgerRewindError and changes nothing, and a ledger that has charged steps of its "
    "own refuses a state of another run. Across processes the count survives only in a "
    "journal (`make_private(..., journal=PATH)`, `mechanism.attach_journal(PATH)`). "
    "Resume from the run's latest checkpoint; a fresh run needs its own budget.",
)
