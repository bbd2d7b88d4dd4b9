"""requestState: what a request needs to resume after an input_required round, sealed against the client.

Rules of this module:
- The client holds the state between rounds and is an attacker: the state is sealed with
  HMAC-SHA256 and bound to the method, the tool/prompt name or resource URI, a digest of the
  arguments, who sent the request (the OAuth principal, when there is one) and an expiry. A
  tampered, foreign (another key, method, target, arguments or principal) or expired state is
  refused before any code of the server's author runs.
- The key is $MCPSERVER_STATE_KEY (shared by replicas, so two gunicorn workers or two containers
  accept each other's state), or a random key per process, said once in the log.
- Keys rotate: $MCPSERVER_STATE_KEYS (comma-separated) or $MCPSERVER_STATE_KEYS_FILE (one a line, `#`
  comments) is an ordered list. The first seals; every one of them opens, so replicas that already have
  a new key and replicas that do not yet seal with it honour each other's states (docs/guides/sessions.md
  says in which order to roll it out). A retired key opens nothing: what it sealed is refused as sealed
  with another key. One of the three variables, not two: which one would win is a guess.
- The format is `v1.<payload>.<mac>`, both base64url without padding; the payload is JSON and
  carries no secret (the client may read it: it holds the client's own earlier answers).
"""

from __future__ import annotations

import os
import threading
import time

from . import _environment, _json, _log
from ._forks import renew_at_fork
from .errors import ConfigError, InvalidParams

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional, Sequence, Union

__all__ = ["DEFAULT_STATE_TTL", "KEY_ENVIRONMENT", "Sealer", "arguments_digest", "keys_from_environment"]

log = _log.get("mcpserver.state")

KEY_ENVIRONMENT = _environment.STATE_KEY
DEFAULT_STATE_TTL = 600.0  # seconds a client may take to answer an input request
MAX_STATE_CHARS = 4 * 1024 * 1024  # a state is the client's earlier answers; bodies are capped anyway
_VERSION = "v1"


def arguments_digest(arguments: Any) -> str:
    """A digest of the arguments, the same for the same JSON whatever the key order."""
    import hashlib
    import json

    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _b64(data: bytes) -> str:
    import base64  # when a state is sealed: most servers never load it

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def keys_from_environment(environ: Optional[Mapping[str, str]] = None) -> tuple[str, ...]:
    """The state keys the environment names, the sealing one first; () when it names none. ConfigError
    when two of the variables are set, a list holds an empty key, or the file cannot be read or is empty."""
    environ = os.environ if environ is None else environ
    given = [name for name in (_environment.STATE_KEY, _environment.STATE_KEYS, _environment.STATE_KEYS_FILE)
             if environ.get(name)]
    if len(given) > 1:
        raise ConfigError(f"set one of {' and '.join(given)}, not both: which would seal is a guess")
    if not given:
        return ()
    value = environ[given[0]]
    if given[0] == _environment.STATE_KEY:
        return (value,)
    if given[0] == _environment.STATE_KEYS:
        keys = [key.strip() for key in value.split(",")]
        if not all(keys):
            raise ConfigError(f"{_environment.STATE_KEYS} has an empty key: give keys separated by single commas")
        return tuple(keys)
    try:
        with open(value, encoding="utf-8") as file:
            keys = [line.strip() for line in file if line.strip() and not line.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {_environment.STATE_KEYS_FILE} {value}: {exc}") from None
    if not keys:
        raise ConfigError(f"{_environment.STATE_KEYS_FILE} {value} holds no key (one a line, the sealing one first)")
    return tuple(keys)


class Sealer:
    """Seals requestState with one key, and opens it with any of the keys it holds (rotation)."""

    def __init__(self, key: Union[str, Sequence[str], None] = None, ttl: float = DEFAULT_STATE_TTL):
        """`key`: one key, or keys with the sealing one first; None reads the environment."""
        if key is None:
            self._secrets = keys_from_environment()
        else:
            self._secrets = (key,) if isinstance(key, str) else tuple(key)
            if not self._secrets or not all(isinstance(one, str) and one for one in self._secrets):
                raise ConfigError(f"a state key is a non-empty string, or a list of them: not {key!r}")
        self._keys: tuple[bytes, ...] = ()
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self.ttl = ttl

    def _mac(self, body: str, key: Optional[bytes] = None) -> bytes:
        """The MAC with `key`, by default the sealing key."""
        import hashlib
        import hmac

        return hmac.new(key or self._mac_keys()[0], body.encode("ascii", "replace"), hashlib.sha256).digest()

    def _verifies(self, given: bytes, body: str) -> bool:
        """Whether `given` is the MAC of `body` under any key held: the sealing one, or one being rotated out."""
        import hmac

        return any(hmac.compare_digest(given, self._mac(body, key)) for key in self._mac_keys())

    def _mac_keys(self) -> tuple[bytes, ...]:
        import hashlib
        import secrets

        with self._lock:
            if not self._keys:
                if self._secrets:
                    self._keys = tuple(hashlib.sha256(b"mcpserver requestState\0" + secret.encode()).digest()
                                       for secret in self._secrets)
                else:
                    self._keys = (secrets.token_bytes(32),)
                    log.warning("requestState is sealed with a key of this process only: another process will "
                                "refuse it; set %s to share one key between replicas", KEY_ENVIRONMENT)
            return self._keys

    def seal(self, binding: tuple[str, str, str, str], answers: dict[str, Any], pending: list[str]) -> str:
        """`binding`: (method, target, arguments digest, principal: "" when none)."""
        method, target, digest, who = binding
        sealed = {"m": method, "t": target, "a": digest, "e": int(time.time() + self.ttl), "r": answers, "p": pending}
        if who:
            sealed["w"] = who
        payload = _json.dumps(sealed).encode("utf-8")
        body = f"{_VERSION}.{_b64(payload)}"
        return f"{body}.{_b64(self._mac(body))}"

    def open(self, state: Any, binding: tuple[str, str, str, str]) -> tuple[dict[str, Any], list[str]]:
        """The answers and pending input keys of a state sealed for `binding`; InvalidParams otherwise."""
        if not isinstance(state, str) or len(state) > MAX_STATE_CHARS or state.count(".") != 2:
            raise _refused("it is not a state this server issued")
        body, _, mac = state.rpartition(".")
        try:
            given = _unb64(mac)
        except (ValueError, TypeError):
            raise _refused("it is not a state this server issued") from None
        if not body.startswith(_VERSION + ".") or not self._verifies(given, body):
            raise _refused("its seal does not verify (tampered, or sealed with another key)")
        try:
            payload = _json.loads(_unb64(body[len(_VERSION) + 1:]).decode("utf-8"))
        except ValueError:  # cannot happen for a state we sealed
            raise _refused("its payload is unreadable") from None
        method, target, digest, who = binding
        if (payload.get("m"), payload.get("t"), payload.get("a")) != (method, target, digest):
            raise _refused("it was issued for another request (method, name or arguments differ)")
        if payload.get("w", "") != who:
            raise _refused("it was issued to another client (the access token speaks for someone else)")
        if not isinstance(payload.get("e"), int) or payload["e"] < time.time():
            raise _refused("it has expired; start the request again")
        answers, pending = payload.get("r"), payload.get("p")
        if not isinstance(answers, dict) or not isinstance(pending, list):
            raise _refused("its payload is unreadable")
        return answers, [key for key in pending if isinstance(key, str)]


    def seal_value(self, kind: str, value: dict[str, Any], ttl: float) -> str:
        """Any small value sealed the same way (a legacy HTTP session's id: kind "session"), valid for `ttl`
        seconds. `kind` is inside the MAC: a value sealed as one kind never opens as another."""
        payload = _json.dumps({"k": kind, "e": int(time.time() + ttl), "v": value}).encode("utf-8")
        body = f"{_VERSION}.{_b64(payload)}"
        return f"{body}.{_b64(self._mac(kind + chr(0) + body))}"

    def open_value(self, kind: str, sealed: Any, max_chars: int = 8192) -> Optional[dict[str, Any]]:
        """The value `seal_value` sealed as `kind`; None when it is not one (forged, another key or kind,
        expired, or longer than `max_chars`)."""
        if not isinstance(sealed, str) or len(sealed) > max_chars or sealed.count(".") != 2:
            return None
        body, _, mac = sealed.rpartition(".")
        try:
            verified = body.startswith(_VERSION + ".") and self._verifies(_unb64(mac), kind + chr(0) + body)
            payload = _json.loads(_unb64(body[len(_VERSION) + 1:]).decode("utf-8")) if verified else None
        except (ValueError, TypeError):
            return None
        if not isinstance(payload, dict) or payload.get("k") != kind or not isinstance(payload.get("e"), int) \
                or payload["e"] < time.time() or not isinstance(payload.get("v"), dict):
            return None
        return payload["v"]  # type: ignore[no-any-return]


def _refused(why: str) -> InvalidParams:
    return InvalidParams(f"Invalid params: requestState was refused: {why}", data={"reason": "invalid_request_state"})
