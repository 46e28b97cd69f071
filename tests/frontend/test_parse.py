"""Parser, spans, canonical printer and includes."""

from hypothesis import given
from hypothesis import strategies as st

import dpspec
from dpspec.parse import ast, fmt, parse_text
from dpspec.parse.includes import load_program


def parse_ok(text):
    tree, diags = parse_text(text, "t.dps")
    assert not diags, diags
    return tree


def test_sketch_from_design_parses():
    tree = parse_ok('''
scenario adult_race {
  data    csv("adult/adult.data", schema = adult)     # or bound at run time by name
  secret  race in {White, Black, Asian-Pac-Islander, Amer-Indian-Eskimo, Other}
  pairs   all_distinct
  prior   empirical
}
privacy citeseer_nodes { unit node  graph citeseer }
train link_encoder {
  sampling   coupled {
    positive poisson(expected_batch = 256)
    negative without_replacement(per_positive = 4)
  }
  degree_cap 5
  guarantee  dp(epsilon = 8, delta = 1e-6)
}''')
    kinds = [b.kind for b in tree.blocks]
    assert kinds == ["scenario", "privacy", "train"]
    secret = tree.blocks[0].entries[1].value
    assert isinstance(secret, ast.Membership)
    assert [i.name for i in secret.collection.items][2] == "Asian-Pac-Islander"
    coupled = tree.blocks[2].entries[0].value
    assert isinstance(coupled, ast.NamedBlock) and coupled.name == "coupled"


def test_numbers_percent_and_exponents():
    tree = parse_ok("x y { a 5%  b 1e-6  c -2.5E+3  d 7  e .5 }")
    vals = {e.key: e.value for e in tree.blocks[0].entries}
    assert vals["a"].value == 0.05 and not vals["a"].is_int
    assert vals["b"].value == 1e-6
    assert vals["c"].value == -2500.0
    assert vals["d"].value == 7 and vals["d"].is_int
    assert vals["e"].value == 0.5


def test_spans_point_at_the_value():
    tree = parse_ok("privacy p {\n  unit   record\n}\n")
    e = tree.blocks[0].entries[0]
    assert (e.key_span.line, e.key_span.col) == (2, 3)
    assert (e.value.span.line, e.value.span.col, e.value.span.end_col) == (2, 10, 16)


def test_strings_with_escapes_round_trip():
    tree = parse_ok(r'x y { s "a \"quoted\" \\ path" }')
    assert tree.blocks[0].entries[0].value.value == 'a "quoted" \\ path'
    assert parse_ok(fmt(tree)) == tree


def test_several_settings_per_line_and_comments():
    tree = parse_ok("privacy p { unit node  graph citeseer }  # comment\n# another\n")
    assert [e.key for e in tree.blocks[0].entries] == ["unit", "graph"]


def test_syntax_error_reports_expected_closer():
    tree, diags = parse_text("release r {\n  mechanism gaussian\n", "t.dps")
    assert tree is None
    d = diags[0]
    assert d.rule == "DPS003" and "`}`" in d.message and "line 1" in d.hint


def test_unterminated_string():
    _tree, diags = parse_text('x y { s "abc }\n', "t.dps")
    assert diags[0].rule == "DPS002"


def test_every_broken_block_is_reported():
    text = "release a { x = 1 }\nrelease b { mechanism gaussian }\nrelease c { y ) }\n"
    _tree, diags = parse_text(text, "t.dps")
    assert sorted(d.span.line for d in diags) == [1, 3]


# --- fmt round trip over generated trees ---------------------------------------------------------

idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}(-[A-Za-z0-9]{1,3})?", fullmatch=True).filter(
    lambda s: s not in ("use", "in"))
numbers = st.one_of(
    st.integers(-10**12, 10**12).map(lambda i: ast.Number(float(i), str(i), True)),
    st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e300, max_value=1e300).map(
        lambda f: ast.Number(f, repr(f), False)),
)
strings = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12).map(ast.String)


def values(depth=2):
    leaf = st.one_of(idents.map(ast.Ident), numbers, strings)
    if depth == 0:
        return leaf
    sub = values(depth - 1)
    return st.one_of(
        leaf,
        st.lists(sub, max_size=3).map(lambda xs: ast.ListLit(tuple(xs))),
        st.lists(sub, max_size=3).map(lambda xs: ast.SetLit(tuple(xs))),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: ast.TupleLit(tuple(xs))),
        st.builds(lambda n, a, k: ast.Call(n, tuple(a), tuple(ast.Kwarg(x, y) for x, y in k)),
                  idents, st.lists(sub, max_size=2), st.lists(st.tuples(idents, sub), max_size=2)),
    )


# `x in {...}` is only valid as a whole setting value
memberships = st.builds(lambda a, b: ast.Membership(a, b), idents.map(ast.Ident), values(1))
entries = st.builds(lambda k, v: ast.Entry(k, v), idents, st.one_of(values(), memberships))
blocks = st.builds(lambda k, n, es: ast.Block(k, n, tuple(es)), idents, idents, st.lists(entries, max_size=4))
files = st.builds(lambda us, bs: ast.SpecFile(tuple(ast.Use(u) for u in us) + tuple(bs)),
                  st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=8), max_size=2),
                  st.lists(blocks, max_size=3))


@given(files)
def test_parse_fmt_roundtrip(tree):
    text = fmt(tree)
    again = parse_ok(text)
    assert again == tree
    assert fmt(again) == text  # fmt is idempotent


def test_fmt_is_parse_invariant_on_every_example_spec():
    from tests.conftest import SPECS

    for p in SPECS.rglob("*.dps"):
        text = p.read_text()
        tree = parse_ok(text)
        assert parse_ok(fmt(tree)) == tree, p


# --- includes ----------------------------------------------------------------------------------


def test_use_shares_definitions(tmp_spec):
    tmp_spec("privacy people { unit record }\nrelease ignored { mechanism gaussian sensitivity 1 "
             "guarantee dp(epsilon = 1, delta = 1e-6) }\n", "shared/defs.dps")
    main = tmp_spec('use "shared/defs.dps"\nrelease r { protect people  mechanism gaussian  sensitivity 1  '
                    'guarantee dp(epsilon = 1, delta = 1e-6) }\n', "main.dps")
    spec = dpspec.load(main)
    assert spec.ok, spec.diagnostics
    assert [r.name for r in spec.ir.releases] == ["r"]  # the included file's release is not compiled here
    assert "use " not in spec.canonical_text() and "privacy people" in spec.canonical_text()


def test_include_cycle_is_reported(tmp_spec):
    tmp_spec('use "b.dps"\nprivacy a { unit record }\n', "a.dps")
    b = tmp_spec('use "a.dps"\nprivacy b { unit record }\n', "b.dps")
    prog = load_program(path=b)
    rules = [d.rule for d in prog.diagnostics]
    assert rules == ["DPS005"]
    assert "a.dps → b.dps" in prog.diagnostics[0].message or "b.dps → a.dps" in prog.diagnostics[0].message


def test_self_include_is_a_cycle(tmp_spec):
    a = tmp_spec('use "a.dps"\nprivacy a { unit record }\n', "a.dps")
    assert [d.rule for d in load_program(path=a).diagnostics] == ["DPS005"]


def test_missing_include_points_at_use(tmp_spec):
    a = tmp_spec('privacy a { unit record }\nuse "nope.dps"\n', "a.dps")
    d = load_program(path=a).diagnostics[0]
    assert d.rule == "DPS004" and d.span.line == 2


def test_diamond_include_reads_once(tmp_spec):
    tmp_spec("privacy base { unit record }\n", "base.dps")
    tmp_spec('use "base.dps"\nprivacy l { unit record }\n', "l.dps")
    tmp_spec('use "base.dps"\nprivacy r { unit edge }\n', "r.dps")
    top = tmp_spec('use "l.dps"\nuse "r.dps"\nrelease x { protect base mechanism gaussian sensitivity 1 '
                   'guarantee dp(epsilon = 1, delta = 1e-6) }\n', "top.dps")
    spec = dpspec.load(top)
    assert spec.ok, spec.diagnostics
    assert sorted(u.name for u in spec.ir.units) == ["base", "l", "r"]
