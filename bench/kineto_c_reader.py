"""What a compiled Kineto reader would give: a measurement prototype, not a part of traceql.

    python bench/kineto_c_reader.py bench/data/kineto_1000000.json.gz --cycles 2

traceql reads Kineto JSON with msgspec into a Python object per event and builds Arrow columns
from those objects (traceql/sources/kineto.py): about 1.3 us an event in Python, most of
staging's time, while issue 34 asks for an ingest within 2x the decode alone. This script compiles a small C scanner
(C_SOURCE below, with the machine's `cc`, into a temporary folder; loaded by ctypes) that finds
each event's fields in a decompressed block and copies them into Arrow buffers, with no Python
object per value, and measures, on one file:

1. blocks: reading, decoding and building the Arrow blocks of every event, traceql's way and
   the prototype's, in this process (no DuckDB);
2. ingest (--cycles N): the typed msgspec decode of the whole document alone, `traceql ingest`
   with the prototype in place of traceql's block reader, and `traceql ingest` as is, in turn,
   each a child process (wall time, and CPU time by os.wait4: bench/run.py's run_child).

The prototype is not a reader to ship: it does not unescape strings (a name with a backslash
escape stays as written, its quotes removed), it keeps a pid, tid or id that is neither an integer
nor a string as its JSON text, and a C parser of untrusted input would need fuzzing. With
--same-rows TRACE... it ingests each trace both ways and compares every contract table row for
row: on the 13 Kineto traces of ../shared/traces they are the same (28 Nov). bench/FIRST.md
has the figures.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kineto as kineto_bench  # noqa: E402 - bench/kineto.py: its parse-only children
import run as harness  # noqa: E402 - bench/run.py: run_child

REPO = harness.REPO
sys.path.insert(0, str(REPO))
# the typed msgspec decode of the whole document, as bench/KINETO.md measures it
DECODE = "msgspec typed, raw ts/dur/args (traceql's decode)"

C_SOURCE = r"""
#include <stdint.h>
#include <string.h>
enum { PH, CAT, NAME, PID, TID, TS, DUR, ID, ARGS, NF };
static const char* ws(const char* p, const char* e) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}
static const char* skip_string(const char* p, const char* e) {  /* p at the opening quote */
    for (p++; p < e;) {
        const char* q = memchr(p, '"', e - p);
        if (!q) return 0;
        const char* b = q; int n = 0;
        while (b > p && b[-1] == '\\') { b--; n++; }
        if (!(n & 1)) return q + 1;
        p = q + 1;
    }
    return 0;
}
static const char* skip_value(const char* p, const char* e) {
    if (p >= e) return 0;
    if (*p == '"') return skip_string(p, e);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < e) {
            if (*p == '"') { if (!(p = skip_string(p, e))) return 0; continue; }
            if (*p == '{' || *p == '[') depth++;
            else if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
            p++;
        }
        return 0;
    }
    while (p < e && !strchr(",}] \n\r\t", *p)) p++;
    return p < e ? p : 0;
}
static int field_of(const char* k, long n) {
    static const char* names[NF] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"};
    for (int f = 0; f < NF; f++) if ((long)strlen(names[f]) == n && !memcmp(k, names[f], n)) return f;
    return -1;
}
/* the complete events at the start of buf (after an optional comma): per event NF (start, length)
   pairs, length -1 when absent; *used: the bytes they take */
long scan(const char* buf, long n, long max_events, int64_t* spans, long* used) {
    const char *p = buf, *e = buf + n, *last = buf;
    long k = 0;
    while (k < max_events) {
        p = ws(p, e);
        if (p < e && *p == ',') p = ws(p + 1, e);
        if (p >= e || *p != '{') break;
        int64_t* s = spans + k * NF * 2;
        for (int i = 0; i < NF; i++) { s[2 * i] = 0; s[2 * i + 1] = -1; }
        int closed = 0;
        for (p++;;) {
            p = ws(p, e);
            if (p >= e) break;
            if (*p == '}') { p++; closed = 1; break; }
            if (*p == ',') p = ws(p + 1, e);
            if (p >= e || *p != '"') break;
            const char* key = p + 1;
            const char* key_end = skip_string(p, e);
            if (!key_end) break;
            p = ws(key_end, e);
            if (p >= e || *p != ':') break;
            const char* v = ws(p + 1, e);
            const char* v_end = skip_value(v, e);
            if (!v_end) break;
            int f = field_of(key, key_end - 1 - key);
            if (f >= 0) { s[2 * f] = v - buf; s[2 * f + 1] = v_end - v; }
            p = v_end;
        }
        if (!closed) break;
        k++;
        last = p;
    }
    *used = last - buf;
    return k;
}
/* field f of n events as Arrow string data and offsets (out NULL: only the size), a string
   without its quotes when unquote. Kept only where want[k] (want NULL: everywhere), else ''.
   valid (an Arrow validity bitmap, NULL: none): 0 where absent, null or not wanted */
long gather(const char* buf, const int64_t* spans, long n, int f, int unquote, const uint8_t* want,
            char* out, int64_t* offs, uint8_t* valid) {
    int64_t o = 0;
    if (out) offs[0] = 0;
    if (valid) memset(valid, 0, (n + 7) / 8);
    for (long k = 0; k < n; k++) {
        int64_t len = spans[k * NF * 2 + 2 * f + 1];
        const char* v = buf + spans[k * NF * 2 + 2 * f];
        int here = len > 0 && !(len == 4 && !memcmp(v, "null", 4)) && (!want || want[k]);
        if (!here) len = 0;
        else if (unquote && len >= 2 && v[0] == '"') { v++; len -= 2; }
        if (out) { memcpy(out + o, v, len); offs[k + 1] = o + len; }
        if (valid && here) valid[k >> 3] |= 1 << (k & 7);
        o += len;
    }
    return o;
}
/* field f as a 64-bit integer: a JSON integer, or a string of at most 18 digits (an optional '-',
   blanks around) read as one; ok (a validity bitmap) 0 otherwise. text[k] = 1 when the value is a
   string or another value that is not an integer (traceql keeps those as text too) */
void ints(const char* buf, const int64_t* spans, long n, int f, int64_t* out, uint8_t* ok, uint8_t* text) {
    memset(ok, 0, (n + 7) / 8);
    for (long k = 0; k < n; k++) {
        int64_t len = spans[k * NF * 2 + 2 * f + 1], x = 0;
        const char* v = buf + spans[k * NF * 2 + 2 * f];
        int quoted = len >= 2 && v[0] == '"';
        const char *p = v + quoted, *e = v + (len > 0 ? len : 0) - quoted;
        if (quoted) { while (p < e && *p == ' ') p++; while (e > p && e[-1] == ' ') e--; }
        int neg = p < e && *p == '-';
        p += neg;
        int good = len > 0 && e > p && e - p <= 18;
        for (const char* q = p; good && q < e; q++) { if (*q < '0' || *q > '9') good = 0; else x = x * 10 + (*q - '0'); }
        out[k] = good ? (neg ? -x : x) : 0;
        if (good) ok[k >> 3] |= 1 << (k & 7);
        text[k] = len > 0 && !(len == 4 && !memcmp(v, "null", 4)) && (quoted || !good);
    }
}
"""

NF = 9
MAX_EVENTS = 200_000  # per scan call
FIELDS = dict(ph=0, cat=1, name=2, pid=3, tid=4, ts=5, dur=6, id=7, args=8)


def load_library(folder: Path):
    src, lib = folder / "kineto_scan.c", folder / "kineto_scan.so"
    src.write_text(C_SOURCE)
    p = subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"cc failed:\n{p.stderr}")
    c = ctypes.CDLL(str(lib))
    c.scan.restype = ctypes.c_long
    c.scan.argtypes = [ctypes.c_char_p, ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.POINTER(ctypes.c_long)]
    c.gather.restype = ctypes.c_long
    c.gather.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_int,
                         ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    c.ints.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_void_p,
                       ctypes.c_void_p, ctypes.c_void_p]
    return c


def _addr(b: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(b)).from_buffer(b))


class _Block:
    """One scanned block: the text, each event's field spans, the number of events (len(), as
    traceql's stage() counts a list of events)."""

    def __init__(self, data: bytes, spans: bytearray, n: int):
        self.data, self.spans, self.n = data, spans, n

    def __len__(self) -> int:
        return self.n


class Blocks:
    """The prototype's block reader: _events and _batch of traceql.sources.kineto, by the C scanner."""

    def __init__(self, lib):
        import pyarrow as pa

        from traceql.sources import kineto

        self.lib, self.pa, self.k = lib, pa, kineto
        self.kept = pa.array(sorted(kineto.ARGS_KEPT))

    def events(self, fh, path, hdr, rest):
        data, eof, used = rest, False, ctypes.c_long()
        while True:
            if not eof:
                more = self.k._read(fh, self.k.BLOCK)
                eof, data = not more, data + more
            spans = bytearray(MAX_EVENTS * NF * 16)
            n = self.lib.scan(data, len(data), MAX_EVENTS, _addr(spans), ctypes.byref(used))
            if n:
                yield _Block(data, spans, n)
                data = data[used.value:]
            elif eof:  # the array's end and the members after it, as traceql reads them
                yield from self.k._last(data.lstrip(b", \n\r\t"), path, hdr)
                return

    def _text(self, data, spans, n, f, unquote, nulls, want=None):
        """Field F as a string column: NULL where absent or null when NULLS, else ''; WANT (a
        byte per event): '' (or NULL) where it is 0."""
        pa = self.pa
        w = None if want is None else _addr(want)
        size = self.lib.gather(data, _addr(spans), n, f, unquote, w, None, None, None)
        out, offs = bytearray(max(size, 1)), bytearray(8 * (n + 1))
        valid = bytearray((n + 7) // 8) if nulls else None
        self.lib.gather(data, _addr(spans), n, f, unquote, w, _addr(out), _addr(offs),
                        None if valid is None else _addr(valid))
        return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offs), pa.py_buffer(memoryview(out)[:size]),
                                                None if valid is None else pa.py_buffer(valid))

    def _int(self, data, spans, n, f):
        """pid, tid or id: (the integer, the text of a value that is not one), as traceql reads them."""
        pa = self.pa
        out, ok, is_text = bytearray(8 * n), bytearray((n + 7) // 8), bytearray(n)
        self.lib.ints(data, _addr(spans), n, f, _addr(out), _addr(ok), _addr(is_text))
        ints = pa.Int64Array.from_buffers(pa.int64(), n, [pa.py_buffer(ok), pa.py_buffer(out)])
        return ints, self._text(data, spans, n, f, 1, True, is_text)

    def batch(self, block, first_row):
        import pyarrow.compute as pc

        pa = self.pa
        if not isinstance(block, _Block):  # (the last events, decoded by traceql's _last)
            return self.k._batch(block, first_row)
        data, spans, n = block.data, block.spans, block.n
        ph, cat, name = (self._text(data, spans, n, FIELDS[f], 1, True) for f in ("ph", "cat", "name"))
        pid, pid_text = self._int(data, spans, n, FIELDS["pid"])
        tid, tid_text = self._int(data, spans, n, FIELDS["tid"])
        fid, fid_text = self._int(data, spans, n, FIELDS["id"])
        keep = pc.or_kleene(pc.or_kleene(pc.is_in(cat, self.kept), pc.equal(ph, "M")), pc.equal(name, self.k.MEMORY_EVENT))
        want = bytearray(pc.cast(pc.fill_null(keep, False), pa.uint8()).buffers()[1].to_pybytes()[:n])
        args = self._text(data, spans, n, FIELDS["args"], 0, False, want)
        rows = pa.Int64Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(array("q", range(first_row, first_row + n)))])
        return pa.Table.from_arrays(
            [rows, ph, cat, name, pid, pid_text, tid, tid_text, self._text(data, spans, n, FIELDS["ts"], 0, False),
             self._text(data, spans, n, FIELDS["dur"], 0, False), fid, fid_text, args],
            names=["src_row", "ph", "cat", "name", "pid", "pid_text", "tid", "tid_text", "ts", "dur", "id", "id_text",
                   "args"])

    def install(self) -> None:
        """traceql's Kineto staging reads blocks with the prototype from here on (this process)."""
        self.k._events, self.k._batch = self.events, self.batch


def measure_blocks(path: Path, blocks: Blocks) -> dict:
    """CPU seconds to read, decode and build every block: traceql's way, then the prototype's."""
    from traceql.sources import kineto as k

    out = {}
    for label, events, batch in (("traceql", k._events, k._batch), ("prototype", blocks.events, blocks.batch)):
        t0, n = time.process_time(), 0
        with k._open(path) as fh:
            hdr, rest = k._locate_events(fh, path)
            for block in events(fh, path, hdr, rest):
                batch(block, n)
                n += len(block)
        out[label] = dict(cpu=time.process_time() - t0, events=n)
    return out


def timed(cmd: list[str]) -> dict:
    p = harness.run_child(cmd, env={"PYTHONPATH": str(REPO)})
    if p.rc != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.err[-500:]}")
    return dict(wall=p.secs, cpu=p.cpu)


def same_rows(trace: Path, tmp: Path) -> str:
    """Ingest TRACE with the prototype's reader and as is; 'same' or the tables that differ."""
    import duckdb

    dbs = [tmp / "same1.duckdb", tmp / "same2.duckdb"]
    for db in dbs:
        db.unlink(missing_ok=True)
    for cmd in ([sys.executable, __file__, str(trace), "--child-ingest", str(dbs[0])],
                [sys.executable, "-m", "traceql", "ingest", str(trace), "--db", str(dbs[1])]):
        p = harness.run_child(cmd, env={"PYTHONPATH": str(REPO)})
        if p.rc != 0:
            return f"ingest failed: {p.err.strip()[-300:]}"
    con = duckdb.connect()
    con.execute(f"ATTACH '{dbs[0]}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{dbs[1]}' AS b (READ_ONLY)")
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'b' "
                                        "AND schema_name = 'main' ORDER BY 1").fetchall()]
    differ = []
    for t in tables:
        if t in ("trace", "workspace_version"):  # (when each was ingested)
            continue
        n = con.execute(f"SELECT (SELECT count(*) FROM (FROM a.{t} EXCEPT ALL FROM b.{t})) + "
                        f"(SELECT count(*) FROM (FROM b.{t} EXCEPT ALL FROM a.{t}))").fetchone()[0]
        if n:
            differ.append(f"{t} ({n} rows)")
    con.close()
    return "same rows in every table" if not differ else "differ: " + ", ".join(differ)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path, nargs="+", help="Kineto JSON traces (.json or .json.gz); one unless --same-rows")
    ap.add_argument("--same-rows", action="store_true", help="compare the contract tables of both ingests, nothing timed")
    ap.add_argument("--cycles", type=int, default=2, help="decode / ingest with the prototype / ingest as is, in turn")
    ap.add_argument("--child-ingest", metavar="DB", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if len(a.trace) > 1 and not a.same_rows:
        ap.error("one trace, unless --same-rows")
    with tempfile.TemporaryDirectory(prefix="traceql-kineto-c-") as tmp:
        tmp = Path(tmp)
        lib = load_library(tmp)
        if a.child_ingest:  # (a child: one ingest with the prototype's reader)
            Blocks(lib).install()
            from traceql.cli.main import main as cli

            cli(["ingest", str(a.trace[0]), "--db", a.child_ingest])
            return
        if a.same_rows:
            for trace in a.trace:
                print(f"{trace}: {same_rows(trace, tmp)}", flush=True)
            return
        a.trace = a.trace[0]
        blocks = measure_blocks(a.trace, Blocks(lib))
        for label, m in blocks.items():
            print(f"blocks, {label}: {m['events']:,} events, {m['cpu']:.2f} CPU s", flush=True)
        rows = []
        for cycle in range(1, a.cycles + 1):
            decode = timed([sys.executable, "-c", f"P = {str(a.trace)!r}\n" + kineto_bench.PARSE[DECODE]])
            for f in tmp.glob("ws*"):
                f.unlink()
            proto = timed([sys.executable, __file__, str(a.trace), "--child-ingest", str(tmp / "ws1.duckdb")])
            as_is = timed([sys.executable, "-m", "traceql", "ingest", str(a.trace), "--db", str(tmp / "ws2.duckdb")])
            rows.append((cycle, decode, proto, as_is))
            print(f"cycle {cycle}: decode {decode['wall']:.2f} s ({decode['cpu']:.1f} CPU); ingest with the "
                  f"prototype {proto['wall']:.2f} s ({proto['cpu']:.1f} CPU, {proto['wall'] / decode['wall']:.2f}x the "
                  f"decode); as is {as_is['wall']:.2f} s ({as_is['cpu']:.1f} CPU, "
                  f"{as_is['wall'] / decode['wall']:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
