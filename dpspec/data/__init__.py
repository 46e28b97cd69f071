"""Data bindings: locating and loading the datasets a spec refers to — inside the data root only.

Real datasets are never copied into the repository. They are found under a data root:
``$DPSPEC_DATA_DIR`` if set, otherwise the workplace's shared folder ``../shared/data`` next to
the repository checkout.

The data root is a sandbox. A spec is not always written by the person who runs it (a
certificate embeds its spec, and `dpspec verify` recompiles it), so a data path a spec names
(``csv("adult/adult.data")``) is read only when

* it is relative, with ``/`` between folders, and has no ``..`` part (checked by `dpspec check`,
  see :func:`data_path_problem`);
* it resolves, symbolic links followed, to a file inside the data root;
* that file is a regular file (never a folder, device, FIFO or socket: reading those could block
  or never end) and no larger than the ``data_file_bytes`` limit.

Every loader reads through :func:`read_data_file` (or :func:`read_bounded` for a path it was given
explicitly), which enforces all of this at the moment of reading (the file is opened without
blocking and checked on the open descriptor, so it cannot be swapped for a FIFO in between).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path, PurePosixPath

from dpspec import limits
from dpspec.errors import DpspecError

__all__ = [
    "data_root",
    "DataNotFoundError",
    "DataAccessError",
    "FileRefused",
    "data_path_problem",
    "resolve_data_path",
    "read_data_file",
    "read_data_text",
    "read_bounded",
    "TABLE_GENERATORS",
    "GRAPH_GENERATORS",
]

# The generators of dpspec.data.synthetic, named here without importing numpy (the checker reads them).
TABLE_GENERATORS = ("secret_groups", "two_blobs", "markov_chain")
GRAPH_GENERATORS = ("sbm_graph",)


class DataNotFoundError(DpspecError, FileNotFoundError):
    """A dataset a spec or a loader asked for is not present under the data root."""


class DataAccessError(DpspecError):
    """A data path the sandbox refuses (outside the data root, not a regular file, not UTF-8).

    ``hint`` says what to do instead; the message never quotes the file's content. Not a
    ValueError, so that no compile stage mistakes it for a problem of its own: the compiler
    reports it as DPS010 at the data binding."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


class FileRefused(DpspecError, OSError):
    """A file that exists but is not read: ``reason`` completes "`path` …" (e.g. "is a FIFO")."""

    def __init__(self, reason: str, hint: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


def data_root() -> Path:
    """Return the folder holding the real datasets (adult/, cora/, ...).

    Raises DataNotFoundError with a hint when no such folder exists.
    """
    env = os.environ.get("DPSPEC_DATA_DIR")
    if env:  # an explicit setting is used as given, never silently replaced
        if Path(env).is_dir():
            return Path(env)
        raise DataNotFoundError(f"DPSPEC_DATA_DIR={env} is not a folder")
    repo = Path(__file__).resolve().parents[2]
    candidates = [repo.parent / "shared" / "data", repo / "data"]
    for c in candidates:
        if c.is_dir():
            return c
    raise DataNotFoundError(
        "no data folder found; set DPSPEC_DATA_DIR to the folder that holds adult/, cora/, ... "
        f"(looked in: {', '.join(str(c) for c in candidates)})"
    )


_HINT_RELATIVE = (
    "write the path relative to the data root ($DPSPEC_DATA_DIR), with `/` between folders, "
    'e.g. csv("adult/adult.data")'
)


def data_path_problem(path: str) -> tuple[str, str] | None:
    """Why ``path``, as written in a spec, cannot name a file under the data root: (reason, hint),
    or None when it can. Needs no file system, so `dpspec check` reports it with a location."""
    if not path.strip():
        return "the data path is empty", _HINT_RELATIVE
    if len(path) > 1024:
        return "the data path is longer than 1024 characters", _HINT_RELATIVE
    if re.search(r"[\x00-\x1f\x7f]", path):
        return "the data path contains a control character", _HINT_RELATIVE
    if "\\" in path:
        return "the data path contains a backslash", 'separate folders with `/`, e.g. csv("adult/adult.data")'
    if path.startswith(("/", "~")) or re.match(r"[A-Za-z]:", path):
        return "the data path is absolute; data is read from the data root only", _HINT_RELATIVE
    if ".." in PurePosixPath(path).parts:
        return "the data path leaves the data root (`..`)", _HINT_RELATIVE
    return None


def resolve_data_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """The real path (symbolic links resolved) of ``path`` under the data root.

    Raises :class:`DataAccessError` when the path is not allowed or resolves outside the root,
    :class:`DataNotFoundError` when there is no such file.
    """
    text = os.fspath(path)
    problem = data_path_problem(text)
    if problem:
        raise DataAccessError(f"`{text}`: {problem[0]}", problem[1])
    base = Path(root) if root is not None else data_root()
    try:
        real_base = base.resolve(strict=True)
    except (OSError, RuntimeError) as e:
        raise DataNotFoundError(f"the data root {base} cannot be opened ({_reason(e)})") from None
    try:
        real = (real_base / text).resolve(strict=True)
    except FileNotFoundError:
        raise DataNotFoundError(f"dataset file not found: {text} (data root {base})") from None
    except (OSError, RuntimeError) as e:  # a symbolic link loop, a path through a file, ...
        raise DataAccessError(
            f"`{text}` cannot be resolved inside the data root ({_reason(e)})",
            "check the symbolic links under the data root",
        ) from None
    if real != real_base and real_base not in real.parents:
        raise DataAccessError(
            f"`{text}` resolves outside the data root (through a symbolic link)",
            "data is read from the data root only; copy or link the file's folder into it",
        )
    return real


def read_data_file(path: str | os.PathLike, root: str | os.PathLike | None = None) -> bytes:
    """The bytes of a regular file under the data root (see the module docstring for the rules)."""
    real = resolve_data_path(path, root)
    try:
        return read_bounded(real, "data_file_bytes", what=f"`{os.fspath(path)}`", follow_symlinks=False)
    except FileNotFoundError:
        raise DataNotFoundError(f"dataset file not found: {os.fspath(path)}") from None
    except FileRefused as e:
        raise DataAccessError(f"`{os.fspath(path)}` {e.reason}", e.hint or _HINT_RELATIVE) from None


def read_data_text(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """:func:`read_data_file` decoded as UTF-8."""
    data = read_data_file(path, root)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataAccessError(
            f"`{os.fspath(path)}` is not UTF-8 text (byte {e.start})",
            "data files are UTF-8 text (CSV, or the dataset's own format)",
        ) from None


def read_bounded(
    path: str | os.PathLike,
    limit_name: str,
    *,
    what: str = "the file",
    regular_only: bool = True,
    follow_symlinks: bool = True,
) -> bytes:
    """Read a whole file, never more than ``limits.limit(limit_name)`` bytes and never blocking on a
    file that is not regular.

    Raises FileNotFoundError, :class:`FileRefused` (a folder, a FIFO or device when
    ``regular_only``, a symbolic link loop, unreadable) or :class:`dpspec.limits.LimitExceeded`.
    With ``regular_only=False`` a device or pipe is read (up to the limit), as for a spec given
    on the command line as ``/dev/stdin``.
    """
    max_bytes = limits.limit(limit_name)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(os.fspath(path), flags)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise FileRefused("is a folder") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise FileRefused(
                "is a symbolic link that cannot be followed here (a loop, or a link swapped in)"
            ) from None
        raise FileRefused(f"cannot be read ({_reason(e)})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileRefused("is a folder")
        if not stat.S_ISREG(st.st_mode):
            if regular_only:
                kind = (
                    "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
                )
                raise FileRefused(
                    f"is {kind}, not a regular file", "name a regular file (a FIFO or device could block or never end)"
                )
            os.set_blocking(fd, True)  # an explicitly named pipe is read as it comes
        elif st.st_size > max_bytes:
            raise limits.LimitExceeded(limit_name, st.st_size, what=f"the size of {what} in bytes")
        chunks, total = [], 0
        while True:
            try:
                chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            except OSError as e:
                raise FileRefused(f"cannot be read ({_reason(e)})") from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # (a file that grew, or a device without end)
                raise limits.LimitExceeded(limit_name, total, what=f"the size of {what} in bytes (at least)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    return str(e) or type(e).__name__
