"""What a put is: the frozen :class:`Put` every put path builds once with
:func:`describe_put`, and the checks of the options only a put takes (``after``, a unique
key and what a put does on its conflict, a group). An option added to puts is one field
here, one check in describe_put, and its column in ``Store.put``'s statements."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from .core.durations import seconds_to_ms
from .model import (
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    DEFAULT_TTR_MS,
    DEFAULT_TUBE,
    MAX_PRIORITY,
    check_job_id,
    check_priority,
    check_ttr,
    check_tube,
)


def check_put_options(priority: object, delay: object, ttr: object,
                      unique_key: object = None) -> tuple[int, int]:
    """Check what every put takes besides its body and tube (Queue.put and put_many,
    sqlq.put, publish): return (delay_ms, ttr_ms)."""
    # The hot path, one test: every option at its default but perhaps the priority, an
    # int in range (no bool: its class is not int). Anything else takes the checks below.
    if delay.__class__ is int and delay == 0 and ttr.__class__ is float \
            and ttr == DEFAULT_TTR and unique_key is None and priority.__class__ is int \
            and 0 <= priority <= MAX_PRIORITY:
        return 0, DEFAULT_TTR_MS
    check_priority(priority)
    check_unique_key(unique_key)
    return seconds_to_ms(delay, "delay"), check_ttr(ttr)


def check_after(after: object) -> tuple[int, ...]:
    """The parents of a put's ``after=``: one id or an iterable of ids, in order, each
    once (``()`` for None). An id that no job can have raises JobNotFound."""
    if after is None:
        return ()
    if isinstance(after, (str, bytes)):
        raise TypeError(f"after must be a job id or an iterable of ids, not "
                        f"{type(after).__name__}")
    if isinstance(after, int) and not isinstance(after, bool):
        ids: Iterable[object] = (after,)
    else:
        try:
            ids = list(after)  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(f"after must be a job id or an iterable of ids, not "
                            f"{type(after).__name__}") from None
    for i in ids:
        if i.__class__ is not int and (isinstance(i, bool) or not isinstance(i, int)):
            raise TypeError(f"after must hold job ids (int), not {type(i).__name__}")
    return tuple(dict.fromkeys(check_job_id(i) for i in ids))


#: The longest group name (sqlq/groups.py).
MAX_GROUP = 200


def check_group(group: object) -> str | None:
    """A put's group: None, or a non-empty str of at most MAX_GROUP characters."""
    if group is None:
        return None
    if not isinstance(group, str):
        raise TypeError(f"group must be a str or None, not {type(group).__name__}")
    if not 1 <= len(group) <= MAX_GROUP:
        raise ValueError(f"group must be 1 to {MAX_GROUP} characters, not {len(group)}")
    return group


def check_unique_key(key: object) -> str | None:
    if key is None or isinstance(key, str):
        return key
    raise TypeError(f"unique_key must be a str or None, not {type(key).__name__}")


#: ``on_conflict``'s values: what a put does while a live job holds its ``unique_key``.
KEEP, REPLACE = "keep", "replace"


def check_on_conflict(on_conflict: object, unique_key: object, after: object) -> bool:
    """Whether a put replaces the live job holding its key (``on_conflict="replace"``);
    ValueError for any other value than ``"keep"``, and for a replace without a
    ``unique_key`` or with ``after`` (a held job's parents are not changed in place)."""
    if on_conflict == KEEP and on_conflict.__class__ is str:
        return False
    if on_conflict != REPLACE or on_conflict.__class__ is not str:
        raise ValueError(f"on_conflict must be 'keep' or 'replace', not {on_conflict!r}")
    if unique_key is None:
        raise ValueError("on_conflict='replace' must be given a unique_key (the key of the "
                         "job it replaces)")
    if after is not None:
        raise ValueError("after must be None with on_conflict='replace' (a held job's "
                         "parents are not replaced)")
    return True


# -- one put -----------------------------------------------------------------------------------
# ``Queue.put`` and ``put_many``, a Transaction's, ``AsyncQueue``'s, ``sqlq.put(conn)``,
# ``publish``, ``@q.task``'s ``.put`` and the Django and Flask faces describe their put with
# describe_put() and hand it to the one put verb (verbs/contract.py), which gives it to the one
# storage call that inserts it (``Store.put``). An option added to puts is one field of Put,
# one check in describe_put(), and its column in that call's statements.


class Put(NamedTuple):
    """A checked put (the body, or bodies, travel beside it)."""

    #: The tube its jobs go into (a topic's name for a publish).
    tube: str
    priority: int
    delay_ms: int
    ttr_ms: int
    #: While a job with this key is live in the tube, nothing is put: its id is returned.
    unique_key: str | None = None
    #: The jobs its jobs wait for (``after=``), each once, in order.
    parents: tuple[int, ...] = ()
    #: The W3C trace context of the put's span, stored beside each body (tracing.py).
    trace: str | None = None
    #: ``on_conflict="replace"``: the ready, delayed or waiting job holding unique_key is
    #: changed in place (body, priority, delay from now, ttr); a reserved or buried one
    #: passes the key to a new job that waits for it (``Store.replace``).
    replace: bool = False
    #: The group its jobs belong to: claims take a tube's groups in turn (groups.py).
    group: str | None = None


#: The checked Puts of plain puts (a tube and a priority, every other option at its
#: default): a worker or producer puts to the same few tubes again and again.
_PLAIN: dict[tuple[str, int], Put] = {}


def describe_put(tube: object = DEFAULT_TUBE, priority: object = DEFAULT_PRIORITY,
                 delay: object = 0, ttr: object = DEFAULT_TTR, unique_key: object = None,
                 after: object = None, on_conflict: object = KEEP, group: object = None, *,
                 name: str = "tube") -> Put:
    """The put these options describe, each checked (TypeError, ValueError, InvalidTube
    naming the argument; JobNotFound for an ``after`` id no job can have). ``name``: what
    the tube is called in messages (``"topic"`` for a publish); ``group``: the jobs' group."""
    if group is not None:
        checked_group = check_group(group)
        return describe_put(tube, priority, delay, ttr, unique_key, after, on_conflict,
                            name=name)._replace(group=checked_group)
    if delay.__class__ is int and delay == 0 and ttr.__class__ is float and ttr == DEFAULT_TTR \
            and unique_key is None and after is None and priority.__class__ is int \
            and tube.__class__ is str and 0 <= priority <= MAX_PRIORITY \
            and on_conflict is KEEP:
        key = (tube, priority)
        plain = _PLAIN.get(key)
        if plain is not None:
            return plain
        check_tube(tube, name)
        plain = Put(tube, priority, 0, DEFAULT_TTR_MS)
        if len(_PLAIN) < 1024:
            _PLAIN[key] = plain
        return plain
    checked = check_tube(tube, name)
    delay_ms, ttr_ms = check_put_options(priority, delay, ttr, unique_key)
    replace = check_on_conflict(on_conflict, unique_key, after)
    return Put(checked, priority, delay_ms, ttr_ms, unique_key,  # type: ignore[arg-type]
               check_after(after), replace=replace)
