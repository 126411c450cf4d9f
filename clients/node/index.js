'use strict';
/*
 * A client of redlockd, the lock-proxy daemon, with Node's own modules only.
 *
 * One Client is one connection, and one connection is one session: its
 * session-mode locks live as long as it does (the daemon renews them), and
 * closing it, or losing it, releases them.  Nothing reconnects silently:
 * when the connection ends every lock of it is lost (its AbortSignal
 * aborts with reason "connection") and later calls reject with
 * ConnectionLost.
 *
 * The protocol (lines, replies in order, "!" pushes) is the daemon's
 * proto/PROTOCOL.md; the words and error codes here are its words.
 */
const net = require('node:net');
const tls = require('node:tls');
const fs = require('node:fs');

/* Where connect() goes without an address or environment, in this order,
 * as redlockctl does: the daemon's Unix socket when a connection to it
 * succeeds, else its TCP address. */
const defaults = { socket: '/run/redlockd/redlockd.sock', address: '127.0.0.1:7379' };

/* The protocol's bounds (proto/PROTOCOL.md): checked before sending, and
 * an argument out of them is refused saying which bound and what is wrong. */
const NAME_MAX = 250;        // bytes of a lock name, a LIST prefix, a password
const LABEL_MAX = 64;        // bytes of a holder label (label=)
const TOKEN_LEN = 32;        // lowercase hex digits of a lease's token
const LIMIT_MAX = 1000;      // permits of a counted hold (lock.max_limit is at most this)
const TTL_MAX = 4000000000000; // ms, the largest number the protocol reads
const SET_MAX = 64;          // names of one set (LOCK n1 .. nk)
const FENCE_MAX = 4000000000000; // the largest fence CHECK reads (fence=)
const PERMIT_MAX = 999;      // the largest permit CHECK reads (permit=)

class RedlockdError extends Error {
  constructor(code, text) {
    super(text ? `${code} ${text}` : code);
    this.name = this.constructor.name;
    this.code = code;
    this.text = text;
  }
}
/* BUSY <name> ttl=MS [delayed=MS]: ttl is the holder's time left;
 * delayed, when the refusal is a lock-delay (nobody holds the name, but
 * its last hold ended without UNLOCK), the delay's time left, else
 * undefined. */
class Busy extends RedlockdError {
  constructor(code, text) {
    super(code, text);
    const f = fields(String(text).split(' '));
    this.ttl = f.ttl;
    this.delayed = f.delayed;
  }
}
class Timeout extends RedlockdError {}
class NotHeld extends RedlockdError {}
class NoQuorum extends RedlockdError {}
class Denied extends RedlockdError {}
class ProtocolError extends RedlockdError {}
class LimitError extends RedlockdError {}
class AuthError extends RedlockdError {}
class KindError extends RedlockdError {}
class ShuttingDown extends RedlockdError {}
class ConnectionLost extends RedlockdError {}

const ERRORS = {
  NOQUORUM: NoQuorum, DENIED: Denied, PROTO: ProtocolError, UNKNOWN: ProtocolError,
  TOOLONG: ProtocolError, TIMEOUT: ProtocolError, LIMIT: LimitError, AUTH: AuthError,
  KIND: KindError, SHUTDOWN: ShuttingDown,
};

/* The key=value words of a reply as an object (numbers as numbers). */
function fields(words) {
  const out = {};
  for (const w of words) {
    const i = w.indexOf('=');
    if (i <= 0) continue;
    const v = w.slice(i + 1);
    out[w.slice(0, i)] = /^-?\d+$/.test(v) ? Number(v) : v;
  }
  return out;
}

/* value, when it is one word of 1 to longest bytes, each printable ASCII
 * but the space (0x21 to 0x7e); else a TypeError saying what is wrong and
 * the bound (the value itself is not repeated: it may be a password). */
function word(what, value, longest = NAME_MAX) {
  if (typeof value !== 'string') {
    throw new TypeError(`${what} must be a string, not ${value === null ? 'null' : typeof value}`);
  }
  const raw = Buffer.from(value);
  if (raw.length === 0) throw new TypeError(`${what} is empty; it must be 1 to ${longest} bytes`);
  if (raw.length > longest) throw new TypeError(`${what} is ${raw.length} bytes; at most ${longest}`);
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === 0x20) {
      throw new TypeError(`${what} contains a space (at byte ${i}); it must be one word of printable ASCII (0x21 to 0x7e)`);
    }
    if (raw[i] < 0x21 || raw[i] > 0x7e) {
      throw new TypeError(`${what} has byte 0x${raw[i].toString(16).padStart(2, '0')} at offset ${i}; `
                          + 'it must be printable ASCII (0x21 to 0x7e) without spaces');
    }
  }
  return value;
}

/* names (an array of 1 to SET_MAX lock names, none twice) as a copy;
 * else a TypeError saying what is wrong. */
function nameList(names) {
  if (!Array.isArray(names)) {
    throw new TypeError(`names must be an array of strings, not ${names === null ? 'null' : typeof names}`);
  }
  if (names.length < 1 || names.length > SET_MAX) {
    throw new TypeError(`a set of ${names.length} names; it must be 1 to ${SET_MAX}`);
  }
  const seen = new Set();
  for (const n of names) {
    word('lock name', n);
    if (seen.has(n)) throw new TypeError(`lock name ${JSON.stringify(n)} is given twice`);
    seen.add(n);
  }
  return [...names];
}

/* What a request names: a name, or a set of them (an array) as its words. */
function nameWords(name) {
  return Array.isArray(name) ? nameList(name).join(' ') : word('lock name', name);
}

/* The fences of a set's reply (fence=F1,F2) as an array of numbers. */
function fenceList(value) {
  return value === undefined ? undefined : String(value).split(',').map(Number);
}

/* The names of a push (! LOST a b c reason=...): the words after the
 * kind, up to the first key=value. */
function pushNames(words) {
  const out = [];
  for (const w of words.slice(2)) {
    if (w.includes('=')) break;
    out.push(w);
  }
  return out;
}

/* token, when it is 32 lowercase hex digits; else a TypeError. */
function tokenWord(token) {
  const need = `it must be ${TOKEN_LEN} lowercase hex digits (as the lease's grant gave it)`;
  if (typeof token !== 'string') throw new TypeError(`token must be a string, not ${typeof token}`);
  if (token.length !== TOKEN_LEN) throw new TypeError(`token is ${token.length} characters; ${need}`);
  const bad = token.search(/[^0-9a-f]/);
  if (bad >= 0) throw new TypeError(`token has '${token[bad]}' at offset ${bad}; ${need}`);
  return token;
}

/* Math.trunc(value), when it is a number from lowest to highest; else a TypeError. */
function number(what, value, lowest, highest, unit = '') {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new TypeError(`${what} must be a number, not ${typeof value}`);
  }
  const n = Math.trunc(value);
  if (!(n >= lowest && n <= highest)) {
    throw new TypeError(`${what} is ${value}${unit}; it must be ${lowest} to ${highest}${unit}`);
  }
  return n;
}

function errorOf(words) {
  const code = words[1] || '';
  const Cls = ERRORS[code] || RedlockdError;
  return new Cls(code, words.slice(2).join(' '));
}

/* A session-mode hold.  signal aborts (reason: "renew", "quorum", "gone",
 * "shutdown", "broken" or "connection") when the lock is lost. */
class Lock {
  constructor(client, name, f) {
    this.client = client;
    this.name = name;
    this.names = [name];
    this.validity = f.validity;
    this.holds = f.holds;
    this.fence = f.fence;
    this.permit = f.permit;
    this.controller = new AbortController();
    this.signal = this.controller.signal;
    this.lostReason = null;
  }

  get lost() { return this.signal.aborted; }

  markLost(reason) {
    if (this.signal.aborted) return;
    this.lostReason = reason;
    this.controller.abort(reason);
  }

  /* UNLOCK one hold; NotHeld when the lock was lost meanwhile. */
  async release() {
    const r = await this.client.command(`UNLOCK ${this.name}`, {
      onReply: (w) => { if (w[0] === 'OK') this.client.unhold(this, fields(w.slice(2)).holds || 0); },
    });
    if (r[0] === 'NOTHELD') throw new NotHeld('NOTHELD', r.slice(1).join(' '));
  }
}

/* A session-mode hold of several names at once (LOCK a b c), all or none:
 * one hold, released whole, and lost whole when any of its names is lost
 * (its signal aborts once).  names: in the order given; fences: their
 * fencing tokens in that order (with fence); name: the names joined by
 * spaces, as the protocol's lines write them. */
class LockSet extends Lock {
  constructor(client, names, f) {
    super(client, names.join(' '), f);
    this.names = names;
    this.fences = fenceList(f.fence);
  }
}

function parseAddress(address) {
  if (address.startsWith('unix:')) return { path: address.slice(5) };
  if (address.startsWith('/')) return { path: address };
  const i = address.lastIndexOf(':');
  const port = Number(address.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port)) {
    throw new TypeError(`address ${JSON.stringify(address)}: expected host:port or unix:/path`);
  }
  let host = address.slice(0, i);
  if (host.startsWith('[')) host = host.slice(1, -1);
  return { host, port };
}

class Client {
  /*
   * connect(address, opts): address "host:port", "[v6]:port", "unix:/path"
   * or a path; without one $REDLOCKD_SOCKET, else $REDLOCKD_ADDR, else the
   * Unix socket defaults.socket (/run/redlockd/redlockd.sock) when a
   * connection to it succeeds, else defaults.address (127.0.0.1:7379), as
   * redlockctl does; with TLS, $REDLOCKD_ADDR else 127.0.0.1:7379.
   * client.address says where it connected.  opts: password (else $REDLOCKD_PASSWORD), tls (true
   * or tls.connect options), ca, cert, key (file names), timeoutMs for
   * connecting and each reply that is no wait for a lock.
   */
  static async connect(address, opts = {}) {
    const useTls = opts.tls || opts.ca || opts.cert;
    if (!address && useTls) {
      // TLS is for a TCP address: no Unix socket is tried.
      address = process.env.REDLOCKD_ADDR || defaults.address;
    }
    address = address || process.env.REDLOCKD_SOCKET || process.env.REDLOCKD_ADDR;
    let c;
    if (address) {
      c = new Client(address, opts);
      await c.ready;
    } else {
      c = new Client(`unix:${defaults.socket}`, opts);
      try {
        await c.ready;
      } catch (e) {
        c = new Client(defaults.address, opts);
        try {
          await c.ready;
        } catch (e2) {
          throw new ConnectionLost('CONNECT', `cannot connect to redlockd: ${defaults.socket}: `
                                   + `${e.code || e.message}; ${defaults.address}: ${e2.code || e2.message}`);
        }
      }
    }
    const password = opts.password !== undefined ? opts.password : process.env.REDLOCKD_PASSWORD;
    if (password) {
      try {
        await c.command(`AUTH ${word('password', password)}`);
      } catch (e) {
        c.close();
        throw e;
      }
    }
    return c;
  }

  constructor(address, opts) {
    this.address = address;
    this.timeoutMs = opts.timeoutMs || 10000;
    this.closed = false;
    this.pending = [];          // requests waiting for their reply, in order
    // name -> Set of the Locks (one per hold) of this session.  A grant is
    // entered here as its reply is read, before the next line: a "! LOST"
    // right behind the OK, in the same read, finds it.
    this.locks = new Map();
    this.watches = new Map();   // name -> watch state
    this.buf = '';
    const where = parseAddress(address);
    const useTls = opts.tls || opts.ca || opts.cert;
    let sock;
    if (useTls) {
      const o = typeof opts.tls === 'object' ? { ...opts.tls } : {};
      if (opts.ca) o.ca = fs.readFileSync(opts.ca);
      if (opts.cert) o.cert = fs.readFileSync(opts.cert);
      if (opts.key) o.key = fs.readFileSync(opts.key);
      if (where.path) o.path = where.path; else { o.host = where.host; o.port = where.port; }
      if (o.servername === undefined && where.host && net.isIP(where.host) === 0) {
        o.servername = where.host;
      }
      sock = tls.connect(o);
    } else {
      sock = where.path ? net.connect(where.path) : net.connect(where.port, where.host);
    }
    this.sock = sock;
    sock.setNoDelay && sock.setNoDelay(true);
    sock.setEncoding('latin1');
    this.ready = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new ConnectionLost('TIMEOUT', `cannot connect to ${address} in time`));
      }, this.timeoutMs);
      sock.once(useTls ? 'secureConnect' : 'connect', () => { clearTimeout(timer); resolve(); });
      sock.once('error', (e) => { clearTimeout(timer); reject(e); });
    });
    this.ready.catch(() => {});
    sock.on('data', (d) => this.onData(d));
    sock.on('error', () => {});
    sock.on('close', () => this.onEnd());
  }

  onData(data) {
    this.buf += data;
    let i;
    while ((i = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      this.onLine(line.split(' '));
    }
  }

  onLine(words) {
    if (words[0] === '!') {
      this.onPush(words);
      return;
    }
    const p = this.pending[0];
    if (p === undefined) return;        // nothing asked: not ours to read
    if (p.multi && words[0] !== 'END' && words[0] !== 'ERR') {
      p.lines.push(words);
      return;
    }
    this.pending.shift();
    if (p.timer) clearTimeout(p.timer);
    if (words[0] === 'ERR') {
      p.reject(errorOf(words));
      return;
    }
    if (p.onReply) p.onReply(words);  // now, before any line after it
    p.resolve(p.multi ? p.lines : words);
  }

  onPush(words) {
    const kind = words[1];
    const name = words[2];
    if (kind === 'LOST') {
      // One push names a whole set; a LockSet is entered under each of
      // its names, and told once.
      const names = pushNames(words);
      const held = new Set();
      for (const n of names) {
        for (const lk of this.locks.get(n) || []) held.add(lk);
        this.locks.delete(n);
      }
      for (const lk of held) for (const n of lk.names) this.forget(n, lk);
      const reason = fields(words.slice(2 + names.length)).reason || 'unknown';
      for (const lk of held) {
        lk.holds = 0;
        lk.markLost(reason);
      }
    } else if (kind === 'HELD' || kind === 'FREE') {
      const w = this.watches.get(name);
      if (w) w.put({ name, held: kind === 'HELD', fields: fields(words.slice(3)) });
    }
  }

  onEnd() {
    this.closed = true;
    const all = new Set();
    for (const held of this.locks.values()) for (const lk of held) all.add(lk);
    for (const lk of all) lk.markLost('connection');
    this.locks.clear();
    for (const w of this.watches.values()) w.put(null);
    const pending = this.pending;
    this.pending = [];
    for (const p of pending) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(new ConnectionLost('CLOSED', 'the connection ended'));
    }
  }

  /*
   * Send one request; its reply's words (ERR rejects).  waitMs: Infinity
   * for a LOCK.  onReply(words), if given, runs as the reply is read (an
   * ERR aside), before any line that follows it.
   */
  command(line, { multi = false, waitMs, onReply } = {}) {
    if (this.closed) {
      return Promise.reject(new ConnectionLost('CLOSED', 'the connection is closed'));
    }
    return new Promise((resolve, reject) => {
      const p = { resolve, reject, multi, onReply, lines: [] };
      const ms = waitMs === undefined ? this.timeoutMs : waitMs;
      if (Number.isFinite(ms)) {
        p.timer = setTimeout(() => {
          // Out of step with the daemon from now on: the connection goes.
          reject(new ConnectionLost('TIMEOUT', `no reply to ${line.split(' ')[0]} in time; closed`));
          this.sock.destroy();
        }, ms);
      }
      this.pending.push(p);
      this.sock.write(line + '\n');
    });
  }

  static opts(o) {
    const out = [];
    if (o.ttl !== undefined) out.push(`ttl=${number('ttl', o.ttl, 1, TTL_MAX, ' ms')}`);
    if (o.fence) out.push('fence');
    if (o.shared) out.push('shared');
    if (o.limit !== undefined) out.push(`limit=${number('limit', o.limit, 1, LIMIT_MAX)}`);
    if (o.label !== undefined) out.push(`label=${word('label', o.label, LABEL_MAX)}`);
    if (o.delay !== undefined) out.push(`delay=${number('delay', o.delay, 0, TTL_MAX, ' ms')}`);
    return out;
  }

  /* LOCK or TRYLOCK; the OK's fields, or what grant(fields) made of them
   * as the reply was read. */
  async take(name, o, lease, grant) {
    name = nameWords(name);
    let words;
    let waitMs;
    if (o.timeout === 0) {
      words = ['TRYLOCK', name];
      waitMs = this.timeoutMs;
    } else if (o.timeout === undefined || o.timeout === Infinity) {
      words = ['LOCK', name, 'wait=inf'];
      waitMs = Infinity;
    } else {
      words = ['LOCK', name, `wait=${Math.trunc(o.timeout)}`];
      waitMs = o.timeout + this.timeoutMs;
    }
    words.push(...Client.opts(o));
    if (lease) words.push('mode=lease');
    let made;
    const onReply = grant && ((w) => { if (w[0] === 'OK') made = grant(fields(w.slice(2))); });
    const r = await this.command(words.join(' '), { waitMs, onReply });
    if (r[0] === 'BUSY') throw new Busy('BUSY', r.slice(1).join(' '));
    if (r[0] === 'TIMEOUT') throw new Timeout('TIMEOUT', r.slice(1).join(' '));
    if (r[0] !== 'OK') throw new ProtocolError('REPLY', r.join(' '));
    return grant ? made : fields(r.slice(2));
  }

  /* A hold of this session: entered in locks, where "! LOST" finds it. */
  hold(lk) {
    for (const n of lk.names) {
      let held = this.locks.get(n);
      if (!held) this.locks.set(n, (held = new Set()));
      held.add(lk);
    }
    return lk;
  }

  /* lk no longer in the entry of name n. */
  forget(n, lk) {
    const held = this.locks.get(n);
    if (!held) return;
    held.delete(lk);
    if (held.size === 0) this.locks.delete(n);
  }

  /* lk's hold released; holds: how many the session still has. */
  unhold(lk, holds) {
    lk.holds = 0;
    for (const n of lk.names) {
      const held = this.locks.get(n);
      if (!held) continue;
      held.delete(lk);
      for (const other of held) other.holds = holds;
      if (holds === 0 || held.size === 0) this.locks.delete(n);
    }
  }

  /*
   * acquire(name, {timeout (ms; 0: one try, Busy when held; default: for
   * ever), ttl, shared, limit, fence, label, delay}): a Lock of this
   * session.  delay (ms): a lock-delay, nobody is granted the name for
   * that long after the hold ends without a release (undefined: the
   * daemon's lock.delay_ms; 0: none); exclusive locks only.
   */
  async acquire(name, o = {}) {
    return this.take(name, o, false, (f) => this.hold(new Lock(this, name, f)));
  }

  /* Run fn(signal) under the lock; released after, also when fn throws. */
  async using(name, o, fn) {
    if (typeof o === 'function') { fn = o; o = {}; }
    const lk = await this.acquire(name, o);
    try {
      return await fn(lk.signal, lk);
    } finally {
      if (!lk.lost && !this.closed) await lk.release();
    }
  }

  /*
   * acquireMany(names, {timeout, ttl, fence, label, delay}): a LockSet of this
   * session holding every name of the array names (1 to SET_MAX, none
   * twice), all or none; the options of acquire but shared and limit,
   * which a set does not take.
   */
  async acquireMany(names, o = {}) {
    names = nameList(names);
    if (o.shared || o.limit !== undefined) throw new TypeError('a set of names is held exclusively: no shared or limit');
    return this.take(names, o, false, (f) => this.hold(new LockSet(this, names, f)));
  }

  /* Run fn(signal, lockSet) holding every name of names; released after. */
  async usingMany(names, o, fn) {
    if (typeof o === 'function') { fn = o; o = {}; }
    const lk = await this.acquireMany(names, o);
    try {
      return await fn(lk.signal, lk);
    } finally {
      if (!lk.lost && !this.closed) await lk.release();
    }
  }

  /* Lease mode for a set: {names, token, validity, fences}; one token for
   * the set, which extend and release take with the names (any order). */
  async leaseMany(names, o) {
    names = nameList(names);
    if (!o || o.ttl === undefined) throw new TypeError('a lease needs ttl (ms)');
    if (o.shared || o.limit !== undefined) throw new TypeError('a set of names is held exclusively: no shared or limit');
    const f = await this.take(names, o, true);
    return { names, token: f.token, validity: f.validity, fences: fenceList(f.fence) };
  }

  /* Lease mode: {name, token, validity, fence}; nothing renews it. */
  async lease(name, o) {
    if (!o || o.ttl === undefined) throw new TypeError('a lease needs ttl (ms)');
    const f = await this.take(name, o, true);
    return { name, token: f.token, validity: f.validity, fence: f.fence };
  }

  /* EXTEND a lease by token; its validity (ms).  NotHeld once it expired.
   * name: a name, or the array of names of a set's lease. */
  async extend(name, token, ttl) {
    const r = await this.command(`EXTEND ${nameWords(name)} token=${tokenWord(token)} ttl=${number('ttl', ttl, 1, TTL_MAX, ' ms')}`);
    if (r[0] === 'NOTHELD') throw new NotHeld('NOTHELD', r.slice(1).join(' '));
    return fields(r.slice(1)).validity;
  }

  /* Release a lease by token (compare-and-delete); NotHeld when gone.
   * name: a name, or the array of names of a set's lease. */
  async release(name, token) {
    const r = await this.command(`UNLOCK ${nameWords(name)} token=${tokenWord(token)}`);
    if (r[0] === 'NOTHELD') throw new NotHeld('NOTHELD', r.slice(1).join(' '));
  }

  /* STATUS: null when free, else the HELD fields.  A name nobody holds
   * but a lock-delay keeps from being granted (FREE <name> delayed=MS) is
   * no null: {state: 'FREE', delayed: MS}, without owner. */
  async status(name, { token } = {}) {
    let line = `STATUS ${word('lock name', name)}`;
    if (token !== undefined) line += ` token=${tokenWord(token)}`;
    const r = await this.command(line);
    const f = fields(r.slice(2));
    if (r[0] !== 'FREE') return f;
    return f.delayed === undefined ? null : { state: 'FREE', ...f };
  }

  /*
   * check(name, {fence, permit} | {token}): CHECK whether that grant of
   * name (told fence, with permit for a counted name's; or the lease of
   * token) is still its current one on a quorum of the masters, now.
   * {current: true, ttl} (ttl: ms it stays on a quorum unless renewed,
   * -1: no expiry), or {current: false, reason} (reason: 'free', 'other'
   * or 'mixed').  For a resource that cannot store a fence: ask before
   * each write and refuse it unless current.  Rejects with NoQuorum when
   * too few masters answered, KindError for a counted name's fence
   * without its permit.
   */
  async check(name, { fence, permit, token } = {}) {
    let line = `CHECK ${word('lock name', name)}`;
    if ((fence === undefined) === (token === undefined)) {
      throw new TypeError('check needs fence or token, and not both');
    }
    if (token !== undefined) {
      if (permit !== undefined) throw new TypeError('permit goes with fence, not token');
      line += ` token=${tokenWord(token)}`;
    } else {
      line += ` fence=${number('fence', fence, 1, FENCE_MAX)}`;
      if (permit !== undefined) line += ` permit=${number('permit', permit, 0, PERMIT_MAX)}`;
    }
    const r = await this.command(line);
    const f = fields(r.slice(2));
    if (r[0] === 'CURRENT') return { current: true, ttl: f.ttl };
    if (r[0] === 'STALE') return { current: false, reason: f.reason };
    throw new ProtocolError('REPLY', r.join(' '));
  }

  /* LIST: one object per hold or waiting LOCK, with state and name. */
  async list(prefix) {
    const lines = await this.command(prefix === undefined ? 'LIST' : `LIST ${word('prefix', prefix)}`,
                                     { multi: true });
    return lines.map((w) => ({ state: w[0], name: w[1], ...fields(w.slice(2)) }));
  }

  async stats() {
    const out = {};
    for (const w of await this.command('STATS', { multi: true })) {
      if (w[0] !== 'STAT') continue;
      const v = w.slice(2).join(' ');
      out[w[1]] = /^-?\d+$/.test(v) ? Number(v) : v;
    }
    return out;
  }

  async ping() { return (await this.command('PING'))[0] === 'PONG'; }

  /* BREAK (needs the admin right). */
  async breakLock(name) { return this.command(`BREAK ${word('lock name', name)}`); }

  /*
   * WATCH name: an async iterator of {name, held, fields}: the state now,
   * then each change; return() (a break out of for await) sends UNWATCH.
   */
  watch(name) {
    word('lock name', name);
    if (this.watches.has(name)) throw new Error(`${name} is watched already by this client`);
    const items = [];
    const waiters = [];
    const w = {
      put(ev) { if (waiters.length) waiters.shift()(ev); else items.push(ev); },
    };
    this.watches.set(name, w);
    const started = this.command(`WATCH ${name}`).catch((e) => {
      this.watches.delete(name);
      throw e;
    });
    const client = this;
    return {
      async next() {
        await started;
        const ev = items.length ? items.shift() : await new Promise((r) => waiters.push(r));
        if (ev === null) return { done: true, value: undefined };
        return { done: false, value: ev };
      },
      async return() {
        client.watches.delete(name);
        if (!client.closed) await client.command(`UNWATCH ${name}`).catch(() => {});
        return { done: true, value: undefined };
      },
      [Symbol.asyncIterator]() { return this; },
    };
  }

  /* Close the connection: the session ends and its locks are released. */
  close() {
    if (!this.sock.destroyed) this.sock.end();
    this.sock.destroy();
    this.closed = true;
  }
}

module.exports = {
  Client, Lock, LockSet, RedlockdError, Busy, Timeout, NotHeld, NoQuorum, Denied, ProtocolError,
  LimitError, AuthError, KindError, ShuttingDown, ConnectionLost, defaults,
  NAME_MAX, LABEL_MAX, TOKEN_LEN, LIMIT_MAX, TTL_MAX, SET_MAX,
  connect: (address, opts) => Client.connect(address, opts),
};
