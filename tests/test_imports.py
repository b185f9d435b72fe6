"""The package's modules import each other without a circle.

Imports are read from the source with ``ast``: at module level, inside
functions (a function-level import that closes a circle only moves the failure
to the first call) and under ``if TYPE_CHECKING:`` (a type is a dependency
too). Importing ``a.b.c`` runs the package ``a.b`` first, so a submodule counts
as an import of its packages too (except the importer's own packages, which
are already running).
"""

from __future__ import annotations

import ast
from pathlib import Path

import agentscope_mem0

PACKAGE = Path(agentscope_mem0.__file__).resolve().parent
ROOT = "agentscope_mem0"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _all_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _with_packages(name: str, importer: str) -> set[str]:
    """``name`` and the packages importing it runs first, but not the importer's
    own packages: those are already running when the importer runs."""
    return (({name} | _ancestors(name)) - _ancestors(importer)) & set(MODULES)


def imports_of(module: str) -> set[str]:
    """The package modules that importing ``module`` imports directly."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    here = module if is_package else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _all_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            names = [source, *(f"{source}.{alias.name}" for alias in node.names)]
        for name in names:
            if name == ROOT or name.startswith(ROOT + "."):
                targets |= _with_packages(name, module)
    targets.discard(module)
    return targets


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_no_import_circle_among_the_package_modules() -> None:
    graph = {module: imports_of(module) for module in MODULES}
    assert _cycles(graph) == []


def test_the_checker_sees_function_level_and_type_only_imports() -> None:
    graph = {module: imports_of(module) for module in MODULES}
    # the client builder imports the embedded store only inside its functions
    assert f"{ROOT}.local" in graph[f"{ROOT}._mem0.clients"]
    # the middleware names WorkingStore only for the type checker
    assert f"{ROOT}._working.stores" in graph[f"{ROOT}._middleware"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_embedded_store_does_not_import_client_building() -> None:
    graph = {module: imports_of(module) for module in MODULES}
    local = [m for m in graph if m.startswith(f"{ROOT}.local")]
    assert all(f"{ROOT}._mem0.clients" not in graph[m] for m in local)


def _top_level_node(module: str) -> str:
    """The package's top-level folder or module that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def folder_graph() -> dict[str, set[str]]:
    """Each top-level folder (or module) of the package as one node, and the
    nodes its modules import; the package's own ``__init__`` is left out (it
    re-exports everything, lazily)."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        if module == ROOT:
            continue
        node = _top_level_node(module)
        targets = {_top_level_node(t) for t in imports_of(module) if t != ROOT}
        graph.setdefault(node, set()).update(targets - {node})
    return graph


def test_folders_depend_in_one_direction() -> None:
    # a circle between folders is a circle even when no two modules form one
    assert _cycles(folder_graph()) == []


def test_the_folder_check_sees_a_circle_between_folders() -> None:
    graph = folder_graph()
    assert "_text" in graph["_recall"]  # the note's text helpers sit below the read path
    graph["_text"] = graph["_text"] | {"_recall"}
    assert any({"_recall", "_text"} <= set(circle) for circle in _cycles(graph))
