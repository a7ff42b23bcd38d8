"""One real-browser test of the web app: ``streamlit run app.py`` headless on a free localhost port,
headless Chromium driven through its DevTools protocol, wait for the verdict, save a screenshot.

Chromium is Debian's ``chromium`` package (``.ci/install_browser.sh`` installs it); the test skips
when it is absent. The DevTools protocol is spoken with tornado's websocket client (a dependency of
streamlit), so nothing else is needed. Every wait is bounded; both processes are stopped at the end.

Run it alone to refresh the screenshots: ``.venv/bin/python tests/test_app_browser.py [view ...]``
(a view is a tab label, e.g. "Roofline"; the first screenshot is docs/screenshots/app.png).
:func:`tests.app_timing.measure` times Apply -> settled page; ``benchmarks/apply_app.py`` runs it on
typical scenarios.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "docs" / "screenshots"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)
SERVER_START_S = 60.0
BROWSER_START_S = 30.0
PAGE_WAIT_S = 120.0
WIDTH, HEIGHT = 1500, 2600
CHART_VIEWS = ("Pool-size map", "Latency vs rate", "Roofline", "Memory")  # plotly; the default view has none


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process this module started (its own process group), then reap it."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def streamlit_server(log_dir: Path, cpus: str | None = None):
    """``streamlit run app.py`` on a free port; yields its base URL once /_stcore/health answers.
    ``cpus``: pin the server to these cores (``taskset -c``, e.g. "0"; the benchmark's one core)."""
    port = _free_port()
    log = (log_dir / "streamlit.log").open("wb")
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"),
        "--server.headless=true", f"--server.port={port}", "--server.address=127.0.0.1",
        "--browser.gatherUsageStats=false", "--server.fileWatcherType=none", "--global.developmentMode=false",
        "--client.toolbarMode=minimal",
    ]  # fmt: skip
    cmd = _pinned(cmd, cpus)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"streamlit exited early: {(log_dir / 'streamlit.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"streamlit did not answer on {base} within {SERVER_START_S:.0f} s")
            time.sleep(0.3)
        yield base
    finally:
        _stop(proc)
        log.close()


def _pinned(cmd: list[str], cpus: str | None) -> list[str]:
    """``cmd`` run on the cores ``cpus`` (``taskset -c``), or as it is when None."""
    if cpus is None:
        return cmd
    taskset = shutil.which("taskset")
    if taskset is None:
        raise RuntimeError("taskset is not installed (util-linux), so the process cannot be pinned")
    return [taskset, "-c", cpus, *cmd]


@contextlib.contextmanager
def chromium(binary: str, profile: Path, cpus: str | None = None):
    """Headless Chromium with a fresh profile; yields the DevTools HTTP endpoint. ``cpus``: pin it."""
    log = (profile.parent / "chromium.log").open("wb")
    cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}"]
    cmd = _pinned([*cmd, "about:blank"], cpus)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + BROWSER_START_S
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None:
                raise RuntimeError(
                    f"chromium exited early: {(profile.parent / 'chromium.log').read_text()[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"chromium did not open its DevTools port within {BROWSER_START_S:.0f} s")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port_file.read_text().split()[0]}"
    finally:
        _stop(proc)
        log.close()


class DevTools:
    """A minimal Chrome DevTools protocol client over one page's websocket. Events (messages
    without an id) are dropped, or kept in ``events`` when it is a list (tests/app_timing.py)."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict] | None = None

    async def call(self, method: str, timeout: float = 30.0, **params):
        self.next_id += 1
        msg_id = self.next_id
        await self.ws.write_message(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"DevTools {method} gave no answer within {timeout:.0f} s")
            raw = await asyncio.wait_for(self.ws.read_message(), timeout=left)
            if raw is None:
                raise ConnectionError("DevTools websocket closed")
            reply = json.loads(raw)
            if "id" not in reply and self.events is not None:
                self.events.append(reply)
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"DevTools {method}: {reply['error']}")
                return reply.get("result", {})

    async def text(self, js: str) -> str:
        res = await self.call("Runtime.evaluate", expression=js, returnByValue=True)
        return str(res.get("result", {}).get("value", ""))


PAGE_STATE_JS = """(() => {
  const body = document.body ? document.body.innerText : "";
  const running = !!document.querySelector('[data-testid="stStatusWidget"] button') &&
                  /Stop|Running/.test(document.querySelector('[data-testid="stStatusWidget"]').innerText);
  const spinners = document.querySelectorAll('[data-testid="stSpinner"]').length;
  const charts = document.querySelectorAll('.js-plotly-plot .main-svg').length;
  return JSON.stringify({body: body.slice(0, 20000), running, spinners, charts});
})()"""


async def _capture(devtools_http: str, url: str, want: str, out: Path, need_chart: bool) -> str:
    from tornado.websocket import websocket_connect

    with urllib.request.urlopen(devtools_http + "/json/list", timeout=10) as r:
        pages = [t for t in json.load(r) if t.get("type") == "page"]
    ws = await asyncio.wait_for(
        websocket_connect(pages[0]["webSocketDebuggerUrl"], max_message_size=256 * 2**20), timeout=15
    )
    try:
        dt = DevTools(ws)
        await dt.call("Page.enable")
        await dt.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1,
                      mobile=False)  # fmt: skip
        await dt.call("Page.navigate", url=url)
        deadline = time.monotonic() + PAGE_WAIT_S
        state: dict = {}
        stable_since = None
        while time.monotonic() < deadline:
            state = json.loads(await dt.text(PAGE_STATE_JS) or "{}")
            ready = (
                want in state.get("body", "")
                and not state.get("running")
                and state.get("spinners", 0) == 0
                and (state.get("charts", 0) > 0 or not need_chart)
            )
            if ready:
                stable_since = stable_since or time.monotonic()
                if time.monotonic() - stable_since > 1.5:  # let plotly finish drawing
                    break
            else:
                stable_since = None
            await asyncio.sleep(0.5)
        else:
            raise TimeoutError(f"{want!r} did not appear within {PAGE_WAIT_S:.0f} s; page text: "
                               f"{state.get('body', '')[:1500]!r}")  # fmt: skip
        shot = await dt.call("Page.captureScreenshot", timeout=60, format="png")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(shot["data"]))
        return state.get("body", "")
    finally:
        ws.close()


def capture(
    views: list[str | None], out_names: list[str], timeout_s: float = 240.0, out_dir: Path = SCREENSHOTS
) -> list[str]:
    """Start the app and chromium; for each view (tab label, None = default) save a screenshot in
    ``out_dir`` (the documentation folder only when run as a script, never from the test suite)."""
    binary = find_chromium()
    if binary is None:
        raise RuntimeError("chromium is not installed (run .ci/install_browser.sh)")
    texts = []
    with tempfile.TemporaryDirectory(prefix="pdplan-browser-") as tmp:
        tmp_path = Path(tmp)
        profile = tmp_path / "profile"
        profile.mkdir()
        with streamlit_server(tmp_path) as base, chromium(binary, profile) as devtools_http:
            for view, name in zip(views, out_names, strict=True):
                url = base + "/" + (("?" + urllib.parse.urlencode({"view": view})) if view else "")
                coro = _capture(
                    devtools_http, url, "Verdict:", out_dir / name, need_chart=view in CHART_VIEWS
                )
                texts.append(asyncio.run(asyncio.wait_for(coro, timeout=timeout_s)))
    return texts


# -- shared with tests/app_timing.py (Apply -> settled page, docs/app.md "Responsiveness")

FOOTER_JS = """(() => {
  const c = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
    .map(e => e.innerText).filter(t => t.startsWith("Computed in"));
  const w = document.querySelector('[data-testid="stStatusWidget"]');
  const spinners = document.querySelectorAll('[data-testid="stSpinner"]').length;
  return JSON.stringify({footer: c.join(""), running: !!w && /Running|Stop/.test(w.innerText),
                         spinners, url: location.search});
})()"""


async def _open(devtools_http: str, url: str, init_js: str | None = None) -> tuple[DevTools, float]:
    """Connect to the browser's page, load ``url``, wait for the verdict; (client, seconds).
    ``init_js`` runs in the page before its own scripts (tests/app_timing.py's instrumentation)."""
    from tornado.websocket import websocket_connect

    with urllib.request.urlopen(devtools_http + "/json/list", timeout=10) as r:
        page = next(t for t in json.load(r) if t.get("type") == "page")
    ws = await asyncio.wait_for(websocket_connect(page["webSocketDebuggerUrl"], max_message_size=2**26), 15)
    dt = DevTools(ws)
    await dt.call("Page.enable")
    if init_js:
        await dt.call("Page.addScriptToEvaluateOnNewDocument", source=init_js)
    t0 = time.perf_counter()
    await dt.call("Page.navigate", url=url)
    deadline = time.monotonic() + PAGE_WAIT_S
    while "Verdict:" not in await dt.text("document.body.innerText"):
        if time.monotonic() > deadline:
            raise TimeoutError("the page did not show a verdict")
        await asyncio.sleep(0.05)
    return dt, time.perf_counter() - t0


async def _settled(dt: DevTools, timeout_s: float = PAGE_WAIT_S) -> None:
    """Wait until the page has its footer, no running script and no spinner."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = json.loads(await dt.text(FOOTER_JS))
        if state["footer"] and not state["running"] and not state["spinners"]:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the page did not settle")
        await asyncio.sleep(0.1)


FLIP_TOGGLE_JS = """(() => {
  const i = document.querySelector('input[aria-label="Search what would flip it"]');
  if (!i) return "missing";
  i.click();
  return "clicked";
})()"""
FLIP_BOX_JS = """(() => {
  const b = document.body.innerText, i = b.indexOf("What would flip it");
  return i < 0 ? "" : b.slice(i, i + 1500);
})()"""


async def _flip_search(devtools_http: str, url: str) -> dict:
    """Load the page, switch on *Search what would flip it*, wait until the box shows its result;
    the box's text before and after, and the page footers before and after."""
    dt, _ = await _open(devtools_http, url)
    try:
        await _settled(dt)
        before = {"box": await dt.text(FLIP_BOX_JS), "footer": json.loads(await dt.text(FOOTER_JS))["footer"]}
        deadline = time.monotonic() + PAGE_WAIT_S  # a loaded machine can draw the fragment late
        while await dt.text(FLIP_TOGGLE_JS) != "clicked":
            if time.monotonic() > deadline:
                page = await dt.text("document.body.innerText.slice(0, 800)")
                raise RuntimeError(f"no 'Search what would flip it' toggle; the page says: {page!r}")
            await asyncio.sleep(0.3)
        deadline = time.monotonic() + PAGE_WAIT_S
        while True:
            await asyncio.sleep(0.3)
            box = await dt.text(FLIP_BOX_JS)
            if "Not searched yet" not in box and "Searching" not in box:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the flip search did not finish")
        return {**{k + "_before": v for k, v in before.items()}, "box_after": box,
                "footer_after": json.loads(await dt.text(FOOTER_JS))["footer"]}  # fmt: skip
    finally:
        dt.ws.close()


@pytest.mark.slow
def test_browser_flip_search_reruns_only_its_box():
    """'What would flip it' is not searched on an Apply; its toggle reruns only that box (a
    fragment: the page footer stays) and shows model.plan's threshold sentences."""
    binary = find_chromium()
    if binary is None:
        pytest.skip("chromium is not installed (.ci/install_browser.sh installs Debian's chromium)")
    import model
    from app_support.flips import NOT_SEARCHED

    with tempfile.TemporaryDirectory(prefix="pdplan-browser-") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "profile").mkdir()
        with streamlit_server(tmp_path) as base, chromium(binary, tmp_path / "profile") as devtools_http:
            got = asyncio.run(asyncio.wait_for(_flip_search(devtools_http, base + "/"), timeout=300))
    assert NOT_SEARCHED in got["box_before"]
    assert got["footer_after"] == got["footer_before"], "only the box reruns, not the page"
    expected = model.plan(
        "llama-3.1-70b", "h100-sxm", gpus=16, workload="chat", ttft_slo_s=0.5, tpot_slo_s=0.05
    ).flip_thresholds
    assert expected
    for f in expected:
        assert f.text in got["box_after"]


@pytest.mark.slow
def test_browser_apply_form_plans_once_and_updates_the_url():
    """A slider step in the form changes neither the page nor the URL; Apply re-plans, puts the
    value in the URL, and the verdict card carries the one-line summary with the margin rule."""
    if find_chromium() is None:
        pytest.skip("chromium is not installed (.ci/install_browser.sh installs Debian's chromium)")
    from tests.app_timing import measure

    ((_, first), (_, step)) = measure("Percentile", ("right",))
    assert first["seconds"] > 0
    assert "percentile" not in step["url_edited"] and step["footer_edited"] == step["footer_before"]
    assert "percentile=91" in step["url_after"]
    assert step["seconds"] < 60


ADVANCED_TOGGLE_JS = """(() => { const i = document.querySelector('input[aria-label="Advanced inputs"]');
  if (!i) return "missing"; i.click(); return "clicked"; })()"""
PRICE_SHOWN_JS = 'String(document.body.innerText.includes("Price per GPU-hour"))'


async def _advanced_toggle(devtools_http: str, url: str) -> dict:
    """Load ``url``, move the *Percentile* slider without applying, switch on *Advanced inputs*,
    then Apply; what the page showed at each step."""
    from tests import app_timing

    dt, _ = await _open(devtools_http, url)
    out: dict = {}
    try:
        await _settled(dt)
        out["shown_before"] = await dt.text(PRICE_SHOWN_JS)
        label = json.dumps("Percentile")
        # the footer can settle before the sidebar's slider is drawn (seen once in CI): wait for it
        deadline = time.monotonic() + PAGE_WAIT_S
        while (focused := await dt.text(app_timing.SLIDER_JS % (label, label))) != "focused":
            assert time.monotonic() < deadline, f"the Percentile slider: {focused}"
            await asyncio.sleep(0.2)
        await app_timing._press(dt, "ArrowRight", "ArrowRight", 39)
        await asyncio.sleep(0.5)
        assert await dt.text(ADVANCED_TOGGLE_JS) == "clicked"
        deadline = time.monotonic() + PAGE_WAIT_S
        while await dt.text(PRICE_SHOWN_JS) != "true" and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await _settled(dt)
        out["shown_after"] = await dt.text(PRICE_SHOWN_JS)
        out["slider"] = await dt.text(app_timing.SLIDER_VALUE_JS % (label, label))
        out["url_toggled"] = json.loads(await dt.text(FOOTER_JS))["url"]
        assert await dt.text(app_timing.APPLY_JS) != "missing"
        while "percentile" not in json.loads(await dt.text(FOOTER_JS))["url"] and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await _settled(dt)
        out["url_applied"] = json.loads(await dt.text(FOOTER_JS))["url"]
    finally:
        dt.ws.close()
    return out


def test_browser_advanced_toggle_shows_the_fields_and_keeps_pending_edits(tmp_path):
    """In a real browser the toggle below the form reruns the page and draws the advanced fields; an
    edit in the form not yet applied survives that rerun, and the next Apply applies it together
    with the hidden field the URL set."""
    binary = find_chromium()
    if binary is None:
        pytest.skip("chromium is not installed (.ci/install_browser.sh installs Debian's chromium)")
    (tmp_path / "profile").mkdir()
    with streamlit_server(tmp_path) as base, chromium(binary, tmp_path / "profile") as devtools_http:
        coro = _advanced_toggle(devtools_http, base + "/?price=3")
        got = asyncio.run(asyncio.wait_for(coro, timeout=240))
    assert got["shown_before"] == "false" and got["shown_after"] == "true"
    assert got["slider"] == "91" and got["url_toggled"] == "?price=3", "the pending edit is not applied yet"
    assert got["url_applied"] == "?price=3&percentile=91"


@pytest.mark.slow
def test_browser_shows_verdict_and_saves_screenshot(tmp_path):
    """The screenshot goes to a temporary folder: `make test` leaves the work tree clean (issue 19);
    `python tests/test_app_browser.py` refreshes docs/screenshots/ on purpose."""
    if find_chromium() is None:
        pytest.skip("chromium is not installed (.ci/install_browser.sh installs Debian's chromium)")
    out = tmp_path / "app.png"
    before = 0.0
    (text,) = capture([None], ["app.png"], out_dir=tmp_path)
    assert "Verdict:" in text
    assert any(v in text for v in ("colocated", "disaggregated")), text[:500]
    assert "Traceback" not in text
    assert "ahead by at least" in text, "the verdict summary states the margin rule"
    assert "Apply" in text
    assert out.stat().st_mtime > before and out.stat().st_size > 20_000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


if __name__ == "__main__":
    wanted = sys.argv[1:]
    views = [None, *wanted]
    names = ["app.png"] + [f"app-{v.lower().replace(' ', '-')}.png" for v in wanted]
    for name, _ in zip(names, capture(views, names), strict=True):
        print("saved", SCREENSHOTS / name)
