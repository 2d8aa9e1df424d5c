"""Who may talk to the page: the Host and Origin rules, and one rate bucket per client.

**Host.** A website the operator opens can point its own name at 127.0.0.1 (DNS rebinding): the
browser then sends that site's requests to the page as same-origin ones, with ``Host: evil.example``.
So every request (page, files, state, picture, websocket, actions) must name the page by a name no
website controls: an IP address (an address is not looked up, so it cannot be rebound; this covers
the address the page listens on), ``localhost`` (browsers never ask DNS for it), or one of the
operator's ``host_names``. Only the name is compared: a tunnel (``ssh -L 9000:localhost:8080``) may
change the port, and a rebinding site has to use the page's port anyway.

**Origin.** A browser request that carries an Origin must come from ``http://`` + the Host it sent,
scheme, name and port alike (the page serves plain http; an ``https`` or ``null`` origin is another
site).

**Clients.** Each page load gets a random client id in a cookie (HttpOnly, SameSite=Strict); each id
has its own action bucket, so one client's flood costs only that client's clicks. New ids are handed
out at a bounded rate and at most :data:`MAX_CLIENTS` are kept (the least recently used goes first),
so minting ids cannot multiply the total rate; requests without a known id (scripts, a browser that
refused the cookie) share one bucket per remote address.
"""
from __future__ import annotations

import ipaddress
import secrets
import threading
from collections import OrderedDict
from typing import Iterable
from urllib.parse import urlsplit

from cbcl_pr_ros.runtime.rate_limit import RateLimiter

__all__ = ["HostRule", "origin_matches", "ClientBuckets", "CLIENT_COOKIE", "MAX_CLIENTS"]

CLIENT_COOKIE = "cbcl_page_client"
MAX_CLIENTS = 256
_NEW_IDS_PER_S, _NEW_ID_BURST = 0.5, 8.0


def _split_host(value: str) -> tuple[str, int | None] | None:
    """(lower-case name without brackets, port or None) of a Host header or netloc; None if malformed."""
    if not value or any(c in value for c in "@/\\?# \t\r\n") or len(value) > 300:
        return None
    try:
        parts = urlsplit("//" + value)
        name, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number or out of range
        return None
    if not name:
        return None
    return name.lower(), port


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


class HostRule:
    """The names a request may call the page by (see the module's docstring)."""

    def __init__(self, address: str, extra_names: Iterable[str] = ()) -> None:
        self.address = address.strip("[]").lower()
        names = {n.strip().lower() for n in extra_names if n.strip()}
        bad = sorted(n for n in names if _split_host(n) is None or _split_host(n) != (n.strip("[]"), None))
        if bad:
            raise ValueError(f"host name {bad[0][:60]!r} is not a plain host name (no port, scheme or path)")
        self.names = frozenset(n.strip("[]") for n in names) | {self.address, "localhost"}

    def refusal(self, host_header: str | None) -> str:
        """"" when ``host_header`` names the page, else one sentence saying why not."""
        parsed = _split_host(host_header or "")
        if parsed is None:
            return "the request has no usable Host header"
        if parsed[0] in self.names or _is_ip(parsed[0]):
            return ""
        name = parsed[0]
        return (f"the page does not answer to the name {name[:60]!r}: open it by its address, or add the name "
                "to the parameter 'host_names'")


def origin_matches(origin: str, host_header: str) -> bool:
    """True when a browser's Origin is exactly ``http://`` + the request's Host (port 80 when absent)."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    if parts.scheme != "http" or parts.path or parts.query or parts.username or parts.password:
        return False
    mine, theirs = _split_host(host_header), _split_host(parts.netloc)
    if mine is None or theirs is None:
        return False
    return mine[0] == theirs[0] and (mine[1] or 80) == (theirs[1] or 80)


class ClientBuckets:
    """One :class:`RateLimiter` per client id (bounded, least recently used dropped first)."""

    def __init__(self, burst: float, max_clients: int = MAX_CLIENTS) -> None:
        self.burst, self.max_clients = float(burst), int(max_clients)
        self._buckets: OrderedDict[str, RateLimiter] = OrderedDict()
        self._anonymous: OrderedDict[str, RateLimiter] = OrderedDict()
        self._minting = RateLimiter(burst=_NEW_ID_BURST)
        self._lock = threading.Lock()

    def known(self, client_id: str | None) -> bool:
        with self._lock:
            return bool(client_id) and client_id in self._buckets

    def new_id(self, now_s: float) -> str | None:
        """A fresh client id with its own bucket, or None while ids are being asked for too fast."""
        if not self._minting.allow(now_s, _NEW_IDS_PER_S):
            return None
        cid = secrets.token_urlsafe(18)
        with self._lock:
            self._buckets[cid] = RateLimiter(burst=self.burst)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
        return cid

    def allow(self, client_id: str | None, remote: str, now_s: float, rate_hz: float) -> bool:
        """Spend one token of this client's bucket (an unknown id: the remote address's shared one)."""
        with self._lock:
            if client_id and client_id in self._buckets:
                self._buckets.move_to_end(client_id)
                bucket = self._buckets[client_id]
            else:
                bucket = self._anonymous.get(remote)
                if bucket is None:
                    bucket = self._anonymous[remote] = RateLimiter(burst=self.burst)
                self._anonymous.move_to_end(remote)
                while len(self._anonymous) > self.max_clients:
                    self._anonymous.popitem(last=False)
        return bucket.allow(now_s, rate_hz)
