"""A ZMQ publisher that behaves like vLLM's, for the verbs that subscribe."""

import socket
import subprocess
import sys
import threading
import time

import zmq

from support import REPO_ROOT


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def publish_like_vllm(endpoint: str, payloads: list[bytes], stop: threading.Event):
    """A PUB socket that connects, as vLLM's publisher does for tcp://HOST:PORT.

    PUB drops messages until the subscriber is attached, so it repeats the
    sequence (restarting the sequence numbers) until told to stop.
    """
    publisher = zmq.Context.instance().socket(zmq.PUB)
    publisher.setsockopt(zmq.LINGER, 0)
    publisher.connect(endpoint)
    while not stop.is_set():
        for seq, data in enumerate(payloads):
            publisher.send_multipart((b"kv", seq.to_bytes(8, "big"), data))
        time.sleep(0.05)
    publisher.close()


def run_with_publisher(args, payloads) -> subprocess.CompletedProcess:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    stop = threading.Event()
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *args, "--zmq", endpoint],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # let the subscriber bind
    thread = threading.Thread(target=publish_like_vllm, args=(endpoint, payloads, stop))
    thread.start()
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        stop.set()
        thread.join()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
