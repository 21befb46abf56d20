"""The tests' Python processes, forked from a warm interpreter instead of started cold.

``make test`` is bound by CPU, and much of it was Python processes starting: a thousand of
them (the CLI, ``sqlq work``, servers, snippets) each spent 0.15 s of CPU importing sqlq
and click and tearing them down, 0.35 s with psycopg, around what it did. Each test
process gets a fork server instead, which imports those once; :func:`Popen` and
:func:`run`, which take what :mod:`subprocess`'s do, hand it the command with the child's
standard streams, and it forks a child that sets up what a new interpreter would have
(argv, sys.path, the environment, the working directory, a session of its own if asked,
standard streams buffered as Python buffers them) and runs it. The child is a real,
separate process: its own pid, signals, sockets and exit status. Its parent is the server,
which relays its exit status; the object returned is a :class:`subprocess.Popen` in all
else. It ends as an interpreter ends (threads joined, atexit functions run, what it left
open closed, streams flushed) but for the teardown of what the server imported, which
would copy the server's whole heap: a CLI command costs 0.03 s of CPU this way, 0.2 s
started cold.

A child dies with the server and the server with the test process
(:func:`tests.orphans.die_with_parent`).

What a fork cannot give goes the usual way, through :mod:`subprocess`: another program or
interpreter, options before ``-m``/``-c``, ``pass_fds``, ``preexec_fn``, ``user``,
``group``, ``umask``, a working directory that does not exist, environment variables read
at start-up (``PYTHON*``, the locale, ``OTEL_*``) that differ from the server's, and a
request from a thread other than the main one while no server runs (the server must be
the main thread's child, or it dies with the thread). The tests of start-up itself
(``tests/integration/test_startup.py``) call :mod:`subprocess`. ``SQLQ_TEST_FORKSERVER=0``
sends every command the usual way.

Run as a script, this file is the server: ``python tests/forkserver.py FD TEST_PID``.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
#: The console script of the interpreter running the tests (the venv's ``bin/sqlq``).
SQLQ_SCRIPT = os.path.join(os.path.dirname(sys.executable), "sqlq")
#: What the server imports once for every child besides sqlq's own modules: what they
#: import lazily (psycopg alone is two thirds of a PostgreSQL command's start-up).
PRELOAD = ("psycopg", "apsw")
#: sqlq's modules the server does not import: the faces of other frameworks, the demo,
#: and what a module run with -m would run (``__main__``).
NOT_PRELOADED = ("sqlq.contrib", "sqlq.demo", "sqlq.__main__")
#: Options of :class:`subprocess.Popen` a fork does not give (they go to subprocess).
UNFORKABLE = ("executable", "preexec_fn", "pass_fds", "user", "group", "extra_groups",
              "process_group", "startupinfo", "creationflags")
#: How the server tells a child's end: its exit status as Popen gives it, its CPU seconds.
STATUS = struct.Struct("<id")

#: CPU seconds of the children that ended (tests/cpu_report.py adds them to the test's).
children_cpu = 0.0


def started_at_startup(name: str) -> bool:
    """Whether the environment variable is read when an interpreter starts (a fork has
    the server's reading of it)."""
    return (name.startswith(("PYTHON", "LC_", "OTEL_")) and name not in
            ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")) \
        or name in ("LANG", "LANGUAGE")


# ------------------------------------------------------------------ the tests' side


def plan(args: Any, options: dict[str, Any]) -> dict[str, Any] | None:
    """The request a command is to the server, or None if it must be started the usual
    way."""
    if os.environ.get("SQLQ_TEST_FORKSERVER") == "0" or options.get("shell") \
            or isinstance(args, (str, bytes)) or not options.get("close_fds", True) \
            or not options.get("restore_signals", True) \
            or options.get("umask", -1) != -1 \
            or any(options.get(name) for name in UNFORKABLE):
        return None
    argv = [os.fsdecode(a) for a in args]
    if argv[0] == sys.executable and len(argv) >= 3 and argv[1] in ("-m", "-c"):
        kind, target, rest = ("module" if argv[1] == "-m" else "code"), argv[2], argv[3:]
    elif argv[0] == SQLQ_SCRIPT:
        kind, target, rest = "script", SQLQ_SCRIPT, argv[1:]
    elif argv[0] == sys.executable and len(argv) >= 2 and argv[1].endswith(".py") \
            and os.path.isfile(argv[1]):
        kind, target, rest = "script", argv[1], argv[2:]
    else:
        return None
    env = dict(os.environ if options.get("env") is None else options["env"])
    server = _server()
    if server is None or any(env.get(name) != server.env.get(name)
                             for name in {*env, *server.env} if started_at_startup(name)):
        return None
    cwd = os.fspath(options.get("cwd") or os.getcwd())
    if not os.path.isdir(cwd):
        return None
    return {"kind": kind, "target": target, "args": rest, "cwd": cwd, "env": env,
            "new_session": bool(options.get("start_new_session"))}


class ForkedPopen(subprocess.Popen):  # type: ignore[type-arg]
    """A :class:`subprocess.Popen` whose child the fork server started."""

    def __init__(self, request: dict[str, Any], args: Any, **options: Any) -> None:
        self._request = request
        self._status = -1
        self._forked = False
        super().__init__(args, **options)

    def _execute_child(self, args: Any, executable: Any, preexec_fn: Any, close_fds: Any,
                       pass_fds: Any, cwd: Any, env: Any, startupinfo: Any,
                       creationflags: Any, shell: Any, p2cread: int, p2cwrite: int,
                       c2pread: int, c2pwrite: int, errread: int, errwrite: int,
                       *rest: Any) -> None:
        server = _server()
        status_r, status_w = os.pipe()
        streams = [fd if fd != -1 else n for n, fd in enumerate((p2cread, c2pwrite, errwrite))]
        try:
            pid = server.start(self._request, [*streams, status_w]) if server else None
        finally:
            os.close(status_w)
        if pid is None:  # the server is gone: the usual way
            os.close(status_r)
            super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds,  # type: ignore[misc]
                                   cwd, env, startupinfo, creationflags, shell, p2cread,
                                   p2cwrite, c2pread, c2pwrite, errread, errwrite, *rest)
            return
        self.pid, self._status, self._child_created, self._forked = pid, status_r, True, True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite,  # type: ignore[attr-defined]
                             errread, errwrite)

    def _internal_poll(self, _deadstate: Any = None, **more: Any) -> int | None:
        if not self._forked:
            return super()._internal_poll(_deadstate, **more)  # type: ignore[misc, no-any-return]
        if self.returncode is None and self._status != -1 and _ready(self._status, 0):
            self._read_status()
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if not self._forked:
            return super()._wait(timeout)  # type: ignore[misc, no-any-return]
        if self.returncode is None and self._status != -1 \
                and not _ready(self._status, timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
        self._read_status()
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        global children_cpu
        with self._waitpid_lock:  # type: ignore[attr-defined]
            if self.returncode is not None:
                return
            data = os.read(self._status, STATUS.size)
            os.close(self._status)
            self._status = -1
            if len(data) < STATUS.size:  # the server died, and its children with it
                self.returncode = -signal.SIGKILL
                return
            self.returncode, cpu = STATUS.unpack(data)
            children_cpu += cpu


def _ready(fd: int, timeout: float | None) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(timeout, 0) * 1000))


def Popen(args: Any, **options: Any) -> subprocess.Popen[Any]:  # noqa: N802 - subprocess's name
    """:class:`subprocess.Popen`, forked by the server when it can be."""
    request = plan(args, options)
    if request is None:
        return subprocess.Popen(args, **options)
    return ForkedPopen(request, args, **options)


def run(args: Any, *, input: Any = None, capture_output: bool = False,  # noqa: A002
        timeout: float | None = None, check: bool = False,
        **options: Any) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run`, forked by the server when it can be."""
    if input is not None:
        options["stdin"] = subprocess.PIPE
    if capture_output:
        options["stdout"] = options["stderr"] = subprocess.PIPE
    with Popen(args, **options) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        assert code is not None
        if check and code:
            raise subprocess.CalledProcessError(code, process.args, stdout, stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)


class _Server:
    """The test process's fork server (started by the main thread on first use)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.lock = threading.Lock()
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, str(HERE), str(theirs.fileno()),
                                      str(self.owner)],
                                     pass_fds=[theirs.fileno()], env=self.env,
                                     stdin=subprocess.DEVNULL)
        theirs.close()

    def start(self, request: dict[str, Any], fds: list[int]) -> int | None:
        """The pid of the child the server forked for ``request``; None if it is gone."""
        with self.lock:
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
                reply = self.sock.recv(4096)
            except OSError:
                reply = b""
        if not reply:
            return None
        answer = json.loads(reply)
        if "error" in answer:
            raise OSError(answer["error"])
        return int(answer["pid"])


_the_server: _Server | None = None
_server_lock = threading.Lock()


def _server() -> _Server | None:
    """This process's server; None if there is none and this is not the main thread."""
    global _the_server
    with _server_lock:
        if _the_server is not None and _the_server.owner != os.getpid():
            _the_server = None  # a fork of the test process: the server is not its child
        if _the_server is None and threading.current_thread() is threading.main_thread():
            _the_server = _Server()
        if _the_server is not None and _the_server.proc.poll() is not None:
            return None
        return _the_server


# ------------------------------------------------------------------ the server's side


def serve(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """Fork a child per request and report each child's end; returns only in a child,
    with its request and its standard streams."""
    import selectors

    children: dict[int, tuple[int, int]] = {}  # pidfd: (pid, status fd)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj is not sock:
                pid, status = children.pop(key.fd)
                selector.unregister(key.fd)
                _, wait_status, usage = os.wait4(pid, 0)
                try:
                    os.write(status, STATUS.pack(os.waitstatus_to_exitcode(wait_status),
                                                 usage.ru_utime + usage.ru_stime))
                except OSError:
                    pass  # nobody waits for it any more
                os.close(status)
                os.close(key.fd)
                continue
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
            if not message:
                sys.exit(0)  # the test process is gone
            pid = os.fork()
            if pid == 0:
                selector.close()
                sock.close()
                for pidfd, (_, status) in children.items():
                    os.close(pidfd)
                    os.close(status)
                os.close(fds[3])
                return json.loads(message), fds[:3]
            for fd in fds[:3]:
                os.close(fd)
            pidfd = os.pidfd_open(pid)
            children[pidfd] = (pid, fds[3])
            selector.register(pidfd, selectors.EVENT_READ)
            sock.send(json.dumps({"pid": pid}).encode())


def become(request: dict[str, Any], streams: list[int], base_path: list[str]) -> None:
    """Set up, in the forked child, what a new interpreter started for ``request``
    would have."""
    for n, fd in enumerate(streams):
        os.dup2(fd, n)
    for fd in set(streams) - {0, 1, 2}:
        os.close(fd)
    if request["new_session"]:
        os.setsid()
    os.chdir(request["cwd"])
    env = request["env"]
    os.environ.clear()
    os.environ.update(env)
    first = {"module": os.getcwd(), "code": "",
             "script": os.path.dirname(os.path.realpath(request["target"]))}[request["kind"]]
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [first, *extra, *base_path]
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = _stream(0, "r", sys.__stdin__, False)  # type: ignore[misc]
    sys.stdout = sys.__stdout__ = _stream(1, "w", sys.__stdout__, unbuffered)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = _stream(2, "w", sys.__stderr__, unbuffered)  # type: ignore[misc]
    if not unbuffered:
        sys.stderr.reconfigure(line_buffering=True)  # as Python's own stderr
    import types

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main


def _stream(fd: int, mode: str, like: Any, unbuffered: bool) -> io.TextIOWrapper:
    """A standard stream on ``fd`` as the interpreter makes it (encoding and errors as the
    server's, which started in the same locale)."""
    raw = open(fd, mode + "b", buffering=0 if unbuffered and mode == "w" else -1,  # noqa: SIM115
               closefd=False)
    return io.TextIOWrapper(raw, encoding=like.encoding, errors=like.errors, newline="\n",
                            line_buffering=mode == "w" and not unbuffered and os.isatty(fd),
                            write_through=unbuffered and mode == "w")


def execute(request: dict[str, Any]) -> None:
    """Run the request's command as the interpreter would (``-m``, ``-c``, a script)."""
    import runpy

    target, kind = request["target"], request["kind"]
    if kind == "module":
        sys.argv = ["-m", *request["args"]]
        runpy._run_module_as_main(target)  # type: ignore[attr-defined]  # what -m runs
    elif kind == "code":
        sys.argv = ["-c", *request["args"]]
        exec(compile(target, "<string>", "exec"), sys.modules["__main__"].__dict__)
    else:
        sys.argv = [target, *request["args"]]
        runpy.run_path(target, run_name="__main__")


def preload() -> None:
    """Import sqlq's modules and what they import lazily, as the children will."""
    import importlib
    import pkgutil

    import sqlq

    for module in pkgutil.walk_packages(sqlq.__path__, "sqlq."):
        if not module.name.startswith(NOT_PRELOADED):
            importlib.import_module(module.name)
    for name in PRELOAD:
        importlib.import_module(name)


def _orphans() -> Any:
    """tests/orphans.py, loaded without its name in ``sys.modules``: a child that runs
    ``-m tests.orphans`` must import it as a new interpreter would (the server is a
    script, so that nothing of ``tests`` is imported before a child asks)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_orphans", HERE.with_name("orphans.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    orphans = _orphans()
    orphans.die_with_parent(int(sys.argv[2]))
    del sys.path[0]  # this file's folder: not on a child's path
    base_path = list(sys.path)
    preload()
    import gc

    # What the server imported is never the children's garbage: without this each child's
    # collections and its exit walk every object of it, copying every page of the heap
    # on write (0.25 s of CPU a child instead of 0.06: the saving, gone).
    gc.freeze()
    server = os.getpid()
    request, streams = serve(sock)
    orphans.die_with_parent(server)
    imported = set(sys.modules)
    become(request, streams, base_path)
    del sock
    leave(run_as_main(request), imported)


def run_as_main(request: dict[str, Any]) -> int:
    """Run the command; its exit status, having printed what the interpreter prints when
    a program ends with an exception (without this file's frames)."""
    try:
        execute(request)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        return -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    return 0


def leave(code: int, imported: set[str]) -> None:
    """End the child as the interpreter ends, but for the teardown of the modules the
    server imported: it touches every object of them, copying the whole heap on write
    (0.05 s of CPU, most of what is left of a child's start-up and exit). In the
    interpreter's order: wait for the threads that are not daemons, run the atexit
    functions, free what the program made (its ``__main__``, the modules it imported,
    its garbage: the connections and files it left open are closed as at any exit),
    flush the standard streams."""
    import atexit
    import gc

    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter calls
    atexit._run_exitfuncs()
    sys.modules["__main__"].__dict__.clear()
    for name in set(sys.modules) - imported:
        del sys.modules[name]
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as the interpreter, when flushing stdout fails
    if code == -signal.SIGINT:  # how an interpreter ends on an uncaught ^C
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main()
