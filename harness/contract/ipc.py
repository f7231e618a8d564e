"""What binding an ``ipc://`` endpoint may take from someone: nothing.

libzmq deletes whatever is at an ipc path before it binds the path (so that
a socket file a crashed process left does not block the bind), and only
then finds out whether the bind works: a user's file, a symlink, a file of
the harness cache's pristine tree, or a socket another process listens on
would be gone, even where the bind then fails (a path over the 107 bytes a
socket address holds). Every verb that binds (``check-stream --listen``,
``capture --listen``: harness.contract.subscribe) asks `check_ipc_bind`
first. What changes at the path between the check and the bind is libzmq's
to meet.
"""

import os
import socket
import stat
from pathlib import Path

from harness import cache
from harness.errors import SubscriptionError, UserError

# The longest path an AF_UNIX socket address holds (sockaddr_un.sun_path, its
# NUL excluded).
IPC_PATH_MAX = 107


def check_ipc_bind(endpoint: str) -> None:
    """Refuse, before it is bound, an ``ipc://`` path where something is that
    binding would delete: only nothing, or a socket no process listens on
    (one an earlier bind left), may be there. A file, a directory, a
    symlink (whatever it leads to), a device, a pipe, or a socket another
    process listens on is refused, as is a path inside the harness cache
    (its directory reached through links or a bind mount) and one too long
    to bind. ``ipc://*`` (libzmq makes a new name) and an abstract
    ``ipc://@NAME`` have no file; other transports are not ipc."""
    path = endpoint.removeprefix("ipc://")
    if path == endpoint or path == "*" or path.startswith("@"):
        return
    if not path:
        raise SubscriptionError(f"{endpoint}: no path to bind")
    if (problem := _in_cache(Path(path))) is not None:
        raise SubscriptionError(f"{endpoint}: {problem}")
    if len(os.fsencode(path)) > IPC_PATH_MAX:
        raise SubscriptionError(
            f"{endpoint}: the path is longer than {IPC_PATH_MAX} bytes, the "
            f"most a socket address holds; give a shorter one"
        )
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there (the bind says why where it cannot be made)
    except OSError as exc:
        raise SubscriptionError(f"{endpoint}: {path}: {exc.strerror}") from None
    if stat.S_ISSOCK(info.st_mode):
        if (problem := _listened_on(path)) is None:
            return
    else:
        problem = f"{path} is {_kind(info.st_mode)}"
    raise SubscriptionError(
        f"{endpoint}: {problem}, and binding an ipc path deletes what is there "
        f"first; give a path where nothing is"
    )


def _in_cache(path: Path) -> str | None:
    """Why ``path`` is in the harness cache (its directory is, the socket
    not being made yet), or None."""
    try:
        base = cache.root()
        directory = path.parent.resolve()
    except (UserError, RuntimeError, OSError):
        return None  # no cache to keep, or a directory the bind will not find
    if directory.is_relative_to(base) or cache.holds_directory(directory):
        return (
            f"{path} lies inside the harness cache {base}, which no verb "
            f"writes into; give a path outside it"
        )
    return None


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    return "a device or a pipe"


def _listened_on(path: str) -> str | None:
    """Why the socket at ``path`` is someone's (a process accepts on it, it
    is not a stream socket, or it cannot be tried), else None: a socket a
    bind that ended left behind."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        return None
    except OSError as exc:
        return f"{path} is a socket the harness cannot try ({exc.strerror})"
    finally:
        probe.close()
    return f"{path} is a socket another process listens on"
