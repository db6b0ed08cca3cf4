"""Per-principal token buckets: one noisy (or stolen) token cannot starve everyone else.

Each authenticated user gets ``burst`` requests at once, refilled at ``per_minute / 60``
requests per second. Over the limit a request gets ``429`` with ``Retry-After``; no work is
done for it. In memory and per process: a fleet behind a load balancer limits per replica.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    def __init__(self, per_minute: int, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def retry_after(self, principal: str) -> int | None:
        """Take one request from ``principal``'s bucket: None if allowed, else seconds to wait."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.setdefault(principal, _Bucket(self.burst, now))
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return None
            return max(1, math.ceil((1.0 - bucket.tokens) / self.rate))
