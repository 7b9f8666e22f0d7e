"""What a benchmark writes for the docs: its printed report under a line naming the
command, the commit and the machine; nothing without --docs. And every measured file
the docs include says where it came from."""

import re
from pathlib import Path

from loadtest import measured


def test_with_docs_the_printed_report_is_written_under_its_provenance(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(measured, "MEASURED", tmp_path)
    with measured.recorded("demo", "python -m benchmarks.demo --fast", write=True):
        print("| row | req/s |\n|---|---:|\n| ping | 1,000 |")
    written = (tmp_path / "demo.md").read_text()
    head, _, rest = written.partition("\n\n")
    first, settings = head.splitlines()
    assert re.fullmatch(r"Measured by `python -m benchmarks\.demo --fast` at commit `[0-9a-f]{4,}[^`]*` "
                        r"on \d{4}-\d\d-\d\d, on \d+ cores \(.+\)\.", first), first
    # And the settings that move its figures, as this process's environment gives them.
    assert measured.settings_recorded(settings) == measured.figure_settings(), settings
    assert set(measured.figure_settings()) == set(measured.FIGURE_SETTINGS)
    assert rest == "| row | req/s |\n|---|---:|\n| ping | 1,000 |\n"
    assert "| ping | 1,000 |" in capsys.readouterr().out  # printed as well


def test_without_docs_nothing_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(measured, "MEASURED", tmp_path)
    with measured.recorded("demo", "python -m benchmarks.demo", write=False):
        print("| ping | 1,000 |")
    assert not list(tmp_path.iterdir()) and "1,000" in capsys.readouterr().out


def test_every_measured_file_in_the_docs_names_its_command_and_commit():
    files = sorted(Path(measured.MEASURED).glob("*.md"))
    for path in files:
        first = path.read_text().splitlines()[0]
        assert re.match(r"Measured by `python -m [\w.]+[^`]*` at commit `[0-9a-f]{4,}", first), (path, first)
