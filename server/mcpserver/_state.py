"""requestState: what a request needs to resume after an input_required round, sealed against the client.

Rules of this module:
- The client holds the state between rounds and is an attacker: the state is sealed with
  HMAC-SHA256 and bound to the method, the tool/prompt name or resource URI, a digest of the
  arguments, who sent the request (the OAuth principal, when there is one) and an expiry. A
  tampered, foreign (another key, method, target, arguments or principal) or expired state is
  refused before any code of the server's author runs.
- The key is $MCPSERVER_STATE_KEY (shared by replicas, so two gunicorn workers or two containers
  accept each other's state), or a random key per process, said once in the log.
- The format is `v1.<payload>.<mac>`, both base64url without padding; the payload is JSON and
  carries no secret (the client may read it: it holds the client's own earlier answers).
"""

from __future__ import annotations

import os
import threading
import time

from . import _environment, _json, _log
from .errors import InvalidParams

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = ["DEFAULT_STATE_TTL", "KEY_ENVIRONMENT", "Sealer", "arguments_digest"]

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


class Sealer:
    """Seals and opens requestState with one key."""

    def __init__(self, key: Optional[str] = None, ttl: float = DEFAULT_STATE_TTL):
        self._secret = key if key is not None else os.environ.get(KEY_ENVIRONMENT)
        self._key: Optional[bytes] = None
        self._lock = threading.Lock()
        self.ttl = ttl

    def _mac(self, body: str) -> bytes:
        import hashlib
        import hmac

        return hmac.new(self._mac_key(), body.encode("ascii", "replace"), hashlib.sha256).digest()

    def _mac_key(self) -> bytes:
        import hashlib
        import secrets

        with self._lock:
            if self._key is None:
                if self._secret:
                    self._key = hashlib.sha256(b"mcpserver requestState\0" + self._secret.encode()).digest()
                else:
                    self._key = secrets.token_bytes(32)
                    log.warning("requestState is sealed with a key of this process only: another process will "
                                "refuse it; set %s to share one key between replicas", KEY_ENVIRONMENT)
            return self._key

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
        import hmac

        if not body.startswith(_VERSION + ".") or not hmac.compare_digest(given, self._mac(body)):
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
        import hmac

        try:
            verified = body.startswith(_VERSION + ".") and hmac.compare_digest(_unb64(mac),
                                                                                self._mac(kind + chr(0) + body))
            payload = _json.loads(_unb64(body[len(_VERSION) + 1:]).decode("utf-8")) if verified else None
        except (ValueError, TypeError):
            return None
        if not isinstance(payload, dict) or payload.get("k") != kind or not isinstance(payload.get("e"), int) \
                or payload["e"] < time.time() or not isinstance(payload.get("v"), dict):
            return None
        return payload["v"]  # type: ignore[no-any-return]


def _refused(why: str) -> InvalidParams:
    return InvalidParams(f"Invalid params: requestState was refused: {why}", data={"reason": "invalid_request_state"})
