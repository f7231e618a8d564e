"""check-stream told the tier (--tier, --python) and the consumer (--for),
run as users run it, on captures and live."""

import sys

import pytest
from support.cli import harness
from support.events import cleared, payload, removed, stored
from support.installed import install_release, release_target, run_verb
from support.publisher import run_with_publisher

# The e2e model's layout (group 0 Mamba, group 1 attention), 4-token
# blocks: the Mamba group stores a block after one skipped before the call
# (K6's shape: its parent was never announced, its tokens span its hash);
# the attention group is clean.
HYBRID_PAYLOADS = [
    payload(
        stored([1], None, group=0, kind="mamba", block_size=4),
        stored([3], 2, group=0, kind="mamba", block_size=4),
        stored([1], None, group=1, kind="full_attention", block_size=4),
        stored([3], 1, group=1, kind="full_attention", block_size=4),
    ),
    payload(removed([3, 1], group=1), removed([3, 1], group=0)),
]
HYBRID = b"".join(HYBRID_PAYLOADS)


def check(tmp_path, data: bytes, *args):
    path = tmp_path / "kv.bin"
    path.write_bytes(data)
    return harness("check-stream", str(path), *args)


def test_a_k6_store_under_the_strict_tier_is_kept_not_a_violation(tmp_path):
    result = check(tmp_path, HYBRID, "--tier", "strict")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ", 0 violations\n" in result.stdout
    assert (
        "  kept as released by the strict tier, not violations of its contract: "
        "C1 1, class K6: "
    ) in result.stdout
    assert "    GPU group 0 (mamba): none; kept as released (K6): C1 1\n" in (
        result.stdout
    )
    assert "    GPU group 1 (full_attention): none\n" in result.stdout


@pytest.mark.parametrize("tier", [None, "default"])
def test_without_the_strict_tier_a_k6_store_is_judged_as_today(tmp_path, tier):
    result = check(tmp_path, HYBRID, *(("--tier", tier) if tier else ()))
    assert result.returncode == 1
    assert ", 1 violations\n" in result.stdout
    assert "  C1 parent closure: 1\n" in result.stdout
    assert "(K6's shape)\n" in result.stdout
    assert "    GPU group 0 (mamba): C1 1\n" in result.stdout
    said = "give --tier strict" if tier is None else "the default tier does not fix K4"
    assert said in result.stdout


def test_a_k6_store_that_also_breaks_c3_is_never_kept(tmp_path):
    data = payload(stored([3], 2, group=0, kind="mamba", tokens=[0]))
    result = check(tmp_path, data, "--tier", "strict")
    assert result.returncode == 1
    assert "  C1 parent closure: 1\n" in result.stdout
    assert "kept as released" not in result.stdout


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("hash-set", 0),  # needs no parent
        ("content-tree", 1),  # reads every group, refuses the store
        ("dynamo", 0),  # its relay drops the Mamba group
        ("llm-d-model", 0),  # it skips the Mamba group's stores
        ("vllm-router", 1),  # it reads group 0, the Mamba group here
    ],
)
def test_for_a_consumer_the_status_says_whether_it_can_take_the_stream(
    tmp_path, name, status
):
    size = ("--block-size", "4") if name == "dynamo" else ()
    result = check(tmp_path, HYBRID, "--for", name, *size)
    assert result.returncode == status, result.stdout + result.stderr
    assert f", {status} violations for {name}\n" in result.stdout
    assert f"  for {name} (" in result.stdout


def test_the_report_says_what_a_consumer_left_out(tmp_path):
    result = check(tmp_path, HYBRID, "--for", "dynamo", "--block-size", "4")
    assert "    GPU group 0 (mamba): not read by dynamo (3 events)\n" in result.stdout
    assert "  left out: 3 event(s): dynamo drops mamba groups\n" in result.stdout
    hash_set = check(tmp_path, HYBRID, "--for", "hash-set")
    assert (
        "  C1 parent closure: 1, not judged: hash-set does not read it\n"
        in hash_set.stdout
    )


def test_dynamo_drops_stores_of_another_block_size(tmp_path):
    # A hash-block store (2 tokens) whose parent was never announced: the
    # relay empties it at a block size of 4.
    data = payload(
        stored([1], None, block_size=4, kind="full_attention"),
        stored([9], 8, block_size=2, kind="full_attention"),
        removed([9, 1]),
    )
    at_4 = check(tmp_path, data, "--for", "dynamo", "--block-size", "4")
    assert at_4.returncode == 0, at_4.stdout
    assert "  left out: 1 event(s): stores of another block size" in at_4.stdout
    at_2 = check(tmp_path, data, "--for", "dynamo", "--block-size", "2")
    assert at_2.returncode == 1


@pytest.mark.parametrize(("name", "status"), [("hash-set", 0), ("content-tree", 1)])
def test_a_store_under_a_hash_a_reset_cleared(tmp_path, name, status):
    data = payload(stored([1], None)) + payload(cleared(), stored([2], 1))
    assert check(tmp_path, data, "--for", name).returncode == status


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--for", "aibrix"], "argument --for: invalid choice: 'aibrix'"),
        (["--for", "dynamo"], "--for dynamo needs --block-size N"),
        (["--block-size", "4"], "--block-size goes with --for dynamo"),
        (["--tier", "strict", "--python", "py"], "not allowed with argument"),
        (["--tier", "lenient"], "argument --tier: invalid choice"),
    ],
)
def test_a_wrong_consumer_or_tier_is_a_usage_error(tmp_path, args, why):
    result = check(tmp_path, HYBRID, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert why in result.stderr.splitlines()[-1]


def test_live_the_status_answers_for_the_consumer_as_for_a_capture():
    for name, status in (("hash-set", 0), ("content-tree", 1)):
        result = run_with_publisher(
            ["check-stream", "--timeout", "20", "--max-events", "6", "--for", name],
            HYBRID_PAYLOADS,
            binds=True,
        )
        assert result.returncode == status, result.stdout + result.stderr
        assert f", {status} violations for {name}\n" in result.stdout


def test_live_joined_late_without_a_reset_is_incomplete_for_a_consumer_too():
    late = [payload(stored([12], 11)), payload(stored([13], 12))]
    result = run_with_publisher(
        ["check-stream", "--timeout", "20", "--max-events", "2", "--for", "hash-set"],
        late,
        [5, 6],
        binds=True,
    )
    assert result.returncode == 16
    assert "no AllBlocksCleared followed to start from" in result.stderr


@pytest.fixture
def strict_site(tmp_path, monkeypatch):
    """vllm 9.9.9 installed in tmp_path/site, target t its release, whose
    strict tier fixes what main's does."""
    release_target(tmp_path, monkeypatch)
    pins = tmp_path / "harness" / "targets.toml"
    pins.write_text(
        pins.read_text().replace(
            'strict = ["K1", "K2"]', 'strict = ["K1", "K2", "K3", "K4", "K7"]'
        )
    )
    site = tmp_path / "site"
    install_release(site)
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


def test_the_receipt_of_the_engines_python_says_the_tier(strict_site, tmp_path, capsys):
    path = tmp_path / "kv.bin"
    path.write_bytes(HYBRID)
    python = sys.executable
    status, out, _ = run_verb(capsys, "install", "--target", "t", "--tier", "strict")
    assert status == 0, out
    status, out, _ = run_verb(capsys, "check-stream", str(path), "--python", python)
    assert status == 0, out
    assert "  tier: strict (the receipt of vllm 9.9.9" in out
    assert "kept as released by the strict tier" in out
    pool = strict_site / "vllm/v1/core/block_pool.py"
    pool.write_text(pool.read_text() + "# changed by hand\n")
    status, _, err = run_verb(capsys, "check-stream", str(path), "--python", python)
    assert status == 19  # the tier is not whole: the engine does not run it
    assert "is not whole" in err
    pool.write_text(pool.read_text().replace("# changed by hand\n", ""))
    assert run_verb(capsys, "uninstall")[0] == 0
    status, out, _ = run_verb(capsys, "check-stream", str(path), "--python", python)
    assert status == 1
    assert "  tier: released (vllm 9.9.9" in out
