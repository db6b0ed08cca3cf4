"""Settings: the one module that reads the environment and the TOML config file.

Precedence, highest first: command-line flags > ``ATLAS_*`` environment variables > the TOML
file (``--config`` or ``ATLAS_CONFIG``) > defaults. Nested tables use ``__`` in the
environment: ``ATLAS_SCORING__CATALOG_PRIOR=0.9``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from platformdirs import user_data_dir
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from . import scopes, tokens
from .choices import OneOf
from .domain.guard import GuardPolicy
from .domain.limits import Limits
from .domain.profile import ProfilePolicy
from .domain.scoring import ScoringPolicy
from .errors import ConfigurationError
from .inference.names import EMBEDDING_MODELS, PER_LANGUAGE
from .scopes import Grant, ScopeName
from .validation import clauses, meant

CONFIG_ENV = "ATLAS_CONFIG"
ENV_PREFIX = "ATLAS_"
# ATLAS_* variables something other than the settings reads: the live Elasticsearch suite
# (ATLAS_ES_*), the test script (ATLAS_NO_BROWSER) and docker-compose.yml (the rest).
NOT_SETTINGS_ENV = frozenset(
    {CONFIG_ENV, "ATLAS_TOKEN", "ATLAS_EMBED_ID", "ATLAS_RERANK_ID", "ATLAS_NO_BROWSER"}
    | {f"ATLAS_ES_{name}" for name in ("URL", "USER", "PASSWORD", "EMBED_ID", "RERANK_ID", "CA_CERTS")}
    | {"ATLAS_ES_ALLOW_DOWNGRADE"}
)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _all_scopes() -> list[ScopeName]:
    return list(scopes.SCOPES)


def _scope_list(value: Any) -> Any:
    """``recall,write`` (as an environment variable or a flag is written) or a list."""
    return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value


# Scopes as the settings take them: a TOML list, or "recall,write" in an ATLAS_* variable.
Scopes = Annotated[list[ScopeName], NoDecode, BeforeValidator(_scope_list)]


class TokenConfig(BaseModel):
    """One ``[users.<id>.tokens.<name>]`` table: another bearer token of that user."""

    model_config = ConfigDict(extra="forbid")

    sha256: str = Field(
        pattern=r"^[0-9a-fA-F]{64}$", description="sha256 of the token (`atlas-mcp users token` prints it)"
    )
    scopes: Scopes = Field(
        default_factory=_all_scopes, min_length=1, description="the tools this token may use"
    )


class UserConfig(BaseModel):
    """One ``[users.<id>]`` table: how that user authenticates over HTTP."""

    model_config = ConfigDict(extra="allow")

    token: str | None = Field(
        None,
        repr=False,
        description="this user's HTTP bearer token, in clear; token_sha256 keeps it out of the file. "
        "`atlas-mcp users token ID` prints a random one and its sha256; serve refuses tokens under "
        "16 characters and well-known examples",
    )
    token_sha256: str | None = Field(None, description="the sha256 of this user's bearer token, in hex")
    scopes: Scopes = Field(
        default_factory=_all_scopes,
        min_length=1,
        description="the tools token / token_sha256 may use: recall, write, forget (default all)",
    )
    tokens: dict[str, TokenConfig] = Field(
        default_factory=dict,
        description="more tokens of this user by name, each with its own scopes "
        "(`atlas-mcp users token ID --scopes recall --name NAME` prints one)",
    )
    es_api_key: str | None = Field(
        None,
        repr=False,
        description="this user's DLS-scoped Elasticsearch API key (encoded); else the secrets file",
    )

    def token_digest(self) -> str | None:
        if self.token_sha256:
            return self.token_sha256.strip().lower()
        if self.token:
            return tokens.digest(self.token)
        return None

    def grants(self, user_id: str) -> dict[str, Grant]:
        """sha256 of each of this user's tokens → what it may do, named for logs and the audit."""
        found = {}
        if digest := self.token_digest():
            found[digest] = Grant(user_id, frozenset(self.scopes), tokens.credential_name("token", digest))
        for name, token in self.tokens.items():
            digest = token.sha256.strip().lower()
            found[digest] = Grant(user_id, frozenset(token.scopes), tokens.credential_name(name, digest))
        return found


class EmbeddingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: Annotated[str, OneOf(*EMBEDDING_MODELS)] = Field(
        PER_LANGUAGE,
        description="per-language embeds English memories with MiniLM and every other language with "
        "multilingual-e5-small; the other two embed everything with one model",
    )
    threads: int = Field(
        2,
        ge=1,
        description="texts MiniLM embeds side by side, e5's threads per text, and the cosine scan's threads",
    )


class RerankSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_dir: Path | None = Field(
        None, description="folder with a cross-encoder model.onnx + tokenizer.json; unset = fused score"
    )
    candidates: int = Field(40, ge=1, description="how many fused candidates the cross-encoder sees")


class OAuthSettings(BaseModel):
    """``[oauth]``: accept JWT access tokens from an identity provider (on when ``issuer`` is set)."""

    model_config = ConfigDict(extra="forbid")

    issuer: str | None = Field(None, description="the authorization server's issuer URL (the iss claim)")
    jwks_url: str | None = Field(None, description="where the issuer publishes its signing keys")
    resource_url: str | None = Field(
        None, description="this server's public MCP URL, e.g. https://mem.example/mcp"
    )
    audience: str | None = Field(None, description="the aud tokens must carry; default resource_url")
    user_claim: str = Field("sub", min_length=1, description="the claim that names the memory user")
    required_scopes: list[str] = Field(default_factory=list, description="scopes every token must carry")
    tool_scope_prefix: str = Field(
        "atlas:",
        description="a token's scopes atlas:recall / atlas:write / atlas:forget limit it to those tools",
    )
    default_tool_scopes: Scopes = Field(
        default_factory=_all_scopes,
        description="the tools a token carrying no prefixed tool scope may use; [] refuses such tokens",
    )
    algorithms: list[str] = Field(
        default_factory=lambda: ["RS256", "ES256"], description="signatures accepted (asymmetric only)"
    )
    leeway_s: int = Field(30, ge=0, description="clock skew allowed on exp/nbf/iat")
    jwks_cache_s: int = Field(300, ge=1, description="how long fetched signing keys are reused")

    @property
    def enabled(self) -> bool:
        return self.issuer is not None

    @model_validator(mode="after")
    def _complete(self) -> OAuthSettings:
        if self.enabled and not (self.jwks_url and self.resource_url):
            raise ValueError("[oauth] issuer needs jwks_url and resource_url as well")
        if any(a.upper().startswith("HS") or a.lower() == "none" for a in self.algorithms):
            raise ValueError("[oauth] algorithms must be asymmetric (RS*, ES*, PS*, EdDSA)")
        return self


class ConsolidationSettings(BaseModel):
    """``[consolidation]``: which LLM turns episodes into facts and playbooks, and when.

    No ``provider`` means consolidation is off; everything else works without it.
    """

    model_config = ConfigDict(extra="forbid")

    provider: Literal["sampling", "openai", "elasticsearch"] | None = Field(
        None,
        description="sampling: the connected MCP client's model; openai: any /chat/completions; "
        "elasticsearch: an inference chat_completion endpoint",
    )
    base_url: str | None = Field(
        None, description="openai: e.g. https://api.openai.com/v1; elasticsearch: the cluster URL"
    )
    model: str | None = Field(None, description="openai: the model name")
    api_key_env: str | None = Field(
        None, description="name of the environment variable holding the key (never the key itself)"
    )
    inference_id: str | None = Field(None, description="elasticsearch: the chat_completion endpoint id")
    json_mode: bool = Field(True, description="openai: ask for response_format json_object")
    timeout_s: float = Field(120.0, gt=0, description="one LLM call")
    max_tokens: int = Field(4_000, ge=256, description="longest LLM answer")
    batch_episodes: int = Field(50, ge=1, le=500, description="most new episodes one LLM call sees")
    context_facts: int = Field(50, ge=0, description="most existing facts shown (found by hybrid recall)")
    context_playbooks: int = Field(20, ge=0, description="most playbooks shown, with their counts")
    min_fact_confidence: float = Field(0.6, ge=0, le=1, description="facts below are dropped")
    min_procedure_confidence: float = Field(0.8, ge=0, le=1, description="new playbooks below are dropped")
    duplicate_similarity: float | None = Field(
        None,
        gt=0,
        le=1,
        description="cosine at or above which a new fact repeats an old one; "
        "unset = the value calibrated for the embedding model",
    )
    every_hours: float = Field(
        24.0, gt=0, description="schedule: consolidate a user with new episodes this often"
    )
    after_episodes: int = Field(20, ge=1, description="schedule: or as soon as this many new episodes exist")
    poll_seconds: float = Field(60.0, gt=0, description="schedule: how often the HTTP server checks")

    def api_key(self) -> str | None:
        """The provider's key, read from the variable ``api_key_env`` names (None: no key needed)."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ConfigurationError(
                f"[consolidation] api_key_env names {self.api_key_env!r}, but it is not set"
            )
        return key

    @model_validator(mode="after")
    def _provider_needs(self) -> ConsolidationSettings:
        needed = {"openai": ("base_url", "model"), "elasticsearch": ("base_url", "inference_id")}
        missing = [k for k in needed.get(self.provider or "", ()) if not getattr(self, k)]
        if missing:
            raise ValueError(f"[consolidation] provider = {self.provider!r} needs {', '.join(missing)}")
        return self


class ElasticsearchSettings(BaseModel):
    """The ``[elasticsearch]`` table, used when ``backend = "elasticsearch"``."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(None, description="e.g. https://localhost:9200; or set cloud_id")
    cloud_id: str | None = Field(None, description="an Elastic Cloud deployment's id, instead of url")
    api_key: str | None = Field(None, repr=False, description="the server's writer API key (encoded id:key)")
    # Minting per-user keys needs a *user* credential: an API key cannot create keys that
    # carry privileges.
    username: str | None = Field(None, description="a user credential, needed to mint per-user keys")
    password: str | None = Field(None, repr=False, description="that user's password")
    admin_api_key: str | None = Field(
        None,
        repr=False,
        description="administrator API key where there are no passwords (Serverless): bootstrap, "
        "users revoke, users add --api-key, eval; it cannot mint keys that carry privileges",
    )
    ca_certs: Path | None = Field(None, description="the CA bundle that signed the cluster's certificate")
    verify_certs: bool = Field(True, description="check the cluster's TLS certificate")
    request_timeout: float = Field(30.0, gt=0, description="seconds per request")
    max_retries: int = Field(3, ge=0, description="retries of transient failures, with backoff")
    retry_backoff: float = Field(0.5, ge=0, description="first backoff in seconds, doubled per retry")
    max_retry_wait: float = Field(10.0, ge=0, description="cap on one wait, Retry-After included")
    embedding_inference_id: str = Field(
        ".jina-embeddings-v5-text-small", min_length=1, description="the endpoint that embeds memories"
    )
    rerank_inference_id: str | None = Field(
        ".jina-reranker-v2-base-multilingual", description="empty = no server-side rerank"
    )
    rerank_score_scale: Literal["auto", "probability", "logit"] = Field(
        "auto",
        description="auto: read from the endpoint (GET _inference: service and model); "
        "logit: raw logits, squashed by a sigmoid",
    )
    rerank_window: int = Field(
        80, ge=1, description="how many fused candidates the server-side reranker scores"
    )
    index_prefix: str = Field(
        "atlas", pattern=r"^[a-z0-9][a-z0-9_\-]{0,40}$", description="the start of every index and alias name"
    )
    secrets_file: Path | None = Field(
        None, description="per-user keys (mode 0600); default data_dir/es-keys.json"
    )
    refresh: Literal["true", "wait_for"] = Field("true", description="how writes become visible to recall")
    key_expiration: str | None = Field(
        None, description="lifetime of minted user keys, e.g. 90d; none = no expiry"
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    backend: Literal["embedded", "elasticsearch"] = Field(
        "embedded", description="embedded: SQLite and local ONNX models; elasticsearch: see [elasticsearch]"
    )
    data_dir: Path = Field(
        default_factory=lambda: Path(user_data_dir("atlas-mcp", appauthor=False)),
        description="where the embedded store lives: atlas.db, and atlas.db-postings/ with large users' "
        "keyword postings, so a start need not rebuild them (safe to delete)",
        json_schema_extra={"shown_default": "the user data folder (`~/.local/share/atlas-mcp` on Linux)"},
    )
    user: str = Field("default", min_length=1, description="the stdio identity (also --user)")
    user_scopes: Scopes = Field(
        default_factory=_all_scopes,
        min_length=1,
        description="the tools the stdio user (and HTTP with --insecure-no-auth) may use: recall, write, "
        "forget (also serve --scopes; default all)",
    )
    users: dict[str, UserConfig] = Field(default_factory=dict)
    transport: Literal["stdio", "http"] = Field(
        "stdio", description="how serve talks to clients: stdio (one local client) or streamable HTTP"
    )
    host: str = Field("127.0.0.1", description="the address HTTP listens on")
    port: int = Field(8765, ge=0, le=65535, description="the port HTTP listens on")
    insecure_no_auth: bool = Field(False, description="HTTP without tokens, on a loopback host only")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host headers HTTP accepts (DNS-rebinding guard); loopback by default",
    )
    allowed_origins: list[str] = Field(default_factory=list, description="Origin headers HTTP accepts")
    max_request_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="largest HTTP request body")
    rate_limit_per_minute: int = Field(
        600, ge=0, description="HTTP requests per user per minute; 0 = no limit"
    )
    rate_limit_burst: int = Field(120, ge=1, description="HTTP requests a user may send at once")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="logs go to stderr, never stdout"
    )
    scoring: ScoringPolicy = Field(default_factory=ScoringPolicy)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    oauth: OAuthSettings = Field(default_factory=OAuthSettings)
    elasticsearch: ElasticsearchSettings = Field(default_factory=ElasticsearchSettings)
    limits: Limits = Field(default_factory=Limits)
    guard: GuardPolicy = Field(default_factory=GuardPolicy)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    profile: ProfilePolicy = Field(default_factory=ProfilePolicy)

    def check_serving(self) -> list[str]:
        """Refuse to serve HTTP on credentials anyone could present; return warnings to log.

        Only ``serve`` calls this: admin commands (bootstrap, users, stats) run with the same
        settings, e.g. ``ATLAS_TRANSPORT=http`` in a container, and need no token.
        """
        if self.transport != "http":
            return []
        if self.insecure_no_auth:
            if self.host not in LOOPBACK_HOSTS:
                raise ConfigurationError(
                    "--insecure-no-auth is allowed only on a loopback host (127.0.0.1, ::1)"
                )
            return []
        if not (self.token_digests() or self.oauth.enabled):
            raise ConfigurationError(
                "HTTP transport needs at least one [users.<id>] token_sha256 (or [oauth]): "
                + tokens.HOW_TO_MAKE_ONE.format(user="<id>")
                + "; --insecure-no-auth serves without tokens, on a loopback host only"
            )
        self._check_tokens()
        if self.host in LOOPBACK_HOSTS:
            return []
        plain_http = (
            f"serving plain HTTP on {self.host}: bearer tokens and memories cross the network unencrypted "
            "unless a TLS-terminating proxy is in front of this server"
        )
        return [plain_http]

    def _check_tokens(self) -> None:
        """Every token strong, and none configured twice (it would name two credentials)."""
        seen: dict[str, str] = {}
        for user_id, user in sorted(self.users.items()):
            if why := tokens.weakness(user.token, user.token_sha256):
                raise ConfigurationError(
                    f"refusing to serve user {user_id!r}: {why}; "
                    + tokens.HOW_TO_MAKE_ONE.format(user=user_id)
                )
            named = {"token": user.token_digest()} | {n: t.sha256.lower() for n, t in user.tokens.items()}
            for name, digest in named.items():
                where = f"users.{user_id}" + ("" if name == "token" else f".tokens.{name}")
                if digest and tokens.weakness(None, digest):
                    raise ConfigurationError(
                        f"refusing to serve {where}: its token is a well-known example; "
                        + tokens.HOW_TO_MAKE_ONE.format(user=user_id)
                    )
                if digest and digest in seen:
                    raise ConfigurationError(
                        f"{where} and {seen[digest]} are the same token: give each its own "
                        f"({tokens.HOW_TO_MAKE_ONE.format(user=user_id)})"
                    )
                if digest:
                    seen[digest] = where

    def token_digests(self) -> dict[str, str]:
        """sha256(token) → user id, for every configured token."""
        return {d: g.user for d, g in self.token_grants().items()}

    def token_grants(self) -> dict[str, Grant]:
        """sha256(token) → the user it names and the tools it may use."""
        return {d: g for uid, u in self.users.items() for d, g in u.grants(uid).items()}

    def stdio_grant(self) -> Grant:
        """The configured user, with ``user_scopes``: stdio, and HTTP with --insecure-no-auth."""
        return Grant(self.user, frozenset(self.user_scopes), "stdio")

    @property
    def database_path(self) -> Path:
        return self.data_dir / "atlas.db"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlSource(settings_cls, _config_file.get()))


# The file ``load_settings`` was given, for the one ``Settings`` it builds (pydantic-settings
# makes the sources in a classmethod, so the path cannot be an argument).
_config_file: ContextVar[str | os.PathLike[str] | None] = ContextVar("config_file", default=None)


class _TomlSource(PydanticBaseSettingsSource):
    """The TOML file given to ``load_settings`` (``--config``), else the one ``ATLAS_CONFIG`` names."""

    def __init__(self, settings_cls: type[BaseSettings], path: str | os.PathLike[str] | None) -> None:
        super().__init__(settings_cls)
        self._data = read_toml(path if path is not None else os.environ.get(CONFIG_ENV))

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def read_toml(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigurationError(f"config file not found: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"config file {path} is not valid TOML: {exc}") from exc


def load_settings(config_file: str | os.PathLike[str] | None = None, **flags: Any) -> Settings:
    """Build settings; ``flags`` are command-line values (``None`` = not given)."""
    given = {k: v for k, v in flags.items() if v is not None}
    reading = _config_file.set(config_file)
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise ConfigurationError(settings_problem(exc)) from exc
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    finally:
        _config_file.reset(reading)


def settings_problem(exc: ValidationError) -> str:
    """What is wrong with the settings, in one line: unknown names with the one meant."""
    problems, values = [], []
    for error in exc.errors(include_url=False):
        *table, name = error["loc"]
        if error["type"] == "extra_forbidden":
            dotted = ".".join(map(str, error["loc"]))
            problems.append(f"unknown setting {dotted!r}{meant(str(name), _setting_names(table))}")
        elif error["type"] == "value_error":  # our own validators' messages are complete sentences
            problems.append(str(error["msg"]).removeprefix("Value error, "))
        else:
            values.append(error)
    return "invalid settings: " + "; ".join(problems + clauses(values))


def _setting_names(table: list[Any]) -> list[str]:
    """The keys a settings table takes (``[]`` = the top level), for "did you mean"."""
    model: Any = Settings
    for part in table:
        field = (
            model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        )
        if field is None:
            return []
        model = field.annotation
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def ignored_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning per ATLAS_* variable (of ``environ``, default this process's) that sets
    nothing. The environment is read leniently (it holds other programs' variables), so without
    this a misspelt ATLAS_DATA_DIR in an MCP client's config would silently put the user's
    memories in the default folder."""
    environ = os.environ if environ is None else environ
    return [
        f"{name} is not an atlas-mcp setting and is ignored{meant(name, _environment_names())}"
        for name in sorted(environ)
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in NOT_SETTINGS_ENV and not _sets(name)
    ]


def _sets(name: str) -> bool:
    """Does ATLAS_<field>[__<field>...] name a setting? (``__`` steps into a table; a table of
    named entries, like ``users``, takes any name at that step.)"""
    node: Any = Settings
    steps = name[len(ENV_PREFIX) :].lower().split("__")
    while steps:
        if get_origin(node) is dict:
            steps.pop(0)
            node = get_args(node)[1]
            continue
        if not (isinstance(node, type) and issubclass(node, BaseModel)):
            return False
        field = node.model_fields.get(steps.pop(0))
        if field is None:
            return False
        node = field.annotation
    return True


def _environment_names() -> list[str]:
    """Every setting as an environment variable, one table deep: what a misspelling meant."""
    names = []
    for field_name, field in Settings.model_fields.items():
        names.append(f"{ENV_PREFIX}{field_name.upper()}")
        table = field.annotation
        if isinstance(table, type) and issubclass(table, BaseModel):
            names += [f"{ENV_PREFIX}{field_name.upper()}__{sub.upper()}" for sub in table.model_fields]
    return names
