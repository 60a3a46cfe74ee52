"""Progress of long work (ingest, export): what the library reports, and rich bars for a terminal.

The library reports to a Progress object: `start` a task (a file being ingested, an export)
with its number of steps or rows when known, then `update` it with what is done and what it
is working on. The base class ignores everything, so library code calls it unconditionally.
The command line passes `for_stderr()`: rich bars on stderr when stderr is a terminal, and
nothing at all (no bars, no carriage returns) when it is a pipe or a file."""

from __future__ import annotations

import sys


class Progress:
    """Receives progress; this base class does nothing."""

    def start(self, label: str, total: int | None = None) -> None:
        """A new task begins: `label` says what it is, `total` how many steps it has (None: unknown)."""

    def update(self, completed: int | None = None, total: int | None = None, detail: str | None = None) -> None:
        """The current task has `completed` steps done (of `total`, when that became known);
        `detail` says what it is doing now."""

    def close(self) -> None:
        """No more tasks: remove the display."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RichProgress(Progress):
    """Bars drawn by rich on a console (stderr by default), removed when closed."""

    def __init__(self, console=None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bars, TextColumn, TimeElapsedColumn

        self._bars = Bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                          console=console or Console(stderr=True), transient=True)
        self._task = None
        self._started = False

    def start(self, label, total=None):
        if not self._started:
            self._bars.start()
            self._started = True
        if self._task is not None:
            self._bars.update(self._task, visible=False)
        self._task = self._bars.add_task(label, total=total, detail="")

    def update(self, completed=None, total=None, detail=None):
        if self._task is None:
            return
        fields = {}
        if completed is not None:
            fields["completed"] = completed
        if total is not None:
            fields["total"] = total
        if detail is not None:
            fields["detail"] = detail
        self._bars.update(self._task, **fields)

    def close(self):
        if self._started:
            self._bars.stop()
            self._started = False


def for_stderr() -> Progress | None:
    """Rich progress bars when stderr is a terminal; None (no output at all) otherwise."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        tty = False
    return RichProgress() if tty else None


def as_progress(progress) -> Progress:
    """A Progress for any accepted value: None (nothing), a Progress, or a plain function
    progress(label, detail) that is called with the task label and each detail."""
    if progress is None:
        return Progress()
    if isinstance(progress, Progress):
        return progress
    return _Callback(progress)


class _Callback(Progress):
    def __init__(self, fn):
        self._fn = fn
        self._label = None

    def start(self, label, total=None):
        self._label = label

    def update(self, completed=None, total=None, detail=None):
        if detail is not None:
            self._fn(self._label, detail)
