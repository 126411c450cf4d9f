"""The Python client against a real daemon and five real masters."""

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import redlockd  # noqa: E402
from harness import ADMIN_PASSWORD, ROOT, Daemon, Relay, wait_until  # noqa: E402


class ClientTest(unittest.TestCase):
    password = None

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(password=cls.password)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def client(self, **kw):
        c = redlockd.Client(self.d.address, password=self.password, **kw)
        self.addCleanup(c.close)
        return c


class Basics(ClientTest):
    def test_grant_status_release(self):
        a, b = self.client(), self.client()
        with a.lock("py-grant", fence=True, label="py-test") as lk:
            self.assertGreater(lk.validity, 0)
            self.assertGreater(lk.fence, 0)
            st = a.status("py-grant")
            self.assertEqual(st["owner"], "self")
            self.assertEqual(st["label"], "py-test")
            self.assertEqual(b.status("py-grant")["owner"], "other")
            names = [e["name"] for e in b.list("py-grant")]
            self.assertEqual(names, ["py-grant"])
        self.assertIsNone(b.status("py-grant"))
        self.assertFalse(lk.lost.is_set())

    def test_busy_and_timeout(self):
        a, b = self.client(), self.client()
        with a.lock("py-busy"):
            with self.assertRaises(redlockd.Busy):
                b.lock("py-busy", timeout=0).acquire()
            t0 = time.monotonic()
            with self.assertRaises(redlockd.Timeout):
                b.lock("py-busy", timeout=0.3).acquire()
            self.assertGreaterEqual(time.monotonic() - t0, 0.25)
        # Free now: the same request is granted.
        with b.lock("py-busy", timeout=1):
            pass

    def test_shared_and_limit(self):
        a, b, c = self.client(), self.client(), self.client()
        with a.lock("py-sh", shared=True), b.lock("py-sh", shared=True):
            self.assertEqual(c.status("py-sh")["holders"], 2)
            with self.assertRaises(redlockd.Busy):
                c.lock("py-sh", timeout=0).acquire()
        with a.lock("py-sem", limit=2) as p1, b.lock("py-sem", limit=2) as p2:
            self.assertEqual({p1.permit, p2.permit}, {0, 1})
            with self.assertRaises(redlockd.Busy):
                c.lock("py-sem", limit=2, timeout=0).acquire()
            with self.assertRaises(redlockd.KindError):
                c.lock("py-sem", limit=3, timeout=0).acquire()

    def test_fence_increases(self):
        a = self.client()
        with a.lock("py-fence", fence=True) as l1:
            pass
        with a.lock("py-fence", fence=True) as l2:
            pass
        self.assertGreater(l2.fence, l1.fence)

    def test_lease_across_clients(self):
        a, b = self.client(), self.client()
        lease = a.lease("py-lease", ttl=5000, fence=True)
        a.close()   # a lease outlives its connection
        self.assertEqual(b.status("py-lease", token=lease.token)["owner"], "self")
        self.assertGreater(b.extend("py-lease", lease.token, 8000), 5000)
        b.release("py-lease", lease.token)
        self.assertIsNone(b.status("py-lease"))
        with self.assertRaises(redlockd.NotHeld):
            b.release("py-lease", lease.token)
        with self.assertRaises(redlockd.NotHeld):
            b.extend("py-lease", lease.token, 1000)

    def test_lost_by_break_reaches_user_code(self):
        a = self.client()
        admin = self.client()
        admin._command("AUTH " + ADMIN_PASSWORD)
        seen = []
        got = threading.Event()

        def on_lost(lk):
            seen.append(lk.lost_reason)
            got.set()

        lk = a.lock("py-break", on_lost=on_lost).acquire()
        admin.break_lock("py-break")
        self.assertTrue(got.wait(5), "no on_lost call")
        self.assertEqual(seen, ["broken"])
        self.assertTrue(lk.lost.is_set())
        with self.assertRaises(redlockd.NotHeld):
            lk.release()

    def test_lost_right_behind_its_grant_reaches_the_lock(self):
        # The OK of a second hold and the ! LOST that follows it arrive in
        # one read: the LOST must still reach both holds.
        relay = Relay(self.d.port)
        self.addCleanup(relay.close)
        a = redlockd.Client(relay.address)
        self.addCleanup(a.close)
        admin = self.client()
        admin._command("AUTH " + ADMIN_PASSWORD)
        first = a.lock("py-behind").acquire()
        relay.hold()
        second = a.lock("py-behind")
        taker = threading.Thread(target=second.acquire)
        taker.start()
        self.addCleanup(taker.join, 5)
        wait_until(lambda: "OK py-behind" in relay.held(), 5, "the second grant held back")
        admin.break_lock("py-behind")
        wait_until(lambda: "! LOST py-behind" in relay.held(), 5, "the LOST held back")
        relay.flush()
        taker.join(5)
        self.assertFalse(taker.is_alive(), "the second grant did not come")
        self.assertTrue(second.lost.wait(5), "the second hold was not told")
        self.assertTrue(first.lost.wait(5), "the first hold was not told")
        self.assertEqual((first.lost_reason, second.lost_reason), ("broken", "broken"))
        self.assertEqual(first.holds + second.holds, 0)

    def test_break_needs_admin(self):
        a = self.client()
        with self.assertRaises(redlockd.Denied):
            a.break_lock("py-nobody")

    def test_watch(self):
        a, w = self.client(), self.client()
        it = w.watch("py-watch")
        first = next(it)
        self.assertFalse(first.held)
        with a.lock("py-watch"):
            ev = next(it)
            self.assertTrue(ev.held)
            self.assertEqual(ev.fields["kind"], "exclusive")
        self.assertFalse(next(it).held)
        it.close()
        self.assertTrue(w.ping())

    def test_async_with(self):
        a, b = self.client(), self.client()

        async def main():
            async with a.lock("py-async", fence=True) as lk:
                self.assertEqual(b.status("py-async")["owner"], "other")
                return lk

        lk = asyncio.run(main())
        self.assertGreater(lk.fence, 0)
        self.assertIsNone(b.status("py-async"))

    def test_async_cancelled_wait_releases_late_grant(self):
        a, b = self.client(), self.client()
        held = a.lock("py-cancel").acquire()

        async def main():
            task = asyncio.create_task(b.lock("py-cancel", timeout=30).__aenter__())
            await asyncio.sleep(0.2)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            held.release()   # b's LOCK is granted now, after the cancellation...

        t0 = time.monotonic()
        asyncio.run(main())
        deadline = time.monotonic() + 5
        while b.status("py-cancel") is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIsNone(b.status("py-cancel"), "...and released at once")
        self.assertLess(time.monotonic() - t0, 10, "the LOCK was not granted: it timed out")
        self.assertEqual(b.stats()["locks_held"], 0)

    def test_unix_socket(self):
        c = redlockd.Client("unix:" + self.d.sock)
        self.addCleanup(c.close)
        with c.lock("py-unix") as lk:
            self.assertEqual(c.status("py-unix")["owner"], "self")
        self.assertEqual(lk.holds, 0)

    def test_bad_name_refused_here(self):
        a = self.client()
        with self.assertRaises(ValueError):
            a.lock("two words")
        with self.assertRaises(redlockd.ProtocolError):
            a.lock("py-ttl", ttl=1).acquire()


class Sets(ClientTest):
    """Several names at once (lock_many, lease_many): one hold, one loss."""

    def test_set_granted_with_fences_in_order_and_released(self):
        a, b = self.client(), self.client()
        with a.lock("py-set-z", fence=True):     # z's fence moves ahead of a's
            pass
        with a.lock_many(["py-set-z", "py-set-a"], fence=True, label="py-set") as ls:
            self.assertEqual(ls.names, ("py-set-z", "py-set-a"))
            self.assertEqual(ls.holds, 1)
            self.assertGreater(ls.validity, 0)
            self.assertEqual(len(ls.fences), 2)
            for name, fence in zip(ls.names, ls.fences):
                self.assertEqual(b.status(name)["owner"], "other")
                self.assertEqual(a.status(name)["fence"], fence, name)
            self.assertGreater(ls.fences[0], ls.fences[1], "the fences are not in the order given")
        self.assertEqual(ls.holds, 0)
        self.assertIsNone(b.status("py-set-z"))
        self.assertIsNone(b.status("py-set-a"))
        self.assertFalse(ls.lost.is_set())
        with b.lock("py-set-a", timeout=0):     # free for anyone now
            pass

    def test_set_refused_whole_when_one_name_is_held(self):
        a, b = self.client(), self.client()
        with a.lock("py-set-held"):
            with self.assertRaises(redlockd.Busy) as cm:
                b.lock_many(["py-set-free", "py-set-held"], timeout=0).acquire()
            self.assertTrue(str(cm.exception).startswith("BUSY py-set-free py-set-held ttl="),
                            str(cm.exception))
            self.assertIsNone(a.status("py-set-free"), "a refused set left a name held")
            with self.assertRaises(redlockd.Timeout):
                b.lock_many(["py-set-free", "py-set-held"], timeout=0.2).acquire()
            self.assertIsNone(a.status("py-set-free"))
        with b.lock_many(["py-set-free", "py-set-held"], timeout=0):
            self.assertEqual(a.status("py-set-held")["owner"], "other")

    def test_set_lost_once_when_one_key_vanishes(self):
        a, b = self.client(), self.client()
        seen = []
        ls = a.lock_many(["py-lost-1", "py-lost-2", "py-lost-3"], ttl=600,
                         on_lost=lambda lk: seen.append(lk.lost_reason)).acquire()
        self.d.del_everywhere("redlock:py-lost-2")
        self.assertTrue(ls.lost.wait(5), "no loss signal for the set")
        self.assertEqual(ls.holds, 0)
        wait_until(lambda: b.status("py-lost-1") is None and b.status("py-lost-3") is None,
                   5, "the set's other names released")
        self.assertTrue(a.ping())   # the pushes sent before the PONG are read
        self.assertEqual(len(seen), 1, seen)
        self.assertEqual(a._locks, {})
        with self.assertRaises(redlockd.NotHeld):
            ls.release()
        with a.lock_many(["py-lost-1", "py-lost-2", "py-lost-3"], timeout=0):
            pass

    def test_set_lost_right_behind_its_grant(self):
        # The OK of a set and the ! LOST of it arrive in one read: the set
        # is recorded as the OK is read, and the LOST reaches it.
        relay = Relay(self.d.port)
        self.addCleanup(relay.close)
        a = redlockd.Client(relay.address)
        self.addCleanup(a.close)
        relay.hold()
        ls = a.lock_many(["py-behind-1", "py-behind-2"], ttl=300)
        taker = threading.Thread(target=ls.acquire)
        taker.start()
        self.addCleanup(taker.join, 5)
        wait_until(lambda: "OK py-behind-1 py-behind-2" in relay.held(), 5,
                   "the grant held back")
        self.d.del_everywhere("redlock:py-behind-1")
        wait_until(lambda: "! LOST py-behind-1 py-behind-2" in relay.held(), 5,
                   "the LOST held back")
        relay.flush()
        taker.join(5)
        self.assertFalse(taker.is_alive(), "the grant did not come")
        self.assertTrue(ls.lost.wait(5), "the set was not told")
        self.assertEqual(ls.holds, 0)
        self.assertEqual(a._locks, {})

    def test_set_lease_by_token(self):
        a, b = self.client(), self.client()
        lease = a.lease_many(["py-lset-b", "py-lset-a"], ttl=5000, fence=True)
        self.assertEqual(lease.names, ("py-lset-b", "py-lset-a"))
        self.assertEqual(len(lease.fences), 2)
        a.close()   # a lease outlives its connection
        self.assertEqual(b.status("py-lset-a", token=lease.token)["owner"], "self")
        self.assertGreater(b.extend(["py-lset-a", "py-lset-b"], lease.token, 9000), 5000)
        with self.assertRaises(redlockd.NotHeld):
            b.extend(["py-lset-a", "py-lset-b", "py-lset-c"], lease.token, 9000)
        lease = b.lease_many(["py-lset-b", "py-lset-a"], ttl=5000)
        b.release(list(lease.names), lease.token)
        self.assertIsNone(b.status("py-lset-a"))
        self.assertIsNone(b.status("py-lset-b"))
        with self.assertRaises(redlockd.NotHeld):
            b.release(["py-lset-a", "py-lset-b"], lease.token)

    def test_set_arguments_checked_here(self):
        a = self.client()
        with self.assertRaises(ValueError):
            a.lock_many(["py-dup", "py-dup"])
        with self.assertRaises(ValueError):
            a.lock_many([])
        with self.assertRaises(ValueError):
            a.lock_many(["n%d" % i for i in range(redlockd.SET_MAX + 1)])
        with self.assertRaises(TypeError):
            a.lock_many("py-one-string")
        self.assertTrue(a.ping())


class DelayAndCheck(ClientTest):
    """Lock-delay (delay=, Busy.delayed, status()'s delayed) and check()."""

    def vanish(self, take):
        """take(client) on a client of its own, then that client closed
        without a release: its hold ends as a vanished holder's does."""
        gone = redlockd.Client(self.d.address)
        self.addCleanup(gone.close)
        take(gone)
        gone.close()

    def wait_delayed(self, c, name):
        """Wait (deadline 5 s) until a try on name is refused by a
        lock-delay; that Busy.  A grant fails the test: no delay held it."""
        deadline = time.monotonic() + 5
        while True:
            try:
                c.lock(name, timeout=0).acquire()
            except redlockd.Busy as e:
                if e.delayed is not None:
                    return e
            else:
                self.fail(f"{name} was granted: the vanished holder's delay did not keep it")
            self.assertLess(time.monotonic(), deadline, f"{name} never refused by a delay")
            time.sleep(0.02)

    def test_single_name_kept_for_the_delay_then_granted(self):
        b = self.client()
        self.vanish(lambda c: c.lock("py-delay", delay=2000).acquire())
        busy = self.wait_delayed(b, "py-delay")
        self.assertGreater(busy.delayed, 0)
        self.assertLessEqual(busy.delayed, 2000)
        self.assertEqual(busy.ttl, busy.delayed)
        st = b.status("py-delay")
        self.assertIsNotNone(st, "a delayed name read as plainly free")
        self.assertEqual(st["state"], "FREE")
        self.assertNotIn("owner", st)
        self.assertLessEqual(st["delayed"], 2000)
        with b.lock("py-delay", timeout=10) as lk:   # waits the delay out
            self.assertEqual(lk.holds, 1)
        self.assertIsNone(b.status("py-delay"), "UNLOCK left a delay")

    def test_set_kept_for_the_delay_then_granted(self):
        b = self.client()
        names = ["py-dset-1", "py-dset-2"]
        self.vanish(lambda c: c.lock_many(names, delay=2000).acquire())
        self.assertGreater(self.wait_delayed(b, "py-dset-2").delayed, 0)
        self.assertGreater(b.status("py-dset-1").get("delayed", 0), 0)
        with self.assertRaises(redlockd.Busy) as cm:
            b.lock_many(names, timeout=0).acquire()
        self.assertIsNotNone(cm.exception.delayed)
        with b.lock_many(names, timeout=10):
            self.assertEqual(b.status("py-dset-1")["owner"], "self")

    def test_busy_of_a_holder_is_no_delay(self):
        a, b = self.client(), self.client()
        with a.lock("py-nodelay", delay=2000):
            with self.assertRaises(redlockd.Busy) as cm:
                b.lock("py-nodelay", timeout=0).acquire()
            self.assertIsNone(cm.exception.delayed)
            self.assertGreater(cm.exception.ttl, 0)
        with b.lock("py-nodelay", timeout=0):    # released: no delay
            pass

    def test_delay_refused_for_shared_and_checked_here(self):
        a = self.client()
        with self.assertRaises(redlockd.ProtocolError):
            a.lock("py-delay-sh", shared=True, delay=1000).acquire()
        with self.assertRaises(ValueError):
            a.lock("py-delay-sh", delay=-1).acquire()
        self.assertTrue(a.ping())

    def test_check_fenced_grant(self):
        a, b = self.client(), self.client()
        with a.lock("py-ck", fence=True) as l1:
            ck = b.check("py-ck", fence=l1.fence)
            self.assertTrue(ck)
            self.assertEqual((ck.current, ck.reason), (True, None))
            self.assertGreater(ck.ttl, 0)
        ck = b.check("py-ck", fence=l1.fence)
        self.assertFalse(ck)
        self.assertEqual((ck.current, ck.reason, ck.ttl), (False, "free", None))
        with b.lock("py-ck", fence=True) as l2:
            self.assertEqual(a.check("py-ck", fence=l1.fence).reason, "other")
            self.assertTrue(a.check("py-ck", fence=l2.fence))

    def test_check_set_fences(self):
        a = self.client()
        with a.lock_many(["py-ck-s1", "py-ck-s2"], fence=True) as ls:
            for name, fence in zip(ls.names, ls.fences):
                self.assertTrue(a.check(name, fence=fence), name)
        self.assertEqual(a.check("py-ck-s2", fence=ls.fences[1]).reason, "free")

    def test_check_lease_by_token(self):
        a, b = self.client(), self.client()
        lease = a.lease("py-ck-lease", ttl=5000)
        self.assertTrue(b.check("py-ck-lease", token=lease.token))
        a.release("py-ck-lease", lease.token)
        self.assertEqual(b.check("py-ck-lease", token=lease.token).reason, "free")
        other = a.lease("py-ck-lease", ttl=5000)
        self.addCleanup(a.release, "py-ck-lease", other.token)
        self.assertEqual(b.check("py-ck-lease", token=lease.token).reason, "other")

    def test_check_counted_needs_its_permit(self):
        a = self.client()
        with a.lock("py-ck-sem", limit=2, fence=True) as lk:
            with self.assertRaises(redlockd.KindError):
                a.check("py-ck-sem", fence=lk.fence)
            self.assertTrue(a.check("py-ck-sem", fence=lk.fence, permit=lk.permit))

    def test_check_no_quorum(self):
        a = self.client()
        self.d.signal_masters(signal.SIGSTOP, 3)
        try:
            with self.assertRaises(redlockd.NoQuorum):
                a.check("py-ck-nq", fence=1)
        finally:
            self.d.signal_masters(signal.SIGCONT, 3)

    def test_check_arguments_checked_here(self):
        a = self.client()
        with self.assertRaises(ValueError):
            a.check("py-ck-arg")
        with self.assertRaises(ValueError):
            a.check("py-ck-arg", fence=1, token="0" * 32)
        with self.assertRaises(ValueError):
            a.check("py-ck-arg", token="0" * 32, permit=0)
        with self.assertRaises(ValueError):
            a.check("py-ck-arg", fence=0)
        with self.assertRaises(ValueError):
            a.check("py-ck-arg", fence=1, permit=1000)
        self.assertTrue(a.ping())


class Bounds(ClientTest):
    """Arguments out of the protocol's bounds are refused before anything
    is sent, with an error that says what is wrong and the bound."""

    def assertRefused(self, exc, message, fn, *args, **kw):
        with self.assertRaises(exc) as cm:
            fn(*args, **kw)
        self.assertEqual(str(cm.exception), message)

    def test_names(self):
        a = self.client()
        self.assertRefused(ValueError, "lock name is 300 bytes; at most 250", a.lock, "n" * 300)
        self.assertRefused(ValueError, "lock name is 251 bytes; at most 250", a.lock, "é" + "n" * 249)
        self.assertRefused(ValueError, "lock name is empty; it must be 1 to 250 bytes", a.lock, "")
        self.assertRefused(ValueError, "lock name contains a space (at byte 3); it must be one "
                           "word of printable ASCII (0x21 to 0x7e)", a.lock, "two words")
        self.assertRefused(ValueError, "lock name has byte 0x0a at offset 3; it must be "
                           "printable ASCII (0x21 to 0x7e) without spaces", a.status, "two\nPING")
        self.assertRefused(ValueError, "lock name has byte 0xc3 at offset 0; it must be "
                           "printable ASCII (0x21 to 0x7e) without spaces", a.lock, "été")
        self.assertRefused(TypeError, "lock name must be a str, not int", a.lock, 42)
        self.assertRefused(ValueError, "lock name is 300 bytes; at most 250",
                           a.lease, "n" * 300, ttl=1000)
        self.assertRefused(ValueError, "lock name is 300 bytes; at most 250",
                           a.break_lock, "n" * 300)
        # The longest name is taken, and nothing refused was sent: the
        # session answers in step.
        with a.lock("n" * 250, timeout=5) as lk:
            self.assertEqual(lk.holds, 1)
        self.assertTrue(a.ping())

    def test_other_arguments(self):
        a = self.client()
        self.assertRefused(ValueError, "label is 65 bytes; at most 64",
                           a.lock("py-bounds", label="l" * 65).acquire)
        self.assertRefused(ValueError, "label contains a space (at byte 3); it must be one word "
                           "of printable ASCII (0x21 to 0x7e)",
                           a.lock("py-bounds", label="has space").acquire)
        self.assertRefused(ValueError, "ttl is 0 ms; it must be 1 to 4000000000000 ms",
                           a.lock("py-bounds", ttl=0).acquire)
        self.assertRefused(ValueError, "limit is 2000; it must be 1 to 1000",
                           a.lock("py-bounds", limit=2000).acquire)
        self.assertRefused(ValueError, "token is 3 characters; it must be 32 lowercase hex "
                           "digits (as the lease's grant gave it)", a.release, "py-bounds", "abc")
        self.assertRefused(ValueError, "token has 'G' at offset 0; it must be 32 lowercase hex "
                           "digits (as the lease's grant gave it)",
                           a.extend, "py-bounds", "G" * 32, 1000)
        self.assertRefused(ValueError, "prefix is 251 bytes; at most 250", a.list, "p" * 251)
        self.assertRefused(ValueError, "password is 251 bytes; at most 250",
                           redlockd.Client, self.d.address, password="p" * 251)
        self.assertTrue(a.ping())
        self.assertIsNone(a.status("py-bounds"))


class DefaultOrder(ClientTest):
    """Without an address or environment, a Client tries the Unix socket
    (DEFAULT_SOCKET) and then TCP (DEFAULT_ADDRESS), as redlockctl does."""

    def setUp(self):
        for k in ("REDLOCKD_SOCKET", "REDLOCKD_ADDR"):
            if k in os.environ:
                self.addCleanup(os.environ.__setitem__, k, os.environ.pop(k))
        for k in ("DEFAULT_SOCKET", "DEFAULT_ADDRESS"):
            self.addCleanup(setattr, redlockd, k, getattr(redlockd, k))
        self.dir = tempfile.mkdtemp(prefix="redlockd-py-order.")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.dir], check=False)
        # An address nothing listens on.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.dead = "127.0.0.1:%d" % s.getsockname()[1]

    def label(self, c, name):
        with c.lock(name, timeout=5):
            return c.status(name)["label"]

    def test_socket_first(self):
        redlockd.DEFAULT_SOCKET, redlockd.DEFAULT_ADDRESS = self.d.sock, self.dead
        c = redlockd.Client()
        self.addCleanup(c.close)
        self.assertEqual(c.address, "unix:" + self.d.sock)
        self.assertIn(":uid=", self.label(c, "py-order-unix"))   # the daemon saw a Unix peer

    def test_tcp_when_the_socket_fails(self):
        stale = os.path.join(self.dir, "stale.sock")   # a socket file nobody listens on
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(stale)
        redlockd.DEFAULT_ADDRESS = self.d.address
        for path in (stale, os.path.join(self.dir, "absent.sock")):
            redlockd.DEFAULT_SOCKET = path
            c = redlockd.Client()
            self.addCleanup(c.close)
            self.assertEqual(c.address, self.d.address)
            self.assertIn(":127.0.0.1:", self.label(c, "py-order-tcp"))

    def test_neither(self):
        redlockd.DEFAULT_SOCKET = os.path.join(self.dir, "absent.sock")
        redlockd.DEFAULT_ADDRESS = self.dead
        with self.assertRaises(ConnectionRefusedError) as cm:
            redlockd.Client()
        self.assertIn(f"{redlockd.DEFAULT_SOCKET}: No such file or directory; "
                      f"{self.dead}: Connection refused", str(cm.exception))

    def test_environment_before_the_socket(self):
        redlockd.DEFAULT_SOCKET, redlockd.DEFAULT_ADDRESS = self.d.sock, self.dead
        os.environ["REDLOCKD_ADDR"] = self.d.address
        try:
            c = redlockd.Client()
            self.addCleanup(c.close)
        finally:
            del os.environ["REDLOCKD_ADDR"]
        self.assertEqual(c.address, self.d.address)


def fenced(path, lang, heading=None):
    """The code blocks of path fenced as lang (```lang), in order; only
    those of the section under heading when it is given."""
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    if heading is not None:
        text = text[text.index(heading):]
        end = text.find("\n## ", 1)
        text = text if end < 0 else text[:end]
    blocks = []
    for part in text.split("```" + lang + "\n")[1:]:
        blocks.append(part[:part.index("```")])
    return blocks


class DocExample(ClientTest):
    """The examples of docs/using.md and README.md, as written (but for the
    address of docs/using.md's, and /path/to/redlockd): they hold the lock
    and stop with "lost: broken" when the lock is broken, and the README's
    install commands work without a package index."""

    def scratch(self):
        d = tempfile.mkdtemp(prefix="redlockd-py-doc.")
        self.addCleanup(subprocess.run, ["rm", "-rf", d], check=False)
        return d

    def env(self):
        """The environment of an example: the daemon found through
        $REDLOCKD_ADDR, as the README's Client() without an address finds it."""
        env = dict(os.environ, REDLOCKD_ADDR=self.d.address)
        env.pop("REDLOCKD_SOCKET", None)
        return env

    def run_example(self, code, script=None):
        """Start code as a file (through the shell line script, in which
        job.py names it), its output piped."""
        path = os.path.join(self.scratch(), "job.py")
        with open(path, "w") as f:
            f.write(code)
        if script is None:
            script = f"PYTHONPATH={ROOT}/clients/python python3 job.py"
        script = script.replace("/path/to/redlockd", ROOT).replace("python3 ", sys.executable + " ")
        proc = subprocess.Popen(["sh", "-c", script], cwd=os.path.dirname(path), env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(proc.kill)
        return proc

    def hears_the_loss(self, proc, name="nightly", first_line="held with fence "):
        first = proc.stdout.readline()
        self.assertTrue(first.startswith(first_line), first)
        admin = self.client()
        admin._command("AUTH " + ADMIN_PASSWORD)
        admin.break_lock(name)
        out, _ = proc.communicate(timeout=5)
        self.assertEqual((proc.returncode, out.strip()), (1, "lost: broken"))

    def test_example_hears_the_loss(self):
        code = fenced("docs/using.md", "python", "## Using it from Python")[0]
        self.hears_the_loss(self.run_example(code.replace("127.0.0.1:7379", self.d.address)))

    def test_sets_example_hears_the_loss(self):
        """docs/using.md's "Several names at once": both names held, with a
        fence each, and the whole set lost when one of them is broken."""
        code = fenced("docs/using.md", "python", "## Several names at once")[0]
        self.assertIn("lock_many(", code)
        proc = self.run_example(code.replace("127.0.0.1:7379", self.d.address))
        self.hears_the_loss(proc, "account-42", "held with fences [")

    def output_of(self, heading, needs):
        """The output of docs/using.md's Python example under heading
        (which calls needs), run to its end as written (but for the address)."""
        blocks = fenced("docs/using.md", "python", heading)
        self.assertEqual(len(blocks), 1, heading)
        self.assertIn(needs, blocks[0])
        proc = self.run_example(blocks[0].replace("127.0.0.1:7379", self.d.address))
        out, _ = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0, out)
        return out

    def test_check_example(self):
        """docs/using.md's "Checking a grant before a write": current while
        held, stale with reason free once released."""
        out = self.output_of("## Checking a grant before a write", ".check(")
        self.assertEqual(out, "True\nFalse free\n")

    def test_delay_example(self):
        """docs/using.md's "Lock-delay": a try refused by the delay of a
        holder that vanished, then the name granted once it ran out."""
        out = self.output_of("## Lock-delay", "delay=")
        self.assertEqual(out, "delayed: True\nheld\n")

    def test_readme_example_hears_the_loss(self):
        # Run through the README's own PYTHONPATH line.
        install = fenced("clients/python/README.md", "sh", "## Installing")
        self.hears_the_loss(self.run_example(
            fenced("clients/python/README.md", "python", "## Using it")[0], install[1].strip()))

    def test_readme_lease_example(self):
        code = fenced("clients/python/README.md", "python")[1]
        self.assertIn("client.lease(", code)
        out, _ = self.run_example(code).communicate(timeout=10)
        self.assertTrue(out.startswith("took Lease('report', token='"), out)
        self.assertIsNone(self.client().status("report"))

    def test_readme_install_without_an_index(self):
        """The README's venv commands, with --no-index: no package index is
        asked (and the build's leftovers in the tree are ignored by git)."""
        script = fenced("clients/python/README.md", "sh", "## Installing")[0]
        self.assertIn("--no-index", script)
        here = os.path.join(ROOT, "clients", "python")
        leftovers = [os.path.join(here, "build"), os.path.join(here, "redlockd.egg-info")]
        for p in leftovers:
            if not os.path.exists(p):
                self.addCleanup(subprocess.run, ["rm", "-rf", p], check=False)
        d = self.scratch()
        # Debian's python3 (which the README names), whatever runs the tests;
        # sys.executable where there is none.
        python3 = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        if (subprocess.run([python3, "-c", "import ensurepip"], stderr=subprocess.DEVNULL).returncode
                and os.geteuid() != 0):
            self.skipTest("python3-venv is missing (make deps installs it as root)")
        self.assertIn("/usr/bin/python3 -m venv", script)
        script = script.replace("/path/to/redlockd", ROOT).replace("/usr/bin/python3 ", python3 + " ")
        run = subprocess.run(["sh", "-ec", script], cwd=d,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout)
        where = subprocess.run([os.path.join(d, "venv", "bin", "python"), "-c",
                                "import redlockd; print(redlockd.__file__)"],
                               stdout=subprocess.PIPE, text=True, cwd=d, check=True).stdout
        self.assertTrue(where.startswith(os.path.join(d, "venv") + "/"), where)
        if os.path.isdir(os.path.join(ROOT, ".git")) or os.path.isfile(os.path.join(ROOT, ".git")):
            untracked = subprocess.run(["git", "-C", ROOT, "ls-files", "--others",
                                        "--exclude-standard", "clients/python"],
                                       stdout=subprocess.PIPE, text=True, check=True).stdout
            self.assertEqual(untracked, "", "pip left files git does not ignore")


class MastersStopped(ClientTest):
    def test_lost_when_masters_stop(self):
        a = self.client()
        lk = a.lock("py-quorum", ttl=1000).acquire()
        self.d.signal_masters(signal.SIGSTOP, 3)
        try:
            self.assertTrue(lk.lost.wait(5), "no LOST with 3 of 5 masters stopped")
            self.assertIn(lk.lost_reason, ("quorum", "renew"))
        finally:
            self.d.signal_masters(signal.SIGCONT, 3)


class Auth(ClientTest):
    password = "py-secret"

    def test_password_from_environment(self):
        os.environ["REDLOCKD_PASSWORD"] = self.password
        try:
            c = redlockd.Client(self.d.address)
            self.addCleanup(c.close)
            self.assertTrue(c.ping())
        finally:
            del os.environ["REDLOCKD_PASSWORD"]
        with self.assertRaises(redlockd.AuthError):
            redlockd.Client(self.d.address, password="wrong")

    def auth_failures(self):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.d.sock)
            s.sendall(b"STATS\n")
            data = b""
            while not data.endswith(b"END\n"):
                chunk = s.recv(65536)
                self.assertTrue(chunk, "STATS cut short")
                data += chunk
        for line in data.decode().splitlines():
            if line.startswith("STAT auth_failures "):
                return int(line.split()[2])
        self.fail("STATS has no auth_failures")

    def test_refused_on_the_default_socket(self):
        """A refused AUTH on the default socket ends there: no TCP try."""
        for k in ("REDLOCKD_SOCKET", "REDLOCKD_ADDR", "REDLOCKD_PASSWORD"):
            if k in os.environ:
                self.addCleanup(os.environ.__setitem__, k, os.environ.pop(k))
        for k in ("DEFAULT_SOCKET", "DEFAULT_ADDRESS"):
            self.addCleanup(setattr, redlockd, k, getattr(redlockd, k))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = "127.0.0.1:%d" % s.getsockname()[1]
        for tcp in (dead, self.d.address):
            with self.subTest(tcp=tcp):
                redlockd.DEFAULT_SOCKET, redlockd.DEFAULT_ADDRESS = self.d.sock, tcp
                before = self.auth_failures()
                with self.assertRaises(redlockd.AuthError):
                    redlockd.Client(password="wrong")
                self.assertEqual(self.auth_failures(), before + 1)


class DaemonKilled(unittest.TestCase):
    def test_killed_daemon_loses_the_lock(self):
        d = Daemon()
        self.addCleanup(d.stop)
        c = redlockd.Client(d.address)
        self.addCleanup(c.close)
        lk = c.lock("py-killed").acquire()
        d.proc.kill()
        self.assertTrue(lk.lost.wait(5), "the lock was not marked lost")
        self.assertEqual(lk.lost_reason, "connection")
        with self.assertRaises(redlockd.ConnectionLost):
            c.ping()


class Tls(unittest.TestCase):
    def test_client_certificate(self):
        certs = tempfile.mkdtemp(prefix="redlockd-py-certs.")
        self.addCleanup(subprocess.run, ["rm", "-rf", certs], check=False)
        subprocess.run(["sh", os.path.join(ROOT, "tests", "tls", "make-certs.sh"), certs],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        d = Daemon(tls_dir=certs)
        self.addCleanup(d.stop)
        # Fresh connections, each written to at once while its reader
        # thread reads what TLS 1.3 sends after the handshake: one SSL
        # object must never be read and written by two threads together.
        for i in range(20):
            c = redlockd.Client(f"127.0.0.1:{d.tls_port}", tls=True, timeout=5,
                                cafile=f"{certs}/ca.crt", certfile=f"{certs}/client.crt",
                                keyfile=f"{certs}/client.key")
            self.addCleanup(c.close)
            with c.lock("py-tls", timeout=5) as lk:
                self.assertEqual(c.status("py-tls")["owner"], "self")
            self.assertFalse(lk.lost.is_set())
            c.close()
        # Without a certificate the daemon refuses the handshake.
        with self.assertRaises((OSError, redlockd.RedlockdError)):
            bad = redlockd.Client(f"127.0.0.1:{d.tls_port}", tls=True,
                                  cafile=f"{certs}/ca.crt")
            try:
                bad.ping()
            finally:
                bad.close()

    def test_no_address_skips_the_unix_sockets(self):
        """With TLS and no address: $REDLOCKD_ADDR, else DEFAULT_ADDRESS,
        never $REDLOCKD_SOCKET or DEFAULT_SOCKET, though both are live."""
        certs = tempfile.mkdtemp(prefix="redlockd-py-certs.")
        self.addCleanup(subprocess.run, ["rm", "-rf", certs], check=False)
        subprocess.run(["sh", os.path.join(ROOT, "tests", "tls", "make-certs.sh"), certs],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        d = Daemon(tls_dir=certs)
        self.addCleanup(d.stop)
        for k in ("REDLOCKD_SOCKET", "REDLOCKD_ADDR"):
            if k in os.environ:
                self.addCleanup(os.environ.__setitem__, k, os.environ.pop(k))
            self.addCleanup(os.environ.pop, k, None)
        for k in ("DEFAULT_SOCKET", "DEFAULT_ADDRESS"):
            self.addCleanup(setattr, redlockd, k, getattr(redlockd, k))
        tls_address = f"127.0.0.1:{d.tls_port}"
        redlockd.DEFAULT_SOCKET = os.environ["REDLOCKD_SOCKET"] = d.sock
        files = dict(cafile=f"{certs}/ca.crt", certfile=f"{certs}/client.crt",
                     keyfile=f"{certs}/client.key")
        for env, default in ((tls_address, d.address), (None, tls_address)):
            with self.subTest(env=env, default=default):
                if env:
                    os.environ["REDLOCKD_ADDR"] = env
                else:
                    os.environ.pop("REDLOCKD_ADDR", None)
                redlockd.DEFAULT_ADDRESS = default
                c = redlockd.Client(tls=True, timeout=5, **files)
                self.addCleanup(c.close)
                self.assertEqual(c.address, tls_address)
                self.assertTrue(c.ping())
                c.close()


if __name__ == "__main__":
    unittest.main()
