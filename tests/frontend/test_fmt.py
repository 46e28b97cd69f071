"""The formatter (`dpspec fmt`) loses nothing: comments, blank-line groups and meaning survive it.

Properties, over every spec in specs/ (and specs/shared/) and over random specs built from the
language's own settings with comments and blank lines inserted at random token boundaries:
- fmt(fmt(x)) == fmt(x)
- the comments of x appear in fmt(x), in the same order
- x and fmt(x) parse to the same tree and lower to the same IR (source spans aside) with the same
  diagnostics.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.parse import ast, parse_text
from dpspec.parse.fmt import FormatError, _string, comments, fmt, format_source, number
from dpspec.parse.parser import _lark
from tests.conftest import SPECS

EXAMPLE_SPECS = sorted(SPECS.rglob("*.dps"))


def ir_of(text: str, base_dir=SPECS):
    """The IR without source spans, and the diagnostics without locations."""
    spec = dpspec.loads(text, name="spec.dps", base_dir=base_dir)
    ir = _strip_spans(spec.ir.model_dump(mode="json")) if spec.ir is not None else None
    return ir, [(d.rule, d.message) for d in spec.diagnostics]


def _strip_spans(x):
    if isinstance(x, dict):
        return {k: _strip_spans(v) for k, v in x.items() if k not in ("span", "field_spans")}
    if isinstance(x, list):
        return [_strip_spans(v) for v in x]
    return x


def assert_lossless(text: str, base_dir=SPECS) -> str:
    tree, diags = parse_text(text, "spec.dps")
    assert tree is not None, diags
    out = format_source(text, "spec.dps")
    assert format_source(out, "spec.dps") == out, "fmt is not idempotent"
    assert comments(out) == comments(text)
    again, _ = parse_text(out, "spec.dps")
    assert again == tree
    assert ir_of(out, base_dir) == ir_of(text, base_dir)
    return out


# --- the example specs ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: str(p.relative_to(SPECS)))
def test_every_example_spec_formats_losslessly(path):
    text = path.read_text(encoding="utf-8")
    out = assert_lossless(text, path.parent)
    assert comments(text), "the example specs carry comments: the property must be exercised"
    assert out.count("\n\n") >= text.count("\n\n") - text.count("\n\n\n"), "a blank-line group was lost"


def _tokens(text: str) -> list[str]:
    return [str(t) for t in _lark().lex(text)]


comment_text = st.text(st.sampled_from(string.ascii_letters + string.digits + " #\"'{}()[],=%-.é→"),
                       max_size=20).map(lambda s: "#" + s)


@st.composite
def relaid(draw, tokens: list[str]) -> str:
    """The tokens joined by random whitespace, blank lines and comments (full-line and trailing)."""
    seps = st.one_of(
        st.sampled_from([" ", "  ", "\n", "\n\n", "\t", "\n\n\n  "]),
        comment_text.map(lambda c: f"  {c}\n"),
        comment_text.map(lambda c: f"\n{c}\n"),
        comment_text.map(lambda c: f"\n\n  {c}\n\n"),
        st.tuples(comment_text, comment_text).map(lambda cs: f" {cs[0]}\n{cs[1]}\n"),
    )
    parts = [draw(st.one_of(st.just(""), comment_text.map(lambda c: c + "\n\n")))]
    for i, tok in enumerate(tokens):
        if i:
            parts.append(draw(seps))
        parts.append(tok)
    parts.append(draw(st.one_of(st.just("\n"), comment_text.map(lambda c: f"  {c}\n"),
                                comment_text.map(lambda c: f"\n\n{c}"))))
    return "".join(parts)


@settings(max_examples=30)
@given(st.data())
def test_example_specs_relaid_with_random_comments(data):
    path = data.draw(st.sampled_from(EXAMPLE_SPECS))
    text = data.draw(relaid(_tokens(path.read_text(encoding="utf-8"))))
    assert_lossless(text, path.parent)


# --- random specs from the language's constructs ---------------------------------------------------


def _setting_values() -> dict[str, list[str]]:
    """key → example values, from the compiler's own tables (the ones docs/language.md shows)."""
    from dpspec.lower import lowering as L

    tables = {"guarantee": L.GUARANTEES, "sampling": L.SAMPLINGS, "clipping": L.CLIPPINGS, "slices": L.SLICES,
              "noise": L.NOISES, "query": L.QUERIES, "unit": L.UNITS, "data": L.DATA, "prior": L.WORLDS,
              "propagation": L.PROPAGATIONS, "loss": L.LOSSES, "encoder": L.ENCODERS, "split": L.SPLITS,
              "execution": L.EXECUTIONS, "discrepancy": L.DISCREPANCIES, "lr_schedule": L.LR_SCHEDULES}
    out: dict[str, list[str]] = {}
    for settings_ in L.BLOCK_SETTINGS.values():
        for s in settings_:
            out.setdefault(s.key, []).append(s.example.split(None, 1)[1])
    for key, table in tables.items():
        out[key] += [sig.example for sig in table.values() if sig.example]
    out["mechanism"] += list(L.MECHANISM_NAMES)
    out["sampling"].append("coupled { positive poisson(expected_batch = 64)  "
                           "negative without_replacement(per_positive = 4) }")
    return out


SETTING_VALUES = _setting_values()
BLOCK_KEYS = {kind: [s.key for s in ss] for kind, ss in __import__(
    "dpspec.lower.lowering", fromlist=["BLOCK_SETTINGS"]).BLOCK_SETTINGS.items()}

names = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True).filter(lambda s: s not in ("in", "use"))
numbers = st.one_of(st.integers(-2**53, 2**53).map(str),  # larger whole numbers are refused (DPS106)
                    st.floats(allow_nan=False, allow_infinity=False).map(repr),
                    st.sampled_from(["5%", "1e-6", ".5", "+3", "007", "2.", "9007199254740992", "1.2e300"]))
strings = st.text(st.sampled_from('ab #"\\{}é'), max_size=6).map(_string)


def generic_values(depth=2):
    """Nested values the settings tables do not show: sets of tuples, calls in lists, named blocks."""
    leaf = st.one_of(names, numbers, strings)
    if depth == 0:
        return leaf
    sub = generic_values(depth - 1)
    return st.one_of(
        leaf,
        st.lists(sub, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(sub, max_size=3).map(lambda xs: "{" + ", ".join(xs) + "}"),
        st.lists(sub, min_size=1, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ",)"),
        st.builds(lambda n, a, k: f"{n}(" + ", ".join(a + [f"{x} = {y}" for x, y in k]) + ")",
                  names, st.lists(sub, max_size=2), st.lists(st.tuples(names, sub), max_size=2)),
        st.builds(lambda n, es: f"{n} {{ " + " ".join(f"{k} {v}" for k, v in es) + " }",
                  names, st.lists(st.tuples(names, sub), max_size=2)),
    )


@st.composite
def blocks(draw) -> str:
    kind = draw(st.sampled_from(sorted(BLOCK_KEYS)))
    keys = draw(st.lists(st.sampled_from(BLOCK_KEYS[kind]), max_size=6))
    lines = []
    for key in keys:
        v = draw(st.one_of(st.sampled_from(SETTING_VALUES[key]), generic_values()) if draw(st.integers(0, 5)) == 0
                 else st.sampled_from(SETTING_VALUES[key]))
        lines.append(f"  {key} {v}")
    return f"{kind} {draw(names)} {{\n" + "\n".join(lines) + "\n}"


@st.composite
def spec_texts(draw) -> str:
    items = draw(st.lists(st.one_of(blocks(), blocks(), st.just('use "shared/people.dps"')), min_size=1, max_size=4))
    return draw(relaid(_tokens("\n".join(items))))


@given(spec_texts())
def test_random_specs_format_losslessly(text):
    assert_lossless(text)


# --- layout decisions, shown on small inputs -------------------------------------------------------


def test_comments_and_blank_line_groups_are_kept():
    text = ('# header\n\nprivacy   p {unit record  # the unit\n\n\n  # size, from the census\n'
            '  dataset_size 60000 }\n# trailer\n')
    assert format_source(text) == ('# header\n\nprivacy p {\n  unit         record  # the unit\n\n'
                                   '  # size, from the census\n  dataset_size 60000\n}\n# trailer\n')


def test_trailing_comments_of_sibling_lines_share_a_column():
    out = format_source("x y { a 1 # one\n longer_key f(2) # two\n}\n")
    assert out == "x y {\n  a          1     # one\n  longer_key f(2)  # two\n}\n"


def test_a_comment_inside_brackets_spreads_them_one_item_per_line():
    out = format_source("scenario s { secret race in {White, # majority\n Black} }\n")
    assert out == ("scenario s {\n  secret race in {\n    White,  # majority\n    Black,\n  }\n}\n")
    one = format_source("x y { t (a, # only item\n) }\n")
    assert "    a,  # only item\n" in one and parse_text(one)[0] == parse_text("x y { t (a,) }")[0]


def test_a_comment_where_no_line_can_break_moves_above_its_line():
    out = format_source("x y { c f(k # why\n = 1) }\n")
    assert out == "x y {\n  c f(\n    # why\n    k = 1,\n  )\n}\n"
    out = format_source("x y { s race # why\n in {a} }\n")
    assert out == "x y {\n  # why\n  s race in {a}\n}\n"


def test_use_after_a_block_keeps_its_place():
    text = 'privacy p { unit record }\nuse "shared/people.dps"\n'
    out = format_source(text)
    assert out == 'privacy p {\n  unit record\n}\n\nuse "shared/people.dps"\n'
    assert parse_text(out)[0] == parse_text(text)[0]
    assert ir_of(out) == ir_of(text)


def test_numbers_keep_their_spelling_and_whole_numbers_round_trip_exactly():
    big = str(2**53)  # the largest whole number the parser accepts exactly
    text = f"x y {{ a {big}  b 1e-4  c 5%  d -{big}  e 1.5e300 }}\n"
    out = format_source(text)
    assert f"a {big}" in out and "b 1e-4" in out and "c 5%" in out and "e 1.5e300" in out
    tree = parse_text(text)[0]
    canonical = fmt(tree)  # the certificates' canonical text normalises numbers, exactly for integers
    assert f"a {big}\n" in canonical and "b 0.0001\n" in canonical and "c 0.05\n" in canonical
    assert parse_text(canonical)[0] == tree
    assert number(ast.Number(float(2**53 + 1), str(2**53 + 1), True)) == "9007199254740993"
    assert parse_text(f"x y {{ a {2**53 + 1} }}")[0] is None  # refused, not rounded (DPS106)


def test_call_arguments_keep_their_written_order():
    assert format_source("x y { q f(k = 1, a) }") == "x y {\n  q f(k = 1, a)\n}\n"
    assert fmt(parse_text("x y { q f(k = 1, a) }")[0]) == "x y {\n  q f(a, k = 1)\n}\n"


def test_comment_only_and_empty_files():
    assert format_source("") == ""
    assert format_source("  # a\n\n\n# b   \n") == "# a\n\n# b\n"
    assert format_source("x y {} # c\n") == "x y {}  # c\n"
    assert format_source("x y { # c\n}") == "x y {  # c\n}\n"


def test_crlf_input_formats_to_lf():
    assert format_source("x y {\r\n  a 1 # c\r\n}\r\n") == "x y {\n  a 1  # c\n}\n"


def test_text_that_does_not_parse_is_a_spec_error():
    with pytest.raises(dpspec.SpecError) as e:
        format_source("x y {\n", "bad.dps")
    assert e.value.diagnostics[0].rule == "DPS003"


def test_output_over_the_size_limit_is_refused_not_truncated(monkeypatch):
    text = "x y { " + " ".join(f"k{i} {i}" for i in range(200)) + " }\n"
    monkeypatch.setenv("DPSPEC_MAX_SOURCE_BYTES", str(len(text) + 10))
    with pytest.raises(FormatError, match="over the limit"):
        format_source(text)


def test_python_api_formats_paths_and_text(tmp_spec):
    p = tmp_spec("privacy p {unit record} # kept\n")
    assert dpspec.fmt(p) == dpspec.fmt(p.read_text()) == "privacy p {\n  unit record\n}  # kept\n"


def test_a_comment_after_a_closing_bracket_keeps_its_place_when_formatted_twice():
    """Found by the random-comment test: a comment between `)` and `in` was laid above the closing line at
    the line's own depth, and the second pass (reading it inside the brackets) indented it one level more."""
    text = ('scenario s { data synthetic(generator = secret_groups, size = 600, seed = 1)  '
            'secret share_a = fraction ( where = group == A  #\n) in  #\n{ 0.45 , 0.55 } pairs all_distinct '
            'prior empirical }\n')
    assert_lossless(text)
