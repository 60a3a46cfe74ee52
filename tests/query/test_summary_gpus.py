"""The GPU lines of `traceql summary` (queries/_internal/gpu_busy.sql): every GPU of the device
view, idle ones too, and every GPU that ran operations though the device view lacks it."""

from __future__ import annotations

import sqlite3

import traceql
from fixtures.gen_nsys import generate


def test_idle_gpus_and_gpus_the_device_view_lacks(tmp_path):
    src = tmp_path / "gen.sqlite"
    generate(src, layout="3", kernels=200, seed=3)
    db = tmp_path / "ws.duckdb"
    traceql.ingest([src], db=db)
    with sqlite3.connect(src) as lite:  # the kernels' time and count per GPU, from the export itself
        per_gpu = {dev: (n, ns) for dev, n, ns in lite.execute(
            'SELECT deviceId, count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId')}
    with traceql.open(db, write=True) as ws:
        gpus = sorted(per_gpu)
        assert len(gpus) >= 1
        lacked = gpus[0]
        # the device view loses a GPU that ran kernels, and gains one that ran nothing
        ws.sql(f"DELETE FROM device WHERE device_id = {lacked}")
        ws.sql("INSERT INTO device (trace_id, device_id, name) VALUES (1, 77, 'idle GPU')")
        span = ws.sql("SELECT duration FROM trace").to_pylist()[0]["duration"]
        busy = {r["device_id"]: r for r in ws.sql("SELECT * FROM device_busy").to_pylist()}
        rows = ws.summary().gpus.to_pylist()
    assert [r["device_id"] for r in rows] == sorted(set(gpus) | {77})
    by_id = {r["device_id"]: r for r in rows}
    assert by_id[lacked]["device"] is None
    for dev in gpus:
        r = by_id[dev]
        assert r["busy_ns"] == busy[dev]["busy_ns"] > 0 and r["ops"] == busy[dev]["ops"] >= per_gpu[dev][0]
        assert r["idle_ns"] == span - r["busy_ns"] and r["span_ns"] == span
        assert r["busy_pct"] == 100.0 * r["busy_ns"] / span
    idle = by_id[77]
    assert (idle["device"], idle["ops"], idle["busy_ns"], idle["busy_pct"], idle["idle_ns"]) == \
        ("idle GPU", 0, 0, 0.0, span)
