"""Interrupting a resprop run at a point it reports, never at a moment guessed from the wall clock.

The run is started with the test hook of ``resprop.numeric.cli_support.checkpoint``: ``RESPROP_TEST_CHECKPOINTS``
names the write end of a pipe (``/dev/fd/N``) to which the run appends the name of every checkpoint it reaches,
and ``RESPROP_TEST_PAUSE`` names the checkpoint (``NAME`` or ``NAME:N``, the N-th arrival) where it stops and
waits for a signal.  The test blocks on the pipe until the run says ``paused NAME``, then sends the signal: the
signal always lands at that point, however loaded the machine is.  The only clock is a hang guard.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: seconds: a hang guard only (a run that neither pauses nor exits, or does not exit after the signal); no outcome
#: depends on it
HANG_GUARD = 1800.0


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _await_pause(proc: subprocess.Popen, fd: int, name: str) -> tuple[bool, list[str]]:
    """Read checkpoint lines from ``fd`` until ``paused NAME`` (True) or the run exits first (False); the lines."""
    lines: list[str] = []
    buf = b""
    end = time.monotonic() + HANG_GUARD
    while True:
        # the 1 s tick only notices a run that exited while a process it started still holds the pipe open
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            data = os.read(fd, 4096)
            if data:
                buf += data
                *done, buf = buf.split(b"\n")
                lines += [ln.decode() for ln in done]
                if f"paused {name}" in lines:
                    return True, lines
                continue
            return False, lines  # EOF: the run (and everything it started) has exited
        if proc.poll() is not None:
            return False, lines
        if time.monotonic() > end:
            raise AssertionError(f"hang guard: no 'paused {name}' and no exit in {HANG_GUARD:g} s ({lines})")


def interrupt_at(args: list[str], at: str, sig: int = signal.SIGINT, what: str = "the run",
                 command: list[str] | None = None, cwd: Path | None = None,
                 while_paused: Callable[[], object] | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m resprop.numeric.cli *args`` (or ``command``) paused at the checkpoint ``at`` (``NAME`` or
    ``NAME:N``; resprop.numeric.cli_support.checkpoint lists them), send ``sig`` once it reports the pause, and
    return the finished process (returncode, stdout, stderr as text).  ``while_paused()`` is called while the run
    waits at the point, before the signal (to check the state the signal will meet: an assertion there fails the
    test).  AssertionError if the run exits without reaching the point.  The process is killed if it outlives the
    test."""
    name = at.partition(":")[0]
    read_fd, write_fd = os.pipe()
    env = dict(os.environ, RESPROP_TEST_CHECKPOINTS=f"/dev/fd/{write_fd}", RESPROP_TEST_PAUSE=at,
               PYTHONUNBUFFERED="1")
    argv = command or [sys.executable, "-m", "resprop.numeric.cli", *args]
    # stdout and stderr into files, not pipes: a run that writes much before the point never blocks on a full pipe
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            # SIGINT back to its default in the child: a test run started in the background by a non-interactive
            # shell ignores SIGINT, the child would inherit that, and Python would then install no
            # KeyboardInterrupt handler (the run would sit at its pause until PAUSE_LIMIT)
            proc = subprocess.Popen(argv, cwd=cwd or ROOT, stdout=out, stderr=err, env=env, pass_fds=(write_fd,),
                                    preexec_fn=_default_sigint)
        finally:
            os.close(write_fd)  # the run holds the only write end: EOF when it has exited
        try:
            paused, lines = _await_pause(proc, read_fd, name)
            if paused:
                if while_paused is not None:
                    while_paused()
                proc.send_signal(sig)
            proc.wait(timeout=HANG_GUARD)
        finally:
            os.close(read_fd)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = (f.read().decode(errors="replace") for f in (out, err))
    assert paused, (f"{what} exited with {proc.returncode} before it paused at {at!r} (checkpoints reached: "
                    f"{lines}); stderr: {stderr[-2000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
