// Package redlockd is a client of redlockd, the lock-proxy daemon, with
// the standard library only.
//
// One Client is one connection, and one connection is one session: its
// session-mode locks live as long as it does (the daemon renews them),
// and Close, or a broken connection, releases them.  Nothing reconnects
// silently: when the connection ends, every Lock's Context is cancelled
// and later calls return an error that errors.Is(err, ErrConnectionLost).
//
// The protocol (lines, replies in order, "!" pushes) is the daemon's
// proto/PROTOCOL.md; the words and error codes here are its words.
package redlockd

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Where Dial connects without an address or environment, in this order,
// as redlockctl does: DefaultSocket when a connection to it succeeds, else
// DefaultAddress.
const (
	DefaultSocket  = "/run/redlockd/redlockd.sock"
	DefaultAddress = "127.0.0.1:7379"
)

// The defaults Dial uses (the tests point them elsewhere).
var defaultSocket, defaultAddress = DefaultSocket, DefaultAddress

// The protocol's bounds (proto/PROTOCOL.md): checked before sending, and an
// argument out of them is refused with an error that names the bound and
// what is wrong (and matches ErrProtocol).
const (
	NameMax   = 250           // bytes of a lock name, a List prefix, a password
	LabelMax  = 64            // bytes of a holder label (LockOptions.Label)
	TokenLen  = 32            // lowercase hex digits of a lease's token
	LimitMax  = 1000          // permits of a counted hold (lock.max_limit is at most this)
	TTLMax    = 4000000000000 // ms, the largest number the protocol reads
	SetMax    = 64            // names of one set (LockMany, LeaseMany)
	FenceMax  = 4000000000000 // the largest fence Check reads
	PermitMax = 999           // the largest permit Check reads
)

// Sentinel errors: compare with errors.Is.
var (
	ErrBusy           = errors.New("busy")
	ErrTimeout        = errors.New("timeout")
	ErrNotHeld        = errors.New("not held")
	ErrNoQuorum       = errors.New("no quorum")
	ErrDenied         = errors.New("denied")
	ErrProtocol       = errors.New("protocol error")
	ErrLimit          = errors.New("limit")
	ErrAuth           = errors.New("auth")
	ErrKind           = errors.New("kind")
	ErrShutdown       = errors.New("shutdown")
	ErrConnectionLost = errors.New("connection lost")
)

var codes = map[string]error{
	"NOQUORUM": ErrNoQuorum, "DENIED": ErrDenied, "PROTO": ErrProtocol, "UNKNOWN": ErrProtocol,
	"TOOLONG": ErrProtocol, "TIMEOUT": ErrProtocol, "LIMIT": ErrLimit, "AUTH": ErrAuth,
	"KIND": ErrKind, "SHUTDOWN": ErrShutdown,
}

// Error is a reply that refused a request: the protocol's Code ("NOQUORUM",
// or "BUSY", "TIMEOUT", "NOTHELD") and the daemon's Text, for people.
// A BUSY (errors.As into *Error) also has TTL, the holder's time left,
// and Delayed, when a lock-delay refused it (BUSY <name> ttl=MS
// delayed=MS: nobody holds the name, but its last hold ended without a
// release), the delay's time left; 0 when a holder refused it.
type Error struct {
	Code    string
	Text    string
	TTL     time.Duration
	Delayed time.Duration
	kind    error
}

func (e *Error) Error() string { return strings.TrimSpace(e.Code + " " + e.Text) }

// Unwrap gives the sentinel error of the code, for errors.Is.
func (e *Error) Unwrap() error { return e.kind }

// Is makes a wait that ended with its deadline (ErrTimeout) also match
// context.DeadlineExceeded.
func (e *Error) Is(target error) bool {
	return e.kind == ErrTimeout && target == context.DeadlineExceeded
}

func fail(kind error, code, text string) error { return &Error{Code: code, Text: text, kind: kind} }

// Fields are the key=value words of a reply or push.
type Fields map[string]string

// Int is field k as a number, 0 when absent.
func (f Fields) Int(k string) int64 {
	n, _ := strconv.ParseInt(f[k], 10, 64)
	return n
}

func fieldsOf(words []string) Fields {
	out := Fields{}
	for _, w := range words {
		if i := strings.IndexByte(w, '='); i > 0 {
			out[w[:i]] = w[i+1:]
		}
	}
	return out
}

// badArgument is an argument refused before sending: it matches ErrProtocol.
type badArgument struct{ text string }

func (e *badArgument) Error() string        { return e.text }
func (e *badArgument) Is(target error) bool { return target == ErrProtocol }

func refuse(format string, args ...interface{}) error {
	return &badArgument{fmt.Sprintf(format, args...)}
}

// checkWord: v is one word of 1 to longest bytes, each printable ASCII but
// the space (0x21 to 0x7e).  The value itself is not repeated in the error
// (it may be a password).
func checkWord(what, v string, longest int) error {
	if v == "" {
		return refuse("%s is empty; it must be 1 to %d bytes", what, longest)
	}
	if len(v) > longest {
		return refuse("%s is %d bytes; at most %d", what, len(v), longest)
	}
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			return refuse("%s contains a space (at byte %d); it must be one word of printable ASCII (0x21 to 0x7e)", what, i)
		}
		if v[i] < 0x21 || v[i] > 0x7e {
			return refuse("%s has byte 0x%02x at offset %d; it must be printable ASCII (0x21 to 0x7e) without spaces", what, v[i], i)
		}
	}
	return nil
}

func checkName(name string) error { return checkWord("lock name", name, NameMax) }

// checkNames: names is 1 to SetMax lock names, none given twice.
func checkNames(names []string) error {
	if len(names) < 1 || len(names) > SetMax {
		return refuse("a set of %d names; it must be 1 to %d", len(names), SetMax)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if err := checkName(n); err != nil {
			return err
		}
		if seen[n] {
			return refuse("lock name %q is given twice", n)
		}
		seen[n] = true
	}
	return nil
}

// fencesOf reads a set's fence=F1,F2 (nil without one).
func fencesOf(v string) []int64 {
	if v == "" {
		return nil
	}
	var out []int64
	for _, f := range strings.Split(v, ",") {
		n, _ := strconv.ParseInt(f, 10, 64)
		out = append(out, n)
	}
	return out
}

// pushNames: the names of a push ("! LOST a b c reason=..."), the words
// after the kind up to the first key=value.
func pushNames(words []string) []string {
	var out []string
	for _, w := range words[2:] {
		if strings.Contains(w, "=") {
			break
		}
		out = append(out, w)
	}
	return out
}

// checkToken: token is 32 lowercase hex digits.
func checkToken(token string) error {
	const need = "it must be 32 lowercase hex digits (as the lease's grant gave it)"
	if len(token) != TokenLen {
		return refuse("token is %d bytes; %s", len(token), need)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return refuse("token has %q at offset %d; %s", c, i, need)
		}
	}
	return nil
}

// checkTTL: a ttl of 1 ms to TTLMax ms.
func checkTTL(ttl time.Duration) error {
	if ms := ttl.Milliseconds(); ms < 1 || ms > TTLMax {
		return refuse("ttl is %v; it must be 1ms to %dms", ttl, int64(TTLMax))
	}
	return nil
}

// Options of Dial.
type Options struct {
	Password string      // sent with AUTH first; "" means $REDLOCKD_PASSWORD
	TLS      *tls.Config // TLS with this configuration (nil: see CAFile)
	CAFile   string      // TLS, verifying the daemon against this PEM file
	CertFile string      // a client certificate to present (with KeyFile)
	KeyFile  string
	Timeout  time.Duration // connecting, and each reply that is no wait for a lock (10 s)
}

type request struct {
	multi   bool
	lines   [][]string
	done    chan reply     // buffered: the one reply, unless the caller left
	left    bool           // the caller left (under Client.mu)
	onReply func([]string) // runs in the reader as a reply that is no error is read
	abandon func([]string) // after onReply, when the caller left: no blocking
}

type reply struct {
	words []string
	lines [][]string
	err   error
}

// Client is one connection to redlockd: one session.
type Client struct {
	conn    net.Conn
	address string
	timeout time.Duration

	wmu     sync.Mutex // writes, and pending's order
	mu      sync.Mutex // pending (and each request's left), locks, watches, closed
	pending []*request
	// name -> the Locks (one per hold) of this session.  A grant is entered
	// as its reply is read, before the next line: a "! LOST" right behind
	// the OK, in the same read, finds it.
	locks   map[string][]*Lock
	watches map[string]chan Event
	closed  bool
	gone    chan struct{}
}

// Dial connects to address: "host:port", "[v6]:port", "unix:/path" or a
// path; "" means $REDLOCKD_SOCKET, else $REDLOCKD_ADDR, else DefaultSocket
// (/run/redlockd/redlockd.sock) when a connection to it succeeds, else
// DefaultAddress (127.0.0.1:7379), as redlockctl does; with TLS,
// $REDLOCKD_ADDR else DefaultAddress.  Client.Address says where it
// connected.
func Dial(ctx context.Context, address string, o *Options) (*Client, error) {
	if o == nil {
		o = &Options{}
	}
	if address == "" && (o.TLS != nil || o.CAFile != "" || o.CertFile != "") {
		// TLS is for a TCP address: no Unix socket is tried.
		if address = os.Getenv("REDLOCKD_ADDR"); address == "" {
			address = defaultAddress
		}
	}
	if address == "" {
		address = os.Getenv("REDLOCKD_SOCKET")
	}
	if address == "" {
		address = os.Getenv("REDLOCKD_ADDR")
	}
	if address == "" {
		// Only a failed connection moves on to TCP: AUTH is sent once, on
		// the connection chosen, so a refused password is not tried twice.
		conn, err := connect(ctx, "unix:"+defaultSocket, o)
		if err == nil {
			return session(ctx, conn, "unix:"+defaultSocket, o)
		}
		conn, err2 := connect(ctx, defaultAddress, o)
		if err2 != nil {
			return nil, fmt.Errorf("cannot connect to redlockd: %s: %v; %s: %w", defaultSocket,
				unwrapOp(err), defaultAddress, unwrapOp(err2))
		}
		return session(ctx, conn, defaultAddress, o)
	}
	conn, err := connect(ctx, address, o)
	if err != nil {
		return nil, err
	}
	return session(ctx, conn, address, o)
}

// unwrapOp is the cause of a dial's *net.OpError ("connection refused"),
// without the addresses, which the caller names.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return sys.Err
		}
		return op.Err
	}
	return err
}

// timeoutOf is o.Timeout, 10 s when it is 0.
func timeoutOf(o *Options) time.Duration {
	if o.Timeout == 0 {
		return 10 * time.Second
	}
	return o.Timeout
}

// connect opens the connection to address, with the TLS handshake when o
// asks for TLS; nothing is sent to the daemon.
func connect(ctx context.Context, address string, o *Options) (net.Conn, error) {
	d := net.Dialer{Timeout: timeoutOf(o)}
	network, where := "tcp", address
	if strings.HasPrefix(address, "unix:") {
		network, where = "unix", address[5:]
	} else if strings.HasPrefix(address, "/") {
		network = "unix"
	}
	conn, err := d.DialContext(ctx, network, where)
	if err != nil {
		return nil, err
	}
	cfg := o.TLS
	if cfg == nil && (o.CAFile != "" || o.CertFile != "") {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				conn.Close()
				return nil, err
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				conn.Close()
				return nil, fmt.Errorf("%s: no PEM certificate", o.CAFile)
			}
		}
		if o.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
			if err != nil {
				conn.Close()
				return nil, err
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	if cfg != nil {
		if cfg.ServerName == "" && network == "tcp" {
			cfg = cfg.Clone()
			host, _, _ := net.SplitHostPort(where)
			cfg.ServerName = host
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	return conn, nil
}

// session makes the Client of conn, connected to address, and sends AUTH when
// o or $REDLOCKD_PASSWORD has a password; conn is closed on an error.
func session(ctx context.Context, conn net.Conn, address string, o *Options) (*Client, error) {
	c := &Client{conn: conn, address: address, timeout: timeoutOf(o), locks: map[string][]*Lock{},
		watches: map[string]chan Event{}, gone: make(chan struct{})}
	go c.readLoop()
	pass := o.Password
	if pass == "" {
		pass = os.Getenv("REDLOCKD_PASSWORD")
	}
	if pass != "" {
		if err := checkWord("password", pass, NameMax); err != nil {
			c.Close()
			return nil, err
		}
		if _, err := c.command(ctx, "AUTH "+pass, false); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Address is where the client connected: the address given to Dial, or the
// one of the environment or the defaults it took.
func (c *Client) Address() string { return c.address }

// Close ends the connection: the session ends and its locks are released.
func (c *Client) Close() error {
	return c.conn.Close()
}

func (c *Client) readLoop() {
	r := bufio.NewReaderSize(c.conn, 65536)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		c.dispatch(strings.Split(strings.TrimSuffix(line, "\n"), " "))
	}
	c.ended()
}

func (c *Client) dispatch(words []string) {
	if words[0] == "!" {
		c.push(words)
		return
	}
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	req := c.pending[0]
	if req.multi && words[0] != "END" && words[0] != "ERR" {
		req.lines = append(req.lines, words)
		c.mu.Unlock()
		return
	}
	c.pending = c.pending[1:]
	c.mu.Unlock()
	rep := reply{words: words, lines: req.lines}
	if words[0] == "ERR" {
		code, text := "", ""
		if len(words) > 1 {
			code = words[1]
		}
		if len(words) > 2 {
			text = strings.Join(words[2:], " ")
		}
		kind := codes[code]
		if kind == nil {
			kind = ErrProtocol
		}
		rep.err = fail(kind, code, text)
	}
	if rep.err == nil && req.onReply != nil {
		req.onReply(words) // now, before any line after it
	}
	// Handed over or abandoned under mu, where send's caller decides to
	// leave: exactly one of the two sees the reply.
	c.mu.Lock()
	left := req.left
	if !left {
		req.done <- rep // buffered: never blocks
	}
	c.mu.Unlock()
	if left && rep.err == nil && req.abandon != nil {
		req.abandon(words)
	}
}

func (c *Client) push(words []string) {
	if len(words) < 3 {
		return
	}
	name := words[2]
	switch words[1] {
	case "LOST":
		// One push names a whole set; a set's Lock is entered under each
		// of its names, and told once.
		names := pushNames(words)
		c.mu.Lock()
		var held []*Lock
		seen := map[*Lock]bool{}
		for _, n := range names {
			for _, lk := range c.locks[n] {
				if !seen[lk] {
					seen[lk] = true
					held = append(held, lk)
				}
			}
			delete(c.locks, n)
		}
		for _, lk := range held {
			for _, n := range lk.Names {
				c.forget(n, lk)
			}
		}
		c.mu.Unlock()
		reason := fieldsOf(words[2+len(names):])["reason"]
		if reason == "" {
			reason = "unknown"
		}
		for _, lk := range held { // every hold of the name is lost
			lk.lose(reason)
		}
	case "HELD", "FREE":
		c.mu.Lock()
		ch := c.watches[name]
		c.mu.Unlock()
		if ch != nil {
			select {
			case ch <- Event{Name: name, Held: words[1] == "HELD", Fields: fieldsOf(words[3:])}:
			default: // a watcher that does not read loses events, never the session
			}
		}
	}
}

func (c *Client) ended() {
	c.mu.Lock()
	c.closed = true
	locks := c.locks
	c.locks = map[string][]*Lock{}
	watches := c.watches
	c.watches = map[string]chan Event{}
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	close(c.gone)
	for _, held := range locks {
		for _, lk := range held {
			lk.lose("connection")
		}
	}
	for _, ch := range watches {
		close(ch)
	}
	for _, req := range pending {
		req.done <- reply{err: fail(ErrConnectionLost, "CLOSED", "the connection ended")}
	}
}

// send writes one request and waits for its reply (wait: a LOCK, no
// deadline but ctx's).  onReply, if given, runs in the reader as a reply
// that is no error is read.  A request whose caller left (ctx ended) is
// abandoned: its reply is read in turn, and abandon then runs with it
// (a grant is released).
func (c *Client) send(ctx context.Context, line string, multi, wait bool,
	onReply, abandon func([]string)) (reply, error) {
	req := &request{multi: multi, done: make(chan reply, 1), onReply: onReply, abandon: abandon}
	c.wmu.Lock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wmu.Unlock()
		return reply{}, fail(ErrConnectionLost, "CLOSED", "the connection is closed")
	}
	c.pending = append(c.pending, req)
	c.mu.Unlock()
	_, err := c.conn.Write([]byte(line + "\n"))
	c.wmu.Unlock()
	if err != nil {
		c.conn.Close()
		return reply{}, fail(ErrConnectionLost, "CLOSED", err.Error())
	}
	var timer <-chan time.Time
	if !wait {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case rep := <-req.done:
		if rep.err != nil {
			return rep, rep.err
		}
		return rep, nil
	case <-timer:
		c.conn.Close() // out of step with the daemon from now on
		return reply{}, fail(ErrConnectionLost, "TIMEOUT", "no reply in time; closed")
	case <-ctx.Done():
		// Either the reply is handed over already (and abandoned here), or
		// the reader will see left and abandon it: dispatch decides under mu.
		c.mu.Lock()
		var rep reply
		select {
		case rep = <-req.done:
		default:
			req.left = true
		}
		c.mu.Unlock()
		if rep.err == nil && rep.words != nil && abandon != nil {
			abandon(rep.words)
		} else if rep.err != nil || rep.words != nil {
			return rep, rep.err // a refusal (TIMEOUT, BUSY, ERR) came in time: it stands
		}
		if wait && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The daemon's wait= ends with the deadline too; whichever
			// is seen first, the caller gets the same error.
			return reply{}, fail(ErrTimeout, "TIMEOUT", "the context's deadline passed")
		}
		return reply{}, ctx.Err()
	}
}

func (c *Client) command(ctx context.Context, line string, multi bool) (reply, error) {
	return c.send(ctx, line, multi, false, nil, nil)
}

// LockOptions of Lock and Lease.
type LockOptions struct {
	TTL    time.Duration // the lease (the daemon renews a session-mode lock); 0: its default
	Try    bool          // one try: ErrBusy when held
	Shared bool          // a shared hold
	Limit  int           // a counted hold of Limit permits
	Fence  bool          // ask for a fencing token
	Label  string        // who holds it, for LIST, STATUS and WATCH
	// Delay is a lock-delay: nobody is granted the name for that long
	// after the hold ends without Unlock (the connection closed, the lock
	// lost or broken).  0: the daemon's lock.delay_ms; NoDelay: none.
	// Exclusive session-mode locks only.
	Delay time.Duration
}

// NoDelay as LockOptions.Delay asks for no lock-delay, whatever the
// daemon's lock.delay_ms.
const NoDelay time.Duration = -1

func (o *LockOptions) words() []string {
	var out []string
	if o.TTL > 0 {
		out = append(out, "ttl="+strconv.FormatInt(o.TTL.Milliseconds(), 10))
	}
	if o.Fence {
		out = append(out, "fence")
	}
	if o.Shared {
		out = append(out, "shared")
	}
	if o.Limit > 0 {
		out = append(out, "limit="+strconv.Itoa(o.Limit))
	}
	if o.Label != "" {
		out = append(out, "label="+o.Label)
	}
	if o.Delay == NoDelay {
		out = append(out, "delay=0")
	} else if o.Delay != 0 {
		out = append(out, "delay="+strconv.FormatInt(o.Delay.Milliseconds(), 10))
	}
	return out
}

// take sends LOCK (waiting until ctx's deadline, or for ever) or TRYLOCK.
// grant, if given, runs in the reader with a grant's fields as it is read;
// abandon runs after it when ctx ended first, and must not block.
func (c *Client) take(ctx context.Context, names []string, o *LockOptions, lease bool,
	grant func(Fields), abandon func([]string)) (Fields, error) {
	if o == nil {
		o = &LockOptions{}
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	if len(names) > 1 && (o.Shared || o.Limit != 0) {
		return nil, refuse("a set of names is held exclusively: no Shared or Limit")
	}
	name := strings.Join(names, " ")
	if o.Label != "" {
		if err := checkWord("label", o.Label, LabelMax); err != nil {
			return nil, err
		}
	}
	if o.TTL != 0 {
		if err := checkTTL(o.TTL); err != nil {
			return nil, err
		}
	}
	if o.Limit < 0 || o.Limit > LimitMax {
		return nil, refuse("limit is %d; it must be 1 to %d", o.Limit, LimitMax)
	}
	if o.Delay != NoDelay && (o.Delay < 0 || o.Delay.Milliseconds() > TTLMax) {
		return nil, refuse("delay is %v; it must be 0 to %dms, or NoDelay", o.Delay, int64(TTLMax))
	}
	words := []string{"TRYLOCK", name}
	wait := false
	if !o.Try {
		words = []string{"LOCK", name, "wait=inf"}
		if dl, ok := ctx.Deadline(); ok {
			ms := time.Until(dl).Milliseconds()
			if ms < 0 {
				ms = 0
			}
			words[2] = "wait=" + strconv.FormatInt(ms, 10)
		}
		wait = true
	}
	words = append(words, o.words()...)
	if lease {
		words = append(words, "mode=lease")
	}
	var onReply func([]string)
	if grant != nil {
		onReply = func(w []string) {
			if w[0] == "OK" {
				grant(fieldsOf(w[2:]))
			}
		}
	}
	rep, err := c.send(ctx, strings.Join(words, " "), false, wait, onReply, abandon)
	if err != nil {
		return nil, err
	}
	switch rep.words[0] {
	case "OK":
		return fieldsOf(rep.words[2:]), nil
	case "BUSY":
		f := fieldsOf(rep.words[1:])
		return nil, &Error{Code: "BUSY", Text: strings.Join(rep.words[1:], " "), kind: ErrBusy,
			TTL:     time.Duration(f.Int("ttl")) * time.Millisecond,
			Delayed: time.Duration(f.Int("delayed")) * time.Millisecond}
	case "TIMEOUT":
		return nil, fail(ErrTimeout, "TIMEOUT", strings.Join(rep.words[1:], " "))
	}
	return nil, fail(ErrProtocol, "REPLY", strings.Join(rep.words, " "))
}

// Lock is one session-mode hold: of one name (Lock), or of a set of
// names at once (LockMany), which is one hold, released whole and lost
// whole.
type Lock struct {
	c        *Client
	Name     string        // the name; a set's names joined by spaces
	Names    []string      // the names, in the order given (one for Lock)
	Validity time.Duration // left when granted
	Fence    int64         // its fencing token (0 without Fence; a set's: Fences)
	Fences   []int64       // each name's fencing token, in the order of Names (with Fence)
	Permit   int           // a counted hold's permit, else -1
	ctx      context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	reason   string
	unlocked bool // Unlock was called (and did not fail)
}

func newLock(c *Client, names []string, f Fields) *Lock {
	lk := &Lock{c: c, Name: strings.Join(names, " "), Names: names,
		Validity: time.Duration(f.Int("validity")) * time.Millisecond,
		Fences:   fencesOf(f["fence"]), Permit: -1}
	if len(names) == 1 {
		lk.Fence = f.Int("fence")
	}
	if p, ok := f["permit"]; ok {
		lk.Permit, _ = strconv.Atoi(p)
	}
	lk.ctx, lk.cancel = context.WithCancel(context.Background())
	return lk
}

// Lock takes name in session mode.  It waits until ctx's deadline (ErrTimeout,
// which also matches context.DeadlineExceeded),
// or for ever without one; o.Try makes one try (ErrBusy).  A ctx cancelled
// while it waits returns ctx.Err(), and a grant that comes after is
// released at once.  Taking a name this session holds already adds a hold:
// each Lock is one, and a "! LOST" of the name ends them all.
func (c *Client) Lock(ctx context.Context, name string, o *LockOptions) (*Lock, error) {
	return c.lock(ctx, []string{name}, o)
}

// LockMany takes every name of names (1 to SetMax, none twice) in session
// mode, all or none (LOCK a b c): one Lock, whose Unlock releases them
// all, and whose Context is cancelled once when any of them is lost (the
// daemon then releases the others).  It waits as Lock does; o.Try makes
// one try (ErrBusy when any name is held, and nothing is taken).  Shared
// and Limit are refused: a set is held exclusively.  The daemon takes the
// names in an order of its own; Fences come in the order of names.
func (c *Client) LockMany(ctx context.Context, names []string, o *LockOptions) (*Lock, error) {
	return c.lock(ctx, append([]string(nil), names...), o)
}

func (c *Client) lock(ctx context.Context, names []string, o *LockOptions) (*Lock, error) {
	var lk *Lock // made by the reader as the grant is read
	grant := func(f Fields) { lk = c.hold(newLock(c, names, f)) }
	late := func(words []string) {
		if words[0] == "OK" {
			c.unhold(lk, -1)
			go func() { _ = lk.release() }()
		}
	}
	if _, err := c.take(ctx, names, o, false, grant, late); err != nil {
		return nil, err
	}
	return lk, nil
}

// hold enters lk in the session's locks, where "! LOST" finds it.  It runs
// in the reader, so the connection has not ended yet (ended then finds it).
func (c *Client) hold(lk *Lock) *Lock {
	c.mu.Lock()
	for _, n := range lk.Names {
		c.locks[n] = append(c.locks[n], lk)
	}
	c.mu.Unlock()
	return lk
}

// forget takes lk out of name's entry in the session's locks (under c.mu).
func (c *Client) forget(name string, lk *Lock) {
	var rest []*Lock
	for _, other := range c.locks[name] {
		if other != lk {
			rest = append(rest, other)
		}
	}
	if len(rest) == 0 {
		delete(c.locks, name)
	} else {
		c.locks[name] = rest
	}
}

// unhold: lk's hold is released, and holds is how many the session has
// left of the name (-1: not known).  At 0 none is, and every Lock of the
// name ends.
func (c *Client) unhold(lk *Lock, holds int64) {
	c.mu.Lock()
	var ended []*Lock
	for i, n := range lk.Names {
		c.forget(n, lk)
		if holds == 0 {
			if i == 0 {
				ended = c.locks[n]
			}
			for _, other := range c.locks[n] {
				c.forget(n, other)
			}
		}
	}
	c.mu.Unlock()
	lk.lose("released")
	for _, other := range ended {
		other.lose("released")
	}
}

// Context is cancelled when the lock is lost (LostReason says why), or
// once Unlock released it.
func (l *Lock) Context() context.Context { return l.ctx }

// LostReason is "" while held, else renew, quorum, gone, shutdown,
// broken or connection, or released after Unlock.
func (l *Lock) LostReason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason
}

func (l *Lock) lose(reason string) {
	l.mu.Lock()
	if l.reason == "" {
		l.reason = reason
	}
	l.mu.Unlock()
	l.cancel()
}

// Unlock releases this hold; ErrNotHeld when the lock was lost or is
// released already (UNLOCK names no hold: sending it again would release
// another Lock's hold of the same name).
func (l *Lock) Unlock() error {
	l.mu.Lock()
	reason, unlocked := l.reason, l.unlocked
	l.unlocked = true
	l.mu.Unlock()
	if reason != "" || unlocked {
		if reason == "" {
			reason = "released"
		}
		return fail(ErrNotHeld, "NOTHELD", l.Name+" ("+reason+")")
	}
	err := l.release()
	if err != nil && !errors.Is(err, ErrNotHeld) {
		l.mu.Lock()
		l.unlocked = false // still held, as far as this client knows
		l.mu.Unlock()
	}
	return err
}

// release sends UNLOCK; the reader updates the session's locks as the
// reply is read, before a "! LOST" behind it.
func (l *Lock) release() error {
	onReply := func(w []string) {
		switch w[0] {
		case "OK":
			l.c.unhold(l, fieldsOf(w[2:]).Int("holds"))
		case "NOTHELD":
			l.c.unhold(l, 0)
		}
	}
	rep, err := l.c.send(context.Background(), "UNLOCK "+l.Name, false, false, onReply, nil)
	if err != nil {
		return err
	}
	if rep.words[0] == "NOTHELD" {
		return fail(ErrNotHeld, "NOTHELD", strings.Join(rep.words[1:], " "))
	}
	return nil
}

// Lease is a lease-mode grant: it belongs to its Token, not to a connection.
// A set's (LeaseMany) has its Names and their Fences; ExtendMany and
// ReleaseMany take them.
type Lease struct {
	Name     string // the name; a set's names joined by spaces
	Names    []string
	Token    string
	Validity time.Duration
	Fence    int64   // a single name's fencing token (with Fence)
	Fences   []int64 // each name's, in the order of Names (with Fence)
}

// Lease takes name in lease mode for ttl; nothing renews it.
func (c *Client) Lease(ctx context.Context, name string, ttl time.Duration, o *LockOptions) (*Lease, error) {
	return c.lease(ctx, []string{name}, ttl, o)
}

// LeaseMany takes every name of names in lease mode for ttl, all or none:
// one token for the set, which ExtendMany and ReleaseMany take with the
// same names (in any order).  Nothing renews it.
func (c *Client) LeaseMany(ctx context.Context, names []string, ttl time.Duration, o *LockOptions) (*Lease, error) {
	return c.lease(ctx, append([]string(nil), names...), ttl, o)
}

func (c *Client) lease(ctx context.Context, names []string, ttl time.Duration, o *LockOptions) (*Lease, error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	oo := LockOptions{}
	if o != nil {
		oo = *o
	}
	oo.TTL = ttl
	late := func(words []string) {
		if t := fieldsOf(words[2:])["token"]; words[0] == "OK" && t != "" {
			go func() { _ = c.ReleaseMany(context.Background(), names, t) }()
		}
	}
	f, err := c.take(ctx, names, &oo, true, nil, late)
	if err != nil {
		return nil, err
	}
	ls := &Lease{Name: strings.Join(names, " "), Names: names, Token: f["token"],
		Fences: fencesOf(f["fence"]), Validity: time.Duration(f.Int("validity")) * time.Millisecond}
	if len(names) == 1 {
		ls.Fence = f.Int("fence")
	}
	return ls, nil
}

// Extend renews a lease by its token for ttl; ErrNotHeld once it expired
// (an expired lease is never taken again).
func (c *Client) Extend(ctx context.Context, name, token string, ttl time.Duration) (time.Duration, error) {
	return c.ExtendMany(ctx, []string{name}, token, ttl)
}

// ExtendMany renews a set's lease (LeaseMany) by its token for ttl, every
// name at once; names in any order, exactly the set.  ErrNotHeld when the
// token no longer holds them all.
func (c *Client) ExtendMany(ctx context.Context, names []string, token string, ttl time.Duration) (time.Duration, error) {
	if err := checkNames(names); err != nil {
		return 0, err
	}
	name := strings.Join(names, " ")
	if err := checkToken(token); err != nil {
		return 0, err
	}
	if err := checkTTL(ttl); err != nil {
		return 0, err
	}
	rep, err := c.command(ctx, fmt.Sprintf("EXTEND %s token=%s ttl=%d", name, token, ttl.Milliseconds()), false)
	if err != nil {
		return 0, err
	}
	if rep.words[0] == "NOTHELD" {
		return 0, fail(ErrNotHeld, "NOTHELD", strings.Join(rep.words[1:], " "))
	}
	return time.Duration(fieldsOf(rep.words[2:]).Int("validity")) * time.Millisecond, nil
}

// Release ends a lease by its token (compare-and-delete); ErrNotHeld when gone.
func (c *Client) Release(ctx context.Context, name, token string) error {
	return c.ReleaseMany(ctx, []string{name}, token)
}

// ReleaseMany ends a set's lease (LeaseMany) by its token, every name at
// once; names in any order, exactly the set.  ErrNotHeld when gone.
func (c *Client) ReleaseMany(ctx context.Context, names []string, token string) error {
	if err := checkNames(names); err != nil {
		return err
	}
	name := strings.Join(names, " ")
	if err := checkToken(token); err != nil {
		return err
	}
	rep, err := c.command(ctx, fmt.Sprintf("UNLOCK %s token=%s", name, token), false)
	if err != nil {
		return err
	}
	if rep.words[0] == "NOTHELD" {
		return fail(ErrNotHeld, "NOTHELD", strings.Join(rep.words[1:], " "))
	}
	return nil
}

// Status reads name on the masters: held, and the HELD reply's fields.  A
// name nobody holds has the FREE reply's fields (nil without any): during
// a lock-delay, "delayed" is its time left in ms (Fields.Int("delayed")),
// and no LOCK is granted the name until it ends.
func (c *Client) Status(ctx context.Context, name, token string) (bool, Fields, error) {
	if err := checkName(name); err != nil {
		return false, nil, err
	}
	line := "STATUS " + name
	if token != "" {
		if err := checkToken(token); err != nil {
			return false, nil, err
		}
		line += " token=" + token
	}
	rep, err := c.command(ctx, line, false)
	if err != nil {
		return false, nil, err
	}
	if rep.words[0] == "FREE" {
		if len(rep.words) > 2 {
			return false, fieldsOf(rep.words[2:]), nil
		}
		return false, nil, nil
	}
	return true, fieldsOf(rep.words[2:]), nil
}

// Checked is the answer of Check and CheckToken.
type Checked struct {
	Current bool          // a quorum of the masters hold the grant, now
	TTL     time.Duration // when Current: how long it stays on a quorum unless renewed (-1ms: no expiry)
	Reason  string        // when stale: "free" (nobody holds the name), "other" (another grant does) or "mixed"
}

// Check asks whether the grant of name that was told fence is still the
// name's current one on a quorum of the masters, now: for a resource
// that cannot store a fence, before each write (refuse it unless
// Current).  permit is the permit of a counted name's grant, or -1 (as
// Lock.Permit is for other holds), so Check(ctx, l.Name, l.Fence,
// l.Permit) checks a Lock l.  ErrNoQuorum when too few masters answered
// to tell; ErrKind for a counted name's fence without its permit.
func (c *Client) Check(ctx context.Context, name string, fence int64, permit int) (Checked, error) {
	if err := checkName(name); err != nil {
		return Checked{}, err
	}
	if fence < 1 || fence > FenceMax {
		return Checked{}, refuse("fence is %d; it must be 1 to %d", fence, int64(FenceMax))
	}
	line := fmt.Sprintf("CHECK %s fence=%d", name, fence)
	if permit >= 0 {
		if permit > PermitMax {
			return Checked{}, refuse("permit is %d; it must be 0 to %d, or -1 for none", permit, PermitMax)
		}
		line += " permit=" + strconv.Itoa(permit)
	}
	return c.check(ctx, line)
}

// CheckToken asks whether the lease of token (Lease.Token) still holds
// name on a quorum of the masters, now; errors as for Check.
func (c *Client) CheckToken(ctx context.Context, name, token string) (Checked, error) {
	if err := checkName(name); err != nil {
		return Checked{}, err
	}
	if err := checkToken(token); err != nil {
		return Checked{}, err
	}
	return c.check(ctx, "CHECK "+name+" token="+token)
}

func (c *Client) check(ctx context.Context, line string) (Checked, error) {
	rep, err := c.command(ctx, line, false)
	if err != nil {
		return Checked{}, err
	}
	if len(rep.words) < 2 {
		return Checked{}, fail(ErrProtocol, "REPLY", strings.Join(rep.words, " "))
	}
	f := fieldsOf(rep.words[2:])
	switch rep.words[0] {
	case "CURRENT":
		return Checked{Current: true, TTL: time.Duration(f.Int("ttl")) * time.Millisecond}, nil
	case "STALE":
		return Checked{Reason: f["reason"]}, nil
	}
	return Checked{}, fail(ErrProtocol, "REPLY", strings.Join(rep.words, " "))
}

// Listing is one line of List.
type Listing struct {
	State  string // HELD or WAIT
	Name   string
	Fields Fields
}

// List the holds and waiting LOCKs of this daemon, of names with prefix.
func (c *Client) List(ctx context.Context, prefix string) ([]Listing, error) {
	line := "LIST"
	if prefix != "" {
		if err := checkWord("prefix", prefix, NameMax); err != nil {
			return nil, err
		}
		line += " " + prefix
	}
	rep, err := c.command(ctx, line, true)
	if err != nil {
		return nil, err
	}
	out := make([]Listing, 0, len(rep.lines))
	for _, w := range rep.lines {
		if len(w) >= 2 {
			out = append(out, Listing{State: w[0], Name: w[1], Fields: fieldsOf(w[2:])})
		}
	}
	return out, nil
}

// Ping asks the daemon for PONG.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.command(ctx, "PING", false)
	return err
}

// Break ends every hold of name (needs the admin right: ErrDenied).
func (c *Client) Break(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, err := c.command(ctx, "BREAK "+name, false)
	return err
}

// Event is a state a watch reported.
type Event struct {
	Name   string
	Held   bool
	Fields Fields
}

// Watch name: a channel of its state now, then each change, until ctx
// ends (then UNWATCH) or the connection does (the channel closes).
func (c *Client) Watch(ctx context.Context, name string) (<-chan Event, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	ch := make(chan Event, 64)
	c.mu.Lock()
	if _, ok := c.watches[name]; ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("%s is watched already by this client", name)
	}
	c.watches[name] = ch
	c.mu.Unlock()
	if _, err := c.command(ctx, "WATCH "+name, false); err != nil {
		c.mu.Lock()
		delete(c.watches, name)
		c.mu.Unlock()
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
			c.mu.Lock()
			mine := c.watches[name] == ch
			if mine {
				delete(c.watches, name)
			}
			c.mu.Unlock()
			if mine {
				_, _ = c.command(context.Background(), "UNWATCH "+name, false)
				close(ch)
			}
		case <-c.gone:
		}
	}()
	return ch, nil
}
