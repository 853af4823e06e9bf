"""Ownership of a data directory: the embedded vector store belongs to one process.

The owner holds an exclusive lock on `dcpm.lock`; a serving daemon also writes `daemon.json`
(pid, address) so CLI commands can find it and go through its API instead. The directory holds
personal data: it is created readable by its owner only (0700), and so are these files (0600).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from dcpm.errors import Conflict, Invalid, StorageFull, is_disk_full

LOCK_FILE = "dcpm.lock"
DAEMON_FILE = "daemon.json"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def make_data_dir(data_dir: Path) -> None:
    """Create the data directory (and missing parents) for its owner only; one that exists keeps
    the mode its owner gave it."""
    with usable(data_dir):
        data_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)


@contextmanager
def usable(data_dir: Path) -> Iterator[None]:
    """Setting up the data directory, where a refusal of the file system (a file in its place or
    above it, no permission to write there) is the setting's fault: Invalid, naming the directory."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc):
            raise StorageFull(f"no space left under {data_dir}; nothing was written") from None
        reason = {errno.EEXIST: "it is a file", errno.ENOTDIR: "a part of its path is a file"}.get(
            exc.errno, (exc.strerror or str(exc)).lower())
        raise Invalid(f"cannot use {data_dir} as the data directory: {reason}") from None


def open_private(path: Path, mode: str = "a+"):  # type: ignore[no-untyped-def]
    """Open `path` readable by its owner only (one left by an older dcpm is made so too)."""
    flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if mode.startswith("w") else 0)
    fd = os.open(path, flags, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return os.fdopen(fd, mode)


def replace_privately(path: Path, data: bytes) -> None:
    """Put `data` at `path` whole or not at all, readable by its owner only: written to
    `NAME.part` (0600) and onto the disk, then renamed over `path`. A process killed meanwhile
    leaves the previous file whole (an export a user keeps as their backup) and at most a `.part`
    that nothing reads; a write that fails (a full disk) removes its `.part` and raises."""
    partial = path.with_name(path.name + ".part")
    try:
        with open_private(partial, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())  # else a power cut after the rename can leave an empty file
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself
    finally:
        os.close(directory)


class DataDirLock:
    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self._handle: Any = None

    def acquire(self) -> None:
        make_data_dir(self.data_dir)
        with usable(self.data_dir):
            handle = open_private(self.data_dir / LOCK_FILE)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            owner = read_daemon(self.data_dir)
            who = f"a daemon (pid {owner['pid']}, {owner['url']})" if owner else "another dcpm process"
            raise Conflict(f"the data directory {self.data_dir} is in use by {who}") from None
        self._handle = handle
        clear_daemon(self.data_dir)  # left by a daemon that died without its cleanup: it serves nothing now

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def is_locked(data_dir: Path) -> bool:
    path = Path(data_dir) / LOCK_FILE
    if not path.exists():
        return False
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def write_daemon(data_dir: Path, url: str, instance: str) -> None:
    """`instance`: a token the daemon also answers at /healthz/instance, so that a client can tell
    that whoever listens at `url` is this data directory's daemon and not another one."""
    path = Path(data_dir) / DAEMON_FILE
    tmp = path.with_suffix(".tmp")
    with open_private(tmp, "w") as handle:
        handle.write(json.dumps({"pid": os.getpid(), "url": url, "instance": instance}))
    tmp.replace(path)


def read_daemon(data_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(data_dir) / DAEMON_FILE).read_text())
    except (OSError, ValueError):
        return None


def clear_daemon(data_dir: Path) -> None:
    (Path(data_dir) / DAEMON_FILE).unlink(missing_ok=True)


def running_daemon(data_dir: Path) -> dict[str, Any] | None:
    """daemon.json of the daemon that owns this data directory, if one is serving it now (a file
    nobody holds the lock for is a dead daemon's; whoever takes the lock next removes it)."""
    info = read_daemon(data_dir)
    return info if info and "url" in info and is_locked(data_dir) else None



def ensure_free_space(data_dir: Path, min_free_mb: int) -> None:
    """Refuse a write before the disk is actually full. The vector shard writes through sparse
    memory-mapped files, and a mapped write into a full disk kills the process (SIGBUS) instead
    of failing; keeping a reserve turns that into a clean, retryable error."""
    if min_free_mb <= 0:
        return
    free_mb = shutil.disk_usage(data_dir).free / (1 << 20)
    if free_mb < min_free_mb:
        raise StorageFull(f"only {free_mb:.0f} MB free under {data_dir} (dcpm keeps {min_free_mb} MB in reserve); "
                          "nothing was written")
