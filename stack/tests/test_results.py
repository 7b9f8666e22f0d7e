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


def test_what_the_commands_write_is_not_an_uncommitted_change_and_the_rest_is(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

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
