"""kubesim's packages import downward (docs/architecture.md, "kubesim: shaped like
the API server it imitates"): a test walks every module of kubesim/.

The shared pure modules at the top of kubesim/ (clock, quantity, cluster,
exposition) are the bottom; above them the apiserver, the controllers, the
kubelet, the exporters, and on top the wiring (app, control, testing, the CLI)
and history. An import (also inside a function) of a package in a higher layer
fails, but for the one the document names.
"""

import ast
from pathlib import Path

KUBESIM = Path(__file__).resolve().parents[2] / "kubesim"
SHARED = {"clock", "quantity", "cluster", "exposition"}
LAYERS = ["shared", "apiserver", "controllers", "kubelet", "exporters", "top"]
# The pod garbage collector fails a pod as the kubelet would (a pure function).
ALLOWED = {("kubesim.controllers.node_lifecycle_controller", "kubelet")}


def layer_of(dotted: str) -> str:
    """The layer of a module named `kubesim.X[.Y]`."""
    part = dotted.split(".")[1] if "." in dotted else ""
    if part in LAYERS:
        return part
    return "shared" if part in SHARED else "top"


def imports(path: Path, module: str):
    """Every kubesim module `module` imports, resolving relative imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = base if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.startswith("kubesim"):
                # `from kubesim import cluster` names a module, not the package.
                names = [f"{target}.{a.name}" for a in node.names] if target == "kubesim" else []
                yield from names or [target]
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("kubesim"))


def test_kubesim_packages_import_only_downward():
    against = []
    modules = 0
    for path in sorted(KUBESIM.rglob("*.py")):
        parts = path.relative_to(KUBESIM.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules += 1
        for target in imports(path, module):
            mine, theirs = layer_of(module), layer_of(target)
            if LAYERS.index(theirs) > LAYERS.index(mine) and (module, theirs) not in ALLOWED:
                against.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert modules > 40  # the walk reads the package
    assert against == []


def test_the_storage_knows_nothing_of_the_registry_above_it():
    """kubesim.apiserver.storage keeps objects and fans out their changes; the write
    rules are the registry's: nothing the storage imports, directly or not, reaches it."""
    seen, todo = set(), ["kubesim.apiserver.storage"]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = KUBESIM.parent / (module.replace(".", "/") + ".py")
        if path.exists():
            todo.extend(imports(path, module))
    assert "kubesim.apiserver.errors" in seen  # the walk follows imports
    assert "kubesim.apiserver.registry" not in seen
