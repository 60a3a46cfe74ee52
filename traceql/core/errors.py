"""Error classes. Each carries the exit code of its class, documented in README.md."""


class TraceqlError(Exception):
    """Base of every error traceql reports as one line (no traceback unless --debug).

    The message is kept to one line: text quoted from SQLite or DuckDB (a damaged
    file's schema, a SQL error) can hold line breaks."""

    exit_code = 1

    def __init__(self, message="", *args):
        if isinstance(message, str) and ("\n" in message or "\r" in message):
            message = " ".join(part.strip() for part in message.splitlines() if part.strip())
        super().__init__(message, *args)


class UsageError(TraceqlError):
    """Bad command-line usage or an invalid argument value (bad SQL, unknown view, ...)."""

    exit_code = 2


class InputError(TraceqlError):
    """The input file is missing, unreadable, not a database or not a profiler export."""

    exit_code = 3


class UnsupportedVersionError(TraceqlError):
    """The file is a profiler export of a format or schema version traceql cannot read."""

    exit_code = 4


class WorkspaceError(TraceqlError):
    """The workspace database cannot be opened, written or locked."""

    exit_code = 5


class StaleWorkspaceError(WorkspaceError):
    """The workspace was written under an older contract version: `traceql upgrade` brings it
    forward. Its own exit code, so that scripts can tell it apart."""

    exit_code = 6


class NewerWorkspaceError(WorkspaceError):
    """The workspace was written by a newer traceql, under a contract version this one does
    not know."""

    exit_code = 6
