"""atlas-mcp: persistent, per-user long-term memory for AI agents, served over MCP."""

__version__ = "0.1.0"
