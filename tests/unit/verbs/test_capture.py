"""The capture verb, against a publisher that behaves like vLLM's."""

from support.events import payload, stored
from support.publisher import run_with_publisher


def test_capture_writes_payloads_back_to_back(tmp_path):
    out = tmp_path / "captured.bin"
    payloads = [payload(stored([1], None)), payload(stored([2], 1))]
    result = run_with_publisher(
        ["capture", "--out", str(out), "--max-events", "2", "--timeout", "30"],
        payloads,
    )
    assert result.returncode == 0, result.stderr
    assert "2 events" in result.stderr
    assert out.read_bytes() in {payloads[0] + payloads[1], payloads[1] + payloads[0]}
