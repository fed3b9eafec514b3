"""Fail when the modules of the given packages import each other in a circle.

    python tools/import_cycles.py webapp simkube

An edge A -> B is any `import` statement in module A that names module B, wherever it stands:
at the top, inside a function, inside a `try` or under `if TYPE_CHECKING:`. An import moved
into a function still runs and still ties A to B; it only hides the circle until some call
order breaks it. One kept for the type checker ties nothing at run time, but the two modules
must still be read together: a part that names the whole it belongs to (a controller typed
with the cluster that holds it) is a circle of ideas, and a narrow `Protocol` beside the part
says what it needs instead. `import a.b.c` is an edge to `a.b.c`; `from a.b import c` is an
edge to the module `a.b.c` when there is one, else to `a.b` (its `__init__`, which defines
`c`); relative imports resolve the same way. Imports of modules outside the given packages are
not edges, nor are the packages Python initialises on the way to a module (`a` and `a.b` for
`a.b.c`): a package's `__init__` here sets the app up from its modules, and counting it would
tie every module to everything. Each strongly connected component of more than one module is
reported with one circle through it; the exit status is 1 when there is any.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path

# module -> {imported module: line of its first import}
Graph = dict[str, dict[str, int]]


def find_modules(packages: Sequence[Path]) -> dict[str, Path]:
    """Dotted name -> file for every module under the package directories."""
    modules: dict[str, Path] = {}
    for package in packages:
        root = package.resolve().parent
        for path in sorted(package.resolve().rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def all_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of the tree, wherever it stands."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def imported_modules(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
                     known: dict[str, Path]) -> Iterator[str]:
    """The known modules one import statement of `module` names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in known:
                yield alias.name
        return
    base = node.module or ""
    if node.level:
        # `from .` is the module's own package: itself for an __init__, else its parent.
        package = module.split(".")
        package = package[: len(package) - node.level + (1 if is_package else 0)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in known:
            yield submodule
        elif base in known:
            yield base


def build_graph(modules: dict[str, Path]) -> Graph:
    graph: Graph = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in all_imports(tree):
            for target in imported_modules(node, name, is_package, modules):
                if target != name:
                    edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[name] = edges
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's algorithm; components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def shortest_cycle(graph: Graph, component: list[str]) -> list[str]:
    """A shortest circle from the component's first module back to it, inside the component."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph[node]):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if target in members and target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise AssertionError(f"{start} is on no cycle of its component")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+", type=Path, help="package directories")
    args = parser.parse_args(argv)
    modules = find_modules(args.packages)
    graph = build_graph(modules)
    components = strongly_connected(graph)
    for component in components:
        print(f"import cycle among {len(component)} modules: {', '.join(component)}")
        cycle = shortest_cycle(graph, component)
        for source, target in zip(cycle, cycle[1:], strict=False):
            where = os.path.relpath(modules[source])
            print(f"  {source} -> {target}  ({where}:{graph[source][target]})")
    imports = sum(len(edges) for edges in graph.values())
    names = " ".join(str(package) for package in args.packages)
    if components:
        print(f"{len(components)} import cycles in {names} ({len(modules)} modules)")
        return 1
    print(f"no import cycles in {names}: {len(modules)} modules, {imports} imports between them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
