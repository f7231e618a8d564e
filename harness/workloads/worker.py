"""A child process inside a vLLM tree that answers requests, one per line.

The protocol: the parent writes one JSON object per line to the child's
stdin; the child answers each with one JSON object on one line of stdout,
``{"ok": true, ...}`` with the handler's result, or ``{"ok": false, "error":
"..."}``. vLLM logs to stdout, so the child keeps a private copy of stdout
for its replies and points stdout at stderr, which the parent sends to a log.
Importing a vLLM tree takes seconds, so a parent that runs many requests
keeps one child per tree.
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import WorkloadError
from harness.trees.env import STREAM_ENV, tree_env

Handler = Callable[[dict[str, Any]], dict[str, Any] | None]
LOG_TAIL_LINES = 20


def serve(handler: Handler) -> int:
    """In the child: answer requests from stdin until it closes."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # The log shows what the child printed up to a failure.
    sys.stdout.reconfigure(line_buffering=True)
    for number, line in enumerate(sys.stdin, 1):
        try:
            try:
                request = json.loads(line)
            except RecursionError:
                raise ValueError("nested deeper than the parser recurses") from None
        except ValueError as exc:
            error = f"request {number} is not JSON ({exc}): {line[:80]!r}"
            reply = {"ok": False, "error": error}
        else:
            reply = _answer(handler, number, request)
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


def _answer(handler: Handler, number: int, request: Any) -> dict[str, Any]:
    if not isinstance(request, dict):
        kind = type(request).__name__
        return {
            "ok": False,
            "error": f"request {number} is a JSON {kind}, not an object",
        }
    try:
        return {"ok": True, **(handler(request) or {})}
    except Exception as exc:  # reported to the parent, which fails
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


class TreeWorker:
    """In the parent: a child running ``command`` with ``tree`` first on its
    path and the hash seed pinned (STREAM_ENV), its stderr (vLLM's log
    included) written to ``log``."""

    def __init__(self, tree: Path, command: list[str], log: Path, **env: str):
        self.tree = tree
        self.log = log
        self._log_file = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=tree_env(tree, **{**STREAM_ENV, **env}),
            text=True,
        )

    def submit(self, request: dict[str, Any]) -> None:
        """Send a request; `wait` reads its reply (so two workers can run at
        once)."""
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def wait(self) -> dict[str, Any]:
        """The reply to the oldest request not yet answered."""
        line = self.process.stdout.readline()
        reply = json.loads(line) if line else {"error": "the worker exited"}
        if not reply.get("ok"):
            tail = "\n".join(self.log.read_text().splitlines()[-LOG_TAIL_LINES:])
            raise WorkloadError(f"{self.tree}: {reply['error']}\n{tail}")
        return reply

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.submit(request)
        return self.wait()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self._log_file.close()

    def __enter__(self) -> "TreeWorker":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
