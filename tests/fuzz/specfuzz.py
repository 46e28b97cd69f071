"""The spec fuzzer's engine: run one case (a spec, data files, bound data) through check, compile
and explain, and classify what happened.

A case must end in one of: a certificate, or diagnostics (every error with a rule id, a location
or a reason, and a hint). Anything else is a *finding*:

* ``crash``    — an exception reached the caller (a traceback for a user);
* ``fallback`` — the compiler's last line of defence (DPS011) caught an exception: no traceback,
  but a gap in the checks;
* ``hint``     — an error diagnostic without a hint;
* ``timeout``  — the case ran longer than its time bound (a hang, or work not bounded by a limit);
* ``memory``   — a MemoryError (under ``resource.setrlimit`` in the long run).

Cases run against a small *fuzz data root*, generated here (never the real data): the datasets
the example specs name (adult, heart, student, cora, citeseer) in their real formats, with a few
dozen synthetic rows, plus ``fuzz/table.csv``. A case may replace any of its files (mutated
bytes). The limits are lowered while fuzzing (:data:`FUZZ_LIMITS`), so that a case that respects
them must finish quickly: a slow case means some work is not bounded by a limit.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import random
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus" / "specs"

# Limits while fuzzing: small enough that any spec within them compiles in a few seconds.
FUZZ_LIMITS = {
    "records": 100_000, "nodes": 5_000, "columns": 2_000, "slices": 2_000, "steps": 200_000, "epochs": 1_000,
    "batch": 20_000, "orders": 2_000, "degree_cap": 100, "draws": 20_000, "hidden": 2_000, "workers": 64,
    "group_size": 100, "work": 200_000_000, "data_file_bytes": 2_000_000, "memory_mb": 1_500,
}


@dataclass
class Case:
    """One fuzz input. ``files`` override files of the fuzz data root (relative path → bytes);
    ``bound`` is passed as ``dpspec.compile(spec, data=bound)``."""

    spec: str
    files: dict[str, bytes] = field(default_factory=dict)
    bound: dict | None = None
    note: str = ""

    def to_json(self) -> str:
        return json.dumps({"spec": self.spec, "note": self.note,
                           "files": {k: base64.b64encode(v).decode() for k, v in self.files.items()},
                           "bound": _jsonable(self.bound)}, indent=1, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "Case":
        d = json.loads(text)
        return Case(d["spec"], {k: base64.b64decode(v) for k, v in d.get("files", {}).items()},
                    d.get("bound"), d.get("note", ""))

    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]


def _jsonable(x):
    import numpy as np

    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, float) and x != x:
        return "nan"
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return repr(x)


@dataclass
class Outcome:
    kind: str  # "certificate", "invalid", or a finding: crash, fallback, hint, timeout, memory
    detail: str = ""
    seconds: float = 0.0
    rules: tuple[str, ...] = ()

    @property
    def is_finding(self) -> bool:
        return self.kind not in ("certificate", "invalid")


# --- the fuzz data root -------------------------------------------------------------------------------

_ADULT_CATS = {
    "workclass": ["Private", "State-gov", "Self-emp-not-inc", "?"], "education": ["Bachelors", "HS-grad", "11th"],
    "marital-status": ["Never-married", "Married-civ-spouse"], "occupation": ["Adm-clerical", "Exec-managerial"],
    "relationship": ["Husband", "Own-child", "Not-in-family"],
    "race": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"], "sex": ["Male", "Female"],
    "native-country": ["United-States", "Cuba"], "income": ["<=50K", ">50K"],
}
_STUDENT_HEADER = ("school;sex;age;address;famsize;Pstatus;Medu;Fedu;Mjob;Fjob;reason;guardian;traveltime;"
                   "studytime;failures;schoolsup;famsup;paid;activities;nursery;higher;internet;romantic;famrel;"
                   "freetime;goout;Dalc;Walc;health;absences;G1;G2;G3")


def base_files(seed: int = 0) -> dict[str, bytes]:
    """The fuzz data root's files, generated from a seed (a few dozen rows each)."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {}

    def adult_row(test: bool) -> str:
        c = {k: rng.choice(v) for k, v in _ADULT_CATS.items()}
        inc = c["income"] + ("." if test else "")
        return (f"{rng.randint(17, 90)}, {c['workclass']}, {rng.randint(20000, 400000)}, {c['education']}, "
                f"{rng.randint(1, 16)}, {c['marital-status']}, {c['occupation']}, {c['relationship']}, {c['race']}, "
                f"{c['sex']}, {rng.choice([0, 2174, 0])}, 0, {rng.randint(1, 99)}, {c['native-country']}, {inc}")

    # every race appears (the example spec lists five values)
    races = _ADULT_CATS["race"]
    rows = [adult_row(False) for _ in range(60)]
    rows = [r.replace(", White, ", f", {races[i % 5]}, ") if i < 10 else r for i, r in enumerate(rows)]
    files["adult/adult.data"] = ("\n".join(rows) + "\n\n").encode()
    files["adult/adult.test"] = ("|1x3 Cross validator\n" + "\n".join(adult_row(True) for _ in range(30)) + "\n").encode()
    heart = []
    for i in range(50):
        vals = [rng.randint(29, 77), i % 2, rng.randint(1, 4), rng.randint(94, 200), rng.randint(126, 564),
                rng.randint(0, 1), rng.randint(0, 2), rng.randint(71, 202), rng.randint(0, 1),
                round(rng.uniform(0, 6), 1), rng.randint(1, 3), rng.randint(0, 3), rng.choice([3, 6, 7]),
                rng.randint(0, 4)]
        heart.append(",".join(f"{float(v)}" if j < 13 else str(v) for j, v in enumerate(vals)))
    files["heart_cleveland/processed.cleveland.data"] = ("\n".join(heart) + "\n").encode()
    for subject in ("mat", "por"):
        lines = [_STUDENT_HEADER]
        for i in range(60):
            g = [rng.randint(0, 20) for _ in range(3)]
            lines.append(
                f'"GP";"{"F" if i % 2 else "M"}";{rng.randint(15, 22)};"U";"GT3";"A";{rng.randint(0, 4)};'
                f'{rng.randint(0, 4)};"at_home";"teacher";"course";"mother";{rng.randint(1, 4)};{rng.randint(1, 4)};'
                f'{rng.randint(0, 3)};"yes";"no";"no";"no";"yes";"yes";"no";"no";{rng.randint(1, 5)};'
                f'{rng.randint(1, 5)};{rng.randint(1, 5)};{rng.randint(1, 5)};{rng.randint(1, 5)};{rng.randint(1, 5)};'
                f'{rng.randint(0, 30)};"{g[0]}";"{g[1]}";{g[2]}')
        files[f"student/student-{subject}.csv"] = ("\n".join(lines) + "\n").encode()
    labels = ["Case_Based", "Neural_Networks", "Theory", "Rule_Learning"]
    content, cites = [], []
    for i in range(1000):
        feats = "\t".join(str(int(rng.random() < 0.2)) for _ in range(16))
        content.append(f"{1000 + i}\t{feats}\t{labels[i % 4]}")
    for _ in range(3000):
        a, b = rng.randrange(1000), rng.randrange(1000)
        cites.append(f"{1000 + a}\t{1000 + b}")
    files["cora/cora.content"] = ("\n".join(content) + "\n").encode()
    files["cora/cora.cites"] = ("\n".join(cites) + "\n").encode()
    texts, ccites = [], []
    for i in range(600):
        texts += [f"paper{i}", " ".join(rng.choice(["graph", "privacy", "learning", "agents", "data"])
                                        for _ in range(8)), labels[i % 4]]
    for _ in range(1800):
        ccites.append(f"paper{rng.randrange(620)}\tpaper{rng.randrange(600)}")
    files["tag_citeseer/citeseer_texts.txt"] = ("\n".join(texts) + "\n").encode()
    files["tag_citeseer/citeseer.cites"] = ("\n".join(ccites) + "\n").encode()
    table = ["g,x1,x2,label"] + [f"{rng.choice('ABC')},{rng.uniform(0, 10):.3f},{rng.uniform(0, 10):.3f},"
                                 f"{rng.choice(['yes', 'no'])}" for _ in range(80)]
    files["fuzz/table.csv"] = ("\n".join(table) + "\n").encode()
    return files


@contextlib.contextmanager
def fuzz_environment(files: dict[str, bytes] | None = None, limits: dict | None = None):
    """A temporary data root holding the base files (and a case's replacements), and the lowered
    limits, for the duration of the block."""
    saved = {k: os.environ.get(k) for k in ["DPSPEC_DATA_DIR"] + [f"DPSPEC_MAX_{k.upper()}" for k in FUZZ_LIMITS]}
    with tempfile.TemporaryDirectory(prefix="dpspec-fuzz-") as d:
        root = Path(d) / "data"
        for rel, data in {**base_files(), **(files or {})}.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        os.environ["DPSPEC_DATA_DIR"] = str(root)
        for k, v in (FUZZ_LIMITS if limits is None else limits).items():
            os.environ[f"DPSPEC_MAX_{k.upper()}"] = str(v)
        try:
            yield root
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class _Timeout(BaseException):
    """Raised by the alarm: a BaseException, so that no `except Exception` in dpspec swallows it."""


@contextlib.contextmanager
def _alarm(seconds: float | None):
    if not seconds or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(*_):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_case(case: Case, *, compile: bool = True, time_limit: float | None = 20.0, limits: dict | None = None,
             data_root_ready: bool = False) -> Outcome:
    """Run ``case`` through check (and compile and explain when it checks clean)."""
    import dpspec
    from dpspec.diagnostics import render_all

    t0 = time.perf_counter()
    stage = "check"
    try:
        env = contextlib.nullcontext() if data_root_ready else fuzz_environment(case.files, limits)
        with env, _alarm(time_limit):
            spec = dpspec.loads(case.spec, name="fuzz.dps")
            render_all(spec.diagnostics, spec.sources)
            diags = list(spec.diagnostics)
            cert = None
            if spec.ok and compile:
                stage = "compile"
                try:
                    cert = dpspec.compile(spec, data=case.bound).certificate
                except dpspec.SpecError as e:
                    diags = list(e.diagnostics)
                    render_all(diags, e.sources)
                if cert is not None:
                    stage = "explain"
                    from dpspec.certificate.explain import explain

                    explain(cert)
    except _Timeout:
        return Outcome("timeout", f"{stage} ran past {time_limit} s", time.perf_counter() - t0)
    except MemoryError:
        return Outcome("memory", f"MemoryError in {stage}", time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 — this is what the fuzzer looks for
        tb = traceback.format_exc(limit=-6)
        return Outcome("crash", f"{stage}: {type(e).__name__}: {e}\n{tb}", time.perf_counter() - t0)
    dt = time.perf_counter() - t0
    rules = tuple(sorted({d.rule for d in diags if d.is_error}))
    for d in diags:
        if d.is_error and not (d.hint and d.hint.strip()):
            return Outcome("hint", f"{d.rule} without a hint: {d.message}", dt, rules)
        if not d.rule.startswith("DPS"):
            return Outcome("crash", f"a diagnostic without a rule id: {d}", dt, rules)
    if "DPS011" in rules:
        d = next(d for d in diags if d.rule == "DPS011")
        return Outcome("fallback", d.message, dt, rules)
    if cert is not None:
        return Outcome("certificate", "", dt, rules)
    if spec.ok and compile and not rules:
        return Outcome("crash", "compile failed without an error diagnostic", dt, rules)
    return Outcome("invalid", "", dt, rules)


def save_finding(case: Case, outcome: Outcome, folder: Path = CORPUS) -> Path:
    """Write a finding to the corpus: a .dps file for a spec-only case, a .json file otherwise."""
    folder.mkdir(parents=True, exist_ok=True)
    head = f"# fuzz finding ({outcome.kind}): {outcome.detail.splitlines()[0][:150] if outcome.detail else ''}"
    head = head.encode("ascii", "backslashreplace").decode()
    if not case.files and case.bound is None:
        p = folder / f"{outcome.kind}-{case.digest()}.dps"
        p.write_text(head + "\n" + case.spec, encoding="utf-8", errors="surrogatepass")
    else:
        case.note = head
        p = folder / f"{outcome.kind}-{case.digest()}.json"
        p.write_text(case.to_json(), encoding="utf-8")
    return p


def corpus_cases(folder: Path = CORPUS) -> list[tuple[str, Case]]:
    out = []
    for p in sorted(folder.glob("*")):
        if p.suffix == ".dps":
            out.append((p.name, Case(p.read_text(encoding="utf-8", errors="surrogatepass"))))
        elif p.suffix == ".json":
            out.append((p.name, Case.from_json(p.read_text(encoding="utf-8"))))
    return out
