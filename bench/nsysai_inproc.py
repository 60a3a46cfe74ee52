"""Time nsys-ai's operations in-process, through its Python API, on a profile whose cache
bench/run.py has warmed. Runs with the nsys-ai venv's Python (bench/data/nsysai-venv), never
traceql's; prints one JSON line: {op: {"first": s, "secs": best s, "runs": n}}.

    nsysai-venv/bin/python bench/nsysai_inproc.py PROFILE.sqlite [--runs 3] [--budget 20]

Operations, as the nsys-ai 0.3.0 CLI runs them (nsys_ai/cli/handlers.py): `skill run NAME`
opens a connection with _open_skill_connection and calls skills.registry.run_skill;
`summary` opens a Profile and calls summary.gpu_summary per GPU. The connection or profile
is opened before each timed call and not timed, like traceql's in-process numbers."""

from __future__ import annotations

import argparse
import json
import time


def timed(opener, call, runs: int, budget: float) -> dict:
    """Best of up to `runs` calls, each on a freshly opened connection or profile (nsys-ai
    keeps the results of earlier calls per connection: a second call on the same one is a
    cache hit, not a computation). Opening is not timed; its first duration is reported."""
    times, opens = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        handle = opener()
        opens.append(time.perf_counter() - t0)
        try:
            t0 = time.perf_counter()
            call(handle)
            times.append(time.perf_counter() - t0)
        finally:
            handle.close()
        if sum(times) + sum(opens) >= budget:
            break
    return dict(first=times[0], secs=min(times), runs=len(times), open=opens[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0)
    args = ap.parse_args()

    from nsys_ai import profile as nsys_profile
    from nsys_ai.cli.handlers import _open_skill_connection
    from nsys_ai.skills.registry import run_skill
    from nsys_ai.summary import format_text, gpu_summary

    def summary(prof):
        for gpu in prof.meta.devices:
            format_text(gpu_summary(prof, gpu, None))

    out = {}
    for op, skill in (("kernel", "top_kernels"), ("range", "nvtx_layer_breakdown")):
        out[op] = timed(lambda: _open_skill_connection(args.profile, no_cache=False),
                        lambda conn, skill=skill: run_skill(skill, conn), args.runs, args.budget)
    out["summary"] = timed(lambda: nsys_profile.open(args.profile), summary, args.runs, args.budget)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
