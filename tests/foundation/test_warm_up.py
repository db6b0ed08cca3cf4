"""The stdio server's warm-up, in a process of its own: once the first recall is answered it
preloads, then takes what start-up made out of the garbage collector's sight (``gc.freeze``),
so full collections stop walking the models and the store's caches, and from then on runs a
full collection only every ``FULL_COLLECTION_AFTER`` middle ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROGRAM = """
import gc, sys, threading, time
from pathlib import Path
from atlas_mcp.app import open_service
from atlas_mcp.cli.serve import _warm_up_in_background
from atlas_mcp.config import load_settings

service = open_service(load_settings(data_dir=Path(sys.argv[1])))
service.write("ines", "Ines's dentist is Dr. Moreau on Rue Oberkampf")
_warm_up_in_background(service, "ines")
time.sleep(1.0)
before = gc.get_freeze_count()
service.recall("ines", "who is my dentist")
for _ in range(300):
    if gc.get_freeze_count() > 0:
        break
    time.sleep(0.05)
print(before, gc.get_freeze_count())
for thread in threading.enumerate():  # the warm-up's last steps follow the freeze
    if thread.name == "atlas-warm-up":
        thread.join(60)
# what recalls keep afterwards (the memory cache's churn), kept for good: no full collection
# walks it before FULL_COLLECTION_AFTER middle ones
collections = {0: 0, 1: 0, 2: 0}


def counted(phase, info):
    if phase == "stop":
        collections[info["generation"]] += 1


gc.callbacks.append(counted)
kept = [[[] for _ in range(700)] for _ in range(150)]
print(collections[1], collections[2])
service.close()
"""


def test_the_warm_up_freezes_what_start_up_made_once_the_first_recall_is_answered(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, after, middle, full = (int(n) for n in done.stdout.split())
    assert before == 0  # not before the first recall: start-up is still making objects
    assert after > 10_000
    assert middle >= 12 and full == 0  # the default rule would have walked what was kept by now
