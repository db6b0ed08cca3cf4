"""Errors atlas-mcp raises, with messages written for the model that will read them.

AtlasError                 root; every message says what to do next
├── InvalidInput           a tool argument is out of range or malformed
├── NotFound               no such memory *for this caller* (never "exists but not yours")
├── Conflict               the request contradicts stored state (e.g. already superseded)
├── BackendUnavailable     the storage engine cannot serve the call right now
└── ConfigurationError     the engine or model is configured inconsistently
"""

from __future__ import annotations


class AtlasError(Exception):
    """Root of atlas-mcp's errors; ``str(err)`` is safe to show to a model or user."""


class InvalidInput(AtlasError):
    pass


class NotFound(AtlasError):
    pass


class Conflict(AtlasError):
    pass


class BackendUnavailable(AtlasError):
    pass


class ConfigurationError(AtlasError):
    pass
