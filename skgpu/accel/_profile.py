"""``python -m skgpu.accel --profile`` and ``--line-profile``: what the accelerated calls
cost, per estimator and method, and the time per line of the user's script.

The command line makes a folder for the run and names it in the environment
(``SKGPU_ACCEL_PROFILE_DIR``; with ``--line-profile`` also the script's path,
``SKGPU_ACCEL_LINE_PROFILE``), which every Python process it starts inherits (loky
workers, multiprocessing, subprocesses: their start-up hook installs the accelerator,
which reads these). Each process records its own calls (through the accelerator's
method wrappers, :mod:`._report`) and lines, and writes them to ``<folder>/<pid>.json``
after every accelerated call and at exit; when the script ends the command line merges
every process's file into one table (calls in worker processes counted in their own
column) and prints it on standard error.

Line times come from a trace function on the script's own frames (other code is not
traced line by line): a line's time runs from its start to the next line's in the same
frame, so it includes the calls it makes; each accelerated call's time is also added to
the script line it was called from, by where it ran.
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

DIR_VARIABLE = "SKGPU_ACCEL_PROFILE_DIR"
LINE_VARIABLE = "SKGPU_ACCEL_LINE_PROFILE"
PARENT_VARIABLE = "SKGPU_ACCEL_PROFILE_PARENT"

_lock = threading.Lock()
_active = False
_folder: str | None = None
_script: str | None = None
#: (estimator, method, backend) -> [calls, seconds]
_calls: dict[tuple[str, str, str], list] = defaultdict(lambda: [0, 0.0])
#: reason -> calls that gave it
_reasons: dict[str, int] = defaultdict(int)
#: script line -> [hits, seconds, accelerated seconds by backend {backend: seconds}]
_lines: dict[int, list] = {}


def from_environment() -> None:
    """Start recording where the command line asked for it (a no-op otherwise, and
    after the first call)."""
    global _active, _folder, _script
    folder = os.environ.get(DIR_VARIABLE)
    if _active or not folder:
        return
    _folder = folder
    _script = os.environ.get(LINE_VARIABLE) or None
    _active = True
    if _script:
        _start_tracing(_script)
    import atexit

    atexit.register(dump)


def active() -> bool:
    return _active


def record(name: str, method: str, backend: str, reason: str | None,
           seconds: float) -> None:
    """One accelerated call (from :mod:`._report`'s wrapper)."""
    line = _calling_line() if _script else None
    with _lock:
        entry = _calls[(name, method, backend)]
        entry[0] += 1
        entry[1] += seconds
        if reason:
            _reasons[reason] += 1
        if line is not None:
            by = _line(line)[2]
            by[backend] = by.get(backend, 0.0) + seconds
    dump()


def _line(number: int) -> list:
    entry = _lines.get(number)
    if entry is None:
        entry = _lines[number] = [0, 0.0, {}]
    return entry


def _calling_line() -> int | None:
    frame: Any = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == _script:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _start_tracing(script: str) -> None:
    """Trace the line events of the frames running ``script``'s code, in this thread and
    the threads started after."""
    clock = time.perf_counter

    def local(frame, event, arg):
        now = clock()
        key = id(frame)
        state = _frame_state.get(key)
        if state is not None:
            with _lock:
                _line(state[0])[1] += now - state[1]
        if event == "line":
            with _lock:
                _line(frame.f_lineno)[0] += 1
            _frame_state[key] = (frame.f_lineno, clock())
        elif event == "return":
            _frame_state.pop(key, None)
        elif state is not None:  # an exception: the line goes on
            _frame_state[key] = (state[0], clock())
        return local

    def global_trace(frame, event, arg):
        if frame.f_code.co_filename == script:
            return local
        return None

    sys.settrace(global_trace)
    threading.settrace(global_trace)


#: id(frame) -> (its current line, when that line's time started)
_frame_state: dict[int, tuple[int, float]] = {}


def stop_tracing() -> None:
    sys.settrace(None)
    threading.settrace(None)


def dump() -> None:
    """This process's records to ``<folder>/<pid>.json`` (replaced whole: a reader never
    sees half a file)."""
    if not _active or _folder is None:
        return
    with _lock:
        doc = {"pid": os.getpid(),
               "main": str(os.getpid()) == os.environ.get(PARENT_VARIABLE),
               "calls": [[*key, *value] for key, value in _calls.items()],
               "reasons": dict(_reasons),
               "script": _script,
               "lines": {str(k): v for k, v in _lines.items()}}
    path = os.path.join(_folder, f"{os.getpid()}.json")
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f)
        os.replace(path + ".tmp", path)
    except OSError:  # the folder went away (the run ended): nothing to report to
        pass


def merged(folder: str) -> list[dict[str, Any]]:
    """Every process's records in ``folder``."""
    docs = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            try:
                with open(os.path.join(folder, name)) as f:
                    docs.append(json.load(f))
            except (OSError, ValueError):
                continue
    return docs


def _table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
            for row in [header, *body]]


def report(folder: str) -> str:
    """The merged profile: per estimator, method and where it ran, the calls (those in
    worker processes also on their own), their time, and each reason once with its
    count; with the line profile, the script's lines."""
    docs = merged(folder)
    workers = [d for d in docs if not d.get("main")]
    calls: dict[tuple[str, str, str], list] = defaultdict(lambda: [0, 0.0, 0])
    reasons: dict[str, int] = defaultdict(int)
    lines: dict[int, list] = {}
    script = None
    for doc in docs:
        for name, method, backend, count, seconds in doc["calls"]:
            entry = calls[(name, method, backend)]
            entry[0] += count
            entry[1] += seconds
            if not doc.get("main"):
                entry[2] += count
        for reason, count in doc["reasons"].items():
            reasons[reason] += count
        script = script or doc.get("script")
        for number, (hits, seconds, by) in doc["lines"].items():
            entry = lines.setdefault(int(number), [0, 0.0, {}])
            entry[0] += hits
            entry[1] += seconds
            for backend, s in by.items():
                entry[2][backend] = entry[2].get(backend, 0.0) + s
    out = [f"skgpu.accel profile ({len(docs) - len(workers)} main process, "
           f"{len(workers)} worker process{'es' if len(workers) != 1 else ''})"]
    if not calls:
        out.append("no accelerated estimator was called")
    else:
        body = [(n, m, b, str(c), f"{s:.3f}", str(w))
                for (n, m, b), (c, s, w) in sorted(calls.items())]
        out += _table(("estimator", "method", "ran on", "calls", "time (s)",
                       "in workers"), body)
    if reasons:
        out.append("not on the GPU, why (each reason once, with its calls):")
        out += [f"  {count} call{'s' if count > 1 else ''}: {reason}"
                for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1])]
    if script:
        out.append(f"line profile of {script} (time from each line's start to the next "
                   "line's: the calls it makes included; accelerated: the estimators' "
                   "calls made from it, by where they ran)")
        line_rows: list[tuple[str, ...]] = []
        for number in sorted(lines):
            hits, seconds, by = lines[number]
            accelerated = ", ".join(f"{b} {s:.3f}" for b, s in sorted(by.items()))
            line_rows.append((str(number), str(hits), f"{seconds:.3f}", accelerated,
                              linecache.getline(script, number).rstrip()))
        out += _table(("line", "hits", "time (s)", "accelerated (s)", "source"), line_rows)
    return "\n".join(out)


def reset() -> None:
    """Forget this process's records (tests)."""
    global _active, _folder, _script
    stop_tracing()
    with _lock:
        _calls.clear()
        _reasons.clear()
        _lines.clear()
        _frame_state.clear()
    _active, _folder, _script = False, None, None
