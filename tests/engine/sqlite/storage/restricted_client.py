"""Runs one client operation as a process the file permission bits apply to, and prints the outcome.

Tests run as root, and root ignores permission bits through its capabilities. So when started as
root this script drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER from its bounding set and
re-executes itself: a root process exec'd without them is held to the owner's mode bits like anyone
else (it stays uid 0, so it can still read the interpreter under /root). Run as another user, the
bits apply already.

Usage: ``restricted_client.py DATA_DIR open|send:QUEUE|create:QUEUE``; prints one JSON object:
``{"ok": ..., "error": class name or null, "message": text, "dac_override": bool}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

import conveyor

PR_CAPBSET_DROP = 24
# CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER (linux/capability.h).
PERMISSION_CAPABILITIES = (1, 2, 3)
DROPPED_FLAG = "--capabilities-dropped"


def drop_permission_capabilities() -> None:
    """Remove the capabilities that bypass permission bits, then exec again so they are gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in PERMISSION_CAPABILITIES:
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap}) failed")
    os.execv(sys.executable, [sys.executable, __file__, DROPPED_FLAG, *sys.argv[1:]])


def has_dac_override() -> bool:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 1))
    return False


def run(data_dir: str, action: str) -> str:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        verb, _, queue = action.partition(":")
        if verb == "send":
            cv.queue(queue).send_batch([{"body": {"n": -1 - i}} for i in range(10)])
        elif verb == "create":
            cv.create_queue(queue).send({"n": -1})
        return action


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == DROPPED_FLAG:
        args = args[1:]
    elif os.geteuid() == 0:
        drop_permission_capabilities()
    outcome: dict[str, object] = {"ok": False, "error": None, "message": "", "dac_override": has_dac_override()}
    try:
        outcome["message"] = run(args[0], args[1])
        outcome["ok"] = True
    except conveyor.ConveyorError as exc:
        outcome["error"], outcome["message"] = type(exc).__name__, str(exc)
    except Exception as exc:  # an unexpected exception type is a test failure worth seeing whole
        outcome["error"], outcome["message"] = f"unexpected {type(exc).__name__}", str(exc)
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
