"""The skills a server serves: found under directories, checked, digested, registered as skill:// resources.

Rules of this module (the Skills extension, SEP-2640, over the Agent Skills format):
- Every directory under a root holding a SKILL.md is a skill; its path relative to the root, after the
  prefix, is its skill path (`acme/billing/refunds`), whose last segment must be the frontmatter `name`.
  A root that holds a SKILL.md itself is a skill named by the root's own directory name.
- A skill's files are the regular files below its directory, its nested skills' files included (they are
  its supporting files too), each a resource `skill://<skill-path>/<file-path>`. URIs are RFC 3986: a byte
  a path segment may not hold (the first segment: an authority's reg-name) is percent-encoded. A read
  looks the URI up among those published; nothing a client sends is ever resolved as a path, so `..` in
  any spelling, encoded or not, names nothing.
- Never served, and logged: names starting with "." and __pycache__ (tooling, not the skill), a symlink
  whose target leaves the directory of its skill, a symlink to a directory (not followed), anything that
  is not a regular file (a device, a FIFO, a socket). A read resolves and opens the file again, refusing
  the same things at that moment, and reads at most MAX_SKILL_BYTES.
- Refused at start-up, naming the file (ConfigError): frontmatter that does not parse, a missing or empty
  `name` or `description`, a name outside the naming rules or other than its directory's, a description
  over 1,024 characters, a skill over MAX_SKILL_FILES files or MAX_SKILL_BYTES bytes, a URI served twice.
- A file's digest (SHA-256 of its bytes) and size are computed once. `refresh` (before each skills/*
  answer, and when a read finds that a file changed) walks the roots again, compares each file's inode,
  size, mtime and ctime with those it digested, rehashes what changed and updates the registry: a skill
  that no longer passes the checks is withheld, and logged, until it does.
"""

from __future__ import annotations

import os
import re
import stat
import threading

from .. import _log
from .._forks import renew_at_fork
from .._resources import Resource, ResourceNotFound
from ..errors import ConfigError
from ._frontmatter import FrontmatterError, load

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Union

__all__ = ["DIRECTORY_MIME_TYPE", "MAX_SKILL_BYTES", "MAX_SKILL_FILES", "Catalog", "Skill"]

log = _log.get("mcpserver.skills")

# The extension's limits per skill (SEP-2640 "Limits"): every conforming host loads a skill within them.
MAX_SKILL_FILES = 512  # files in one skill, SKILL.md included
MAX_SKILL_BYTES = 16 * 1024 * 1024  # all of one skill's files together
MAX_DESCRIPTION_CHARS = 1024  # the Agent Skills format's
SKILL_FILE = "SKILL.md"
DIRECTORY_MIME_TYPE = "inode/directory"
# The Agent Skills naming rules: 1-64 of a-z 0-9 and "-", not first or last, never two in a row.
_NAME = re.compile(r"(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
# RFC 3986: what stays literal in the authority (unreserved, which quote keeps anyway, and sub-delims), and in
# a path segment (those and ":" "@").
_AUTHORITY_SAFE = "!$&'()*+,;="
_SEGMENT_SAFE = _AUTHORITY_SAFE + ":@"
_MIME_TYPES = {
    ".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain", ".csv": "text/csv",
    ".html": "text/html", ".css": "text/css", ".js": "text/javascript", ".py": "text/x-python",
    ".sh": "text/x-shellscript", ".json": "application/json", ".yaml": "application/yaml",
    ".yml": "application/yaml", ".toml": "application/toml", ".xml": "application/xml", ".pdf": "application/pdf",
    ".zip": "application/zip", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".gif": "image/gif", ".webp": "image/webp", ".svg": "image/svg+xml",
}


def _encoded(segment: str, first: bool) -> str:
    from urllib.parse import quote

    return quote(os.fsencode(segment), safe=_AUTHORITY_SAFE if first else _SEGMENT_SAFE)


def skill_uri(segments: tuple[str, ...]) -> str:
    """skill://a/b/c for ("a", "b", "c"), each segment percent-encoded as RFC 3986 has it."""
    return "skill://" + "/".join(_encoded(segment, index == 0) for index, segment in enumerate(segments))


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


class _Refused(Exception):
    """A file that is never served, and why."""


def _stamp(status: os.stat_result) -> tuple[int, ...]:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


def _read_regular(path: str, boundary: str) -> tuple[bytes, tuple[int, ...]]:
    """The bytes of the regular file at `path` and its stamp, if it resolves inside `boundary`; else _Refused."""
    real = os.path.realpath(path)
    if not _inside(real, boundary):
        raise _Refused(f"a symlink to {real}, outside its skill's directory")
    try:  # O_NOFOLLOW: no symlink swapped in since; O_NONBLOCK: a FIFO cannot hold the open
        descriptor = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _Refused(f"cannot be opened ({exc.strerror})") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _Refused("not a regular file")
        chunks, size = [], 0
        while size <= MAX_SKILL_BYTES:
            chunk = os.read(descriptor, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_SKILL_BYTES:
            raise _Refused(f"larger than a whole skill may be ({MAX_SKILL_BYTES} bytes, MAX_SKILL_BYTES)")
        return b"".join(chunks), _stamp(status)
    finally:
        os.close(descriptor)


def _text(data: bytes) -> Optional[str]:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class _File:
    """One served file: its URI, where it is, and the digest and size of the bytes last read there (with the
    frontmatter, for a SKILL.md). One object per URI for the catalog's life, so the Resource registered for it
    stays valid across refreshes."""

    __slots__ = ("boundary", "catalog", "digest", "frontmatter", "mime_type", "path", "size", "stamp", "uri")

    def __init__(self, catalog: Catalog, uri: str, path: str):
        self.catalog = catalog
        self.uri = uri
        self.path = path
        self.boundary = ""  # the real directory of its innermost skill, which a symlink may not leave
        self.stamp: tuple[int, ...] = ()
        self.digest = ""
        self.size = 0
        self.mime_type = ""
        self.frontmatter: Union[dict[str, Any], str, None] = None  # a SKILL.md's, or why it does not parse

    def digest_now(self, status: os.stat_result) -> None:
        """Read and digest the file, unless `status` says it is what was digested last (_Refused: not served)."""
        if _stamp(status) == self.stamp:
            return
        data, self.stamp = _read_regular(self.path, self.boundary)
        import hashlib

        self.digest, self.size = "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
        text = _text(data)
        self.mime_type = _MIME_TYPES.get(os.path.splitext(self.path)[1].lower()) or (
            "application/octet-stream" if text is None else "text/plain")
        if os.path.basename(self.path) == SKILL_FILE:
            try:
                if text is None:
                    raise FrontmatterError(self.path, 1, "not UTF-8 text")
                self.frontmatter = load(text, self.path)[0]
            except FrontmatterError as exc:
                self.frontmatter = str(exc)

    def read(self) -> Union[str, bytes]:  # the Resource's reader (a docstring would become its description)
        try:
            data, stamp = _read_regular(self.path, self.boundary)
        except _Refused as exc:
            log.warning("%s is not served: %s: %s", self.uri, self.path, exc)
            raise ResourceNotFound(self.uri) from None
        if stamp != self.stamp:  # changed since it was digested: the manifest catches up
            self.catalog.refresh()
        text = _text(data)
        return data if text is None else text


class Skill:
    """One skill as skills/list and skills/get give it: `entry` is its Skill object on the wire."""

    __slots__ = ("entry", "files", "uri")

    def __init__(self, uri: str, frontmatter: dict[str, Any], files: list[_File]):
        self.uri = uri  # its SKILL.md's
        self.files = files  # SKILL.md first
        self.entry = {"uri": uri, "frontmatter": frontmatter,
                      "resources": [{"uri": f.uri, "digest": f.digest, "size": f.size} for f in files]}


class _Root:
    """A directory given to Server.skills, and the prefix its skill paths take."""

    __slots__ = ("given", "path", "prefix")

    def __init__(self, given: Any, prefix: str):
        given = os.fspath(given)
        if not isinstance(given, str) or not os.path.isdir(given):
            raise ConfigError(f"skills: {given} is not a directory")
        segments = tuple(prefix.split("/")) if isinstance(prefix, str) and prefix else ()
        if not isinstance(prefix, str) or any(segment in ("", ".", "..") for segment in segments):
            raise ConfigError(f"skills: the prefix {prefix!r} must be segments separated by single slashes, none "
                              "of them empty, '.' or '..'")
        self.given = given
        self.path = os.path.realpath(given)
        self.prefix = segments


class _State:
    """What one walk of the roots found."""

    def __init__(self) -> None:
        self.skills: dict[str, Skill] = {}  # by the URI of its SKILL.md, sorted
        self.definitions: dict[str, dict[str, Any]] = {}  # the served files' Resource objects, by URI
        self.files: dict[str, _File] = {}
        self.directories: dict[str, list[tuple[str, str, bool]]] = {}  # URI -> (child's URI, name, a directory?)
        self.problems: list[str] = []  # what is not served, and why


def _listing(top: str, state: _State) -> dict[tuple[str, ...], list[tuple[str, bool]]]:
    """Every directory below `top` (as path segments) and its children, (name, a directory?), sorted; names
    starting with "." and __pycache__ left out, and symlinks to directories (in state.problems)."""
    children: dict[tuple[str, ...], list[tuple[str, bool]]] = {}
    for here, subfolders, names in os.walk(top):
        below = () if here == top else tuple(os.path.relpath(here, top).split(os.sep))
        kept = []
        for name in subfolders:
            if name.startswith(".") or name == "__pycache__":
                continue
            if os.path.islink(os.path.join(here, name)):
                state.problems.append(f"{os.path.join(here, name)}: not served: a symlink to a directory (not "
                                      "followed)")
                continue
            kept.append(name)
        subfolders[:] = kept
        children[below] = sorted([(name, True) for name in kept] +
                                 [(name, False) for name in names if not name.startswith(".")])
    return children


class Catalog:
    """Every skill a server serves (Server.skills adds roots). Its files are Resources in the server's registry;
    the skills/* methods ask it for skills and directories, each answer after a refresh."""

    def __init__(self, server: Any):
        self.server = server
        self._roots: list[_Root] = []
        self._lock = threading.RLock()  # a refresh may be asked for by a read it started
        renew_at_fork(self, "_lock")
        self._state = _State()
        self._files: dict[str, _File] = {}  # every file ever served, by URI: its Resource reads through it
        self._resources: dict[str, Resource] = {}  # what is registered now
        self._reported: set[str] = set()

    def add(self, path: Any, prefix: str = "") -> None:
        """Serve the skills under `path`; ConfigError, naming the file, for one that cannot be served."""
        with self._lock:
            roots = [*self._roots, _Root(path, prefix)]
            state = self._walk(roots, strict=True)
            self._roots = roots
            self._apply(state)

    def refresh(self) -> None:
        """Walk the roots again and serve what is there now (see the module's rules)."""
        with self._lock:
            self._apply(self._walk(self._roots, strict=False))

    def skills(self) -> list[Skill]:
        self.refresh()
        return list(self._state.skills.values())

    def skill(self, uri: str) -> Optional[Skill]:
        self.refresh()
        return self._state.skills.get(uri)

    def directory(self, uri: str) -> Optional[list[dict[str, Any]]]:
        """The direct children of a directory resource, as Resource objects on the wire; None if `uri` names
        no directory."""
        self.refresh()
        state = self._state
        children = state.directories.get(uri)
        if children is None:
            return None
        return [{"uri": child, "name": name, "mimeType": DIRECTORY_MIME_TYPE} if is_directory
                else state.definitions[child] for child, name, is_directory in children]

    @property
    def roots(self) -> list[str]:
        """The directories given, as absolute paths."""
        return [os.path.abspath(root.given) for root in self._roots]

    def serves(self, uri: str) -> bool:
        """Whether `uri` is a file served now (after a refresh)."""
        return uri in self._state.files

    # -- walking the roots -----------------------------------------------------------------------------------

    def _walk(self, roots: list[_Root], strict: bool) -> _State:
        state = _State()
        for root in roots:
            found = self._walk_root(root, strict)
            state.problems += found.problems
            for name in ("skills", "files"):
                twice = sorted(set(getattr(state, name)) & set(getattr(found, name)))
                if twice:
                    message = f"skills: {twice[0]} is served twice (a second time from {root.given})"
                    if strict:
                        raise ConfigError(message)
                    state.problems.append(message + "; the second is left out")
                    found = _State()
            state.skills.update(found.skills)
            state.files.update(found.files)
            state.definitions.update(found.definitions)
            state.directories.update(found.directories)
        state.skills = dict(sorted(state.skills.items()))
        return state

    def _walk_root(self, root: _Root, strict: bool) -> _State:
        state = _State()
        own = os.path.isfile(os.path.join(root.path, SKILL_FILE))  # the root is a skill: named by its directory
        top = root.prefix + ((os.path.basename(os.path.abspath(root.given)),) if own else ())
        children = _listing(root.path, state)
        skill_dirs = {below for below, listed in children.items() if (SKILL_FILE, False) in listed}
        members: dict[tuple[str, ...], list[_File]] = {below: [] for below in skill_dirs}
        statuses: dict[str, os.stat_result] = {}
        for below, listed in children.items():
            holders = [below[:n] for n in range(len(below), -1, -1) if below[:n] in skill_dirs]  # innermost first
            for name, is_directory in listed:
                checked = None if is_directory or not holders else self._file(root, top, (*below, name), holders[0],
                                                                                state)
                if checked is not None:
                    statuses[checked[0].uri] = checked[1]
                    for holder in holders:
                        members[holder].append(checked[0])
        for below in sorted(skill_dirs):
            try:
                self._skill(top + below, os.path.join(root.given, *below), members[below], statuses, state)
            except ConfigError as exc:
                if strict:
                    raise
                state.problems.append(f"{exc}; the skill is withheld until that is fixed")
        served = {file.uri: file for skill in state.skills.values() for file in skill.files}
        for uri, file in served.items():
            fields = file.frontmatter if isinstance(file.frontmatter, dict) and uri in state.skills else {}
            state.definitions[uri] = {"uri": uri, "name": fields.get("name") or os.path.basename(file.path),
                                      **({"description": fields["description"]} if fields else {}),
                                      "mimeType": file.mime_type}
        state.files = served
        for below, listed in children.items():  # a directory of a served skill is a directory resource
            if any(skill_uri((*top, *below[:n], SKILL_FILE)) in state.skills for n in range(len(below) + 1)):
                state.directories[skill_uri(top + below)] = [
                    (skill_uri((*top, *below, name)), name, is_directory) for name, is_directory in listed
                    if is_directory or skill_uri((*top, *below, name)) in served]
        return state

    def _file(self, root: _Root, top: tuple[str, ...], segments: tuple[str, ...], holder: tuple[str, ...],
              state: _State) -> Optional[tuple[_File, os.stat_result]]:
        """The file at `segments` and its status, if it is a regular file within its skill's directory; else None,
        with the reason in state.problems."""
        path = os.path.join(root.path, *segments)
        uri = skill_uri(top + segments)
        file = self._files.get(uri)
        if file is None or file.path != path:
            file = self._files[uri] = _File(self, uri, path)
        file.boundary = os.path.join(root.path, *holder)
        try:
            real = os.path.realpath(path)
            if not _inside(real, file.boundary):
                raise _Refused(f"a symlink to {real}, outside its skill's directory")
            status = os.stat(real)
            if not stat.S_ISREG(status.st_mode):
                raise _Refused("not a regular file")
        except OSError as exc:
            state.problems.append(f"{path}: not served: it cannot be read ({exc.strerror})")
            return None
        except _Refused as exc:
            state.problems.append(f"{path}: not served: {exc}")
            return None
        return file, status

    def _skill(self, segments: tuple[str, ...], directory: str, files: list[_File],
               statuses: dict[str, os.stat_result], state: _State) -> None:
        """Check the skill at `segments` (its directory, as given, for messages) and add it to `state`; ConfigError
        saying why it cannot be served."""
        where = os.path.join(directory, SKILL_FILE)
        own = skill_uri((*segments, SKILL_FILE))
        files.sort(key=lambda f: (f.uri != own, f.uri))
        if not files or files[0].uri != own:
            raise ConfigError(f"{where}: not a regular file within the skill's directory")
        total = sum(statuses[f.uri].st_size for f in files)
        if len(files) > MAX_SKILL_FILES or total > MAX_SKILL_BYTES:
            raise ConfigError(f"{where}: the skill has {len(files)} files of {total} bytes in all; a skill may have "
                              f"at most {MAX_SKILL_FILES} files (MAX_SKILL_FILES) of {MAX_SKILL_BYTES} bytes "
                              "(MAX_SKILL_BYTES), as the Skills extension has it")
        for file in files:
            try:
                file.digest_now(statuses[file.uri])
            except _Refused as exc:
                raise ConfigError(f"{file.path}: cannot be served: {exc}") from None
        frontmatter = files[0].frontmatter
        if not isinstance(frontmatter, dict):
            raise ConfigError(str(frontmatter))
        for field in ("name", "description"):
            if not isinstance(frontmatter.get(field), str) or not frontmatter[field].strip():
                raise ConfigError(f"{where}: the frontmatter needs a {field!r}, a non-empty string")
        name, description = frontmatter["name"], frontmatter["description"]
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: the name {name!r} breaks the Agent Skills naming rules: 1 to 64 of a-z, 0-9 "
                              "and '-', not first or last, never two in a row")
        if name != segments[-1]:
            raise ConfigError(f"{where}: the name {name!r} differs from its directory's, {segments[-1]!r}")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise ConfigError(f"{where}: the description has {len(description)} characters; at most "
                              f"{MAX_DESCRIPTION_CHARS}")
        uri = files[0].uri
        state.skills[uri] = Skill(uri, frontmatter, list(files))

    # -- the registry ----------------------------------------------------------------------------------------

    def _apply(self, state: _State) -> None:
        """Make `state` what is served: the registry's resources follow it; problems not reported yet are logged."""
        problems = set(state.problems)
        for problem in state.problems:
            if problem not in self._reported:
                log.warning("%s", problem)
        self._reported = problems
        registered = self._resources
        wanted = {uri: definition for uri, definition in state.definitions.items()
                  if uri not in registered or registered[uri].definition != definition}
        for uri in [uri for uri in registered if uri not in state.definitions or uri in wanted]:
            self.server.remove_resource(uri)
            del registered[uri]
        for uri, definition in wanted.items():
            resource = Resource(uri, self._files[uri].read, name=definition["name"],
                                description=definition.get("description"), mime_type=definition["mimeType"])
            self.server.add_resource(resource)
            registered[uri] = resource
            state.definitions[uri] = resource.definition
        self._state = state
