"""The progress bar of long commands (sqlq/cli/progress.py), drawn into a string with a
fake clock: at most ten drawings a second, one write each, a final line, nothing when
not shown. The commands under a real terminal: tests/integration/test_progress_bar.py."""

from __future__ import annotations

import io

import pytest

from sqlq.cli.progress import Bar, clock_text, megabytes
from tests.timing import FakeClock


class Stream(io.StringIO):
    """A stderr that counts its writes."""

    encoding = "utf-8"

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def _bar(stream: Stream, clock: FakeClock, **kw: object) -> Bar:
    return Bar("copying", "jobs", shown=True, done="copied", stream=stream,
               clock=lambda: clock.now / 1000, **kw)  # type: ignore[arg-type]


@pytest.mark.face
def test_a_bar_redraws_at_most_ten_times_a_second_and_ends_with_a_line() -> None:
    stream, clock = Stream(), FakeClock()
    with _bar(stream, clock) as bar:
        for i in range(1, 1001):  # 1000 steps over 2 s: a step every 2 ms
            clock.advance(0.002)
            bar(i * 10, i / 1000)
    lines = stream.getvalue().split("\r")[1:]
    assert stream.writes == len(lines) <= 1 + 2 * 10 + 1  # the first, ten a second, the last
    assert all(line.endswith("\x1b[K") for line in lines[:-1])
    assert lines[-1].endswith("\x1b[K\n")
    final = lines[-1].removesuffix("\x1b[K\n")
    assert final.startswith("copied ")
    assert "█" * 10 in final and "100%" in final
    assert "10,000 jobs" in final and "5,000 jobs/s" in final and "in 0:02" in final
    middle = lines[len(lines) // 2]
    assert "ETA 0:01" in middle and "░" in middle


@pytest.mark.face
def test_without_a_known_whole_a_bar_shows_count_rate_and_time() -> None:
    stream, clock = Stream(), FakeClock()
    with _bar(stream, clock) as bar:
        clock.advance(3)
        bar(300)
    final = stream.getvalue().split("\r")[-1]
    assert "%" not in final and "█" not in final
    assert "300 jobs  100 jobs/s  in 0:03" in final


@pytest.mark.face
def test_a_bar_not_shown_writes_nothing() -> None:
    stream = Stream()
    with Bar("copying", "jobs", shown=False, stream=stream) as bar:
        bar(5, 0.5)
    assert stream.getvalue() == "" and bar.count == 5


@pytest.mark.face
def test_an_error_leaves_the_line_as_it_stood_or_erases_an_empty_one() -> None:
    stream, clock = Stream(), FakeClock()
    with pytest.raises(RuntimeError), _bar(stream, clock) as bar:
        clock.advance(1)
        bar(500, 0.5)
        raise RuntimeError("lost")
    last = stream.getvalue().split("\r")[-1]
    assert last.startswith("copying ") and "500 jobs" in last and last.endswith("\n")
    assert "100%" not in last
    stream = Stream()
    with pytest.raises(RuntimeError), _bar(stream, clock):
        raise RuntimeError("refused at once")
    assert stream.getvalue().endswith("\r\x1b[K")  # the error's line is its own


@pytest.mark.face
def test_a_bar_fits_the_terminal_and_falls_back_to_ascii(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    stream, clock = Stream(), FakeClock()
    stream.encoding = "ascii"
    with _bar(stream, clock) as bar:
        clock.advance(1)
        bar(123_456_789, 0.25)
    for line in stream.getvalue().replace("\x1b[K", "").strip().split("\r"):
        assert len(line) < 60, line
    assert "#" in stream.getvalue() and "█" not in stream.getvalue()


@pytest.mark.face
def test_times_and_sizes_read_as_people_write_them() -> None:
    assert [clock_text(s) for s in (0, 59.6, 61, 3600, 3725)] == [
        "0:00", "1:00", "1:01", "1:00:00", "1:02:05"]
    assert megabytes(150_536_192) == "150.5"
