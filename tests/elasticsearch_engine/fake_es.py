"""A loopback stand-in for an Elasticsearch 9 cluster, speaking enough REST for atlas-mcp.

It is the only Elasticsearch these machines can run, so it is built to catch what a real
cluster would refuse, not to be lenient:

- every response carries ``X-Elastic-Product: Elasticsearch`` (the client's product check);
- authentication: ``Basic`` = the admin user, ``ApiKey`` = the writer key or a minted key;
  an API key cannot mint a key that carries privileges; invalidated keys get 401;
- privileges, per request: the admin is least-privilege (``manage_own_api_key`` + ``monitor``),
  the writer has only ``read``/``create_doc``/``index``/``delete`` on the indices (so ``GET /``,
  ``_mapping``, ``GET _inference`` and index stats are 403 for it), minted keys have what their
  role descriptor grants and see only what its DLS query allows; invalidating keys needs
  ``owner: true`` (or ``manage_api_key``), and ``owner`` only reaches the caller's own keys;
- strict mappings: a field the index does not map, or a wrong ``constant_keyword``, is a 400;
  a write to a missing name auto-creates a concrete index with a dynamic mapping (as a cluster
  does) unless the action says ``require_alias``, which also refuses a concrete index name;
- retrievers: ``standard`` (query + filter), ``rrf`` (ranks only, rank_constant, window),
  ``text_similarity_reranker`` (probability or raw-logit endpoints, then the documented
  ``max(s,0)+min(exp(s),1)`` shift), with the server's window validation; licence refusal for
  RRF below Enterprise;
- queries: bool/term/terms/ids/exists/range/match_all, ``multi_match`` as BM25 over lower-cased
  words, ``semantic`` as cosine over the injected embedder's vectors, ``function_score`` whose
  ``script_score`` runs the Painless source (``painless.py``: unguarded ``doc[...]`` on an
  unmapped field fails, dates before 1970 have negative epoch millis);
- ``from + size`` beyond ``index.max_result_window`` is a 400; points in time, ``search_after``
  with ``_shard_doc``, ``_mget`` (real-time, DLS applies) and ``_msearch``;
- bulk: create/index/update/delete with ``if_seq_no`` + ``if_primary_term`` conflicts (each
  index has its own primary term, never 1), partial updates deep-merged into ``_source`` as a
  cluster does (a key missing from ``doc`` stays), per-item results, and the refusal of scripted
  updates on indices with a ``semantic_text`` field.

Not simulated: analyzers beyond lower-cased words, refresh latency (documents are visible at
once; tests assert the refresh *flag*).
Faults (status, body, headers, delay) can be queued per method and path.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import itertools
import json
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import numpy as np

from . import field_types, painless

WRITER_KEY = ("writer-key-id", "writer-secret")
ADMIN_KEY = ("admin-key-id", "admin-key-secret")
SERVICE_KEYS = frozenset({WRITER_KEY[0], ADMIN_KEY[0]})  # the deployment's own, never a user's
ADMIN = ("atlas-admin", "admin-password")
WORD = re.compile(r"\w+", re.UNICODE)
Embed = Callable[[Sequence[str]], np.ndarray]


def encode_key(key_id: str, secret: str) -> str:
    return base64.b64encode(f"{key_id}:{secret}".encode()).decode()


def hashed_embedder(dimensions: int = 256) -> Embed:
    """Bag of hashed lower-cased words, L2-normalised: deterministic, instant, model-free."""

    def embed(texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), dimensions), dtype=np.float64)
        for row, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                out[row, hash_word(word) % dimensions] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    return embed


def hash_word(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")


class EsError(Exception):
    def __init__(
        self,
        status: int,
        kind: str,
        reason: str,
        headers: dict[str, str] | None = None,
        caused_by: dict[str, Any] | None = None,
        suppressed: list[dict[str, Any]] | None = None,
    ):
        super().__init__(reason)
        self.status, self.kind, self.reason, self.headers = status, kind, reason, headers or {}
        self.caused_by, self.suppressed = caused_by, suppressed

    def error(self) -> dict[str, Any]:
        """The ``error`` object: type, reason, the cause and suppressed failures when there are."""
        out: dict[str, Any] = {"type": self.kind, "reason": self.reason}
        if self.caused_by is not None:
            out["caused_by"] = self.caused_by
        if self.suppressed:
            out["suppressed"] = self.suppressed
        return out

    def body(self) -> dict[str, Any]:
        cause = {"type": self.kind, "reason": self.reason}
        if self.kind == "search_phase_execution_exception" and self.caused_by:
            # every shard failed: the root causes are the shards' own errors
            failed = [{"shard": 0, "index": None, "reason": self.caused_by}]
            error = {"root_cause": [self.caused_by], **cause, "phase": "query", "failed_shards": failed}
            return {"error": error | {"caused_by": self.caused_by}, "status": self.status}
        return {"error": {"root_cause": [cause], **self.error()}, "status": self.status}


# A privilege is held if it, or one that implies it, was granted.
CLUSTER_IMPLIED = {
    "monitor_inference": {"monitor", "manage_inference", "manage", "all"},
    "monitor": {"manage", "all"},
    "manage_own_api_key": {"manage_api_key", "manage_security", "all"},
    "manage_api_key": {"manage_security", "all"},
}
INDEX_IMPLIED = {
    "read": {"all"},
    "create_doc": {"create", "index", "write", "all"},
    "index": {"write", "all"},
    "delete": {"write", "all"},
    "view_index_metadata": {"manage", "all"},
    "create_index": {"manage", "all"},
    "delete_index": {"manage", "all"},
    "monitor": {"manage", "all"},
    "maintenance": {"manage", "all"},
    "manage": {"all"},
}
WRITER_PRIVILEGES = {"read", "create_doc", "index", "delete"}
# Releases whose reranker ran the internal inference action as the searching user
# (elastic/elasticsearch#128328, fixed by #128327 and its backports #128330 and the 8.18 one;
# the 9.0 backport was merged 2025-05-22, after 9.0.1).
RERANK_AS_CALLER = frozenset({"8.18.0", "8.18.1", "9.0.0", "9.0.1"})
# The documented least-privilege administrator (docs/elasticsearch.md, "Privileges each command
# needs"): it mints keys, which can do no more than it can, and creates/migrates the indices.
ADMIN_CLUSTER = {"manage_own_api_key", "monitor_inference"}
ADMIN_INDEX = {"manage", "read", "write"}
# Endpoints as GET _inference describes them: task type, service, model, and (rerank) score kind.
ENDPOINTS: dict[str, dict[str, str]] = {
    ".jina-embeddings-v5-text-small": {
        "task_type": "text_embedding",
        "service": "elastic",
        "model_id": "jina-embeddings-v5-text-small",
    },
    ".multilingual-e5-small-elasticsearch": {
        "task_type": "text_embedding",
        "service": "elasticsearch",
        "model_id": ".multilingual-e5-small_linux-x86_64",
    },
    ".elser-2-elasticsearch": {
        "task_type": "sparse_embedding",
        "service": "elasticsearch",
        "model_id": ".elser_model_2_linux-x86_64",
    },
    ".jina-reranker-v2-base-multilingual": {
        "task_type": "rerank",
        "service": "elastic",
        "model_id": "jina-reranker-v2-base-multilingual",
        "scores": "probability",
    },
    ".rerank-v1-elasticsearch": {
        "task_type": "rerank",
        "service": "elasticsearch",
        "model_id": ".rerank-v1",
        "scores": "logit",
    },
}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def ndjson(self) -> list[Any]:
        return [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]

    @property
    def auth(self) -> tuple[str, str]:
        """("apikey", key id) or ("basic", username)."""
        scheme, _, value = self.headers.get("authorization", "").partition(" ")
        decoded = base64.b64decode(value).decode() if value else ":"
        return scheme.lower(), decoded.split(":", 1)[0]


# A fault's delay that stands for "never answers": far past any test's request timeout, so a
# client stalled on a busy machine cannot wait long enough to be answered after all. The handler
# threads are daemons, so a stop never waits for one.
SILENT_S = 30.0


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int = 0
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    times: int = 1


@dataclass
class Principal:
    kind: str  # admin | writer | user
    name: str
    key_id: str | None = None
    descriptors: dict[str, Any] = field(default_factory=dict)
    cluster: set[str] = field(default_factory=set)
    index: dict[str, set[str]] = field(default_factory=dict)  # pattern -> privileges
    # An API key's owner as the key was created: the key may do no more than it could
    # (`security.get_api_key` `with_limited_by`: the intersection of both role sets).
    limited_by: Principal | None = None

    def snapshot(self) -> Principal:
        """The privileges this principal holds now, frozen (what a key it mints is limited by)."""
        cluster, index, _ = self.grants()
        return Principal(
            self.kind,
            self.name,
            self.key_id,
            dict(self.descriptors),
            set(cluster),
            {p: set(v) for p, v in index.items()},
            self.limited_by,
        )

    def grants(self) -> tuple[set[str], dict[str, set[str]], dict[str, Any] | None]:
        """(cluster privileges, index privileges by pattern, DLS query) in force for this caller."""
        if self.kind != "user":
            return self.cluster, self.index, None
        if not self.descriptors:  # a derived key: its owner's rights, as the key was created
            assert self.limited_by is not None
            return self.limited_by.grants()
        (descriptor,) = self.descriptors.values()  # atlas mints one descriptor with one entry
        (entry,) = descriptor["indices"]
        return (
            set(descriptor.get("cluster", [])),
            {n: set(entry["privileges"]) for n in entry["names"]},
            entry.get("query"),
        )


@dataclass
class Key:
    id: str
    secret: str
    name: str
    owner: Principal
    descriptors: dict[str, Any]
    metadata: dict[str, Any]
    invalidated: bool = False
    limited_by: Principal | None = None


@dataclass
class Index:
    name: str
    mappings: dict[str, Any]
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"source", "seq_no", "order"}
    primary_term: int = 1

    @property
    def properties(self) -> dict[str, Any]:
        return self.mappings.get("properties", {})

    def has_semantic_text(self) -> bool:
        return any(p.get("type") == "semantic_text" for p in self.properties.values())


@dataclass(frozen=True)
class DocRef:
    index: Index = field(compare=False, hash=False)
    id: str = ""
    index_name: str = ""

    @property
    def source(self) -> dict[str, Any]:
        return self.index.docs[self.id]["source"]


class FakeElasticsearch:
    def __init__(
        self,
        embed: Embed | None = None,
        *,
        version: str = "9.1.0",
        flavour: str = "default",
        licence: str = "trial",
        inference_ids: Sequence[str] = (
            ".jina-embeddings-v5-text-small",
            ".jina-reranker-v2-base-multilingual",
        ),
        max_result_window: int = 10_000,
    ) -> None:
        self.embed = embed or hashed_embedder()
        self.version = version
        self.flavour = flavour  # "serverless": GET / says 8.11.0, no licence API, no index stats
        self.licence = licence
        self.inference_ids = set(inference_ids)
        self.endpoints = {k: dict(v) for k, v in ENDPOINTS.items()}  # what GET _inference describes
        self.failing_shards: dict[str, dict[str, Any]] = {}  # concrete index -> fault (``fail_shard``)
        self.rejected_searches = 0  # how many next ``_msearch`` items are rejected (429)
        self.max_result_window = max_result_window
        self.indices: dict[str, Index] = {}
        self.aliases: dict[str, str] = {}
        self.keys: dict[str, Key] = {}
        self.pits: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
        self._pit_indices: dict[str, str] = {}
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self._seq = itertools.count()
        self._order = itertools.count()
        self._terms = itertools.count(3)  # primary terms start above 1: code must echo what it read
        self._key_ids = itertools.count(1)
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.RLock()
        self._caller: Principal | None = None  # who runs the search being answered (under the lock)
        self.admin = Principal("admin", ADMIN[0], cluster=set(ADMIN_CLUSTER), index={"*": set(ADMIN_INDEX)})
        self.writer = Principal("writer", "atlas-writer", WRITER_KEY[0], index={"*": set(WRITER_PRIVILEGES)})
        self.keys[WRITER_KEY[0]] = Key(WRITER_KEY[0], WRITER_KEY[1], "atlas-writer", self.admin, {}, {})
        self.users: dict[str, tuple[str, Principal]] = {ADMIN[0]: (ADMIN[1], self.admin)}  # Basic realm
        # Where there are no passwords (Serverless), an administrator's API key (made in the console)
        self.admin_by_key = Principal(
            "admin",
            "cloud-admin",
            ADMIN_KEY[0],
            cluster={"manage_api_key", "monitor_inference"},
            index={"*": set(ADMIN_INDEX)},
        )
        self.keys[ADMIN_KEY[0]] = Key(ADMIN_KEY[0], ADMIN_KEY[1], "cloud-admin", self.admin_by_key, {}, {})
        self._server: ThreadingHTTPServer | None = None

    def kibana_key(
        self, name: str, descriptors: dict[str, Any], owner: str = "kibana-user"
    ) -> tuple[str, str]:
        """A key someone made in Kibana: owned by that person, no atlas metadata; (id, encoded)."""
        maker = Principal("admin", owner, cluster=set(ADMIN_CLUSTER), index={"*": set(ADMIN_INDEX)})
        key_id = f"kibana-{next(self._key_ids)}"
        self.keys[key_id] = Key(key_id, f"secret-{key_id}", name, maker, descriptors, {}, limited_by=maker)
        return key_id, encode_key(key_id, f"secret-{key_id}")

    def add_admin(self, name: str, password: str) -> Principal:
        """Another administrator user with the same least-privilege role (another operator)."""
        principal = Principal("admin", name, cluster=set(ADMIN_CLUSTER), index={"*": set(ADMIN_INDEX)})
        self.users[name] = (password, principal)
        return principal

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> FakeElasticsearch:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail(
        self,
        method: str,
        path: str,
        status: int = 0,
        body: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        times: int = 1,
    ) -> None:
        """Queue a fault for requests whose path matches the regex ``path``."""
        self.faults.append(Fault(method, re.compile(path), status, body, headers or {}, delay, times))

    def requests_to(self, method: str | None, pattern: str) -> list[Recorded]:
        """Recorded requests whose path matches ``pattern`` (``method`` None: any method)."""
        return [r for r in self.requests if method in (None, r.method) and re.search(pattern, r.path)]

    # -- dispatch ------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes):
        parts = urlsplit(target)
        path = unquote(parts.path)
        record = Recorded(
            method, path, dict(parse_qsl(parts.query)), {k.lower(): v for k, v in headers.items()}, raw
        )
        with self._lock:
            self.requests.append(record)
            fault = self._take_fault(method, path)
        if fault is not None:
            time.sleep(fault.delay)
            if fault.status:
                return fault.status, fault.body or {}, fault.headers
        try:
            with self._lock:
                principal = self._authenticate(record.headers.get("authorization", ""))
                return (*self._route(principal, method, path, record), {})
        except EsError as exc:
            return exc.status, exc.body(), exc.headers
        except Exception as exc:  # noqa: BLE001 -- a fake bug must surface as a failure, not a dropped connection
            return 500, EsError(500, "fake_internal_error", f"{type(exc).__name__}: {exc}").body(), {}

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and fault.path.search(path):
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def _authenticate(self, header: str) -> Principal:
        scheme, _, value = header.partition(" ")
        try:
            user, _, secret = base64.b64decode(value).decode().partition(":")
        except ValueError:
            user = secret = ""
        if scheme.lower() == "basic" and self.flavour == "serverless":
            raise EsError(
                401,
                "security_exception",
                "unable to authenticate with provided credentials: Serverless accepts API keys only",
                {"WWW-Authenticate": 'ApiKey realm="security"'},
            )
        if scheme.lower() == "basic" and user in self.users and self.users[user][0] == secret:
            return self.users[user][1]
        key = self.keys.get(user) if scheme.lower() == "apikey" else None
        if key is not None and key.secret == secret and not key.invalidated:
            if key.id == WRITER_KEY[0]:
                return self.writer
            if key.id == ADMIN_KEY[0]:
                return self.admin_by_key
            return Principal("user", key.name, key.id, key.descriptors, limited_by=key.limited_by)
        raise EsError(
            401,
            "security_exception",
            "unable to authenticate with provided credentials",
            {"WWW-Authenticate": 'ApiKey, Basic realm="security"'},
        )

    # -- privileges ----------------------------------------------------------------------

    def _may(self, who: Principal, privilege: str) -> bool:
        cluster, _, _ = who.grants()
        held = privilege in cluster or bool(cluster & CLUSTER_IMPLIED.get(privilege, set()))
        return held and (who.limited_by is None or self._may(who.limited_by, privilege))

    def _require(self, who: Principal, privilege: str, action: str) -> None:
        if not self._may(who, privilege):
            raise EsError(
                403,
                "security_exception",
                f"action [{action}] is unauthorized for {self._who(who)}, this action is granted by the "
                f"cluster privileges [{privilege},all]",
            )

    def _may_index(self, who: Principal, index: str, privilege: str) -> bool:
        _, patterns, _ = who.grants()
        wanted = {privilege} | INDEX_IMPLIED.get(privilege, set())
        held = any(
            (fnmatch.fnmatch(index, p) or index == p) and held & wanted for p, held in patterns.items()
        )
        return held and (who.limited_by is None or self._may_index(who.limited_by, index, privilege))

    def _require_index(self, who: Principal, names: Sequence[str], privilege: str, action: str) -> None:
        for name in names:
            if not self._may_index(who, name, privilege):
                raise EsError(
                    403,
                    "security_exception",
                    f"action [{action}] is unauthorized for {self._who(who)} on indices [{name}], this "
                    f"action is granted by the index privileges [{privilege},all]",
                )

    @staticmethod
    def _who(who: Principal) -> str:
        return f"API key id [{who.key_id}]" if who.key_id else f"user [{who.name}]"

    def _names(self, expression: str) -> list[str]:
        """The names a request addresses, with the concrete index behind each alias."""
        out = []
        for name in expression.split(","):
            out += [name] + ([self.aliases[name]] if name in self.aliases else [])
        return out

    # -- routing -------------------------------------------------------------------------

    def _route(self, who: Principal, method: str, path: str, req: Recorded) -> tuple[int, Any]:
        body = req.json() if req.body and not path.endswith(("_bulk", "_msearch")) else {}
        if path == "/" and method in ("GET", "HEAD"):
            self._require(who, "monitor", "cluster:monitor/main")
            number = "8.11.0" if self.flavour == "serverless" else self.version
            return 200, {
                "name": "fake",
                "cluster_name": "fake-cluster",
                "tagline": "You Know, for Search",
                "version": {"number": number, "build_flavor": self.flavour},
            }
        if path == "/_security/_authenticate":
            found = {"username": who.name, "authentication_type": "api_key" if who.key_id else "realm"}
            if who.key_id:
                found["api_key"] = {"id": who.key_id, "name": self.keys[who.key_id].name}
            return 200, found
        if path == "/_security/user/_has_privileges":
            return 200, self._has_privileges(who, body)
        if path == "/_license":
            if self.flavour == "serverless":
                raise EsError(
                    410, "api_not_available_exception", "Request for uri [/_license] is not available"
                )
            self._require(who, "monitor", "cluster:monitor/xpack/license/get")
            return 200, {"license": {"type": self.licence, "status": "active"}}
        if m := re.fullmatch(r"/_inference/(?:[a-z_]+/)?([^/]+)", path):
            self._require(who, "monitor_inference", "cluster:monitor/xpack/inference/get")
            return self._inference(m.group(1))
        if path == "/_security/api_key":
            return self._api_key(who, method, body, req.query)
        if path == "/_security/_query/api_key":
            return 200, self._query_keys(who, body)
        if path == "/_bulk" and method in ("POST", "PUT"):
            return 200, self._bulk(who, req.ndjson())
        if path == "/_mget" and method in ("GET", "POST"):
            return 200, self._mget(who, body)
        if path == "/_msearch" and method in ("GET", "POST"):
            return 200, self._msearch(who, req.ndjson())
        if path == "/_pit" and method == "DELETE":
            found = self.pits.pop(body.get("id", ""), None)
            return (200 if found is not None else 404), {
                "succeeded": found is not None,
                "num_freed": int(found is not None),
            }
        if path == "/_search" and method in ("GET", "POST"):
            if "pit" not in body:
                raise EsError(
                    400, "action_request_validation_exception", "fake: a search without an index needs a pit"
                )
            return 200, self._search(who, None, body)
        if m := re.fullmatch(r"/_alias/([^/]+)", path):
            alias = m.group(1)
            self._require_index(who, [alias], "view_index_metadata", "indices:admin/aliases/get")
            if alias not in self.aliases:
                return 404, {"error": f"alias [{alias}] missing", "status": 404}
            return 200, {self.aliases[alias]: {"aliases": {alias: {"is_write_index": True}}}}
        if path == "/_aliases" and method == "POST":
            return 200, self._update_aliases(who, body.get("actions", []))
        if (m := re.fullmatch(r"/([^/_][^/]*)/_refresh", path)) and method in ("GET", "POST"):
            self._require_index(who, self._names(m.group(1)), "maintenance", "indices:admin/refresh")
            self._resolve(m.group(1))
            return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
        if (m := re.fullmatch(r"/([^/_][^/]*)", path)) and method == "HEAD":
            self._require_index(who, self._names(m.group(1)), "view_index_metadata", "indices:admin/get")
            found = all(self.aliases.get(n, n) in self.indices for n in m.group(1).split(","))
            return (200 if found else 404), {}
        if (m := re.fullmatch(r"/([^/_][^/]*)/_pit", path)) and method == "POST":
            return 200, self._open_pit(who, m.group(1), req.query.get("keep_alive"))
        if m := re.fullmatch(r"/([^/_][^/]*)/_count", path):
            found = self._search(who, m.group(1), {"size": self.max_result_window, **body})
            return 200, {"count": len(found["hits"]["hits"])}
        if m := re.fullmatch(r"/([^/_][^/]*)/_search", path):
            if "pit" in body:
                raise EsError(
                    400,
                    "action_request_validation_exception",
                    "[indices] cannot be used with point in time. Do not specify any index with point in time.",
                )
            return 200, self._search(who, m.group(1), body)
        if m := re.fullmatch(r"/([^/_][^/]*)/_doc/([^/]+)", path):
            self._require_index(who, self._names(m.group(1)), "read", "indices:data/read/get")
            return self._get_doc(who, m.group(1), m.group(2))
        if m := re.fullmatch(r"/([^/_][^/]*)/_stats(?:/store)?", path):
            if self.flavour == "serverless":
                raise EsError(
                    410, "api_not_available_exception", f"Request for uri [{path}] is not available"
                )
            self._require_index(who, self._names(m.group(1)), "monitor", "indices:monitor/stats")
            size = sum(
                len(json.dumps(d["source"])) for i in self._resolve(m.group(1)) for d in i.docs.values()
            )
            return 200, {"_all": {"total": {"store": {"size_in_bytes": size}}}}
        if m := re.fullmatch(r"/([^/_][^/]*)/_mapping", path):
            self._require_index(
                who, self._names(m.group(1)), "view_index_metadata", "indices:admin/mappings/get"
            )
            return 200, {i.name: {"mappings": i.mappings} for i in self._resolve(m.group(1))}
        if (m := re.fullmatch(r"/([^/_][^/]*)", path)) and method == "PUT":
            self._require_index(who, [m.group(1)], "create_index", "indices:admin/create")
            if body.get("aliases"):  # security-privileges.md: then `manage` on index and aliases too
                self._require_index(who, [m.group(1), *body["aliases"]], "manage", "indices:admin/create")
            return 200, self._create_index(m.group(1), body)
        if (m := re.fullmatch(r"/([^/_][^/]*)", path)) and method == "DELETE":
            self._require_index(who, self._names(m.group(1)), "delete_index", "indices:admin/delete")
            for index in self._resolve(m.group(1)):
                del self.indices[index.name]
                self.aliases = {a: c for a, c in self.aliases.items() if c != index.name}
            return 200, {"acknowledged": True}
        raise EsError(400, "illegal_argument_exception", f"fake: no handler for [{method} {path}]")

    # -- security ------------------------------------------------------------------------

    def _api_key(
        self, who: Principal, method: str, body: dict[str, Any], query: dict[str, str]
    ) -> tuple[int, Any]:
        if method == "DELETE":
            return 200, self._invalidate(who, body)
        if method == "GET":
            wanted = {**body, **query}
            return 200, {
                "api_keys": [
                    self._key_info(k)
                    for k in self._visible_keys(who)
                    if k.name == wanted.get("name", k.name) and k.id == wanted.get("id", k.id)
                ]
            }
        if who.key_id is not None and body.get("role_descriptors"):  # any API key, the writer's too
            raise EsError(
                400,
                "illegal_argument_exception",
                "creating derived api keys requires an explicit role descriptor that is empty",
            )
        if who.kind != "user":
            self._require(who, "manage_own_api_key", "cluster:admin/xpack/security/api_key/create")
        key_id = f"key-{next(self._key_ids)}"
        secret = f"secret-{key_id}"
        self.keys[key_id] = Key(
            key_id,
            secret,
            body["name"],
            who,
            body.get("role_descriptors", {}),
            body.get("metadata", {}),
            limited_by=who.snapshot(),
        )
        return 200, {
            "id": key_id,
            "name": body["name"],
            "api_key": secret,
            "encoded": encode_key(key_id, secret),
        }

    def _invalidate(self, who: Principal, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("owner") and ({"username", "realm_name"} & body.keys()):
            raise EsError(
                400,
                "action_request_validation_exception",
                "username or realm name must not be specified when the current user owns the API key",
            )
        if body.get("ids") and body.get("name"):
            raise EsError(
                400,
                "action_request_validation_exception",
                "only one of [api key id, api key name] can be specified",
            )
        if not body.get("owner"):
            self._require(who, "manage_api_key", "cluster:admin/xpack/security/api_key/invalidate")
        else:
            self._require(who, "manage_own_api_key", "cluster:admin/xpack/security/api_key/invalidate")
        # The server looks up *active* keys only (owned by the caller with ``owner``): anything
        # else is not found, and finding nothing is an empty success (``ApiKeyService``
        # ``InvalidateApiKeyResponse.emptyResponse``), not an error.
        hits = [
            k
            for k in self.keys.values()
            if k.id not in SERVICE_KEYS
            and not k.invalidated
            and (k.id in body.get("ids", []) or k.name == body.get("name"))
            and (not body.get("owner") or _same_owner(k.owner, who))
        ]
        for key in hits:
            key.invalidated = True
        return {
            "invalidated_api_keys": [k.id for k in hits],
            "previously_invalidated_api_keys": [],
            "error_count": 0,
        }

    def _visible_keys(self, who: Principal) -> list[Key]:
        """What the query/get APIs show: every key with manage_api_key, else the caller's own."""
        self._require(who, "manage_own_api_key", "cluster:admin/xpack/security/api_key/get")
        everyone = self._may(who, "manage_api_key")
        return [
            k
            for k in self.keys.values()
            if k.id not in SERVICE_KEYS and (everyone or _same_owner(k.owner, who))
        ]

    @staticmethod
    def _key_info(key: Key) -> dict[str, Any]:
        return {
            "id": key.id,
            "name": key.name,
            "invalidated": key.invalidated,
            "username": key.owner.name,
            "metadata": key.metadata,
            "role_descriptors": key.descriptors,
            "type": "rest",
        }

    def _query_keys(self, who: Principal, body: dict[str, Any]) -> dict[str, Any]:
        found = [
            self._key_info(k)
            for k in self._visible_keys(who)
            if _key_matches(body.get("query", {"match_all": {}}), k)
        ]
        page = found[body.get("from", 0) : body.get("from", 0) + body.get("size", 10)]
        return {"total": len(found), "count": len(page), "api_keys": page}

    def _has_privileges(self, who: Principal, body: dict[str, Any]) -> dict[str, Any]:
        index_result: dict[str, dict[str, bool]] = {}
        for entry in body.get("index", []):
            for name in entry["names"]:
                index_result[name] = {p: self._may_index(who, name, p) for p in entry["privileges"]}
        cluster = {p: self._may(who, p) for p in body.get("cluster", [])}
        return {
            "username": who.name,
            "has_all_requested": all(cluster.values())
            and all(all(v.values()) for v in index_result.values()),
            "cluster": cluster,
            "index": index_result,
        }

    # -- indices -------------------------------------------------------------------------

    def _create_index(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        if name in self.indices or name in self.aliases:
            raise EsError(400, "resource_already_exists_exception", f"index [{name}] already exists")
        for alias in body.get("aliases", {}):
            if alias in self.indices:
                raise EsError(
                    400,
                    "invalid_alias_name_exception",
                    f"Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias",
                )
        self.indices[name] = Index(name, body.get("mappings", {}), primary_term=next(self._terms))
        for alias in body.get("aliases", {}):
            self.aliases[alias] = name
        return {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def _update_aliases(self, who: Principal, actions: list[dict[str, Any]]) -> dict[str, Any]:
        """All actions or none (atomic), applied in order to (alias, index) pairs; each needs
        ``manage`` on the index and on the alias. An alias ends on one index here (atlas never
        points one at several)."""
        pairs = set(self.aliases.items())
        for action in actions:
            ((op, spec),) = action.items()
            index, alias = spec["index"], spec["alias"]
            self._require_index(who, [index, alias], "manage", "indices:admin/aliases")
            if index not in self.indices:
                raise EsError(404, "index_not_found_exception", f"no such index [{index}]")
            if op == "add":
                if alias in self.indices:
                    raise EsError(
                        400,
                        "invalid_alias_name_exception",
                        f"Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias",
                    )
                pairs.add((alias, index))
            elif op == "remove":
                if (alias, index) not in pairs:
                    raise EsError(404, "aliases_not_found_exception", f"aliases [{alias}] missing")
                pairs.discard((alias, index))
            else:
                raise EsError(400, "illegal_argument_exception", f"fake: unsupported alias action [{op}]")
        aliases = dict(pairs)
        if len(aliases) != len(pairs):
            raise EsError(400, "illegal_argument_exception", "fake: an alias on several indices")
        self.aliases = aliases
        return {"acknowledged": True, "errors": False}

    def _resolve(self, expression: str) -> list[Index]:
        out = []
        for name in expression.split(","):
            concrete = self.aliases.get(name, name)
            if concrete not in self.indices:
                raise EsError(404, "index_not_found_exception", f"no such index [{name}]")
            out.append(self.indices[concrete])
        return out

    def _visible(self, who: Principal, index: Index, doc_id: str) -> bool:
        """Whether DLS lets ``who`` see one document."""
        _, _, dls = who.grants()
        if dls is None:
            return True
        ref = DocRef(index, doc_id, index.name)
        return self._score(dls, ref, [ref]) is not None

    def _get_doc(self, who: Principal, expression: str, doc_id: str) -> tuple[int, Any]:
        (index,) = self._resolve(expression)
        doc = index.docs.get(doc_id)
        if doc is None or not self._visible(who, index, doc_id):
            return 404, {"_index": index.name, "_id": doc_id, "found": False}
        return 200, {
            "_index": index.name,
            "_id": doc_id,
            "found": True,
            "_seq_no": doc["seq_no"],
            "_primary_term": index.primary_term,
            "_source": doc["source"],
        }

    def _mget(self, who: Principal, body: dict[str, Any]) -> dict[str, Any]:
        """Real-time reads by id (no refresh needed), with DLS; unknown ids are ``found: false``."""
        out = []
        for spec in body["docs"]:
            self._require_index(who, self._names(spec["_index"]), "read", "indices:data/read/mget")
            (index,) = self._resolve(spec["_index"])
            doc = index.docs.get(spec["_id"])
            if doc is None or not self._visible(who, index, spec["_id"]):
                out.append({"_index": index.name, "_id": spec["_id"], "found": False})
                continue
            hit = self._hit(
                DocRef(index, spec["_id"], index.name), 0.0, {"_source": spec.get("_source", True)}
            )
            del hit["_score"]
            out.append(hit | {"found": True, "_seq_no": doc["seq_no"], "_primary_term": index.primary_term})
        return {"docs": out}

    def _inference(self, endpoint: str) -> tuple[int, Any]:
        if endpoint == "_all":
            return 200, {"endpoints": [self._endpoint(i) for i in sorted(self.inference_ids)]}
        self._need_endpoint(endpoint)
        return 200, {"endpoints": [self._endpoint(endpoint)]}

    def _endpoint(self, endpoint: str) -> dict[str, Any]:
        known = self.endpoints.get(
            endpoint,
            {
                "task_type": "rerank" if "rerank" in endpoint else "text_embedding",
                "service": "custom",
                "model_id": endpoint,
            },
        )
        settings = {"model_id": known["model_id"]}
        if known["task_type"] == "text_embedding":
            settings["similarity"] = known.get("similarity", "cosine")
        return {
            "inference_id": endpoint,
            "task_type": known["task_type"],
            "service": known["service"],
            "service_settings": settings,
            "task_settings": {},
        }

    def _need_endpoint(self, endpoint: str) -> None:
        if endpoint not in self.inference_ids:
            raise EsError(404, "resource_not_found_exception", f"Inference endpoint not found [{endpoint}]")

    # -- documents -----------------------------------------------------------------------

    def _check_source(self, index: Index, source: dict[str, Any]) -> None:
        for name, value in source.items():
            spec = index.properties.get(name)
            if spec is None and index.mappings.get("dynamic") != "strict":
                index.mappings.setdefault("properties", {})[name] = {"type": "keyword"}  # dynamic mapping
                continue
            if spec is None:
                raise EsError(
                    400,
                    "strict_dynamic_mapping_exception",
                    f"[1:1] mapping set to strict, dynamic introduction of [{name}] within [_doc] is not allowed",
                )
            if spec.get("type") == "constant_keyword" and value is not None and value != spec.get("value"):
                raise EsError(
                    400,
                    "document_parsing_exception",
                    f"[constant_keyword] field [{name}] only accepts values that are equal to [{spec['value']}]",
                )
            if spec.get("type") == "semantic_text":
                raise EsError(
                    400, "document_parsing_exception", f"atlas never writes [{name}] directly (copy_to only)"
                )
            try:
                field_types.check(spec.get("type"), value)
            except field_types.FieldRefused as exc:
                raise EsError(
                    400,
                    "document_parsing_exception",
                    f"[1:1] failed to parse field [{name}] of type [{spec.get('type')}] in document. "
                    f"Preview of field's value: '{value}'",
                    caused_by={"type": exc.kind, "reason": exc.reason},
                ) from exc

    def _ingest_inference(self, index: Index, fields: dict[str, Any]) -> None:
        """``ShardBulkInferenceActionFilter``: a document that sets a ``semantic_text`` field's
        source runs inference, which the licence must cover (a partial update without it runs none)."""
        for name in fields:
            target = index.properties.get(name, {}).get("copy_to")
            if target and index.properties.get(target, {}).get("type") == "semantic_text":
                self._need_inference_licence(index.properties[target]["inference_id"])

    def _bulk(self, who: Principal, lines: list[Any]) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        it = iter(lines)
        for action in it:
            ((op, meta),) = action.items()
            body = next(it) if op != "delete" else None
            try:
                result = self._bulk_item(who, op, meta, body)
            except EsError as exc:
                result = {
                    "_index": meta.get("_index"),
                    "_id": meta.get("_id"),
                    "status": exc.status,
                    "error": exc.error(),
                }
            items.append({op: result})
        return {"took": 1, "errors": any("error" in next(iter(i.values())) for i in items), "items": items}

    def _bulk_item(self, who: Principal, op: str, meta: dict[str, Any], body: Any) -> dict[str, Any]:
        name = meta["_index"]
        needed = {"create": "create_doc", "index": "index", "update": "index", "delete": "delete"}[op]
        self._require_index(who, self._names(name), needed, "indices:data/write/bulk[s]")
        if meta.get("require_alias") and name not in self.aliases:
            raise EsError(
                404,
                "index_not_found_exception",
                f"no such index [{name}] and [require_alias] request flag is [true] and [{name}] is not an alias",
            )
        if ("if_seq_no" in meta) != ("if_primary_term" in meta):
            raise EsError(
                400,
                "action_request_validation_exception",
                "Validation Failed: 1: ifSeqNo is set, but primary term is [0];",
            )
        if name not in self.aliases and name not in self.indices and op in ("create", "index"):
            self._create_index(name, {})  # auto-create: dynamic mapping, no alias, no semantic_text
        (index,) = self._resolve(name)
        doc_id = meta["_id"]
        current = index.docs.get(doc_id)
        if "if_seq_no" in meta and (
            current is None
            or current["seq_no"] != meta["if_seq_no"]
            or index.primary_term != meta["if_primary_term"]
        ):
            have = (
                "missing"
                if current is None
                else f"seqNo [{current['seq_no']}] and primary term [{index.primary_term}]"
            )
            raise EsError(
                409,
                "version_conflict_engine_exception",
                f"[{doc_id}]: version conflict, required seqNo [{meta['if_seq_no']}], primary term "
                f"[{meta['if_primary_term']}]. current document has {have}",
            )
        if op == "delete":
            if current is None:
                return {"_index": index.name, "_id": doc_id, "result": "not_found", "status": 404}
            del index.docs[doc_id]
            return self._written(index, doc_id, "deleted", 200, keep=False)
        if op == "update":
            if "script" in body and index.has_semantic_text():
                raise EsError(
                    400,
                    "illegal_argument_exception",
                    "Cannot apply update with a script on indices that contain [semantic_text] field(s). "
                    "You must retrieve and set the values directly for those fields.",
                )
            if current is None:
                raise EsError(404, "document_missing_exception", f"[{doc_id}]: document missing")
            merged = deep_merge(current["source"], body["doc"])  # as XContentHelper.update does
            self._check_source(index, merged)
            self._ingest_inference(index, body["doc"])
            current["source"] = merged
            return self._written(index, doc_id, "updated", 200)
        if op == "create" and current is not None:
            raise EsError(
                409,
                "version_conflict_engine_exception",
                f"[{doc_id}]: version conflict, document already exists",
            )
        self._check_source(index, body)
        self._ingest_inference(index, body)
        order = current["order"] if current else next(self._order)
        index.docs[doc_id] = {"source": dict(body), "seq_no": -1, "order": order}
        return self._written(
            index, doc_id, "created" if current is None else "updated", 201 if current is None else 200
        )

    def _written(
        self, index: Index, doc_id: str, result: str, status: int, keep: bool = True
    ) -> dict[str, Any]:
        seq_no = next(self._seq)
        if keep:
            index.docs[doc_id]["seq_no"] = seq_no
        return {
            "_index": index.name,
            "_id": doc_id,
            "_version": 1,
            "result": result,
            "status": status,
            "_seq_no": seq_no,
            "_primary_term": index.primary_term,
        }

    # -- search --------------------------------------------------------------------------

    def _open_pit(self, who: Principal, expression: str, keep_alive: str | None) -> dict[str, Any]:
        if not keep_alive:
            raise EsError(400, "action_request_validation_exception", "[keep_alive] is required")
        self._require_index(who, self._names(expression), "read", "indices:data/read/open_point_in_time")
        pit_id = base64.b64encode(f"pit-{len(self.pits)}-{expression}".encode()).decode()
        # a frozen view: later writes are not seen through this point in time
        self.pits[pit_id] = [
            (i.name, d, json.loads(json.dumps(i.docs[d]))) for i in self._resolve(expression) for d in i.docs
        ]
        self._pit_indices[pit_id] = expression
        return {"id": pit_id}

    def _msearch(self, who: Principal, lines: list[Any]) -> dict[str, Any]:
        responses = []
        for header, body in zip(lines[::2], lines[1::2], strict=True):
            index = header.get("index")
            expression = ",".join(index) if isinstance(index, list) else index
            if self.rejected_searches > 0:  # a full search queue answers this one search alone
                self.rejected_searches -= 1
                responses.append(
                    EsError(
                        429,
                        "es_rejected_execution_exception",
                        "rejected execution of TimedRunnable on EsThreadPoolExecutor[name = search]",
                    ).body()
                )
                continue
            try:
                responses.append(self._search(who, expression, body) | {"status": 200})
            except EsError as exc:
                responses.append(exc.body())
        return {"took": 1, "responses": responses}

    def _search(self, who: Principal, expression: str | None, body: dict[str, Any]) -> dict[str, Any]:
        if expression is None:  # a point in time: its frozen documents
            pit_id = body["pit"]["id"]
            if pit_id not in self.pits:
                raise EsError(404, "search_context_missing_exception", "No search context found for id")
            expression = self._pit_indices[pit_id]
        indices = self._resolve(expression)
        self._require_index(who, self._names(expression), "read", "indices:data/read/search")
        if "pit" in body:
            frozen = self.pits[body["pit"]["id"]]
            docs = [self._frozen(name, doc_id, doc) for name, doc_id, doc in frozen]
        else:
            docs = [DocRef(i, d, i.name) for i in indices for d in sorted(i.docs)]
        _, _, dls = who.grants()
        if dls is not None:
            docs = [d for d in docs if self._score(dls, d, docs) is not None]
        shards = self._shards(indices, retriever=body.get("retriever"))
        docs = [d for d in docs if d.index_name not in shards["failed_indices"]]
        size, start = body.get("size", 10), body.get("from", 0)
        if start + size > self.max_result_window:
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Result window is too large, from + size must be less than or equal to: "
                f"[{self.max_result_window}] but was [{start + size}]. See the scroll api for a more "
                "efficient way to request large data sets.",
            )
        if "retriever" in body:
            top = body["retriever"]
            self._check_retriever_licences(top)
            self._caller = who
            ((kind, spec),) = top.items()
            if kind != "standard" and size > spec.get("rank_window_size", 10):
                raise EsError(
                    400,
                    "illegal_argument_exception",
                    f"[{kind}] requires [rank_window_size: {spec.get('rank_window_size', 10)}] to be >= [size: {size}]",
                )
            ranked = self._retrieve(top, docs, max(size, spec.get("rank_window_size", size)))
            page = ranked[start : start + size]
            hits = [self._hit(d, s, body) for d, s in page]
        else:
            self._check_sort(indices, body)
            hits = self._query_page(docs, body)
        response = {
            "took": 1,
            "timed_out": False,
            "_shards": shards["summary"],
            "hits": {"total": {"value": len(hits), "relation": "eq"}, "hits": hits},
        }
        if "pit" in body:
            response["pit_id"] = body["pit"]["id"]
        aggs = body.get("aggregations", body.get("aggs"))
        if aggs:
            matched = [
                d for d in docs if self._score(body.get("query", {"match_all": {}}), d, docs) is not None
            ]
            response["aggregations"] = self._aggregate(aggs, matched, docs)
        return response

    def fail_shard(
        self, index: str, times: int = 1, status: int = 503, reason: str = "primary shard is not active"
    ) -> None:
        """The next ``times`` searches over concrete ``index`` find its (only) shard failing."""
        self.failing_shards[index] = {"times": times, "status": status, "reason": reason}

    def _shards(self, indices: list[Index], *, retriever: dict[str, Any] | None) -> dict[str, Any]:
        """Which shards answer this search (one per index here). With the default
        ``allow_partial_search_results`` a failed shard leaves the others' hits and is counted in
        ``_shards``; every shard failing fails the search; a compound retriever's inner searches
        allow no partial results, so there any failed shard fails them."""
        failed = [i.name for i in indices if self.failing_shards.get(i.name, {}).get("times", 0) > 0]
        causes = []
        for name in failed:
            fault = self.failing_shards[name]
            fault["times"] -= 1
            cause = {"type": "no_shard_available_action_exception", "reason": fault["reason"]}
            causes.append(
                {"shard": 0, "index": name, "node": "fake-node", "reason": cause, "status": fault["status"]}
            )
        if causes and (retriever is not None or len(failed) == len(indices)):
            kind = "all shards failed" if len(failed) == len(indices) else "Partial shards failure"
            status = causes[0]["status"]
            error = EsError(status, "search_phase_execution_exception", kind, caused_by=causes[0]["reason"])
            if retriever is None or next(iter(retriever)) == "standard":
                raise error
            # the inner searches of the compound retriever over standard ones fail; it wraps them
            name, children = _compound_over_standard(retriever)
            raise compound_failure(name, [(c, status, error.error()) for c in children])
        summary = {
            "total": len(indices),
            "successful": len(indices) - len(failed),
            "skipped": 0,
            "failed": len(failed),
        }
        if causes:
            summary["failures"] = causes
        return {"summary": summary, "failed_indices": set(failed)}

    @staticmethod
    def _check_sort(indices: list[Index], body: dict[str, Any]) -> None:
        """Sorting on a field no searched index maps fails every shard (no ``unmapped_type``)."""
        for spec in body.get("sort", []):
            ((name, how),) = spec.items()
            if name in ("_shard_doc", "_score", "_doc") or (isinstance(how, dict) and "unmapped_type" in how):
                continue
            if not any(name in i.properties for i in indices):
                cause = {
                    "type": "query_shard_exception",
                    "reason": f"No mapping found for [{name}] in order to sort on",
                }
                raise EsError(400, "search_phase_execution_exception", "all shards failed", caused_by=cause)

    def _frozen(self, name: str, doc_id: str, doc: dict[str, Any]) -> DocRef:
        """A document as a point in time saw it (its own one-document index view)."""
        live = self.indices[name]
        return DocRef(Index(name, live.mappings, {doc_id: doc}, live.primary_term), doc_id, name)

    def _aggregate(self, aggs: dict[str, Any], docs: list[DocRef], corpus: list[DocRef]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, spec in aggs.items():
            subs = spec.get("aggregations", spec.get("aggs", {}))
            if "terms" in spec:
                groups: dict[Any, list[DocRef]] = {}
                for doc in docs:
                    value = doc.source.get(spec["terms"]["field"])
                    if spec["terms"]["field"] == "memory_type":  # constant_keyword: the mapping's value
                        value = doc.index.properties["memory_type"]["value"]
                    for v in _values(value):
                        groups.setdefault(v, []).append(doc)
                ordered = sorted(groups.items(), key=lambda g: (-len(g[1]), str(g[0])))[
                    : spec["terms"].get("size", 10)
                ]
                out[name] = {
                    "buckets": [
                        {"key": k, "doc_count": len(g), **self._aggregate(subs, g, corpus)}
                        for k, g in ordered
                    ]
                }
            elif "filter" in spec:
                kept = [d for d in docs if self._score(spec["filter"], d, corpus) is not None]
                out[name] = {"doc_count": len(kept), **self._aggregate(subs, kept, corpus)}
            else:
                raise EsError(400, "parsing_exception", f"fake: unsupported aggregation {spec}")
        return out

    def _query_page(self, docs: list[DocRef], body: dict[str, Any]) -> list[dict[str, Any]]:
        query = body.get("query", {"match_all": {}})
        scored = [(d, s) for d in docs if (s := self._score(query, d, docs)) is not None]
        sort = [next(iter(spec.items())) for spec in body.get("sort", [])]
        if any(name == "_shard_doc" for name, _ in sort) and "pit" not in body:
            raise EsError(
                400,
                "illegal_argument_exception",
                "[_shard_doc] sort field cannot be used without [point in time]",
            )
        if "search_after" in body and not sort:
            raise EsError(400, "illegal_argument_exception", "[search_after] requires a sort")
        if not sort:
            scored.sort(key=lambda x: (-x[1], x[0].id))
            start = body.get("from", 0)
            return [self._hit(d, s, body) for d, s in scored[start : start + body.get("size", 10)]]
        if "search_after" in body and body.get("from", 0) not in (0, -1):
            raise EsError(
                400,
                "illegal_argument_exception",
                "[from] parameter must be set to 0 when [search_after] is used",
            )
        keyed = [(self._sort_key(d, sort), d, s) for d, s in scored]
        keyed.sort(key=lambda x: x[0])
        if "search_after" in body:
            after = self._sort_key(None, sort, list(body["search_after"]))
            keyed = [x for x in keyed if x[0] > after]
        start = 0 if "search_after" in body else body.get("from", 0)
        page = keyed[start : start + body.get("size", 10)]
        return [self._hit(d, s, body) | {"sort": self._sort_values(d, sort)} for _, d, s in page]

    def _sort_values(self, doc: DocRef, sort: list[tuple[str, Any]]) -> list[Any]:
        """What a hit's ``sort`` says: doc values (dates as epoch millis, nanos for date_nanos),
        ``_shard_doc`` an ordinal."""
        out = []
        for name, _ in sort:
            if name == "_shard_doc":
                out.append(doc.index.docs[doc.id]["order"])
                continue
            kind = doc.index.properties.get(name, {}).get("type")
            out.append(_doc_value(kind, doc.source.get(name)))
        return out

    def _sort_key(
        self, doc: DocRef | None, sort: list[tuple[str, Any]], values: list[Any] | None = None
    ) -> tuple:
        values = self._sort_values(doc, sort) if values is None else values
        key = []
        for (_, how), value in zip(sort, values, strict=True):
            descending = (how.get("order") if isinstance(how, dict) else how) == "desc"
            missing = value is None  # missing values sort last either way
            key.append((missing, 0 if missing else (-value if descending else value)))
        return tuple(key)

    def _hit(self, doc: DocRef, score: float, body: dict[str, Any]) -> dict[str, Any]:
        source = body.get("_source", True)
        hit: dict[str, Any] = {"_index": doc.index.name, "_id": doc.id, "_score": score}
        if source is not False:
            excludes = set(source.get("excludes", [])) if isinstance(source, dict) else set()
            hit["_source"] = {k: v for k, v in doc.source.items() if k not in excludes}
        if body.get("seq_no_primary_term"):
            hit |= {"_seq_no": doc.index.docs[doc.id]["seq_no"], "_primary_term": doc.index.primary_term}
        return hit

    def _retrieve(
        self, container: dict[str, Any], docs: list[DocRef], window: int
    ) -> list[tuple[DocRef, float]]:
        ((kind, spec),) = container.items()
        filters = spec.get("filter", [])
        for f in filters if isinstance(filters, list) else [filters]:
            docs = [d for d in docs if self._score(f, d, docs) is not None]
        if kind == "standard":
            scored = [
                (d, s)
                for d in docs
                if (s := self._score(spec.get("query", {"match_all": {}}), d, docs)) is not None
            ]
            scored.sort(key=lambda x: (-x[1], x[0].id))
            return scored[:window]
        if kind == "rrf":
            return self._rrf(spec, docs)
        if kind == "text_similarity_reranker":
            return self._rerank(spec, docs)
        raise EsError(400, "x_content_parse_exception", f"unknown retriever [{kind}]")

    def _check_retriever_licences(self, retriever: dict[str, Any]) -> None:
        """Each compound retriever's parser checks its licence before it parses its children
        (so the outermost refusal is the one reported), and outside any wrapping."""
        ((kind, spec),) = retriever.items()
        feature = {
            "text_similarity_reranker": "text_similarity_reranker",
            "rrf": "Reciprocal Rank Fusion (RRF)",
        }
        if kind in feature and not self._enterprise():
            raise EsError(
                403, "security_exception", f"current license is non-compliant for [{feature[kind]}]"
            )
        children = spec.get("retrievers") or ([spec["retriever"]] if "retriever" in spec else [])
        for child in children:
            self._check_retriever_licences(child)

    def _enterprise(self) -> bool:
        return self.licence in ("enterprise", "trial")

    def _rrf(self, spec: dict[str, Any], docs: list[DocRef]) -> list[tuple[DocRef, float]]:
        window, constant = spec.get("rank_window_size", 10), spec.get("rank_constant", 60)
        children = spec["retrievers"]
        if len(children) < 2:
            raise EsError(400, "illegal_argument_exception", "[rrf] requires at least 2 retrievers")
        scores: dict[DocRef, float] = {}
        failed: list[tuple[str, int, dict[str, Any]]] = []
        for child in children:
            try:
                ranked = self._retrieve(child, docs, window)
            except EsError as exc:  # each child is its own search; the rrf collects their failures
                failed.append((next(iter(child)), exc.status, exc.error()))
                continue
            for rank, (doc, _) in enumerate(ranked, start=1):
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (constant + rank)
        if failed:
            raise compound_failure("rrf", failed)
        return sorted(scores.items(), key=lambda x: (-x[1], x[0].id))[:window]

    def _rerank(self, spec: dict[str, Any], docs: list[DocRef]) -> list[tuple[DocRef, float]]:
        window = spec.get("rank_window_size", 10)
        ((child_kind, child),) = spec["retriever"].items()
        if child_kind != "standard" and child.get("rank_window_size", 10) < window:
            raise EsError(
                400,
                "illegal_argument_exception",
                "[text_similarity_reranker] requires [rank_window_size] <= the inner retriever's",
            )
        endpoint = spec.get("inference_id", ".rerank-v1-elasticsearch")
        candidates = [d for d, _ in self._retrieve(spec["retriever"], docs, window)][:window]
        try:  # the rank feature phase: its failures come back wrapped, as the child's
            self._rank_phase(endpoint)
        except EsError as exc:
            phase = {
                "type": "search_phase_execution_exception",
                "reason": "Computing updated ranks for results failed",
                "caused_by": exc.error(),
            }
            raise compound_failure("text_similarity_reranker", [(child_kind, 500, phase)]) from exc
        out = []
        for doc in candidates:
            raw = rerank_model_score(
                self._endpoint_scores(endpoint),
                self._vector(spec["inference_text"]),
                self._vector(doc.source.get(spec["field"], "")),
            )
            out.append((doc, max(raw, 0.0) + min(math.exp(raw), 1.0)))  # elastic/elasticsearch#120930
        out.sort(key=lambda x: (-x[1], x[0].id))
        return [x for x in out if x[1] >= spec.get("min_score", 0.0)]

    def _rank_phase(self, endpoint: str) -> None:
        """What the reranker's inference call needs: the endpoint, the inference licence (EIS
        is exempt), and on 8.18.0-8.18.1 / 9.0.0-9.0.1 a caller allowed the internal inference
        action, which no read-only key is (elastic/elasticsearch#128328)."""
        self._need_endpoint(endpoint)
        self._need_inference_licence(endpoint)
        caller = self._caller
        if self.version in RERANK_AS_CALLER and caller is not None and not self._may(caller, "all"):
            raise EsError(
                403,
                "security_exception",
                f"action [cluster:internal/xpack/inference] is unauthorized for {self._who(caller)}, this "
                "action is granted by the cluster privileges [all]",
            )

    def _need_inference_licence(self, endpoint: str) -> None:
        """``InferenceLicenceCheck``: the inference API needs Enterprise, EIS endpoints excepted."""
        if self._endpoint(endpoint)["service"] != "elastic" and not self._enterprise():
            raise EsError(
                403,
                "security_exception",
                "current license is non-compliant for [inference]",
            )

    @staticmethod
    def _endpoint_scores(endpoint: str) -> str:
        return ENDPOINTS.get(endpoint, {}).get("scores", "probability")

    def _dense_score(self, endpoint: str, query: np.ndarray, document: np.ndarray) -> float:
        """The knn score of the endpoint's vector similarity (the ``dense_vector`` reference)."""
        similarity = self._endpoint(endpoint)["service_settings"].get("similarity", "cosine")
        dot = float(query @ document)
        if similarity in ("cosine", "dot_product"):
            return (1.0 + dot) / 2.0
        if similarity == "l2_norm":
            return 1.0 / (1.0 + float(np.sum((query - document) ** 2)))
        if similarity == "max_inner_product":
            return dot + 1.0 if dot >= 0 else 1.0 / (1.0 - dot)
        raise EsError(400, "illegal_argument_exception", f"fake: unknown similarity [{similarity}]")

    def _vector(self, text: str) -> np.ndarray:
        vector = self._vectors.get(text)
        if vector is None:
            vector = self._vectors[text] = np.asarray(self.embed([text])[0], dtype=np.float64)
        return vector

    # -- queries (None = no match) -------------------------------------------------------

    def _score(self, query: dict[str, Any], doc: DocRef, corpus: list[DocRef]) -> float | None:
        ((kind, spec),) = query.items()
        source = doc.source
        if kind == "match_all":
            return 1.0
        if kind == "bool":
            return self._bool(spec, doc, corpus)
        if kind == "term":
            ((name, value),) = spec.items()
            value = value["value"] if isinstance(value, dict) else value
            if name == "_index":
                return (
                    1.0
                    if value in (doc.index.name, *[a for a, c in self.aliases.items() if c == doc.index.name])
                    else None
                )
            return 1.0 if value in _values(source.get(name)) else None
        if kind == "terms":
            ((name, values),) = spec.items()
            return 1.0 if set(values) & set(_values(source.get(name))) else None
        if kind == "ids":
            return 1.0 if doc.id in spec["values"] else None
        if kind == "exists":
            return 1.0 if _values(source.get(spec["field"])) else None
        if kind == "range":  # on doc values: a ``date`` keeps milliseconds, bounds are truncated too
            ((name, bounds),) = spec.items()
            mapped = doc.index.properties.get(name, {}).get("type")
            value = _doc_value(mapped, _values(source.get(name))[0] if _values(source.get(name)) else None)
            if value is None:
                return None
            tests = {"gt": value.__gt__, "gte": value.__ge__, "lt": value.__lt__, "lte": value.__le__}
            return 1.0 if all(tests[op](_doc_value(mapped, bound)) for op, bound in bounds.items()) else None
        if kind == "multi_match":
            return self._bm25(spec, doc, corpus)
        if kind == "semantic":
            return self._semantic(spec, doc)
        if kind == "function_score":
            return self._function_score(spec, doc, corpus)
        raise EsError(400, "parsing_exception", f"unknown query [{kind}]")

    def _bool(self, spec: dict[str, Any], doc: DocRef, corpus: list[DocRef]) -> float | None:
        total = 0.0
        for clause in ("must", "filter"):
            for q in _listed(spec.get(clause)):
                s = self._score(q, doc, corpus)
                if s is None:
                    return None
                total += s if clause == "must" else 0.0
        if any(self._score(q, doc, corpus) is not None for q in _listed(spec.get("must_not"))):
            return None
        should = [s for q in _listed(spec.get("should")) if (s := self._score(q, doc, corpus)) is not None]
        needed = spec.get("minimum_should_match", 0 if spec.get("must") or spec.get("filter") else 1)
        if spec.get("should") and len(should) < needed:
            return None
        return total + sum(should)

    def _bm25(self, spec: dict[str, Any], doc: DocRef, corpus: list[DocRef]) -> float | None:
        """BM25 with the statistics of the document's shard (one per index here): every
        document in it, whoever owns it. Document-level security filters hits, not term
        statistics, so other users' memories weigh on IDF and length normalisation too."""
        terms = set(WORD.findall(spec["query"].lower()))
        best = 0.0
        shard = self.indices[doc.index_name].docs.values() if doc.index_name in self.indices else []
        for entry in spec["fields"]:
            name, _, boost = entry.partition("^")
            texts = [str(d["source"].get(name) or "") for d in shard if name in doc.index.properties]
            if name not in doc.index.properties or not texts:
                continue
            words = WORD.findall(str(doc.source.get(name) or "").lower())
            average = sum(len(WORD.findall(t.lower())) for t in texts) / len(texts) or 1.0
            score = 0.0
            for term in terms:
                tf = words.count(term)
                if tf:
                    df = sum(term in WORD.findall(t.lower()) for t in texts)
                    idf = math.log(1 + (len(texts) - df + 0.5) / (df + 0.5))
                    score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / average))
            best = max(best, score * float(boost or 1.0))
        return best if best > 0 else None

    def _semantic(self, spec: dict[str, Any], doc: DocRef) -> float | None:
        mapped = doc.index.properties.get(spec["field"])
        if mapped is None:
            return None
        if mapped.get("type") != "semantic_text":
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Field [{spec['field']}] of type [{mapped.get('type')}] does not support semantic queries",
            )
        self._need_endpoint(mapped["inference_id"])
        self._need_inference_licence(mapped["inference_id"])
        sources = [n for n, p in doc.index.properties.items() if p.get("copy_to") == spec["field"]]
        text = "\n".join(str(doc.source.get(n) or "") for n in sources)
        if not text.strip():
            return None
        return self._dense_score(mapped["inference_id"], self._vector(spec["query"]), self._vector(text))

    def _function_score(self, spec: dict[str, Any], doc: DocRef, corpus: list[DocRef]) -> float | None:
        score = self._score(spec.get("query", {"match_all": {}}), doc, corpus)
        if score is None:
            return None
        factor = 1.0
        for function in spec.get("functions", []):
            if "filter" in function and self._score(function["filter"], doc, corpus) is None:
                continue
            factor *= function.get("weight", 1.0)
            if "script_score" in function:
                script = function["script_score"]["script"]
                if script.get("lang", "painless") != "painless":
                    raise EsError(
                        400, "illegal_argument_exception", f"script_lang not supported [{script['lang']}]"
                    )
                try:
                    factor *= painless.run(
                        script["source"],
                        painless.DocValues(doc.index.name, doc.index.properties, doc.source),
                        script.get("params", {}),
                    )
                except painless.PainlessError as exc:
                    raise EsError(400, "script_exception", f"runtime error: {exc}") from exc
        return score * factor


_MICRO = timedelta(microseconds=1)


def _compound_over_standard(retriever: dict[str, Any]) -> tuple[str, list[str]]:
    """The compound retriever whose children are the standard searches, and those children."""
    ((kind, spec),) = retriever.items()
    children = spec.get("retrievers") or [spec["retriever"]]
    compound = [c for c in children if next(iter(c)) != "standard"]
    if compound:
        return _compound_over_standard(compound[0])
    return kind, [next(iter(c)) for c in children]


def compound_failure(name: str, failures: list[tuple[str, int, dict[str, Any]]]) -> EsError:
    """How a compound retriever reports its children's failures (``CompoundRetrieverBuilder``):
    a ``status_exception`` naming them, each (child kind, status, error) under ``suppressed``;
    the status is a 5xx if any child's was, else the children's own."""
    statuses = [status for _, status, _ in failures]
    kinds = ", ".join(kind for kind, _, _ in failures)
    return EsError(
        next((s for s in statuses if s >= 500), statuses[0]),
        "status_exception",
        f"[{name}] search failed - retrievers '[{kinds}]' returned errors. All failures are attached as "
        "suppressed exceptions.",
        suppressed=[error for _, _, error in failures],
    )


def rerank_model_score(kind: str, query: np.ndarray, document: np.ndarray) -> float:
    """What a rerank model returns before the retriever's shift: a probability in [0, 1], or a
    raw logit (Elastic Rerank, elastic/elasticsearch#118483: often negative)."""
    cosine = float(query @ document)
    if kind == "logit":
        return 8.0 * (cosine - 0.35)
    return (1.0 + cosine) / 2.0


def deep_merge(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A partial ``doc`` applied to ``_source`` as the cluster does: objects merge key by key
    (a key absent from ``changes`` stays), anything else (null included) replaces."""
    out = dict(current)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _same_owner(owner: Principal, who: Principal) -> bool:
    """A key belongs to the user (realm and name) that created it, not to one session of it."""
    return (owner.kind, owner.name) == (who.kind, who.name)


def _key_matches(query: dict[str, Any], key: Key) -> bool:
    """The query-API-keys subset atlas uses: bool filters of term queries on key fields."""
    ((kind, spec),) = query.items()
    if kind == "match_all":
        return True
    if kind == "bool":
        return all(
            _key_matches(q, key) for q in _listed(spec.get("filter")) + _listed(spec.get("must"))
        ) and not any(_key_matches(q, key) for q in _listed(spec.get("must_not")))
    if kind == "term":
        ((name, value),) = spec.items()
        value = value["value"] if isinstance(value, dict) else value
        fields = {
            "name": key.name,
            "invalidated": key.invalidated,
            "username": key.owner.name,
            **{f"metadata.{k}": v for k, v in key.metadata.items()},
        }
        return fields.get(name) == value
    raise EsError(400, "illegal_argument_exception", f"fake: unsupported api key query [{kind}]")


def _doc_value(kind: str | None, value: Any) -> Any:
    """A value as the index keeps it for sorting and ranges: epoch millis for ``date`` (sub-
    millisecond digits are dropped), nanos for ``date_nanos``, numbers as they are."""
    if value is None:
        return None
    if kind in ("date", "date_nanos"):
        micros = (field_types.parse_instant(value) - field_types.EPOCH) // _MICRO
        return micros * 1000 if kind == "date_nanos" else micros // 1000
    if kind in ("integer", "long", "float"):
        return float(value) if kind == "float" else int(float(value))
    return value


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    return [v for v in value if v is not None] if isinstance(value, list) else [value]


def _listed(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeElasticsearch

    def setup(self) -> None:
        super().setup()
        # headers and body leave in two writes: without this, Nagle + delayed ACK add 40 ms each
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, body, headers = self.fake.handle(self.command, self.path, dict(self.headers.items()), raw)
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass
