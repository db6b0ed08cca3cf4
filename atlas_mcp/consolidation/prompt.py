"""The one prompt per batch: new episodes, the relevant existing facts, the playbooks.

Existing facts and playbooks are found with the same hybrid recall the tools use (one query
per new episode), not "the last N", so a fact from two years ago that a new episode
contradicts is in front of the model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..domain.model import Memory, iso

SYSTEM_PROMPT = """\
You maintain a user's long-term memory. You receive NEW EPISODES (events, verbatim), the
user's EXISTING FACTS that look related, and the user's PLAYBOOKS (multi-step procedures with
their success/failure counts). Answer with ONE JSON object and nothing else:

{"new_facts": [{"text": str, "fact_type": "preference"|"identity"|"constraint"|"world",
   "confidence": 0..1, "supporting_episode_ids": [episode ids],
   "supersedes_id": [existing fact ids] or null, "contradiction": "natural"|"harsh"|null}],
 "new_procedures": [{"name": str, "trigger_text": "when to use it", "steps": [str],
   "supporting_episode_ids": [episode ids], "confidence": 0..1}],
 "procedural_updates": [{"id": playbook id, "outcome": "success"|"failure",
   "supporting_episode_ids": [episode ids], "refined_steps": [str] or null}]}

Rules:
- Only facts the USER stated or that their episodes show; never guess or generalise.
- Every item cites the ids of the NEW EPISODES that support it. No citation, no item.
- One self-contained sentence per fact, naming exact values (versions, places, names).
- Do not restate an EXISTING FACT. If a new episode makes existing facts false, write the new
  fact with supersedes_id = every contradicted fact id; contradiction "natural" when the world
  changed, "harsh" when the user said the stored fact was wrong.
- A procedure only for a multi-step method that demonstrably worked. When an episode shows a
  playbook being used, add a procedural_update with its outcome.
- Nothing worth keeping? Return {"new_facts": [], "new_procedures": [], "procedural_updates": []}.
"""


@dataclass(frozen=True, slots=True)
class Prompt:
    system: str
    user: str


def build_prompt(episodes: Sequence[Memory], facts: Sequence[Memory], playbooks: Sequence[Memory]) -> Prompt:
    payload = {
        "new_episodes": [{"id": e.id, "occurred_at": iso(e.occurred_at), "text": e.text} for e in episodes],
        "existing_facts": [
            {"id": f.id, "text": f.text, "fact_type": f.fact_type, "confidence": f.confidence} for f in facts
        ],
        "playbooks": [
            {
                "id": p.id,
                "name": p.name,
                "trigger_text": p.text,
                "steps": [s.instruction for s in p.steps],
                "success_count": p.success_count,
                "failure_count": p.failure_count,
            }
            for p in playbooks
        ],
    }
    return Prompt(SYSTEM_PROMPT, json.dumps(payload, ensure_ascii=False, indent=1))
