"""SQLite's DueCache rule: every verb that writes a due time tells the cache.

``sqlite/store.py`` skips ``promote_due`` while :class:`DueCache` proves nothing can be
due; a write on the same connection that makes a job due earlier must lower the cached
time (``due.lower``) or clear it (``due.forget``), or the next claim here misses that
job until another connection commits. The rule is written in that module's docstring;
this test finds every statement of ``sqlite/queries.sql`` that writes ``delay_until`` or
``reserved_until`` and checks the store method that runs it makes the call. A new such
statement fails here until it is classified: in LOWERS (its verb must call the cache)
or in NEEDS_NOTHING with the reason.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType

from sqlq.backends import store as shared_store
from sqlq.backends.sqlite import store as sqlite_store

QUERIES = sqlite_store.Q
#: Statements that may make a job due earlier than anything cached: their verb calls
#: ``self.due.lower``/``forget`` (directly or through ``_claimed``).
LOWERS = {"insert_job", "insert_job_at", "insert_jobs_at", "claim_job", "claim_job_in_tube",
          "claim_picked_job", "claim_picked_range", "claim_picked_jobs", "claim_job_by_id",
          "claim_jobs", "claim_jobs_in_tube", "release_job",
          "import_job", "release_children", "postpone_job", "replace_job", "upsert_unique_job",
          "claim_ready_job", "claim_fair_head"}
#: Statements that write those columns but never make a job due earlier, and why.
NEEDS_NOTHING = {
    "insert_ready_job": "a job ready now: delay_until is NULL",
    "promote_due": "makes due jobs ready, clearing the times it acted on",
    "bury_job": "a buried job has no due time",
    "touch_job": "moves a reservation's end later: a cached time stays early enough",
    "kick_delayed": "delayed to ready: clears delay_until",
    "kick_job": "delayed or buried to ready: clears delay_until",
    "release_owner": "reserved to ready: clears reserved_until",
    "insert_waiting_job": "a waiting job has no due time (release_children writes it)",
    "set_progress": "writes the progress columns only (its WHERE reads reserved_until)",
    "delete_job": "inserts a finished record (reads reserved_until); the job is deleted next",
    "delete_leased_job": "inserts a finished record; delete_ended_job deletes the job next",
    "delete_leased_jobs": "inserts finished records; delete_ended_jobs deletes the jobs next",
}
CACHE_CALLS = ("self.due.lower(", "self.due.forget(", "self._claimed(")


def _writes_due_time(sql: str) -> bool:
    code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return (re.search(r"\b(INSERT|UPDATE)\b", code) is not None
            and re.search(r"\b(delay_until|reserved_until)\b", code) is not None)


def _methods_using(module: ModuleType, prefix: str) -> dict[str, tuple[set[str], str]]:
    """method name -> (query names it reads, its source), for the classes of a module whose
    names start with ``prefix`` (a dialect's nouns, or every shared one's):
    ``Q["name"]``, ``self.Q[f"name_{kind}"]`` and module constants bound to ``Q["name"]``."""
    source = inspect.getsource(module)
    tree = ast.parse(source)
    constants: dict[str, str] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript)
                and isinstance(node.value.slice, ast.Constant)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = str(node.value.slice.value)
    found: dict[str, tuple[set[str], str]] = {}
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.startswith(prefix)]
    for fn in (fn for cls in classes for fn in cls.body):
        if not isinstance(fn, ast.FunctionDef):
            continue
        names: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                names.add(str(node.slice.value))
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.JoinedStr):
                # Q[f"import_{kind}"]: every query the f-string can name.
                pattern = "".join(re.escape(str(part.value)) if isinstance(part, ast.Constant)
                                  else r"\w+" for part in node.slice.values)
                names.update(q for q in QUERIES if re.fullmatch(pattern, q))
            elif isinstance(node, ast.Name) and node.id in constants:
                names.add(constants[node.id])
        found[fn.name] = (names, ast.get_source_segment(source, fn) or "")
    return found


def test_every_due_time_write_is_classified() -> None:
    writers = {name for name, sql in QUERIES.items() if _writes_due_time(sql)}
    assert writers, "the pattern no longer finds the statements it is for"
    unclassified = writers - LOWERS - set(NEEDS_NOTHING)
    assert not unclassified, (
        f"{sorted(unclassified)} write delay_until or reserved_until: put each in LOWERS "
        "(and call self.due.lower()/forget() in its SQLite noun's verb) or in NEEDS_NOTHING "
        "with the reason (sqlite/store.py's docstring states the rule)")
    assert (LOWERS | set(NEEDS_NOTHING)) <= set(QUERIES), "a listed query no longer exists"


def test_each_lowering_verb_calls_the_cache() -> None:
    sqlite_methods = _methods_using(sqlite_store, "SQLite")
    shared_methods: dict[str, tuple[set[str], str]] = {}
    for info in pkgutil.iter_modules(shared_store.__path__):
        module = importlib.import_module(f"{shared_store.__name__}.{info.name}")
        shared_methods.update(_methods_using(module, ""))
    assert "self.due.lower(" in sqlite_methods["_claimed"][1]
    for query in sorted(LOWERS):
        users = [m for m, (names, _) in sqlite_methods.items() if query in names]
        inherited = [m for m, (names, _) in shared_methods.items()
                     if query in names and m not in users]
        assert users or inherited, f"no store method runs {query}"
        for method in users + inherited:
            assert method in sqlite_methods, (
                f"Store.{method} runs {query}, which can make a job due earlier: "
                "its SQLite noun must override it and call self.due.lower()")
            body = sqlite_methods[method][1]
            assert any(call in body for call in CACHE_CALLS), (
                f"SQLite's {method} runs {query} without telling the DueCache "
                "(self.due.lower()/forget())")


def test_the_rule_is_where_verb_authors_read() -> None:
    doc = Path(sqlite_store.__file__).read_text()
    assert "The rule for a verb that writes a due time" in doc
