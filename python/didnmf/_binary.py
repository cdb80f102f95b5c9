"""Finding the ``didnmf`` command that the package drives.

The command is looked up, in this order, as

1. the binary built into the installed package (``didnmf/bin/didnmf``, put there by
   ``pip install ./python``),
2. the file named by the environment variable ``DIDNMF_BIN``,
3. ``didnmf`` on ``PATH``,

and each candidate is checked by running it with ``--version``: the first line must start
with ``"didnmf "`` (a Node.js ``node`` or any other program of that name is not taken).
"""

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["find_binary", "BinaryNotFoundError"]

ENV_VAR = "DIDNMF_BIN"
BUNDLED = Path(__file__).resolve().parent / "bin" / "didnmf"

HOW_TO_GET_ONE = (
    "install the Python package with its built-in command (pip install ./python from a checkout "
    "of the repository, with a Go toolchain on PATH), or install the command with "
    "'go install github.com/didnmf/didnmf/cmd/didnmf@latest', or set DIDNMF_BIN to the path of "
    "a didnmf binary"
)

# Binaries already checked: path -> (mtime_ns, size, version line).
_checked = {}


class BinaryNotFoundError(RuntimeError):
    """No usable ``didnmf`` command was found (the message says where it looked and why)."""


def version_line(path):
    """Return the first line ``path --version`` prints, or raise ``BinaryNotFoundError``.

    The line must start with ``"didnmf "``. The answer is cached per file (by its
    modification time and size), so a fit does not pay for the check every time.
    """
    path = str(path)
    try:
        st = os.stat(path)
    except OSError as e:
        raise BinaryNotFoundError(f"{path}: {e.strerror}") from None
    key = (st.st_mtime_ns, st.st_size)
    hit = _checked.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        raise BinaryNotFoundError(f"{path} is not an executable file")
    try:
        proc = subprocess.run(
            [path, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BinaryNotFoundError(f"{path} --version failed: {e}") from None
    out = proc.stdout.decode("utf-8", "replace")
    first = out.splitlines()[0] if out.strip() else ""
    if proc.returncode != 0 or not first.startswith("didnmf "):
        got = first or proc.stderr.decode("utf-8", "replace").strip()[:200] or "nothing"
        raise BinaryNotFoundError(
            f"{path} is not the didnmf command: '{path} --version' printed {got!r} "
            f"(exit status {proc.returncode}); a didnmf binary prints a line starting 'didnmf '"
        )
    _checked[path] = (key, first)
    return first


def find_binary():
    """Return the path of the ``didnmf`` command to run.

    Raises ``BinaryNotFoundError`` naming every place looked at, why each was refused, and
    how to get the command. ``DIDNMF_BIN``, when set, must name a didnmf binary: a wrong
    value is an error rather than a silent fall-back to ``PATH``.
    """
    tried = []
    if BUNDLED.exists():
        try:
            version_line(BUNDLED)
            return str(BUNDLED)
        except BinaryNotFoundError as e:
            tried.append(f"the package's own {BUNDLED}: {e}")
    env = os.environ.get(ENV_VAR)
    if env:
        try:
            version_line(env)
            return env
        except BinaryNotFoundError as e:
            raise BinaryNotFoundError(
                f"{ENV_VAR}={env}: {e}. Fix or unset {ENV_VAR}; to get the command, "
                + HOW_TO_GET_ONE
            ) from None
    tried.append(f"{ENV_VAR} is not set")
    on_path = shutil.which("didnmf")
    if on_path:
        try:
            version_line(on_path)
            return on_path
        except BinaryNotFoundError as e:
            tried.append(f"PATH: {e}")
    else:
        tried.append("no didnmf on PATH")
    if not BUNDLED.exists():
        tried.insert(0, f"the package has no built-in command ({BUNDLED} is absent)")
    raise BinaryNotFoundError(
        "the didnmf command was not found (" + "; ".join(tried) + "). To get it, " + HOW_TO_GET_ONE
    )
