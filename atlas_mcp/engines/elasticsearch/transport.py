"""Talking to the cluster: client construction, retries with backoff, and error mapping.

Every call names what it does and whether it is safe to repeat. Rejections the server
promises it did not apply (429, 503) are retried for any call, honouring ``Retry-After``;
timeouts, dropped connections and gateway errors are retried only for reads and other
idempotent calls. Waits are capped, so a sick cluster yields a clear error, never a hang.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ...config_tables import ElasticsearchSettings
from ...errors import AtlasError, BackendUnavailable, ConfigurationError
from ...log import get_logger
from .failures import Forbidden, Unauthenticated, configuration_problem, innermost

log = get_logger(__name__)
T = TypeVar("T")

REJECTED = frozenset({429, 503})  # the server did not apply the request: always safe to retry
GATEWAY = frozenset({502, 504})  # unknown outcome: retry only idempotent calls


def connect(config: ElasticsearchSettings, *, admin: bool = False) -> Any:
    """A client with the server's writer credential (``admin``: the user credential that mints keys)."""
    try:
        from elasticsearch import Elasticsearch
    except ImportError as exc:
        raise ConfigurationError(
            "the Elasticsearch engine needs the client: pip install 'atlas-mcp[elasticsearch]'"
        ) from exc

    if not config.url and not config.cloud_id:
        raise ConfigurationError("backend 'elasticsearch' needs [elasticsearch] url (or cloud_id)")
    options: dict[str, Any] = {
        "request_timeout": config.request_timeout,
        "max_retries": 0,  # retries happen in Cluster.call, with backoff and Retry-After
        "retry_on_timeout": False,
        "verify_certs": config.verify_certs,
    }
    if config.ca_certs:
        options["ca_certs"] = str(config.ca_certs)
    if config.cloud_id:
        options["cloud_id"] = config.cloud_id
    else:
        options["hosts"] = [config.url]
    basic = (config.username, config.password) if config.username and config.password else None
    if admin and basic is None and not config.admin_api_key:
        raise ConfigurationError(
            "administration needs a credential: set [elasticsearch] username and password (a user: "
            "only a user can mint keys that carry privileges), or on Serverless, which has no "
            "passwords, admin_api_key"
        )
    if admin and basic is None:
        options["api_key"] = config.admin_api_key
    elif admin or not config.api_key:
        if basic is None:
            raise ConfigurationError("set [elasticsearch] api_key, or username and password")
        options["basic_auth"] = basic
    else:
        options["api_key"] = config.api_key
    return Elasticsearch(**options)


def admin_is_api_key(config: ElasticsearchSettings) -> bool:
    """Whether administration runs with ``admin_api_key`` (no username/password: Serverless)."""
    return not (config.username and config.password) and bool(config.admin_api_key)


class Cluster:
    """One client plus per-user views of it; ``call`` adds retries and error mapping."""

    def __init__(
        self, client: Any, config: ElasticsearchSettings, sleep: Callable[[float], None] = time.sleep
    ):
        self.client = client
        self.config = config
        self._sleep = sleep
        self._views: dict[str, Any] = {}

    def as_user(self, api_key: str) -> Any:
        """The same connection pool, authenticated with a user's DLS key."""
        view = self._views.get(api_key)
        if view is None:
            view = self._views[api_key] = self.client.options(api_key=api_key)
        return view

    def call(
        self,
        what: str,
        fn: Callable[..., T],  # called with the client alone; a lambda may bind loop values as defaults
        *,
        client: Any = None,
        idempotent: bool = True,
        retries: int | None = None,
    ) -> T:
        """``fn(client)``, retried up to ``retries`` times (default ``[elasticsearch] max_retries``)."""
        target = self.client if client is None else client
        budget = self.config.max_retries if retries is None else retries
        for attempt in range(budget + 1):
            try:
                return fn(target)
            except Exception as exc:  # classified below, re-raised as AtlasError
                wait = self._retry_wait(exc, attempt, idempotent, budget)
                if wait is None:
                    raise map_error(exc, what, self.config) from exc
                log.warning(
                    "elasticsearch_retry",
                    operation=what,
                    attempt=attempt + 1,
                    wait_s=round(wait, 3),
                    reason=_short(exc),
                )
                self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def pause(self, attempt: int, at_most: float | None = None) -> float:
        """Back off before retrying work the cluster refused (e.g. rejected bulk items); how long."""
        wait = self._backoff(attempt) if at_most is None else min(self._backoff(attempt), at_most)
        self._sleep(wait)
        return wait

    def _backoff(self, attempt: int) -> float:
        backoff = min(self.config.retry_backoff * 2.0**attempt, self.config.max_retry_wait)
        return backoff * random.uniform(0.5, 1.0)  # jitter: many clients must not retry in lockstep

    def _retry_wait(self, exc: Exception, attempt: int, idempotent: bool, budget: int) -> float | None:
        from elasticsearch import ApiError, ConnectionError, ConnectionTimeout

        if attempt >= budget:
            return None
        backoff = self._backoff(attempt)
        if isinstance(exc, ApiError):
            status = exc.meta.status
            if status in REJECTED or (idempotent and status in GATEWAY):
                after = retry_after(exc.meta.headers)
                return min(after, self.config.max_retry_wait) if after is not None else backoff
            return None
        if isinstance(exc, ConnectionTimeout | ConnectionError) and idempotent:
            return backoff
        return None

    def close(self) -> None:
        self.client.close()


def retry_after(headers: Any) -> float | None:
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def error_details(exc: Exception) -> tuple[int | None, str, str]:
    """(status, error type, reason) of an API error: its most specific cause (``failures``)."""
    status = getattr(getattr(exc, "meta", None), "status", None)
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return (status, *innermost(error))
    return status, "", str(error or getattr(exc, "message", "") or exc)


def map_error(exc: Exception, what: str, config: ElasticsearchSettings) -> AtlasError:
    """An Elasticsearch failure as an atlas error whose message says what to do; logged once."""
    from elasticsearch import ApiError, ConnectionError, ConnectionTimeout, UnsupportedProductError

    if isinstance(exc, AtlasError):
        return exc
    where = config.url or "the Elastic Cloud deployment"
    if isinstance(exc, ConnectionTimeout):
        error: AtlasError = BackendUnavailable(
            f"Elasticsearch did not answer {what} within {config.request_timeout:g}s; the cluster is "
            "overloaded or unreachable. Try again shortly, or raise [elasticsearch] request_timeout."
        )
    elif isinstance(exc, ConnectionError):
        error = BackendUnavailable(
            f"cannot reach Elasticsearch at {where} ({what}): is it running, and is [elasticsearch] "
            "url right (http vs https, port, ca_certs)?"
        )
    elif isinstance(exc, UnsupportedProductError):
        error = ConfigurationError(f"{where} is not Elasticsearch (no X-Elastic-Product header)")
    elif isinstance(exc, ApiError):
        error = _api_error(exc, what)
    else:
        error = BackendUnavailable(f"Elasticsearch {what} failed: {_short(exc)}")
    status, kind, reason = error_details(exc)
    log.error(
        "elasticsearch_error",
        operation=what,
        status=status,
        type=kind,
        reason=reason[:300],
        error=type(error).__name__,
    )
    return error


def _api_error(exc: Exception, what: str) -> AtlasError:
    status, kind, reason = error_details(exc)
    body = getattr(exc, "body", None)
    problem = configuration_problem(body.get("error") if isinstance(body, dict) else None, what)
    if problem is not None:
        return problem
    if status == 401:
        return Unauthenticated(
            f"Elasticsearch rejected the credential for {what} (401: {reason}); the key may be revoked "
            "or expired. Users get a new key with `atlas-mcp users add <id>`."
        )
    if status == 403:
        return Forbidden(
            f"the credential may not {what} (403: {reason}); run `atlas-mcp doctor` to see which "
            "privilege is missing"
        )
    if status in REJECTED:
        return BackendUnavailable(
            f"Elasticsearch is overloaded ({status}) and refused {what}; try again shortly"
        )
    return BackendUnavailable(f"Elasticsearch {what} failed ({status} {kind}: {reason[:300]})")


def _short(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"
