"""One PostgreSQL database per test process and template, reset between tests.

Cloning the migrated template for every test (``CREATE DATABASE … TEMPLATE``, then
``DROP DATABASE``) costs 70–170 ms on an idle machine, 460 ms under a load of 13;
resetting a kept database ~17 ms, 110 ms. :class:`SharedDatabase` is that kept
database, and ``pg_url``/``pg_ascii_url`` (``conftest.py``) hand it to every test not
marked ``pg_fresh``. After each test it is made to look as a fresh clone would:

* every other session on it is terminated (the test's queues, the threads and
  processes it left): advisory locks, LISTEN channels and open transactions go with them;
* the activity counters (PostgreSQL 15 and later) say, without reading a table, whether
  the catalogs of its definitions were written to and which tables were; where the
  catalogs were written (or on an older server), its definitions are compared whole
  with the template's (:data:`FINGERPRINT`: schema, functions, ``ALTER DATABASE …
  SET``...). If they differ, it is dropped and cloned again, and the test is named in
  the run's summary: it should be marked ``pg_fresh``;
* otherwise every table a row was written to (by the counters; or its file is not
  empty, or it holds other rows than the template's) is emptied in one ``TRUNCATE``,
  the template's rows (the migration stamps) are put back, every sequence is set back,
  the planner's statistics and the activity counters are cleared;
* and it is renamed, so each test gets a database name of its own, as a clone had: a
  process a test leaked cannot reconnect into the next test's database.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from typing import Any

import psycopg
from psycopg import sql

from .pgserver import PgServer

#: Everything a test may change in a database besides its rows and sequence values,
#: one line per definition: tables, columns and their defaults, constraints,
#: indexes, functions, triggers, views, rules, schemas, types, sequences' definitions,
#: extensions, policies, publications, the database's own settings and properties, and
#: prepared transactions (which outlive sessions).
FINGERPRINT = """
WITH ns AS (
  SELECT oid, nspname FROM pg_namespace
  WHERE nspname NOT IN ('pg_catalog', 'information_schema')
    AND nspname NOT LIKE 'pg\\_toast%' AND nspname NOT LIKE 'pg\\_temp\\_%'
), rel AS (
  SELECT c.* FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
)
SELECT string_agg(d, E'\\n' ORDER BY d) FROM (
  SELECT 'ns ' || nspname || ' ' || nspowner || coalesce(nspacl::text, '')
    FROM pg_namespace WHERE oid IN (SELECT oid FROM ns)
  UNION ALL SELECT concat_ws(' ', 'rel', relnamespace::regnamespace, relname, relkind,
                             relowner, relacl, reloptions, relpersistence, relrowsecurity,
                             relreplident, CASE WHEN relkind IN ('v', 'm')
                                                THEN pg_get_viewdef(oid) END)
    FROM rel
  UNION ALL SELECT concat_ws(' ', 'col', a.attrelid::regclass, a.attnum, a.attname,
                             format_type(a.atttypid, a.atttypmod), a.attnotnull,
                             a.attidentity, a.attgenerated, a.attcollation,
                             pg_get_expr(ad.adbin, ad.adrelid), a.attacl, a.attstattarget)
    FROM pg_attribute a
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    WHERE a.attrelid IN (SELECT oid FROM rel) AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL SELECT concat_ws(' ', 'con', conrelid::regclass, contypid, conname,
                             pg_get_constraintdef(oid))
    FROM pg_constraint WHERE connamespace IN (SELECT oid FROM ns)
  UNION ALL SELECT 'idx ' || pg_get_indexdef(indexrelid)
    FROM pg_index WHERE indrelid IN (SELECT oid FROM rel)
  UNION ALL SELECT concat_ws(' ', 'fn', p.oid::regprocedure, p.prokind, p.prorettype,
                             p.provolatile, p.prosecdef, p.proconfig, p.proacl,
                             p.proowner, md5(p.prosrc))
    FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM ns)
  UNION ALL SELECT concat_ws(' ', 'trg', tgenabled, pg_get_triggerdef(oid))
    FROM pg_trigger WHERE NOT tgisinternal
  UNION ALL SELECT 'rule ' || pg_get_ruledef(oid)
    FROM pg_rewrite WHERE rulename <> '_RETURN' AND ev_class IN (SELECT oid FROM rel)
  UNION ALL SELECT concat_ws(' ', 'type', t.oid::regtype, t.typtype, t.typowner,
                             (SELECT string_agg(enumlabel, ',' ORDER BY enumsortorder)
                              FROM pg_enum WHERE enumtypid = t.oid))
    FROM pg_type t WHERE t.typnamespace IN (SELECT oid FROM ns) AND t.typrelid = 0
      AND t.typelem = 0
  UNION ALL SELECT concat_ws(' ', 'seq', seqrelid::regclass, seqtypid, seqstart,
                             seqincrement, seqmax, seqmin, seqcache, seqcycle)
    FROM pg_sequence
  UNION ALL SELECT 'ext ' || extname || ' ' || extversion FROM pg_extension
  UNION ALL SELECT 'pol ' || polrelid::regclass || ' ' || polname FROM pg_policy
  UNION ALL SELECT 'stx ' || stxname FROM pg_statistic_ext
  UNION ALL SELECT concat_ws(' ', 'evt', evtname, evtenabled) FROM pg_event_trigger
  UNION ALL SELECT 'pub ' || pubname FROM pg_publication
  UNION ALL SELECT 'set ' || array_to_string(setconfig, ',') || ' ' || setrole
    FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL SELECT concat_ws(' ', 'db', datconnlimit, datallowconn, datistemplate, datacl)
    FROM pg_database WHERE datname = current_database()
  UNION ALL SELECT 'xact ' || gid FROM pg_prepared_xacts
    WHERE database = current_database()
) s(d)
"""

#: The catalogs of the database's own definitions (those :data:`FINGERPRINT` reads; the
#: shared ones, pg_database and pg_db_role_setting, are compared by :data:`SHARED` instead).
CATALOGS = ("pg_class", "pg_attribute", "pg_attrdef", "pg_constraint", "pg_index", "pg_proc",
            "pg_trigger", "pg_rewrite", "pg_type", "pg_namespace", "pg_sequence",
            "pg_extension", "pg_policy", "pg_statistic_ext", "pg_event_trigger",
            "pg_publication", "pg_enum")
#: What a test may change of the database in the shared catalogs (where every other
#: process's renames write too), and its prepared transactions.
SHARED = """concat_ws(':',
  (SELECT concat_ws(':', oid, datconnlimit, datallowconn, datistemplate, datacl)
   FROM pg_database WHERE datname = current_database()),
  (SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
   WHERE d.datname = current_database()),
  (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()))"""
#: A relation's rows written (inserted, updated or deleted, in transactions committed or
#: not) since the last ``pg_stat_reset()``: from PostgreSQL 15 the counters live in
#: shared memory, and a session adds its own there before it leaves pg_stat_activity.
#: A crash (of the server or of one backend) or an immediate shutdown discards them, and
#: not the rows committed before it: then the reset does not trust them (:data:`KEPT`).
WRITES = ("pg_stat_get_tuples_inserted({0}) + pg_stat_get_tuples_updated({0})"
          " + pg_stat_get_tuples_deleted({0})")
#: The first server whose counters a reset can trust (above); an older one's reach the
#: collector by UDP, some time after.
COUNTERS_SINCE = 150000
#: Whether the database's counters are those the last reset cleared: its clearing time,
#: which each reset's ``pg_stat_reset()`` sets, is gone with them.
KEPT = ("(SELECT pg_stat_get_db_stat_reset_time(oid) FROM pg_database"
        " WHERE datname = current_database()) IS NOT NULL")

_TABLES = """
SELECT c.oid, c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' ORDER BY 2
"""
#: How long a reset waits for a terminated session to end.
PATIENCE_S = 30.0


class SharedDatabase:
    """A database cloned once from ``template`` and reset after each test.

    Args:
        server: the running server.
        template: the template database to clone.
        label: part of the database's name (``w_<worker>_<label>_<n>``).
    """

    _counter = itertools.count(1)

    def __init__(self, server: PgServer, template: str, label: str) -> None:
        self.server = server
        self.template = template
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main").lower()
        self.prefix = f"w_{worker}_{label}_"
        self.name: str | None = None
        self._fingerprint = ""
        self._shared = ""
        self._quick: sql.Composable | None = None  # None: no counters to trust
        self._tables: dict[int, str] = {}  # oid: name, of every table
        self._check = sql.SQL("")
        self._dirty_now: list[str] = []
        self._seeds: dict[str, sql.Composable] = {}
        self._restore = sql.SQL("")
        self._admin_conn: psycopg.Connection[Any] | None = None
        #: milliseconds the last reset took (or the clone that replaced it)
        self.last_reset_ms = 0.0
        #: resets that compared the definitions whole (the catalogs were written to)
        self.compared_whole = 0

    @property
    def url(self) -> str:
        """The database's URL for the next test (cloned on first use)."""
        if self.name is None:
            self._clone()
        assert self.name is not None
        return self.server.url_for(self.name)

    def reset(self) -> str | None:
        """Make the database as fresh as a clone, after a test, under a new name.

        Returns:
            None, or why it was cloned again instead (the test changed what a reset
            does not put back, or the reset failed).
        """
        if self.name is None:
            return None
        started = time.perf_counter()
        if not self.server.running:
            self.server.start()
        why: str | None = None
        try:
            self._rename()  # first: nothing the test left can reach it any more
            with _connect(self.server.url_for(self.name)) as conn:
                why = self._changed(conn)
                if why is None:
                    self._empty(conn)
        except psycopg.Error as exc:
            why = f"the reset failed: {str(exc).strip().splitlines()[0]}"
        if why is not None:
            self.drop()
            self._clone()
        self.last_reset_ms = (time.perf_counter() - started) * 1000
        return why

    def drop(self) -> None:
        """Drop the database (FORCE: cutting whoever is still connected)."""
        if self.name is not None:
            if not self.server.running:
                self.server.start()
            self.server.drop_database(self.name)
            self.name = None

    def close(self) -> None:
        """Drop the database and close this process's admin session (end of session)."""
        with contextlib.suppress(Exception):
            self.drop()
        if self._admin_conn is not None:
            self._admin_conn.close()
            self._admin_conn = None

    # -------------------------------------------------------------- internals

    def _changed(self, conn: psycopg.Connection[Any]) -> str | None:
        """Why the database can no longer be reset (its definitions changed), or None;
        finds which tables were written to on the way.

        The activity counters answer in one round trip, reading no table: nothing written
        to the catalogs of definitions, the database's row and settings as they were, and
        the tables whose rows were written to. Where the catalogs were written (a test's
        DDL, a temporary table), the counters were discarded since (:data:`WRITES`) or
        on a server older than 15, the definitions are compared whole, and each table's
        file and rows with the template's."""
        if self._quick is not None:
            row = conn.execute(self._quick).fetchone()
            assert row is not None
            if row[0] == 0 and row[1] == self._shared and row[3]:
                self._dirty_now = [self._tables[oid] for oid in row[2]]
                return None
        self.compared_whole += 1
        now = _value(conn, FINGERPRINT)
        if now != self._fingerprint:
            before, after = set(self._fingerprint.splitlines()), set(now.splitlines())
            diff = ([f"-{d}" for d in sorted(before - after)]
                    + [f"+{d}" for d in sorted(after - before)])
            return "its definitions differ from the template's: " + "; ".join(diff[:3])[:300]
        row = conn.execute(self._check).fetchone()
        assert row is not None
        self._dirty_now = [str(t) for t in row[0]]
        return None  # catalogs were written, to the same effect (a temporary table...)

    def _empty(self, conn: psycopg.Connection[Any]) -> None:
        """Empty each table that was written to and put the template's rows back; then set
        the sequences back and clear what ANALYZE learnt and the activity counters.

        Two round trips where one would do the work: the counters of the first's writes
        (the TRUNCATE's new files in pg_class, the template's rows) reach shared memory
        only once the session is idle, flushed then as asked, and must be cleared with
        the test's."""
        if self._dirty_now:
            parts: list[sql.Composable] = [sql.SQL("BEGIN"), sql.SQL("TRUNCATE {}").format(
                sql.SQL(", ").join(sql.SQL(t) for t in self._dirty_now))]
            parts.extend(self._seeds[t] for t in self._dirty_now if t in self._seeds)
            parts.append(sql.SQL("COMMIT"))
            if self._quick is not None:
                parts.append(sql.SQL("SELECT pg_stat_force_next_flush()"))
            _run(conn, sql.SQL("; ").join(parts))
        _run(conn, self._restore)

    def _next_name(self) -> str:
        return f"{self.prefix}{next(SharedDatabase._counter)}"

    def _clone(self) -> None:
        name = self._next_name()
        url = self.server.create_database(name, self.template)
        self.name = name
        with _connect(url) as conn:
            self._fingerprint = _value(conn, FINGERPRINT)
            self._shared = _value(conn, "SELECT " + SHARED)
            self._read_template(conn)

    def _read_template(self, conn: psycopg.Connection[Any]) -> None:
        """From a fresh clone: which tables a test wrote to (by the counters; or a file no
        longer empty, or other rows than the template's), the statements that put the
        template's rows back, and those that set sequences, statistics and counters back."""
        self._tables = {int(r[0]): str(r[1]) for r in conn.execute(_TABLES.encode())}
        tables = list(self._tables.values())
        checks: list[sql.Composable] = []
        self._seeds = {}
        for table in tables:
            ident = sql.SQL(table)  # regclass text: quoted where it must be
            rows = [str(r[0]) for r in conn.execute(
                sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(ident))]
            if rows:
                self._seeds[table] = sql.SQL(
                    "INSERT INTO {0} OVERRIDING SYSTEM VALUE"
                    " SELECT (r::{0}).* FROM unnest({1}::text[]) AS r").format(
                    ident, sql.Literal(rows))
                same = sql.SQL("(SELECT array_agg(t::text ORDER BY t::text) FROM {} AS t)"
                               " = {}::text[]").format(ident, sql.Literal(rows))
            else:
                same = sql.SQL("pg_relation_size({}) = 0").format(sql.Literal(table))
            checks.append(sql.SQL("SELECT {} WHERE NOT {}").format(sql.Literal(table), same))
        dirty = (sql.SQL(" UNION ALL ").join(checks) if checks
                 else sql.SQL("SELECT '' WHERE false"))
        self._check = sql.SQL("SELECT ARRAY({})").format(dirty)
        self._quick = None
        if conn.info.server_version >= COUNTERS_SINCE:
            catalogs = sql.SQL(", ").join(sql.Literal(c) for c in CATALOGS)
            self._quick = sql.SQL(
                "SELECT (SELECT sum({0}) FROM unnest(ARRAY[{1}]::regclass[]::oid[]) AS c),"
                " {2}, ARRAY(SELECT c FROM unnest({3}::oid[]) AS c WHERE {0} > 0), {4}").format(
                sql.SQL(WRITES.format("c")), catalogs, sql.SQL(SHARED),
                sql.Literal(list(self._tables)), sql.SQL(KEPT))
            conn.execute("SELECT pg_stat_reset()")  # a clone's are new: KEPT from here
        restore: list[sql.Composable] = [
            sql.SQL("SELECT setval({}, {}, {})").format(
                sql.Literal(seq), sql.Literal(last), sql.Literal(called))
            for seq, last, called in conn.execute(
                "SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename),"
                " coalesce(last_value, start_value), last_value IS NOT NULL FROM pg_sequences")]
        if tables:
            # TRUNCATE keeps what ANALYZE learnt; a clone has none of it
            restore.append(sql.SQL("DELETE FROM pg_statistic WHERE starelid = ANY({}::regclass[])"
                                   ).format(sql.Literal(tables)))
        restore.append(sql.SQL("SELECT pg_stat_reset()"))
        self._restore = sql.SQL("; ").join(restore)

    def _admin(self, query: sql.Composable) -> psycopg.Cursor[Any]:
        """Run a statement on the server's ``postgres`` database through a session this
        process keeps (remade after a restart cut it)."""
        for attempt in (1, 2):
            if self._admin_conn is None or self._admin_conn.closed:
                self._admin_conn = _connect(self.server.url)
            try:
                return self._admin_conn.execute(query)
            except psycopg.OperationalError:
                if not self._admin_conn.broken or attempt == 2:
                    raise  # the statement failed, not the session
                self._admin_conn = None
        raise AssertionError("unreachable")

    def _rename(self) -> None:
        """Cut every session on the database, wait for them to end, and rename it: each
        test gets a name of its own, and a straggler that reconnects finds no database."""
        assert self.name is not None
        old, new = self.name, self._next_name()
        on_it = sql.SQL("FROM pg_stat_activity WHERE datname = {}").format(sql.Literal(old))
        cut = sql.SQL("SELECT count(pg_terminate_backend(pid)) {}").format(on_it)
        for attempt in range(5):
            # Cut again at each look: behind PgBouncer (SQLQ_TEST_PG_POOL) a client still
            # open makes the pool open a new server session as soon as the last one ends.
            _wait_until(lambda: self._admin(cut).fetchone() == (0,),
                        f"the sessions on {old} to end")
            try:
                self._admin(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                    sql.Identifier(old), sql.Identifier(new)))
                self.name = new
                return
            except psycopg.errors.ObjectInUse:
                if attempt == 4:
                    raise  # a straggler reconnected meanwhile: cut it again


def _connect(url: str) -> psycopg.Connection[Any]:
    # UTF8 on the SQL_ASCII databases too: names and rows as str, not bytes
    return psycopg.connect(url, autocommit=True, client_encoding="UTF8")


def _run(conn: psycopg.Connection[Any], statements: sql.Composable) -> None:
    """Run statements joined by ``;`` in one round trip, to the end of the last."""
    cursor = conn.execute(statements)
    while cursor.nextset():
        pass


def _value(conn: psycopg.Connection[Any], query: str) -> str:
    row = conn.execute(query.encode()).fetchone()
    return str(row[0]) if row else ""


def _wait_until(done: Any, what: str) -> None:
    """Poll ``done()`` every millisecond or two (sessions end within a few)."""
    deadline = time.monotonic() + PATIENCE_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {PATIENCE_S:.0f} s for {what}")
        time.sleep(0.002)
