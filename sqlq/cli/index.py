"""Which module of ``sqlq.cli`` defines each command, and its one-line summary.

``sqlq put`` imports ``jobs.py`` only, and ``sqlq --help`` lists every command from
here without importing any (:class:`sqlq.cli.group.LazyGroup`): a shell loop of puts
pays for what a put uses. Each summary is the command's
``get_short_help_str(limit=10**6)`` (the first sentence of its docstring);
tests/unit/test_lazy_loading.py fails, printing the right table, when one drifts.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "backup": ("backup",
        "Write a consistent copy of the queue to the new SQLite file DEST while producers"
        " and workers go on: every job committed before the command started is in it."),
    "bury": ("jobs", "Bury a reserved job: park it until someone kicks it."),
    "cancel": ("control", "Cancel a job: it will not run (again)."),
    "copy": ("admin",
        "Copy every live job and all queue state from SOURCE to TARGET (a file or a "
        "postgresql:// URL): states, priorities, delays, counters, unique keys, pauses, "
        "results, subscriptions, periodic slots, and the id counter."),
    "dashboard": ("serve", "Serve a web dashboard of the queue, with /metrics for Prometheus."),
    "delete": ("jobs", "Delete a job by id, in any state (exit 3 if there is none)."),
    "kick": ("jobs", "Kick up to BOUND buried jobs to ready (if none, delayed ones)."),
    "kick-job": ("jobs", "Kick one buried or delayed job by id to ready."),
    "limit": ("limits",
        "Set, remove or show a tube's concurrency cap and rate, and its groups'; with no "
        "TUBE, list them all."),
    "maintain": ("admin",
        "Housekeeping, and what holds it back: prune what retention lets go, then on a "
        "file, checkpoint the WAL and check the file; on PostgreSQL, vacuum the jobs "
        "table and report dead rows and the "
        "oldest snapshot holding the database's horizon (a transaction, a prepared one, a"
        " replication slot or a standby: it keeps deleted jobs around)."),
    "metrics": ("serve", "Print the queue's metrics once, in Prometheus' text format."),
    "pause": ("admin", "Stop reserves from TUBE for DURATION (0 un-pauses it)."),
    "peek": ("jobs", "Show a job by ID, or the next --ready/--delayed/--buried one."),
    "postpone": ("jobs",
        "Make a ready or delayed job wait DELAY from now (0 makes it ready now)."),
    "progress": ("control",
        "Say how far a reserved job has got: VALUE a count (37), a fraction (0.5) or 50%."),
    "publish": ("topics",
        "Put a copy of a job into every tube subscribed to TOPIC; print the ids."),
    "put": ("puts", "Put a job into a tube and print its id."),
    "put-many": ("puts", "Put one job per line of FILE (or stdin) at once; print the ids."),
    "release": ("jobs", "Put a reserved job back: ready, or delayed with --delay."),
    "reserve": ("jobs", "Reserve the most urgent ready job and show it."),
    "result": ("jobs", "Wait for job ID's result and print it (a task's result is JSON)."),
    "serve": ("serve",
        "Serve the file over the beanstalkd protocol (1.12), for clients in any language."),
    "stats": ("admin", "Show the counters of the file, of one --tube or of one --job."),
    "step": ("steps", "Run COMMAND once per job as its step NAME: skipped when the job has it "
             "already."),
    "subscribe": ("topics",
        "Subscribe TUBE to TOPIC: every publish to TOPIC puts a copy into TUBE."),
    "subscriptions": ("topics",
        "List subscriptions as \"TOPIC TUBE\" lines (only TOPIC's when given)."),
    "top": ("serve", "A live view of every tube, like top; q or Ctrl-C quits."),
    "touch": ("jobs", "Give a reserved job a fresh TTR, so a slow worker keeps it."),
    "tubes": ("admin",
        "List the tubes that hold jobs (or are paused or subscribed to a topic), one per "
        "line."),
    "unsubscribe": ("topics", "Stop copying TOPIC into TUBE (exit 3 if it was not subscribed)."),
    "work": ("work", "Run jobs: task functions from --import modules, or COMMAND once per job."),
}
