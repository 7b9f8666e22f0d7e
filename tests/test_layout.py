"""The rooms of the house, checked: the shop's packages stand on floors, each
importing only those below it and none of the lab; no module grows past a size a
reader holds; and no module reaches into another's private names."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The shop, floor by floor from the ground: a package imports only packages on the
# floors below its own (never one beside it), so an import that runs up or sideways
# fails here. flashsale (settings, URLs, the WSGI entry, the server launcher) wires
# the rest together.
FLOORS = [["common"], ["locking", "inventory", "buyers", "dashboard"], ["waitingroom"], ["orders"],
          ["payments", "races"], ["flashsale"]]
APPS = [package for floor in FLOORS for package in floor if package != "flashsale"]
# The lab: what runs, loads, faults, measures and judges the shop. It may import the
# shop; the shop never imports it.
LAB = ["stack", "loadtest", "chaos", "verdicts", "scenarios", "benchmarks", "pager", "payprovider"]
MOST_LINES = 400
# Longer than MOST_LINES, and why.
LONG_BY_NATURE = {
    "flashsale/settings/base.py": "Django's settings, one flat list, each setting with what reads it",
}
# Longer than MOST_LINES and not yet split: the list only shrinks.
NOT_YET_SPLIT = {"stack/servers.py", "stack/control.py", "loadtest/compare.py", "loadtest/figures.py",
                 "loadtest/locustfile.py", "chaos/sale.py", "verdicts/checker.py", "benchmarks/capacity.py"}


def _modules(packages=APPS):
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "tests" not in path.parts and "migrations" not in path.parts:
                yield path


def _imported(path: Path) -> set[str]:
    """The project's packages ``path`` imports (at its top or inside a function)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return names & {*(p for floor in FLOORS for p in floor), *LAB}


def test_every_package_is_on_a_floor_of_the_shop_or_in_the_lab():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    placed = [p for floor in FLOORS for p in floor] + LAB
    assert sorted(placed) == sorted(set(placed)) and set(placed) == packages, \
        f"place these: {sorted(packages - set(placed))}; gone: {sorted(set(placed) - packages)}"


def test_each_shop_package_imports_only_the_floors_below_it_and_none_of_the_lab():
    floor_of = {package: n for n, floor in enumerate(FLOORS) for package in floor}
    wrong = []
    for package, floor in floor_of.items():
        for path in _modules([package]):
            wrong += [f"{path.relative_to(ROOT)} imports {name}" for name in _imported(path) - {package}
                      if floor_of.get(name, len(FLOORS)) >= floor]
    assert not wrong, wrong


def test_no_module_is_over_400_lines_unless_the_test_says_why():
    every = _modules([p for floor in FLOORS for p in floor] + LAB)
    long = {str(p.relative_to(ROOT)) for p in every if p.read_text().count("\n") > MOST_LINES}
    assert long - LONG_BY_NATURE.keys() - NOT_YET_SPLIT == set(), \
        f"split these where a part has a name of its own: {long - LONG_BY_NATURE.keys() - NOT_YET_SPLIT}"
    assert NOT_YET_SPLIT <= long, f"split now, leave the list: {NOT_YET_SPLIT - long}"


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


def test_the_shop_reaches_the_sellers_rooms_only_through_the_seller_table():
    """The sellers' rooms (``orders.gate``, ``orders.transaction``) are ``orders``'
    own: the packages above it ask ``orders.sellers`` for a sale's stock moves (the
    payments' give-back and take-again, the races' stock), never a room itself."""
    rooms = (["orders", "gate"], ["orders", "transaction"])
    found = []
    for path in _modules([package for package in APPS if package != "orders"] + ["flashsale"]):
        for node in ast.walk(ast.parse(path.read_text())):
            named = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(ROOT)}: {name}" for name in named
                      if name.split(".")[:2] in rooms]
    assert len(list(_modules(["payments"]))) > 5 and not found, found


def test_the_sellers_are_told_apart_in_the_two_tables_alone():
    """Which seller holds a sale is the strategy's row (``common.strategies``) and
    what that seller does is the seller table's (``orders.sellers``): every other
    module, tests included, asks them (``spec.gated``, ``seller_of(spec)``)."""
    tables = {"common/strategies.py", "orders/sellers.py"}
    told = re.compile(r"Seller\.(GATE|TRANSACTION)\b")
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted(ROOT.glob("[!.]*/**/*.py"))
             if str(path.relative_to(ROOT)) not in tables and "site-packages" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if told.search(line)]
    assert not found, found
