package redlockd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

	t.Run("set granted whole, fences in order, unlocked whole", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		z, err := a.Lock(ctx, "go-set-z", &LockOptions{Fence: true}) // z's fence moves ahead
		if err != nil {
			t.Fatal(err)
		}
		if err := z.Unlock(); err != nil {
			t.Fatal(err)
		}
		names := []string{"go-set-z", "go-set-a"}
		l, err := a.LockMany(ctx, names, &LockOptions{Fence: true, Label: "go-set"})
		if err != nil {
			t.Fatal(err)
		}
		if l.Name != "go-set-z go-set-a" || len(l.Names) != 2 || len(l.Fences) != 2 || l.Validity <= 0 {
			t.Fatalf("set: %+v", l)
		}
		for i, n := range names {
			_, f, err := a.Status(ctx, n, "")
			if err != nil || f["owner"] != "self" || f.Int("fence") != l.Fences[i] {
				t.Fatalf("%s: %v %v, fences %v", n, f, err, l.Fences)
			}
			if _, f, _ := b.Status(ctx, n, ""); f["owner"] != "other" {
				t.Fatalf("%s for another session: %v", n, f)
			}
		}
		if l.Fences[0] <= l.Fences[1] {
			t.Fatalf("fences %v are not in the order given", l.Fences)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if held, _, _ := b.Status(ctx, n, ""); held {
				t.Fatalf("%s still held after Unlock", n)
			}
		}
		if l.LostReason() != "released" {
			t.Fatalf("reason %q", l.LostReason())
		}
	})

	t.Run("set refused whole when one name is held", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		held, err := a.Lock(ctx, "go-set-held", nil)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{"go-set-free", "go-set-held"}
		_, err = b.LockMany(ctx, names, &LockOptions{Try: true})
		if !errors.Is(err, ErrBusy) || !strings.HasPrefix(err.Error(), "BUSY go-set-free go-set-held ttl=") {
			t.Fatalf("try: %v", err)
		}
		if h, _, _ := a.Status(ctx, "go-set-free", ""); h {
			t.Fatal("a refused set left a name held")
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := b.LockMany(short, names, nil); !errors.Is(err, ErrTimeout) {
			t.Fatalf("wait: %v", err)
		}
		if err := held.Unlock(); err != nil {
			t.Fatal(err)
		}
		l, err := b.LockMany(ctx, names, &LockOptions{Try: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock()
		if _, err := b.LockMany(ctx, []string{"go-dup", "go-dup"}, nil); !errors.Is(err, ErrProtocol) {
			t.Fatalf("a name twice: %v", err)
		}
		if _, err := b.LockMany(ctx, names, &LockOptions{Shared: true}); !errors.Is(err, ErrProtocol) {
			t.Fatalf("a shared set: %v", err)
		}
	})

	t.Run("set lost once when one of its keys vanishes", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		names := []string{"go-lost-1", "go-lost-2", "go-lost-3"}
		l, err := a.LockMany(ctx, names, &LockOptions{TTL: 600 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		d.delEverywhere(t, "redlock:go-lost-2")
		select {
		case <-l.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatal("no loss signal for the set")
		}
		if r := l.LostReason(); r != "gone" && r != "renew" {
			t.Fatalf("reason %q", r)
		}
		waitUntil(t, 5*time.Second, "the other names released", func() bool {
			h1, _, _ := b.Status(ctx, "go-lost-1", "")
			h3, _, _ := b.Status(ctx, "go-lost-3", "")
			return !h1 && !h3
		})
		a.mu.Lock()
		left := len(a.locks)
		a.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d names still entered after the loss", left)
		}
		if err := l.Unlock(); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Unlock after the loss: %v", err)
		}
	})

	t.Run("LOST right behind a set's grant reaches the set", func(t *testing.T) {
		r := startRelay(t, d.addr())
		a := dial(t, r.addr(), nil)
		r.hold()
		type result struct {
			lk  *Lock
			err error
		}
		res := make(chan result, 1)
		go func() {
			lk, err := a.LockMany(ctx, []string{"go-behind-1", "go-behind-2"},
				&LockOptions{TTL: 300 * time.Millisecond})
			res <- result{lk, err}
		}()
		waitUntil(t, 5*time.Second, "the relay holds the OK", func() bool {
			return strings.Contains(r.holds(), "OK go-behind-1 go-behind-2 ")
		})
		d.delEverywhere(t, "redlock:go-behind-1")
		waitUntil(t, 5*time.Second, "the relay holds the LOST", func() bool {
			return strings.Contains(r.holds(), "! LOST go-behind-1 go-behind-2 ")
		})
		r.flush() // the OK and the LOST in one read
		var got result
		select {
		case got = <-res:
		case <-time.After(5 * time.Second):
			t.Fatal("no reply to LockMany")
		}
		if got.err != nil {
			t.Fatal(got.err)
		}
		select {
		case <-got.lk.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the LOST behind the set's grant was dropped")
		}
	})

	t.Run("set lease extended and released by token", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		ls, err := a.LeaseMany(ctx, []string{"go-lset-b", "go-lset-a"}, 5*time.Second, &LockOptions{Fence: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(ls.Names) != 2 || len(ls.Fences) != 2 || len(ls.Token) != TokenLen {
			t.Fatalf("lease: %+v", ls)
		}
		a.Close()
		if _, f, _ := b.Status(ctx, "go-lset-a", ls.Token); f["owner"] != "self" {
			t.Fatalf("status by token: %v", f)
		}
		if v, err := b.ExtendMany(ctx, []string{"go-lset-a", "go-lset-b"}, ls.Token, 9*time.Second); err != nil || v <= 5*time.Second {
			t.Fatalf("extend: %v %v", v, err)
		}
		if _, err := b.ExtendMany(ctx, []string{"go-lset-a", "go-lset-b", "go-lset-c"}, ls.Token, time.Second); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("extend of a larger set: %v", err)
		}
		ls, err = b.LeaseMany(ctx, []string{"go-lset-b", "go-lset-a"}, 5*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ReleaseMany(ctx, ls.Names, ls.Token); err != nil {
			t.Fatal(err)
		}
		for _, n := range ls.Names {
			if h, _, _ := b.Status(ctx, n, ""); h {
				t.Fatalf("%s held after ReleaseMany", n)
			}
		}
		if err := b.ReleaseMany(ctx, ls.Names, ls.Token); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second release: %v", err)
		}
	})

	// Lock-delay: a hold that ends without Unlock (its client closed)
	// keeps the name from everyone for the delay.
	vanish := func(t *testing.T, take func(c *Client) error) {
		gone := dial(t, d.addr(), nil)
		if err := take(gone); err != nil {
			t.Fatal(err)
		}
		gone.Close()
	}
	// delayedBusy waits (deadline 5 s) for a try on name refused by a
	// lock-delay, and returns its error; a grant fails the test.
	delayedBusy := func(t *testing.T, c *Client, name string) *Error {
		var busy *Error
		waitUntil(t, 5*time.Second, name+" refused by a delay", func() bool {
			l, err := c.Lock(ctx, name, &LockOptions{Try: true})
			if err == nil {
				_ = l.Unlock()
				t.Fatalf("%s was granted: the vanished holder's delay did not keep it", name)
			}
			if !errors.As(err, &busy) || !errors.Is(err, ErrBusy) {
				t.Fatalf("try: %v", err)
			}
			return busy.Delayed > 0
		})
		return busy
	}

	t.Run("delay keeps a single name, then it is granted", func(t *testing.T) {
		b := dial(t, d.addr(), nil)
		vanish(t, func(c *Client) error {
			_, err := c.Lock(ctx, "go-delay", &LockOptions{Delay: 2 * time.Second})
			return err
		})
		busy := delayedBusy(t, b, "go-delay")
		if busy.Delayed > 2*time.Second || busy.TTL != busy.Delayed {
			t.Fatalf("BUSY: ttl %v delayed %v", busy.TTL, busy.Delayed)
		}
		held, f, err := b.Status(ctx, "go-delay", "")
		if err != nil || held || f.Int("delayed") <= 0 || f.Int("delayed") > 2000 || f["owner"] != "" {
			t.Fatalf("status: %v %v %v", held, f, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // waits the delay out
		defer cancel()
		l, err := b.Lock(wctx, "go-delay", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		if held, f, _ := b.Status(ctx, "go-delay", ""); held || f.Int("delayed") != 0 {
			t.Fatalf("Unlock left a delay: %v", f)
		}
	})

	t.Run("delay keeps a set, then it is granted", func(t *testing.T) {
		b := dial(t, d.addr(), nil)
		names := []string{"go-dset-1", "go-dset-2"}
		vanish(t, func(c *Client) error {
			_, err := c.LockMany(ctx, names, &LockOptions{Delay: 2 * time.Second})
			return err
		})
		delayedBusy(t, b, "go-dset-2")
		if _, f, _ := b.Status(ctx, "go-dset-1", ""); f.Int("delayed") <= 0 {
			t.Fatalf("status of the set's other name: %v", f)
		}
		var busy *Error
		if _, err := b.LockMany(ctx, names, &LockOptions{Try: true}); !errors.As(err, &busy) || busy.Delayed <= 0 {
			t.Fatalf("try of the set: %v", err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := b.LockMany(wctx, names, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a holder's BUSY is no delay; NoDelay; shared refused", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		l, err := a.Lock(ctx, "go-nodelay", &LockOptions{Delay: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var busy *Error
		if _, err := b.Lock(ctx, "go-nodelay", &LockOptions{Try: true}); !errors.As(err, &busy) ||
			busy.Delayed != 0 || busy.TTL <= 0 {
			t.Fatalf("try while held: %v", err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		vanish(t, func(c *Client) error {
			_, err := c.Lock(ctx, "go-nodelay", &LockOptions{Delay: NoDelay})
			return err
		})
		waitUntil(t, 5*time.Second, "go-nodelay granted at once after a NoDelay hold", func() bool {
			l, err := b.Lock(ctx, "go-nodelay", &LockOptions{Try: true})
			if errors.As(err, &busy) && busy.Delayed > 0 {
				t.Fatalf("NoDelay left a delay: %v", err)
			}
			if err == nil {
				_ = l.Unlock()
			}
			return err == nil
		})
		if _, err := a.Lock(ctx, "go-delay-sh", &LockOptions{Shared: true, Delay: time.Second}); !errors.Is(err, ErrProtocol) {
			t.Fatalf("shared with a delay: %v", err)
		}
		if _, err := a.Lock(ctx, "go-delay-sh", &LockOptions{Delay: -2}); !errors.Is(err, ErrProtocol) {
			t.Fatalf("a negative delay: %v", err)
		}
	})

	t.Run("check a fenced grant, released, then another's", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		l1, err := a.Lock(ctx, "go-ck", &LockOptions{Fence: true})
		if err != nil {
			t.Fatal(err)
		}
		if ck, err := b.Check(ctx, "go-ck", l1.Fence, l1.Permit); err != nil || !ck.Current || ck.TTL <= 0 || ck.Reason != "" {
			t.Fatalf("while held: %+v %v", ck, err)
		}
		if err := l1.Unlock(); err != nil {
			t.Fatal(err)
		}
		if ck, err := b.Check(ctx, "go-ck", l1.Fence, -1); err != nil || ck != (Checked{Reason: "free"}) {
			t.Fatalf("after Unlock: %+v %v", ck, err)
		}
		l2, err := b.Lock(ctx, "go-ck", &LockOptions{Fence: true})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Unlock()
		if ck, err := a.Check(ctx, "go-ck", l1.Fence, -1); err != nil || ck != (Checked{Reason: "other"}) {
			t.Fatalf("after another grant: %+v %v", ck, err)
		}
		if ck, err := a.Check(ctx, "go-ck", l2.Fence, -1); err != nil || !ck.Current {
			t.Fatalf("the other grant: %+v %v", ck, err)
		}
		set, err := a.LockMany(ctx, []string{"go-ck-s1", "go-ck-s2"}, &LockOptions{Fence: true})
		if err != nil {
			t.Fatal(err)
		}
		defer set.Unlock()
		for i, n := range set.Names {
			if ck, err := a.Check(ctx, n, set.Fences[i], -1); err != nil || !ck.Current {
				t.Fatalf("%s of the set: %+v %v", n, ck, err)
			}
		}
	})

	t.Run("check a lease by token; a counted name needs its permit", func(t *testing.T) {
		a, b := dial(t, d.addr(), nil), dial(t, d.addr(), nil)
		ls, err := a.Lease(ctx, "go-ck-lease", 5*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ck, err := b.CheckToken(ctx, "go-ck-lease", ls.Token); err != nil || !ck.Current {
			t.Fatalf("lease: %+v %v", ck, err)
		}
		if err := a.Release(ctx, "go-ck-lease", ls.Token); err != nil {
			t.Fatal(err)
		}
		if ck, err := b.CheckToken(ctx, "go-ck-lease", ls.Token); err != nil || ck != (Checked{Reason: "free"}) {
			t.Fatalf("released lease: %+v %v", ck, err)
		}
		other, err := a.Lease(ctx, "go-ck-lease", 5*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release(ctx, "go-ck-lease", other.Token)
		if ck, err := b.CheckToken(ctx, "go-ck-lease", ls.Token); err != nil || ck != (Checked{Reason: "other"}) {
			t.Fatalf("after another lease: %+v %v", ck, err)
		}
		p, err := a.Lock(ctx, "go-ck-sem", &LockOptions{Limit: 2, Fence: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Unlock()
		if _, err := a.Check(ctx, "go-ck-sem", p.Fence, -1); !errors.Is(err, ErrKind) {
			t.Fatalf("counted without its permit: %v", err)
		}
		if ck, err := a.Check(ctx, "go-ck-sem", p.Fence, p.Permit); err != nil || !ck.Current {
			t.Fatalf("counted with its permit: %+v %v", ck, err)
		}
		for _, bad := range []error{
			func() error { _, err := a.Check(ctx, "go-ck-arg", 0, -1); return err }(),
			func() error { _, err := a.Check(ctx, "go-ck-arg", 1, 1000); return err }(),
			func() error { _, err := a.CheckToken(ctx, "go-ck-arg", "abc"); return err }(),
		} {
			if !errors.Is(bad, ErrProtocol) {
				t.Fatalf("a bad argument: %v", bad)
			}
		}
	})

	t.Run("check with too few masters is ErrNoQuorum", func(t *testing.T) {
		a := dial(t, d.addr(), nil)
		d.signalMasters(syscall.SIGSTOP, 3)
		defer d.signalMasters(syscall.SIGCONT, 3)
		if _, err := a.Check(ctx, "go-ck-nq", 1, -1); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("check: %v", err)
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

	// Arguments out of the protocol's bounds are refused before anything is
	// sent, with an error that says what is wrong and the bound.
	t.Run("bounds named in the errors", func(t *testing.T) {
		a := dial(t, d.addr(), nil)
		refused := func(err error, want string) {
			t.Helper()
			if err == nil || err.Error() != want || !errors.Is(err, ErrProtocol) {
				t.Errorf("got %v, want %q (matching ErrProtocol)", err, want)
			}
		}
		lock := func(name string, o *LockOptions) error { _, err := a.Lock(ctx, name, o); return err }
		long := strings.Repeat("n", 300)
		ascii := "it must be one word of printable ASCII (0x21 to 0x7e)"
		printable := "it must be printable ASCII (0x21 to 0x7e) without spaces"
		refused(lock(long, nil), "lock name is 300 bytes; at most 250")
		refused(lock("é"+strings.Repeat("n", 249), nil), "lock name is 251 bytes; at most 250")
		refused(lock("", nil), "lock name is empty; it must be 1 to 250 bytes")
		refused(lock("two words", nil), "lock name contains a space (at byte 3); "+ascii)
		_, _, err := a.Status(ctx, "two\nPING", "")
		refused(err, "lock name has byte 0x0a at offset 3; "+printable)
		refused(lock("été", nil), "lock name has byte 0xc3 at offset 0; "+printable)
		_, err = a.Lease(ctx, long, time.Second, nil)
		refused(err, "lock name is 300 bytes; at most 250")
		refused(a.Break(ctx, long), "lock name is 300 bytes; at most 250")
		refused(a.Release(ctx, long, strings.Repeat("a", 32)), "lock name is 300 bytes; at most 250")
		refused(lock("go-bounds", &LockOptions{Label: strings.Repeat("l", 65)}), "label is 65 bytes; at most 64")
		refused(lock("go-bounds", &LockOptions{Label: "has space"}), "label contains a space (at byte 3); "+ascii)
		refused(lock("go-bounds", &LockOptions{TTL: time.Microsecond}), "ttl is 1µs; it must be 1ms to 4000000000000ms")
		refused(lock("go-bounds", &LockOptions{Limit: 2000}), "limit is 2000; it must be 1 to 1000")
		hex := "it must be 32 lowercase hex digits (as the lease's grant gave it)"
		refused(a.Release(ctx, "go-bounds", "abc"), "token is 3 bytes; "+hex)
		_, err = a.Extend(ctx, "go-bounds", strings.Repeat("G", 32), time.Second)
		refused(err, "token has 'G' at offset 0; "+hex)
		_, err = a.List(ctx, strings.Repeat("p", 251))
		refused(err, "prefix is 251 bytes; at most 250")
		_, err = Dial(ctx, d.addr(), &Options{Password: strings.Repeat("p", 251)})
		refused(err, "password is 251 bytes; at most 250")
		// The longest name is taken, and nothing refused was sent: the
		// session answers in step.
		l, err := a.Lock(ctx, strings.Repeat("n", 250), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		if held, _, err := a.Status(ctx, "go-bounds", ""); held || err != nil {
			t.Fatalf("go-bounds: held %v, %v", held, err)
		}
	})

	// Without an address or environment: the Unix socket (DefaultSocket),
	// then TCP (DefaultAddress), as redlockctl does.
	t.Run("default order: the Unix socket, then TCP", func(t *testing.T) {
		t.Setenv("REDLOCKD_SOCKET", "")
		t.Setenv("REDLOCKD_ADDR", "")
		t.Cleanup(func() { defaultSocket, defaultAddress = DefaultSocket, DefaultAddress })
		dir := t.TempDir()
		dead := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		label := func(c *Client, name string) string {
			t.Helper()
			l, err := c.Lock(ctx, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Unlock() }()
			_, f, err := c.Status(ctx, name, "")
			if err != nil {
				t.Fatal(err)
			}
			return f["label"]
		}

		defaultSocket, defaultAddress = d.sock, dead
		c := dial(t, "", nil)
		if c.Address() != "unix:"+d.sock || !strings.Contains(label(c, "go-order-unix"), ":uid=") {
			t.Fatalf("connected to %s", c.Address()) // the daemon saw a TCP peer
		}

		// A socket file nobody listens on, and no file: TCP.
		stale := filepath.Join(dir, "stale.sock")
		ln, err := net.Listen("unix", stale)
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		for _, sock := range []string{stale, filepath.Join(dir, "absent.sock")} {
			defaultSocket, defaultAddress = sock, d.addr()
			c := dial(t, "", nil)
			if c.Address() != d.addr() || !strings.Contains(label(c, "go-order-tcp"), ":127.0.0.1:") {
				t.Fatalf("with %s: connected to %s", sock, c.Address())
			}
		}

		// Neither: the error names both.
		defaultSocket, defaultAddress = filepath.Join(dir, "absent.sock"), dead
		_, err = Dial(ctx, "", nil)
		want := "cannot connect to redlockd: " + defaultSocket + ": no such file or directory; " +
			dead + ": connection refused"
		if err == nil || err.Error() != want || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("got %v, want %q", err, want)
		}

		// The environment comes before the default socket.
		defaultSocket, defaultAddress = d.sock, dead
		t.Setenv("REDLOCKD_ADDR", d.addr())
		if c := dial(t, "", nil); c.Address() != d.addr() {
			t.Fatalf("with $REDLOCKD_ADDR: connected to %s", c.Address())
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

// A refused AUTH is not a failed connection: Dial without an address sends
// the password once, on the connection it chose (the Unix socket here), and
// does not try TCP with it too.
func TestAuthRefusedOnDefaultSocket(t *testing.T) {
	d := startDaemon(t, "go-secret", "")
	t.Setenv("REDLOCKD_SOCKET", "")
	t.Setenv("REDLOCKD_ADDR", "")
	t.Setenv("REDLOCKD_PASSWORD", "")
	t.Cleanup(func() { defaultSocket, defaultAddress = DefaultSocket, DefaultAddress })
	failures := func(t *testing.T) int {
		t.Helper()
		for _, line := range strings.Split(ask("unix", d.sock, "STATS\n", "END\n"), "\n") {
			if strings.HasPrefix(line, "STAT auth_failures ") {
				n, err := strconv.Atoi(strings.TrimPrefix(line, "STAT auth_failures "))
				if err != nil {
					t.Fatal(line)
				}
				return n
			}
		}
		t.Fatal("STATS has no auth_failures")
		return 0
	}
	dead := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for _, tcp := range []string{dead, d.addr()} {
		t.Run("TCP default "+tcp, func(t *testing.T) {
			defaultSocket, defaultAddress = d.sock, tcp
			before := failures(t)
			_, err := Dial(context.Background(), "", &Options{Password: "wrong"})
			if !errors.Is(err, ErrAuth) {
				t.Errorf("got %v, want ErrAuth", err)
			}
			if after := failures(t); after != before+1 {
				t.Errorf("auth_failures %d -> %d, want one more", before, after)
			}
		})
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

// fenced is the code blocks of file (from the tree's root) fenced as lang,
// in order; only those of the section under heading when it is not "".
func fenced(t *testing.T, file, lang, heading string) []string {
	t.Helper()
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(here, "..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	if heading != "" {
		text = text[strings.Index(text, heading):]
		if end := strings.Index(text[1:], "\n## "); end >= 0 {
			text = text[:end+1]
		}
	}
	var blocks []string
	for _, part := range strings.Split(text, "```"+lang+"\n")[1:] {
		blocks = append(blocks, part[:strings.Index(part, "```")])
	}
	return blocks
}

// deferBeforeExit names the functions of a Go file that defer a call and
// also call os.Exit or log.Fatal*, which end the process without running
// the deferred calls (an Unlock, a Close).
func deferBeforeExit(t *testing.T, code string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", code, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		defers, exits := false, false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false // a function of its own
			case *ast.DeferStmt:
				defers = true
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && ((pkg.Name == "os" && sel.Sel.Name == "Exit") ||
						(pkg.Name == "log" && strings.HasPrefix(sel.Sel.Name, "Fatal"))) {
						exits = true
					}
				}
			}
			return true
		})
		if defers && exits {
			bad = append(bad, fn.Name.Name)
		}
	}
	return bad
}

// hearsTheLoss builds main.go in dir (a module that requires redlockd) and
// runs it against a daemon of its own, found through $REDLOCKD_ADDR (as
// Dial with "" finds it; docs/using.md's example names the address,
// replaced): it holds the lock and stops with "lost: broken", exit status
// 1, when the lock is broken.  The code is gofmt'd and defers nothing in
// a function that calls os.Exit.
func hearsTheLoss(t *testing.T, dir, code string) {
	hearsTheLossOf(t, dir, code, "nightly", "held with fence ")
}

// hearsTheLossOf is hearsTheLoss for an example that holds name (among
// others, maybe) and prints first before anything else once it does.
func hearsTheLossOf(t *testing.T, dir, code, name, first string) {
	if bad := deferBeforeExit(t, code); len(bad) > 0 {
		t.Errorf("%v defer calls and call os.Exit, which runs none of them", bad)
	}
	if formatted, err := format.Source([]byte(code)); err != nil || string(formatted) != code {
		t.Errorf("the example is not gofmt'd (%v):\n%s", err, formatted)
	}
	d := startDaemon(t, "", "")
	code = strings.Replace(code, "127.0.0.1:7379", d.addr(), 1)
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
	run.Env = append(os.Environ(), "REDLOCKD_SOCKET=", "REDLOCKD_ADDR="+d.addr())
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
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), first) {
		t.Fatalf("the example printed %q first", lines.Text())
	}
	admin := dial(t, d.addr(), &Options{Password: adminPassword})
	if err := admin.Break(ctx, name); err != nil {
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

// The example of docs/using.md, built in a module of its own as the doc
// says (a replace directive pointing here) and run as written but for
// the address.
func TestDocExample(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the example with")
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module myjob\n\ngo 1.19\n\nrequire redlockd v0.0.0\n\nreplace redlockd => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	hearsTheLoss(t, dir, fenced(t, "docs/using.md", "go", "## Using it from Go")[0])
}

// The example of docs/using.md's "Several names at once", built as
// TestDocExample builds its: both names held, a fence each, and the whole
// set lost when one of them is broken.
func TestDocSetsExample(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the example with")
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module myjob\n\ngo 1.19\n\nrequire redlockd v0.0.0\n\nreplace redlockd => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	code := fenced(t, "docs/using.md", "go", "## Several names at once")[0]
	if !strings.Contains(code, "LockMany(") {
		t.Fatal("the sets example takes no set")
	}
	hearsTheLossOf(t, dir, code, "account-42", "held with fences [")
}

// outputOf builds docs/using.md's Go example under heading (which calls
// needs) as TestDocExample builds its, runs it to its end against a
// daemon of its own (the address replaced), and returns what it printed.
func outputOf(t *testing.T, heading, needs string) string {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the example with")
	}
	blocks := fenced(t, "docs/using.md", "go", heading)
	if len(blocks) != 1 || !strings.Contains(blocks[0], needs) {
		t.Fatalf("%d Go examples under %s, or none with %s", len(blocks), heading, needs)
	}
	code := blocks[0]
	if bad := deferBeforeExit(t, code); len(bad) > 0 {
		t.Errorf("%v defer calls and call os.Exit, which runs none of them", bad)
	}
	if formatted, err := format.Source([]byte(code)); err != nil || string(formatted) != code {
		t.Errorf("the example is not gofmt'd (%v):\n%s", err, formatted)
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module myjob\n\ngo 1.19\n\nrequire redlockd v0.0.0\n\nreplace redlockd => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "", "")
	code = strings.ReplaceAll(code, "127.0.0.1:7379", d.addr())
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
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(rctx, filepath.Join(dir, "example")).CombinedOutput()
	if err != nil {
		t.Fatalf("the example: %v\n%s", err, out)
	}
	return string(out)
}

// docs/using.md's "Checking a grant before a write": current while held,
// stale with reason free once released.
func TestDocCheckExample(t *testing.T) {
	if out := outputOf(t, "## Checking a grant before a write", ".Check("); out != "true <nil>\nfalse free <nil>\n" {
		t.Fatalf("the example printed %q", out)
	}
}

// docs/using.md's "Lock-delay": a try refused by the delay of a holder
// that vanished, then the name granted once it ran out.
func TestDocDelayExample(t *testing.T) {
	if out := outputOf(t, "## Lock-delay", "Delay:"); out != "delayed: true\nheld\n" {
		t.Fatalf("the example printed %q", out)
	}
}

// The README's install lines, run as written (but for /path/to/redlockd)
// with no module proxy, then its example, as written.
func TestReadmeExample(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the example with")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	install := fenced(t, "clients/go/README.md", "sh", "## Installing")
	if len(install) != 1 {
		t.Fatalf("%d install blocks", len(install))
	}
	dir := t.TempDir()
	sh := exec.Command("sh", "-ec", strings.ReplaceAll(install[0], "/path/to/redlockd", root))
	sh.Dir = dir
	sh.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=mod")
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", install[0], err, out)
	}
	code := fenced(t, "clients/go/README.md", "go", "## Using it")
	if len(code) != 1 {
		t.Fatalf("%d examples", len(code))
	}
	hearsTheLoss(t, dir, code[0])
}
