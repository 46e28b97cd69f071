"""Hypothesis strategies for spec text: over the grammar, over the language, and mutations.

* :func:`grammar_texts` — texts the grammar (``dpspec/dpspec.lark``) derives, with random layout
  and comments: every one must parse.
* :func:`language_specs` — specs built from the language's own tables (block kinds, settings, call
  signatures of ``dpspec.lower.lowering``) with values that are right, wrong in kind, out of range
  or huge: they exercise lowering, the checker, limits and (for those that check clean) the compiler.
* :func:`token_mutations` / :func:`byte_mutations` — small edits of a text (tokens deleted,
  duplicated, swapped or replaced; bytes flipped, inserted, cut).

Shared by the parser's grammar-oracle test (``tests/frontend``) and the spec fuzzer
(``tests/fuzz/test_spec_fuzz.py``, ``benchmarks/fuzz_specs.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SPECS = sorted((ROOT / "specs").rglob("*.dps"))

# --- the grammar ----------------------------------------------------------------------------------

_ident_tail = st.from_regex(r"[A-Za-z0-9_]{0,5}(-[A-Za-z0-9_]{1,3})?", fullmatch=True)
idents = st.one_of(
    st.sampled_from(["unit", "record", "dp", "epsilon", "delta", "release", "privacy", "in", "use", "x", "a-b"]),
    st.builds(lambda h, t: h + t, st.sampled_from(list("abcxyzAB_")), _ident_tail),
)
plain_idents = idents.filter(lambda s: s not in ("in", "use"))
numbers = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.from_regex(r"[+-]?(\d{1,4}(\.\d{0,3})?|\.\d{1,3})([eE][+-]?\d{1,3})?%?", fullmatch=True),
    st.sampled_from(["0", "1", "1e-6", "5%", "-2.5E+3", ".5", "9007199254740993", "1e309", "1e-400"]),
)
strings = st.text(st.sampled_from(list('abc /.:"\\\'nt{}[]#é')), max_size=10).map(
    lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')


def _join(parts: list[str], seps: list[str]) -> str:
    out = [parts[0]]
    for p, s in zip(parts[1:], seps):
        out.append(s + p)
    return "".join(out)


layout = st.sampled_from([" ", " ", "  ", "\n", "\n  ", "\t", " # note\n", "\r\n"])


@st.composite
def _seq(draw, parts: list[str]) -> str:
    return _join(parts, [draw(layout) for _ in parts[1:]])


def _primary(depth: int):
    leaf = st.one_of(plain_idents, numbers, strings)
    if depth <= 0:
        return leaf
    sub = _primary(depth - 1)
    items = st.lists(sub, max_size=3)

    def bracketed(o, c):
        return st.builds(lambda xs, trail: o + ", ".join(xs) + ("," if trail and xs else "") + c, items, st.booleans())

    kwarg = st.builds(lambda k, v: f"{k} = {v}", idents, sub)
    call = st.builds(lambda n, args, trail: f"{n}(" + ", ".join(args) + ("," if trail and args else "") + ")",
                     plain_idents, st.lists(st.one_of(sub, kwarg), max_size=3), st.booleans())
    tup = st.builds(lambda a, rest: "(" + a + ", " + ", ".join(rest) + ")", sub, st.lists(sub, max_size=2))
    named = st.builds(lambda n, es: n + " { " + " ".join(es) + " }", plain_idents,
                      st.lists(st.builds(lambda k, v: f"{k} {v}", idents, leaf), max_size=2))
    return st.one_of(leaf, bracketed("{", "}"), bracketed("[", "]"), call, tup, named)


_entry = st.one_of(
    st.builds(lambda k, v, m: f"{k} {v}" + (f" in {m}" if m else ""), idents, _primary(2),
              st.one_of(st.none(), _primary(1))),
    # a setting whose value is `name [items]` (`split weights [1, 2]`)
    st.builds(lambda k, n, xs: f"{k} {n} [" + ", ".join(xs) + "]", idents, plain_idents,
              st.lists(_primary(1), max_size=3)))
_block = st.builds(lambda k, n, es: f"{k} {n} {{ " + "  ".join(es) + " }", plain_idents, idents,
                   st.lists(_entry, max_size=4))
_use = st.builds(lambda s: f"use {s}", strings)


@st.composite
def grammar_texts(draw) -> str:
    """A text the grammar derives (with random layout): it must parse."""
    items = draw(st.lists(st.one_of(_block, _block, _use), max_size=4))
    text = draw(_seq(items)) if items else ""
    # random layout inside items: spaces may become newlines or comments (a token is never split)
    out = []
    for part in re.split(r'("(?:[^"\\\n]|\\.)*")', text):  # strings keep their spaces
        if part.startswith('"'):
            out.append(part)
            continue
        for p in re.split(r"( +)", part):
            out.append(draw(st.sampled_from([p, "\n", " # c\n", "\t"])) if p and not p.strip() else p)
    return "".join(out) + draw(st.sampled_from(["", "\n", "# end"]))


# --- mutations -------------------------------------------------------------------------------------

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[A-Za-z_][\w\-]*|[+-]?[\d.]+(?:[eE][+-]?\d+)?%?|\S')
_REPLACEMENTS = ["{", "}", "[", "]", "(", ")", ",", "=", "in", "use", '"', "#", "\\", '"a\\\\"', "-", "%",
                 "1e999", "nan", "inf", "-1", "0", "1e15", "1e9", "2.5", "9007199254740993",
                 "x" * 70, "9" * 70, "[" * 40, "(" * 40, "\x00", "\u00e9", "\n", "dp(", "sphere(m = 1000000)"]


@st.composite
def token_mutations(draw, text: str) -> str:
    toks = [m.group() for m in _TOKEN.finditer(text)]
    if not toks:
        return draw(st.sampled_from(_REPLACEMENTS))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(toks) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert"]))
        if op == "delete" and len(toks) > 1:
            del toks[i]
        elif op == "duplicate":
            toks.insert(i, toks[i])
        elif op == "swap":
            j = draw(st.integers(0, len(toks) - 1))
            toks[i], toks[j] = toks[j], toks[i]
        elif op == "replace":
            toks[i] = draw(st.sampled_from(_REPLACEMENTS))
        else:
            toks.insert(i, draw(st.sampled_from(_REPLACEMENTS)))
    return " ".join(toks)


@st.composite
def byte_mutations(draw, text: str) -> str:
    data = bytearray(text.encode("utf-8"))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, max(0, len(data) - 1)))
        op = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "duplicate", "swap"]))
        j = draw(st.integers(i, min(len(data), i + 24)))
        if op == "flip" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[i:j]
        elif op == "insert":
            data[i:i] = draw(st.binary(max_size=8))
        elif op == "truncate":
            del data[i:]
        elif op == "duplicate":
            data[j:j] = data[i:j]
        else:
            data[i:] = data[j:] + data[i:j]
    return data.decode("utf-8", errors="replace")


_EXAMPLES: list[str] = []


def example_texts() -> list[str]:
    """The example specs as texts that stand alone: a spec with `use` lines is flattened (its
    canonical text), since a fuzz case is one text."""
    if not _EXAMPLES:
        import dpspec

        for p in EXAMPLE_SPECS:
            text = p.read_text(encoding="utf-8")
            if re.search(r"^\s*use\s", text, re.M):
                spec = dpspec.load(p)
                text = spec.canonical_text() if spec.ok else text
            _EXAMPLES.append(text)
    return _EXAMPLES


def examples():
    """One of the example specs (drawn by index: a strategy over the texts themselves has a huge repr)."""
    texts = example_texts()
    return st.integers(0, len(texts) - 1).map(texts.__getitem__)


@st.composite
def mutated_examples(draw) -> str:
    text = draw(examples())
    return draw(st.one_of(token_mutations(text), byte_mutations(text)))


# --- the language: specs built from the lowering tables -------------------------------------------

def _interesting_numbers():
    from tests.fuzz.specfuzz import FUZZ_LIMITS

    edges = sorted({v for v in FUZZ_LIMITS.values()} | {v - 1 for v in FUZZ_LIMITS.values()} |
                   {v + 1 for v in FUZZ_LIMITS.values()})
    return edges


_INTS = ["0", "1", "2", "3", "4", "5", "8", "10", "20", "64", "100", "256", "1000", "5000", "60000", "-1", "-5",
         "1000000", "1000000000", "1e15", "9007199254740992", "2.5", "1e300"]
_FLOATS = ["0", "1", "0.5", "1.0", "2", "8", "0.01", "1e-6", "1e-5", "0.1", "5%", "-1", "-0.5", "1e-300", "5e-324",
           "1e308", "1e-30", "0.999999", "1.0000001", "100", "1e6", "1e15", "3.3", "2.5e-3"]


@st.composite
def _num(draw, integer: bool = False) -> str:
    pool = _INTS if integer else _FLOATS
    return draw(st.one_of(st.sampled_from(pool), st.sampled_from(_interesting_numbers()).map(str),
                          st.integers(-3, 300).map(str) if integer else
                          st.floats(-10, 1e4, allow_nan=False).map(lambda x: repr(round(x, 4)))))


_NAMES = ["A", "B", "C", "x1", "x2", "x3", "g", "label", "group", "race", "sex", "G3", "age", "yes", "no",
          "White", "Black", "inf", "nan", "true", "false", "cora", "citeseer", "t", "train_rows"]
_CHOICES = {"threshold": ["static", "standard"], "bound": ["corrected", "paper"], "reading": ["finite", "monte_carlo"],
            "relation": ["add_remove", "substitution"], "prior": ["empirical", "uniform"],
            "missing_text": ["error", "empty"], "backend": ["gloo", "nccl"],
            "generator": ["secret_groups", "two_blobs", "sbm_graph", "gaussian_blobs"]}


@st.composite
def _value_for_param(draw, p, depth: int) -> str:
    from dpspec.lower import values as V

    c = p.convert
    if p.name in _CHOICES:
        return draw(st.sampled_from(_CHOICES[p.name] + ["bogus"]))
    if c is V.number:
        return draw(_num())
    if c is V.integer:
        return draw(_num(integer=True))
    if c is V.string:
        return draw(st.sampled_from(['"fuzz/table.csv"', '"adult/adult.data"', '"x"', '"dpspec.pufferfish.examples:'
                                     'column_means"', '"nope:nope"', '""', '"/etc/passwd"', '"../x.csv"']))
    if c is V.bounds:
        lo, hi = draw(_num()), draw(_num())
        return draw(st.sampled_from([f"[{lo}, {hi}]", "[0, 10]", "[0, 1]", f"[[{lo}, {hi}], [0, 10]]", "[1, 0]"]))
    if c is V.numbers:
        return "[" + ", ".join(draw(st.lists(_num(), min_size=0, max_size=4))) + "]"
    if c is V.vectors:
        return draw(st.sampled_from(["[[1, 0], [0, 1]]", "[[1, 0, 0], [0, 1, 1]]", "[[0, 0]]", "[]", "[[1]]"]))
    if c in (V.label, V.labels):
        return draw(st.sampled_from(_NAMES))
    if c is V.boolean:
        return draw(st.sampled_from(["true", "false", "1"]))
    # a converter without a type of its own (a name with choices, a depth, ...)
    return draw(st.one_of(st.sampled_from(_NAMES), _num(integer=True), st.just("[2, inf]")))


@st.composite
def _call(draw, table: dict, depth: int = 0) -> str:
    name = draw(st.sampled_from(sorted(table) + ["bogus_call"]))
    sig = table.get(name)
    if sig is None:
        return name + "()"
    args = []
    for p in sig.params:
        if p.required or draw(st.integers(0, 2)) == 0:
            args.append(f"{p.name} = {draw(_value_for_param(p, depth))}")
    if sig.variadic is not None:
        args = [draw(st.sampled_from(_NAMES[:6])) for _ in range(draw(st.integers(0, 3)))] + args
    if not args and draw(st.booleans()):
        return name
    return f"{name}({', '.join(args)})"


def _setting_values():
    from dpspec.lower import lowering as LW

    calls = {"unit": LW.UNITS, "data": LW.DATA, "guarantee": LW.GUARANTEES, "clipping": LW.CLIPPINGS,
             "noise": LW.NOISES, "query": LW.QUERIES, "slices": LW.SLICES, "propagation": LW.PROPAGATIONS,
             "loss": LW.LOSSES, "encoder": LW.ENCODERS, "split": LW.SPLITS, "execution": LW.EXECUTIONS,
             "discrepancy": LW.DISCREPANCIES, "lr_schedule": LW.LR_SCHEDULES}
    out = {k: _call(v) for k, v in calls.items()}
    out["sampling"] = st.one_of(_call(LW.SAMPLINGS), st.builds(
        lambda pos, neg: f"coupled {{ positive {pos} negative {neg} }}", _call(LW.SAMPLINGS), _call(LW.NEGATIVES)))
    out["prior"] = st.one_of(_call(LW.WORLDS), st.lists(_call(LW.WORLDS), min_size=1, max_size=3).map(
        lambda xs: "[" + ", ".join(xs) + "]"))
    out["secret"] = st.sampled_from(["g in {A, B, C}", "g in {A, B}", "g in {A}", "x1 in {1, 2}", "group in {A, B, C}",
                                     "quantile_bins(x1, bins = 4)", "quantile_bins(x1, bins = 1)", "g", "label",
                                     "race in {White, Black}", "sex", "g in {A, A}", "quantile_bins(x1, bins = 2000)"])
    out["pairs"] = st.sampled_from(["all_distinct", "[(A, B)]", "[(A, A)]", "[(A, Z)]", "[(A, B), (B, C)]", "x"])
    out["mechanism"] = st.sampled_from(list(LW.MECHANISM_NAMES) + ["bogus"])
    out["graph"] = st.sampled_from(["cora", "citeseer", "bogus", "t"])
    for k in ("dataset_size", "steps", "degree_cap"):
        out[k] = _num(integer=True)
    for k in ("epochs", "learning_rate", "momentum", "noise_multiplier", "regularization", "sensitivity"):
        out[k] = _num()
    out["pseudo_labels"] = st.sampled_from(["true", "false"])
    out["inference"] = st.sampled_from(["private_graph", "public_graph", "x"])
    out["noise_units"] = st.sampled_from(["gradient", "parameter"])
    out["accountant"] = st.sampled_from(["huc", "sa_huc", "amplified"])
    out["relation"] = st.sampled_from(["add_remove", "substitution"])
    out["model"] = st.sampled_from(["mlp", "linear"])
    out["description"] = st.just('"fuzz"')
    return out


@st.composite
def language_specs(draw) -> str:
    """A spec from the language's own tables: blocks with plausible settings, values right, wrong,
    out of range, at a limit or far beyond it."""
    from dpspec.lower.lowering import BLOCK_SETTINGS

    values = _setting_values()
    defs, targets, blocks = [], [], []
    for i in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["privacy", "scenario"]))
        name = f"d{i}"
        defs.append(name)
        blocks.append((kind, name))
    for i in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["release", "train", "train", "compose"]))
        name = f"t{i}"
        if kind != "compose":
            targets.append(name)
        blocks.append((kind, name))
    out = []
    for kind, name in blocks:
        settings = BLOCK_SETTINGS[kind]
        lines = []
        for s in settings:
            if s.key == "description":
                continue
            if not (s.required or draw(st.integers(0, 3)) == 0):
                continue
            if s.key == "protect":
                v = draw(st.sampled_from(defs + ["missing"]))
            elif s.key == "parts":
                v = "[" + ", ".join(draw(st.lists(st.sampled_from(targets + ["nope"]), min_size=1, max_size=3))) + "]"
            elif s.key in values:
                v = draw(values[s.key])
            else:
                v = draw(_num())
            lines.append(f"  {s.key} {v}")
        out.append(f"{kind} {name} {{\n" + "\n".join(lines) + "\n}")
    return "\n".join(out) + "\n"


# --- semantic mutations of a valid spec: one value at a time ---------------------------------------

_NUMBER = re.compile(r"(?<![\w.\-])[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?(?![\w.])")


@st.composite
def value_mutations(draw, text: str) -> str:
    """Replace numbers (and sometimes names) of a spec by interesting values: boundaries, limits,
    huge and tiny numbers. The spec stays well formed, so the case reaches the compiler."""
    nums = list(_NUMBER.finditer(text))
    for _ in range(draw(st.integers(1, 3))):
        if not nums:
            break
        m = draw(st.sampled_from(nums))
        new = draw(st.one_of(_num(integer=True), _num()))
        text = text[:m.start()] + new + text[m.end():]
        nums = list(_NUMBER.finditer(text))
    if draw(st.integers(0, 3)) == 0:
        words = sorted(set(re.findall(r"\b[a-z_]{3,}\b", text)))
        if words:
            w = draw(st.sampled_from(words))
            repl = draw(st.sampled_from(_NAMES + ["substitution", "add_remove", "poisson", "full_batch", "axes",
                                                  "monte_carlo", "group", "node", "edge", "record"]))
            text = re.sub(rf"\b{re.escape(w)}\b", repl, text, count=1)
    return text


# --- data: mutated data files under the fuzz data root, and mutated bound data ---------------------

TABLE_SPEC = ('scenario s {{\n  data   csv("fuzz/table.csv"{extra})\n  secret {secret}\n}}\n'
              "release r {{\n  protect s\n  mechanism swm\n  query {query}\n  slices {slices}\n"
              "  guarantee ave_srpp(alpha = 4, epsilon = 1)\n}}\n")

# which example spec reads which file of the fuzz data root
_READERS = {"adult/adult.data": "adult_race_swm.dps", "heart_cleveland/processed.cleveland.data": "heart_sex_swm.dps",
            "student/student-mat.csv": "student_grade_swm.dps", "cora/cora.content": "cora_gcon.dps",
            "cora/cora.cites": "cora_gcon.dps", "adult/adult.test": "adult_srpp.dps"}


@st.composite
def _line_mutations(draw, data: bytes) -> bytes:
    """Edits a data file's lines the way real files go wrong: a line dropped, repeated or cut, a
    field replaced by a missing, negative, huge, non-numeric or non-finite value, a separator lost."""
    lines = data.decode("utf-8", errors="replace").split("\n")
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "repeat", "cut", "field", "field", "empty", "sep", "header"]))
        if op == "drop":
            del lines[i]
        elif op == "repeat":
            lines[i:i] = [lines[i]] * draw(st.integers(1, 50))
        elif op == "cut":
            lines[i] = lines[i][:draw(st.integers(0, max(0, len(lines[i]) - 1)))]
        elif op in ("field", "header"):
            j = 0 if op == "header" else i
            for sep in ("\t", ";", ","):
                if sep in lines[j]:
                    parts = lines[j].split(sep)
                    k = draw(st.integers(0, len(parts) - 1))
                    parts[k] = draw(st.sampled_from(["?", "", "-1", "1e308", "nan", "inf", "x", '"', "1e999", "-0",
                                                     "999999999999", "A", "é", "  ", "0.5", parts[k] * 3]))
                    lines[j] = sep.join(parts)
                    break
        elif op == "empty":
            lines = [] if draw(st.booleans()) else lines[:1]
        else:
            lines[i] = lines[i].replace(",", " ").replace("\t", " ")
    return "\n".join(lines).encode("utf-8")


@st.composite
def data_cases(draw, data_files: dict[str, bytes]):
    from tests.fuzz.specfuzz import Case

    names = [p.name for p in EXAMPLE_SPECS]
    rel = draw(st.sampled_from(sorted(_READERS) + ["fuzz/table.csv"] * 3))
    base = data_files[rel]
    mutated = draw(st.one_of(_line_mutations(base), byte_mutations(base.decode("utf-8", errors="replace")).map(
        lambda s: s.encode("utf-8", errors="surrogateescape"))))
    if rel == "fuzz/table.csv":
        spec = TABLE_SPEC.format(
            extra=draw(st.sampled_from(["", ', separator = ","', ', separator = ";"', ', separator = ""',
                                        ', separator = "\\n"', ", schema = adult"])),
            secret=draw(st.sampled_from(["g in {A, B, C}", "g", "label", "quantile_bins(x1, bins = 3)", "x1 in {1}"])),
            query=draw(st.sampled_from(["mean(x1, x2, bounds = [0, 10])", "sum(x1, bounds = [0, 10])", "count()",
                                        "histogram(label)", "histogram(x1, bins = 4)",
                                        "logistic_regression(x1, x2, bounds = [0, 10], label = label, positive = yes)",
                                        "mean(nope, bounds = [0, 1])"])),
            slices=draw(st.sampled_from(["axes", "sphere(m = 8, seed = 1)", "directions(vectors = [[1, 0], [0, 1]])"])))
    else:
        spec = example_texts()[names.index(_READERS[rel])]
    return Case(spec, {rel: mutated}, note="data")


_BOUND_TABLE_SPEC = ("scenario s {{ data dataset(t)  secret g in {{A, B}} }}\n"
                     "release r {{ protect s  mechanism swm  query {query}  slices axes  "
                     "guarantee ave_srpp(alpha = 4, epsilon = 1) }}\n")
_BOUND_GRAPH_SPECS = [
    "privacy p { unit node  graph g }\ntrain t { protect p  mechanism relational_dpsgd  sampling coupled { positive "
    "poisson(expected_batch = 4)  negative without_replacement(per_positive = 1) }  degree_cap 2  "
    "clipping per_tuple(C = 1.0)  loss infonce  encoder mlp(hidden = 8, out = 4)  split node_disjoint(test = 0.2, "
    "seed = 0)  steps 5  learning_rate 0.01  guarantee dp(epsilon = 8, delta = 1e-4) }\n",
    "privacy p { unit edge  graph g }\ntrain t { protect p  mechanism gcon  propagation appr(restart = 0.6, steps = [2]) "
    " loss msml  regularization 0.2  encoder mlp(hidden = 8, epochs = 5, seed = 0)  split planetoid(per_class = 2, "
    "seed = 0)  guarantee dp(epsilon = 1, delta = 1e-4) }\n",
]
_ODD = [None, -1, 0, 1e308, float("nan"), float("inf"), "x", [], [[]], {}, [1, "a"], [[1, 2, 3]], True, 2**70]


@st.composite
def _column(draw, n: int):
    kind = draw(st.sampled_from(["floats", "labels", "odd", "short", "nested"]))
    if kind == "floats":
        return [draw(st.floats(-5, 15, allow_nan=False)) for _ in range(n)]
    if kind == "labels":
        return [draw(st.sampled_from(["A", "B", "C"])) for _ in range(n)]
    if kind == "short":
        return [1.0] * max(0, n - draw(st.integers(1, 3)))
    if kind == "nested":
        return [[1.0, 2.0]] * n
    return draw(st.sampled_from(_ODD))


@st.composite
def bound_cases(draw):
    """A spec naming `dataset(t)` or `graph g`, compiled with mutated data passed to dpspec.compile."""
    from tests.fuzz.specfuzz import Case

    if draw(st.booleans()):
        n = draw(st.integers(0, 40))
        table = {"g": ["A", "B"] * (n // 2) if draw(st.integers(0, 3)) else draw(_column(n)),
                 "x1": draw(_column(n)), "x2": draw(_column(n))}
        if draw(st.integers(0, 4)) == 0:
            del table[draw(st.sampled_from(sorted(table)))]
        bound = {"t": table if draw(st.integers(0, 5)) else draw(st.sampled_from(_ODD + [[table]]))}
        query = draw(st.sampled_from(["mean(x1, x2, bounds = [0, 10])", "sum(x1, bounds = [0, 10])",
                                      "histogram(g)", "mean(x3, bounds = [0, 1])"]))
        return Case(_BOUND_TABLE_SPEC.format(query=query), bound=bound, note="bound")
    n = draw(st.integers(0, 30))
    m = draw(st.integers(0, 60))
    edges = [[draw(st.integers(-2, n + 2)), draw(st.integers(-2, n + 2))] for _ in range(m)]
    graph = {"edges": edges if draw(st.integers(0, 4)) else draw(st.sampled_from(_ODD)),
             "features": [[draw(st.floats(-1, 1, allow_nan=False)) for _ in range(3)] for _ in range(n)],
             "labels": [i % 3 for i in range(n)]}
    for k in ("num_nodes", "texts"):
        if draw(st.integers(0, 3)) == 0:
            graph[k] = draw(st.sampled_from(_ODD + [n, n + 5, ["t"] * n]))
    if draw(st.integers(0, 4)) == 0:
        del graph[draw(st.sampled_from(sorted(graph)))]
    bound = {"g": graph if draw(st.integers(0, 5)) else draw(st.sampled_from(_ODD + [[graph]]))}
    return Case(draw(st.sampled_from(_BOUND_GRAPH_SPECS)), bound=bound, note="bound")
