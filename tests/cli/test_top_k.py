"""``tvmrt run --top-k`` ranks every row of a batch (issue 22, item 7)."""

from __future__ import annotations

import numpy as np

from tvmrt.cli.run import top_k_lines


def _parsed(line: str) -> list[int]:
    return [int(item.split(" ")[0]) for item in line.split(": ", 1)[1].split(", ")]


def test_each_row_of_a_batch_gets_its_own_ranking() -> None:
    scores = np.random.default_rng(3).random((3, 10), dtype=np.float32)
    lines = top_k_lines(scores, 4)
    assert [line.split(" top-")[0] for line in lines] == ["row 0", "row 1", "row 2"]
    for row, line in zip(scores, lines, strict=True):
        assert _parsed(line) == list(np.argsort(-row)[:4])
        assert _parsed(line)[0] == int(np.argmax(row))


def test_a_single_row_reads_as_before() -> None:
    lines = top_k_lines(np.array([[0.1, 0.7, 0.2]], dtype=np.float32), 2)
    assert lines == ["top-2: 1 (0.7), 2 (0.2)"]


def test_a_large_batch_shows_its_first_rows_and_says_how_many_more() -> None:
    lines = top_k_lines(np.eye(20, 5, dtype=np.float32), 1)
    assert len(lines) == 9
    assert lines[-1] == "... 12 more rows (-o saves every output)"


def test_outputs_that_are_not_scores_get_no_ranking() -> None:
    assert top_k_lines(np.arange(6, dtype=np.int64).reshape(2, 3), 3) == []
    assert top_k_lines(np.zeros((2, 3, 4), dtype=np.float32), 3) == []
    assert top_k_lines(np.zeros((4, 1), dtype=np.float32), 3) == []
    assert top_k_lines(np.zeros((2, 3), dtype=np.float32), 0) == []
