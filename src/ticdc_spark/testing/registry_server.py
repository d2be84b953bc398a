"""A small Confluent Schema Registry in a thread: the REST calls TiCDC's Avro protocol makes
(``POST /subjects/{subject}/versions``, ``GET /schemas/ids/{id}``), over real HTTP.

For the demo and the tests, where the registry must be shared by processes (Spark's Python
workers) and confluent-kafka's ``mock://`` registry, which lives in one process, cannot be.
It keeps schemas in memory, gives one id per distinct schema, checks BACKWARD compatibility
the way that matters to TiCDC's tables (a field added without a default is refused with 409,
as is a field whose type changes), can require basic auth, and can be made to fail
(:meth:`RegistryServer.fail`) to test clients' retries.  Not a production registry.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["RegistryServer"]

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_REGISTER = re.compile(r"^/subjects/([^/]+)/versions$")
_BY_ID = re.compile(r"^/schemas/ids/(\d+)$")


class RegistryServer:
    """``with RegistryServer() as server: server.url``; ``auth=("user", "password")``."""

    def __init__(self, auth: tuple[str, str] | None = None, compatibility: str = "BACKWARD"):
        self.auth = auth
        self.compatibility = compatibility
        self.schemas: list[str] = []  # id - 1 -> schema text
        self.subjects: dict[str, list[int]] = {}  # subject -> ids of its versions
        self.requests = 0
        self._failures: list[int] = []  # statuses to answer the next requests with
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}"

    def __enter__(self) -> RegistryServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail(self, times: int, status: int = 503) -> None:
        """Answer the next ``times`` requests with ``status`` (a registry down for a while)."""
        with self._lock:
            self._failures += [status] * times

    # -- the REST calls -----------------------------------------------------------------------

    def answer(self, method: str, path: str, body: bytes, authorization: str | None) -> Any:
        with self._lock:
            self.requests += 1
            if self._failures:
                return self._failures.pop(0), {"error_code": 50301, "message": "unavailable"}
            if self.auth and authorization != _basic(*self.auth):
                return 401, {"error_code": 401, "message": "Unauthorized"}
            route = urlsplit(path).path
            register = _REGISTER.match(route)
            if method == "POST" and register:
                return self._register(unquote(register[1]), json.loads(body)["schema"])
            by_id = _BY_ID.match(route)
            if method == "GET" and by_id:
                return self._schema(int(by_id[1]))
            return 404, {"error_code": 404, "message": f"no route {method} {route}"}

    def _register(self, subject: str, text: str) -> tuple[int, Any]:
        canonical = json.dumps(json.loads(text), sort_keys=True)
        versions = self.subjects.setdefault(subject, [])
        for schema_id in versions:
            if json.dumps(json.loads(self.schemas[schema_id - 1]), sort_keys=True) == canonical:
                return 200, {"id": schema_id}
        if versions and self.compatibility == "BACKWARD":
            reason = _backward_problem(json.loads(self.schemas[versions[-1] - 1]), json.loads(text))
            if reason:
                return 409, {
                    "error_code": 409,
                    "message": f"Schema being registered is "
                    f"incompatible with an earlier schema: {reason}",
                }
        self.schemas.append(text)
        versions.append(len(self.schemas))
        return 200, {"id": len(self.schemas)}

    def _schema(self, schema_id: int) -> tuple[int, Any]:
        if not 1 <= schema_id <= len(self.schemas):
            return 404, {"error_code": 40403, "message": f"Schema {schema_id} not found"}
        return 200, {"schema": self.schemas[schema_id - 1]}


def _backward_problem(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why a reader of ``new`` cannot read records written with ``old`` (records only)."""
    old_fields = {f["name"]: f for f in old.get("fields", [])}
    for field in new.get("fields", []):
        before = old_fields.get(field["name"])
        if before is None and "default" not in field:
            return f"field {field['name']!r} is new and has no default"
        if before is not None and before["type"] != field["type"]:
            return f"field {field['name']!r} changed type"
    return None


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _handler(server: RegistryServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._reply("GET")

        def do_POST(self) -> None:
            self._reply("POST")

        def _reply(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, payload = server.answer(
                method, self.path, body, self.headers.get("Authorization")
            )
            data = json.dumps(payload).encode()
            self.send_response(HTTPStatus(status))
            self.send_header("Content-Type", _CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

    return Handler
