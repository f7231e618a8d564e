"""The consumers' shims speak the router protocol: `python -m harness shim
NAME`, asked through the harness's own side of it (RouterChild), against a
local publisher of hand-made batches (no engine)."""

import sys

import msgspec
import pytest
from support.events import cleared, removed, stored

from harness.engine.shims import Shim, engine_hash
from harness.routers.protocol import Greeting, Group
from harness.routers.publisher import StreamPublisher
from harness.routers.router_child import RouterChild

_encoder = msgspec.msgpack.Encoder()
# Hash blocks of 2 tokens in one attention group of blocks of 4.
H = [bytes([n]) * 4 for n in range(1, 6)]  # the request's hash at 2, 4, 6, 8, 10
TOKENS = list(range(9))  # hits at most 8 tokens


def greeting(endpoint: str) -> Greeting:
    return Greeting(
        endpoint=endpoint, replay_endpoint=None, topic="", block_size=4,
        hash_block_size=2, alignment=2, hash_algorithm="sha256", none_hash="00",
        hash_seed="0", groups=(Group(0, "full_attention", 4),),
    )  # fmt: skip


def events(*made) -> list[bytes]:
    return [_encoder.encode(event) for event in made]


@pytest.fixture
def publisher():
    with StreamPublisher() as publisher:
        yield publisher


def shim(name, publisher, tmp_path, *options) -> RouterChild:
    command = [sys.executable, "-m", "harness", "shim", name, *options]
    child = RouterChild(command, tmp_path / f"{name}.log", name)
    child.hello(greeting(publisher.endpoint))
    publisher.wait_for_subscribers(publisher.subscriptions + 1)
    return child


def test_the_hash_set_shim_answers_from_what_it_heard_up_to_after_seq(
    publisher, tmp_path
):
    child = shim("hash-set", publisher, tmp_path)
    try:
        assert (child.readied.name, child.readied.block_size) == ("hash-set", None)
        assert child.ask(0, -1, TOKENS, H).hit_tokens == 0  # nothing published
        seq = publisher.send(events(stored([H[1], H[3]], None, block_size=4)))
        answer = child.ask(1, seq, TOKENS, H)
        assert (answer.seen_seq, answer.hit_tokens) == (0, 8)
        seq = publisher.send(events(removed([H[3]])))
        assert child.ask(2, seq, TOKENS, H).hit_tokens == 4
        # A store under a parent it never heard of: kept, no parent check.
        seq = publisher.send(events(stored([H[3]], b"elsewhere", block_size=4)))
        assert child.ask(3, seq, TOKENS, H).hit_tokens == 8
        seq = publisher.send(events(cleared()))
        assert child.ask(4, seq, TOKENS, H) == type(answer)(seq, 0)
        # The engine's last batches, after its last request: counted at bye.
        seq = publisher.send(events(stored([H[1]], None, block_size=4)))
        counts = child.bye(seq)
    finally:
        child.close()
    assert counts == {
        "stores indexed": 3,
        "stores indexed under a parent not indexed": 1,
    }


def test_the_content_tree_shim_refuses_a_store_under_a_parent_it_lacks(
    publisher, tmp_path
):
    child = shim("content-tree", publisher, tmp_path)
    try:
        publisher.send(events(stored([H[1]], None, block_size=4)))
        seq = publisher.send(events(stored([H[3]], b"elsewhere", block_size=4)))
        assert child.ask(0, seq, TOKENS, H).hit_tokens == 4
        counts = child.bye()
    finally:
        child.close()
    assert counts["stores refused: parent not indexed"] == 1


def test_the_llm_d_model_shim_rehashes_tokens_at_its_block_size(publisher, tmp_path):
    child = shim("llm-d-model", publisher, tmp_path, "--block-size", "2")
    try:
        assert child.readied.block_size == 2
        store = stored([H[1], H[3]], None, block_size=4, tokens=TOKENS[:8])
        seq = publisher.send(events(store))
        assert child.ask(0, seq, TOKENS, H).hit_tokens == 8
    finally:
        child.close()


def test_a_shim_speaks_nothing_but_the_protocol_on_stdout(tmp_path, capfd):
    """What the routers' libraries print goes to stderr (the shim's log)."""
    child = RouterChild(
        [sys.executable, "-c", SHIM_THAT_PRINTS], tmp_path / "log", "printing"
    )
    try:
        with StreamPublisher() as publisher:
            child.hello(greeting(publisher.endpoint))
            assert child.bye() == {}
    finally:
        child.close()
    assert "a library's chatter" in (tmp_path / "log").read_text()


SHIM_THAT_PRINTS = """\
from harness.engine import shims
made = shims.make_router
def chatty(*args):
    print("a library's chatter")
    return made(*args)
shims.make_router = chatty
shims.serve("hash-set", None)
"""


def test_a_shim_hears_hashes_as_the_events_carry_them():
    assert engine_hash("0aff") == b"\x0a\xff" and engine_hash(12) == 12


def test_an_unknown_shim_is_refused_before_it_subscribes(publisher):
    with pytest.raises(ValueError, match="no shim 'nope'"):
        Shim("nope", None, greeting(publisher.endpoint))
