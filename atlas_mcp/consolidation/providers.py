"""LLM providers for consolidation: one ``complete(user_id, prompt) -> text`` call each.

    openai          any OpenAI-compatible POST {base_url}/chat/completions
    elasticsearch   POST {base_url}/_inference/chat_completion/{inference_id}/_stream (SSE)
    sampling        the connected MCP client's own model, via sampling/createMessage
    replay          answers read back from a recording (deterministic reruns, tests)

HTTP providers take an injectable ``httpx2.AsyncClient``; keys are read from the environment
variable named by ``api_key_env`` at call time and never logged.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from pathlib import Path
from typing import Any, Protocol

import httpx2

from .. import jsonl
from ..config import provider_key
from ..config_tables import ConsolidationSettings
from ..errors import AtlasError, ConfigurationError
from .prompt import Prompt


class ProviderUnavailable(AtlasError):
    """The LLM could not be asked or did not answer; the batch is retried later."""


class LLMProvider(Protocol):
    name: str

    async def complete(self, user_id: str, prompt: Prompt) -> str: ...


def chat_messages(prompt: Prompt) -> list[dict[str, str]]:
    return [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]


class _HttpProvider:
    name: str  # how errors name the provider

    def __init__(self, settings: ConsolidationSettings, client: httpx2.AsyncClient | None) -> None:
        self.settings = settings
        self._client = client

    async def _post(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> httpx2.Response:
        client = self._client or httpx2.AsyncClient(timeout=self.settings.timeout_s)
        try:
            response = await client.post(url, json=body, headers=headers, timeout=self.settings.timeout_s)
        except httpx2.HTTPError as exc:
            raise ProviderUnavailable(f"{self.name}: {type(exc).__name__} calling {url}") from exc
        finally:
            if self._client is None:
                await client.aclose()
        if response.status_code >= 400:
            raise ProviderUnavailable(f"{self.name}: HTTP {response.status_code}: {response.text[:200]}")
        return response

    def _url(self, path: str) -> str:
        return f"{(self.settings.base_url or '').rstrip('/')}/{path.lstrip('/')}"


class OpenAIProvider(_HttpProvider):
    """OpenAI, vLLM, Ollama, LiteLLM…: the answer is ``choices[0].message.content``."""

    name = "openai"

    async def complete(self, user_id: str, prompt: Prompt) -> str:
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": chat_messages(prompt),
            "temperature": 0,
            "max_tokens": self.settings.max_tokens,
        }
        if self.settings.json_mode:
            body["response_format"] = {"type": "json_object"}
        headers = {}
        if key := provider_key(self.settings):
            headers["Authorization"] = f"Bearer {key}"
        response = await self._post(self._url("chat/completions"), body, headers)
        try:
            return response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ProviderUnavailable(f"openai: unexpected response shape: {response.text[:200]}") from exc


class ElasticsearchProvider(_HttpProvider):
    """An Elasticsearch inference ``chat_completion`` endpoint (streaming-only API)."""

    name = "elasticsearch"

    async def complete(self, user_id: str, prompt: Prompt) -> str:
        body = {
            "messages": chat_messages(prompt),
            "temperature": 0,
            "max_completion_tokens": self.settings.max_tokens,
        }
        headers = {"Accept": "text/event-stream"}
        if key := provider_key(self.settings):
            headers["Authorization"] = f"ApiKey {key}"
        url = self._url(f"_inference/chat_completion/{self.settings.inference_id}/_stream")
        response = await self._post(url, body, headers)
        return "".join(stream_deltas(response.text))


def stream_deltas(sse: str) -> list[str]:
    """The ``choices[].delta.content`` pieces of an inference chat_completion event stream."""
    pieces = []
    for line in sse.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if not data or data == "[DONE]":
            continue
        try:
            event = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ProviderUnavailable(f"elasticsearch: unreadable stream event {data[:80]!r}") from exc
        if "error" in event:
            raise ProviderUnavailable(f"elasticsearch: {json.dumps(event['error'])[:200]}")
        chunk = event.get("chat_completion", event)  # the chunk is wrapped in current versions
        for choice in chunk.get("choices") or []:
            content = (choice.get("delta") or {}).get("content")
            if content:
                pieces.append(content)
    return pieces


class ReplayProvider:
    """Answers from a recording, in order, per user: the same run, deterministically."""

    name = "replay"

    def __init__(self, path: Path) -> None:
        self._answers: dict[str, deque[str]] = defaultdict(deque)
        for where, entry in jsonl.objects(Path(path)):
            try:
                self._answers[entry["user_id"]].append(entry["answer"])
            except (KeyError, TypeError) as exc:
                raise ConfigurationError(f"{where}: not a recorded answer") from exc

    async def complete(self, user_id: str, prompt: Prompt) -> str:
        if not self._answers[user_id]:
            raise ProviderUnavailable(f"replay: no recorded answer left for user {user_id!r}")
        return self._answers[user_id].popleft()


class RecordingProvider:
    """Wraps a provider and appends every answer to a JSONL file ``--replay`` can read back."""

    def __init__(self, inner: LLMProvider, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)

    async def complete(self, user_id: str, prompt: Prompt) -> str:
        answer = await self.inner.complete(user_id, prompt)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"user_id": user_id, "answer": answer}, ensure_ascii=False) + "\n")
        return answer


def open_provider(
    settings: ConsolidationSettings, *, sessions: Any = None, http_client: httpx2.AsyncClient | None = None
) -> LLMProvider:
    """The configured provider; ``sessions`` is the server's SamplingSessions (sampling only)."""
    if settings.provider is None:
        raise ConfigurationError(
            'consolidation is off: set [consolidation] provider = "openai", "elasticsearch" or '
            '"sampling" (see docs/consolidation.md)'
        )
    if settings.provider == "openai":
        return OpenAIProvider(settings, http_client)
    if settings.provider == "elasticsearch":
        return ElasticsearchProvider(settings, http_client)
    from .sampling import SamplingProvider

    if sessions is None:
        raise ConfigurationError(
            'provider "sampling" asks a connected MCP client\'s model, so it runs only inside the '
            "server (atlas-mcp serve --transport http); use --replay, or an openai/elasticsearch provider"
        )
    return SamplingProvider(sessions, settings)
