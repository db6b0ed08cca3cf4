"""Import direction: the domain knows nothing but its own modules and the error types; engines
know no MCP; inference (models) knows no engine; the surfaces (MCP, inspector, CLI) reach an
engine only through the composition root and each engine's operator facade (MCP and the
inspector through the service alone), and meet each other only where one starts or mounts the
other; the service knows only the engine protocol. Every module stays under ``MAX_LINES``."""

from __future__ import annotations

import ast
import importlib.util
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
    """Every module ``path`` imports: ``from a import b`` counts as ``a.b`` when b is a module."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
            submodules = {f"{module}.{a.name}" for a in node.names if _is_module(f"{module}.{a.name}")}
            found |= submodules or {module}
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent is not a package
        return False


def test_layers_import_only_downwards():
    violations = []
    for layer, banned in FORBIDDEN.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            for module in imported_modules(path):
                if any(module == b or module.startswith(b + ".") for b in banned):
                    violations.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert violations == []


# What a surface may import from ``atlas_mcp.engines``: ``open_engine``/``Engine`` (the package
# itself), the protocol's value types, and each engine's operator facade.
SURFACES = ("mcp", "inspector", "cli")
ENGINE_DOORS = frozenset(
    {
        "atlas_mcp.engines",
        "atlas_mcp.engines.base",
        "atlas_mcp.engines.embedded.maintenance",
        "atlas_mcp.engines.elasticsearch.operations",
    }
)


def _engine_imports(path: Path) -> set[str]:
    return {
        m for m in imported_modules(path) if m == "atlas_mcp.engines" or m.startswith("atlas_mcp.engines.")
    }


def test_surfaces_reach_engines_only_through_their_doors():
    violations = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for surface in SURFACES
        for path in (PACKAGE / surface).rglob("*.py")
        for module in _engine_imports(path) - ENGINE_DOORS
    ]
    assert violations == []


def test_the_domain_imports_only_itself_and_the_error_types():
    """An allow-list, so a new package (or a new top-level module) cannot leak into the domain."""
    allowed = ("atlas_mcp.domain", "atlas_mcp.errors")
    violations = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in (PACKAGE / "domain").rglob("*.py")
        for module in imported_modules(path)
        if module.startswith("atlas_mcp")
        and not any(module == a or module.startswith(a + ".") for a in allowed)
    ]
    assert violations == []


def test_mcp_and_the_inspector_reach_memories_only_through_the_service():
    violations = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for surface in ("mcp", "inspector")
        for path in (PACKAGE / surface).rglob("*.py")
        for module in _engine_imports(path)
    ]
    assert violations == []


# Where one surface may import another: the CLI's serve command starts the MCP server, and the
# HTTP transport mounts the inspector. Everywhere else each surface stands on the service alone.
SURFACE_MEETINGS = {("cli/serve.py", "mcp"), ("mcp/http.py", "inspector")}


def test_surfaces_meet_only_where_one_starts_or_mounts_another():
    found = set()
    for surface in SURFACES:
        for path in (PACKAGE / surface).rglob("*.py"):
            for module in imported_modules(path):
                other = module.removeprefix("atlas_mcp.").split(".")[0]
                if module.startswith("atlas_mcp.") and other in SURFACES and other != surface:
                    found.add((str(path.relative_to(PACKAGE)), other))
    assert found == SURFACE_MEETINGS


def test_the_service_knows_only_the_engine_protocol():
    assert _engine_imports(PACKAGE / "service.py") <= {"atlas_mcp.engines.base"}


def test_the_inspector_knows_no_mcp():
    """The HTTP transport mounts the inspector; the inspector is not built on MCP."""
    violations = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in (PACKAGE / "inspector").rglob("*.py")
        for module in imported_modules(path)
        if module == "mcp" or module.startswith(("mcp.", "atlas_mcp.mcp"))
    ]
    assert violations == []


def test_only_config_reads_the_environment():
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "os.environ" in p.read_text() and p.name != "config.py"
    ]
    assert offenders == []


# Issue 27's bound on a module's size: past it a module holds more than one concern; split it
# by concern. Lines as `wc -l` counts them.
MAX_LINES = 400


def test_every_module_stays_under_the_size_bound():
    over = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) >= MAX_LINES
    }
    assert over == {}
