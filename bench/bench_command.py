"""The `splitkv-bench` command a profiling script runs, taken from the script's trailing arguments.

Shared by `cpu_budget.py` and `cpu_timeline.py`, which run the command themselves: both start it
on an empty database, so that runs compare alike.
"""

import shutil


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
