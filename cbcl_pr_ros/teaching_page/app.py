"""The page's web application (aiohttp): static files, JSON actions, one websocket per open page.

Why aiohttp: one well-kept library gives the HTTP server, the websocket and the test client, with no
ASGI server or second websocket package beside it; it runs in its own thread with its own event
loop, so the ROS executor and the web server never block each other.

Safety (docs/teaching_page.md): bound to 127.0.0.1 unless configured; any other address needs an
access token, checked on every action and on the websocket; every request must call the page by a
name no website controls (:mod:`.guard`: no DNS rebinding); requests are at most 16 KiB and must
arrive within ``read_timeout_s``; idle or half-sent connections are closed after ``idle_timeout_s``;
actions are rate-limited per client and one teach runs at a time; a websocket or a POST from another
origin (scheme, name and port) is refused, and POST bodies must be JSON (a cross-site form cannot
send one without the browser asking first). No request is answered with a traceback.
"""
from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

from aiohttp import WSCloseCode, WSMsgType, web

from cbcl_pr_ros.teaching_page.client import Outcome, TeachingClient
from cbcl_pr_ros.teaching_page.guard import CLIENT_COOKIE, ClientBuckets, HostRule, origin_matches
from cbcl_pr_ros.teaching_page.requests import RequestError, parse_label, parse_rename, parse_teach
from cbcl_pr_ros.teaching_page.state import PageState

__all__ = ["PageConfig", "make_app", "PageServer", "is_loopback", "STATIC_DIR"]

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"
MAX_REQUEST_BYTES = 16 * 1024
MAX_PAGES = 256  # the most open pages (websockets) any configuration allows: each holds a socket and a task
_STATE = web.AppKey("page_state", PageState)
_CONFIG = web.AppKey("page_config", object)
_HUB = web.AppKey("page_hub", object)


def is_loopback(host: str) -> bool:
    """True for an address that only this machine reaches (127.0.0.0/8, ::1, 'localhost')."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class PageConfig:
    """Server settings, checked at construction: a non-loopback address without a token is refused."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8080, token: str = "", action_rate_hz: float = 2.0,
                 action_burst: float = 4.0, action_timeout_s: float = 90.0, host_names: Iterable[str] = (),
                 idle_timeout_s: float = 15.0, read_timeout_s: float = 10.0, max_pages: int = 8) -> None:
        if not 0 <= int(port) <= 65535:
            raise ValueError(f"port must be 0..65535, got {port}")
        if not host:
            raise ValueError("address must not be empty (127.0.0.1 keeps the page on this machine)")
        if not is_loopback(host) and len(token) < 8:
            raise ValueError(f"address {host!r} lets other machines open the page: set an access token of at "
                             "least 8 characters (parameter 'token'), or keep address 127.0.0.1")
        self.host, self.port, self.token = host, int(port), token
        self.action_rate_hz, self.action_burst = float(action_rate_hz), float(action_burst)
        self.action_timeout_s = float(action_timeout_s)
        self.hosts = HostRule(host, host_names)  # refuses a malformed name here, at start
        for name, v in (("idle_timeout_s", idle_timeout_s), ("read_timeout_s", read_timeout_s)):
            if not 0.0 < float(v) <= 3600.0:
                raise ValueError(f"{name} must be in (0, 3600] s, got {v!r}")
        self.idle_timeout_s, self.read_timeout_s = float(idle_timeout_s), float(read_timeout_s)
        if isinstance(max_pages, bool) or not 1 <= int(max_pages) <= MAX_PAGES:
            raise ValueError(f"max_pages must be 1..{MAX_PAGES}, got {max_pages!r}")
        self.max_pages = int(max_pages)


class _Hub:
    """Wakes the open pages when the state changes; runs on the server's event loop."""

    def __init__(self, state: PageState, client: TeachingClient, config: PageConfig) -> None:
        self.state, self.client, self.config = state, client, config
        self.loop: asyncio.AbstractEventLoop | None = None
        self.events: set[asyncio.Event] = set()
        self.sockets: set[web.WebSocketResponse] = set()  # closed first at shutdown (see make_app)
        self.clients = ClientBuckets(burst=config.action_burst)
        self.teaching = threading.Lock()
        self.teacher: tuple[str, float] = ("", 0.0)  # who holds ``teaching`` (client id or address), since when
        self.pages = 0  # open websockets, counted from before their handshake
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="page-action")

    def on_change(self, _kind: str) -> None:  # called from any thread
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # loop closing
                pass

    def _wake(self) -> None:
        for ev in self.events:
            ev.set()


def _json(ok: bool, message: str, status: int = 200) -> web.Response:
    return web.json_response({"ok": ok, "message": message}, status=status)


def _token_ok(request: web.Request, token: str) -> bool:
    if not token:
        return True
    given = request.headers.get("X-Access-Token") or request.query.get("token", "")
    try:
        sent = given.encode()
    except UnicodeEncodeError:  # header bytes that are not UTF-8 (kept as surrogates): no token of ours
        return False
    return hmac.compare_digest(sent, token.encode())


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:  # not a browser request (curl, a script): the Host rule and the token guard it
        return True
    return origin_matches(origin, request.headers.get("Host", ""))


@web.middleware
async def _guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    config: PageConfig = request.app[_CONFIG]  # type: ignore[assignment]
    path = request.path
    refusal = config.hosts.refusal(request.headers.get("Host"))
    if refusal:  # every route: a rebinding site must not even get the page's files
        return _json(False, refusal, 403)
    if path.startswith("/api/") or path == "/ws":
        if not _token_ok(request, config.token):
            return _json(False, "access token missing or wrong: open the page with ?token=...", 401)
        if not _same_origin(request):
            return _json(False, "requests from another site are refused", 403)
        if request.method == "POST" and request.content_type != "application/json":
            return _json(False, "send the request as JSON (Content-Type: application/json)", 415)
    try:
        resp = await handler(request)
    except web.HTTPRequestEntityTooLarge:
        return _json(False, f"request too large: the most is {MAX_REQUEST_BYTES // 1024} KiB", 413)
    except web.HTTPException:
        raise
    except Exception as exc:  # noqa: BLE001 - one line in the log, no traceback to the caller
        if path == "/ws":
            raise
        if isinstance(exc, OSError) and path.startswith("/static/"):  # a name the file system refuses
            return _json(False, "no such file", 404)  # (over 255 bytes): no file of ours, nothing to log
        log.warning("page request %s %s failed: %s", request.method, path[:60], type(exc).__name__)
        return _json(False, f"internal error ({type(exc).__name__}); nothing was changed", 500)
    resp.headers["Content-Security-Policy"] = ("default-src 'self'; img-src 'self' blob: data:; "
                                               "connect-src 'self'; frame-ancestors 'none'")
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def _index(request: web.Request) -> web.FileResponse:
    resp = web.FileResponse(STATIC_DIR / "index.html")
    hub: _Hub = request.app[_HUB]  # type: ignore[assignment]
    if not hub.clients.known(request.cookies.get(CLIENT_COOKIE)):  # this page's own action bucket
        cid = hub.clients.new_id(time.monotonic())
        if cid is not None:
            resp.set_cookie(CLIENT_COOKIE, cid, httponly=True, samesite="Strict", path="/")
    return resp


async def _no_content(_request: web.Request) -> web.Response:
    return web.Response(status=204)


async def _state(request: web.Request) -> web.Response:
    return web.json_response(request.app[_STATE].snapshot()[1])


async def _frame_jpeg(request: web.Request) -> web.Response:
    frame = request.app[_STATE].frame()
    if frame is None:
        return _json(False, "no camera picture yet", 404)
    return web.Response(body=frame.jpeg, content_type="image/jpeg")


class _SlowRequest(RequestError):
    """The body did not arrive in time: answered 408 and the connection closed."""


async def _read_json(request: web.Request, timeout_s: float) -> Any:
    try:
        text = await asyncio.wait_for(request.text(), timeout_s)
    except asyncio.TimeoutError:
        raise _SlowRequest(f"the request did not arrive within {timeout_s:g} s") from None
    except ConnectionResetError:  # the client closed before its body ended: its mistake, not ours to log
        raise _SlowRequest("the connection closed before the request arrived") from None
    except (UnicodeDecodeError, LookupError) as exc:  # LookupError: a charset Python does not know
        raise RequestError(f"the request is not valid JSON ({type(exc).__name__})") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than the parser goes
        raise RequestError(f"the request is not valid JSON ({type(exc).__name__})") from None


async def _run(request: web.Request, action: str, parse: Callable[[Any], Any],
               call: Callable[[TeachingClient, Any], Outcome], record: Callable[[PageState, Any, Outcome], None]
               ) -> web.Response:
    """Parse, rate-limit, call the robot in a worker thread, record the outcome for every page."""
    hub: _Hub = request.app[_HUB]  # type: ignore[assignment]
    try:
        parsed = parse(await _read_json(request, hub.config.read_timeout_s))
    except _SlowRequest as exc:
        resp = _json(False, str(exc), 408)
        resp.force_close()
        return resp
    except RequestError as exc:
        return _json(False, str(exc), 400)
    if not hub.clients.allow(request.cookies.get(CLIENT_COOKIE), request.remote or "", time.monotonic(),
                             hub.config.action_rate_hz):
        return _json(False, "too many requests: wait a moment and try again", 429)
    teach = action == "teach"
    cid = request.cookies.get(CLIENT_COOKIE)
    who = cid if cid and hub.clients.known(cid) else request.remote or ""  # as the rate buckets tell clients
    if teach and not hub.teaching.acquire(blocking=False):
        return _json(False, _teach_busy(hub, who), 429)
    if teach:
        hub.teacher = (who, time.monotonic())
    try:
        loop = asyncio.get_running_loop()
        try:
            outcome = await asyncio.wait_for(loop.run_in_executor(hub.pool, call, hub.client, parsed),
                                             hub.config.action_timeout_s)
        except asyncio.TimeoutError:
            outcome = Outcome(False, f"the robot did not answer within {hub.config.action_timeout_s:g} s")
        except Exception as exc:  # noqa: BLE001 - a robot-side fault must not end the server
            log.warning("page action %s failed: %s", action, exc)
            outcome = Outcome(False, f"the robot could not {action}: {type(exc).__name__}")
    finally:
        if teach:
            hub.teaching.release()
    record(hub.state, parsed, outcome)
    return _json(outcome.ok, outcome.message)


def _teach_busy(hub: _Hub, who: str) -> str:
    """Why a teach must wait: one teach runs at a time, maybe one another page started."""
    holder, since = hub.teacher
    left = max(0.0, hub.config.action_timeout_s - (time.monotonic() - since))
    if holder and holder == who:
        return "your teach is already running: wait for its answer"
    return (f"a teach started by another page is already running (one at a time): its answer comes within "
            f"{left:.0f} s; try again then")


def _teach_call(client: TeachingClient, req: Any) -> Outcome:
    if req.track_id is not None:
        return client.teach_track(req.label, req.track_id)
    return client.teach_box(req.label, req.box)


async def _teach(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    return await _run(request, "teach", lambda b: parse_teach(b, state.track_ids(), state.image_size()),
                      _teach_call, lambda s, r, o: s.record_teach(r.label, o.ok, o.message, o.track_id, o.box))


async def _rename(request: web.Request) -> web.Response:
    return await _run(request, "rename", parse_rename, lambda c, r: c.rename(*r),
                      lambda s, r, o: s.record_notice("rename", o.ok, o.message))


async def _forget(request: web.Request) -> web.Response:
    return await _run(request, "forget", parse_label, lambda c, r: c.forget(r),
                      lambda s, r, o: s.record_notice("forget", o.ok, o.message))


async def _point(request: web.Request) -> web.Response:
    return await _run(request, "point", parse_label, lambda c, r: c.point_at(r),
                      lambda s, r, o: s.record_notice("point", o.ok, o.message))


def _parse_nothing(body: Any) -> None:
    """An action without arguments still takes a JSON object (a form cannot send one)."""
    if not isinstance(body, dict):
        raise RequestError("the request must be a JSON object")


async def _look(request: web.Request) -> web.Response:
    return await _run(request, "look", _parse_nothing, lambda c, _r: c.look_at_table(),
                      lambda s, _r, o: s.record_notice("look", o.ok, o.message))


async def _place(request: web.Request) -> web.Response:
    return await _run(request, "place", _parse_nothing, lambda c, _r: c.place_objects(),
                      lambda s, _r, o: s.record_notice("place", o.ok, o.message))


async def _websocket(request: web.Request) -> web.StreamResponse:
    """One open page, while fewer than ``max_pages`` are open: each holds a socket and a task, and a
    script opening pages by the thousand would starve the real ones. Refused with 503 otherwise."""
    hub: _Hub = request.app[_HUB]  # type: ignore[assignment]
    if hub.pages >= hub.config.max_pages:
        return _json(False, f"too many pages open ({hub.pages} of at most {hub.config.max_pages}, max_pages): "
                            "close one and reload", 503)
    hub.pages += 1  # before the handshake: pages opened at once are counted while they wait for it
    try:
        return await _serve_page(hub, request)
    finally:
        hub.pages -= 1


async def _serve_page(hub: _Hub, request: web.Request) -> web.StreamResponse:
    """Push the state and the newest frame (JSON meta, then the JPEG as binary) to one page."""
    ws = web.WebSocketResponse(heartbeat=10.0, max_msg_size=4096)
    try:
        await ws.prepare(request)
    except ValueError:  # a handshake key that is not ASCII: aiohttp's base64 raises instead of a 400
        resp = _json(False, "not a websocket handshake", 400)
        resp.force_close()
        return resp
    wake = asyncio.Event()
    wake.set()
    hub.events.add(wake)
    hub.sockets.add(ws)

    async def drain() -> None:  # the page sends nothing we need; read so pings and close are handled
        async for msg in ws:
            if msg.type == WSMsgType.ERROR:
                break
        wake.set()

    reader = asyncio.create_task(drain())
    sent_version, sent_seq = -1, -1
    try:
        while not ws.closed:
            await wake.wait()
            wake.clear()
            if ws.closed:
                break
            version, snap = hub.state.snapshot()
            if version != sent_version:
                await ws.send_str(json.dumps(snap))
                sent_version = version
            frame = hub.state.frame()
            if frame is not None and frame.seq != sent_seq:
                await ws.send_str(json.dumps(frame.meta()))
                await ws.send_bytes(frame.jpeg)
                sent_seq = frame.seq
    except (ConnectionResetError, RuntimeError):  # page gone mid-send
        pass
    finally:
        hub.events.discard(wake)
        hub.sockets.discard(ws)
        reader.cancel()
        await ws.close()
    return ws


def make_app(state: PageState, client: TeachingClient, config: PageConfig | None = None) -> web.Application:
    """The application; call :meth:`_Hub.on_change` wiring via :class:`PageServer` (or tests)."""
    config = config or PageConfig()
    app = web.Application(middlewares=[_guard], client_max_size=MAX_REQUEST_BYTES)
    hub = _Hub(state, client, config)
    app[_STATE], app[_CONFIG], app[_HUB] = state, config, hub

    async def on_startup(_app: web.Application) -> None:
        hub.loop = asyncio.get_running_loop()
        state.add_listener(hub.on_change)

    async def on_shutdown(_app: web.Application) -> None:
        # before the server waits for its handlers: an open page's websocket never ends by itself,
        # and the wait for it held Ctrl-C past launch's grace period
        for ws in list(hub.sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"the robot's page is stopping")
        hub._wake()

    async def on_cleanup(_app: web.Application) -> None:
        state.remove_listener(hub.on_change)
        hub._wake()
        hub.pool.shutdown(wait=False, cancel_futures=True)

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    app.router.add_get("/", _index)
    app.router.add_get("/favicon.ico", _no_content)
    app.router.add_static("/static/", STATIC_DIR, follow_symlinks=False)
    app.router.add_get("/api/state", _state)
    app.router.add_get("/api/frame.jpg", _frame_jpeg)
    app.router.add_post("/api/teach", _teach)
    app.router.add_post("/api/rename", _rename)
    app.router.add_post("/api/forget", _forget)
    app.router.add_post("/api/point", _point)
    app.router.add_post("/api/look", _look)
    app.router.add_post("/api/place", _place)
    app.router.add_get("/ws", _websocket)
    return app


class PageServer:
    """Runs the application on its own thread and event loop; :meth:`start` returns once it listens."""

    def __init__(self, state: PageState, client: TeachingClient, config: PageConfig) -> None:
        self.config = config
        self.app = make_app(state, client, config)
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = config.port

    def start(self) -> None:
        """Bind and serve; OSError (address in use, ...) is raised here, in the caller's thread."""
        async def setup() -> None:
            # a short wait for running actions at shutdown (Ctrl-C must end the node within launch's grace
            # period); keepalive_timeout also closes a connection that never completes its request (half-open)
            self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=0.5,
                                         keepalive_timeout=self.config.idle_timeout_s)
            await self._runner.setup()
            site = web.TCPSite(self._runner, self.config.host, self.config.port)
            await site.start()
            server = getattr(site, "_server", None)
            if server is not None and server.sockets:
                self.port = server.sockets[0].getsockname()[1]

        self._loop.run_until_complete(setup())
        self._thread = threading.Thread(target=self._loop.run_forever, name="teaching-page", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}/"

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._runner is not None:
            fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            try:
                fut.result(timeout=5.0)
            except Exception as exc:  # noqa: BLE001 - best effort at shutdown
                log.debug("page cleanup: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5.0)
        self._thread = None
        self._loop.close()
