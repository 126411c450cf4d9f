package redlockd

// Real masters and a real daemon for the tests: five redis-server masters
// on free ports and $REDLOCKD_BIN (default ../../build/redlockd), in a
// fresh temporary directory; stop kills them all.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const adminPassword = "admin-pw"

// testContext is a context.Background with a deadline, so that no wait of a
// test outlives it.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

type daemon struct {
	dir     string
	port    int
	tlsPort int
	sock    string
	masters []*exec.Cmd
	ports   []int // the masters'
	proc    *exec.Cmd
}

// givenPorts: the ports freePort handed out in this run (a port just handed out
// may be free again until its server binds it).
var (
	givenPortsMu sync.Mutex
	givenPorts   = map[int]bool{}
)

func freePort(t *testing.T) int {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		givenPortsMu.Lock()
		seen := givenPorts[port]
		givenPorts[port] = true
		givenPortsMu.Unlock()
		if !seen {
			return port
		}
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v", what, d)
}

func ask(network, addr, line, until string) string {
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprint(c, line)
	r := bufio.NewReader(c)
	var b strings.Builder
	for {
		l, err := r.ReadString('\n')
		b.WriteString(l)
		if err != nil || strings.Contains(b.String(), until) {
			return b.String()
		}
	}
}

func startDaemon(t *testing.T, password, tlsDir string) *daemon {
	t.Helper()
	bin := os.Getenv("REDLOCKD_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("../../build/redlockd")
	}
	d := &daemon{dir: t.TempDir()}
	t.Cleanup(d.stop)
	var ports []int
	for i := 0; i < 5; i++ {
		p := freePort(t)
		cmd := exec.Command("redis-server", "--port", fmt.Sprint(p), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		d.masters = append(d.masters, cmd)
		ports = append(ports, p)
	}
	d.ports = ports
	for _, p := range ports {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		waitUntil(t, 5*time.Second, "master "+addr, func() bool {
			return strings.HasPrefix(ask("tcp", addr, "PING\r\n", "\n"), "+PONG")
		})
	}
	d.port = freePort(t)
	d.sock = filepath.Join(d.dir, "redlockd.sock")
	var b strings.Builder
	fmt.Fprintf(&b, "listen:\n  tcp: \"127.0.0.1:%d\"\n  unix: \"%s\"\n", d.port, d.sock)
	if tlsDir != "" {
		d.tlsPort = freePort(t)
		fmt.Fprintf(&b, "  tls: \"127.0.0.1:%d\"\ntls:\n  cert_file: \"%s/server.crt\"\n"+
			"  key_file: \"%s/server.key\"\n  client_ca_file: \"%s/ca.crt\"\n",
			d.tlsPort, tlsDir, tlsDir, tlsDir)
	}
	b.WriteString("masters:\n")
	for _, p := range ports {
		fmt.Fprintf(&b, "  - \"127.0.0.1:%d\"\n", p)
	}
	b.WriteString("lock:\n  restart_quarantine: false\n  min_ttl_ms: 100\n  retry_delay_ms: 50\n")
	fmt.Fprintf(&b, "auth:\n  password: \"%s\"\n  admin_password: \"%s\"\nmetrics:\n  listen: \"\"\n",
		password, adminPassword)
	conf := filepath.Join(d.dir, "redlockd.yml")
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	log, _ := os.Create(filepath.Join(d.dir, "redlockd.log"))
	d.proc = exec.Command(bin, "-c", conf)
	d.proc.Stdout, d.proc.Stderr = log, log
	d.proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.proc.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "redlockd with 5 masters up", func() bool {
		return strings.Contains(ask("unix", d.sock, "STATS\n", "END\n"), "STAT masters_up 5\n")
	})
	return d
}

func (d *daemon) addr() string { return fmt.Sprintf("127.0.0.1:%d", d.port) }

// delEverywhere deletes key on every master, behind the daemon's back.
func (d *daemon) delEverywhere(t *testing.T, key string) {
	t.Helper()
	for _, p := range d.ports {
		r := ask("tcp", fmt.Sprintf("127.0.0.1:%d", p),
			fmt.Sprintf("*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n", len(key), key), "\n")
		if !strings.HasPrefix(r, ":") {
			t.Fatalf("DEL %s on master %d: %q", key, p, r)
		}
	}
}

func (d *daemon) signalMasters(sig syscall.Signal, n int) {
	for _, m := range d.masters[:n] {
		_ = m.Process.Signal(sig)
	}
}

func (d *daemon) stop() {
	for _, m := range d.masters {
		_ = m.Process.Signal(syscall.SIGCONT)
	}
	for _, c := range append([]*exec.Cmd{d.proc}, d.masters...) {
		if c != nil && c.Process != nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

// relay forwards one TCP connection to the daemon, and can hold back what
// the daemon sends to give it on in one Write: lines the daemon wrote apart
// then reach the client in one read.
type relay struct {
	ln      net.Listener
	mu      sync.Mutex
	client  net.Conn
	server  net.Conn
	holding bool
	held    []byte
}

func startRelay(t *testing.T, to string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	t.Cleanup(r.close)
	go func() {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", to)
		if err != nil {
			client.Close()
			return
		}
		r.mu.Lock()
		r.client, r.server = client, server
		r.mu.Unlock()
		go func() { _, _ = io.Copy(server, client) }()
		r.pump(client, server)
	}()
	return r
}

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		r.client.Close()
		r.server.Close()
	}
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) pump(client, server net.Conn) {
	buf := make([]byte, 65536)
	for {
		n, err := server.Read(buf)
		if err != nil {
			client.Close()
			return
		}
		r.mu.Lock()
		if r.holding {
			r.held = append(r.held, buf[:n]...)
		} else {
			_, _ = client.Write(buf[:n])
		}
		r.mu.Unlock()
	}
}

// hold keeps what the daemon sends from now on.
func (r *relay) hold() {
	r.mu.Lock()
	r.holding = true
	r.mu.Unlock()
}

// holds: what is held back so far.
func (r *relay) holds() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.held)
}

// flush gives all that was held back in one Write, and forwards again.
func (r *relay) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holding = false
	if r.client != nil && len(r.held) > 0 {
		_, _ = r.client.Write(r.held)
	}
	r.held = nil
}
