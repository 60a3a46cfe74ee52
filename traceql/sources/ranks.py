"""Who a trace is in a multi-rank job: its host, rank, local rank and world size, each with where
it came from (trace.host_source, rank_source, local_rank_source, world_size_source).

One rule for every format. Each value is taken from the first of these that gives it:

1. 'recorded': what the trace itself records about the profiled process and machine.
   - Nsight Systems: the host is TARGET_INFO_SYSTEM_ENV's Hostname (the profiled machine). Rank,
     local rank and world size come from the environment of the profiled process
     (META_DATA_CAPTURE 'PROCESS_n:ENVIRONMENT_VARIABLE', nsys 2023.3 on), else from the
     environment nsys's agent recorded (TARGET_INFO_SYSTEM_ENV DeviceEnvironment); the first
     variable of RANK_VARS (LOCAL_RANK_VARS, WORLD_SIZE_VARS) that is set and holds an integer
     wins: the framework's own (torchrun's RANK) before the MPI launcher's before the scheduler's
     (SLURM_PROCID). SLURMD_NODENAME names the host when Hostname is missing. The process
     environment's HOSTNAME is never used: a launcher passes its own on (srun on ault43 gives
     the ranks it starts on ault44 HOSTNAME=ault43.cscs.ch).
   - PyTorch profiler (Kineto): distributedInfo.rank and .world_size, and the host_name member.
   - nvprof records none of these.
   When several profiled processes of one file disagree (one nsys run over a whole mpirun),
   the value is left NULL and ingest_stats says so ('rank.ambiguous').
2. 'file name': the file's name, as nsys -o writes it with %h (host), %p (pid) and
   %q{VAR}: a 'rank' followed by digits ('rank3', 'rank_03', 'rank-3') is the rank,
   'local_rank3' the local rank; a name ending in '<host>_<pid>' gives the host when <host>
   is a dotted host name (nsys's '%h_%p': 'report_ault43.cscs.ch_700355'), or, for Kineto's
   default names ('<host>_<pid>.<ms>.pt.trace.json'), any host name.
3. 'user': --rank / --host at ingest, which win over both (traceql.ingest).
4. 'exporter' (the host only): EXPORT_HOST, the machine that ran `nsys export`, when nothing
   names the profiled machine. It is the profiled machine when `nsys profile` exported the
   file itself, and not when someone exported the report elsewhere (the NCCL set's ault44
   files were exported on ault43).

A recorded value that the file name contradicts is kept, with an info row in ingest_stats
('rank.file_name_differs', 'host.file_name_differs'). Every value taken gets an info row
naming its origin exactly ('trace.rank': 'SLURM_PROCID=4 in the environment of the profiled
process (META_DATA_CAPTURE)').
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

# Environment variables, most specific first: the framework's, the MPI launcher's, the scheduler's.
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK",
             "JSM_NAMESPACE_RANK", "SLURM_PROCID")
LOCAL_RANK_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                   "PMI_LOCAL_RANK", "JSM_NAMESPACE_LOCAL_RANK", "SLURM_LOCALID")
WORLD_SIZE_VARS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "JSM_NAMESPACE_SIZE",
                   "SLURM_NTASKS", "SLURM_NPROCS")
HOST_VARS = ("SLURMD_NODENAME",)
ENV_VARS = RANK_VARS + LOCAL_RANK_VARS + WORLD_SIZE_VARS + HOST_VARS

FIELDS = ("host", "rank", "local_rank", "world_size")
SOURCES = ("recorded", "file name", "user", "exporter")  # the ENUM of trace.*_source

_RANK_NAME = re.compile(r"(?<![a-z])(?<!local[_-])(?<!local)rank[_-]?(\d+)(?!\d)", re.I)
_LOCAL_RANK_NAME = re.compile(r"local[_-]?rank[_-]?(\d+)(?!\d)", re.I)
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
# '<anything>_<host>_<pid>' at the end of the name (nsys -o ..._%h_%p), the host dotted
_NSYS_HOST_PID = re.compile(rf"(?:^|_)({_HOST}(?:\.{_HOST})+)_(\d+)$")
# Kineto's tensorboard_trace_handler: '<host>_<pid>.<time>.pt.trace.json'
_KINETO_HOST_PID = re.compile(rf"^({_HOST}(?:\.{_HOST})*)_(\d+)\.\d+\.pt\.trace$")
_SUFFIXES = (".gz", ".json", ".sqlite", ".nvvp", ".sql", ".db", ".sqlite3")


@dataclass
class Fact:
    value: int | str
    source: str  # one of SOURCES
    detail: str  # where exactly, for ingest_stats


@dataclass
class Identity:
    """What ingest stores in the trace row, and the ingest_stats rows that explain it."""
    facts: dict[str, Fact] = field(default_factory=dict)
    stats: list[tuple[str, int | None, str, str]] = field(default_factory=list)  # key, value, severity, detail

    def value(self, name: str):
        fact = self.facts.get(name)
        return None if fact is None else fact.value

    def source(self, name: str):
        fact = self.facts.get(name)
        return None if fact is None else fact.source

    def line(self) -> str:
        """One line for the ingest output: 'rank 4 (recorded), local rank 1 (recorded), ...'."""
        return ", ".join(f"{name.replace('_', ' ')} {fact.value} ({fact.source})"
                         for name in ("rank", "local_rank", "world_size", "host")
                         if (fact := self.facts.get(name)) is not None)


# ------------------------------------------------------------------------------ what the trace records

def _env_value(text: str) -> str:
    """A value as nsys writes it in META_DATA_CAPTURE ('"4"'), unquoted."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    return text


def _as_int(text) -> int | None:
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value if 0 <= value < 2**31 else None


def _table_columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def nsys_recorded(path: Path, tables: dict[str, list[str]]) -> tuple[dict[str, Fact], list[tuple]]:
    """The host, rank, local rank and world size an Nsight Systems export records, and
    ingest_stats rows for values it gives ambiguously. Reads only the few rows it needs."""
    from traceql.sources.detect import connect_readonly

    facts: dict[str, Fact] = {}
    stats: list[tuple] = []
    if "TARGET_INFO_SYSTEM_ENV" not in tables and "META_DATA_CAPTURE" not in tables:
        return facts, stats
    try:
        con = connect_readonly(path)
    except Exception:  # noqa: BLE001 - what cannot be read is not recorded; ingest reports real damage
        return facts, stats
    try:
        system: dict[str, str] = {}
        if "TARGET_INFO_SYSTEM_ENV" in tables and {"name", "value"} <= _table_columns(con, "TARGET_INFO_SYSTEM_ENV"):
            system = {str(n): v for n, v in con.execute(
                "SELECT name, value FROM TARGET_INFO_SYSTEM_ENV WHERE name IN ('Hostname', 'DeviceEnvironment')")
                if isinstance(v, str)}
        processes: dict[str, dict[str, str]] = {}  # 'PROCESS_0' -> {var: value}
        if "META_DATA_CAPTURE" in tables and {"name", "value"} <= _table_columns(con, "META_DATA_CAPTURE"):
            for name, value in con.execute(
                    "SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS%:ENVIRONMENT_VARIABLE'"):
                if not isinstance(value, str) or "=" not in value:
                    continue
                var, _, text = value.partition("=")
                if var in ENV_VARS:
                    processes.setdefault(str(name).split(":")[0], {})[var] = _env_value(text)
    except sqlite3.Error:
        return facts, stats
    finally:
        con.close()

    host = (system.get("Hostname") or "").strip()
    if host:
        facts["host"] = Fact(host, "recorded", f"Hostname={host} in TARGET_INFO_SYSTEM_ENV (the profiled machine)")
    if processes:
        where = "the environment of the profiled process (META_DATA_CAPTURE)"
        envs = processes
    else:
        where = "the environment nsys recorded on the profiled machine (TARGET_INFO_SYSTEM_ENV DeviceEnvironment)"
        device_env = system.get("DeviceEnvironment") or ""
        envs = {"agent": {m.group(1): m.group(2) for m in re.finditer(
            r"(?:^|;)(" + "|".join(ENV_VARS) + r")=([^;]*)", device_env)}}
    for name, names in (("rank", RANK_VARS), ("local_rank", LOCAL_RANK_VARS), ("world_size", WORLD_SIZE_VARS),
                        ("host", HOST_VARS)):
        if name in facts:
            continue
        found = {}
        for proc, env in envs.items():
            for var in names:
                value = env.get(var, "").strip() if name == "host" else _as_int(env.get(var))
                if value not in (None, ""):
                    found[proc] = (value, var)
                    break
        values = {v for v, _ in found.values()}
        if len(values) == 1:
            value, var = next(iter(found.values()))
            facts[name] = Fact(value, "recorded", f"{var}={value} in {where}")
        elif len(values) > 1:
            listed = ", ".join(f"{p}: {var}={v}" for p, (v, var) in sorted(found.items()))
            hint = f"; --{name} gives it, if the file is one rank's" if name in ("rank", "host") else ""
            stats.append((f"{name}.ambiguous", len(values), "warning",
                          f"the {len(found)} profiled processes of this file give different values of "
                          f"{name.replace('_', ' ')} ({listed}): it is left NULL{hint}"))
    return facts, stats


def kineto_recorded(metadata: dict[str, str]) -> dict[str, Fact]:
    """What a PyTorch profiler trace records (traceql.sources.kineto.metadata's keys)."""
    facts: dict[str, Fact] = {}
    for name, key, detail in (("rank", "RANK", "distributedInfo.rank"),
                              ("world_size", "WORLD_SIZE", "distributedInfo.world_size")):
        value = _as_int(metadata.get(key))
        if value is not None:
            facts[name] = Fact(value, "recorded", f"{detail} = {value} in the trace")
    host = (metadata.get("EXPORT_HOST") or "").strip()
    if host:
        facts["host"] = Fact(host, "recorded", f"host_name {host} in the trace")
    return facts


# ------------------------------------------------------------------------------ the file name

def _stem(path: Path) -> str:
    name = path.name
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return name


def from_file_name(path: str | Path) -> dict[str, Fact]:
    """The rank, local rank and host a file name gives (see the module doc)."""
    path = Path(path)
    stem = _stem(path)
    facts: dict[str, Fact] = {}
    local = _LOCAL_RANK_NAME.findall(stem)
    if len(set(local)) == 1:
        facts["local_rank"] = Fact(int(local[0]), "file name", f"'local_rank{int(local[0])}' in the file name {path.name}")
    ranks = [int(r) for r in _RANK_NAME.findall(stem)]
    if len(set(ranks)) == 1 and ranks[0] < 2**31:
        facts["rank"] = Fact(ranks[0], "file name", f"'rank{ranks[0]}' in the file name {path.name}")
    m = _NSYS_HOST_PID.search(stem) or _KINETO_HOST_PID.match(stem)
    if m:
        facts["host"] = Fact(m.group(1), "file name",
                             f"host {m.group(1)} (and pid {m.group(2)}) in the file name {path.name}, as nsys's "
                             "-o ..._%h_%p or PyTorch's trace handler write it")
    return facts


# ------------------------------------------------------------------------------ the rule

def resolve(recorded: dict[str, Fact], path: str | Path, export_host: str | None = None,
            user: dict | None = None, stats=()) -> Identity:
    """Each of FIELDS from the user, else the trace's record, else the file name, else (the host)
    EXPORT_HOST; with ingest_stats rows saying where each came from."""
    named = from_file_name(path)
    ident = Identity(stats=list(stats))
    for name in FIELDS:
        given = (user or {}).get(name)
        if given is not None:
            fact = Fact(given, "user", f"{given} given at ingest (--{name.replace('_', '-')})")
        else:
            fact = recorded.get(name) or named.get(name)
        if fact is None and name == "host" and export_host:
            fact = Fact(export_host, "exporter",
                        f"EXPORT_HOST={export_host}: the machine that exported the file, which may not be the one "
                        "profiled (the export names no profiled host)")
        if fact is None:
            continue
        ident.facts[name] = fact
        ident.stats.append((f"trace.{name}", fact.value if isinstance(fact.value, int) else None, "info",
                            f"{name.replace('_', ' ')} {fact.value}: {fact.source}, {fact.detail}"))
        other = named.get(name)
        if fact.source != "file name" and other is not None and other.value != fact.value:
            ident.stats.append((f"{name}.file_name_differs", other.value if isinstance(other.value, int) else None,
                                "info", f"the file name says {name.replace('_', ' ')} {other.value} ({other.detail}); "
                                        f"kept {fact.value} ({fact.source})"))
    return ident


def identify(det, user: dict | None = None) -> Identity:
    """The Identity of the detected file DET (traceql.sources.detect.Detected; after staging for Kineto,
    whose members are read with the events)."""
    stats: list[tuple] = []
    export_host = None
    if det.source_format == "nsys":
        recorded, stats = nsys_recorded(det.path, det.tables)
        export_host = (det.metadata.get("EXPORT_HOST") or "").strip() or None
    elif det.source_format == "kineto":
        recorded = kineto_recorded(det.metadata)
    else:
        recorded = {}
    return resolve(recorded, det.path, export_host, user, stats)


def identify_stored(path: str, host: str | None, rank: int | None, world_size: int | None,
                    source_format: str) -> Identity:
    """The Identity an upgrade can give a trace whose source file is gone, from its stored trace
    row of an older contract and its file name: a Kineto trace's rank and world size were read
    from distributedInfo ('recorded'); the host stored for an nsys trace was EXPORT_HOST
    ('exporter', after any host its file name gives), for a Kineto trace its host_name
    ('recorded')."""
    recorded: dict[str, Fact] = {}
    export_host = None
    if source_format == "kineto":
        if rank is not None:
            recorded["rank"] = Fact(rank, "recorded", f"distributedInfo.rank = {rank} (stored by an older traceql)")
        if world_size is not None:
            recorded["world_size"] = Fact(world_size, "recorded",
                                          f"distributedInfo.world_size = {world_size} (stored by an older traceql)")
        if host:
            recorded["host"] = Fact(host, "recorded", f"host_name {host} (stored by an older traceql)")
    elif source_format == "nsys":
        export_host = host
    return resolve(recorded, path, export_host)
