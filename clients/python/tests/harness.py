"""Real masters and a real daemon for the client's tests.

Five redis-server masters on free ports and the redlockd binary
($REDLOCKD_BIN, default ../../build/redlockd from here) with a
configuration written into a fresh temporary directory.  Every process
is killed at stop(), and at exit if a test forgot.
"""

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BIN = os.environ.get("REDLOCKD_BIN") or os.path.join(ROOT, "build", "redlockd")
ADMIN_PASSWORD = "admin-pw"

_procs = []


def _kill_all():
    for p in _procs:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_kill_all)
# A run stopped from outside (make's timeout sends SIGTERM) ends through
# SystemExit, so that the exit hook above still stops the masters.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


_given_ports = set()


def free_port():
    """A free port of 127.0.0.1 that this run has not handed out before: a
    port just handed out may be free again until its server binds it."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given_ports:
            _given_ports.add(port)
            return port


def wait_until(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout} s")


class Daemon:
    """Masters and one daemon.  ``tls_dir``: certificates of make-certs.sh,
    to add a TLS listener that requires client certificates."""

    def __init__(self, password=None, tls_dir=None):
        self.dir = tempfile.mkdtemp(prefix="redlockd-py.")
        self.masters = []
        for _ in range(5):
            port = free_port()
            p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _procs.append(p)
            self.masters.append((port, p))
        for port, _ in self.masters:
            wait_until(lambda port=port: self._redis_up(port), 5, f"master {port}")
        self.port = free_port()
        self.sock = os.path.join(self.dir, "redlockd.sock")
        self.tls_port = free_port() if tls_dir else None
        conf = os.path.join(self.dir, "redlockd.yml")
        with open(conf, "w") as f:
            f.write(f'listen:\n  tcp: "127.0.0.1:{self.port}"\n  unix: "{self.sock}"\n')
            if tls_dir:
                f.write(f'  tls: "127.0.0.1:{self.tls_port}"\n')
                f.write(f'tls:\n  cert_file: "{tls_dir}/server.crt"\n'
                        f'  key_file: "{tls_dir}/server.key"\n'
                        f'  client_ca_file: "{tls_dir}/ca.crt"\n')
            f.write("masters:\n")
            for port, _ in self.masters:
                f.write(f'  - "127.0.0.1:{port}"\n')
            f.write("lock:\n  restart_quarantine: false\n  min_ttl_ms: 100\n"
                    "  retry_delay_ms: 50\n")
            f.write(f'auth:\n  password: "{password or ""}"\n'
                    f'  admin_password: "{ADMIN_PASSWORD}"\n')
            f.write('metrics:\n  listen: ""\n')
        self.log = open(os.path.join(self.dir, "redlockd.log"), "w")
        self.proc = subprocess.Popen([BIN, "-c", conf], stdout=self.log, stderr=self.log)
        _procs.append(self.proc)
        wait_until(self._ready, 10, "redlockd with 5 masters up")

    @staticmethod
    def _redis_up(port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("redlockd exited: " + open(self.log.name).read()[-2000:])
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1)
                s.connect(self.sock)
                s.sendall(b"STATS\n")
                data = b""
                while not data.endswith(b"END\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        return False
                    data += chunk
                return b"STAT masters_up 5\n" in data
        except OSError:
            return False

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def del_everywhere(self, key):
        """DEL key on every master, behind the daemon's back."""
        for port, _ in self.masters:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(b"*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n" % (len(key), key.encode()))
                if not s.recv(64).startswith(b":"):
                    raise AssertionError(f"DEL {key} on master {port} failed")

    def signal_masters(self, sig, n):
        for _, p in self.masters[:n]:
            p.send_signal(sig)

    def stop(self):
        for _, p in self.masters:
            p.send_signal(signal.SIGCONT)
        for p in [self.proc] + [p for _, p in self.masters]:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.log.close()
        subprocess.run(["rm", "-rf", self.dir], check=False)


class Relay:
    """A relay between one client and the daemon's TCP port that can hold
    back what the daemon sends and then pass it on in one send(): two lines
    in one read, as a slow network or a busy client sees them."""

    def __init__(self, port):
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self._listener.getsockname()[1]
        self._port = port
        self._cond = threading.Condition()
        self._holding = False
        self._held = b""
        self._client = self._up = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        try:
            self._client, _ = self._listener.accept()
        except OSError:
            return
        self._up = socket.create_connection(("127.0.0.1", self._port))
        threading.Thread(target=self._pump, args=(self._client, self._up, False),
                         daemon=True).start()
        self._pump(self._up, self._client, True)

    def _pump(self, src, dst, from_daemon):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._cond:
                    if from_daemon and self._holding:
                        self._held += data
                        continue
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def hold(self):
        with self._cond:
            self._holding = True

    def held(self):
        with self._cond:
            return self._held.decode()

    def flush(self):
        """Pass on what was held, in one send, and stop holding."""
        with self._cond:
            self._holding = False
            data, self._held = self._held, b""
            self._client.sendall(data)

    def close(self):
        for s in (self._listener, self._client, self._up):
            if s is not None:
                s.close()
