"""The traceql command line: a thin layer over the library API (traceql.api).

The group and its options are in group.py and params.py (each shared option defined once), the
commands in one file per group (workspace_cmds, sql_cmds, export_cmd, report_cmds, analysis_cmds,
mcp_cmd), what they print in output.py. This module registers the commands and runs them:
main() turns every error into one line and its exit code.

`traceql --version` alone is answered before click and the group are imported (0.06 s instead
of 0.15 s): the line click's version option prints (tests/cli/test_cli.py compares them)."""

from __future__ import annotations

import re
import sys

# Imported where a command needs them, so that the others start faster: click and the group (not
# for --version), traceql.store.ingest (the ingest machinery) and traceql.query.sqlcheck (sqlglot).
# The command modules register their commands on the group when a command is first looked up
# (traceql.cli.group.COMMANDS): a command does not import the others.


def main(argv=None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        _version()
        return
    debug = "--debug" in args
    import click

    from traceql.cli.context import hide_numpy, opened
    from traceql.cli.group import cli
    from traceql.core.errors import TraceqlError
    from traceql.core.faults import fault, first_line, is_disk_full, is_interrupt, printable

    _quiet_signals(shell=argv is None)
    if argv is None:  # run from the shell, not called from Python
        hide_numpy()
    try:
        cli.main(args=argv, prog_name="traceql", standalone_mode=False)
        sys.stdout.flush()  # here, so that a closed pipe is seen while it can be handled
        if argv is None:
            _ignore_late_ctrl_c()
    except click.exceptions.Abort:
        _interrupted("traceql: interrupted", shell=argv is None)
    except click.ClickException as exc:
        click.echo(f"traceql: error: {printable(click_message(exc))}", err=True)
        sys.exit(exc.exit_code)
    except TraceqlError as exc:
        if debug:
            raise
        click.echo(f"traceql: error: {printable(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _interrupted("traceql: interrupted; the workspace is unchanged", shell=argv is None)
    except BrokenPipeError:  # `traceql sql ... | head`: the reader has what it wanted
        _stdout_to_devnull()
        sys.exit(141)  # 128 + SIGPIPE, as a shell reports a tool that a closed pipe ended
    except SystemExit as exc:  # click ends a command whose output pipe closed with exit 1, quietly
        if exc.code == 1 and type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
            _stdout_to_devnull()
            sys.exit(141)
        raise
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if debug:
            raise
        if is_interrupt(exc):  # Ctrl-C while DuckDB ran a statement
            _interrupted("traceql: interrupted", shell=argv is None)
        if isinstance(exc, OSError) and exc.filename is not None:  # writing -o FILE, a progress bar, ...
            cause = exc.strerror or first_line(exc)
            click.echo(f"traceql: error: {printable(str(exc.filename))}: "
                       f"{'out of disk space (' + cause + ')' if is_disk_full(exc) else cause}", err=True)
            sys.exit(5 if is_disk_full(exc) else 2)
        ctx = opened["ctx"]
        mapped = fault(exc, ctx.db if ctx is not None else "the workspace")  # a damaged workspace, a full disk
        if isinstance(mapped, TraceqlError):
            click.echo(f"traceql: error: {printable(str(mapped))}", err=True)
            sys.exit(mapped.exit_code)
        click.echo(f"traceql: internal error: {type(exc).__name__}: {printable(str(exc).splitlines()[0]) if str(exc) else ''} "
                   "(run with --debug for a traceback)", err=True)
        sys.exit(1)


def run() -> None:
    """The `traceql` command (the console script and `python -m traceql`): main(), then the end of
    the process (_exit_now). main() called from Python returns.

    One signal can interrupt twice: the thread that watches for it stops DuckDB's statement
    (faults.interrupt_on_sigint), and the Python handler, run when the main thread next checks
    for signals, raises KeyboardInterrupt, which may come while main() reports the first. It is
    the same interrupt: exit 130, the message said once."""
    try:
        main()
    except KeyboardInterrupt:
        _ignore_late_ctrl_c()
        if not _reported:
            sys.stderr.write("traceql: interrupted\n")
        sys.exit(130)
    _exit_now()


_reported = False  # main() said that the command was interrupted


def _interrupted(message: str, shell: bool) -> None:
    """Say MESSAGE and exit 130. Run from the shell, signals are ignored from now on (the command
    is stopping): a handler still pending runs as they are (signal.signal checks first), and its
    KeyboardInterrupt reaches run()."""
    global _reported
    import click

    if shell:
        _ignore_late_ctrl_c()
    click.echo(message, err=True)
    _reported = True
    sys.exit(130)


def _exit_now() -> None:
    """End a command run from the shell that succeeded without Python's shutdown, when the
    shutdown has nothing left to do: tearing down every module (DuckDB's, click's, traceql's) was
    12 ms of a 0.16 s report from a workspace (0.158 -> 0.146 s, medians of 20 paired runs). Not
    when an exit function is registered (tempfile's and weakref.finalize's clean-ups register
    one, as do Spark and multiprocessing), a thread that is not a daemon is alive, a tracer or a
    profiler runs (coverage, cProfile write their results at exit), or stdout or stderr cannot be
    flushed: then Python ends the process as usual. Every file traceql writes is closed by the
    command that writes it (the workspace's connections too, before they are renamed into
    place)."""
    import atexit
    import os
    import threading

    count = getattr(atexit, "_ncallbacks", None)  # (CPython's; elsewhere the usual shutdown)
    if count is None or count() or sys.gettrace() is not None or sys.getprofile() is not None:
        return
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # closed meanwhile: the usual shutdown says what it says
        return
    os._exit(0)


def _version() -> None:
    """What `traceql --version` prints, as click's version option of the group prints it."""
    from traceql.core.version import __version__

    try:
        sys.stdout.write(f"traceql, version {__version__}\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        sys.exit(141)


def click_message(exc) -> str:
    """click's error (a click.ClickException) as the one line of every traceql error: 'OPTION:
    cause (traceql CMD --help)'."""
    import click

    text = " ".join(exc.format_message().split())
    m = re.match(r"Invalid value for '?([^':]+)'?: (.*)$", text)
    if m:
        text = f"{m.group(1)}: {m.group(2)}"
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        text += f" (see {ctx.command_path} --help)"
    return text


def _quiet_signals(shell: bool) -> None:
    """A file that grows beyond `ulimit -f` gets SIGXFSZ, which would kill traceql with no
    message and leave its temporary files: ignored, the write fails with EFBIG instead, which
    is reported as a full disk (exit 5)."""
    import signal

    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # `kill PID`, a closed terminal or CI's timeout: stop as Ctrl-C does (temporary files removed,
    # the workspace unchanged, exit 130), not killed on the spot with the files left behind. From
    # the shell, through faults.on_signal, which also remembers the signal: an interrupt that
    # DuckDB swallowed still stops an ingest before it is renamed into place
    from traceql.core.faults import on_signal

    handler = on_signal if shell else signal.default_int_handler
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if not hasattr(signal, name):
            continue
        # SIGINT has Python's handler unless someone set another; SIGTERM and SIGHUP the default
        # (or __main__'s), not SIG_IGN as under nohup, which stays
        replaceable = (signal.default_int_handler,) if name == "SIGINT" else (signal.SIG_DFL, signal.default_int_handler)
        if signal.getsignal(getattr(signal, name)) in replaceable:
            signal.signal(getattr(signal, name), handler)


def _ignore_late_ctrl_c() -> None:
    """The command's work is done (an ingest renamed into place): a Ctrl-C while Python shuts
    down would only kill the process by SIGINT, with no message and no exit code of ours."""
    import signal

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)


def _stdout_to_devnull() -> None:
    """After a closed pipe: nothing more can be written, and Python's final flush of stdout
    must not complain about it."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    main()
