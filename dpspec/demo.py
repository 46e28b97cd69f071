"""The demo: compile every spec in specs/, print each certificate summary, write the
certificates to out/certificates/, verify them, and run the compiled mechanisms on generated data.

    python -m dpspec.demo [--specs specs] [--out out/certificates] [--quiet]

Specs that bind real datasets are compiled when the data root is found (``$DPSPEC_DATA_DIR``
or the shared data folder) and reported as skipped otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from dpspec.certificate.explain import summary_line


def _has_targets(text: str) -> bool:
    import re

    return re.search(r"^\s*(release|train|compose)\s", text, re.M) is not None


def run(specs_dir: Path, out_dir: Path, quiet: bool = False) -> int:
    import dpspec
    from dpspec.diagnostics import SpecError, render_all

    out_dir.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in specs_dir.rglob("*.dps") if _has_targets(p.read_text(encoding="utf-8")))
    failures = skipped = 0
    compiled_all = {}
    print(f"dpspec {dpspec.__version__} demo: {len(files)} specs in {specs_dir}/\n")
    for p in files:
        rel = p.relative_to(specs_dir.parent) if specs_dir.parent in p.parents else p
        t0 = time.perf_counter()
        spec = dpspec.load(p, name=str(rel))
        if not spec.ok:
            failures += 1
            print(f"✗ {rel}: invalid spec\n{render_all(spec.diagnostics, spec.sources)}\n")
            continue
        try:
            compiled = dpspec.compile(spec)
        except SpecError as e:
            if all(d.rule == "DPS419" for d in e.diagnostics):  # a real dataset that is not on this machine
                print(f"- {rel}: skipped ({e.diagnostics[0].message}; set DPSPEC_DATA_DIR)\n")
                skipped += 1
                continue
            failures += 1
            print(f"✗ {rel}: compile failed\n{render_all(e.diagnostics, e.sources)}\n")
            continue
        cert_path = out_dir / (p.stem + ".cert.json")
        cert_path.write_text(compiled.certificate.to_json() + "\n", encoding="utf-8")
        rep = dpspec.verify(cert_path, raise_on_error=False)
        dt = time.perf_counter() - t0
        mark = "✓" if rep.ok else "✗"
        failures += not rep.ok
        print(f"{mark} {rel}  →  {cert_path}  ({dt:.2f} s, verified: {'yes' if rep.ok else 'NO'})")
        for r in compiled.certificate.results:
            print(f"    {summary_line(r)}")
        for prob in rep.problems:
            print(f"    verify: {prob}")
        print()
        compiled_all[str(rel)] = compiled
    _run_mechanisms(compiled_all, quiet)
    print(f"{len(files) - failures - skipped}/{len(files)} specs compiled and verified"
          + (f", {skipped} skipped (data not available)" if skipped else "") + f"; certificates in {out_dir}/")
    return 1 if failures else 0


def _run_mechanisms(compiled_all: dict, quiet: bool) -> None:
    """Use the compiled mechanism objects on generated data (no dataset download needed)."""
    import numpy as np

    rng = np.random.default_rng(0)
    for name, c in compiled_all.items():
        for tname, mech in c.mechanisms.items():
            kind = type(mech).__name__
            if kind == "GaussianRelease":
                if mech.query is None or mech.data is None:
                    continue  # the answer is the caller's (release_answer), or the data arrives at run time
                noisy, report = mech.release(rng=rng)  # the report's counts are private: not printed
                print(f"  run {tname} ({name}): {report.query} on the bound data, released {np.round(noisy, 1)} "
                      f"(σ = {mech.sigma:.3g}; ε spent {mech.privacy_spent().epsilon:.3g})")
            elif kind == "SwmRelease":
                from dpspec.data.synthetic import generate

                data = generate("secret_groups", 5000, seed=1)
                if not set(mech.columns) <= set(data.columns):
                    continue  # a release over a real dataset: compiled and certified above
                group_a = data.select(data.column("group") == "A")
                true = np.asarray(mech.mechanism.query(group_a.matrix(mech.columns)))
                noisy = mech.release(group_a, rng=rng).value
                print(f"  run {tname} ({name}): group A's query {np.round(true, 3).tolist()} released as "
                      f"{np.round(noisy, 3).tolist()} (σ = {mech.sigma:.3g})")
            elif kind == "GconMechanism" and getattr(mech.graph, "source", "") == "synthetic":
                t0 = time.perf_counter()
                run = mech.train(rng=0)
                print(f"  run {tname} ({name}): GCON trained on the generated graph in {time.perf_counter() - t0:.1f} s; "
                      f"test accuracy {run.test_accuracy():.3f} ({run.inference} inference)")
            elif kind == "DpSgd" and tname == "classifier":
                _train_demo(mech, quiet, name)
            elif kind == "SrppSgdMechanism" and name.endswith("digits_srpp.dps"):
                _train_srpp_digits(tname, mech)
            elif kind == "RelationalMechanism" and mech.encoder.kind == "mlp":
                _train_relational(tname, name, mech)
    print()


def _train_relational(tname: str, name: str, mech, steps: int = 150) -> None:
    """A short relational DP-SGD run; zero-shot link prediction on the held-out nodes vs the untrained encoder."""
    try:
        import torch
    except ImportError:
        print(f"  ({tname}: torch not installed: skipping the relational run)")
        return
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    enc = mech.build_encoder()
    before = mech.evaluate(enc, enc.params())
    tr = mech.trainer(enc, seed=0)
    tr.train(min(steps, mech.steps))
    after = mech.evaluate(enc, tr.params)
    print(f"  run {tname} ({name}): {min(steps, mech.steps)} of {mech.steps} certified steps in "
          f"{time.perf_counter() - t0:.1f} s (σ/C = {mech.sigma:.3g}); held-out MRR {before['mrr']:.3f} → "
          f"{after['mrr']:.3f}, Hits@10 {before['hits@10']:.3f} → {after['hits@10']:.3f}")


def _train_srpp_digits(tname: str, mech) -> None:
    """SRPP-SGD on sklearn's bundled digits (1,400 training images), all certified steps."""
    try:
        import torch

        from dpspec.srpp import datasets, evaluate_accuracy
        Xtr, ytr, Xte, yte = datasets.digits(n_train=mech.plan.sampling.dataset_size)
    except ImportError:
        print(f"  ({tname}: torch or scikit-learn not installed: skipping the SRPP-SGD run)")
        return
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    t0 = time.perf_counter()
    mech.train(model, torch.from_numpy(Xtr), torch.from_numpy(ytr), seed=0)
    acc = evaluate_accuracy(model, torch.from_numpy(Xte), torch.from_numpy(yte))
    print(f"  run {tname} (digits_srpp.dps): {mech.steps} SRPP-SGD steps on sklearn digits in "
          f"{time.perf_counter() - t0:.1f} s, gradient noise std {mech.gradient_noise_std[0]:.3g}; "
          f"test accuracy {acc:.3f}")


def _train_demo(mech, quiet: bool, name: str = "") -> None:
    """A few hundred private steps of logistic regression on generated data, vs the same steps non-private."""
    import numpy as np

    try:
        import torch
    except ImportError:
        print("  (torch not installed: skipping the DP-SGD run)")
        return
    n, d = mech.dataset_size or 60000, 20
    g = np.random.default_rng(1)
    w = g.normal(size=d)
    X = g.normal(size=(n, d)).astype(np.float32)
    y = (X @ w + 0.5 * g.normal(size=n) > 0).astype(np.int64)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    torch.manual_seed(0)
    model = torch.nn.Linear(d, 2)
    steps = min(mech.steps, 300)
    t0 = time.perf_counter()
    rep = mech.train(model, Xt, yt, seed=0, steps=steps, progress=False)
    dt = time.perf_counter() - t0
    with torch.no_grad():
        acc = (model(Xt).argmax(1) == yt).float().mean().item()
    print(f"  run classifier ({name}): {steps} private steps (of {mech.steps} certified) in {dt:.1f} s, "
          f"mean batch {np.mean(rep.batch_sizes):.0f}, noise std {mech.noise_std:.3g}; training accuracy {acc:.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpspec.demo")
    root = Path(__file__).resolve().parent.parent
    ap.add_argument("--specs", type=Path, default=root / "specs")
    ap.add_argument("--out", type=Path, default=root / "out" / "certificates")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    return run(args.specs, args.out, args.quiet)


if __name__ == "__main__":
    sys.exit(main())
