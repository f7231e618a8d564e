"""What the tests of the series on an installed vLLM share."""

import pytest
from support.installed import install_release, release_target


@pytest.fixture
def site(tmp_path, monkeypatch):
    """vllm 9.9.9 installed in tmp_path/site, target t its release."""
    release_target(tmp_path, monkeypatch)
    site = tmp_path / "site"
    install_release(site)
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site
