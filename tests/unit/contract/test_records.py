"""Workload records survive the file they are written to."""

from support.events import labelled, run_start, stored

from harness.contract.records import (
    BookkeepingSample,
    OpRecord,
    PoolSnapshot,
    Probe,
    ProbeRecord,
    ProbeSetup,
    RunEnd,
    ServedRequest,
    encode_record,
    read_records,
)

START = run_start(seed=7, ops=1)


def test_every_kind_of_record_reads_back_as_written(tmp_path):
    records = [
        START,
        OpRecord(0, "new", [labelled("full@full_attention", stored([1], None))]),
        PoolSnapshot(0, {0: [1, b"\x01" * 32]}),
        BookkeepingSample(0, {"_ancestry_ref_cnt": 3}),
        BookkeepingSample(1, None),
        ProbeSetup(probes_per_op=2, seed=7, alignment=2, sliding_windows=[None, 4]),
        ProbeRecord(0, [Probe("truncation", [1, 2, 3], [1, b"\x02" * 32], 2, [2, 0])]),
        RunEnd(drained=True),
        ServedRequest("shared", [1, 2, 3, 4], [9, 8], 1700000000.5, 2),
    ]
    path = tmp_path / "run.rec"
    path.write_bytes(b"".join(encode_record(record) for record in records))
    assert read_records(path) == records
