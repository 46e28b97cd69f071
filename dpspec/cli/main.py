"""``dpspec`` command line.

Exit codes: 0 fine; 1 invalid spec, failed verification or failed compile; 2 usage error
(bad flags, missing file argument); 3 internal error (a bug — reported without a traceback
unless ``DPSPEC_DEBUG=1``). No command ever prints a Python traceback for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors: exit 2 with a one-line hint, as argparse does
        self.print_usage(sys.stderr)
        print(f"dpspec: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="dpspec",
        description="A declarative privacy compiler: check specs, compile them to "
        "mechanisms and certificates, verify and explain certificates.",
    )
    from dpspec import __version__

    p.add_argument("--version", action="version", version=f"dpspec {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("check", help="check specs and report every problem (no numbers computed)")
    c.add_argument("files", nargs="+", metavar="FILE")
    c.add_argument("--format", choices=("text", "json"), default="text")

    c = sub.add_parser("compile", help="compile a spec: calibrate noise and write a certificate")
    c.add_argument("file", metavar="FILE")
    c.add_argument("-o", "--output", metavar="CERT.json", help="write the certificate here (default: stdout)")
    c.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="format of diagnostics and, with -o, of the summary (json: path and each target's ε)",
    )
    c.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (no progress bars)")

    trust_help = (
        "let the recompilation import and run the user code the certificate's spec names "
        "(sampler/callable hooks); only for a certificate whose author you trust"
    )
    c = sub.add_parser("verify", help="recompute every number of a certificate (executes nothing from it)")
    c.add_argument("cert", metavar="CERT.json")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    c.add_argument("--trust-code", action="store_true", help=trust_help)
    c.add_argument(
        "--certificate",
        metavar="ORIGINAL.json",
        help="for a run certificate: the certificate it spends (default: the embedded one)",
    )

    c = sub.add_parser("run-cert", help="write a run certificate: the steps a stopped run took and the ε it spent")
    c.add_argument("cert", metavar="CERT.json", help="the certificate the run spends")
    c.add_argument("--target", metavar="NAME", help="the training (default: the certificate's only one)")
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--steps", type=int, metavar="N", help="steps the run took")
    g.add_argument("--ledger", metavar="STATE.json", help="the ledger state the run saved (mechanism.ledger_state())")
    c.add_argument("--embed", action="store_true", help="embed the original certificate")
    c.add_argument("-o", "--output", metavar="RUN.json", help="write it here (default: stdout)")

    c = sub.add_parser("explain", help="verify a certificate, then print a human summary of it")
    c.add_argument("cert", metavar="CERT.json")
    c.add_argument("--trust-code", action="store_true", help=trust_help)
    c.add_argument(
        "--no-verify",
        action="store_true",
        help="summarise a well-formed, unedited certificate without recomputing its numbers",
    )

    c = sub.add_parser("fmt", help="format specs: canonical layout, comments and blank-line groups kept")
    c.add_argument("files", nargs="+", metavar="FILE", help="spec files (`-` reads standard input)")
    how = c.add_mutually_exclusive_group()
    how.add_argument("--check", action="store_true", help="exit 1 if a file is not formatted")
    how.add_argument("-w", "--write", action="store_true", help="rewrite the files in place")

    c = sub.add_parser("plot", help="draw a certificate: ε(δ), ε vs steps, ε(α) (needs matplotlib)")
    c.add_argument("cert", metavar="CERT.json")
    c.add_argument(
        "-o",
        "--output",
        metavar="OUT.png|OUT.svg",
        help="the picture to write (default: CERT.png beside the certificate)",
    )
    c.add_argument(
        "--kind",
        choices=("curve", "steps", "rdp", "all"),
        default="all",
        help="curve: ε(δ); steps: ε after each training step; rdp: ε(α); all: every one (default)",
    )
    c.add_argument("--target", action="append", metavar="NAME", help="only this release/training (repeatable)")
    c.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")

    c = sub.add_parser("rules", help="list the rule catalogue")
    c.add_argument("rule", nargs="?", help="show one rule with its examples")

    c = sub.add_parser("schema", help="print the certificate JSON Schema")

    c = sub.add_parser("audit", help="empirically lower-bound ε of a certificate's mechanisms (exit 1 on a violation)")
    c.add_argument("cert", metavar="CERT.json", help="a certificate (or a .dps spec)")
    c.add_argument(
        "--trials", type=int, default=None, metavar="N", help="outputs per neighbouring input (default: per mechanism)"
    )
    c.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        metavar="S",
        help="time budget: trial counts are planned (from timing a few trials) to fit it, and what was "
        "measured is reported; fewer trials give a weaker, still valid lower bound",
    )
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--confidence", type=float, default=0.95, help="of the one-sided Clopper–Pearson bound")
    c.add_argument("--delta", type=float, default=None, help="δ at which ε is bounded (default: the certificate's)")
    c.add_argument("--target", action="append", metavar="NAME", help="audit only this release/training (repeatable)")
    c.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    c.add_argument(
        "--no-runtime-checks",
        action="store_true",
        help="skip the runtime audits (normaliser, non-finite gradients, step budget, per-batch caps; "
        "through dpspec.torch.make_private: checkpoint rewind, unnoised parameter, non-finite record)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = None
    try:
        args = _parser().parse_args(argv)
        if not args.cmd:
            _parser().print_help(sys.stderr)
            return EXIT_USAGE
        if getattr(args, "quiet", False):  # progress bars (stderr, TTY only) off as well
            from dpspec.progress import set_quiet

            set_quiet(True)
        return {
            "check": cmd_check,
            "compile": cmd_compile,
            "verify": cmd_verify,
            "explain": cmd_explain,
            "fmt": cmd_fmt,
            "plot": cmd_plot,
            "rules": cmd_rules,
            "schema": cmd_schema,
            "audit": cmd_audit,
            "run-cert": cmd_run_cert,
        }[args.cmd](args)
    except SystemExit as e:
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        print("dpspec: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as e:  # an optional dependency this command needs is not installed
        hint = _INSTALL_HINTS.get((e.name or "").partition(".")[0])
        if hint is None or os.environ.get("DPSPEC_DEBUG"):
            raise
        cmd = getattr(args, "cmd", None)
        what = f"`dpspec {cmd}`" if cmd else "this"
        print(f"dpspec: error: {what} needs `{e.name}`, which is not installed\n  = hint: {hint}", file=sys.stderr)
        return EXIT_INVALID
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug: say so plainly, without a traceback
        if os.environ.get("DPSPEC_DEBUG"):
            raise
        print(
            f"dpspec: internal error: {type(e).__name__}: {e}\n"
            "  = note: this is a bug in dpspec; rerun with DPSPEC_DEBUG=1 for details and report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


# Optional dependencies (pyproject extras) and how to install them.
_INSTALL_HINTS = {
    "torch": "install a CPU build with `pip install -r requirements/torch.txt`, then `pip install 'dpspec[train]'`",
    "matplotlib": "`pip install 'dpspec[plot]'` (or `pip install matplotlib`)",
}


def _print_diags(diags, sources, fmt: str, stream=sys.stdout) -> None:
    from dpspec.diagnostics import render_all, to_json

    if fmt == "json":
        print(to_json(diags), file=stream)
    elif diags:
        print(render_all(diags, sources), file=stream)


def cmd_check(args) -> int:
    from dpspec.frontend import load

    all_diags, sources, bad = [], {}, 0
    for f in args.files:
        spec = load(Path(f), name=f)
        all_diags.extend(spec.diagnostics)
        sources.update(spec.sources)
        bad += not spec.ok
    if args.format == "json":
        _print_diags(all_diags, sources, "json")
    else:
        if all_diags:
            _print_diags(all_diags, sources, "text")
        errors = sum(d.is_error for d in all_diags)
        warnings = sum(d.severity == "warning" for d in all_diags)
        if bad:
            print(f"\n{errors} error(s), {warnings} warning(s)" if all_diags else "invalid spec")
        else:
            print(
                ("ok" + (f" ({warnings} warning(s))" if warnings else ""))
                if len(args.files) == 1
                else f"ok: {len(args.files)} files" + (f" ({warnings} warning(s))" if warnings else "")
            )
    return EXIT_INVALID if bad else EXIT_OK


def cmd_compile(args) -> int:
    from dpspec.certificate.explain import summary_line
    from dpspec.compiler.compile import compile_spec
    from dpspec.diagnostics import SpecError
    from dpspec.frontend import load

    if args.output and not Path(args.output).parent.is_dir():  # say so before the (long) compile
        print(
            f"dpspec: cannot write {args.output}: the directory {Path(args.output).parent} does not exist\n"
            "  = hint: create it first, or choose another -o path",
            file=sys.stderr,
        )
        return EXIT_INVALID
    spec = load(Path(args.file), name=args.file)
    if not spec.ok:
        _print_diags(spec.diagnostics, spec.sources, args.format, sys.stderr)
        return EXIT_INVALID
    try:
        compiled = compile_spec(spec)
    except SpecError as e:
        _print_diags(e.diagnostics, e.sources, args.format, sys.stderr)
        return EXIT_INVALID
    text = compiled.certificate.to_json() + "\n"
    warnings = [d for d in spec.diagnostics if not d.is_error]
    if warnings and not args.quiet:
        _print_diags(warnings, spec.sources, args.format, sys.stderr)
    if not args.quiet:
        for r in compiled.certificate.results:
            for w in r.warnings:
                print(f"{args.file}: note: {r.name}: {w}", file=sys.stderr)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as e:
            print(f"dpspec: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
            return EXIT_INVALID
        if args.format == "json":  # machine-readable summary (stdout carries only this JSON)
            print(json.dumps(_compile_summary(args.output, compiled.certificate), indent=2, ensure_ascii=False))
        elif not args.quiet:
            for r in compiled.certificate.results:
                print(summary_line(r))
            print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _compile_summary(output: str, cert) -> dict:
    """`dpspec compile -o CERT.json --format json`: where the certificate went and each target's guarantee."""
    targets = []
    for r in cert.results:
        g = r.guarantee
        params = r.mechanism.parameters
        targets.append(
            {
                k: v
                for k, v in {
                    "name": r.name,
                    "kind": r.kind,
                    "mechanism": r.mechanism.name,
                    "notion": r.notion.name,
                    "epsilon": g.epsilon,
                    "delta": g.delta,
                    "alpha": g.alpha,
                    "noise_multiplier": params.get("noise_multiplier"),
                    "sigma": params.get("sigma"),
                    "steps": params.get("steps"),
                    "warnings": list(r.warnings),
                }.items()
                if v is not None
            }
        )
    return {"ok": True, "output": output, "content_hash": cert.content_hash, "targets": targets}


def _read_cert(path: str):
    """A certificate read as `dpspec verify` reads it (bounded, strict structure), or None after a message."""
    from dpspec.certificate import verify as V

    try:
        return V.load_strict(Path(path))
    except (V.CertificateReadError, V._StructureError) as e:
        print(f"{path}: error: {e}", file=sys.stderr)
    except V._RunCertificate:
        print(f"{path}: error: this is a run certificate; give the certificate the run spends", file=sys.stderr)
    return None


def _verify_failed(path: str, rep) -> int:
    """One line per problem on stderr (a single problem: one line in all)."""
    from dpspec.certificate.verify import printable

    if len(rep.problems) == 1:
        print(f"{path}: verification FAILED: {printable(rep.problems[0])}", file=sys.stderr)
    else:
        for p in rep.problems:
            print(f"{path}: error: {printable(p)}", file=sys.stderr)
        print(f"{path}: verification FAILED ({len(rep.problems)} problem(s))", file=sys.stderr)
    return EXIT_INVALID


def cmd_verify(args) -> int:
    from dpspec.certificate.verify import verify

    rep = verify(
        Path(args.cert),
        raise_on_error=False,
        trust_code=args.trust_code,
        original=Path(args.certificate) if args.certificate else None,
    )
    if args.format == "json":
        print(json.dumps({"ok": rep.ok, "problems": rep.problems, "checks": rep.checks}, indent=2, ensure_ascii=False))
        return EXIT_OK if rep.ok else EXIT_INVALID
    if not rep.ok:
        return _verify_failed(args.cert, rep)
    from dpspec.certificate.verify import printable

    for c in rep.checks:
        print(f"  ✓ {printable(c)}")
    print(f"{args.cert}: verified")
    return EXIT_OK


def cmd_run_cert(args) -> int:
    from dpspec.certificate.run import run_certificate_for
    from dpspec.mechanisms.ledger import CertificateGuardError

    for f in (args.cert, args.ledger):
        if f is not None and not Path(f).is_file():
            why = "not a regular file" if os.path.lexists(f) else "no such file"
            print(f"dpspec: cannot read {f}: {why}", file=sys.stderr)
            return EXIT_INVALID
    if args.steps is not None and args.steps < 0:
        print("dpspec: error: --steps must be ≥ 0", file=sys.stderr)
        return EXIT_USAGE
    state = None
    if args.ledger is not None:
        from dpspec.certificate.verify import (
            CertificateReadError,
            _StructureError,
            parse_certificate_json,
            read_certificate_file,
        )

        try:  # the certificate reader's rules: a bounded regular file, strict JSON, bounded nesting
            state = parse_certificate_json(read_certificate_file(args.ledger))
        except (CertificateReadError, _StructureError) as e:
            why = str(e).replace("the certificate", "the ledger state")
            print(f"{args.ledger}: error: not a ledger state (JSON): {why}", file=sys.stderr)
            return EXIT_INVALID
    target = args.target
    if target is None:
        cert = _read_cert(args.cert)
        if cert is None:
            return EXIT_INVALID
        names = [r.name for r in cert.results if r.kind != "compose"]
        if len(names) != 1:
            print(
                f"{args.cert}: error: the certificate has {len(names)} targets ({', '.join(names)}): name one "
                "with --target",
                file=sys.stderr,
            )
            return EXIT_USAGE
        target = names[0]
    try:
        rc = run_certificate_for(Path(args.cert), target, steps=args.steps, ledger_state=state, embed=args.embed)
    except (ValueError, CertificateGuardError) as e:
        print(f"{args.cert}: error: {e}", file=sys.stderr)
        return EXIT_INVALID
    text = rc.to_json()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        eps = ", ".join(
            f"ε = {p.epsilon:.4g} at " + (f"δ = {p.delta:g}" if p.delta is not None else f"α = {p.alpha:g}")
            for p in rc.spent[:2]
        )
        print(f"{rc.target}: {rc.steps_taken} of {rc.budget_steps} {rc.unit}(s); spent {eps}")
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_explain(args) -> int:
    from dpspec.certificate.explain import explain
    from dpspec.certificate.verify import VerifyReport, load_structure, verify

    if args.no_verify:  # structure, content hash and spec hash only: the numbers are not recomputed
        rep = VerifyReport()
        cert = load_structure(Path(args.cert), rep)
        if cert is None or not rep.ok:
            if rep.ok:  # a run certificate (verified by its own module): nothing to summarise here
                rep.fail("not a compile certificate; `dpspec explain` summarises compile certificates")
            return _verify_failed(args.cert, rep)
        sys.stdout.write(
            "NOT VERIFIED: the numbers below were not recomputed (run `dpspec verify`)\n\n" + explain(cert)
        )
        return EXIT_OK
    rep = verify(Path(args.cert), raise_on_error=False, trust_code=args.trust_code)
    if not rep.ok or rep.certificate is None:
        if rep.ok:
            rep.fail("not a compile certificate; `dpspec explain` summarises compile certificates")
        return _verify_failed(args.cert, rep)
    sys.stdout.write(explain(rep.certificate))
    return EXIT_OK


def cmd_fmt(args) -> int:
    from dpspec.diagnostics import SpecError, render_all
    from dpspec.parse.fmt import FormatError, format_source
    from dpspec.parse.includes import read_spec_file

    if args.write and "-" in args.files:
        print("dpspec: error: -w cannot rewrite standard input", file=sys.stderr)
        return EXIT_USAGE
    status = EXIT_OK
    for name in args.files:
        if name == "-":
            try:
                text, err = sys.stdin.buffer.read().decode("utf-8"), None
            except UnicodeDecodeError as e:
                text, err = None, f"is not UTF-8 text (byte {e.start})"
        else:
            text, err, _hint = read_spec_file(Path(name), regular_only=True)
        if text is None:
            print(f"dpspec: cannot read {name}: {err}", file=sys.stderr)
            status = EXIT_INVALID
            continue
        try:
            out = format_source(text, name)
        except SpecError as e:
            print(render_all(e.diagnostics, e.sources), file=sys.stderr)
            status = EXIT_INVALID
            continue
        except FormatError as e:
            print(f"{name}: error: {e}", file=sys.stderr)
            status = EXIT_INVALID
            continue
        if args.check:
            if out != text:
                print(f"{name}: not formatted (`dpspec fmt -w {name}` rewrites it)")
                status = EXIT_INVALID
        elif args.write:
            if out != text and not _replace_file(Path(name), out):
                status = EXIT_INVALID
        else:
            sys.stdout.write(out)
    return status


def _replace_file(path: Path, text: str) -> bool:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path`` (through a
    symlink, to its target): an interrupted write leaves the old file whole."""
    import shutil
    import tempfile

    target, tmp = path.resolve(), None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        shutil.copymode(target, tmp)
        os.replace(tmp, target)
        return True
    except OSError as e:
        print(f"dpspec: cannot write {path}: {e.strerror or e}", file=sys.stderr)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False


def cmd_plot(args) -> int:
    from dpspec import plot

    out = Path(args.output) if args.output else Path(args.cert).with_suffix(".png")
    if out.suffix.lower() not in plot.FORMATS:
        print(f"dpspec: error: cannot write {out}: the picture must end in {', '.join(plot.FORMATS)}", file=sys.stderr)
        return EXIT_USAGE
    if not out.parent.is_dir():
        print(f"dpspec: cannot write {out}: the directory {out.parent} does not exist", file=sys.stderr)
        return EXIT_INVALID
    import matplotlib  # noqa: F401 - before the (possibly slow) recomputation: a missing package says so at once

    try:
        cert = plot.read_certificate(args.cert)
    except plot.CertificateReadError as e:
        print(f"dpspec: error: {e}", file=sys.stderr)
        return EXIT_INVALID
    if cert.content_hash != cert.payload_hash() and not args.quiet:
        print(
            f"{args.cert}: warning: the content hash does not match: the certificate was edited after it was "
            "compiled (`dpspec verify` says what changed); plotting its numbers as they are",
            file=sys.stderr,
        )
    kinds = plot.KINDS if args.kind == "all" else (args.kind,)
    progress = None if args.quiet else (lambda msg: print(f"  {msg} …", file=sys.stderr, flush=True))
    try:
        plot.save(cert, out, kinds, args.target, progress)
    except KeyError:
        names = ", ".join(r.name for r in cert.results)
        print(f"dpspec: error: no target {', '.join(args.target)} in {args.cert}; it holds: {names}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"dpspec: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return EXIT_INVALID
    if not args.quiet:
        print(f"wrote {out}")
    return EXIT_OK


def cmd_rules(args) -> int:
    from dpspec.check import catalogue

    CATALOGUE = catalogue()

    if args.rule:
        r = CATALOGUE.get(args.rule.upper())
        if r is None:
            from dpspec.diagnostics import did_you_mean

            print(f"dpspec: no rule {args.rule}; {did_you_mean(args.rule.upper(), CATALOGUE, 'rule')}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"{r.id} ({r.severity}, {r.stage}): {r.title}\n\n{r.explanation}\n\nRaised by:\n{r.bad}\n\nFixed:\n{r.good}"
        )
        return EXIT_OK
    for r in sorted(CATALOGUE.values(), key=lambda r: r.id):
        print(f"{r.id}  {r.severity:<7}  {r.title}")
    return EXIT_OK


def cmd_schema(args) -> int:
    from dpspec.certificate.model import json_schema_text

    sys.stdout.write(json_schema_text())
    return EXIT_OK


def cmd_audit(args) -> int:
    from dpspec.audit import AuditError, audit
    from dpspec.diagnostics import SpecError

    if args.trials is not None and args.trials < 40:
        print("dpspec: error: --trials must be at least 40", file=sys.stderr)
        return EXIT_USAGE
    if not 0.0 < args.confidence < 1.0:
        print("dpspec: error: --confidence must be in (0, 1)", file=sys.stderr)
        return EXIT_USAGE
    if args.delta is not None and not 0.0 < args.delta < 1.0:
        print("dpspec: error: --delta must be in (0, 1)", file=sys.stderr)
        return EXIT_USAGE
    if args.max_seconds is not None and not (0 < args.max_seconds < float("inf")):
        print("dpspec: error: --max-seconds must be a positive number of seconds", file=sys.stderr)
        return EXIT_USAGE
    if not Path(args.cert).exists():
        print(f"dpspec: cannot read {args.cert}: no such file", file=sys.stderr)
        return EXIT_INVALID
    progress = None if args.quiet else (lambda msg: print(f"  {msg} …", file=sys.stderr, flush=True))

    def estimate(seconds: float, line: str) -> None:
        # before the audits start; under -q only when the audit is long and no budget bounds it
        long = args.max_seconds is None and seconds > 60
        if not args.quiet or long:
            hint = " (--max-seconds bounds it)" if long else ""
            print(f"dpspec audit: {line}{hint}", file=sys.stderr, flush=True)

    try:
        rep = audit(
            args.cert,
            trials=args.trials,
            seed=args.seed,
            confidence=args.confidence,
            delta=args.delta,
            targets=args.target,
            progress=progress,
            runtime=not args.no_runtime_checks,
            max_seconds=args.max_seconds,
            estimate=estimate,
        )
    except (AuditError, SpecError) as e:
        print(f"{args.cert}: error: {e}", file=sys.stderr)
        return EXIT_INVALID
    except ValueError as e:
        print(f"{args.cert}: error: {e}", file=sys.stderr)
        return EXIT_INVALID
    out = {"text": rep.to_text, "json": rep.to_json, "markdown": rep.to_markdown}[args.format]()
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return EXIT_OK if rep.ok else EXIT_INVALID


if __name__ == "__main__":
    raise SystemExit(main())
