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
    endpoint: str, payloads: list[bytes], stop: threading.Event, numbers=None
):
    """A publisher that connects, as vLLM's does for tcp://HOST:PORT, and
    sends each payload once, numbered 0, 1, 2, ... (or ``numbers``), as soon
    as the subscriber has subscribed; then it waits to be stopped.

    It is an XPUB socket (a PUB that also receives subscriptions), so it
    knows when the subscriber is there: a PUB drops what it sends before.
    """
    publisher = zmq.Context.instance().socket(zmq.XPUB)
    publisher.setsockopt(zmq.LINGER, 0)
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


def start_publisher(endpoint: str, payloads, numbers=None):
    """The publisher in a thread; set the returned event, then join it."""
    stop = threading.Event()
    thread = threading.Thread(
        target=publish_like_vllm, args=(endpoint, payloads, stop, numbers)
    )
    thread.start()
    return stop, thread


def run_with_publisher(args, payloads, numbers=None) -> subprocess.CompletedProcess:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *args, "--zmq", endpoint],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop, thread = start_publisher(endpoint, payloads, numbers)
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        stop.set()
        thread.join()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
