"""``sqlq serve`` and ``sqlq-beanstalkd``: the beanstalkd protocol over a Queue.

One thread runs one ``selectors`` loop, the shape of beanstalkd itself (and with
``--processes N``, N such processes share the port: ``processes.py``):

========================  ===============================================================
``main.py``               ``serve()`` and the ``sqlq-beanstalkd`` entry point (flags)
``running.py``            one server process's life: signals, log level, serving while it opens
``processes.py``          ``--processes N``: N server processes on one port, and their parent
``core.py``               ``Server``: the Queue, listeners, connections, their lifecycle
``connection.py``         ``Conn``: one client's buffers and protocol state, backpressure
``commands.py``           the verbs: a parsed command line → a Queue call → reply bytes
``waiters.py``            reserves of a round claimed together; blocking ones: waiters, timers
``batch.py``              group commit: a round's writes in one transaction, replies after it
``locks.py``              commands waiting for another process's write lock, retried in order
``budget.py``             the cap on memory all connections' put bodies hold at once
``stats.py``              the in-memory counters and the stats documents
``loop.py``               the selector and the timer heap
``net.py``                binding ``--listen`` addresses
``protocol.py``           the wire format, no I/O: command lines in, reply bytes out
``yaml.py``               the stats documents' key order and the YAML beanstalkd writes
``flags.py``              ``sqlq-beanstalkd``'s command line, parsed as beanstalkd does
========================  ===============================================================

The last three are pure functions and constants, tested byte by byte and fuzzed
without a socket. SQLite statements take well under a millisecond, so they run
inline on the loop; a write waits at most 20 ms for another process's lock,
then waits its turn off the loop (``locks.py``), so reads and other clients go on.

Why not asyncio: a drop-in beanstalkd must answer soon after exec (clients,
and greenstalk's test suite, connect 100 ms after starting it, and time
replies to 50 ms), and importing asyncio costs 20-50 ms on a small machine.
A selector loop costs nothing to import, and an idle connection is one object
with two byte buffers. Nothing here imports the Queue before the server listens.
"""

from __future__ import annotations

from sqlq.server.core import Server
from sqlq.server.main import beanstalkd_main, serve
from sqlq.server.net import DEFAULT_LISTEN, address_of, bind

__all__ = ["DEFAULT_LISTEN", "Server", "address_of", "beanstalkd_main", "bind", "serve"]
