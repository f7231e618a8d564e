"""Real consumers of vLLM's KV events, fed the workloads' streams.

- `dynamo`: NVIDIA Dynamo's radix tree (ai-dynamo-runtime), through an
  adapter that turns vLLM's events into the tree's JSON events;
- `replay`: the seeded workloads run in a pristine and a patched tree, each
  stream applied to a fresh consumer, rejections counted per cause;
- `fidelity`: the same workloads with probe requests, the hits a router
  predicts from each stream against the engine's own (the content-tree
  router of harness.contract.router, and Dynamo's tree);
- `real_routers`: the same probes asked of every consumer: the hash-set and
  the content-tree routers (harness.contract.routers), a model of llm-d's
  rules (`llmd_model`) and real routers through their own code
  (`dynamo_relay`: Dynamo's relay and indexer; `vllm_router`: vllm-router's
  kv_aware), the streams replayed by `publisher`;
  `engine_routers`: the same routers subscribed to a real engine.
"""

# The report's plan: the seed example, then each workload config with seeds
# 0..DEFAULT_SEEDS-1 and DEFAULT_OPS operations.
DEFAULT_SEEDS = 3
DEFAULT_OPS = 300
# Probe requests per quiet point for the router-fidelity table.
DEFAULT_PROBES = 4
# The real routers (harness.consumers.real_routers.ROUTERS), named here so
# that a verb's --help imports nothing.
ROUTER_NAMES = ("dynamo", "vllm-router")
# Every consumer `fidelity --router` measures: the index routers and the
# llm-d model run in the harness's process, the real routers from their wheels.
CONSUMER_NAMES = ("hash-set", "content-tree", "llm-d-model", *ROUTER_NAMES)
