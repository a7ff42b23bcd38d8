"""Load check of the web app: concurrent sessions changing inputs for a minute (issue 13).

Starts ``streamlit run app.py`` headless on 127.0.0.1 (a free port), then runs N concurrent clients
that speak Streamlit's own websocket protocol (``/_stcore/stream``, protobuf BackMsg/ForwardMsg),
as the browser does: each client opens a session with a query string (the first page run), then
repeatedly changes one input (GPU budget, TTFT or TPOT target, percentile, link, inspected rate) by
sending the widget's new value in a rerun request, and times each interaction from the request to
the server's ``script_finished`` message. Meanwhile a monitor polls ``/_stcore/health`` each
second. At the end it stops the server and reports:

- response time per interaction (p50 / p95 / max) for the first run and for input changes;
- health-check latency and failures (the server must stay responsive);
- error banners and exception elements the page sent, and error or traceback lines in the server
  log (all must be zero for a clean run).

Bounded: ``--duration`` seconds (default 60) and ``--clients`` (default 8, at most 32); loopback
only; the server is stopped by its process id when the run ends or fails. Usage::

    python benchmarks/load_app.py [--clients 8] [--duration 60] [--seed 0]

Figures of a run are recorded in docs/reliability.md ("The web app").
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.sync.client import connect

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
MAX_CLIENTS = 32
MAX_DURATION_S = 600
INTERACTION_TIMEOUT_S = 120
# The inputs a client changes, as (widget key, WidgetState field, values).
CHANGES = (
    ("gpus", "int_value", [8, 16, 24, 32, 48]),
    ("ttft", "string_value", ["300 ms", "500 ms", "1 s"]),
    ("tpot", "string_value", ["40 ms", "50 ms", "80 ms"]),
    ("percentile", "double_array_value", [90.0, 95.0, 99.0]),
    ("link", "string_value", ["ib-ndr-400", "eth-100g", "eth-1g"]),
    ("rate", "double_value", [0.0, 5.0, 10.0]),
)
FIRST_QUERIES = (
    {},
    {"gpus": "32"},
    {"gpus": "8", "workload": "code"},
    {"ttft": "1 s", "link": "eth-100g"},
    {"mode": "target rate", "target_rate": "10"},
    {"gpu": "a100-sxm-80gb"},
    {"tpot": "80 ms", "percentile": "95"},
    {"gpus": "24", "ttft": "9**9**9 s"},  # a hostile parameter: warned about, never evaluated
)
ERROR_LINE = re.compile(r"Traceback|Error|Exception|CRITICAL", re.IGNORECASE)


@dataclass
class Stats:
    first_s: list[float] = field(default_factory=list)
    change_s: list[float] = field(default_factory=list)
    error_banners: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, value: object) -> None:
        with self.lock:
            getattr(self, name).append(value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_server(port: int, log_path: Path) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.headless", "true",
        "--server.address", HOST,
        "--server.port", str(port),
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
    ]  # fmt: skip
    log = log_path.open("wb")
    return subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def health(port: int, timeout: float = 5.0) -> float | None:
    """Seconds the health endpoint took to answer "ok", or None."""
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/_stcore/health", timeout=timeout) as r:
            ok = r.status == 200
    except OSError:
        return None
    return time.perf_counter() - t0 if ok else None


def wait_ready(port: int, proc: subprocess.Popen, limit_s: float = 90.0) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("the streamlit server exited during start-up; see its log")
        if health(port, 1.0) is not None:
            return
        time.sleep(0.5)
    raise RuntimeError("the streamlit server did not become healthy in time")


class Session:
    """One browser-like session over Streamlit's websocket protocol."""

    def __init__(self, ws, stats: Stats) -> None:
        self.ws = ws
        self.stats = stats
        self.widget_ids: dict[str, str] = {}  # user key -> widget id, learnt from the page
        self.states: dict[str, tuple[str, object]] = {}  # widget id -> (field, value) sent so far
        self.query = ""

    def _send(self, query: str) -> float:
        msg = BackMsg()
        cs = msg.rerun_script
        cs.query_string = query
        cs.page_script_hash = ""
        for wid, (fld, value) in self.states.items():
            w = cs.widget_states.widgets.add()
            w.id = wid
            if fld == "double_array_value":
                w.double_array_value.data.extend([value])
            else:
                setattr(w, fld, value)
        t0 = time.perf_counter()
        self.ws.send(msg.SerializeToString())
        self._until_finished(t0)
        return time.perf_counter() - t0

    def _until_finished(self, t0: float) -> None:
        while True:
            left = INTERACTION_TIMEOUT_S - (time.perf_counter() - t0)
            if left <= 0:
                raise TimeoutError("no script_finished within the interaction timeout")
            fwd = ForwardMsg()
            fwd.ParseFromString(self.ws.recv(timeout=left))
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                self._element(fwd.delta.new_element)
            elif kind == "script_finished" and fwd.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                return

    def _element(self, el) -> None:
        kind = el.WhichOneof("type")
        if kind == "alert" and el.alert.format == Alert.ERROR:
            self.stats.add("error_banners", el.alert.body[:200])
        elif kind == "exception":
            self.stats.add("exceptions", f"{el.exception.type}: {el.exception.message[:200]}")
        elif kind is not None:
            wid = getattr(getattr(el, kind), "id", "")
            if wid:
                key = wid.rsplit("-", 1)[-1]
                self.widget_ids.setdefault(key, wid)

    def open(self, query: str) -> float:
        self.query = query
        return self._send(query)

    def change(self, key: str, fld: str, value: object) -> float | None:
        wid = self.widget_ids.get(key)
        if wid is None:
            return None  # not on the page in this mode (e.g. target-rate mode has no GPU budget)
        self.states[wid] = (fld, value)
        return self._send(self.query)


def client(port: int, stats: Stats, end: float, seed: int) -> None:
    rng = random.Random(seed)
    while time.monotonic() < end:
        try:
            with connect(
                f"ws://{HOST}:{port}/_stcore/stream",
                subprotocols=["streamlit"],
                max_size=2**26,
                open_timeout=30,
            ) as ws:
                session(Session(ws, stats), rng, end)
        except Exception as err:  # report, then start a fresh session
            stats.add("failures", f"{type(err).__name__}: {err}"[:200])
            time.sleep(1)


def session(s: Session, rng: random.Random, end: float) -> None:
    """One page load, then 5-15 input changes (then the caller reconnects, as a user reloading)."""
    stats = s.stats
    stats.add("first_s", s.open(urlencode(rng.choice(FIRST_QUERIES))))
    for _ in range(rng.randint(5, 15)):
        if time.monotonic() >= end:
            break
        key, fld, values = rng.choice(CHANGES)
        took = s.change(key, fld, rng.choice(values))
        if took is not None:
            stats.add("change_s", took)
        time.sleep(rng.uniform(0.2, 1.0))  # think time between edits


def monitor(port: int, end: float, out: list[float | None]) -> None:
    while time.monotonic() < end:
        t0 = time.monotonic()
        out.append(health(port))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else float("nan")


def _row(name: str, xs: list[float]) -> str:
    top = max(xs, default=float("nan"))
    return f"| {name} | {len(xs)} | {_q(xs, 0.5):.2f} | {_q(xs, 0.95):.2f} | {top:.2f} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load (after warm-up)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not 1 <= args.clients <= MAX_CLIENTS or not 1 <= args.duration <= MAX_DURATION_S:
        ap.error(f"--clients in [1, {MAX_CLIENTS}], --duration in [1, {MAX_DURATION_S}] s")
    port = free_port()
    log_path = Path(tempfile.mkdtemp(prefix="pdplan-load-")) / "server.log"
    proc = start_server(port, log_path)
    stats = Stats()
    health_s: list[float | None] = []
    try:
        t0 = time.perf_counter()
        wait_ready(port, proc)
        startup_s = time.perf_counter() - t0
        end = time.monotonic() + args.duration
        threads = [threading.Thread(target=monitor, args=(port, end, health_s), daemon=True)]
        threads += [
            threading.Thread(target=client, args=(port, stats, end, args.seed * 1000 + i), daemon=True)
            for i in range(args.clients)
        ]
        wall0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.duration + INTERACTION_TIMEOUT_S + 30)
        wall = time.perf_counter() - wall0
        alive_after = health(port)
    finally:
        stop_server(proc)
    log_text = log_path.read_text(errors="replace")
    bad_lines = [ln for ln in log_text.splitlines() if ERROR_LINE.search(ln)]
    ok_health = [h for h in health_s if h is not None]
    print(f"clients {args.clients}, load {args.duration:.0f} s (wall {wall:.0f} s), "
          f"server start {startup_s:.1f} s, {os.cpu_count()} CPUs")  # fmt: skip
    print("| interaction | count | p50 (s) | p95 (s) | max (s) |\n|---|---|---|---|---|")
    print(_row("first page run (new session)", stats.first_s))
    print(_row("input change (rerun)", stats.change_s))
    print(_row("health check", ok_health))
    print(f"health checks failed: {len(health_s) - len(ok_health)} of {len(health_s)}; "
          f"healthy after the run: {alive_after is not None}")  # fmt: skip
    print(f"interactions per second: {(len(stats.first_s) + len(stats.change_s)) / wall:.2f}")
    print(f"error banners: {len(stats.error_banners)}; exception elements: {len(stats.exceptions)}; "
          f"client failures: {len(stats.failures)}; server log error lines: {len(bad_lines)}")  # fmt: skip
    for item in (stats.error_banners + stats.exceptions + stats.failures + bad_lines)[:10]:
        print("  ", item)
    print(f"server log: {log_path}")
    clean = not (stats.error_banners or stats.exceptions or stats.failures or bad_lines)
    healthy = len(ok_health) == len(health_s) and alive_after is not None
    return 0 if clean and healthy and stats.change_s else 1


if __name__ == "__main__":
    sys.exit(main())
