package redlockd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func dial(t *testing.T, addr string, o *Options) *Client {
	t.Helper()
	c, err := Dial(context.Background(), addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClient(t *testing.T) {
	d := startDaemon(t, "", "")
	ctx := testContext(t, 120*time.Second) // LOCK wait=MS: no wait outlives it

	t.Run("grant status list unlock", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		l, err := a.Lock(ctx, "go-grant", &LockOptions{Fence: true, Label: "go-test"})
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence <= 0 || l.Validity <= 0 {
			t.Fatalf("fence %d validity %v", l.Fence, l.Validity)
		}
		held, f, err := a.Status(ctx, "go-grant", "")
		if err != nil || !held || f["owner"] != "self" || f["label"] != "go-test" {
			t.Fatalf("status: %v %v %v", held, f, err)
		}
		if _, f, _ := b.Status(ctx, "go-grant", ""); f["owner"] != "other" {
			t.Fatalf("other's status: %v", f)
		}
		ls, err := b.List(ctx, "go-grant")
		if err != nil || len(ls) != 1 || ls[0].Name != "go-grant" || ls[0].State != "HELD" {
			t.Fatalf("list: %v %v", ls, err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		if held, _, _ := b.Status(ctx, "go-grant", ""); held {
			t.Fatal("still held after Unlock")
		}
	})

	t.Run("busy and timeout", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		l, err := a.Lock(ctx, "go-busy", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Lock(ctx, "go-busy", &LockOptions{Try: true}); !errors.Is(err, ErrBusy) {
			t.Fatalf("try: %v", err)
		}
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		if _, err := b.Lock(tctx, "go-busy", nil); !errors.Is(err, ErrTimeout) {
			t.Fatalf("deadline: %v", err)
		}
		if time.Since(t0) < 250*time.Millisecond {
			t.Fatalf("TIMEOUT after %v", time.Since(t0))
		}
		_ = l.Unlock()
	})

	t.Run("cancelled wait releases a late grant", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		held, err := a.Lock(ctx, "go-cancel", nil)
		if err != nil {
			t.Fatal(err)
		}
		// No deadline: LOCK wait=inf, which the cancel below ends.
		cctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(200 * time.Millisecond); cancel() }()
		if _, err := b.Lock(cctx, "go-cancel", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v", err)
		}
		_ = held.Unlock() // b's LOCK is granted now, and released at once
		waitUntil(t, 5*time.Second, "the late grant released", func() bool {
			h, _, err := a.Status(ctx, "go-cancel", "")
			return err == nil && !h
		})
		b.mu.Lock()
		stale := len(b.locks["go-cancel"])
		b.mu.Unlock()
		if stale != 0 {
			t.Fatalf("%d Locks of the released grant left in the session's locks", stale)
		}
	})

	t.Run("re-entrant holds unlock one at a time", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		l1, err1 := a.Lock(ctx, "go-again", nil)
		l2, err2 := a.Lock(ctx, "go-again", nil)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if err := l1.Unlock(); err != nil {
			t.Fatal(err)
		}
		if l1.LostReason() != "released" || l2.LostReason() != "" {
			t.Fatalf("after one Unlock: %q %q", l1.LostReason(), l2.LostReason())
		}
		// Again on l1: refused here, or it would release l2's hold.
		if err := l1.Unlock(); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second Unlock of one Lock: %v", err)
		}
		if held, _, _ := b.Status(ctx, "go-again", ""); !held {
			t.Fatal("free while l2 holds it")
		}
		if err := l2.Unlock(); err != nil {
			t.Fatal(err)
		}
		if held, _, _ := b.Status(ctx, "go-again", ""); held {
			t.Fatal("held after both Unlocks")
		}
		a.mu.Lock()
		left := len(a.locks)
		a.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d names left in the session's locks", left)
		}
	})

	t.Run("shared and counted", func(t *testing.T) {
		a, b, c := dial(t, d.addr(), nil), dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		s1, err1 := a.Lock(ctx, "go-sh", &LockOptions{Shared: true})
		s2, err2 := b.Lock(ctx, "go-sh", &LockOptions{Shared: true})
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if _, f, _ := c.Status(ctx, "go-sh", ""); f.Int("holders") != 2 {
			t.Fatalf("holders: %v", f)
		}
		_ = s1.Unlock()
		_ = s2.Unlock()
		p1, _ := a.Lock(ctx, "go-sem", &LockOptions{Limit: 2})
		p2, _ := b.Lock(ctx, "go-sem", &LockOptions{Limit: 2})
		if p1 == nil || p2 == nil || p1.Permit+p2.Permit != 1 {
			t.Fatalf("permits %v %v", p1, p2)
		}
		if _, err := c.Lock(ctx, "go-sem", &LockOptions{Limit: 2, Try: true}); !errors.Is(err, ErrBusy) {
			t.Fatalf("third permit: %v", err)
		}
		if _, err := c.Lock(ctx, "go-sem", &LockOptions{Limit: 3, Try: true}); !errors.Is(err, ErrKind) {
			t.Fatalf("other limit: %v", err)
		}
		_ = p1.Unlock()
		_ = p2.Unlock()
	})

	t.Run("lease across clients", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		ls, err := a.Lease(ctx, "go-lease", 5*time.Second, &LockOptions{Fence: true})
		if err != nil {
			t.Fatal(err)
		}
		a.Close()
		if _, f, _ := b.Status(ctx, "go-lease", ls.Token); f["owner"] != "self" {
			t.Fatalf("by token: %v", f)
		}
		if v, err := b.Extend(ctx, "go-lease", ls.Token, 8*time.Second); err != nil || v <= 5*time.Second {
			t.Fatalf("extend: %v %v", v, err)
		}
		if err := b.Release(ctx, "go-lease", ls.Token); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, "go-lease", ls.Token); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second release: %v", err)
		}
		if _, err := b.Extend(ctx, "go-lease", ls.Token, time.Second); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("extend after release: %v", err)
		}
	})

	t.Run("LOST after BREAK cancels the context", func(t *testing.T) {
		a := dial(t, d.addr(), nil)
		admin := dial(t, d.addr(), &Options{Password: adminPassword})
		l, err := a.Lock(ctx, "go-break", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := dial(t, d.addr(), nil).Break(ctx, "go-break"); !errors.Is(err, ErrDenied) {
			t.Fatalf("BREAK without the right: %v", err)
		}
		if err := admin.Break(ctx, "go-break"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatal("no LOST")
		}
		if l.LostReason() != "broken" {
			t.Fatalf("reason %q", l.LostReason())
		}
		if err := l.Unlock(); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("unlock after loss: %v", err)
		}
	})

	t.Run("LOST right behind a re-entrant grant reaches every hold", func(t *testing.T) {
		r := startRelay(t, d.addr())
		a := dial(t, r.addr(), nil)
		admin := dial(t, d.addr(), &Options{Password: adminPassword})
		first, err := a.Lock(ctx, "go-behind", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.hold()
		type result struct {
			lk  *Lock
			err error
		}
		res := make(chan result, 1)
		go func() {
			lk, err := a.Lock(ctx, "go-behind", nil) // a second hold, at once
			res <- result{lk, err}
		}()
		waitUntil(t, 5*time.Second, "the relay holds the second OK", func() bool {
			return strings.Contains(r.holds(), "OK go-behind ")
		})
		if err := admin.Break(ctx, "go-behind"); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 5*time.Second, "the relay holds the LOST", func() bool {
			return strings.Contains(r.holds(), "! LOST go-behind")
		})
		r.flush() // the OK and the LOST in one read
		var second result
		select {
		case second = <-res:
		case <-time.After(5 * time.Second):
			t.Fatal("no reply to the second Lock")
		}
		if second.err != nil {
			t.Fatal(second.err)
		}
		for i, l := range []*Lock{first, second.lk} {
			select {
			case <-l.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("hold %d: the LOST behind the grant was dropped", i+1)
			}
			if l.LostReason() != "broken" {
				t.Fatalf("hold %d: reason %q", i+1, l.LostReason())
			}
		}
	})

	t.Run("LOST when masters stop", func(t *testing.T) {
		a := dial(t, d.addr(), nil)
		l, err := a.Lock(ctx, "go-quorum", &LockOptions{TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		d.signalMasters(syscall.SIGSTOP, 3)
		defer d.signalMasters(syscall.SIGCONT, 3)
		select {
		case <-l.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatal("no LOST with 3 of 5 masters stopped")
		}
		if r := l.LostReason(); r != "quorum" && r != "renew" {
			t.Fatalf("reason %q", r)
		}
	})

	t.Run("watch", func(t *testing.T) {
		a, w := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		wctx, cancel := context.WithCancel(ctx)
		ch, err := w.Watch(wctx, "go-watch")
		if err != nil {
			t.Fatal(err)
		}
		next := func() Event {
			select {
			case ev := <-ch:
				return ev
			case <-time.After(5 * time.Second):
				t.Fatal("no event")
			}
			return Event{}
		}
		if next().Held {
			t.Fatal("first: held")
		}
		l, _ := a.Lock(ctx, "go-watch", nil)
		if ev := next(); !ev.Held || ev.Fields["kind"] != "exclusive" {
			t.Fatalf("after LOCK: %v", ev)
		}
		_ = l.Unlock()
		if next().Held {
			t.Fatal("after UNLOCK: held")
		}
		cancel()
		waitUntil(t, 2*time.Second, "channel closed", func() bool {
			select {
			case _, ok := <-ch:
				return !ok
			default:
				return false
			}
		})
		if err := w.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("unix socket", func(t *testing.T) {
		c := dial(t, "unix:"+d.sock, nil)
		l, err := c.Lock(ctx, "go-unix", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock()
	})
}

func TestAuthFromEnvironment(t *testing.T) {
	d := startDaemon(t, "go-secret", "")
	t.Setenv("REDLOCKD_PASSWORD", "go-secret")
	c := dial(t, d.addr(), nil)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), d.addr(), &Options{Password: "wrong"}); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestKilledDaemon(t *testing.T) {
	d := startDaemon(t, "", "")
	c := dial(t, d.addr(), nil)
	l, err := c.Lock(testContext(t, 30*time.Second), "go-killed", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = d.proc.Process.Kill()
	select {
	case <-l.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not lost")
	}
	if l.LostReason() != "connection" {
		t.Fatalf("reason %q", l.LostReason())
	}
	if err := c.Ping(context.Background()); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("after the end: %v", err)
	}
}

func TestTLSClientCertificate(t *testing.T) {
	certs := t.TempDir()
	root, _ := filepath.Abs("../..")
	if out, err := exec.Command("sh", filepath.Join(root, "tests/tls/make-certs.sh"), certs).CombinedOutput(); err != nil {
		t.Fatalf("make-certs.sh: %v %s", err, out)
	}
	d := startDaemon(t, "", certs)
	addr := fmt.Sprintf("127.0.0.1:%d", d.tlsPort)
	c := dial(t, addr, &Options{CAFile: certs + "/ca.crt", CertFile: certs + "/client.crt",
		KeyFile: certs + "/client.key"})
	l, err := c.Lock(testContext(t, 30*time.Second), "go-tls", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock()
	bad, err := Dial(context.Background(), addr, &Options{CAFile: certs + "/ca.crt"})
	if err == nil {
		err = bad.Ping(context.Background())
		bad.Close()
	}
	if err == nil {
		t.Fatal("served without a client certificate")
	}
}

// The example of docs/using.md, built in a module of its own as the doc
// says (a replace directive pointing here) and run as written but for
// the address: it holds the lock and stops with "lost: broken" when the
// lock is broken.
func TestDocExample(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the example with")
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(here, "..", "..", "docs", "using.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)[strings.Index(string(doc), "## Using it from Go"):]
	code := section[strings.Index(section, "```go\n")+6:]
	code = code[:strings.Index(code, "```")]
	d := startDaemon(t, "", "")
	code = strings.Replace(code, "127.0.0.1:7379", d.addr(), 1)
	dir := t.TempDir()
	mod := "module myjob\n\ngo 1.19\n\nrequire redlockd v0.0.0\n\nreplace redlockd => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 120*time.Second)
	build := exec.CommandContext(ctx, "go", "build", "-o", "example", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.CommandContext(ctx, filepath.Join(dir, "example"))
	out, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	run.Stderr = run.Stdout
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Process.Kill() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "held with fence ") {
		t.Fatalf("the example printed %q first", lines.Text())
	}
	admin := dial(t, d.addr(), &Options{Password: adminPassword})
	if err := admin.Break(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		rest := ""
		for lines.Scan() {
			rest += lines.Text() + "\n"
		}
		done <- rest
	}()
	select {
	case rest := <-done:
		werr := run.Wait()
		var exit *exec.ExitError
		if rest != "lost: broken\n" || !errors.As(werr, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("the example printed %q and ended with %v", rest, werr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the example did not stop within 5 s of the BREAK")
	}
}
