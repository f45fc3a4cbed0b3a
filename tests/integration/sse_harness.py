"""Real parts for the service tests: uvicorn in a subprocess, a streaming SSE client,
and a recorder in another process writing through SessionApplication + the ledger hook.

Run as a script, it is that recorder: :func:`writer_argv` gives its command line, the
arguments of :func:`write_session` pickled into one word.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec

import httpx

from pentrace.domain.json_codec import JsonDecoder
from pentrace.domain.session.key import SessionKey
from tests.support import start_sample_session

PROJECT, AGENT = "demo", "coder"
REPO = Path(__file__).resolve().parents[2]
PREFIX_ENV = "PENTRACE_LEDGER_TABLE_PREFIX"
P = ParamSpec("P")


def session_id(n: int) -> str:
    """A valid native session id, distinct per ``n``."""
    return f"session-2026-11-29-10-00-00-{n:08x}"


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(root: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a server or writer child: this root, ledger limits off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PENTRACE_API_TOKEN")}
    env.update(
        PENGUIN_HOME=str(root),
        PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS="0",
        PENGUIN_RUNTIME_EVENT_LEDGER_MAX_AGE_DAYS="0",
        PENGUIN_RUNTIME_EVENT_LEDGER_MAX_BYTES="0",
        PENGUIN_RUNTIME_EVENT_LEDGER_CLEANUP_INTERVAL_SECONDS="0",
        PYTHONPATH=str(REPO),
    )
    env.update(extra or {})
    return env


@dataclass
class Server:
    """``pentrace serve`` in a subprocess on a fixed port (so a restart keeps the URL)."""

    root: Path
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        """The base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, token: str | None = None) -> Server:
        """Start and wait until ``/openapi.json`` answers."""
        self.log = self.root / f"server-{self.port}-{time.monotonic_ns()}.log"
        command = [sys.executable, "-m", "pentrace", "--data-root", str(self.root), "serve"]
        command += ["--port", str(self.port), "--keepalive", "0.5", "--log-level", "info"]
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(
                [*command, *self.args],
                env=child_env(self.root, self.env),
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.output()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.url + "/openapi.json", headers=headers, timeout=1).status_code:
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"server did not come up:\n{self.output()}")

    def output(self) -> str:
        """Everything the server printed (stdout and stderr)."""
        return self.log.read_text(errors="replace") if self.log else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def rss_kib(self) -> int:
        """The server's resident memory (Linux /proc)."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")


@dataclass
class Frame:
    """One SSE frame as a client sees it."""

    id: str | None = None
    data: Any = None
    retry: int | None = None
    comments: list[str] = field(default_factory=list)

    @property
    def type(self) -> str | None:
        """``data.type`` when data is an object."""
        return self.data.get("type") if isinstance(self.data, dict) else None


_frame_decode = JsonDecoder[Any]().decode


def parse_frames(lines: Iterator[str]) -> Iterator[Frame]:
    """SSE frames from text lines (no trailing newlines), per the EventSource rules we use."""
    frame = Frame()
    seen = False
    for line in lines:
        if line == "":
            if seen:
                yield frame
            frame, seen = Frame(), False
            continue
        seen = True
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "":
            frame.comments.append(value)
        elif name == "id":
            frame.id = value
        elif name == "data":
            frame.data = _frame_decode(value)  # lone surrogate escapes included (ADR 0015)
        elif name == "retry":
            frame.retry = int(value)


class SseClient:
    """Streams an SSE URL in a thread; frames land in a queue the test reads with timeouts."""

    def __init__(
        self,
        url: str,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.frames: queue.Queue[Frame | BaseException | None] = queue.Queue()
        self.status: int | None = None
        self.headers: httpx.Headers | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(30, connect=5))
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(url, dict(params or {}), dict(headers or {})), daemon=True
        )
        self._thread.start()

    def _run(self, url: str, params: dict[str, str], headers: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", url, params=params, headers=headers) as response:
                self.status, self.headers = response.status_code, response.headers
                for frame in parse_frames(response.iter_lines()):
                    if self._stop.is_set():
                        break
                    self.frames.put(frame)
        except (httpx.HTTPError, RuntimeError) as error:
            if not self._stop.is_set():
                self.frames.put(error)
        self.frames.put(None)

    def _first(self, wanted: Callable[[Frame], bool], timeout: float, shortest: float) -> Frame:
        """The next ``wanted`` frame, others skipped; raises on end of stream or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            # A deadline, not a per-get timeout: skipped frames must not extend the wait.
            item = self.frames.get(timeout=max(shortest, deadline - time.monotonic()))
            if item is None or isinstance(item, BaseException):
                raise EOFError(f"stream ended: {item!r}")
            if wanted(item):
                return item

    def next(self, timeout: float = 10) -> Frame:
        """The next frame that is not only a comment; raises on end of stream or timeout."""
        return self._first(lambda f: f.data is not None or f.id is not None, timeout, 0.0)

    def comment(self, timeout: float = 10) -> str:
        """The next comment line (keepalive), skipping other frames."""
        return self._first(lambda f: bool(f.comments), timeout, 0.01).comments[0]

    def events(self, count: int, timeout: float = 15) -> list[Frame]:
        """The next ``count`` event frames (frames with an id), control frames skipped."""
        got: list[Frame] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            frame = self.next(max(0.01, deadline - time.monotonic()))
            if frame.id is not None:
                got.append(frame)
        return got

    def until_closed(self, timeout: float = 15) -> list[Frame]:
        """Every frame until the stream breaks (a killed server)."""
        got: list[Frame] = []
        while True:
            item = self.frames.get(timeout=timeout)
            if item is None:
                return got
            if isinstance(item, Frame):
                got.append(item)

    def close(self) -> None:
        """Stop reading and close the connection."""
        self._stop.set()
        self._client.close()
        self._thread.join(5)


# -- the recorder in another process --------------------------------------------------------


def write_session(
    root: Path,
    sid: str,
    count: int,
    delay: float = 0.0,
    batch: int = 1,
    *,
    agent: str = AGENT,
    workspace: str = "workspace",
    hang: bool = False,
    stamp: bool = False,
    env: Mapping[str, str] | None = None,
) -> None:
    """Record ``count`` turns (4 records each; a new session starts with 2 more) through
    SessionApplication with the ledger hook.  ``hang``: print ``written`` and wait to be killed
    without closing anything.  ``stamp``: print ``saved <position> <unix time before save>``
    per turn (latency benchmark).  ``env`` names the ledger (default: ``os.environ``)."""
    from pentrace.infrastructure.eventstore.application import SessionApplication
    from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
    from pentrace.infrastructure.ledger.live.hook import LedgerHook
    from pentrace.infrastructure.storage.layout import DataRoot

    ledger_env = os.environ if env is None else env
    ledger = RuntimeEventLedger.open(
        root, LedgerSettings.from_env(ledger_env), table_prefix=ledger_env.get(PREFIX_ENV, "")
    )
    hook = LedgerHook(ledger, data_root=DataRoot(root), project=PROJECT, agent=agent)
    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    ticks = iter(range(10**9))
    application = SessionApplication(
        root,
        PROJECT,
        agent,
        on_recorded=hook,
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
    )
    folder = root / workspace
    folder.mkdir(exist_ok=True)
    existing = DataRoot(root).find_shards(PROJECT, agent, sid)
    if existing:
        handle = application.open_session(sid)
    else:
        handle = start_sample_session(application, workspace=folder, session_id=sid)
    print("ready", flush=True)
    for turn in range(count):
        handle.record_user_input(f"question {turn}")
        handle.begin_request()
        handle.record_text(f"answer {turn}")
        before = time.time()
        handle.end_request("completed")  # saves the request: trace, then ledger
        if stamp:
            print(f"saved {handle.session.version} {before!r}", flush=True)
        if delay and (turn + 1) % batch == 0:
            time.sleep(delay)
    if hang:
        hook.flush(timeout=60)  # the ledger is written in the background
        print("written", flush=True)
        time.sleep(600)
    handle.close()
    hook.close()  # the ledger is written in the background: let it finish
    ledger.close()
    print("done", flush=True)


def _in_thread(target: Callable[P, None]) -> Callable[P, threading.Thread]:
    """``target`` called in a new thread, started (its arguments as they are)."""

    def start(*args: P.args, **kwargs: P.kwargs) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, kwargs=kwargs)
        thread.start()
        return thread

    return start


def _as_script(target: Callable[P, None]) -> Callable[P, list[str]]:
    """The command line of a Python process that calls ``target`` with these arguments:
    this module run as a script (its ``__main__`` below), the call pickled into ``argv``."""

    def argv(*args: P.args, **kwargs: P.kwargs) -> list[str]:
        call = pickle.dumps((target.__name__, args, kwargs)).hex()
        return [sys.executable, "-m", "tests.integration.sse_harness", call]

    return argv


# Record in a thread of the test process (another process than the server).
writer_thread = _in_thread(write_session)
# The command line of a recorder process (run it with :func:`child_env`'s environment).
writer_argv = _as_script(write_session)


def start_writer(
    root: Path, *args: Any, env: Mapping[str, str] | None = None, **options: Any
) -> subprocess.Popen[bytes]:
    """Start :func:`write_session` in another process (``root``, ``args`` and ``options``
    are its own); ``env`` is added to the child's environment, which names its ledger."""
    return subprocess.Popen(
        writer_argv(root, *args, **options),
        env=child_env(root, env),
        cwd=REPO,
        stdout=subprocess.PIPE,
    )


def finish(process: subprocess.Popen[bytes], timeout: float = 60) -> int:
    """Wait for a writer process, close its pipe, and return its exit code."""
    try:
        return process.wait(timeout)
    finally:
        if process.stdout is not None:
            process.stdout.close()


def write(root: Path, sid: str, count: int, env: Mapping[str, str] | None = None) -> None:
    """Record ``count`` turns in another process and wait for it to finish."""
    assert finish(start_writer(root, sid, count, env=env)) == 0


def seed(root: Path, sid: str, turns: int, text_bytes: int = 100) -> int:
    """Write a session's trace file directly (1 + 4 records per turn, two of them carrying
    ``text_bytes`` of text) and index it into the ledger in batches, far faster than recording
    it; returns the number of events."""
    from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
    from pentrace.infrastructure.ledger.bulk import sync
    from pentrace.testing.files import write_shards
    from pentrace.testing.render import envelope_line

    stamp = "2026-11-29T10:00:00.000Z"
    meta = {
        "session_id": sid,
        "provider": "openai",
        "model_id": "gpt-5",
        "model_context_window": 200000,
        "system_prompt": "be brief",
        "agent_state": str(root / "state"),
        "workspace": str(root / "workspace"),
    }
    filler = "x" * text_bytes
    lines = [envelope_line(stamp, "session_meta", meta)]
    for turn in range(turns):
        lines += [
            envelope_line(
                stamp, "model_msg", {"type": "text", "role": "user", "text": f"q{turn} {filler}"}
            ),
            envelope_line(stamp, "event_msg", {"type": "request_begin"}),
            envelope_line(
                stamp, "model_msg", {"type": "text", "role": "assistant", "text": filler}
            ),
            envelope_line(stamp, "event_msg", {"type": "request_end", "status": "completed"}),
        ]
    write_shards(root, PROJECT, AGENT, sid, [lines])
    ledger = RuntimeEventLedger.open(root, LedgerSettings().with_limits_off())
    try:
        sync(ledger, root, project=PROJECT, agent=AGENT)
    finally:
        ledger.close()
    return len(lines)


def event_ids(sid: str, first: int, last: int, agent: str = AGENT) -> list[str]:
    """The ledger ids of positions ``first..last`` of a session (of ``PROJECT``/``agent``)."""
    key = SessionKey(PROJECT, agent, sid)
    return [key.event_id(n) for n in range(first, last + 1)]


if __name__ == "__main__":
    # The call `writer_argv` pickled: this module wrote it, in the test that started us.
    name, call_args, call_kwargs = pickle.loads(bytes.fromhex(sys.argv[1]))  # noqa: S301
    {"write_session": write_session}[name](*call_args, **call_kwargs)
