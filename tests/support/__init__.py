"""What the harness's tests share: event builders and tiny vLLM-like trees."""

from pathlib import Path

# The checkout these tests belong to.
REPO_ROOT = Path(__file__).resolve().parents[2]
