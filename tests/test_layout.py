"""The rooms of the house, checked: no app module grows past a size a reader holds,
and no module reaches into another's private names."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ["common", "buyers", "locking", "inventory", "orders", "payments", "waitingroom", "races", "dashboard"]
MOST_LINES = 400


def _modules():
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "tests" not in path.parts and "migrations" not in path.parts:
                yield path


def test_no_app_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := p.read_text().count("\n")) > MOST_LINES}
    assert not long, f"split these where a part has a name of its own: {long}"


def test_no_module_imports_another_modules_private_name():
    """A name another module needs is part of its module's interface: it has no leading
    underscore. (Aliases the importer gives itself, ``as _X``, are its own business.)"""
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                found += [f"{path.relative_to(ROOT)}: {alias.name}" for alias in node.names
                          if alias.name.startswith("_")]
    assert len(list(_modules())) > 100 and not found, found
