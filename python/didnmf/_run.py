"""Running the ``didnmf`` command: progress, interrupts and errors as Python shows them.

``run`` starts the command, passes its stderr (the progress lines) through to ``sys.stderr``
when asked, forwards a KeyboardInterrupt to it as SIGINT (the command then cancels its job,
in this process or on its cluster, and exits) before re-raising it, and turns a failure into
an exception whose message is the command's: exit status 2 (bad input or usage) raises
``DidnmfInputError``, a ``ValueError``; any other status ``DidnmfError``, a ``RuntimeError``.
"""

import signal
import subprocess
import sys
import threading

from ._binary import find_binary

__all__ = ["run", "shown", "DidnmfError", "DidnmfInputError", "Completed"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# The prefixes of the command's own error lines ("didnmf: ..."; "node: ..." from binaries
# built before the command was renamed).
_PREFIXES = ("didnmf: ", "node: ")


class DidnmfError(RuntimeError):
    """The didnmf command failed; the message is the command's.

    Attributes: ``returncode`` (the exit status), ``args_run`` (the command line) and
    ``stderr`` (all it printed there).
    """

    def __init__(self, message, returncode=None, args_run=None, stderr=""):
        super().__init__(message)
        self.returncode = returncode
        self.args_run = args_run
        self.stderr = stderr


class DidnmfInputError(DidnmfError, ValueError):
    """The didnmf command refused its input or flags (exit status 2), as scikit-learn raises
    ``ValueError`` for bad input."""


class Completed:
    """A finished command: its ``stdout`` and ``stderr`` text."""

    def __init__(self, stdout, stderr):
        self.stdout = stdout
        self.stderr = stderr


def error_message(stderr, returncode):
    """The command's message in its stderr: from its first error line (not a warning) to the
    end, else its last non-empty line, else a sentence with the exit status."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith(_PREFIXES) and ": warning: " not in ln[:20]:
            return "\n".join(lines[i:])
    if lines:
        return lines[-1]
    return f"the didnmf command failed with exit status {returncode} and printed nothing"


def _pump(stream, sink, echo):
    """Read ``stream`` line by line into the list ``sink``; with ``echo``, write each line to
    the current ``sys.stderr`` as it comes."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        sink.append(line)
        if echo:
            err = sys.stderr
            if err is not None:
                err.write(line)
                err.flush()
    stream.close()


def _interrupt(proc):
    """Ask the command to stop (SIGINT: it cancels its job, on its cluster too, and exits)
    and wait for it; a second KeyboardInterrupt while waiting kills it."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass
    while True:
        try:
            proc.wait()
            return
        except KeyboardInterrupt:
            proc.kill()


def shown(message, names):
    """``message`` with every key of ``names`` (a path the user never saw, as the temporary
    file an in-memory X was written to) replaced by its value (what the user gave, as
    "X (in memory)")."""
    for path, name in (names or {}).items():
        message = message.replace(path, name)
    return message


def run(args, verbose=0, binary=None, names=None):
    """Run ``didnmf ARGS`` and return a ``Completed`` with what it printed.

    ``verbose > 0`` passes the command's stderr through to ``sys.stderr`` as it comes;
    otherwise it is only kept (for the error message). A KeyboardInterrupt sends the command
    SIGINT, waits for it to exit and is re-raised. Exit status 2 raises ``DidnmfInputError``
    (a ``ValueError``), any other non-zero status ``DidnmfError``; both carry the command's
    message, in which ``names`` (a dict) renames paths the user never saw (see ``shown``).
    """
    exe = binary or find_binary()
    argv = [exe] + [str(a) for a in args]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = [], []
    readers = [
        threading.Thread(target=_pump, args=(proc.stdout, out, False), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, err, verbose > 0), daemon=True),
    ]
    for t in readers:
        t.start()
    try:
        returncode = proc.wait()
    except KeyboardInterrupt:
        _interrupt(proc)
        for t in readers:
            t.join()
        raise
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    for t in readers:
        t.join()
    stdout, stderr = "".join(out), "".join(err)
    if returncode == 0:
        return Completed(stdout, stderr)
    message = shown(error_message(stderr, returncode), names)
    if returncode == EXIT_USAGE:
        raise DidnmfInputError(message, returncode, argv, stderr)
    if returncode == EXIT_INTERRUPTED:
        message = f"the didnmf command was interrupted (exit status 130): {message}"
    elif returncode < 0:
        message = f"the didnmf command was killed by signal {-returncode}: {message}"
    raise DidnmfError(message, returncode, argv, stderr)
