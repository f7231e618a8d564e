"""Conformance harness for the vLLM KV-cache event stream patch series."""
