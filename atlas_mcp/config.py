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
from typing import Any, Literal, get_args, get_origin

from platformdirs import user_data_dir
from pydantic import BaseModel, Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from . import tokens
from .config_tables import (
    ConsolidationSettings,
    ElasticsearchSettings,
    EmbeddingSettings,
    OAuthSettings,
    RerankSettings,
    RetentionSettings,
    Scopes,
    UserConfig,
    every_scope,
)
from .domain.guard import GuardPolicy
from .domain.limits import Limits
from .domain.profile import ProfilePolicy
from .domain.scoring import ScoringPolicy
from .errors import ConfigurationError
from .scopes import Grant
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
        default_factory=every_scope,
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
    encryption_key: str | None = Field(
        None,
        repr=False,
        description="encrypts the embedded store at rest: 64 hex digits (a raw key, e.g. from "
        "`openssl rand -hex 32`) or a passphrase of 8+ characters (see Encryption at rest below)",
    )
    encryption_key_file: Path | None = Field(
        None,
        description="a file (mode 0600) whose first line is the encryption key; instead of encryption_key",
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
    retention: RetentionSettings = Field(default_factory=RetentionSettings)

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

    def encryption_secret(self) -> str | None:
        """The key the embedded store is encrypted with (``encryption_key`` or the first line of
        ``encryption_key_file``), unchecked (``engines/embedded/cipher.py`` checks it), or None:
        the store is plain."""
        if self.encryption_key_file is None:
            return self.encryption_key
        if self.encryption_key is not None:
            raise ConfigurationError("set encryption_key or encryption_key_file, not both")
        try:
            lines = self.encryption_key_file.read_text(encoding="utf-8").strip().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise ConfigurationError(
                f"cannot read encryption_key_file {self.encryption_key_file}: {why}"
            ) from None
        if not lines:
            raise ConfigurationError(f"encryption_key_file {self.encryption_key_file} is empty")
        return lines[0].strip()

    def encryption_key_source(self) -> str:
        """Where ``encryption_secret`` comes from, for messages (never the key itself)."""
        if self.encryption_key_file is not None:
            return f"encryption_key_file {self.encryption_key_file}"
        return "ATLAS_ENCRYPTION_KEY (encryption_key)"

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


def provider_key(settings: ConsolidationSettings) -> str | None:
    """The consolidation provider's key, read from the variable ``api_key_env`` names (None: no
    key needed)."""
    if not settings.api_key_env:
        return None
    key = os.environ.get(settings.api_key_env)
    if not key:
        raise ConfigurationError(
            f"[consolidation] api_key_env names {settings.api_key_env!r}, but it is not set"
        )
    return key


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
    if model is ScoringPolicy:
        return [*ScoringPolicy.model_fields, *ScoringPolicy.FLAT_KEYS]
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
        if node is ScoringPolicy:  # its knobs go by more than one name
            return ScoringPolicy.names_a_knob(steps)
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
            subs = [*table.model_fields, *(ScoringPolicy.FLAT_KEYS if table is ScoringPolicy else ())]
            names += [f"{ENV_PREFIX}{field_name.upper()}__{sub.upper()}" for sub in subs]
    return names
