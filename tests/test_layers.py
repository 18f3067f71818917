"""Apps import one way (docs/architecture.md): a test walks every module.

Each Django app of the project (a top-level package with an apps.py) is a
node, and so is `portal`, the project's wiring; an import of one by another,
anywhere in a module (also inside a function), is an edge. A circle fails, and
so does an import against the layers: teams at the bottom, cluster above it,
the features on top (gpu_requests, provisioning, batch, billing, ...), and
`portal` above them all (no app imports it).

Within an app, each module is a node in the same way: a circle between the
modules of one app fails too (a function-level import that closes it counts),
so every app reads bottom to top.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Lower layers first; an app may import only apps in lower layers. Apps not
# named here are on top (gpu_requests, provisioning, batch, billing, and any new
# one). teams holds the models every app's rows point at (Team, Membership);
# cluster holds the catalog (Flavor) and what the cluster offers of it, and
# learns what the features reserve through cluster.capacity's registry.
LAYERS = [{"teams"}, {"cluster"}]
WIRING = "portal"  # settings, URLs, Celery, health and metrics: above every app


def project_apps():
    return sorted([WIRING, *(path.parent.name for path in ROOT.glob("*/apps.py"))])


def imported_names(path):
    """Top-level packages imported by the module at `path`, with the line of each."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno


def app_imports():
    """{app: {imported app: "path:line" of the first such import}}."""
    apps = project_apps()
    edges = {app: {} for app in apps}
    for app in apps:
        for path in sorted((ROOT / app).rglob("*.py")):
            for name, line in imported_names(path):
                if name in edges and name != app:
                    edges[app].setdefault(name, f"{path.relative_to(ROOT)}:{line}")
    return edges


def module_name(path, root=ROOT):
    """`batch/actions.py` -> `batch.actions`; a package's `__init__.py` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted, root=ROOT):
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported_modules(path, root=ROOT):
    """Modules of the project the module at `path` imports, anywhere in it (also
    inside a function), each with its line: `from batch import jobs` is batch.jobs,
    `from batch.jobs import move` is batch.jobs too."""
    name = module_name(path, root)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, `level - 1` steps up
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [base])])
            targets = [
                f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}", root) else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and not is_module(target, root):
                target = target.rpartition(".")[0]  # a function or class of the module
            if target:
                yield target, node.lineno


def module_imports(app, root=ROOT):
    """{module of `app`: {another module of `app` it imports: "path:line" of the first}}.
    The app's package itself (its `__init__.py`) is no node: importing any module
    of the app imports it."""
    edges = {}
    for path in sorted((root / app).rglob("*.py")):
        name = module_name(path, root)
        targets = edges.setdefault(name, {})
        for target, line in imported_modules(path, root):
            if target.split(".")[0] == app and target not in (name, app):
                targets.setdefault(target, f"{path.relative_to(root)}:{line}")
                edges.setdefault(target, {})
    edges.pop(app, None)
    return edges


def find_cycle(edges):
    """One circle of imports between apps, as a list of apps, or None."""
    state = {}  # app -> "open" while on the path, "done" once fully explored

    def visit(app, path):
        state[app] = "open"
        for target in sorted(edges[app]):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target, [*path, target])
                if found:
                    return found
        state[app] = "done"
        return None

    for app in sorted(edges):
        if app not in state:
            found = visit(app, [app])
            if found:
                return found
    return None


def layer_of(app):
    for index, layer in enumerate(LAYERS):
        if app in layer:
            return index
    return len(LAYERS)


def test_the_walk_sees_every_app_and_its_imports():
    edges = app_imports()
    assert {"teams", "gpu_requests", "cluster", "provisioning", WIRING} <= set(edges)
    assert "gpu_requests" in edges["provisioning"]
    assert "cluster" in edges["provisioning"]
    assert "teams" in edges["gpu_requests"]
    assert "teams" in edges["cluster"]  # its rows point at teams.Team
    assert "billing" in edges[WIRING]


def test_no_app_imports_the_wiring():
    importers = [
        f"{app} ({targets[WIRING]})" for app, targets in app_imports().items() if WIRING in targets
    ]
    assert importers == []


def test_no_app_imports_another_that_imports_it_back():
    edges = app_imports()
    cycle = find_cycle(edges)
    where = [edges[a][b] for a, b in zip(cycle, cycle[1:], strict=False)] if cycle else []
    assert cycle is None, f"import circle {' -> '.join(cycle)} at {', '.join(where)}"


def test_apps_import_only_lower_layers():
    upward = [
        f"{app} imports {target} ({where})"
        for app, targets in app_imports().items()
        for target, where in targets.items()
        if layer_of(target) >= layer_of(app)
        and layer_of(app) < len(LAYERS)  # the top layer's apps may import each other
    ]
    assert upward == []


def test_a_circle_is_found():
    edges = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:1"}, "c": {"a": "c.py:1"}, "d": {}}
    assert find_cycle(edges) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ""}, "b": {}}) is None


def test_no_module_imports_another_of_its_app_that_imports_it_back():
    circles = []
    for app in project_apps():
        edges = module_imports(app)
        cycle = find_cycle(edges)
        if cycle:
            where = [edges[a][b] for a, b in zip(cycle, cycle[1:], strict=False)]
            circles.append(f"{' -> '.join(cycle)} at {', '.join(where)}")
    assert circles == []


def test_a_circle_of_modules_is_found_through_a_function_level_import(tmp_path):
    app = tmp_path / "shop"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "models.py").write_text("from django.db import models\n")
    (app / "actions.py").write_text("from shop import models\nfrom shop.tasks import send\n")
    (app / "tasks.py").write_text("def send():\n    from .actions import buy\n")
    edges = module_imports("shop", root=tmp_path)
    assert edges == {
        "shop.actions": {"shop.models": "shop/actions.py:1", "shop.tasks": "shop/actions.py:2"},
        "shop.models": {},
        "shop.tasks": {"shop.actions": "shop/tasks.py:2"},
    }
    assert find_cycle(edges) == ["shop.actions", "shop.tasks", "shop.actions"]
