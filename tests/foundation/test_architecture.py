"""Import direction: the domain knows nothing of engines, MCP or settings; engines know no MCP;
inference (models) knows no engine."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "atlas_mcp"

FORBIDDEN = {
    "domain": (
        "atlas_mcp.engines",
        "atlas_mcp.mcp",
        "atlas_mcp.cli",
        "atlas_mcp.config",
        "atlas_mcp.service",
        "mcp",
    ),
    "engines": ("atlas_mcp.mcp", "atlas_mcp.cli", "atlas_mcp.service", "mcp"),
    "inference": ("atlas_mcp.engines", "atlas_mcp.mcp", "atlas_mcp.cli", "atlas_mcp.service", "mcp"),
    "importers": ("atlas_mcp.engines", "atlas_mcp.mcp", "atlas_mcp.cli", "mcp"),  # only through the service
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
            found.add(module)
    return found


def test_layers_import_only_downwards():
    violations = []
    for layer, banned in FORBIDDEN.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            for module in imported_modules(path):
                if any(module == b or module.startswith(b + ".") for b in banned):
                    violations.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert violations == []


def test_only_config_reads_the_environment():
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "os.environ" in p.read_text() and p.name != "config.py"
    ]
    assert offenders == []
