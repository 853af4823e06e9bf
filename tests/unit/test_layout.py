"""The package's imports run one way (README, Layout): a module may import its own layer and the
layers below it, never one above. Read from the source, so a lazy import inside a function
counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dcpm"

# Lowest first. A module of one rank may import modules of the same or a lower rank.
LAYERS = [
    {"errors", "config", "setting_types", "domain", "stored_values", "metrics"},
    {"store", "embedding", "llm", "testing"},
    {"index"},
    {"api"},
    {"inspection", "status", "auth"},
    {"read", "write", "admin", "adapter"},
    {"consolidation"},
    {"parts", "service"},
    {"mcp", "server", "cli"},
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def top_part(module: str) -> str | None:
    """`dcpm.write.writer` -> `write`; `dcpm` itself (the version string) -> None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "dcpm" and len(parts) > 1 else None


def imports_of(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def modules() -> list[tuple[str, Path]]:
    return [(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts), path)
            for path in sorted(PACKAGE.rglob("*.py")) if "migrations" not in path.parts]


def test_every_module_belongs_to_a_layer():
    unplaced = {top_part(name) for name, _ in modules()} - set(RANK) - {None, "__init__", "__main__"}
    assert not unplaced, f"place these in LAYERS: {unplaced}"


@pytest.mark.parametrize("name,path", modules(), ids=[name for name, _ in modules()])
def test_no_import_runs_upward(name, path):
    own = top_part(name)
    if own in (None, "__init__", "__main__"):
        return
    upward = []
    for imported in imports_of(path):
        if imported.split(".")[0] in ("workers", "migrations", "scripts", "tests"):
            upward.append(imported)
        target = top_part(imported)
        if target in RANK and RANK[target] > RANK[own]:
            upward.append(imported)
    assert not upward, f"{name} imports upward: {sorted(set(upward))}"


def test_no_command_module_imports_the_cli_entry_point():
    for name, path in modules():
        if name.startswith("dcpm.cli.") and name not in ("dcpm.cli.main", "dcpm.cli.__main__"):
            assert "dcpm.cli.main" not in imports_of(path), name


def test_modules_stay_small():
    long = {name: n for name, path in modules() if (n := len(path.read_text(encoding="utf-8").splitlines())) > 300}
    assert not long, f"split these modules (over 300 lines): {long}"
