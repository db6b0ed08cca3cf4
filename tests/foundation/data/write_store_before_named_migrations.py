"""Write ``store_before_named_migrations.db``: a store as atlas-mcp wrote it while migrations
were counted in ``PRAGMA user_version`` (version 8), with the FTS5 index it then kept.

The checked-in file was written by atlas-mcp at commit 110f652 (2026-12-04), the last one to
write stores that way; to write it again, run this with that checkout first on the path:

    git worktree add /tmp/atlas-110f652 110f652
    PYTHONPATH=/tmp/atlas-110f652 python tests/foundation/data/write_store_before_named_migrations.py

It uses only the public service API of that commit, so its own code decides what lands in the
file.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from atlas_mcp.app import open_service
from atlas_mcp.config import load_settings

TARGET = Path(__file__).with_name("store_before_named_migrations.db")
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings(data_dir=Path(folder))
        write(settings)
        shutil.copyfile(settings.database_path, TARGET)  # closed: the log is checkpointed into it
    print(f"wrote {TARGET}", file=sys.stderr)


def write(settings) -> None:
    ticks = iter(START + timedelta(minutes=i) for i in range(1_000))
    service = open_service(settings, clock=lambda: next(ticks))
    try:
        old = service.write("ana", "Ana lives in Lyon.").id
        service.write("ana", "Ana moved to Nantes in October.", supersedes_id=old)
        service.write("ana", "Ana's dentist is Dr. Moreau on Rue Oberkampf.")
        service.write(
            "ana", "Ana flew to Osaka with Aiko.", "episodic", occurred_at="2026-10-12T08:00:00+00:00"
        )
        service.write("ana", "Reset the router", "procedural", steps=["Unplug it", "Wait ten seconds"])
        gone = service.write("ana", "Ana's locker code is 4312.").id
        service.forget("ana", gone)
        service.write("wang", "王伟不喜欢冰箱的嗡嗡声。")
        service.write("wang", "Wang waters the ferns every Sunday.")
        service.load_catalog(
            [{"id": "tea-kettle", "title": "Kettle", "text": "The office kettle descales with citric acid."}]
        )
        service.recall("ana", "where does Ana live")
        service.set_state("ana", "consolidated_until", "2026-11-02T09:00:00+00:00")
    finally:
        service.close()


if __name__ == "__main__":
    main()
