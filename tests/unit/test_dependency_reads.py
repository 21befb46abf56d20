"""Job dependencies as the readers see them (issue 24): ``Queue.links``, ``stats_job``'s
``waiting-on``, and the waiting state in the dashboard's views (``overview``,
``tube_summary``, ``job_page``), on both backends."""

from __future__ import annotations

import pytest

import sqlq
from sqlq.backends.store.views import LIST_STATES

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def test_links_name_parents_still_waited_for_and_children(q: sqlq.Queue) -> None:
    a, b = q.put(b"a"), q.put(b"b")
    c = q.put(b"c", after=[b, a])
    d = q.put(b"d", after=a)
    assert q.links(c) == sqlq.Links(parents=[a, b], children=[])
    assert q.links(a) == sqlq.Links(parents=[], children=[c, d])
    assert q.links(b).children == [c]
    assert q.links(d).parents == [a]
    q.delete(a)  # a parent gone drops out of its children's parents
    assert q.links(c) == sqlq.Links([b], [])
    assert q.links(d) == sqlq.Links([], [])
    assert q.links(b) == sqlq.Links([], [c])
    q.delete(b)
    assert q.links(c) == sqlq.Links([], [])


def test_links_of_a_plain_job_are_empty_and_of_a_missing_one_raise(q: sqlq.Queue) -> None:
    plain = q.put(b"x")
    assert q.links(plain) == sqlq.Links([], [])
    assert isinstance(q.links(plain), tuple)
    q.delete(plain)
    with pytest.raises(sqlq.JobNotFound):
        q.links(plain)
    with pytest.raises(sqlq.JobNotFound):
        q.links(999)


def test_a_deleted_waiting_child_leaves_its_parents_children(q: sqlq.Queue) -> None:
    a = q.put(b"a")
    c1, c2 = q.put_many([b"1", b"2"], after=a)
    q.delete(c1)
    assert q.links(a).children == [c2]


def test_stats_job_counts_the_parents_still_waited_for(q: sqlq.Queue) -> None:
    a, b = q.put(b"a"), q.put(b"b")
    c = q.put(b"c", after=[a, b])
    assert q.stats_job(c)["waiting-on"] == 2
    assert q.stats_job(c)["state"] == "waiting"
    assert q.stats_job(a)["waiting-on"] == 0
    q.delete(a)
    assert q.stats_job(c)["waiting-on"] == 1
    q.delete(b)
    assert q.stats_job(c)["waiting-on"] == 0
    assert q.stats_job(c)["state"] == "ready"
    assert {"failures", "last-error", "reserves", "kicks"} <= set(q.stats_job(c))


def test_summaries_count_waiting_jobs_per_tube(q: sqlq.Queue) -> None:
    a = q.put(b"a", tube="parents")
    q.put_many([b"1", b"2"], tube="kids", after=a)
    q.put(b"3", tube="other", after=a)
    q.put(b"plain", tube="kids")
    kids = q.views.tube_summary("kids")
    assert (kids.waiting, kids.ready, kids.live) == (2, 1, 3)
    assert q.views.tube_summary("parents").waiting == 0
    view = q.views.overview()
    by_name = {t.name: t for t in view.tubes}
    assert by_name["kids"].waiting == 2 and by_name["other"].waiting == 1
    assert view.live == 5 and view.deletes_total == 0  # waiting jobs are live, not done
    q.delete(a)
    assert q.views.tube_summary("kids").waiting == 0 and q.views.tube_summary("kids").ready == 3


def test_a_tube_holding_only_waiting_jobs_is_in_the_overview(q: sqlq.Queue) -> None:
    a = q.put(b"a")
    q.put(b"w", tube="only-waiting", after=a)
    names = [t.name for t in q.views.overview().tubes]
    assert "only-waiting" in names


def test_job_page_lists_waiting_jobs_by_id_in_pages(q: sqlq.Queue) -> None:
    assert "waiting" in LIST_STATES
    a = q.put(b"a")
    ids = q.put_many([str(i).encode() for i in range(5)], tube="w", after=a)
    q.put(b"not waiting", tube="w")
    q.put(b"other tube", tube="x", after=a)
    first = q.job_page("w", "waiting", limit=3)
    assert [j.id for j in first] == ids[:3]
    assert all(j.state == "waiting" for j in first)
    rest = q.job_page("w", "waiting", after=first[-1].cursor, limit=3)
    assert [j.id for j in rest] == ids[3:]
    q.delete(a)
    assert q.job_page("w", "waiting") == []
