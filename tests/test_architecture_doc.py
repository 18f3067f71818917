"""docs/architecture.md names only what is there: every file path and every
dotted name under a project package it quotes exists (a module or attribute,
a model as `app.Model`, or a Celery task by its name)."""

import importlib
import re
from pathlib import Path

from django.apps import apps

from portal.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = {path.parent.name for path in ROOT.glob("*/__init__.py")}


def quoted():
    """Each `code span` of the document, with its line."""
    for number, line in enumerate(DOC.read_text().splitlines(), start=1):
        for span in re.findall(r"`([^`]+)`", line):
            yield span.strip(), number


def resolves(dotted):
    """A task or model by that name, or else: import the longest module prefix
    of `dotted`, then walk the attributes."""
    celery_app.loader.import_default_modules()
    if dotted in celery_app.tasks or is_model(dotted):
        return True
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def is_model(label):
    try:
        apps.get_model(label)
    except (LookupError, ValueError):
        return False
    return True


def named_things():
    paths, names = [], []
    for span, line in quoted():
        token = span.split("(")[0].split(":")[0].split()[0] if span.split() else ""
        if re.fullmatch(r"[\w./-]+\.(py|md|yaml|json)", token) and token.split("/")[
            0
        ] in PACKAGES | {"docs"}:
            paths.append((token, line))
        elif re.fullmatch(r"\w+(\.\w+)+", token) and token.split(".")[0] in PACKAGES:
            names.append((token, line))
    return paths, names


def test_every_path_the_architecture_names_exists():
    paths, _ = named_things()
    assert len(paths) >= 10  # the walk reads the document
    missing = [f"{path} (line {line})" for path, line in paths if not (ROOT / path).exists()]
    assert missing == []


def test_every_dotted_name_the_architecture_names_exists():
    _, names = named_things()
    assert len(names) >= 5
    missing = [f"{name} (line {line})" for name, line in names if not resolves(name)]
    assert missing == []
