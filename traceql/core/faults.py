"""What a failure of DuckDB, the file system or the terminal means for the user.

DuckDB reports very different things through one exception hierarchy: a SQL mistake, a
file of the machine a query may not read, a workspace whose blocks are damaged, a full
disk, Ctrl-C. These helpers tell them apart, so that each becomes the one-line error of
its class (README, "Errors"): an interrupt exits 130, a damaged workspace or a full disk is
a workspace error (5), a query that reaches for a host file says how to allow it.
"""

from __future__ import annotations

import errno
import os
import re

# errno values of "the disk is full": ENOSPC, EFBIG (a file beyond `ulimit -f`), EDQUOT
DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
_DISK_FULL = re.compile(r"No space left on device|File too large|Disk quota exceeded|could not write all bytes",
                        re.I)
_CORRUPT = re.compile(r"Corrupt database file|does not match stored checksum|database file is corrupt|"
                      r"INTERNAL Error|FATAL Error", re.I)
_HOST_FILE = re.compile(r"disabled by configuration|disabled through configuration")
_INTERRUPTED = re.compile(r"\binterrupted\b", re.I)

# C0 and C1 control characters but tab and newline: printed to a terminal they move the
# cursor, change colours or the window title (an NVTX name, a file name can hold them)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def is_interrupt(exc: BaseException) -> bool:
    """Ctrl-C as DuckDB reports it: InterruptException ('INTERRUPT Error: Interrupted!'), or a
    RuntimeError 'Query interrupted' from the Python client."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    name = type(exc).__name__
    if name == "InterruptException":
        return True
    return isinstance(exc, RuntimeError) and bool(_INTERRUPTED.search(first_line(exc)))


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
        return True
    return bool(_DISK_FULL.search(str(exc)))


def is_corrupt(exc: BaseException) -> bool:
    """A damaged workspace file as DuckDB reports it (checksum mismatch, bad block, invalid
    header, or the internal and fatal errors a damaged block can lead to)."""
    name = type(exc).__name__
    if name in ("InternalException", "FatalException"):
        return True
    return name in ("IOException", "SerializationException", "InvalidInputException", "Error") \
        and bool(_CORRUPT.search(first_line(exc)))


def is_host_file_refusal(exc: BaseException) -> bool:
    """DuckDB refused to touch a file of the machine (external access is off)."""
    return type(exc).__name__ == "PermissionException" and bool(_HOST_FILE.search(str(exc)))


def printable(text: str) -> str:
    """TEXT safe on a terminal, one line (traceql.outputs.render.clean_text, the one escaping function)."""
    from traceql.core.text import clean_text

    return clean_text(text)


def host_file_message(exc: BaseException) -> str:
    m = re.search(r'Cannot access (file|directory) "([^"]*)"', str(exc))
    what = f'the {m.group(1)} "{printable(m.group(2))}"' if m else "a file"
    return (f"SQL: the query reads or writes {what} of this machine, which traceql allows only when asked: "
            "traceql sql --allow-files (traceql.open(..., allow_files=True)) to allow it")


def fault(exc: BaseException, workspace) -> BaseException | None:
    """The error to raise for a DuckDB error met while querying WORKSPACE, when it is not a
    mistake in the SQL: a full disk or a damaged workspace (WorkspaceError), a host file the
    query may not touch (UsageError). None otherwise, and for an interrupt, which goes up as it
    is (the CLI exits 130 on it, see is_interrupt)."""
    from traceql.core.errors import UsageError, WorkspaceError

    if is_interrupt(exc):
        return None
    if is_disk_full(exc):
        return WorkspaceError(f"{workspace}: out of disk space ({first_line(exc)})")
    if is_corrupt(exc):
        return WorkspaceError(f"{workspace}: damaged workspace, DuckDB cannot read it ({first_line(exc)}); "
                              "ingest the traces into a new one")
    if is_host_file_refusal(exc):
        return UsageError(host_file_message(exc))
    return None


# Set by on_signal(): a Ctrl-C, SIGTERM or SIGHUP reached the process. DuckDB's Python client
# runs Python code of its own inside a statement (it tries `import pandas` for each value it
# converts) and swallows any exception raised there, KeyboardInterrupt included: a signal that
# arrives at that moment would be lost and an interrupted ingest renamed into place (exit 0).
_signalled = False


def on_signal(signum, frame) -> None:
    """The CLI's handler of SIGINT, SIGTERM and SIGHUP: KeyboardInterrupt, as Python's own
    handler raises, and the signal remembered for raise_if_signalled()."""
    global _signalled
    _signalled = True
    raise KeyboardInterrupt


def raise_if_signalled() -> None:
    """KeyboardInterrupt when on_signal() ran, even if the exception it raised was swallowed:
    called before work is committed (an ingest renamed into place)."""
    if _signalled:
        raise KeyboardInterrupt


_watched: list = []
_wakeup = None


def interrupt_on_sigint(con) -> None:
    """Make Ctrl-C stop what DuckDB runs on con at once. DuckDB checks for a signal while it
    executes a statement, but not while a streamed result is read (`sql` prints rows as DuckDB
    makes them): there the main thread waits inside DuckDB and Python's handler cannot run. A
    thread woken by the signal (signal.set_wakeup_fd) calls con.interrupt(), which ends the
    statement with an interrupt error: exit 130. Main thread only (the CLI)."""
    global _wakeup
    import signal
    import threading

    if _wakeup is None:
        # a pipe, not socket.socketpair(): importing socket was about 1.5 ms of every command
        reader, writer = os.pipe()
        os.set_blocking(writer, False)
        try:
            signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            os.close(reader)
            os.close(writer)
            return

        def watch():
            while True:
                data = os.read(reader, 64)
                if not data:
                    return
                if any(sig in data for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):  # (see cli)
                    for c in list(_watched):
                        try:
                            c.interrupt()
                        except Exception:  # noqa: BLE001 - closed meanwhile
                            pass

        threading.Thread(target=watch, name="traceql-sigint", daemon=True).start()
        _wakeup = (reader, writer)
    _watched.append(con)
