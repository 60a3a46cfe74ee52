"""The workspace lock: one writer at a time. An ingest writes a copy of the workspace and
renames it over the original, so a change made meanwhile by another writer (another ingest,
or `traceql sql --write`) would be lost; both take this lock first."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import math
import os
import re
import time
from pathlib import Path

from traceql.core.errors import UsageError, WorkspaceError

DEFAULT_LOCK_TIMEOUT = 600.0  # seconds a writer waits for another one into the same workspace


def lock_timeout() -> float:
    """TRACEQL_LOCK_TIMEOUT (seconds; 0 = do not wait), else DEFAULT_LOCK_TIMEOUT."""
    text = os.environ.get("TRACEQL_LOCK_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"TRACEQL_LOCK_TIMEOUT={text}: not a number of seconds") from None
    if not math.isfinite(value) or value < 0:  # nan compares false with the deadline: it waited forever
        raise UsageError(f"TRACEQL_LOCK_TIMEOUT={text}: must be a finite number of seconds, 0 or more")
    return value


@contextlib.contextmanager
def workspace_lock(db: Path, timeout: float | None = None, on_wait=None, activity: str = "ingest"):
    """An exclusive lock on the workspace while one writer (ACTIVITY: 'ingest' or
    'sql --write') changes it.

    A second writer waits for the first to end (an ingest then copies the workspace the first
    one wrote, so both changes end up in it), up to `timeout` seconds (default:
    lock_timeout()); on_wait(message) is called once when it has to wait. The lock file holds
    the pid and activity of the writer that owns it, and is removed when the writer ends. It
    sits next to the workspace file itself: a workspace reached through a symbolic link has one
    lock, whatever name a writer uses."""
    timeout = lock_timeout() if timeout is None else timeout
    target = real_path(db)
    lock_path = target.with_name(target.name + ".lock")
    deadline = time.monotonic() + timeout
    waited = False
    fh = _open_lock(db, lock_path)
    try:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same_file(fh, lock_path):
                    break
                # the writer before us removed the file it held: lock the one there now
                fh.close()
                fh = _open_lock(db, lock_path)
                continue
            except BlockingIOError:
                other, holder = _lock_holder(lock_path)
                if time.monotonic() >= deadline:
                    waited_for = f" after waiting {timeout:g} s" if timeout else ""
                    raise WorkspaceError(
                        f"{db}: another traceql {other}{holder} is writing this workspace{waited_for}; "
                        "try again when it ends (TRACEQL_LOCK_TIMEOUT sets how long to wait)") from None
                if not waited and on_wait is not None:
                    on_wait(f"{db}: waiting for another traceql {other}{holder} into this workspace to end")
                waited = True
                time.sleep(0.05)
        with contextlib.suppress(OSError):
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()} {activity}\n")
            fh.flush()
        try:
            yield
        finally:
            # no lock file left behind: removed while still held, so a writer waiting on this
            # file finds it gone once it gets the lock, and opens (and locks) a new one
            with contextlib.suppress(OSError):
                if _same_file(fh, lock_path):
                    os.unlink(lock_path)
    finally:
        fh.close()


def _open_lock(db: Path, lock_path: Path):
    try:
        return open(lock_path, "a+")
    except OSError as exc:
        raise WorkspaceError(f"{db}: cannot create lock file {lock_path.name} ({exc.strerror or exc})") from None


def _same_file(fh, lock_path: Path) -> bool:
    """Whether the open lock file fh is still the file at lock_path."""
    try:
        here, there = os.fstat(fh.fileno()), os.stat(lock_path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def real_path(db: Path) -> Path:
    """The workspace file DB names, symbolic links resolved (as far as they lead, when the file
    does not exist yet). A link that leads only in circles is a WorkspaceError."""
    try:
        return Path(os.path.realpath(db, strict=True))
    except FileNotFoundError:
        return Path(os.path.realpath(db))
    except OSError as exc:  # ELOOP
        raise WorkspaceError(f"{db}: cannot be opened ({exc.strerror or exc}: a symbolic link loop)") from None


def _lock_holder(lock_path: Path) -> tuple[str, str]:
    """(activity, ' (pid N)') of the writer holding the lock, as far as its file tells."""
    words = []
    with contextlib.suppress(OSError):
        words = lock_path.read_text().split()
    pid = ""
    with contextlib.suppress(ValueError, IndexError):  # IndexError: empty while rewritten
        pid = f" (pid {int(words[0])})"
    return (" ".join(words[1:]) or "ingest"), pid


def remove_dead_leftovers(db) -> None:
    """Temporary files of a traceql writer into DB whose process is gone (kill -9, the OOM
    killer): any command removes them, not only the next ingest. Files of a live process stay."""
    try:
        db = real_path(Path(db))
        found = list(db.parent.glob(f".{glob.escape(db.name)}.ingest-*"))
    except (OSError, WorkspaceError):
        return
    for leftover in found:
        m = re.match(r"\.ingest-(\d+)\.", leftover.name[len(db.name) + 1:])
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # alive (or another user's: not ours to remove)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, OSError):
            continue
        if leftover.is_dir():
            import shutil  # (here: every command imports this module, and shutil costs 2 ms with bz2 and lzma)

            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                leftover.unlink()
