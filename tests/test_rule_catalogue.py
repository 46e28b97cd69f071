"""One rule catalogue: every rule id the source can raise is listed by `dpspec rules` and documented.

Ids are read from the code itself (every "DPSnnn" string literal under dpspec/), so a new
diagnostic without a catalogue entry fails here rather than reaching a user as an unknown id.
"""

import re
from pathlib import Path

from dpspec.check import catalogue
from dpspec.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def source_rule_ids() -> set[str]:
    ids = set()
    for p in (ROOT / "dpspec").rglob("*.py"):
        ids |= set(re.findall(r"[\"'](DPS\d{3})[\"']", p.read_text(encoding="utf-8")))
    return ids


def test_every_rule_id_in_the_source_is_in_the_catalogue():
    ids = source_rule_ids()
    assert len(ids) > 100
    missing = sorted(ids - set(catalogue()))
    assert not missing, f"rule ids raised by the code but absent from `dpspec rules`: {missing}"


def test_every_rule_id_in_the_source_is_documented():
    doc = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    missing = sorted(r for r in source_rule_ids() if f"\n## {r}\n" not in doc)
    assert not missing, f"absent from docs/rules.md (run `python -m dpspec.docs`): {missing}"


def test_rules_command_knows_an_accountant_rule(capsys):
    assert main(["rules", "DPS608"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DPS608") and "graph" in out


def test_every_accountant_rule_is_in_the_catalogue():
    """Each accountant's refusals reach the catalogue through its family's ``ACCOUNTANT_RULES``
    (dpspec.check.rules_accounting names no family): an id registered with
    ``dpspec.accounting.errors.register_rules`` that no family declares would be missing here."""
    import dpspec.accounting  # noqa: F401 - registers every accountant's catalogue
    from dpspec.accounting.errors import known_rules
    from dpspec.check.rules_accounting import declared

    cat = catalogue()
    assert not sorted(set(known_rules()) - set(cat))
    assert {d.catalogue.split(":")[0] for d in declared()} >= {
        "dpspec.accounting.swm", "dpspec.accounting.huc", "dpspec.accounting.relational", "dpspec.accounting.gcon"}
    assert cat["DPS705"].stage == "accounting" and "tests/families/gcon" in cat["DPS705"].bad
