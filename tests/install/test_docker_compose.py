"""docker-compose.yml, as far as it can run here: its services' commands, with the environment
the image (Dockerfile ENV) and the compose file give them, against the project's fake cluster.

What differs from Docker, and why: the cluster is the strict fake (no Elasticsearch runs on these
machines), so its URL and admin credential replace compose's; the data volume is a temporary
folder; the port is a free one (and the allowed Host header follows it); the server binds
127.0.0.1, which is what compose publishes the container's 0.0.0.0 on.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is not installed (test extra)")
pytest.importorskip("elasticsearch", reason="the elasticsearch extra is not installed")

from elasticsearch_engine.fake_es import ADMIN, FakeElasticsearch
from foundation.mcp_helpers import call, free_port, http_client

from atlas_mcp.bench.measure import wait_healthy

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # where `atlas-mcp` is installed, as in the image
VARIABLE = re.compile(r"\$\{(\w+)(?::([?-])([^}]*))?\}")


def dockerfile() -> tuple[dict[str, str], list[str]]:
    """The image's ENV and CMD."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.+)$", text, re.MULTILINE):
        env |= dict(pair.split("=", 1) for pair in line.split())
    (cmd,) = re.findall(r"^CMD (\[.+\])$", text, re.MULTILINE)
    return env, json.loads(cmd)


def interpolate(value: str, variables: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?error}."""

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.groups()
        if variables.get(name):
            return variables[name]
        if kind == "?":
            raise AssertionError(f"compose would stop: {rest}")
        return rest if kind == "-" else ""

    return VARIABLE.sub(one, value)


def service(name: str, variables: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(environment, command) of one compose service, as the container would get them."""
    spec = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"][name]
    image_env, image_cmd = dockerfile()
    env = image_env | {k: interpolate(str(v), variables) for k, v in spec.get("environment", {}).items()}
    return env, spec.get("command", image_cmd)


@pytest.fixture
def compose(tmp_path: Path) -> Iterator[tuple[dict[str, str], FakeElasticsearch]]:
    """The variables a person exports before `docker compose up`, and the cluster they start."""
    variables = {"ELASTIC_PASSWORD": ADMIN[1], "ATLAS_TOKEN": secrets.token_urlsafe(32)}
    env, _ = service("atlas-setup", variables)
    endpoints = [
        env["ATLAS_ELASTICSEARCH__EMBEDDING_INFERENCE_ID"],
        env["ATLAS_ELASTICSEARCH__RERANK_INFERENCE_ID"],
    ]
    fake = FakeElasticsearch(inference_ids=endpoints).start()
    yield variables, fake
    fake.stop()


def container_env(name: str, variables: dict[str, str], fake: FakeElasticsearch, tmp_path: Path, port: int):
    env, command = service(name, variables)
    env |= {
        "ATLAS_ELASTICSEARCH__URL": fake.url,
        "ATLAS_ELASTICSEARCH__USERNAME": ADMIN[0],
        "ATLAS_DATA_DIR": str(tmp_path / "atlas-data"),  # the atlas-data volume, shared by both services
        "ATLAS_HOST": "127.0.0.1",
        "ATLAS_PORT": str(port),
    }
    if "ATLAS_ALLOWED_HOSTS" in env:
        env["ATLAS_ALLOWED_HOSTS"] = env["ATLAS_ALLOWED_HOSTS"].replace(":8765", f":{port}")
    base = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_")}
    return base | env | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}, command


async def _write_and_recall_as(url: str, token: str) -> None:
    async with http_client(url, token) as sarah:
        written = await call(sarah, "write_memory", text="Sarah's smart hub runs firmware 3.0")
        found = await call(sarah, "recall_memory", query="hub firmware")
        assert written["id"] in [m["id"] for m in found["memories"]]


def test_compose_sets_up_and_serves_end_to_end(compose, tmp_path: Path):
    variables, fake = compose
    port = free_port()

    setup_env, setup_cmd = container_env("atlas-setup", variables, fake, tmp_path, port)
    assert setup_env["ATLAS_TRANSPORT"] == "http"  # the image's: admin commands must not need a token
    setup = subprocess.run(setup_cmd, env=setup_env, capture_output=True, text=True, timeout=300, check=False)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert "minted key" in setup.stdout

    serve_env, serve_cmd = container_env("atlas", variables, fake, tmp_path, port)
    log_path = tmp_path / "atlas.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(serve_cmd, env=serve_env, stdout=log, stderr=log)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, server, 60.0, log_path)
        anyio.run(_write_and_recall_as, f"{base}/mcp", variables["ATLAS_TOKEN"])
    finally:
        server.terminate()
        server.wait(timeout=30)

    stats = subprocess.run(
        ["atlas-mcp", "stats"], env=serve_env, capture_output=True, text=True, timeout=120, check=False
    )
    assert stats.returncode == 0 and "sarah" in stats.stdout, stats.stderr


def test_compose_refuses_a_guessable_token_and_says_how_to_make_one(compose, tmp_path: Path):
    variables, fake = compose
    env, command = container_env(
        "atlas", variables | {"ATLAS_TOKEN": "pick-another"}, fake, tmp_path, free_port()
    )
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode != 0
    assert "atlas-mcp users token sarah" in refused.stderr and "Traceback" not in refused.stderr


def test_the_images_model_warm_up_runs():
    """The image builds both models' derived files at build time (RUN python -c ...): the
    snippet must keep working as the code moves, or the image fails to build."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    (snippet,) = re.findall(r'^RUN python -c "(.+)"$', text, re.MULTILINE)
    done = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
