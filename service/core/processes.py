"""Processes of this machine: whether one is alive (the job worker's, the API processes', a
collection writer's), read from the kernel without signalling it; and the limit of open
files a process that maps indexes needs."""

from __future__ import annotations

import os
import resource
import select
import threading
import time
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


def exit_with(pid: int, name: str = "exit-with") -> None:
    """Exit this process (``os._exit(1)``) as soon as the process ``pid`` is gone: a daemon
    thread waits on its pid file descriptor (or polls, where there is none). For a worker
    whose reason to live is that process — a collection writer's indexing workers (killed
    with SIGKILL, it cannot stop them; left behind they hold the fork server), a Ray shard
    worker whose raylet died (it would answer on for the ~15 s the cluster takes to declare
    the node dead, and then vanish at once)."""

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)
        except (OSError, AttributeError):  # gone already, or no pidfd: poll
            while pid_alive(pid):
                time.sleep(0.5)
            os._exit(1)
        select.select([fd], [], [])  # readable when the process has exited
        os._exit(1)

    if not pid_alive(pid):
        os._exit(1)
    threading.Thread(target=watch, name=name, daemon=True).start()


def command_of(pid: int) -> str:
    """The command line of ``pid`` ("" when it cannot be read)."""
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


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
