"""Atomic file writes: readers see the old file or the new one, never half."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable, Union


def _umask() -> int:
    """The process umask, read without setting it (os.umask would race
    with other threads); 0o022 where /proc cannot say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def write_atomic(path: Union[str, os.PathLike],
                 data: Union[bytes, Iterable[bytes]]) -> Path:
    """Writes data (bytes, or its parts in order) to path through a
    temporary file in the same folder and a rename, so a crash mid-write
    leaves the previous file intact."""
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot write {str(path)!r}: folder "
                                f"{str(folder)!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            for part in [data] if isinstance(data, bytes) else data:
                f.write(part)
            f.flush()
            # mkstemp makes 0600: give the file the mode open() would
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path
