"""The listening socket's file when the server listens on a Unix socket (`--http unix:PATH`): made so that no one but
whom its mode admits can connect, or swap it for one of theirs, and removed when the server stops.

Rules of this module:
- The path fits AF_UNIX: at most MAX_PATH_BYTES bytes (sun_path holds 108 with its NUL), no NUL (an abstract socket
  has no file, so no mode: anyone on the host could connect). Past either, ConfigError naming the path.
- Its directory is the server's user's or root's, and no one else may write it unless it is sticky (/tmp): else
  another user could remove the socket and put one of theirs in its place, and clients would talk to them.
- What is at the path already: nothing; or a socket of this user that no server answers (a stale one, left by a
  server that was killed), which is removed. A socket a server answers, another user's socket, a symbolic link
  (planted, say, in /tmp) or any other file is never touched: ConfigError saying which.
- The socket is created with its mode (0600 by default: this user alone), never wider even for a moment: the
  umask is narrowed around bind(). bind() never replaces a file, so anything planted between the check and
  bind() is refused too.
- When the server stops, the file is removed if it is still the one it made (same device and inode).
"""

from __future__ import annotations

import errno
import os
import socket
import stat

from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

__all__ = ["DEFAULT_SOCKET_MODE", "MAX_PATH_BYTES", "UnixSocketFile"]

DEFAULT_SOCKET_MODE = 0o600  # read and write (connect) for the server's user alone
MAX_PATH_BYTES = 107  # Linux's sun_path is 108 bytes, its NUL included
STALE_PROBE_SECONDS = 1.0  # how long a connect() to what is at the path may take to say a server answers


class UnixSocketFile:
    """The file of a listening Unix socket: checked and bound by listen(), removed by remove()."""

    def __init__(self, path: str, mode: int = DEFAULT_SOCKET_MODE):
        if "\0" in path:
            raise ConfigError("a Unix socket path has no NUL: an abstract socket has no file mode, so anyone on the "
                              "host could connect to it")
        size = len(os.fsencode(path))
        if not path or size > MAX_PATH_BYTES:
            raise ConfigError(f"the Unix socket path {path!r} is {size} bytes: AF_UNIX allows 1 to {MAX_PATH_BYTES} "
                              "(sun_path is 108 bytes with its NUL); choose a shorter path")
        if not 0 <= mode <= 0o777:
            raise ConfigError(f"a Unix socket's mode is 0 to 0777, not {mode:o}")
        self.path = path
        self.mode = mode
        self._made: Optional[tuple[int, int]] = None  # (device, inode) of the file this server made

    def listen(self) -> socket.socket:
        """A listening, non-blocking socket on the path; ConfigError when the path is not safe to use."""
        self._check_directory()
        self._clear_stale()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        umask = os.umask(0o777 & ~self.mode)  # created with its mode, never wider for a moment
        try:
            listener.bind(self.path)
        except OSError as exc:
            listener.close()
            if exc.errno == errno.EADDRINUSE:  # something was put there after the check: bind() replaces nothing
                raise ConfigError(f"cannot listen on unix:{self.path}: something was created there meanwhile; "
                                  "refusing to replace it") from None
            raise ConfigError(f"cannot listen on unix:{self.path}: {exc.strerror}") from None
        finally:
            os.umask(umask)
        made = os.lstat(self.path)
        self._made = (made.st_dev, made.st_ino)
        try:
            listener.listen(1024)
            listener.setblocking(False)  # accept after poll: a client that gave up must not block it
        except OSError:
            listener.close()
            self.remove()
            raise
        return listener

    def remove(self) -> None:
        """Remove the socket's file if it is still the one this server made (idempotent)."""
        made, self._made = self._made, None
        if made is None:
            return
        try:
            found = os.lstat(self.path)
            if (found.st_dev, found.st_ino) == made:
                os.unlink(self.path)
        except OSError:  # gone already, or the directory is no longer ours to change
            pass

    def _check_directory(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            found = os.stat(directory)
        except OSError as exc:
            raise ConfigError(f"cannot listen on unix:{self.path}: its directory {directory}: {exc.strerror}") from None
        if found.st_uid not in (os.geteuid(), 0):
            raise ConfigError(f"refusing to listen on unix:{self.path}: its directory {directory} belongs to another "
                              f"user (uid {found.st_uid}), who could replace the socket with one of theirs")
        if found.st_mode & 0o022 and not found.st_mode & stat.S_ISVTX:
            raise ConfigError(f"refusing to listen on unix:{self.path}: others may write to its directory {directory} "
                              "and it is not sticky, so anyone could replace the socket with one of theirs; use a "
                              "directory of your own (or one like /tmp, with the sticky bit)")

    def _clear_stale(self) -> None:
        """Remove a stale socket of this user at the path; ConfigError for anything else there."""
        try:
            found = os.lstat(self.path)
        except FileNotFoundError:
            return
        where = f"unix:{self.path}"
        if stat.S_ISLNK(found.st_mode):
            raise ConfigError(f"refusing to listen on {where}: it is a symbolic link, which this server neither "
                              "follows nor replaces")
        if not stat.S_ISSOCK(found.st_mode):
            raise ConfigError(f"refusing to listen on {where}: a file that is not a socket is there")
        if found.st_uid != os.geteuid():
            raise ConfigError(f"refusing to listen on {where}: the socket there belongs to another user "
                              f"(uid {found.st_uid})")
        if _answers(self.path):
            raise ConfigError(f"cannot listen on {where}: a server is listening there already")
        os.unlink(self.path)


def _answers(path: str) -> bool:
    """Whether a server accepts connections on the socket at `path` (a full queue counts as one)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(STALE_PROBE_SECONDS)
    try:
        probe.connect(path)
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK) or isinstance(exc, socket.timeout)
    finally:
        probe.close()
    return True
