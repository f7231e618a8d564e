from harness import cache


def test_cache_dir_follows_override_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "own"))
    assert cache.root() == tmp_path / "own"
    monkeypatch.delenv("HARNESS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.root() == tmp_path / "xdg" / "vllm-kv-series"
