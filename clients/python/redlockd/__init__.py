"""A client of redlockd, the lock-proxy daemon, with the standard library only.

One :class:`Client` is one connection, and one connection is one session:
the session-mode locks it takes live as long as it does, the daemon renews
them, and closing the connection (or losing it) releases them.  Nothing here
reconnects silently: a lost connection ends every lock of the session, and
each :class:`Lock` says so through :attr:`Lock.lost` and its ``on_lost``
callback.

The protocol (lines, replies, ``!`` pushes) is specified in the daemon's
``proto/PROTOCOL.md``; the words and error codes here are its words::

    import redlockd

    with redlockd.Client("127.0.0.1:7379") as client:
        with client.lock("nightly", timeout=5) as lk:
            run_the_job()           # check lk.lost.is_set() between steps

``async with client.lock(...)`` works the same in asyncio (each blocking
call runs in a thread of its own).

A background thread reads the connection: replies go to the request that
waits for them, ``! LOST`` marks the lock lost and calls its callback (in
that thread: keep it short), ``! HELD`` and ``! FREE`` go to the watches.
"""

import asyncio
import concurrent.futures
import os
import queue
import select
import socket
import ssl
import threading

__all__ = [
    "Client", "Lock", "LockSet", "Lease", "LeaseSet", "Event", "Checked", "RedlockdError", "Busy",
    "Timeout",
    "NoQuorum", "Denied", "ProtocolError", "LimitError", "AuthError", "KindError",
    "ShuttingDown", "ConnectionLost", "NotHeld",
]

__version__ = "0.1.0"

# Where a Client goes without an address or environment, in this order, as
# redlockctl does: the daemon's Unix socket when a connection to it
# succeeds, else its TCP address.
DEFAULT_SOCKET = "/run/redlockd/redlockd.sock"
DEFAULT_ADDRESS = "127.0.0.1:7379"

# The protocol's bounds (proto/PROTOCOL.md): the client checks them before
# sending, and says which one an argument broke.
NAME_MAX = 250          # bytes of a lock name, a LIST prefix, a password
LABEL_MAX = 64          # bytes of a holder label (label=)
TOKEN_LEN = 32          # lowercase hex digits of a lease's token
LIMIT_MAX = 1000        # permits of a counted hold (lock.max_limit is at most this)
TTL_MAX = 4000000000000  # ms, the largest number the protocol reads
FENCE_MAX = 4000000000000  # the largest fence CHECK reads (fence=)
PERMIT_MAX = 999        # the largest permit CHECK reads (permit=)
SET_MAX = 64            # names of one set (LOCK n1 .. nk)


class RedlockdError(Exception):
    """An ``ERR <CODE> <text>`` reply, or a failure of the connection.

    ``code`` is the protocol's code (``"NOQUORUM"``), ``text`` the daemon's
    text, meant for people.
    """

    def __init__(self, code, text):
        super().__init__(f"{code} {text}" if text else code)
        self.code = code
        self.text = text


class Busy(RedlockdError):
    """A try (``timeout=0``) found the name held: ``BUSY <name> ttl=MS``.

    ``ttl`` is the holder's time left (ms, as the reply says), and
    ``delayed`` the time left of a lock-delay (``BUSY <name> ttl=MS
    delayed=MS``: nobody holds the name, but its last holder's hold ended
    without UNLOCK), ``None`` when the refusal is no delay.
    """

    def __init__(self, code, text):
        super().__init__(code, text)
        f = _fields(text.split(" "))
        self.ttl = f.get("ttl")
        self.delayed = f.get("delayed")


class Timeout(RedlockdError):
    """The lock was not granted within ``timeout``: ``TIMEOUT <name>``."""


class NotHeld(RedlockdError):
    """The session (or the token) does not hold the name: ``NOTHELD <name>``."""


class NoQuorum(RedlockdError):
    """Fewer than a quorum of masters answered (``ERR NOQUORUM``)."""


class Denied(RedlockdError):
    """The request needs the admin right (``ERR DENIED``)."""


class ProtocolError(RedlockdError):
    """A malformed request, or a reply this client cannot read."""


class LimitError(RedlockdError):
    """A limit of the daemon refused the request or the connection (``ERR LIMIT``)."""


class AuthError(RedlockdError):
    """AUTH is needed, or the password was wrong (``ERR AUTH``)."""


class KindError(RedlockdError):
    """The name is held as another kind of hold (``ERR KIND``)."""


class ShuttingDown(RedlockdError):
    """The daemon is stopping (``ERR SHUTDOWN``)."""


class ConnectionLost(RedlockdError):
    """The connection ended: every session-mode lock of it is gone."""


_ERRORS = {
    "NOQUORUM": NoQuorum, "DENIED": Denied, "PROTO": ProtocolError,
    "UNKNOWN": ProtocolError, "TOOLONG": ProtocolError, "TIMEOUT": ProtocolError,
    "LIMIT": LimitError, "AUTH": AuthError, "KIND": KindError, "SHUTDOWN": ShuttingDown,
}


def _fields(words):
    """The ``key=value`` words of a reply as a dict (numbers as int)."""
    out = {}
    for w in words:
        key, eq, value = w.partition("=")
        if not eq:
            continue
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


def _check_word(what, value, longest=NAME_MAX):
    """value, when it is one word of 1 to ``longest`` bytes, each printable
    ASCII but the space (0x21 to 0x7e); else ValueError (TypeError when it
    is no str) saying what is wrong and the bound.  The value itself is
    not repeated (it may be a password)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    raw = value.encode()
    if not raw:
        raise ValueError(f"{what} is empty; it must be 1 to {longest} bytes")
    if len(raw) > longest:
        raise ValueError(f"{what} is {len(raw)} bytes; at most {longest}")
    for i, b in enumerate(raw):
        if b == 0x20:
            raise ValueError(f"{what} contains a space (at byte {i}); it must be one word "
                             "of printable ASCII (0x21 to 0x7e)")
        if not 0x21 <= b <= 0x7e:
            raise ValueError(f"{what} has byte 0x{b:02x} at offset {i}; it must be "
                             "printable ASCII (0x21 to 0x7e) without spaces")
    return value


def _check_names(names):
    """names (a list or tuple of str) as a tuple, when it is 1 to SET_MAX
    lock names, none given twice; else TypeError or ValueError."""
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
        raise TypeError(f"names must be a list of str, not {type(names).__name__}")
    if not 1 <= len(names) <= SET_MAX:
        raise ValueError(f"a set of {len(names)} names; it must be 1 to {SET_MAX}")
    seen = set()
    for n in names:
        _check_word("lock name", n)
        if n in seen:
            raise ValueError(f"lock name {n!r} is given twice")
        seen.add(n)
    return tuple(names)


def _name_words(name):
    """What a request names: one lock name (a str), or a set of them (a
    list or tuple) as its words joined by spaces."""
    if isinstance(name, (list, tuple)):
        return " ".join(_check_names(name))
    return _check_word("lock name", name)


def _fences(value):
    """The fences of a set's reply (``fence=F1,F2``) as a list of int; None without."""
    if value is None:
        return None
    return [int(v) for v in str(value).split(",")]


def _push_names(words):
    """The names of a push (``! LOST a b c reason=...``): the words after
    the kind, up to the first ``key=value``."""
    out = []
    for w in words[2:]:
        if "=" in w:
            break
        out.append(w)
    return out


def _check_token(token):
    """token, when it is 32 lowercase hex digits; else TypeError or ValueError."""
    if not isinstance(token, str):
        raise TypeError(f"token must be a str, not {type(token).__name__}")
    if len(token) != TOKEN_LEN:
        raise ValueError(f"token is {len(token)} characters; it must be {TOKEN_LEN} "
                         "lowercase hex digits (as the lease's grant gave it)")
    for i, c in enumerate(token):
        if c not in "0123456789abcdef":
            raise ValueError(f"token has {c!r} at offset {i}; it must be {TOKEN_LEN} "
                             "lowercase hex digits (as the lease's grant gave it)")
    return token


def _check_number(what, value, lowest, highest, unit=""):
    """value as an int, when it is a number from lowest to highest; else
    TypeError or ValueError naming the range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    n = int(value)
    if not lowest <= n <= highest:
        raise ValueError(f"{what} is {value}{unit}; it must be {lowest} to {highest}{unit}")
    return n


def _in_thread(fn):
    """Run fn in a daemon thread of its own: a concurrent Future of its result."""
    cf = concurrent.futures.Future()

    def run():
        if not cf.set_running_or_notify_cancel():
            return
        try:
            cf.set_result(fn())
        except BaseException as e:     # handed to the waiter
            cf.set_exception(e)

    threading.Thread(target=run, name="redlockd-call", daemon=True).start()
    return cf


class Event:
    """A state a watch reported: ``held`` (bool), ``name`` and the push's fields."""

    def __init__(self, name, held, fields):
        self.name = name
        self.held = held
        self.fields = fields

    def __repr__(self):
        return f"Event({self.name!r}, held={self.held}, {self.fields!r})"


class Lock:
    """A session-mode hold: a context manager that takes it and releases it.

    ``lost`` is a :class:`threading.Event` set when the daemon says the lock
    is gone (``! LOST``), or the connection ends; ``lost_reason`` then says
    why (``renew``, ``quorum``, ``gone``, ``shutdown``, ``broken``,
    ``connection``).  ``fence`` is the grant's fencing token (with
    ``fence=True``), ``validity`` the ms the daemon reported left,
    ``holds`` the session's holds on the name (taking it again adds one;
    every Lock of the name is told when it is lost), 0 once this one is
    released or lost.
    """

    def __init__(self, client, name, timeout, ttl, shared, limit, fence, label, on_lost,
                 delay=None):
        self._client = client
        self.name = _check_word("lock name", name)
        self.names = (self.name,)
        self.timeout = timeout
        self.ttl = ttl
        self.shared = shared
        self.limit = limit
        self.want_fence = fence
        self.label = label
        self.delay = delay
        self.on_lost = on_lost
        self.lost = threading.Event()
        self.lost_reason = None
        self.fence = None
        self.validity = None
        self.holds = 0
        self.permit = None

    def acquire(self):
        """Take the lock (LOCK, or TRYLOCK for ``timeout=0``); raise on refusal."""
        self._client._acquire(self)
        return self

    def release(self):
        """Release one hold (UNLOCK); raise :class:`NotHeld` when it was lost."""
        self._client._release(self)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, exc_type, exc, tb):
        if self.lost.is_set() or self._client.closed:
            return False
        self.release()
        return False

    async def __aenter__(self):
        """``async with``: the blocking LOCK runs in a thread of its own.
        A task cancelled while it waits gets nothing, and a grant that
        arrives after the cancellation is released at once."""
        cf = _in_thread(self.acquire)
        try:
            return await asyncio.wrap_future(cf)
        except asyncio.CancelledError:
            cf.add_done_callback(self._release_late_grant)
            raise

    async def __aexit__(self, exc_type, exc, tb):
        if self.lost.is_set() or self._client.closed:
            return False
        await asyncio.wrap_future(_in_thread(self.release))
        return False

    async def wait_lost(self):
        """Wait (in asyncio) until the lock is lost; returns the reason."""
        await asyncio.wrap_future(_in_thread(self.lost.wait))
        return self.lost_reason

    def _release_late_grant(self, fut):
        if fut.cancelled() or fut.exception() is not None:
            return
        try:
            self.release()
        except RedlockdError:
            pass

    def _mark_lost(self, reason):
        if self.lost.is_set():
            return
        self.lost_reason = reason
        self.lost.set()
        if self.on_lost is not None:
            self.on_lost(self)


class LockSet(Lock):
    """A session-mode hold of several names at once (``LOCK a b c``), made
    by :meth:`Client.lock_many`: granted when this session holds every
    name on a quorum of masters, never a part of them.

    It is one hold: ``release()`` releases every name, and losing any name
    loses the set (the daemon releases the others and sends one ``! LOST``
    naming the set): ``lost`` is set once, ``on_lost`` called once.
    ``names`` is the tuple of names in the order given, ``fences`` (with
    ``fence=True``) their fencing tokens in that order; ``name`` is the
    names joined by spaces, as the protocol's lines write them.
    """

    def __init__(self, client, names, timeout, ttl, fence, label, on_lost, delay=None):
        names = _check_names(names)
        super().__init__(client, names[0], timeout, ttl, False, None, fence, label, on_lost,
                         delay)
        self.names = names
        self.name = " ".join(names)
        self.fences = None

    def __repr__(self):
        return f"LockSet({list(self.names)!r}, holds={self.holds}, fences={self.fences})"


class Checked:
    """The answer of :meth:`Client.check`: true when the grant is current.

    ``current`` (bool); ``ttl``, when current, the ms it stays on a
    quorum unless renewed (-1: no expiry); ``reason``, when stale,
    ``"free"`` (nobody holds the name: released, expired or broken),
    ``"other"`` (another grant holds it) or ``"mixed"`` (the masters
    disagree).
    """

    def __init__(self, name, current, reason, ttl):
        self.name = name
        self.current = current
        self.reason = reason
        self.ttl = ttl

    def __bool__(self):
        return self.current

    def __repr__(self):
        if self.current:
            return f"Checked({self.name!r}, current, ttl={self.ttl})"
        return f"Checked({self.name!r}, stale, reason={self.reason!r})"


class Lease:
    """A lease-mode grant: it belongs to no connection, only to its token."""

    def __init__(self, name, token, validity, fence):
        self.name = name
        self.token = token
        self.validity = validity
        self.fence = fence

    def __repr__(self):
        return f"Lease({self.name!r}, token={self.token!r}, validity={self.validity})"


class LeaseSet:
    """A lease-mode grant of several names (:meth:`Client.lease_many`): one
    token for the whole set; ``fences`` in the order of ``names``."""

    def __init__(self, names, token, validity, fences):
        self.names = names
        self.token = token
        self.validity = validity
        self.fences = fences

    def __repr__(self):
        return (f"LeaseSet({list(self.names)!r}, token={self.token!r}, "
                f"validity={self.validity})")


def _env_address():
    """The address of $REDLOCKD_SOCKET, else $REDLOCKD_ADDR; None without both."""
    return os.environ.get("REDLOCKD_SOCKET") or os.environ.get("REDLOCKD_ADDR") or None


class Client:
    """One connection to redlockd, which is one session.

    ``address`` is ``"host:port"``, ``"[v6]:port"``, ``"unix:/path"`` or a
    path (``/run/redlockd/redlockd.sock``); without it ``$REDLOCKD_SOCKET``,
    else ``$REDLOCKD_ADDR``, else the Unix socket ``DEFAULT_SOCKET``
    (``/run/redlockd/redlockd.sock``) when a connection to it succeeds,
    else ``DEFAULT_ADDRESS`` (``127.0.0.1:7379``), as redlockctl does;
    with TLS, ``$REDLOCKD_ADDR`` else ``127.0.0.1:7379``.  ``address``
    then says where it connected.  ``password`` (else
    ``$REDLOCKD_PASSWORD``) is sent with AUTH first.  ``tls=True`` (or an
    ``ssl.SSLContext``) speaks TLS, verifying the daemon against ``cafile``
    (else the system's CAs) and presenting ``certfile``/``keyfile`` when
    given.  ``timeout`` bounds connecting and each reply that needs no wait
    for a lock (seconds).
    """

    def __init__(self, address=None, *, password=None, tls=False, cafile=None,
                 certfile=None, keyfile=None, server_hostname=None, timeout=10.0):
        self.timeout = timeout
        self.closed = False
        if address is None and tls:
            # TLS is for a TCP address: no Unix socket is tried.
            address = os.environ.get("REDLOCKD_ADDR") or DEFAULT_ADDRESS
        address = address or _env_address()
        if address:
            self._sock = self._connect(address, tls, cafile, certfile, keyfile,
                                       server_hostname)
        else:
            address = "unix:" + DEFAULT_SOCKET
            try:
                self._sock = self._connect(address, tls, cafile, certfile, keyfile,
                                           server_hostname)
            except OSError as e:
                address = DEFAULT_ADDRESS
                try:
                    self._sock = self._connect(address, tls, cafile, certfile, keyfile,
                                               server_hostname)
                except OSError as e2:
                    raise ConnectionRefusedError(
                        e2.errno, f"cannot connect to redlockd: {DEFAULT_SOCKET}: "
                        f"{e.strerror or e}; {DEFAULT_ADDRESS}: {e2.strerror or e2}") from e2
        self.address = address
        self._request_lock = threading.Lock()   # one request at a time
        # The socket is non-blocking and every recv and send holds _io_lock:
        # an SSL object must not be read and written by two threads at
        # once (OpenSSL's rule), and here the reader thread reads while
        # callers write.  Waiting for the socket happens outside the lock.
        self._io_lock = threading.Lock()
        self._replies = queue.Queue()
        # name -> the Locks (one per hold) of this session.  A grant is
        # entered here by the reader thread as it reads the reply, before
        # the next line: a "! LOST" right behind the OK finds it.
        self._locks = {}
        self._on_reply = None                   # the request's hook, run by the reader
        self._watches = {}                      # name -> queue.Queue of Event
        self._state_lock = threading.Lock()     # _locks and _watches
        self._reader = threading.Thread(target=self._read_loop, name="redlockd-reader",
                                        daemon=True)
        self._reader.start()
        if password is None:
            password = os.environ.get("REDLOCKD_PASSWORD") or None
        if password:
            try:
                self._command("AUTH " + _check_word("password", password))
            except BaseException:
                self.close()
                raise

    # ---- connection ----

    def _connect(self, address, tls, cafile, certfile, keyfile, server_hostname):
        if address.startswith("unix:") or address.startswith("/"):
            path = address[5:] if address.startswith("unix:") else address
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(path)
            except BaseException:
                sock.close()
                raise
            host = None
        else:
            host, sep, port = address.rpartition(":")
            if not sep or not port.isdigit():
                raise ValueError(f"address {address!r}: expected host:port or unix:/path")
            host = host[1:-1] if host.startswith("[") else host
            sock = socket.create_connection((host, int(port)), timeout=self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            ctx = tls if isinstance(tls, ssl.SSLContext) else ssl.create_default_context(
                cafile=cafile)
            if certfile and not isinstance(tls, ssl.SSLContext):
                ctx.load_cert_chain(certfile, keyfile)
            sock = ctx.wrap_socket(sock, server_hostname=server_hostname or host)
        sock.setblocking(False)
        return sock

    def _wait(self, events, timeout):
        """Wait until the socket is ready for events (select.POLLIN or
        POLLOUT); False when timeout (seconds, None: for ever) passed."""
        p = select.poll()
        p.register(self._sock, events)
        return bool(p.poll(None if timeout is None else int(timeout * 1000)))

    def _recv(self):
        """Some bytes from the daemon (b"" at its end), waiting for ever."""
        while True:
            with self._io_lock:
                try:
                    return self._sock.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    events = select.POLLIN
                except ssl.SSLWantWriteError:
                    events = select.POLLOUT
            self._wait(events, None)

    def _send(self, data):
        """Send all of data, each wait for the socket bounded by the
        client's timeout (ConnectionLost when it passes)."""
        view = memoryview(data)
        while view:
            with self._io_lock:
                try:
                    view = view[self._sock.send(view):]
                    continue
                except (ssl.SSLWantWriteError, BlockingIOError):
                    events = select.POLLOUT
                except ssl.SSLWantReadError:
                    events = select.POLLIN
            if not self._wait(events, self.timeout):
                self.close()
                raise ConnectionLost("TIMEOUT", "the daemon did not take the request in "
                                     "time; closed the connection")

    def close(self):
        """Close the connection: the session ends and its locks are released."""
        self.closed = True
        if self._sock.fileno() < 0:
            return
        with self._io_lock:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        if self._reader is not threading.current_thread():
            self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def _read_loop(self):
        buf = b""
        try:
            while True:
                data = self._recv()
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self._dispatch(line.decode("ascii", "replace"))
        except (OSError, ValueError):
            pass
        self._ended()

    def _dispatch(self, line):
        words = line.split(" ")
        if words[0] != "!":
            hook, self._on_reply = self._on_reply, None
            if hook is not None and words[0] != "ERR":
                hook(words)
            self._replies.put(words)
            return
        if len(words) < 3:
            return
        kind, name = words[1], words[2]
        if kind == "LOST":
            # One push names a whole set: each Lock is told once, though
            # a LockSet is entered under every name of its set.
            names = _push_names(words)
            reason = _fields(words[2 + len(names):]).get("reason", "unknown")
            held = []
            with self._state_lock:
                for n in names:
                    for lk in self._locks.pop(n, []):
                        if lk not in held:
                            held.append(lk)
                for lk in held:
                    for n in lk.names:
                        rest = [o for o in self._locks.get(n, []) if o is not lk]
                        if rest:
                            self._locks[n] = rest
                        else:
                            self._locks.pop(n, None)
            for lk in held:
                lk.holds = 0
                lk._mark_lost(reason)
        elif kind in ("HELD", "FREE"):
            with self._state_lock:
                q = self._watches.get(name)
            if q is not None:
                q.put(Event(name, kind == "HELD", _fields(words[3:])))

    def _ended(self):
        """The connection is gone: every lock with it, every waiter told."""
        self.closed = True
        with self._state_lock:
            locks = []
            for held in self._locks.values():
                locks += [lk for lk in held if lk not in locks]
            self._locks = {}
            watches = list(self._watches.values())
        for lk in locks:
            lk._mark_lost("connection")
        for q in watches:
            q.put(None)
        self._replies.put(None)

    # ---- requests ----

    def _command(self, line, wait=None, multi=False, on_reply=None):
        """Send one request line and return the reply's words (with
        ``multi``, the lines up to END, without it); raise on ERR.  ``wait``:
        seconds for the reply (default: the client's timeout).
        ``on_reply(words)`` (single-line replies only) runs in the reader
        thread as the reply is read, an ERR aside, before any line after it."""
        with self._request_lock:
            if self.closed:
                raise ConnectionLost("CLOSED", "the connection is closed")
            self._on_reply = on_reply
            self._send(line.encode() + b"\n")
            lines = []
            while True:
                try:
                    words = self._replies.get(timeout=wait if wait is not None else self.timeout)
                except queue.Empty:
                    self.close()    # a reply may still come: the connection is out of step
                    raise ConnectionLost("TIMEOUT", f"no reply to {line.split(' ')[0]} in "
                                         "time; closed the connection") from None
                if words is None:
                    raise ConnectionLost("CLOSED", "the daemon closed the connection")
                if words[0] == "ERR":
                    code = words[1] if len(words) > 1 else ""
                    raise _ERRORS.get(code, RedlockdError)(code, " ".join(words[2:]))
                if not multi:
                    return words
                if words[0] == "END":
                    return lines
                lines.append(words)

    @staticmethod
    def _opts(ttl=None, shared=False, limit=None, fence=False, label=None, delay=None):
        out = []
        if ttl is not None:
            out.append(f"ttl={_check_number('ttl', ttl, 1, TTL_MAX, ' ms')}")
        if fence:
            out.append("fence")
        if shared:
            out.append("shared")
        if limit is not None:
            out.append(f"limit={_check_number('limit', limit, 1, LIMIT_MAX)}")
        if label is not None:
            out.append("label=" + _check_word("label", label, LABEL_MAX))
        if delay is not None:
            out.append(f"delay={_check_number('delay', delay, 0, TTL_MAX, ' ms')}")
        return out

    def _take(self, name, timeout, opts, lease=False, on_reply=None):
        """LOCK or TRYLOCK; the OK reply's fields, or Busy/Timeout raised."""
        if timeout == 0:
            words = ["TRYLOCK", name] + opts
            wait = self.timeout
        elif timeout is None:
            words = ["LOCK", name, "wait=inf"] + opts
            wait = threading.TIMEOUT_MAX     # the reply comes when the lock does
        else:
            words = ["LOCK", name, f"wait={int(timeout * 1000)}"] + opts
            wait = timeout + self.timeout
        if lease:
            words.append("mode=lease")
        reply = self._command(" ".join(words), wait=wait, on_reply=on_reply)
        status = reply[0]
        if status == "BUSY":
            raise Busy("BUSY", " ".join(reply[1:]))
        if status == "TIMEOUT":
            raise Timeout("TIMEOUT", " ".join(reply[1:]))
        if status != "OK":
            raise ProtocolError("REPLY", " ".join(reply))
        return _fields(reply[2:])

    def lock(self, name, timeout=None, ttl=None, shared=False, limit=None, fence=False,
             label=None, on_lost=None, delay=None):
        """A session-mode :class:`Lock` to use with ``with`` (or acquire()).

        ``timeout``: seconds to wait (None: for ever; 0: one try, Busy when
        held).  ``ttl`` (ms) is the lease the daemon renews; ``shared`` or
        ``limit=N`` ask for a shared or counted hold; ``fence`` a fencing
        token; ``label`` names the holder for LIST, STATUS and WATCH.
        ``on_lost(lock)`` runs in the reader thread when the lock is lost.
        ``delay`` (ms) is a lock-delay: when the hold ends without a
        release (the connection closed, the lock lost or broken), nobody
        is granted the name for that long (None: the daemon's
        ``lock.delay_ms``; 0: none).  Exclusive locks only.
        """
        return Lock(self, name, timeout, ttl, shared, limit, fence, label, on_lost, delay)

    def _acquire(self, lk):
        def granted(words):
            # In the reader thread, before the line after the OK.
            if words[0] != "OK":
                return
            f = _fields(words[2:])
            lk.validity = f.get("validity")
            lk.holds = f.get("holds", 1)
            lk.fence = f.get("fence")
            if isinstance(lk, LockSet):
                lk.fences = _fences(lk.fence)
            lk.permit = f.get("permit")
            lk.lost.clear()
            lk.lost_reason = None
            with self._state_lock:
                for n in lk.names:
                    self._locks.setdefault(n, []).append(lk)

        self._take(lk.name, lk.timeout,
                   self._opts(lk.ttl, lk.shared, lk.limit, lk.want_fence, lk.label, lk.delay),
                   on_reply=granted)

    def _release(self, lk):
        def released(words):
            if words[0] != "OK":
                return
            holds = _fields(words[1 + len(lk.names):]).get("holds", 0)
            lk.holds = 0
            with self._state_lock:
                for n in lk.names:
                    held = self._locks.get(n, [])
                    if lk in held:
                        held.remove(lk)
                    for other in held:
                        other.holds = holds
                    if holds == 0 or not held:
                        self._locks.pop(n, None)

        reply = self._command("UNLOCK " + lk.name, on_reply=released)
        if reply[0] == "NOTHELD":
            raise NotHeld("NOTHELD", " ".join(reply[1:]))

    def lock_many(self, names, timeout=None, ttl=None, fence=False, label=None,
                  on_lost=None, delay=None):
        """A session-mode :class:`LockSet` of several names, all or none
        (``LOCK a b c``), to use with ``with`` (or acquire()).

        ``names`` is a list of 1 to SET_MAX (64) lock names, none twice;
        the order does not matter to the daemon (it takes the names in one
        order of its own), but ``fences`` come in the order given.  The
        options are those of :meth:`lock` but for ``shared`` and ``limit``,
        which a set does not take.  ``on_lost(lockset)`` runs once when
        any of its names is lost.  ``delay`` applies to every name of
        the set.
        """
        return LockSet(self, names, timeout, ttl, fence, label, on_lost, delay)

    # ---- lease mode ----

    def lease(self, name, ttl, timeout=None, shared=False, limit=None, fence=False,
              label=None):
        """Take ``name`` in lease mode for ``ttl`` ms: a :class:`Lease` whose
        token any process may later extend() or release(); nothing renews it."""
        f = self._take(_check_word("lock name", name), timeout,
                       self._opts(ttl, shared, limit, fence, label), lease=True)
        return Lease(name, f["token"], f.get("validity"), f.get("fence"))

    def lease_many(self, names, ttl, timeout=None, fence=False, label=None):
        """Take a set of names in lease mode for ``ttl`` ms, all or none: a
        :class:`LeaseSet` with one token for the set, which extend() and
        release() take with the same names (a list, in any order)."""
        names = _check_names(names)
        f = self._take(" ".join(names), timeout, self._opts(ttl, False, None, fence, label),
                       lease=True)
        return LeaseSet(names, f["token"], f.get("validity"), _fences(f.get("fence")))

    def extend(self, name, token, ttl):
        """EXTEND a lease by its token to ``ttl`` ms from now; the validity (ms).
        Never re-acquires an expired lease: NotHeld when it is gone.
        ``name`` is a name, or the list of names of a :class:`LeaseSet`."""
        reply = self._command(f"EXTEND {_name_words(name)} "
                              f"token={_check_token(token)} "
                              f"ttl={_check_number('ttl', ttl, 1, TTL_MAX, ' ms')}")
        if reply[0] == "NOTHELD":
            raise NotHeld("NOTHELD", " ".join(reply[1:]))
        return _fields(reply[1:]).get("validity")

    def release(self, name, token):
        """Release a lease by its token (compare-and-delete); NotHeld when gone.
        ``name`` is a name, or the list of names of a :class:`LeaseSet`."""
        reply = self._command(f"UNLOCK {_name_words(name)} "
                              f"token={_check_token(token)}")
        if reply[0] == "NOTHELD":
            raise NotHeld("NOTHELD", " ".join(reply[1:]))

    # ---- observing ----

    def status(self, name, token=None):
        """STATUS: ``None`` when free, else the ``HELD`` reply's fields
        (``ttl``, ``owner``, ``kind``, ``holders``, ``label``...).  A
        name nobody holds but a lock-delay keeps from being granted
        (``FREE <name> delayed=MS``) is no ``None``: its fields are
        ``state`` ``"FREE"`` and ``delayed`` (ms left), and no ``owner``."""
        line = "STATUS " + _check_word("lock name", name)
        if token is not None:
            line += " token=" + _check_token(token)
        reply = self._command(line)
        f = _fields(reply[2:])
        if reply[0] == "FREE":
            if "delayed" not in f:
                return None
            f["state"] = "FREE"
        return f

    def check(self, name, fence=None, permit=None, token=None):
        """CHECK whether one grant of ``name`` is still its current one on
        a quorum of the masters, now: the grant told ``fence`` (with
        ``permit``, for a counted name's), or the lease of ``token``.  A
        :class:`Checked`, true when current.  For a resource that cannot
        store a fence: ask before each write, and refuse it unless
        current.  NoQuorum when too few masters answered to tell;
        KindError for a counted name's fence without its permit."""
        line = "CHECK " + _check_word("lock name", name)
        if (fence is None) == (token is None):
            raise ValueError("check needs fence= or token=, and not both")
        if token is not None:
            if permit is not None:
                raise ValueError("permit= goes with fence=, not token=")
            line += " token=" + _check_token(token)
        else:
            line += f" fence={_check_number('fence', fence, 1, FENCE_MAX)}"
            if permit is not None:
                line += f" permit={_check_number('permit', permit, 0, PERMIT_MAX)}"
        reply = self._command(line)
        if reply[0] not in ("CURRENT", "STALE"):
            raise ProtocolError("REPLY", " ".join(reply))
        f = _fields(reply[2:])
        return Checked(name, reply[0] == "CURRENT", f.get("reason"), f.get("ttl"))

    def list(self, prefix=None):
        """LIST: one dict per hold or waiting LOCK of this daemon, with
        ``state`` (``HELD`` or ``WAIT``) and ``name`` beside the fields."""
        line = "LIST" if prefix is None else "LIST " + _check_word("prefix", prefix)
        out = []
        for words in self._command(line, multi=True):
            d = _fields(words[2:])
            d["state"], d["name"] = words[0], words[1]
            out.append(d)
        return out

    def watch(self, name):
        """WATCH ``name``: an iterator of :class:`Event` (the state now, then
        every change), ended by UNWATCH through ``iterator.close()`` or by
        the connection's end.  Only one watch per name per client."""
        name = _check_word("lock name", name)
        q = queue.Queue()
        with self._state_lock:
            if name in self._watches:
                raise ValueError(f"{name!r} is watched already by this client")
            self._watches[name] = q
        try:
            self._command("WATCH " + name)
        except Exception:
            with self._state_lock:
                self._watches.pop(name, None)
            raise
        return self._watch_iter(name, q)

    def _watch_iter(self, name, q):
        try:
            while True:
                ev = q.get()
                if ev is None:
                    return
                yield ev
        finally:
            with self._state_lock:
                self._watches.pop(name, None)
            if not self.closed:
                try:
                    self._command("UNWATCH " + name)
                except RedlockdError:
                    pass

    def ping(self):
        """PING: True when the daemon answered."""
        return self._command("PING")[0] == "PONG"

    def stats(self):
        """STATS as a dict of name to value (numbers as int)."""
        out = {}
        for words in self._command("STATS", multi=True):
            if len(words) >= 3 and words[0] == "STAT":
                v = " ".join(words[2:])
                out[words[1]] = int(v) if v.lstrip("-").isdigit() else v
        return out

    def break_lock(self, name):
        """BREAK ``name`` (needs the admin right): end every holder's hold."""
        return self._command("BREAK " + _check_word("lock name", name))
