"""Test suites run with pytest in a vLLM tree: upstream's selection and the
project's conformance suite, and where a verdict was taken."""
