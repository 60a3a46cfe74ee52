"""`python -m traceql ARGS` without paying Python's start-up and traceql's imports for each one.

A test module that runs the command line a hundred times spends most of its CPU starting
Python and importing traceql, DuckDB and click (about 0.45 s a command). `CliServer` starts one
process that imports them once, then forks a fresh child per command: the child takes the
command's environment, folder and argv, gets /dev/null (or a pipe giving the request's input) as
stdin and pipes as stdout and stderr (as subprocess.run(capture_output=True) gives), and runs
traceql's `__main__` as the shell would. Each command starts from the same freshly imported
state (a fork copies it), runs its own signal handlers and exit functions, and ends with its own
exit code; the server runs no DuckDB connection, so none is shared with a child.

    with CliServer() as server:
        proc = server.run("--db", "w.duckdb", "report", "--by", "kernel")   # a CompletedProcess

`cli(*ARGS)` (tests.util.cli) runs each command on one such server per test process, started on
first use. What differs from a new process: every module of traceql, with DuckDB and pyarrow, is
already imported (a test of what a command imports needs a real process), and environment
variables that traceql reads only at import time keep the server's value (no module of traceql
reads one then; a test that changes PYTHONPATH or the Python executable needs a real process)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class CliServer:
    """One warm process serving `run(*args, env=, cwd=, timeout=)` requests, one at a time."""

    def __init__(self, env: dict | None = None, prefix: list[str] | tuple = ()):
        """PREFIX: a command the server runs under (e.g. strace), and with it every command it forks."""
        self.env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        self.prefix = list(prefix)
        self.proc = None

    def __enter__(self) -> "CliServer":
        self.proc = subprocess.Popen([*self.prefix, sys.executable, "-m", "tests.cli_server"], cwd=REPO, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
            self.proc = None

    def run(self, *args, env: dict | None = None, cwd=None, timeout: float = 120,
            exact_env: bool = False, tty: str | None = None, input: str | None = None) -> subprocess.CompletedProcess:
        """What `subprocess.run([python, -m, traceql, *ARGS], capture_output=True, text=True)`
        returns, with the server's environment plus ENV (ENV alone with exact_env), in CWD
        (default: the repository). With TTY (a terminal's path, the slave side of a pty the
        caller reads) the command's stdin, stdout and stderr are that terminal, as
        Popen(stdin=stdout=stderr=slave) gives them, and stdout and stderr come back empty. INPUT:
        the command's stdin is a pipe that gives this text, then end of file (run(input=...))."""
        request = {"args": [str(a) for a in args], "env": dict(env or {}) if exact_env else {**self.env, **(env or {})},
                   "cwd": str(cwd or REPO), "timeout": timeout, "tty": tty, "input": input}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the CLI server ended")
        answer = json.loads(line)
        if answer.get("timeout"):
            raise subprocess.TimeoutExpired(["traceql", *request["args"]], timeout, answer["stdout"],
                                            answer["stderr"])
        return subprocess.CompletedProcess(["traceql", *request["args"]], answer["code"], answer["stdout"],
                                           answer["stderr"])


_SHARED: list[CliServer] = []
_LOCK = threading.Lock()


def cli(*args, cwd=None, env: dict | None = None, timeout: float = 1800,
        tty: str | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    """What `subprocess.run([python, -m, traceql, *ARGS], capture_output=True, text=True, cwd=CWD,
    env={**os.environ, PYTHONPATH: the repository, **ENV})` returns (tests.util.cli_process),
    from one server per test process, started on first use: this process's environment as it
    is at the call, not as it was when the server started. The server's stdin is its request
    pipe, the command's /dev/null or INPUT (a pipe); a test that signals the command or needs a new
    interpreter runs a real process."""
    with _LOCK:
        if not _SHARED or _SHARED[0].proc.poll() is not None:
            _SHARED[:] = [CliServer().__enter__()]
            atexit.register(_SHARED[0].close)
        return _SHARED[0].run(*args, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, cwd=cwd,
                              timeout=timeout, exact_env=True, tty=tty, input=input)


def _child(request: dict, out_w: int, err_w: int, in_r: int | None = None) -> None:
    """In the forked child: become `python -m traceql ARGS` and exit with its code."""
    code = 1
    try:
        if request.get("tty"):  # stdin, stdout and stderr the terminal (not made the controlling one)
            term = os.open(request["tty"], os.O_RDWR | os.O_NOCTTY)
            for fd in (0, 1, 2):
                os.dup2(term, fd)
            os.close(term)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the server's stdin is its request pipe
            sys.stdout.reconfigure(line_buffering=True)  # as Python starts with a terminal on stdout
        else:
            os.dup2(os.open(os.devnull, os.O_RDONLY) if in_r is None else in_r, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the server's stdin is its request pipe
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGPIPE"):  # as a fresh process starts them
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.default_int_handler if name == "SIGINT"
                              else signal.SIG_DFL)
        sys.argv = ["traceql", *request["args"]]
        import runpy

        try:
            runpy.run_module("traceql", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - as Python prints an uncaught exception
            import traceback

            traceback.print_exc()
            code = 1
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
                pass
    finally:
        os._exit(code)


def _serve_one(request: dict) -> dict:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if request.get("input") is not None else (None, None)
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        if in_w is not None:
            os.close(in_w)
        _child(request, out_w, err_w, in_r)
    os.close(out_w)
    os.close(err_w)
    if in_w is not None:  # the command's stdin: the text, then end of file (written by a thread: a
        os.close(in_r)    # text larger than a pipe's buffer would block until the child reads it)

        def feed(data=request["input"].encode()):
            with open(in_w, "wb") as fh, contextlib.suppress(BrokenPipeError):
                fh.write(data)
        threading.Thread(target=feed, daemon=True).start()
    chunks = {out_r: [], err_r: []}
    sel = selectors.DefaultSelector()
    for fd in chunks:
        sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + request["timeout"]
    timed_out = False
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            break
        for key, _ in sel.select(timeout=left):
            data = os.read(key.fd, 65536)
            if data:
                chunks[key.fd].append(data)
            else:
                sel.unregister(key.fd)
    sel.close()
    os.close(out_r)
    os.close(err_r)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    decode = lambda fd: b"".join(chunks[fd]).decode("utf-8", "replace")  # noqa: E731
    return {"code": code, "stdout": decode(out_r), "stderr": decode(err_r), "timeout": timed_out}


def serve() -> None:
    """Read one JSON request a line from stdin, answer one JSON line on stdout, until EOF."""
    import importlib
    import pkgutil

    import traceql
    import traceql.cli.main  # noqa: F401 - what every command imports, once (traceql/__main__.py runs in each child)

    # What the commands import when they run (DuckDB, pyarrow, sqlglot, the readers, the store):
    # 0.35 CPU s of each forked command's 0.5 on a tiny workspace. No module of traceql opens a
    # connection or starts a thread when imported.
    for module in pkgutil.walk_packages(traceql.__path__, "traceql."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)

    for line in sys.stdin:
        answer = _serve_one(json.loads(line))
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
