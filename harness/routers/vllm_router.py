"""vllm-router's kv_aware policy as a `Router` (vllm-router 0.1.17).

The router runs as its own process, as an operator runs it:
``vllm-router --policy kv_aware --kv-event-source W1=ENDPOINT
--kv-event-block-size B``, the endpoint harness.routers.publisher's
replay. Two stub workers (`StubWorkers`) answer it: the worker W1 whose
stream it indexes, and a second one, so that the policy has a choice to
score. kv_aware does not tokenize the prompt itself: it asks every worker's
``/v1/completions/render`` for the token ids (vLLM's render endpoint, a
list of ``{"token_ids": [...]}``); the stubs render a prompt of words
``w<id>`` to those ids, so the router sees exactly the probe's tokens.

Its answer for a request is read from its own debug log, one line per
routing decision (src/policies/kv_aware.rs)::

    KV prefix decision outcome="prefix_cost" worker="..." input_tokens=12
    new_prefill_tokens=4 credited_prefix_tokens=8 used_binding=false

``credited_prefix_tokens`` is the prefix it credits the chosen worker with
(already capped below the prompt's length). Its source (kv_index): a radix
tree per ``group_idx`` keyed by a sha256 of each block's tokens at the
event's ``block_size``, engine hashes kept as anchors; a store whose parent
it has no anchor for is skipped (its debug log: "unknown parent; skipping
unanchored store"); the request is looked up at ``--kv-event-block-size``.
The ledger counts those skips, its decision outcomes and its lookups
(``vllm_router_kv_placement_lookups_total``). Its decoder refuses a whole
batch when one event in it breaks its rules (a store with no hash, as a
Mamba group's of released vLLM): the log says why, and the ledger counts
the events such batches held (the batches whose sequence number never
advanced). `settle` waits until its log has accounted for every batch
published: applied or refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness import processes
from harness.errors import MissingDependency, SubscriptionError
from harness.routers import metrics
from harness.routers.dynamo_relay import free_port
from harness.routers.publisher import StreamPublisher

MODEL = "harness-stub"
START_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 60.0
DECISION = re.compile(
    r'KV prefix decision outcome="(?P<outcome>[^"]*)" worker="(?P<worker>[^"]*)"'
    r".*?credited_prefix_tokens=(?P<credited>\d+)"
)
ADVANCED = re.compile(
    r"kv_index live sequence advanced source=(\S+) rank=\d+ seq=(?P<seq>\d+)"
)
# What its index skips, as it logs it: "kv_index: unknown parent; skipping
# unanchored store parent_seq=...".
SKIPPED = re.compile(r"kv_index: ([^;]+); skipping ([a-z ]+?)(?: [a-z_]+=|$)")
# A batch its decoder refuses (logged as a warning; the batch is consumed).
UNDECODED = re.compile(r"kv_index decode batch: (.{0,80})")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def prompt_text(token_ids: list[int]) -> str:
    return " ".join(f"w{token}" for token in token_ids)


def rendered(prompt: str) -> list[int]:
    return [int(word[1:]) for word in prompt.split()]


class _StubHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        """Quiet."""

    def _reply(self, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.startswith("/v1/models"):
            self._reply({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._reply({"status": "ok"})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/render"):
            self._reply(
                [{"request_id": "harness", "token_ids": rendered(request["prompt"])}]
            )
            return
        self._reply(
            {
                "id": "harness",
                "object": "text_completion",
                "model": MODEL,
                "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "total_tokens": 0,
                },
            }
        )


class StubWorkers:
    """Two OpenAI-style workers on loopback threads (module docstring)."""

    def __init__(self, count: int = 2):
        self.servers = [
            ThreadingHTTPServer(("127.0.0.1", 0), _StubHandler) for _ in range(count)
        ]
        self.threads = [
            threading.Thread(target=server.serve_forever, daemon=True)
            for server in self.servers
        ]
        for thread in self.threads:
            thread.start()
        self.urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in self.servers]

    def close(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def router_command() -> str:
    found = shutil.which("vllm-router", path=os.path.dirname(sys.executable))
    found = found or shutil.which("vllm-router")
    if found is None:
        raise MissingDependency(
            "vllm-router is not installed; install the harness's 'consumers' "
            "extra: pip install -e '.[consumers]' in the checkout"
        )
    return found


class VllmRouter:
    """`Router` (harness.routers.loop) over a vllm-router process with
    ``--kv-event-block-size block_size``, its events from ``source`` (a
    `StreamPublisher`, or harness.engine.engine_stream's `EngineStream`:
    a real engine's publisher)."""

    def __init__(self, source: StreamPublisher, block_size: int, hash_seed: str = "0"):
        self.source = source
        self.block_size = block_size
        self.workers = StubWorkers()
        self.scratch = Path(tempfile.mkdtemp(prefix="harness-vllm-router-"))
        self.log_path = self.scratch / "router.log"
        self.port, self.metrics_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        indexed = self.workers.urls[0]
        command = [
            router_command(),
            "--host", "127.0.0.1", "--port", str(self.port),
            "--worker-urls", *self.workers.urls,
            "--policy", "kv_aware",
            "--kv-event-source", f"{indexed}={source.endpoint}",
            "--kv-event-block-size", str(block_size),
            "--kv-event-model", MODEL,
            "--log-level", "debug",
            "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(self.metrics_port),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        self._log = self.log_path.open("w")
        with processes.stop_signals_held():
            self.process = subprocess.Popen(
                command, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, process_group=0,
            )  # fmt: skip
        self.read_at = 0
        self.advanced: set[int] = set()  # sequence numbers applied
        self.undecoded = 0
        self.decisions: list[dict[str, str]] = []
        self.skipped: Counter = Counter()
        try:
            source.wait_for_subscribers(source.subscriptions + 1)
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Router ready" not in self.log_path.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log_path.read_text()[-2000:]
                raise SubscriptionError(f"vllm-router did not start: {tail}")
            time.sleep(0.05)

    def _read_log(self) -> None:
        with self.log_path.open() as log:
            log.seek(self.read_at)
            text = log.read()
        complete = text[: text.rfind("\n") + 1]
        self.read_at += len(complete.encode())
        for line in ANSI.sub("", complete).splitlines():
            if (undecoded := UNDECODED.search(line)) is not None:
                self.skipped[f"batch refused whole: {undecoded.group(1)}"] += 1
                self.undecoded += 1
            elif (skipped := SKIPPED.search(line)) is not None:
                self.skipped[
                    f"index skipped {skipped.group(2)}: {skipped.group(1)}"
                ] += 1
            elif (advanced := ADVANCED.search(line)) is not None:
                self.advanced.add(int(advanced["seq"]))
            elif (decision := DECISION.search(line)) is not None:
                self.decisions.append(decision.groupdict())

    def publish(self, events: list[bytes]) -> None:
        self.source.send(events)

    def settle(self) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            self._read_log()
            consumed = len(self.advanced) + self.undecoded
            if consumed >= self.source.sequence:
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SubscriptionError(
                    f"vllm-router consumed {consumed} of {self.source.sequence} batches"
                )
            time.sleep(0.002)

    def predict(self, token_ids, block_hashes) -> int:
        before = len(self.decisions)
        body = json.dumps(
            {"model": MODEL, "prompt": prompt_text(token_ids), "max_tokens": 1}
        )
        request = urllib.request.Request(
            f"{self.url}/v1/completions",
            body.encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while len(self.decisions) <= before:
            if time.monotonic() > deadline:
                raise SubscriptionError("vllm-router logged no routing decision")
            time.sleep(0.001)
            self._read_log()
        return int(self.decisions[before]["credited"])

    def ledger(self) -> Counter:
        self._read_log()
        ledger = Counter(f"decision: {d['outcome']}" for d in self.decisions)
        ledger.update(self.skipped)
        page = metrics.samples(
            metrics.fetch(f"http://127.0.0.1:{self.metrics_port}/metrics")
        )
        for labels, value in metrics.select(
            page, "vllm_router_kv_placement_lookups_total"
        ):
            ledger[f"lookup: {labels.get('result', '?')}"] += int(value)
        ledger["batches applied"] = len(self.advanced)
        refused = [
            self.source.batch_events[seq]
            for seq in range(self.source.sequence)
            if seq not in self.advanced
        ]
        ledger["events in batches refused whole"] = sum(refused)
        return +ledger

    def close(self) -> None:
        processes.end_group(self.process)
        self._log.close()
        self.workers.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
