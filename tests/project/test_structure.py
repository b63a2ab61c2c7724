"""The package's structure (issue #38): no import cycle among the modules of a package, and
no module reaching into an underscore name another module defines."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "trio_agents"

#: Import cycles still to break, each a set of modules (shrinks to empty; a cycle that is gone
#: must leave this table, so it cannot come back unseen).
KNOWN_CYCLES: list[frozenset[str]] = [
    # The kernel's fiber, context, runtime and reload are friends: each calls the others'
    # private steps (see KNOWN_REACHES); the snapshot reads their private state (the stacks,
    # the runtime's live fibers) to describe the tree as it is.
    frozenset(
        {
            "trio_agents.kernel._context",
            "trio_agents.kernel._fiber",
            "trio_agents.kernel._reload",
            "trio_agents.kernel._runtime",
            "trio_agents.kernel._snapshot",
        }
    ),
]

#: (module, attribute) reaches into another module's underscore name that stay: the standard
#: library's (``os._exit`` after fork; argparse has no public way to list its actions), the
#: session store's slot on each ``Session`` (one slot instead of a dict keyed by session, read
#: by the store's own modules), and the kernel's friend classes (KNOWN_CYCLES).
KNOWN_REACHES: frozenset[tuple[str, str]] = frozenset(
    {
        ("trio_agents.cli._signals", "_exit"),
        ("trio_agents.shell._supervisor", "_exit"),
        ("trio_agents.cli._usage", "_actions"),
        ("trio_agents.cli._usage", "_SubParsersAction"),
        ("trio_agents.cli._worker", "_SubParsersAction"),
        ("trio_agents.session._backend", "_store_entry"),
        ("trio_agents.session._entry", "_store_entry"),
    }
)
KERNEL_FRIENDS = frozenset(m for cycle in KNOWN_CYCLES for m in cycle)


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def _top_level_imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports at module level (``TYPE_CHECKING`` blocks
    included: a cycle of types is a cycle for the reader; an import inside a function, the way
    an optional extra is loaded, is not counted)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    nodes: list[ast.stmt] = list(tree.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, (ast.If, ast.Try)):
            nodes += node.body + node.orelse
            continue
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join([*base, node.module] if node.module else base)
            names = [name] + [f"{name}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n for n in names if n in known and n != module}
    return found


def _cycles() -> list[frozenset[str]]:
    """The strongly connected sets of modules (more than one) within each package, package
    facades (``__init__``) left out."""
    paths = dict(_modules())
    facades = {m for m, p in paths.items() if p.name == "__init__.py"}
    graph = {
        m: _top_level_imports(m, p, set(paths)) - facades
        for m, p in paths.items()
        if m not in facades
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = {stack.pop()}
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _defined(tree: ast.Module) -> set[str]:
    """Every name a module defines: functions, classes, assigned names and attributes, and the
    strings of its ``__slots__``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def _reaches() -> list[tuple[str, int, str]]:
    """Every ``x._name`` (not ``self``, ``cls`` or ``super()``) whose name the module does not
    define itself: a reach into another module's private state."""
    found: list[tuple[str, int, str]] = []
    for module, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        own = _defined(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in own:
                continue
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "super":
                continue
            found.append((module, node.lineno, name))
    return found


def test_the_walk_sees_the_agent_package() -> None:
    """The checks below are not vacuous: the walk finds the agent's modules and imports."""
    paths = dict(_modules())
    imports = _top_level_imports(
        "trio_agents.agent._turn", paths["trio_agents.agent._turn"], set(paths)
    )
    assert "trio_agents.agent._parts" in imports


def test_no_import_cycle_among_a_packages_modules() -> None:
    """Every package's modules import one another in one direction only (the kernel's four
    friends excepted, listed in KNOWN_CYCLES)."""
    assert sorted(map(sorted, _cycles())) == sorted(map(sorted, KNOWN_CYCLES))


def test_no_module_reaches_into_another_modules_private_names() -> None:
    """No module reads or calls an underscore name that another module defines (a seam is a
    public name, or a field of a record)."""
    reaches = sorted(
        f"{module}:{line}: ._{name[1:]}"
        for module, line, name in _reaches()
        if (module, name) not in KNOWN_REACHES and module not in KERNEL_FRIENDS
    )
    assert reaches == []
