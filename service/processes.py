"""Processes of this machine: whether one is alive (the job worker's, the API processes', a
collection writer's), read from the kernel without signalling it; and the limit of open
files a process that maps indexes needs."""

from __future__ import annotations

import os
import resource
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True if a process with ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


# what Elasticsearch's bootstrap check asks of a node (it maps index files as we do)
WANTED_OPEN_FILES = 65536


def raise_open_files_limit(wanted: int = WANTED_OPEN_FILES) -> int:
    """Raise this process's soft limit of open files to ``wanted`` (at most its hard limit),
    as the JVM does for Lucene at start, and return the soft limit now in force. Every
    memory-mapped array of an index, a collection segment or a model holds a file descriptor
    (CPython's ``mmap`` keeps one), so a collection of many segments needs more than the
    1,024 that shells often give; the limit is only ever raised, never lowered."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # a sandbox may refuse: keep what is in force
            pass
    return soft
