"""A ZMQ publisher that behaves like vLLM's, for the verbs that subscribe."""

import socket
import subprocess
import sys
import threading

import zmq

from support import REPO_ROOT


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def publish_like_vllm(
    endpoint: str,
    payloads: list[bytes],
    stop: threading.Event,
    numbers=None,
    binds: bool = False,
):
    """A publisher that connects, as vLLM's does for tcp://HOST:PORT (or
    binds, as it does for its default tcp://*:5557), and sends each payload
    once, numbered 0, 1, 2, ... (or ``numbers``), as soon as the subscriber
    has subscribed; then it waits to be stopped.

    It is an XPUB socket (a PUB that also receives subscriptions), so it
    knows when the subscriber is there: a PUB drops what it sends before.
    """
    publisher = zmq.Context.instance().socket(zmq.XPUB)
    publisher.setsockopt(zmq.LINGER, 0)
    if binds:
        publisher.bind(endpoint)
    else:
        publisher.connect(endpoint)
    while not stop.is_set():
        if publisher.poll(50):
            publisher.recv()  # the subscription
            numbers = range(len(payloads)) if numbers is None else numbers
            for seq, data in zip(numbers, payloads, strict=True):
                publisher.send_multipart((b"kv", seq.to_bytes(8, "big"), data))
            break
    stop.wait()
    publisher.close()


def start_publisher(endpoint: str, payloads, numbers=None, binds=False):
    """The publisher in a thread; set the returned event, then join it."""
    stop = threading.Event()
    thread = threading.Thread(
        target=publish_like_vllm, args=(endpoint, payloads, stop, numbers, binds)
    )
    thread.start()
    return stop, thread


def run_with_publisher(
    args, payloads, numbers=None, binds=False
) -> subprocess.CompletedProcess:
    """The verb against a publisher that connects to it (``--listen``), or
    one that binds, as vLLM's default does (``--zmq``)."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    option = "--zmq" if binds else "--listen"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *args, option, endpoint],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop, thread = start_publisher(endpoint, payloads, numbers, binds)
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        stop.set()
        thread.join()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def publish_with_replay(
    endpoint: str,
    replay_endpoint: str,
    buffered: list[tuple[int, bytes]],
    live: list[tuple[int, bytes]],
    stop: threading.Event,
    flood: bytes | None = None,
    binds: bool = True,
):
    """vLLM's publisher with a replay endpoint (a bound PUB and a ROUTER):
    ``buffered`` were sent before anyone subscribed and are kept for replay,
    ``live`` go out once the subscriber is there; a replay request gets the
    kept messages from its start on, then the end marker, as
    ZmqEventPublisher._service_replay sends them. With ``flood``, a hostile
    one: a replay request gets its start message, payload ``flood``, sent
    again and again until the publisher is stopped, and no end marker.
    Without ``binds``, the PUB connects to ``endpoint``, as vLLM's does to a
    tcp://HOST:PORT endpoint (the e2e session's), and the subscriber binds."""
    context = zmq.Context.instance()
    publisher = context.socket(zmq.XPUB)
    router = context.socket(zmq.ROUTER)
    for each in (publisher, router):
        each.setsockopt(zmq.LINGER, 0)
    if flood is not None:
        router.setsockopt(zmq.SNDHWM, 4)  # what the subscriber has not read waits
    if binds:
        publisher.bind(endpoint)
    else:
        publisher.connect(endpoint)
    router.bind(replay_endpoint)
    kept = list(buffered)
    poller = zmq.Poller()
    poller.register(publisher, zmq.POLLIN)
    poller.register(router, zmq.POLLIN)
    while not stop.is_set():
        ready = dict(poller.poll(50))
        if publisher in ready:
            publisher.recv()
            for seq, data in live:
                publisher.send_multipart((b"kv", seq.to_bytes(8, "big"), data))
                kept.append((seq, data))
        if router in ready and flood is not None:
            client, _, start = router.recv_multipart()
            while not stop.is_set():
                if router.poll(50, zmq.POLLOUT):
                    router.send_multipart((client, b"", b"kv", start, flood))
        elif router in ready:
            client, _, start = router.recv_multipart()
            for seq, data in kept:
                if seq >= int.from_bytes(start, "big"):
                    router.send_multipart(
                        (client, b"", b"kv", seq.to_bytes(8, "big"), data)
                    )
            router.send_multipart(
                (client, b"", b"", (-1).to_bytes(8, "big", signed=True), b"")
            )
    publisher.close()
    router.close()


def run_with_replay(args, buffered, live, flood=None) -> subprocess.CompletedProcess:
    """The verb with --zmq and --replay against `publish_with_replay`."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    replay = f"tcp://127.0.0.1:{free_port()}"
    stop = threading.Event()
    thread = threading.Thread(
        target=publish_with_replay,
        args=(endpoint, replay, buffered, live, stop, flood),
    )
    thread.start()
    try:
        return subprocess.run(
            [*(sys.executable, "-m", "harness", *args), "--zmq", endpoint]
            + ["--replay", replay],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        stop.set()
        thread.join()
