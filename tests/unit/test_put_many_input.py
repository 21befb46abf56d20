"""``sqlq put-many``'s input read a chunk at a time (sqlq/cli/options.py ``read_bodies``,
``spool``) and its ids kept as runs (sqlq/cli/output.py ``IdRuns``): the same bodies and
ids as reading it whole, whatever the chunk boundaries."""

from __future__ import annotations

import io

import pytest

import sqlq
from sqlq.cli import options
from sqlq.cli.output import IdRuns


@pytest.mark.face
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_bodies_across_chunk_boundaries_are_the_whole_inputs(
        monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(options, "CHUNK", chunk)
    for data, sep in ((b"a\n\nbb\nccc\n", b"\n"), (b"a\nb\0\0c", b"\0"), (b"", b"\n"),
                      (b"last without end", b"\n")):
        read = list(options.read_bodies(io.BytesIO(data), sep, 100))
        assert [b for bodies, _ in read for b in bodies] == [b for b in data.split(sep) if b]
        assert [n for _, n in read] == sorted(n for _, n in read)
        assert not read or read[-1][1] == len(data)


@pytest.mark.face
def test_a_body_past_the_maximum_is_refused_before_it_is_read_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "CHUNK", 4)
    source = io.BytesIO(b"ok\n" + b"x" * 1000)
    with pytest.raises(sqlq.JobTooBig, match="more than the maximum of 10 bytes"):
        list(options.read_bodies(source, b"\n", 10))
    assert source.tell() < 20


@pytest.mark.face
def test_a_spooled_pipe_is_read_whole_and_rewound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "SPOOLED", 10)  # past it: a temporary file
    spooled, size = options.spool(io.BytesIO(b"1\n2\n" * 100))
    assert size == 400 and spooled.read() == b"1\n2\n" * 100


@pytest.mark.face
def test_ids_kept_as_runs_come_back_in_order() -> None:
    ids = IdRuns()
    for batch in ([1, 2, 3], [4, 5], [9], [10, 12, 13], []):
        ids.extend(batch)
    assert list(ids) == [1, 2, 3, 4, 5, 9, 10, 12, 13] and len(ids) == 9
    assert ids.runs == [[1, 5], [9, 10], [12, 13]]
