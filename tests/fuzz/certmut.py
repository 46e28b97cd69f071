"""Certificate mutation: hostile edits of real certificates, resealed, for fuzzing ``dpspec verify``.

A case is a real certificate (compiled once per process from the specs in specs/ that need no
external data, and from a few small generated specs) with one to three mutations applied, then
**resealed**: the embedded spec's sha256 and the ``content_hash`` are recomputed, so that the hash
check cannot hide a semantic check. Mutations: delete / insert / duplicate keys; change numbers (scale,
one ulp down or up, sign, ±∞ and NaN, huge integers, numbers as strings, booleans, null); change
strings (append, empty, huge, control characters, code); reorder, duplicate (a forged copy first) or
drop results; swap or inject formula texts (``__import__``, ``9**9**9**9``); inject specs that name code
hooks (``sampler``/``callable`` pointing at :mod:`tests.fuzz.hook_canary`); edit the spec text; and
byte-level truncation/flips of the JSON text.

:func:`run_case` checks the properties: ``verify`` never raises and reports no internal error, stays
within a per-case time bound, never executes code (the canary file is never written), and never
accepts a document that differs from the original beyond what :func:`is_legit_variant` allows (equal
everything, except privacy-loss-like numbers rounded *up* by at most a relative 1e-9 and the two
free-text labels ``tool.version`` and ``spec.source_name``) — unless the document is exactly what
``dpspec compile`` writes for its own, edited, spec (an edit of a description, an unused setting or a
seed of public data changes nothing certified: that is a genuine certificate of another spec, not a
forgery; resealing can make any such document, and no verifier can tell it from one the compiler wrote).
The oracle is written independently of ``dpspec.certificate.verify``'s own direction table.

Used by tests/fuzz/test_certificate_fuzz.py (bounded budget) and benchmarks/fuzz_certificates.py
(long budget). It only needs ``dpspec.verify(text, raise_on_error=False)``, so it also runs against
older versions of dpspec (to measure what they accept).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import random
import signal
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
CORPUS = Path(__file__).resolve().parent / "corpus" / "certificates"

#: specs in specs/ that need no external data (fast to compile and verify)
BASE_SPEC_FILES = ("gaussian_release.dps", "composition.dps", "dpsgd_records.dps", "digits_srpp.dps",
                   "groups_swm.dps", "sbm_gcon.dps")
#: small generated specs
GENERATED_SPECS = {
    "gen_rdp_release": "privacy p { unit record }\nrelease r { mechanism gaussian  sensitivity 2  "
                       "guarantee rdp(alpha = 8, epsilon = 0.5) }\n",
    "gen_two_releases": "privacy p { unit record(relation = substitution)  dataset_size 1000 }\n"
                        "release a { mechanism gaussian  query mean(x, bounds = [0, 10])  "
                        "guarantee dp(epsilon = 0.5, delta = 1e-7) }\n"
                        "release b { mechanism gaussian  sensitivity 1  noise gaussian(sigma = 3)  "
                        "guarantee dp(delta = 1e-7) }\n"
                        "compose ab { parts [a, b]  guarantee dp(epsilon = 8, delta = 1e-7) }\n",
    "gen_dpsgd_wor": "privacy p { unit record  dataset_size 5000 }\ntrain t { mechanism dpsgd  "
                     "sampling without_replacement(batch_size = 100)  clipping flat(C = 0.5)  steps 50  "
                     "noise_multiplier 2.0  guarantee dp(delta = 1e-6) }\n",
}

HOOK_BASE = "gen_hooks"
CASE_SECONDS = 30.0  # a case that takes longer is a hang
CANARY = Path(tempfile.gettempdir()) / f"dpspec-certmut-canary-{os.getpid()}"


def hook_spec(eps: str = "1") -> str:
    """A spec naming two code hooks (a sampler world and a callable query) of tests.fuzz.hook_canary."""
    from tests.fuzz.hook_canary import SPEC

    return SPEC.format(eps=eps)


# --- base certificates ------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def base_certificates() -> dict[str, str]:
    """name → certificate JSON text, compiled once per process."""
    import dpspec

    out = {}
    for name in BASE_SPEC_FILES:
        from tests.conftest import load_example

        c = dpspec.compile(load_example(SPECS / name))
        out[name.removesuffix(".dps")] = c.certificate.to_json()
    for name, text in GENERATED_SPECS.items():
        out[name] = dpspec.compile(dpspec.loads(text, name=f"{name}.dps")).certificate.to_json()
    # a genuine certificate whose spec names code hooks: compiling runs them, verifying must not
    out[HOOK_BASE] = dpspec.compile(dpspec.loads(hook_spec(), name="hooks.dps")).certificate.to_json()
    CANARY.unlink(missing_ok=True)
    return out


# --- resealing --------------------------------------------------------------------------------------


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def reseal(doc: dict) -> dict:
    """Recompute the spec sha256 and the content hash of ``doc`` (in place, best effort: a document the
    model no longer reads is hashed as it is)."""
    spec = doc.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("canonical_text"), str) and "sha256" in spec:
        spec["sha256"] = "sha256:" + hashlib.sha256(spec["canonical_text"].encode("utf-8")).hexdigest()
    if "content_hash" not in doc:
        return doc
    try:
        from dpspec.certificate.model import Certificate, content_hash

        doc["content_hash"] = content_hash(Certificate.model_validate(doc))
    except Exception:
        payload = {k: v for k, v in doc.items() if k != "content_hash"}
        try:
            doc["content_hash"] = "sha256:" + hashlib.sha256(_canonical(payload).encode("utf-8")).hexdigest()
        except (TypeError, ValueError):
            pass
    return doc


# --- mutations ----------------------------------------------------------------------------------------


@dataclass
class Case:
    base: str
    seed: int
    mutations: list[str] = field(default_factory=list)
    text: str = ""


def _paths(x, path=()):
    """Every (path, value) in the document, containers included."""
    yield path, x
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, path + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _paths(v, path + (i,))


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _set(doc, path, value):
    _get(doc, path[:-1])[path[-1]] = value


def _num_paths(doc):
    """Paths of the numbers a double represents (an earlier mutation may have left a huge integer)."""
    return [p for p, v in _paths(doc) if isinstance(v, (int, float)) and not isinstance(v, bool)
            and (isinstance(v, float) or abs(v) < 2 ** 1023)]


def _str_paths(doc):
    return [p for p, v in _paths(doc) if isinstance(v, str) and p[-1:] != ("content_hash",)]


_SCALES = (0.0, 0.5, 0.9, 1 - 1e-9, 1 - 1e-12, 1 - 1e-15, 1 + 1e-15, 1 + 1e-12, 1 + 1e-9, 1 + 1e-6, 2.0, 10.0, 1e-300,
           1e300, -1.0)


def _mutate_number(doc, rng: random.Random) -> str:
    paths = _num_paths(doc)
    if not paths:
        return "no number"
    p = rng.choice(paths)
    v = _get(doc, p)
    op = rng.choice(("scale", "scale", "ulp_down", "ulp_down", "ulp_up", "sign", "special", "huge_int", "string",
                     "bool", "null", "int"))
    if op == "scale":
        s = rng.choice(_SCALES)
        new = v * s
    elif op == "ulp_down":
        new = math.nextafter(float(v), -math.inf)
    elif op == "ulp_up":
        new = math.nextafter(float(v), math.inf)
    elif op == "sign":
        new = -v if v else -1.0
    elif op == "special":
        new = rng.choice((math.inf, -math.inf, math.nan, 1e308 * 10))
    elif op == "huge_int":
        new = rng.choice((10 ** 30, 2 ** 53 + 1, -(10 ** 400), 10 ** 5000 if rng.random() < 0.2 else 10 ** 400))
    elif op == "string":
        new = repr(v)
    elif op == "bool":
        new = rng.random() < 0.5
    elif op == "null":
        new = None
    else:
        new = int(v) if isinstance(v, float) and math.isfinite(v) and abs(v) < 1e18 else 0
    _set(doc, p, new)
    return f"number {_ptext(p)}: {op} {v!r} → {_short(new)}"


_STRINGS = ("", "x", "\x1b[31mRED\x1b[0m", "é" * 3, "__import__('os').system('true')", "9**9**9**9", "A" * 5000,
            "../../../../etc/passwd", "1.0")


def _mutate_string(doc, rng: random.Random) -> str:
    paths = _str_paths(doc)
    if not paths:
        return "no string"
    p = rng.choice(paths)
    v = _get(doc, p)
    op = rng.choice(("append", "replace", "case"))
    new = v + "x" if op == "append" else (rng.choice(_STRINGS) if op == "replace" else v.swapcase())
    _set(doc, p, new)
    return f"string {_ptext(p)}: {op}"


def _mutate_delete(doc, rng: random.Random) -> str:
    paths = [p for p, v in _paths(doc) if p and isinstance(_get(doc, p[:-1]), dict)]
    p = rng.choice(paths)
    del _get(doc, p[:-1])[p[-1]]
    return f"delete key {_ptext(p)}"


def _mutate_insert(doc, rng: random.Random) -> str:
    paths = [p for p, v in _paths(doc) if isinstance(v, dict)]
    p = rng.choice(paths)
    key = rng.choice(("extra", "epsilon", "note", "kind", "__proto__"))
    obj = _get(doc, p)
    if key in obj:
        key = key + "_x"
    obj[key] = rng.choice((0.01, "x", None, [], {}))
    return f"insert key {_ptext(p + (key,))}"


def _mutate_results(doc, rng: random.Random) -> str:
    res = doc.get("results")
    if not isinstance(res, list) or not res:
        return "no results"
    op = rng.choice(("forge_first", "duplicate", "reverse", "drop", "rename", "swap_kind"))
    i = rng.randrange(len(res))
    if op == "forge_first":
        forged = copy.deepcopy(res[i])
        g = forged.get("guarantee", {})
        if isinstance(g.get("epsilon"), (int, float)):
            g["epsilon"] = 0.01
        params = forged.get("mechanism", {}).get("parameters", {})
        for k in ("sigma", "noise_multiplier"):
            if isinstance(params.get(k), (int, float)):
                params[k] = params[k] * 100
        res.insert(0, forged)
    elif op == "duplicate":
        res.append(copy.deepcopy(res[i]))
    elif op == "reverse":
        if len(res) < 2:
            res.append(copy.deepcopy(res[0]))
        res.reverse()
    elif op == "drop":
        del res[i]
    elif op == "rename":
        res[i]["name"] = str(res[i].get("name")) + "_x"
    else:
        res[i]["kind"] = {"release": "train", "train": "compose"}.get(res[i].get("kind"), "release")
    return f"results: {op} [{i}]"


def _mutate_formula(doc, rng: random.Random) -> str:
    formulas = [(i, j) for i, r in enumerate(doc.get("results", [])) if isinstance(r, dict)
                for j, _f in enumerate(r.get("formulas", []) or [])]
    if not formulas:
        return "no formula"
    i, j = rng.choice(formulas)
    f = doc["results"][i]["formulas"][j]
    others = [g.get("sympy") for r in doc["results"] for g in r.get("formulas", []) if g is not f]
    op = rng.choice(("inject", "inject", "power_tower", "swap", "rename", "variables", "latex"))
    if op == "inject":
        f["sympy"] = f"__import__('pathlib').Path({str(CANARY)!r}).write_text('formula')"
    elif op == "power_tower":
        f["sympy"] = "9**9**9**9"
    elif op == "swap" and others:
        f["sympy"] = rng.choice(others)
    elif op == "rename":
        f["name"] = rng.choice(("rdp_group_removal_alpha7", "rdp_gaussian", "rdp_to_dp", "mystery"))
    elif op == "variables":
        f.setdefault("variables", {})["alpha"] = rng.choice((10 ** 9, "__import__('os')", 2.5, -1))
    else:
        f["latex"] = "\\alpha"
    return f"formula [{i}].{j}: {op}"


def _mutate_spec(doc, rng: random.Random) -> str:
    spec = doc.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("canonical_text"), str):
        return "no spec"
    op = rng.choice(("hook", "hook", "use", "number", "append", "empty"))
    text = spec["canonical_text"]
    if op == "hook":
        spec["canonical_text"] = _canonical_spec(hook_spec(rng.choice(("1", "2.0", "8"))))
    elif op == "use":
        spec["canonical_text"] = 'use "/etc/passwd"\n' + text
    elif op == "number":
        digits = [k for k, ch in enumerate(text) if ch.isdigit()]
        if digits:
            k = rng.choice(digits)
            text = text[:k] + str((int(text[k]) + rng.randint(1, 9)) % 10) + text[k + 1:]
        spec["canonical_text"] = text
    elif op == "append":
        spec["canonical_text"] = text + "\n# comment\n"
    else:
        spec["canonical_text"] = ""
    return f"spec: {op}"


DOC_MUTATIONS = (_mutate_number, _mutate_number, _mutate_number, _mutate_string, _mutate_delete, _mutate_insert,
                 _mutate_results, _mutate_formula, _mutate_spec)


def _canonical_spec(text: str) -> str:
    """The canonical form dpspec writes (so that the hook gate, not the form check, is what fails)."""
    try:
        import dpspec

        return dpspec.loads(text).canonical_text()
    except Exception:
        return text


def _text_mutation(text: str, rng: random.Random) -> tuple[str, str]:
    op = rng.choice(("truncate", "flip", "duplicate_key", "nan", "deep", "bom", "path"))
    if op == "truncate":
        k = rng.randrange(len(text))
        return text[:k], f"text: truncate at {k}"
    if op == "flip":
        k = rng.randrange(len(text))
        return text[:k] + chr((ord(text[k]) + rng.randint(1, 200)) % 0x2FF or 65) + text[k + 1:], f"text: flip {k}"
    if op == "duplicate_key":
        # a second "content_hash" or "results" key: JSON readers disagree on which one counts
        k = text.rindex("}")
        key = rng.choice(("content_hash", "results", "schema_version"))
        val = {"content_hash": '"sha256:0"', "results": "[]", "schema_version": '"1.0"'}[key]
        return text[:k] + f', "{key}": {val}' + text[k:], f"text: duplicate key {key}"
    if op == "nan":
        return text.replace(": 1e-06", ": NaN", 1), "text: NaN"
    if op == "deep":
        return "[" * 5000 + "]" * 5000, "text: deep nesting"
    if op == "bom":
        return "\ufeff" + text, "text: BOM"
    return str(SPECS / "gaussian_release.dps"), "text: a path instead of JSON"


def make_case(seed: int, bases: tuple[str, ...] | None = None) -> Case:
    """A mutated, resealed certificate: deterministic in ``seed``."""
    rng = random.Random(seed)
    certs = base_certificates()
    names = sorted(bases or certs)
    base = rng.choice(names)
    case = Case(base=base, seed=seed)
    doc = json.loads(certs[base])
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        case.mutations.append(rng.choice(DOC_MUTATIONS)(doc, rng))
    reseal(doc)
    try:
        text = json.dumps(doc, ensure_ascii=False, allow_nan=True)
    except ValueError:  # e.g. an integer too large to print
        text = json.dumps({k: v for k, v in doc.items() if k != "results"})
        case.mutations.append("(results dropped: not printable)")
    if rng.random() < 0.12:
        text, m = _text_mutation(text, rng)
        case.mutations.append(m)
    case.text = text
    return case


# --- the oracle ---------------------------------------------------------------------------------------

#: numbers that may be recorded above the compiler's value by rounding (relative 1e-9), never below
_UP_SUFFIXES = (("guarantee", "epsilon"), ("guarantee", "delta"), ("guarantee", "rdp_epsilons"),
                ("guarantee", "dp", "epsilon"), ("guarantee", "dp", "delta"), ("numerics", "abs_error_bound"),
                ("sensitivity", "deltas"), ("sensitivity", "instance_deltas"),
                # the accounting record (min over RDP and PLD): every candidate and curve ε is a bound
                ("accounting", "candidates", "epsilon"), ("accounting", "curve", "epsilon"), ("accounting", "gdp_mu"),
                ("accounting", "pld", "delta_error"))
# the documented policy (README, docs/threat-model.md): noise scales, sensitivities, caps and failure
# probabilities may be rounded up as well
_UP_PARAMETERS = {"sigma", "sigma2", "noise_multiplier", "noise_std", "amp_sigma", "noise_multiplier_first",
                  "gradient_noise_std_first", "gradient_noise_std_max", "gradient_noise_std_min", "mu",
                  "sensitivity", "node_sensitivity", "sensitivity_psi", "delta_bar2", "delta_star2", "h_total",
                  "discrepancy_cap", "failure_probability", "overflow_probability"}
_FREE_TEXT = {("tool", "version"), ("spec", "source_name")}
_DERIVED = {("content_hash",), ("spec", "sha256")}  # recomputed by resealing; the content they hash is compared


def _up_path(path: tuple) -> bool:
    keys = tuple(k for k in path if not isinstance(k, int))
    if len(keys) >= 2 and keys[0] == "results":
        inner = keys[1:]
        if inner in _UP_SUFFIXES:
            return True
        if inner == ("accounting", "pld", "by_direction") and path[-1] == 1:  # (direction, ε) pairs
            return True
        if len(inner) == 3 and inner[:2] == ("mechanism", "parameters") and (
                inner[2] in _UP_PARAMETERS or inner[2].startswith("epsilon_")):
            return True
    return False


def is_legit_variant(original: dict, text: str) -> bool:
    """May ``verify`` accept ``text``? Only if it is the original up to privacy-loss-like numbers rounded
    up by at most a relative 1e-9, and the free-text labels."""
    try:
        seen = []

        def hook(pairs):
            keys = [k for k, _ in pairs]
            if len(keys) != len(set(keys)):
                seen.append("duplicate")
            return dict(pairs)

        doc = json.loads(text, object_pairs_hook=hook)
    except (ValueError, RecursionError):
        return False
    if seen:
        return False
    if isinstance(doc, dict) and isinstance(original, dict) and doc.get("schema_version") != \
            original.get("schema_version") and _older_readable_version(doc.get("schema_version")) and \
            not any(isinstance(r, dict) and r.get("accounting") is not None for r in doc.get("results") or []):
        # what an older dpspec wrote for the same spec (its results hold no field added since)
        doc = {**doc, "schema_version": original.get("schema_version")}
    return _same(original, doc, (), _formula_up_paths(original))


def _older_readable_version(v) -> bool:
    """A schema version this dpspec reads (verify's own test) other than the one it writes."""
    from dpspec.certificate.model import SCHEMA_VERSION
    from dpspec.certificate.verify import _version_problem

    return v != SCHEMA_VERSION and _version_problem(v) is None


def _formula_up_paths(original: dict) -> set[tuple]:
    """(result, formula) index pairs whose recorded values are bounds: formulas checked as upper bounds,
    and the σ² and cap formulas (a noise scale / a loss cap, rounded up like the parameters)."""
    out = set()
    for i, r in enumerate(original.get("results", [])):
        for j, f in enumerate(r.get("formulas", [])):
            if f.get("check") == "upper_bound" or f.get("name") in ("sigma2_thm5_6", "naive_cap"):
                out.add((i, j))
    return out


def _same(a, b, path, formula_up) -> bool:
    if path in _FREE_TEXT or path in _DERIVED:
        return isinstance(b, str)
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(_same(a[k], b[k], path + (k,), formula_up)
                                                                for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y, path + (i,), formula_up)
                                                                for i, (x, y) in enumerate(zip(a, b)))
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return type(a) is type(b) and a == b
    if a == b:
        return True
    up = _up_path(path) or _formula_value_path(path, formula_up)
    return up and isinstance(b, float) and math.isfinite(b) and a <= b <= a + 1e-9 * abs(a)


def _formula_value_path(path: tuple, formula_up: set) -> bool:
    """results[i].formulas[j].value, or the value (not the order) of results[i].formulas[j].checks[k]."""
    if len(path) >= 5 and path[0] == "results" and path[2] == "formulas" and (path[1], path[3]) in formula_up:
        return path[4:] == ("value",) or (path[4] == "checks" and path[-1] == 1)
    return False


# --- running a case -----------------------------------------------------------------------------------


class Hang(BaseException):
    """Raised by the alarm; a BaseException, so that no ``except Exception`` in the code under test hides it."""


@contextmanager
def time_limit(seconds: float):
    """Raise ``Hang`` in the main thread after ``seconds`` (no-op where SIGALRM is unavailable)."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(_sig, _frame):
        raise Hang(f"more than {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    case: Case
    seconds: float
    ok: bool = False
    # 'crash', 'internal_error', 'hang', 'executed_code', 'accepted_code_hook', 'accepted_semantic_edit'
    finding: str | None = None
    detail: str = ""
    reissued: bool = False  # verified: dpspec's own certificate of an edited spec (not a forgery)


def run_case(case: Case, original_text: str | None = None, seconds: float = CASE_SECONDS) -> Outcome:
    import dpspec

    os.environ["DPSPEC_FUZZ_CANARY"] = str(CANARY)
    CANARY.unlink(missing_ok=True)
    t0 = time.perf_counter()
    out = Outcome(case, 0.0)
    try:
        with time_limit(seconds):
            rep = dpspec.verify(case.text, raise_on_error=False)
        out.ok = bool(rep.ok)
        problems = list(rep.problems)
        if any("internal error" in p for p in problems):
            out.finding, out.detail = "internal_error", next(p for p in problems if "internal error" in p)[:300]
    except Hang as e:
        out.finding, out.detail = "hang", str(e)
    except Exception as e:  # verify must never raise
        out.finding, out.detail = "crash", f"{type(e).__name__}: {str(e)[:300]}"
    out.seconds = time.perf_counter() - t0
    if CANARY.exists():
        out.finding, out.detail = "executed_code", CANARY.read_text(errors="replace")[:100]
        CANARY.unlink(missing_ok=True)
    elif out.finding is None and out.ok and case.base == HOOK_BASE:
        out.finding, out.detail = "accepted_code_hook", "verified a certificate whose spec names code hooks"
    elif out.finding is None and out.ok:
        original = json.loads(original_text or base_certificates()[case.base])
        if not is_legit_variant(original, case.text):
            genuine = genuine_certificate_of_its_spec(case.text)
            if genuine is not None and is_legit_variant(genuine, case.text):
                # the edit changed only what the spec says and nothing it certifies (a description, an unused
                # dataset_size, a seed of public data): the document *is* dpspec's certificate of that spec
                out.reissued = True
            else:
                out.finding, out.detail = "accepted_semantic_edit", "; ".join(case.mutations)
    return out


def genuine_certificate_of_its_spec(text: str) -> dict | None:
    """What ``dpspec compile`` writes for the spec embedded in ``text`` (None if it does not compile).
    A verified document must be that certificate, up to bounds rounded up and the free-text labels."""
    import dpspec

    try:
        spec = json.loads(text)["spec"]
        c = dpspec.compile(dpspec.loads(spec["canonical_text"], name=spec["source_name"]))
        return json.loads(c.certificate.to_json())
    except Exception:
        return None


def _ptext(p) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in p)[:120]


def _short(v) -> str:
    if isinstance(v, int) and v.bit_length() > 1000:
        return f"<an integer of {v.bit_length()} bits>"
    s = repr(v)
    return s if len(s) < 40 else s[:37] + "…"


# --- the corpus ---------------------------------------------------------------------------------------


def save_to_corpus(out: Outcome, directory: Path = CORPUS) -> Path:
    """Write a finding as a regression case: the mutated certificate text, and a sidecar describing it."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(out.case.text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    path = directory / f"{out.finding}-{out.case.base}-{digest}.json"
    path.write_text(out.case.text, encoding="utf-8", errors="surrogatepass")
    path.with_suffix(".about").write_text(json.dumps({
        "finding": out.finding, "base": out.case.base, "seed": out.case.seed, "mutations": out.case.mutations,
        "detail": out.detail}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
