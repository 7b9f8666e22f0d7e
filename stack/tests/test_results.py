"""``make results`` (``stack.results``): every measured file's command, once, on a
clean tree; what the commands write does not make the tree unclean."""

import subprocess

from loadtest import measured
from stack import results


def test_every_measured_file_and_the_readmes_table_name_a_command_run_once():
    found = results.measurements()
    files = [name for m in found for name in m.files]
    expected = sorted(f"docs/results/measured/{p.name}" for p in measured.MEASURED.glob("*.md"))
    assert sorted(files) == sorted([*expected, "README.md"])  # each once
    assert len({m.command for m in found}) == len(found)
    assert all(m.command.startswith("python -m ") and m.command.endswith("--docs") for m in found), found


def _git(root, *args):
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def test_what_the_commands_write_is_not_an_uncommitted_change_and_the_rest_is(tmp_path, monkeypatch):
    def git(*args):
        _git(tmp_path, *args)

    git("init", "-q")
    (tmp_path / "docs/results/measured").mkdir(parents=True)
    for name in ("docs/results/measured/a.md", "README.md", "code.py"):
        (tmp_path / name).write_text("one\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    monkeypatch.setattr(measured, "ROOT", tmp_path)

    (tmp_path / "docs/results/measured/a.md").write_text("two\n")
    (tmp_path / "README.md").write_text("two\n")
    (tmp_path / "new.py").write_text("untracked\n")
    assert measured.uncommitted() == ""
    (tmp_path / "code.py").write_text("two\n")
    assert measured.uncommitted() == "M code.py"


def test_a_measured_file_names_the_last_commit_of_the_code_not_of_the_pages(tmp_path, monkeypatch):
    """A run of ``make results`` in parts: the first part's files committed, a page
    reworded, a test changed, and the files the second part writes name the same commit."""
    def commit(message, **files):
        for name, text in files.items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)
        _git(tmp_path, "add", ".")
        _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
        return _git(tmp_path, "rev-parse", "--short", "HEAD")

    _git(tmp_path, "init", "-q")
    monkeypatch.setattr(measured, "ROOT", tmp_path)
    code = commit("code", **{"code.py": "one\n", "docs/page.md": "one\n"})
    commit("a part's output", **{"docs/results/measured/a.md": "measured\n"})
    commit("pages", **{"docs/page.md": "two\n", "README.md": "two\n"})
    assert measured.code_commit() == code
    headed = measured.provenance("python -m x --docs")
    assert headed.startswith(f"Measured by `python -m x --docs` at commit `{code}` on ")
    commit("tests", **{"app/tests/test_code.py": "one\n", "conftest.py": "one\n"})
    assert measured.code_commit() == code  # no measuring command runs a test
    later = commit("code again", **{"code.py": "two\n", "app/tests/test_code.py": "two\n"})
    assert measured.code_commit() == later != code


def test_a_run_continued_at_the_nth_command_runs_the_rest_and_check_names_what_is_behind(monkeypatch, capsys):
    three = [results.Measurement(f"python -m json.tool --help --{n}", [f"f{n}.md"]) for n in (1, 2, 3)]
    monkeypatch.setattr(results, "measurements", lambda: three)
    monkeypatch.setattr(results, "uncommitted", lambda: "")
    monkeypatch.setattr(results, "code_commit", lambda: "abc1234")
    monkeypatch.setattr(results, "written_at", lambda commit: [])
    assert results.main(start=2) == 0
    out = capsys.readouterr().out
    assert "1/3:" not in out and "2/3: python -m json.tool --help --2" in out and "3/3: exit 0" in out

    monkeypatch.setattr(results, "written_at", lambda commit: ["f1.md"] if commit == "abc1234" else ["?"])
    assert results.main(check=True) == 1
    assert "not written at abc1234: f1.md" in capsys.readouterr().out
    monkeypatch.setattr(results, "written_at", lambda commit: [])
    assert results.main(check=True) == 0


def test_a_tree_with_changes_is_refused_and_a_clean_one_runs_each_command(monkeypatch, capsys):
    ran = results.Measurement("python -m json.tool --help")
    monkeypatch.setattr(results, "measurements", lambda: [ran])
    monkeypatch.setattr(results, "uncommitted", lambda: "M code.py")
    assert results.main() == 2
    assert "refused" in capsys.readouterr().err

    monkeypatch.setattr(results, "uncommitted", lambda: "")
    assert results.main() == 0
    out = capsys.readouterr().out
    assert "1/1: python -m json.tool --help" in out and "1/1: exit 0 after" in out
    assert "1 commands in" in out

    broken = results.Measurement("python -m no_such_module --docs")
    monkeypatch.setattr(results, "measurements", lambda: [broken])
    assert results.main() == 1
    assert "failed: python -m no_such_module --docs" in capsys.readouterr().err
