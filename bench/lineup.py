"""The lineup: every system under test, each adapter with its settings (bench/run.py).

Above the adapters (systems.py, peers.py, pg_peers.py), which import only the interface
in systems.py: a peer's own library is imported inside its adapter, so importing this
costs no peer.
"""

from __future__ import annotations

from peers import Beanstalkd, Honker, Huey, Litequeue, PersistQueue, SqlqBeanstalkd
from pg_peers import Pgqueuer, Procrastinate, RawPg, SqlqPg
from systems import SERVER_PROCESSES, Raw, RawMinimal, Sqlq, SqlqAsync, System


def all_systems(beanstalkd: str | None, beanstalkd_note: str, honker_note: str) -> list[System]:
    """Every system, in the order the tables list them."""
    systems: list[System] = [
        Sqlq("full"),
        Sqlq("normal"),
        SqlqAsync("full"),
        SqlqAsync("normal"),
        Raw("full"),
        Raw("normal"),
        RawMinimal("full"),
        RawMinimal("normal"),
        Beanstalkd("f0", beanstalkd, beanstalkd_note),
        Beanstalkd("f50", beanstalkd, beanstalkd_note),
        Beanstalkd("mem", beanstalkd, beanstalkd_note),
        SqlqBeanstalkd("f0"),
        SqlqBeanstalkd("f50"),
        SqlqBeanstalkd("f0", SERVER_PROCESSES),
        SqlqBeanstalkd("f50", SERVER_PROCESSES),
        Huey("full"),
        Huey("normal"),
        PersistQueue("full"),
        PersistQueue("normal"),
        Litequeue("full"),
        Litequeue("normal"),
        Honker(honker_note),
        SqlqPg(),
        RawPg(),
        Procrastinate(),
        Pgqueuer(),
    ]
    return systems
