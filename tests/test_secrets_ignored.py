"""Secrets an operator writes beside the checkout (``.env`` and its variants, as
``.env.example`` suggests) reach neither a commit nor an image."""

from __future__ import annotations

import subprocess

import pytest
from docker.utils.build import exclude_paths

from stack.config import ROOT

SECRET_FILES = [".env", ".env.local", ".env.production"]


@pytest.fixture
def secret_files():
    """The files, made for the test beside the checkout's own; removed afterwards."""
    made = [ROOT / name for name in SECRET_FILES if not (ROOT / name).exists()]
    for path in made:
        path.write_text("DJANGO_SECRET_KEY=not-for-an-image\n")
    yield
    for path in made:
        path.unlink()


def test_git_ignores_the_env_files_but_not_the_example(secret_files):
    result = subprocess.run(["git", "check-ignore", "--no-index", "-v", *SECRET_FILES, ".env.example"],
                            cwd=ROOT, capture_output=True, text=True)
    # source:line:pattern<TAB>path; a path matched by a "!" pattern is kept.
    matches = [line.split("\t") for line in result.stdout.splitlines()]
    ignored = {path for where, path in matches if not where.split(":", 2)[2].startswith("!")}
    assert ignored == set(SECRET_FILES), result.stdout


def test_the_docker_build_context_leaves_the_env_files_out(secret_files):
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    context = exclude_paths(str(ROOT), patterns, dockerfile="Dockerfile")
    assert not context & set(SECRET_FILES)
    assert ".env.example" in context and "manage.py" in context
