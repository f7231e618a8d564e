"""A real vLLM engine session: the engine in a child process, its captured
stream, the judgement of each capture, and the end-to-end run over the tiers."""
