"""Apply -> settled page in a real browser, split into the server's part and the browser's part.

Used by ``benchmarks/apply_app.py`` (figures in docs/app.md, "Responsiveness") and by the browser
test of the form (tests/test_app_browser.py). Every time is taken inside the page, on its own clock
(``performance.now()``), by a script that runs before the page's own scripts:

- a ``MutationObserver`` on the whole document keeps the time of the last DOM change; the page is
  *settled* when its footer is new, no script runs and no spinner shows, and the DOM then stays
  unchanged for ``QUIET_S``; the Apply's time is the click to the last DOM change (plotly's drawing
  included). The page is polled every ``POLL_S`` only to see whether it is done, so the polling
  does not steer the figure (it used to be the first 20 ms poll that saw the footer, and each poll
  forced a style and layout pass on the browser's busy core);
- the browser's network events (DevTools ``Network`` domain, the network service's clock, not the
  page's busy main thread) give the Apply's *server* part: from the rerun request leaving the
  browser to the run's ``script_finished`` message arriving (the server's page run, Streamlit's
  work around it and the messages' transport); the rest of the click-to-settled time is the
  *browser*'s (the click, and rendering what the run sent, whose messages are counted too).
"""

from __future__ import annotations

import asyncio
import base64
import json
import tempfile
import time
import urllib.parse
from pathlib import Path

from tests.test_app_browser import (
    FOOTER_JS,
    DevTools,
    _open,
    _settled,
    chromium,
    find_chromium,
    streamlit_server,
)

POLL_S = 0.1
QUIET_S = 0.4
SMALL_MESSAGE_BYTES = 256  # script_finished is ~44 bytes (its frame is decoded only when this small)

TIMING_JS = """(() => {
  const pd = window.__pdplanTiming = {last: 0};
  new MutationObserver(() => { pd.last = performance.now(); })
    .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
})()"""
SLIDER_JS = """(() => {
  const s = [...document.querySelectorAll('[data-testid="stSlider"]')]
    .find(e => e.innerText.trim().startsWith(%s) ||
               (e.querySelector("label") || {innerText: ""}).innerText.includes(%s));
  const thumb = s && s.querySelector('input[type="range"], [role="slider"]');
  if (!thumb) return "missing";
  thumb.focus();
  return document.activeElement === thumb ? "focused" : "not focused";
})()"""
SLIDER_VALUE_JS = """(() => {
  const s = [...document.querySelectorAll('[data-testid="stSlider"]')]
    .find(e => e.innerText.trim().startsWith(%s) ||
               (e.querySelector("label") || {innerText: ""}).innerText.includes(%s));
  const thumb = s && s.querySelector('input[type="range"], [role="slider"]');
  return thumb ? String(thumb.getAttribute("aria-valuenow") || thumb.value) : "missing";
})()"""
APPLY_JS = """(() => {
  const b = [...document.querySelectorAll('[data-testid="stBaseButton-primaryFormSubmit"], button')]
    .find(e => e.innerText.trim() === "Apply");
  if (!b) return "missing";
  const t = performance.now();
  b.click();
  return String(t);
})()"""
LAST_CHANGE_JS = "JSON.stringify([window.__pdplanTiming.last, performance.now()])"


async def _press(dt: DevTools, key: str, code: str, key_code: int) -> None:
    for kind in ("rawKeyDown", "keyUp"):
        await dt.call(
            "Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=key_code,
            nativeVirtualKeyCode=key_code,
        )  # fmt: skip


def message_kind(raw: bytes) -> str:
    """The type of one Streamlit ForwardMsg ("script_finished", "delta", ...)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    try:
        return ForwardMsg.FromString(raw).WhichOneof("type") or ""
    except Exception:  # a frame that is not a whole ForwardMsg
        return ""


def split(total_s: float, events: list[dict]) -> dict:
    """The Apply's server part (network clock: the first websocket frame the browser sent after the
    click, the rerun request, to the ``script_finished`` frame it received) and browser part (the
    rest of ``total_s``), with the bytes and number of the frames received."""
    sent = [e["params"]["timestamp"] for e in events if e.get("method") == "Network.webSocketFrameSent"]
    received = [e["params"] for e in events if e.get("method") == "Network.webSocketFrameReceived"]
    sizes = [len(base64.b64decode(p["response"]["payloadData"])) for p in received]
    finished = [
        p["timestamp"]
        for p, n in zip(received, sizes, strict=True)
        if n <= SMALL_MESSAGE_BYTES
        and message_kind(base64.b64decode(p["response"]["payloadData"])) == "script_finished"
    ]
    server_s = finished[-1] - sent[0] if sent and finished else float("nan")
    return {"server_s": server_s, "browser_s": total_s - server_s, "message_bytes": sum(sizes),
            "messages": len(received)}  # fmt: skip


async def _wait_settled(dt: DevTools, before: str, click_ms: float, timeout_s: float) -> tuple[dict, float]:
    """Poll (every POLL_S) until the footer is new, nothing runs and no spinner shows, then until the
    DOM has been still for QUIET_S; (page state, time of the last DOM change in page ms)."""
    t0 = time.monotonic()
    while True:
        state = json.loads(await dt.text(FOOTER_JS))
        new = state["footer"] and state["footer"] != before
        if new and not state["running"] and not state["spinners"]:
            break
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"no re-render within {timeout_s:.0f} s")
        await asyncio.sleep(POLL_S)
    while True:
        last_ms, now_ms = json.loads(await dt.text(LAST_CHANGE_JS))
        if now_ms - max(last_ms, click_ms) >= QUIET_S * 1e3 or time.monotonic() - t0 > timeout_s:
            return json.loads(await dt.text(FOOTER_JS)), max(last_ms, click_ms)
        await asyncio.sleep(POLL_S)


async def apply_change(dt: DevTools, slider_label: str, press: str) -> dict:
    """Move a sidebar slider one step (in the form: nothing is sent), then click Apply; the seconds
    from the click to the settled page (the last DOM change), split into server and browser
    (:func:`split`), and the URL query and footer before and after Apply."""
    keys = {"right": ("ArrowRight", "ArrowRight", 39), "left": ("ArrowLeft", "ArrowLeft", 37)}
    before = json.loads(await dt.text(FOOTER_JS))
    label = json.dumps(slider_label)
    deadline = time.monotonic() + 20.0  # a loaded machine can be slow to draw the sidebar again
    while (focused := await dt.text(SLIDER_JS % (label, label))) != "focused":
        if time.monotonic() > deadline:
            raise RuntimeError(f"slider {slider_label!r}: {focused}")
        await asyncio.sleep(0.2)
    value = await dt.text(SLIDER_VALUE_JS % (label, label))
    await _press(dt, *keys[press])
    await asyncio.sleep(0.5)
    if value == "missing" or await dt.text(SLIDER_VALUE_JS % (label, label)) == value:
        raise RuntimeError(f"slider {slider_label!r} did not move from {value}")
    edited = json.loads(await dt.text(FOOTER_JS))
    dt.events = []
    clicked = await dt.text(APPLY_JS)
    if clicked == "missing":
        raise RuntimeError("no Apply button")
    click_ms = float(clicked)
    state, settled_ms = await _wait_settled(dt, before["footer"], click_ms, 60.0)
    events, dt.events = dt.events, None
    total_s = (settled_ms - click_ms) / 1e3
    return {
        "seconds": total_s,
        **split(total_s, events),
        "url_before": before["url"],
        "url_edited": edited["url"],
        "footer_edited": edited["footer"],
        "footer_before": before["footer"],
        "footer_after": state["footer"],
        "url_after": state["url"],
    }


async def _measure(
    devtools_http: str, url: str, slider_label: str, presses: list[str]
) -> list[tuple[str, dict]]:
    dt, first = await _open(devtools_http, url, init_js=TIMING_JS)
    out: list[tuple[str, dict]] = [("first load (cold server)", {"seconds": first})]
    try:
        await dt.call("Network.enable")
        await _settled(dt)
        await asyncio.sleep(2.0)
        for press in presses:
            out.append((press, await apply_change(dt, slider_label, press)))
            await asyncio.sleep(1.0)
    finally:
        dt.ws.close()
    return out


def measure(
    slider_label: str = "Percentile",
    presses: tuple[str, ...] = ("right", "left", "right", "left"),
    query: dict[str, str] | None = None,
    cpus: tuple[str | None, str | None] = (None, None),
) -> list[tuple[str, dict]]:
    """Browser-side times from Apply to the settled page after slider steps (a value not seen
    before: a new plan; a value seen before: cached). ``query`` sets the scenario by URL; ``cpus``
    pins the server and the browser to cores (``taskset -c`` lists, None: not pinned)."""
    binary = find_chromium()
    if binary is None:
        raise RuntimeError("chromium is not installed (run .ci/install_browser.sh)")
    with tempfile.TemporaryDirectory(prefix="pdplan-browser-") as tmp:
        tmp_path = Path(tmp)
        profile = tmp_path / "profile"
        profile.mkdir()
        with (
            streamlit_server(tmp_path, cpus[0]) as base,
            chromium(binary, profile, cpus[1]) as devtools_http,
        ):
            url = base + "/" + (("?" + urllib.parse.urlencode(query)) if query else "")
            coro = _measure(devtools_http, url, slider_label, list(presses))
            return asyncio.run(asyncio.wait_for(coro, timeout=600))
