"""The one table of the contract's rules and classes."""

import re

from support import REPO_ROOT

from harness.contract import CLASSES, RULES, title


def test_every_rule_and_class_has_an_id_a_name_and_a_summary():
    assert list(RULES) == [f"C{n}" for n in range(1, 10)]
    assert list(CLASSES) == [f"K{n}" for n in range(1, 8)]
    for entry in (*RULES.values(), *CLASSES.values()):
        assert entry.name and entry.summary
        assert entry.title == f"{entry.id} {entry.name}"


def test_title_names_a_known_id_and_leaves_others_alone():
    assert title("C1") == "C1 parent closure"
    assert title("K4") == "K4 nothing live to hang from"
    assert title("C10") == "C10"


def test_the_rule_names_are_those_of_docs_contract_md():
    text = (REPO_ROOT / "docs" / "contract.md").read_text()
    documented = dict(re.findall(r"^\| (C\d) \| \*\*([^.*]+)\.\*\*", text, re.M))
    assert {rule: name.lower() for rule, name in documented.items()} == {
        rule: entry.name for rule, entry in RULES.items()
    }
