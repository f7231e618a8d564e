"""The wire measurement runs msgspec on a tree's own event classes, in a
child process, and says what two more optional fields do to the bytes."""

import pytest
from support.export import kv_events_source
from support.trees import write_tree

from harness.errors import ExportError
from harness.submission.wire_header import KV_EVENTS, WireFacts, event_classes, measure


@pytest.mark.parametrize(
    ("fields", "header", "extended", "unchanged"),
    [
        (14, "88", "de 00 08", False),  # vLLM 0.32: fixmap until two are added
        (15, "de 00 08", "de 00 08", True),  # vLLM 0.33: map16 already
    ],
)
def test_two_optional_fields_change_the_header_only_below_sixteen_entries(
    tmp_path, fields, header, extended, unchanged
):
    write_tree(tmp_path, {str(KV_EVENTS): kv_events_source(fields)})
    facts = measure(tmp_path, "vLLM x")
    assert facts.fields == fields
    assert WireFacts.header(facts.encoded) == header
    assert WireFacts.header(facts.extended) == extended
    assert facts.unchanged is unchanged
    assert facts.extended_size - facts.size == (0 if unchanged else 2)
    assert WireFacts.header_kind(facts.encoded).endswith("of 8 entries")


def test_only_the_event_classes_are_taken_from_the_file():
    source = event_classes(kv_events_source(15))
    assert source.startswith("class KVCacheEvent(")
    assert "class BlockStored(KVCacheEvent):" in source
    assert "Unrelated" not in source and "import" not in source


def test_a_tree_without_the_module_has_nothing_to_measure(tmp_path):
    assert measure(tmp_path, "vLLM x") is None


def test_a_module_that_cannot_be_measured_is_one_line(tmp_path):
    write_tree(tmp_path, {str(KV_EVENTS): "class KVCacheEvent:\n    pass\n"})
    with pytest.raises(ExportError, match="cannot measure BlockStored's encoding"):
        measure(tmp_path, "vLLM x")
