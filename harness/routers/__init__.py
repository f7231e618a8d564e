"""KV-aware routers fed vLLM's KV events: the reference router, every
adapter, the replays and the one loop that measures them.

- `router`: the content-tree router's index (no vLLM), and `fidelity`: how
  well it predicts the engine's hits on a workload's probes;
- `loop`: one loop that measures any `Router`, and the hash-set and
  content-tree routers built on `router`;
- `dynamo`: NVIDIA Dynamo's radix tree (ai-dynamo-runtime), through an
  adapter that turns vLLM's events into the tree's JSON events;
- `replay`: the seeded workloads run in a pristine and a patched tree, each
  stream applied to a fresh consumer, rejections counted per cause;
- `fidelity_table`: the same workloads with probe requests, the hits a router
  predicts from each stream against the engine's own (the content-tree
  router, and Dynamo's tree);
- `real_routers`: the same probes asked of every consumer: the hash-set and
  the content-tree routers, a model of llm-d's rules (`llmd_model`) and real
  routers through their own code (`dynamo_relay`: Dynamo's relay and indexer;
  `vllm_router`: vllm-router's kv_aware), the streams replayed by
  `publisher`; harness.engine.engine_routers subscribes the same routers to
  a real engine, each behind the router protocol;
- `protocol` and `router_child`: the router protocol (docs/router-protocol.md)
  by which any router, in any language, is scored on a real engine: its
  messages and checks, and the harness's side of a router child's pipes;
- `readings`: what each of those consumers reads of the stream, which
  ``check-stream --for NAME`` judges;
- `designs`: an upstream pull request's design beside a change, read by a
  consumer that ignores the ``skipped_*`` fields and one that reads them,
  and into every consumer (export's comments, benchmarks/upstream_designs.py).
"""

# The report's plan: the seed example, then each workload config with seeds
# 0..DEFAULT_SEEDS-1 and DEFAULT_OPS operations.
DEFAULT_SEEDS = 3
DEFAULT_OPS = 300
# Probe requests per quiet point for the router-fidelity table.
DEFAULT_PROBES = 4
# The real routers (harness.routers.real_routers.ROUTERS), named here so
# that a verb's --help imports nothing.
ROUTER_NAMES = ("dynamo", "vllm-router")
# The index routers (harness.routers.loop), measured on every run.
INDEX_NAMES = ("hash-set", "content-tree")
# Every consumer `fidelity --router` measures and `score --router` runs: the
# index routers and the llm-d model run in the harness's process (`score`: in
# a shim's), the real routers from their wheels.
CONSUMER_NAMES = (*INDEX_NAMES, "llm-d-model", *ROUTER_NAMES)
