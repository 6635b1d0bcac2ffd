"""What the CPU profiling scripts share: the `splitkv-bench` command they run, taken from their
trailing arguments, and the groups its threads fall into.

Shared by `cpu_budget.py` and `cpu_timeline.py`, which run the command themselves: both start it
on an empty database, so that runs compare alike, and both report the same thread groups.
"""

import os
import shutil

# Engine thread groups by thread-name prefix; the benchmark's own threads (the writers or
# readers) are "threads", anything else "other".
GROUPS = [("gc", "splitkv-gc"), ("flusher", "splitkv-log"), ("flush+compaction", "splitkv-bg")]
GROUP_NAMES = ["threads", *(name for name, _ in GROUPS), "other"]


def flag(command, name):
    """The value of `--name=value` in the command, or None."""
    for arg in command:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return None


def fresh_command(trailing):
    """The command after an optional `--`, with the directory its `--db` names removed."""
    command = trailing[1:] if trailing[:1] == ["--"] else trailing
    db = flag(command, "db")
    if db:
        shutil.rmtree(db, ignore_errors=True)
    return command


def program_name(command):
    """The name the command's own threads carry: its program's, cut to the kernel's 15 bytes."""
    return os.path.basename(command[0])[:15]


def thread_group(comm, program):
    """The group (one of `GROUP_NAMES`) of a thread named `comm` in a run of `program`."""
    group = next((name for name, prefix in GROUPS if comm.startswith(prefix)), None)
    return group or ("threads" if comm == program else "other")
