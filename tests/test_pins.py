"""Every dependency pinned and hashed, and installed with the hashes checked: the
compiled requirements (``make lock``) against their sources, the Makefile and the
Dockerfile."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPILED = ["requirements.txt", "requirements-dev.txt", "requirements-bench.txt"]


def _requirements(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a compiled file (a name may appear once per marker)."""
    entries: dict[str, tuple[str, list[str]]] = {}
    text = path.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split("#", 1)[0] if not line.lstrip().startswith("--hash") else line
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;]+)", line)
        assert match, f"{path.name}: not pinned with ==: {line.strip()!r}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        assert hashes, f"{path.name}: {match[1]} has no hash"
        entries[match[1].lower()] = (match[2], hashes)
    return entries


@pytest.mark.parametrize("name", COMPILED)
def test_every_requirement_is_pinned_with_its_hashes(name):
    assert len(_requirements(ROOT / name)) > 10


@pytest.mark.parametrize("name", COMPILED)
def test_the_compiled_file_keeps_every_pin_of_its_source(name):
    compiled = _requirements(ROOT / name)
    source = (ROOT / name.replace(".txt", ".in")).read_text()
    for line in source.splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line)
        if match:
            assert compiled[match[1].lower().replace("_", "-")][0] == match[2], line


def test_the_dev_and_bench_files_install_the_runtime_as_it_is_compiled():
    runtime = _requirements(ROOT / "requirements.txt")
    for name in COMPILED[1:]:
        other = _requirements(ROOT / name)
        assert {k: other[k][0] for k in runtime} == {k: v[0] for k, v in runtime.items()}, name


def test_installs_check_the_hashes():
    makefile = (ROOT / "Makefile").read_text()
    (install,) = re.findall(r"^INSTALL := (.*)$", makefile, re.MULTILINE)
    assert "pip install" in install and "--require-hashes" in install, install
    installs = re.findall(r"^\t(.*) -r requirements[\w-]*\.txt$", makefile, re.MULTILINE)
    assert installs == ["$(INSTALL)"] * 3, installs
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"pip install .*--require-hashes -r /tmp/requirements.txt", dockerfile)
