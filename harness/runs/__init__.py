"""Code that runs inside a vLLM tree or engine, in a child process.

The harness's own process never imports vLLM: it starts a child with the tree
first on its path (harness.trees.env) and talks to it through
harness.runs.worker, or runs pytest or an engine there.
"""
