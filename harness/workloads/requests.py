"""Requests and seeded prompts, as upstream's prefix-cache tests build them."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

VOCAB = 8  # small, so random suffixes still share prefixes now and then


def make_request(
    request_id: str,
    token_ids: list[int],
    hash_block_size: int,
    report_mode: str = "incremental",
) -> Any:
    """A request as upstream's prefix-cache tests build it (sha256 hashing),
    in the KV-event ``report_mode`` a client asks for with
    ``extra_args={"kv_cache_report_mode": ...}`` (vLLM 0.26 on reads it)."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request

    extra_args = {"kv_cache_report_mode": report_mode}
    sampling_params = SamplingParams(max_tokens=1 << 20, extra_args=extra_args)
    sampling_params.update_from_generation_config({}, eos_token_id=VOCAB + 1)
    return Request(
        request_id=request_id,
        prompt_token_ids=token_ids,
        mm_features=None,
        sampling_params=sampling_params,
        pooling_params=None,
        block_hasher=get_request_block_hasher(hash_block_size, sha256),
    )


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Prompts:
    """Seeded prompts that start from a few shared documents, so requests
    share prefixes of any length."""

    def __init__(self, rng: random.Random, max_length: int, hash_block_size: int):
        self.rng = rng
        # The KV-event report mode every request asks for
        # (harness.workloads.drivers.in_full_report_mode sets "full").
        self.report_mode = "incremental"
        self.max_length = max_length
        self.hash_block_size = hash_block_size
        self.documents = [
            [rng.randrange(VOCAB) for _ in range(max_length)] for _ in range(3)
        ]
        self.issued = 0
        # Called with each prompt's token ids (probes sample from them).
        self.on_issue: Callable[[list[int]], None] | None = None

    def next_request(self) -> Any:
        length = self.rng.randint(1, self.max_length)
        shared = self.rng.randint(0, length)
        document = self.rng.choice(self.documents)
        tokens = document[:shared] + [
            self.rng.randrange(VOCAB) for _ in range(length - shared)
        ]
        self.issued += 1
        if self.on_issue is not None:
            self.on_issue(tokens)
        return make_request(
            str(self.issued), tokens, self.hash_block_size, self.report_mode
        )
