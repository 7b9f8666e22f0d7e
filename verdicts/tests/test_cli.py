"""`python -m verdicts check`: a history of one's own, judged from its file."""

from common.history import OK, Final, Purchase, Reset, write
from verdicts.__main__ import main


def history(tmp_path, remaining_answered):
    path = tmp_path / "h.jsonl"
    write(path, [Reset("s", 2, 0), Purchase(1, "c1", "s", 1, "k1", 1, 2, OK, 201, None, 7, 1),
                 Purchase(2, "c2", "s", 1, "k2", 3, 4, OK, 201, None, 8, remaining_answered),
                 Final("s", 0, [("k1", 7), ("k2", 8)], 10)])
    return path


def test_a_linearizable_history_exits_0(tmp_path, capsys):
    assert main(["check", str(history(tmp_path, 0))]) == 0
    assert "s: linearizable" in capsys.readouterr().out


def test_a_history_that_cannot_be_ordered_exits_1_and_draws_its_window(tmp_path, capsys):
    drawing = tmp_path / "w.svg"
    assert main(["check", str(history(tmp_path, 1)), "--svg", str(drawing)]) == 1
    out = capsys.readouterr().out
    assert "NOT linearizable" in out and "#2 c2" in out
    assert drawing.read_text().startswith("<svg")


def test_a_malformed_file_exits_2_naming_the_line(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "reset", "sku": "s", "stock": 1, "at": 0}\n{"type": "nope"}\n')
    assert main(["check", str(path)]) == 2
    assert "line 2" in capsys.readouterr().err
