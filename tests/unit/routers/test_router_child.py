"""The harness's side of the router protocol against fake router children:
every reply that breaks the protocol (malformed, oversized, late, behind, a
router that exits) is one error naming the router and the problem, within
its bound, never a hang, and the router and what it started are ended."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from harness.errors import RouterProtocolError
from harness.routers import protocol, router_child
from harness.routers.protocol import Greeting, Group
from harness.routers.router_child import RouterChild

GREETING = Greeting(
    endpoint="tcp://127.0.0.1:1", replay_endpoint=None, topic="", block_size=128,
    hash_block_size=32, alignment=32, hash_algorithm="sha256", none_hash="00",
    hash_seed="0", groups=(Group(0, "mamba", 128), Group(1, "full_attention", 128)),
)  # fmt: skip
# A fake router's start: read the greeting, say ready; ``say`` writes a line.
PRELUDE = """\
import json, os, sys, time
def say(message):
    line = message if isinstance(message, str) else json.dumps(message) + "\\n"
    sys.stdout.write(line)
    sys.stdout.flush()
hello = json.loads(sys.stdin.readline())
"""
READY = 'say({"type": "ready", "protocol": 1, "name": "fake"})\n'
# Answer every ask with its after_seq and 64 tokens; bye with counts.
ANSWERING = """\
for line in sys.stdin:
    ask = json.loads(line)
    if ask["type"] == "bye":
        say({"type": "bye", "counts": {"asked": 1, "after": ask["after_seq"]}})
        break
    say({"type": "answer", "id": ask["id"], "seen_seq": ask["after_seq"],
         "hit_tokens": 64})
"""


@pytest.fixture
def start(tmp_path):
    """A RouterChild running ``script`` after PRELUDE; ended after the test."""
    children = []

    def make(script: str) -> RouterChild:
        path = tmp_path / f"router{len(children)}.py"
        path.write_text(PRELUDE + textwrap.dedent(script))
        log = tmp_path / f"router{len(children)}.log"
        children.append(RouterChild([sys.executable, str(path)], log, "fake-cmd"))
        return children[-1]

    yield make
    for child in children:
        child.close()


@pytest.fixture
def short_bounds(monkeypatch):
    monkeypatch.setattr(protocol, "READY_S", 2.0)
    monkeypatch.setattr(protocol, "ANSWER_S", 2.0)
    monkeypatch.setattr(protocol, "BYE_S", 2.0)
    monkeypatch.setattr(router_child, "END_S", 1.0)


def test_a_router_that_keeps_the_protocol_is_greeted_asked_and_said_bye(start):
    child = start(READY + ANSWERING)
    ready = child.hello(GREETING)
    assert (ready.name, child.label) == ("fake", "fake")
    answer = child.ask(3, 41, [1, 2, 3], [b"\x01\x02", 7])
    assert (answer.seen_seq, answer.hit_tokens) == (41, 64)
    assert child.bye(57) == {"asked": 1, "after": 57}
    assert child.process.poll() == 0  # it exited by itself after its bye


def test_the_greeting_and_the_ask_are_what_the_document_says(tmp_path):
    script = tmp_path / "router.py"
    script.write_text(
        PRELUDE
        + """\
json.dump(hello, open(os.environ["OUT"], "w"))
say({"type": "ready", "protocol": 1})
ask = json.loads(sys.stdin.readline())
json.dump(ask, open(os.environ["OUT"], "w"))
say({"type": "answer", "id": ask["id"], "seen_seq": 5, "hit_tokens": 1})
"""
    )
    out = tmp_path / "said.json"
    env = {**os.environ, "OUT": str(out)}
    child = RouterChild([sys.executable, str(script)], tmp_path / "log", "r", env)
    try:
        child.hello(GREETING)
        hello = json.loads(out.read_text())
        assert child.label == "r"  # no name in its ready
        assert child.ask(7, -1, [9] * 70, [b"\xab" * 2, 12]).hit_tokens == 1
        asked = json.loads(out.read_text())
    finally:
        child.close()
    assert hello["type"] == "hello" and hello["protocol"] == 1
    assert hello["events"] == {
        "endpoint": "tcp://127.0.0.1:1",
        "replay_endpoint": None,
        "topic": "",
    }
    assert (hello["block_size"], hello["hash_block_size"], hello["alignment"]) == (
        128,
        32,
        32,
    )
    assert hello["hash"] == {
        "algorithm": "sha256",
        "none_hash": "00",
        "pythonhashseed": "0",
    }
    assert hello["groups"][0] == {"group_idx": 0, "kind": "mamba", "block_size": 128}
    assert asked == {
        "type": "ask", "id": 7, "after_seq": -1, "token_ids": [9] * 70,
        "block_hashes": ["abab", 12],
    }  # fmt: skip


@pytest.mark.parametrize(
    "reply, problem, said",
    [
        ("not json\n", "malformed", "not JSON"),
        ("[1, 2]\n", "malformed", "a JSON list, not an object"),
        ('{"type": "answer", "protocol": 1}\n', "malformed", "'ready' was due"),
        ('{"type": "ready", "protocol": 2}\n', "malformed", "protocol 2"),
        ('{"type": "ready", "protocol": 1, "name": 7}\n', "malformed", "name 7"),
        ('{"type": "ready", "protocol": 1, "block_size": true}\n', "malformed", "True"),
        ("\n", "malformed", "not JSON"),
    ],
)
def test_a_malformed_ready_ends_the_router(start, reply, problem, said):
    child = start(f"say({reply!r})\ntime.sleep(60)\n")
    with pytest.raises(RouterProtocolError) as raised:
        child.hello(GREETING)
    assert raised.value.problem == problem and said in str(raised.value)
    assert raised.value.exit_code == 23
    assert str(raised.value).startswith("router fake-cmd: malformed: ")
    assert child.process.poll() is not None  # ended, not left waiting


def answered(**changes) -> dict:
    """An answer to ask 3 after batch 9, with ``changes``."""
    return {"type": "answer", "id": 3, "seen_seq": 9, "hit_tokens": 0, **changes}


@pytest.mark.parametrize(
    "answer, problem, said",
    [
        (answered(id=4), "malformed", "id 4 answers ask 3"),
        (answered(hit_tokens=-32), "malformed", "hit_tokens -32 is less than 0"),
        (answered(hit_tokens=True), "malformed", "hit_tokens True is not an integer"),
        (answered(hit_tokens=32.0), "malformed", "not an integer"),
        (answered(seen_seq="9"), "malformed", "seen_seq '9'"),
        (answered(seen_seq=8), "behind", "seen_seq 8, but the engine had published"),
        ({"type": "bye"}, "malformed", "type 'bye' where 'answer' was due"),
    ],
)
def test_a_wrong_answer_ends_the_router(start, answer, problem, said):
    child = start(READY + f"sys.stdin.readline()\nsay({answer!r})\ntime.sleep(60)\n")
    child.hello(GREETING)
    with pytest.raises(RouterProtocolError) as raised:
        child.ask(3, 9, [1] * 40, [1])
    assert (raised.value.problem, raised.value.router) == (problem, "fake")
    assert said in raised.value.detail
    assert child.process.poll() is not None


def test_a_bye_with_counts_that_are_not_whole_numbers_is_malformed(start):
    bye = {"type": "bye", "counts": {"a": -1}}
    child = start(READY + f"sys.stdin.readline()\nsay({bye!r})\n")
    child.hello(GREETING)
    with pytest.raises(RouterProtocolError, match="counts are not names to whole"):
        child.bye()


def test_an_oversized_line_is_refused_without_waiting_for_its_end(start, short_bounds):
    flood = f"say('x' * {protocol.MAX_LINE_BYTES + 1})\ntime.sleep(60)\n"
    child = start(flood)
    began = time.monotonic()
    with pytest.raises(RouterProtocolError) as raised:
        child.hello(GREETING)
    assert raised.value.problem == "oversized"
    assert time.monotonic() - began < 2.0  # not the late bound


def test_a_line_of_exactly_the_bound_is_read(start):
    reply = '{"type": "ready", "protocol": 1, "name": "padded"'
    padding = protocol.MAX_LINE_BYTES - len(reply) - len(', "x": ""}')
    child = start(f"say({reply!r} + ', \"x\": \"' + 'y' * {padding} + '\"}}\\n')\n")
    assert child.hello(GREETING).name == "padded"


def test_a_router_that_does_not_answer_in_time_is_late(start, short_bounds):
    child = start(READY + "sys.stdin.readline()\ntime.sleep(60)\n")
    child.hello(GREETING)
    began = time.monotonic()
    with pytest.raises(RouterProtocolError, match="late: no 'answer' within 2 s"):
        child.ask(0, -1, [1], [])
    assert 1.9 < time.monotonic() - began < 8.0  # the bound, then the ending


def test_a_router_that_never_reads_its_stdin_is_late_not_a_hang(start, short_bounds):
    child = start(READY + "time.sleep(60)\n")
    child.hello(GREETING)
    tokens = list(range(200_000))  # an ask larger than a pipe holds
    with pytest.raises(RouterProtocolError, match="did not read its stdin within 2 s"):
        child.ask(0, -1, tokens, [])


def test_a_router_that_exits_is_named_with_its_last_words(start):
    child = start("sys.stderr.write('cannot subscribe: no zmq\\n')\nsys.exit(3)\n")
    with pytest.raises(RouterProtocolError) as raised:
        child.hello(GREETING)
    assert raised.value.problem == "exited"
    said = "it exited (3); its stderr ends: cannot subscribe: no zmq"
    assert said in str(raised.value)


def test_a_router_that_dies_between_asks_is_exited(start):
    child = start(READY + "sys.stdin.readline()\nos._exit(0)\n")
    child.hello(GREETING)
    with pytest.raises(RouterProtocolError) as raised:
        child.ask(0, -1, [1], [])
    assert raised.value.problem == "exited"


def test_a_command_that_cannot_be_run_is_one_line(tmp_path):
    from harness.errors import MissingDependency

    with pytest.raises(MissingDependency, match="cannot be run"):
        RouterChild([str(tmp_path / "no-such-router")], tmp_path / "log", "r")


GRANDCHILD = """\
child = __import__("subprocess").Popen(["sleep", "60"])
open(hello["events"]["endpoint"].split("//")[1], "w").write(str(child.pid))
say({"type": "ready", "protocol": 1})
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead already: its parent has not waited for it.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_closing_ends_the_router_and_what_it_started(start, tmp_path, short_bounds):
    pid_file = tmp_path / "grandchild"
    greeting = Greeting(**{**GREETING.__dict__, "endpoint": f"ipc://{pid_file}"})
    child = start(GRANDCHILD)
    child.hello(greeting)
    grandchild = int(pid_file.read_text())
    assert alive(grandchild)
    child.close()
    child.close()  # again: nothing left to do
    assert child.process.poll() is not None
    for _ in range(100):
        if not alive(grandchild):
            break
        time.sleep(0.02)
    assert not alive(grandchild)


# The harness, asking a fake router that started a grandchild, stopped by a
# signal: the harness ends with its status, the router and its grandchild
# with it.
STOPPED = """\
import sys
from pathlib import Path
from harness.processes import handle_stop_signals
from harness.routers import router_child
from harness.routers.protocol import Greeting
from harness.routers.router_child import RouterChild
handle_stop_signals()
router_child.END_S = 1.0
folder = Path(sys.argv[1])
greeting = Greeting(f"ipc://{folder}/grandchild", None, "", 128, 32, 32, "sha256",
                    "00", "0", ())
child = RouterChild([sys.executable, str(folder / "router.py")], folder / "log", "r")
try:
    child.hello(greeting)
    print(child.process.pid, flush=True)
    child.ask(0, -1, [1], [])  # never answered
finally:
    child.close()
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_ends_the_router_with_the_harness(tmp_path, signum):
    from support import REPO_ROOT
    from support.stopping import default_signal_dispositions

    (tmp_path / "router.py").write_text(PRELUDE + GRANDCHILD)
    harness = subprocess.Popen(
        [sys.executable, "-c", STOPPED, str(tmp_path)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        preexec_fn=default_signal_dispositions,
    )  # fmt: skip
    router = int(harness.stdout.readline())
    grandchild = int((tmp_path / "grandchild").read_text())
    harness.send_signal(signum)
    harness.communicate(timeout=30)
    assert harness.returncode != 0
    for pid in (router, grandchild):
        for _ in range(100):
            if not alive(pid):
                break
            time.sleep(0.02)
        assert not alive(pid), pid
