"""dpspec — a declarative privacy compiler.

    spec = dpspec.load("my.dps")            # parse + check (never raises on a bad spec; see spec.ok)
    compiled = dpspec.compile(spec)         # calibrate; raises SpecError with located diagnostics
    compiled.mechanism                      # a ready-to-run mechanism object
    compiled.certificate.model_dump_json()  # the privacy certificate
    dpspec.verify(compiled.certificate)     # recompute every number

Heavy modules (numpy, scipy, sympy, torch) are imported only when compiling or running.
"""

from __future__ import annotations

__version__ = "0.1.0"

from dpspec.diagnostics import Diagnostic, SpecError
from dpspec.errors import DpspecError

__all__ = ["__version__", "Diagnostic", "DpspecError", "SpecError", "Spec", "load", "loads", "compile", "verify", "fmt"]


def __getattr__(name):  # the front end (pydantic, lark) is imported on first use
    if name in ("Spec", "load", "loads"):
        from dpspec import frontend

        return getattr(frontend, name)
    raise AttributeError(f"module 'dpspec' has no attribute {name!r}")


def compile(spec, *, data=None):  # noqa: A001 - the natural name for a compiler's entry point
    """Compile a spec (a ``Spec``, a path, or spec text) into mechanisms and a certificate."""
    from dpspec.compiler.compile import compile_spec
    from dpspec.frontend import loads

    if isinstance(spec, str) and ("\n" in spec or "{" in spec):
        spec = loads(spec)
    return compile_spec(spec, data=data)


def verify(certificate, *, raise_on_error: bool = True, data=None, trust_code: bool = False):
    """Re-verify a certificate (model, dict, JSON text, or a file); see ``dpspec.certificate.verify``.
    ``trust_code=True`` lets the embedded spec's code hooks run.

    A ``str`` is JSON text, except that a one-line str ending in ``.json`` that names an existing file is
    that file (``dpspec.verify("cert.json")``, as ``dpspec.compile("x.dps")`` takes a path). The two cannot be
    confused: a certificate's JSON text is an object and begins with ``{``. The file is read exactly as a
    ``pathlib.Path`` is (a regular file of at most 16 MiB, never a device, FIFO or directory)."""
    import os
    from pathlib import Path

    from dpspec.certificate.verify import verify as _verify

    if (
        isinstance(certificate, str)
        and certificate.endswith(".json")
        and "\n" not in certificate
        and not certificate.lstrip().startswith("{")
        and os.path.isfile(certificate)
    ):
        certificate = Path(certificate)
    return _verify(certificate, raise_on_error=raise_on_error, data=data, trust_code=trust_code)


def fmt(source) -> str:
    """A spec (path, text or loaded ``Spec``) formatted as ``dpspec fmt`` prints it: the canonical
    layout with every comment and blank-line group kept. Raises ``SpecError`` if it does not parse."""
    from dpspec.frontend import Spec, load
    from dpspec.parse.fmt import format_source

    spec = load(source) if not isinstance(source, Spec) else source
    if spec.program.root_file is None:
        raise SpecError(spec.diagnostics, spec.sources)
    return format_source(spec.sources[spec.program.root], spec.program.root)
