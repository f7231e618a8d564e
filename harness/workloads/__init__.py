"""Seeded and scripted workloads that drive a vLLM tree's own KV-cache code,
their drivers, and the child process that runs them inside a tree.

The harness's own process never imports vLLM: it starts a child with the tree
first on its path (harness.trees.env) and talks to it through
harness.workloads.worker.
"""
