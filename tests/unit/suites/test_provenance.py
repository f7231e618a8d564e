"""What a verdict records of where and when it was taken."""

import re

from harness.suites import provenance


def test_a_verdict_records_its_date_revision_and_machine():
    recorded = provenance.provenance()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", recorded["date"])
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?", recorded["revision"])
    assert "cores, Python" in recorded["machine"]


def test_outside_a_git_checkout_the_revision_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(provenance.checkout, "root", lambda: tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert provenance.revision() == "unknown (not a git checkout)"
