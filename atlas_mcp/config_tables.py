"""The settings' tables (``[users.<id>]``, ``[embedding]``, ``[rerank]``, ``[oauth]``,
``[consolidation]``, ``[elasticsearch]``): what each key takes and means. ``config.Settings``
holds them; only ``config`` reads the environment and the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_settings import NoDecode

from . import scopes, tokens
from .choices import OneOf
from .domain.model import MemoryType
from .domain.validity import Retention
from .inference.names import EMBEDDING_MODELS, PER_LANGUAGE
from .scopes import Grant, ScopeName


def every_scope() -> list[ScopeName]:
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
        default_factory=every_scope, min_length=1, description="the tools this token may use"
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
        default_factory=every_scope,
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
        default_factory=every_scope,
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


class RetentionSettings(BaseModel):
    """``[retention]``: how long memories of each type stay in the store.

    Expired memories (``expires_at``) always leave; a type without a number is kept for good.
    ``serve`` sweeps at start and every ``every_hours``; ``atlas-mcp prune --dry-run`` shows
    what would go.
    """

    model_config = ConfigDict(extra="forbid")

    episodic_days: int | None = Field(
        None, ge=1, description="events older than this (by when they happened) leave the store"
    )
    semantic_days: int | None = Field(
        None, ge=1, description="facts not used for this long (else since written) leave the store"
    )
    procedural_days: int | None = Field(
        None, ge=1, description="playbooks not used for this long (else since written) leave the store"
    )
    keep_cited_episodes: bool = Field(
        True, description="never remove an event a fact cites as its source (source_episodes)"
    )
    every_hours: float = Field(1.0, gt=0, description="how often `serve` removes what expired or aged out")

    def rules(self) -> Retention:
        days = {
            MemoryType.EPISODIC: self.episodic_days,
            MemoryType.SEMANTIC: self.semantic_days,
            MemoryType.PROCEDURAL: self.procedural_days,
        }
        return Retention(days, self.keep_cited_episodes)


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
