"""No import cycle between labelq's packages (issue 37).

Every module under ``labelq/`` is parsed (``ast``, nothing is imported) and each of its imports
(``import labelq.x``, ``from labelq.x import y``, ``from ..x import y``, ``from . import x``),
wherever it stands (module level, inside a function, under ``TYPE_CHECKING``: a lazy import is
still a dependency), becomes an edge between the *groups* of the two modules:

* each subpackage of ``labelq`` is a group (``record``, ``live``, ``policies``, ``gold``,
  ``aggregation``, ``simulate``, ``api``, ``reproductions``; ``live.redis`` is part of
  ``live``);
* ``labelq.errors`` is its own group, ``errors``, the base layer: it imports nothing from
  labelq, so every package may raise its exceptions without that making a cycle;
* the other top-level modules (``service``, ``exporting``, ``reporting``, ``dashboard``,
  ``jobs``, ``datasets``) are the group ``app``: what the CLI and the API call, above the
  engine.

The graph of those groups must have no cycle, apart from the imports listed in
:data:`KNOWN_CYCLE_IMPORTS` (empty now: issue 37 took the last one off). A new import that
closes a cycle fails here; so does an exception that is no longer needed (take it off the list).
In particular ``record`` (the durable record) never imports ``live``, and ``live`` never imports
``app``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import labelq

ROOT = Path(labelq.__file__).parent

PACKAGES = {"record", "live", "policies", "gold", "aggregation", "simulate", "api",
            "reproductions"}
BASE = {"errors"}  # top-level modules that are a group of their own, importing nothing of labelq

# Imports known to close a cycle, as (importing module, imported group): each an exception
# written down, to go. Issue 37 took off the last two (``service`` and ``exporting`` importing
# ``live`` while ``live`` imported the record, which sat beside them at the top level).
KNOWN_CYCLE_IMPORTS: set[tuple[str, str]] = set()


def _module_name(path: Path) -> tuple[str, str]:
    """(module, package its relative imports start from) of a file under ``ROOT``."""
    parts = ("labelq", *path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        name = ".".join(parts[:-1])
        return name, name
    return ".".join(parts), ".".join(parts[:-1])


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` names, its dots resolved from ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(tree: ast.AST, package: str) -> Iterator[tuple[str, list[str]]]:
    """Each import in the tree as (the module it names, the names it takes from it: none
    for ``import x``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            yield _from_module(node, package), [alias.name for alias in node.names]


def _imported(tree: ast.AST, package: str) -> set[str]:
    """Every labelq module (or name in one) the tree imports, as a dotted name."""
    out: set[str] = set()
    for module, names in _imports(tree, package):
        out.add(module)
        # ``from . import x`` / ``from labelq.live import hotstate``: x may be a module
        out.update(f"{module}.{name}" for name in names)
    return {m for m in out if m == "labelq" or m.startswith("labelq.")}


def _group(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # ``labelq`` itself (its __init__ is empty)
    if parts[1] in PACKAGES or parts[1] in BASE:
        return parts[1]
    return "app"


def _imports_by_module() -> dict[str, set[str]]:
    """Each labelq module -> the groups (other than its own) that it imports."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sorted(ROOT.rglob("*.py")):
        module, package = _module_name(path)
        src = _group(module)
        for target in _imported(ast.parse(path.read_text(encoding="utf-8")), package):
            dst = _group(target)
            if src is not None and dst is not None and dst != src:
                out[module].add(dst)
    return out


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph, as its nodes in order (first repeated last), or None."""
    colour: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(edges):
        if node not in colour:
            found = visit(node)
            if found:
                return found
    return None


def test_every_subpackage_is_a_group():
    found = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert found == PACKAGES, "a new labelq subpackage: add it to PACKAGES"


def test_the_base_layer_imports_nothing_of_labelq():
    for name in BASE:
        path = ROOT / f"{name}.py"
        assert _imported(ast.parse(path.read_text(encoding="utf-8")), "labelq") == set(), name


def test_the_walk_sees_the_known_imports():
    """The walker itself: relative, absolute and in-function imports all give edges."""
    by_module = _imports_by_module()
    assert "policies" in by_module["labelq.gold.schedules"]  # from ..policies._recommend
    assert "record" in by_module["labelq.live.goldmark"]  # from ..record.projects import ...
    assert {"live", "errors"} <= by_module["labelq.service"]  # from .live.submit import ...
    assert "record" in by_module["labelq.simulate.gold"]  # in a function: ..record.projects
    assert "live" in by_module["labelq.exporting"]  # in a function: from .live.hotstate


def test_no_import_cycle_between_packages():
    by_module = _imports_by_module()
    edges: dict[str, set[str]] = defaultdict(set)
    for module, groups in by_module.items():
        src = _group(module)
        assert src is not None
        for dst in groups:
            if (module, dst) not in KNOWN_CYCLE_IMPORTS:
                edges[src].add(dst)
    cycle = _cycle(edges)
    assert cycle is None, (
        "import cycle between labelq's packages: " + " -> ".join(cycle) + "\n" + "\n".join(
            f"  {m} imports {g}" for a, b in zip(cycle, cycle[1:], strict=False)
            for m, gs in sorted(by_module.items()) for g in gs
            if _group(m) == a and g == b and (m, g) not in KNOWN_CYCLE_IMPORTS))


def test_each_known_exception_is_still_needed():
    """An import listed in KNOWN_CYCLE_IMPORTS that is gone, or no longer closes a cycle, is to
    come off the list (so the list says what is left of issue 37)."""
    by_module = _imports_by_module()
    for module, dst in sorted(KNOWN_CYCLE_IMPORTS):
        assert dst in by_module.get(module, set()), f"{module} no longer imports {dst}"
        edges: dict[str, set[str]] = defaultdict(set)
        for m, groups in by_module.items():
            for g in groups:
                if (m, g) not in KNOWN_CYCLE_IMPORTS or (m, g) == (module, dst):
                    edges[_group(m) or ""].add(g)
        # alone, this import makes a cycle: it is a real exception
        assert _cycle(edges) is not None, f"{module} -> {dst} closes no cycle any more"


def test_the_record_sits_below_the_engine():
    """What issue 37 asked in words: ``live`` depends on the record and never the other way,
    and the engine imports nothing of the layer above it (service, exports, dashboard)."""
    by_module = _imports_by_module()
    for module, groups in by_module.items():
        if _group(module) == "record":
            assert not groups & {"live", "api", "app", "simulate"}, (module, groups)
        if _group(module) == "live":
            assert not groups & {"api", "app", "simulate"}, (module, groups)


# --- inside each package: no module imports one that imports it back (issue 43) ----------

def _modules() -> dict[str, tuple[Path, str]]:
    """Every labelq module -> (its file, the package its relative imports start from)."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        module, package = _module_name(path)
        out[module] = (path, package)
    return out


def _module_imports(tree: ast.AST, package: str, modules: set[str]) -> set[str]:
    """The labelq modules a tree imports, each import to the module it loads: ``from . import
    x`` (and ``from .pkg import x``) to ``x`` where ``x`` is a module, else to the module the
    names come from. Lazy and ``TYPE_CHECKING`` imports count, as between packages."""
    out: set[str] = set()
    for module, names in _imports(tree, package):
        subs = {f"{module}.{name}" for name in names} & modules
        out |= subs
        if not names or len(subs) < len(names):  # (names defined in ``module`` itself)
            out.add(module)
    return out & modules


def _module_edges() -> dict[str, set[str]]:
    """Each labelq module -> the modules of its own package (``live.redis`` is ``live``'s,
    as between packages) that it imports."""
    modules = _modules()
    names = set(modules)
    out: dict[str, set[str]] = defaultdict(set)
    for module, (path, package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target in _module_imports(tree, package, names):
            if target != module and _group(target) == _group(module):
                out[module].add(target)
    return out


def test_the_module_walk_sees_the_known_imports():
    """The walker itself: type-only, relative, in-function and subpackage imports."""
    edges = _module_edges()
    assert "labelq.api.runtime" in edges["labelq.api.annotator"]  # under TYPE_CHECKING
    assert "labelq.api.annotator" in edges["labelq.api.app"]  # from . import annotator
    assert "labelq.record.db" in edges["labelq.record.location"]  # in a function
    assert "labelq.live.redis.keys" in edges["labelq.live.hotstate"]  # live.redis is live's
    assert "labelq.aggregation.methods" in edges["labelq.aggregation.auto"]
    assert not edges["labelq.errors"]  # a group of its own, importing nothing of labelq


def test_the_module_walk_finds_a_cycle():
    """The check itself: a made-up pair that imports each other is a cycle."""
    assert _cycle({"a.x": {"a.y"}, "a.y": {"a.x"}}) == ["a.x", "a.y", "a.x"]
    tree = ast.parse("from . import app\nfrom .app import Runtime\n")
    assert _module_imports(tree, "labelq.api", {"labelq.api.app"}) == {"labelq.api.app"}


def test_no_import_cycle_inside_a_package():
    """Issue 43's three circles untied (``api``: the routers and ``app``; ``aggregation``:
    ``auto`` and ``registry``; ``record``: ``db``, ``location``, ``settings``), and none new:
    a module that both sides need goes below them (``api.runtime``, ``aggregation.methods``,
    ``record.dburl``, ``record.configfile``, ``record.names``)."""
    edges = _module_edges()
    cycle = _cycle(edges)
    assert cycle is None, "import cycle inside a package: " + " -> ".join(cycle)


def test_shared_models_are_not_reached_through_a_private_module():
    """The ``shrunk`` aggregation method fits the ``auto`` policy's worker model through its
    public home, :mod:`labelq.policies.worker_model`, not a private module of policies."""
    tree = ast.parse((ROOT / "aggregation" / "shrunk.py").read_text(encoding="utf-8"))
    imported = _module_imports(tree, "labelq.aggregation", set(_modules()))
    assert "labelq.policies.worker_model" in imported
    assert not [m for m in imported if m.split(".")[-1].startswith("_")], imported
