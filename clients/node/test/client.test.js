'use strict';
// The Node.js client against a real daemon and five real masters.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const redlockd = require('..');
const { Daemon, Relay, ADMIN_PASSWORD, makeCerts, waitUntil, within, aborted, freePort } = require('./harness');

// Every test has a deadline; a test that passes takes well under a second.
const T = { timeout: 30000 };
const ROOT = path.resolve(__dirname, '..', '..', '..');

test('the client', { timeout: 120000 }, async (t) => {
  const d = await Daemon.start();
  const opened = [];
  const client = async (opts) => { const c = await redlockd.connect(d.address, opts); opened.push(c); return c; };
  t.after(() => { for (const c of opened) c.close(); d.stop(); });

  await t.test('grant, status, list, release', T, async () => {
    const a = await client();
    const b = await client();
    const out = await a.using('js-grant', { fence: true, label: 'js-test' }, async (signal, lk) => {
      assert.ok(lk.fence > 0);
      assert.equal(signal.aborted, false);
      const st = await a.status('js-grant');
      assert.equal(st.owner, 'self');
      assert.equal(st.label, 'js-test');
      assert.equal((await b.status('js-grant')).owner, 'other');
      assert.deepEqual((await b.list('js-grant')).map((e) => e.name), ['js-grant']);
      return 42;
    });
    assert.equal(out, 42);
    assert.equal(await b.status('js-grant'), null);
  });

  await t.test('busy and timeout', T, async () => {
    const a = await client();
    const b = await client();
    const lk = await a.acquire('js-busy');
    await assert.rejects(b.acquire('js-busy', { timeout: 0 }), redlockd.Busy);
    const t0 = Date.now();
    await assert.rejects(b.acquire('js-busy', { timeout: 300 }), redlockd.Timeout);
    assert.ok(Date.now() - t0 >= 250);
    await lk.release();
    await (await b.acquire('js-busy', { timeout: 1000 })).release();
  });

  await t.test('shared and counted holds', T, async () => {
    const [a, b, c] = [await client(), await client(), await client()];
    const s1 = await a.acquire('js-sh', { shared: true });
    const s2 = await b.acquire('js-sh', { shared: true });
    assert.equal((await c.status('js-sh')).holders, 2);
    await assert.rejects(c.acquire('js-sh', { timeout: 0 }), redlockd.Busy);
    await s1.release(); await s2.release();
    const p1 = await a.acquire('js-sem', { limit: 2 });
    const p2 = await b.acquire('js-sem', { limit: 2 });
    assert.deepEqual(new Set([p1.permit, p2.permit]), new Set([0, 1]));
    await assert.rejects(c.acquire('js-sem', { limit: 2, timeout: 0 }), redlockd.Busy);
    await assert.rejects(c.acquire('js-sem', { limit: 3, timeout: 0 }), redlockd.KindError);
    await p1.release(); await p2.release();
  });

  await t.test('lease across two clients', T, async () => {
    const a = await client();
    const b = await client();
    const lease = await a.lease('js-lease', { ttl: 5000, fence: true });
    a.close();
    assert.equal((await b.status('js-lease', { token: lease.token })).owner, 'self');
    assert.ok((await b.extend('js-lease', lease.token, 8000)) > 5000);
    await b.release('js-lease', lease.token);
    assert.equal(await b.status('js-lease'), null);
    await assert.rejects(b.release('js-lease', lease.token), redlockd.NotHeld);
    await assert.rejects(b.extend('js-lease', lease.token, 1000), redlockd.NotHeld);
  });

  await t.test('LOST after a BREAK aborts the signal', T, async () => {
    const a = await client();
    const admin = await client();
    await admin.command(`AUTH ${ADMIN_PASSWORD}`);
    let reason = null;
    const result = a.using('js-break', async (signal) => {
      await aborted(signal);
      reason = signal.reason;
      return 'stopped';
    });
    // Break it only once it is held, or the BREAK finds nothing.
    await waitUntil(async () => (await admin.status('js-break')) !== null, 5000, 'js-break held');
    await admin.breakLock('js-break');
    assert.equal(await within(result, 5000, 'the signal aborted by ! LOST'), 'stopped');
    assert.equal(reason, 'broken');
  });

  await t.test('a LOST right behind its grant, in one read, reaches the lock', T, async () => {
    const relay = await Relay.start(d.port);
    t.after(() => relay.close());
    const admin = await client();
    await admin.command(`AUTH ${ADMIN_PASSWORD}`);
    const viaRelay = await redlockd.connect(relay.address);
    opened.push(viaRelay);
    const first = await viaRelay.acquire('js-behind');
    relay.hold();
    const again = viaRelay.acquire('js-behind');     // a second hold of the session
    await waitUntil(() => relay.held().includes('OK js-behind'), 5000, 'the second grant held back');
    await admin.breakLock('js-behind');
    await waitUntil(() => relay.held().includes('! LOST js-behind'), 5000, 'the LOST held back');
    relay.flush();
    const second = await within(again, 5000, 'the second grant');
    await within(aborted(second.signal), 5000, 'the second hold lost');
    await within(aborted(first.signal), 5000, 'the first hold lost');
    assert.equal(second.lostReason, 'broken');
    assert.equal(first.lostReason, 'broken');
    assert.equal(second.holds + first.holds, 0);
  });

  await t.test('a set: granted whole, fences in the order given, released whole', T, async () => {
    const a = await client();
    const b = await client();
    await (await a.acquire('js-set-z', { fence: true })).release();   // z's fence moves ahead
    const out = await a.usingMany(['js-set-z', 'js-set-a'], { fence: true, label: 'js-set' }, async (signal, ls) => {
      assert.deepEqual(ls.names, ['js-set-z', 'js-set-a']);
      assert.equal(ls.holds, 1);
      assert.ok(ls.validity > 0);
      assert.equal(ls.fences.length, 2);
      for (let i = 0; i < 2; i++) {
        assert.equal((await b.status(ls.names[i])).owner, 'other');
        assert.equal((await a.status(ls.names[i])).fence, ls.fences[i]);
      }
      assert.ok(ls.fences[0] > ls.fences[1], 'the fences are not in the order given');
      return ls;
    });
    assert.equal(out.holds, 0);
    assert.equal(out.lost, false);
    assert.equal(await b.status('js-set-z'), null);
    assert.equal(await b.status('js-set-a'), null);
  });

  await t.test('a set is refused whole when one name is held', T, async () => {
    const a = await client();
    const b = await client();
    const lk = await a.acquire('js-set-held');
    await assert.rejects(b.acquireMany(['js-set-free', 'js-set-held'], { timeout: 0 }),
                         (e) => e instanceof redlockd.Busy && e.text.startsWith('js-set-free js-set-held ttl='));
    assert.equal(await a.status('js-set-free'), null, 'a refused set left a name held');
    await assert.rejects(b.acquireMany(['js-set-free', 'js-set-held'], { timeout: 200 }), redlockd.Timeout);
    assert.equal(await a.status('js-set-free'), null);
    await lk.release();
    await (await b.acquireMany(['js-set-free', 'js-set-held'], { timeout: 0 })).release();
  });

  await t.test('a set whose key vanished is lost once, whole', T, async () => {
    const a = await client();
    const b = await client();
    let calls = 0;
    const ls = await a.acquireMany(['js-lost-1', 'js-lost-2', 'js-lost-3'], { ttl: 600 });
    ls.signal.addEventListener('abort', () => { calls++; });
    await d.delEverywhere('redlock:js-lost-2');
    await within(aborted(ls.signal), 5000, 'the loss signal of the set');
    assert.ok(['gone', 'renew'].includes(ls.lostReason), ls.lostReason);
    assert.equal(ls.holds, 0);
    await waitUntil(async () => (await b.status('js-lost-1')) === null && (await b.status('js-lost-3')) === null,
                    5000, 'the other names released');
    assert.equal(calls, 1);
    assert.equal(a.locks.size, 0);
    await assert.rejects(ls.release(), redlockd.NotHeld);
    await (await a.acquireMany(['js-lost-1', 'js-lost-2', 'js-lost-3'], { timeout: 0 })).release();
  });

  await t.test('a LOST right behind a set\'s grant, in one read, reaches the set', T, async () => {
    const relay = await Relay.start(d.port);
    t.after(() => relay.close());
    const viaRelay = await redlockd.connect(relay.address);
    opened.push(viaRelay);
    relay.hold();
    const taking = viaRelay.acquireMany(['js-behind-1', 'js-behind-2'], { ttl: 300 });
    await waitUntil(() => relay.held().includes('OK js-behind-1 js-behind-2'), 5000, 'the grant held back');
    await d.delEverywhere('redlock:js-behind-1');
    await waitUntil(() => relay.held().includes('! LOST js-behind-1 js-behind-2'), 5000, 'the LOST held back');
    relay.flush();
    const ls = await within(taking, 5000, 'the grant');
    await within(aborted(ls.signal), 5000, 'the set lost');
    assert.equal(ls.holds, 0);
    assert.equal(viaRelay.locks.size, 0);
  });

  await t.test('a set in lease mode: one token, extended and released whole', T, async () => {
    const a = await client();
    const b = await client();
    const lease = await a.leaseMany(['js-lset-b', 'js-lset-a'], { ttl: 5000, fence: true });
    assert.deepEqual(lease.names, ['js-lset-b', 'js-lset-a']);
    assert.equal(lease.fences.length, 2);
    a.close();
    assert.equal((await b.status('js-lset-a', { token: lease.token })).owner, 'self');
    assert.ok((await b.extend(['js-lset-a', 'js-lset-b'], lease.token, 9000)) > 5000);
    await assert.rejects(b.extend(['js-lset-a', 'js-lset-b', 'js-lset-c'], lease.token, 9000), redlockd.NotHeld);
    const again = await b.leaseMany(['js-lset-b', 'js-lset-a'], { ttl: 5000 });
    await b.release(again.names, again.token);
    assert.equal(await b.status('js-lset-a'), null);
    assert.equal(await b.status('js-lset-b'), null);
    await assert.rejects(b.release(['js-lset-a', 'js-lset-b'], again.token), redlockd.NotHeld);
    await assert.rejects(b.acquireMany(['js-dup', 'js-dup']), TypeError);
    await assert.rejects(b.acquireMany([]), TypeError);
    await assert.rejects(b.acquireMany('js-one-string'), TypeError);
  });

  await t.test('BREAK needs the admin right', T, async () => {
    const a = await client();
    await assert.rejects(a.breakLock('js-nobody'), redlockd.Denied);
  });

  await t.test('LOST when masters stop past the validity', T, async () => {
    const a = await client();
    const lk = await a.acquire('js-quorum', { ttl: 1000 });
    d.signalMasters('SIGSTOP', 3);
    try {
      await within(aborted(lk.signal), 5000, '! LOST after the masters stopped');
      assert.ok(['quorum', 'renew'].includes(lk.lostReason), lk.lostReason);
    } finally {
      d.signalMasters('SIGCONT', 3);
    }
  });

  await t.test('watch', T, async () => {
    const a = await client();
    const w = await client();
    const it = w.watch('js-watch');
    const next = async () => (await within(it.next(), 5000, 'a watch event')).value;
    assert.equal((await next()).held, false);
    const lk = await a.acquire('js-watch');
    const ev = await next();
    assert.equal(ev.held, true);
    assert.equal(ev.fields.kind, 'exclusive');
    await lk.release();
    assert.equal((await next()).held, false);
    await it.return();
    assert.ok(await w.ping());
  });

  await t.test('unix socket', T, async () => {
    const c = await redlockd.connect(`unix:${d.sock}`);
    opened.push(c);
    await c.using('js-unix', async () => {
      assert.equal((await c.status('js-unix')).owner, 'self');
    });
  });

  // Lock-delay: a hold that ends without a release (its client closed)
  // keeps the name from everyone for the delay: a try is refused with
  // Busy.delayed, status says delayed, a LOCK that may wait waits it out.
  const vanish = async (take) => {
    const gone = await client();
    await take(gone);
    gone.close();
  };
  // A try refused by the delay (deadline 5 s); a grant fails the test.
  const delayedBusy = async (c, name) => {
    let busy;
    await waitUntil(async () => {
      try {
        await (await c.acquire(name, { timeout: 0 })).release();
      } catch (e) {
        if (!(e instanceof redlockd.Busy)) throw e;
        busy = e;
        return e.delayed !== undefined;
      }
      throw new Error(`${name} was granted: the vanished holder's delay did not keep it`);
    }, 5000, `${name} refused by a delay`);
    return busy;
  };

  await t.test('delay: a single name kept for the delay, then granted', T, async () => {
    const b = await client();
    await vanish((c) => c.acquire('js-delay', { delay: 2000 }));
    const busy = await delayedBusy(b, 'js-delay');
    assert.ok(busy.delayed > 0 && busy.delayed <= 2000, String(busy.delayed));
    assert.equal(busy.ttl, busy.delayed);
    const st = await b.status('js-delay');
    assert.notEqual(st, null, 'a delayed name read as plainly free');
    assert.equal(st.state, 'FREE');
    assert.equal(st.owner, undefined);
    assert.ok(st.delayed <= 2000);
    const lk = await b.acquire('js-delay', { timeout: 10000 });   // waits the delay out
    await lk.release();
    assert.equal(await b.status('js-delay'), null, 'UNLOCK left a delay');
  });

  await t.test('delay: a set kept for the delay, then granted', T, async () => {
    const b = await client();
    const names = ['js-dset-1', 'js-dset-2'];
    await vanish((c) => c.acquireMany(names, { delay: 2000 }));
    assert.ok((await delayedBusy(b, 'js-dset-2')).delayed > 0);
    assert.ok((await b.status('js-dset-1')).delayed > 0);
    await assert.rejects(b.acquireMany(names, { timeout: 0 }),
                         (e) => e instanceof redlockd.Busy && e.delayed !== undefined);
    await b.usingMany(names, { timeout: 10000 }, async () => {
      assert.equal((await b.status('js-dset-1')).owner, 'self');
    });
  });

  await t.test('delay: a holder\'s BUSY is no delay; shared refused', T, async () => {
    const a = await client();
    const b = await client();
    await a.using('js-nodelay', { delay: 2000 }, async () => {
      await assert.rejects(b.acquire('js-nodelay', { timeout: 0 }),
                           (e) => e instanceof redlockd.Busy && e.delayed === undefined && e.ttl > 0);
    });
    await (await b.acquire('js-nodelay', { timeout: 0 })).release();   // released: no delay
    await assert.rejects(a.acquire('js-delay-sh', { shared: true, delay: 1000 }), redlockd.ProtocolError);
    await assert.rejects(a.acquire('js-delay-sh', { delay: -1 }), TypeError);
  });

  await t.test('check: a fenced grant, then released, then another\'s', T, async () => {
    const a = await client();
    const b = await client();
    const l1 = await a.acquire('js-ck', { fence: true });
    const cur = await b.check('js-ck', { fence: l1.fence });
    assert.equal(cur.current, true);
    assert.ok(cur.ttl > 0);
    await l1.release();
    assert.deepEqual(await b.check('js-ck', { fence: l1.fence }), { current: false, reason: 'free' });
    await b.using('js-ck', { fence: true }, async (signal, l2) => {
      assert.deepEqual(await a.check('js-ck', { fence: l1.fence }), { current: false, reason: 'other' });
      assert.equal((await a.check('js-ck', { fence: l2.fence })).current, true);
    });
    const set = await a.acquireMany(['js-ck-s1', 'js-ck-s2'], { fence: true });
    for (let i = 0; i < 2; i++) {
      assert.equal((await a.check(set.names[i], { fence: set.fences[i] })).current, true);
    }
    await set.release();
  });

  await t.test('check: a lease by token; a counted name needs its permit', T, async () => {
    const a = await client();
    const b = await client();
    const lease = await a.lease('js-ck-lease', { ttl: 5000 });
    assert.equal((await b.check('js-ck-lease', { token: lease.token })).current, true);
    await a.release('js-ck-lease', lease.token);
    assert.equal((await b.check('js-ck-lease', { token: lease.token })).reason, 'free');
    const other = await a.lease('js-ck-lease', { ttl: 5000 });
    assert.equal((await b.check('js-ck-lease', { token: lease.token })).reason, 'other');
    await a.release('js-ck-lease', other.token);
    const p = await a.acquire('js-ck-sem', { limit: 2, fence: true });
    await assert.rejects(a.check('js-ck-sem', { fence: p.fence }), redlockd.KindError);
    assert.equal((await a.check('js-ck-sem', { fence: p.fence, permit: p.permit })).current, true);
    await p.release();
    await assert.rejects(a.check('js-ck-arg'), TypeError);
    await assert.rejects(a.check('js-ck-arg', { fence: 1, token: '0'.repeat(32) }), TypeError);
    await assert.rejects(a.check('js-ck-arg', { fence: 0 }), TypeError);
    await assert.rejects(a.check('js-ck-arg', { fence: 1, permit: 1000 }), TypeError);
    assert.ok(await a.ping());
  });

  await t.test('check: too few masters is NoQuorum', T, async () => {
    const a = await client();
    d.signalMasters('SIGSTOP', 3);
    try {
      await assert.rejects(a.check('js-ck-nq', { fence: 1 }), redlockd.NoQuorum);
    } finally {
      d.signalMasters('SIGCONT', 3);
    }
  });

  await t.test('bad names refused before sending', T, async () => {
    const a = await client();
    await assert.rejects(a.acquire('two words'), TypeError);
    await assert.rejects(a.acquire('js-ttl', { ttl: 1 }), redlockd.ProtocolError);
  });

  // Arguments out of the protocol's bounds are refused before anything is
  // sent, with an error that says what is wrong and the bound.
  await t.test('bounds named in the errors', T, async () => {
    const a = await client();
    const refused = (p, message) => assert.rejects(p, (e) => {
      assert.ok(e instanceof TypeError, e);
      assert.equal(e.message, message);
      return true;
    });
    const ascii = 'it must be one word of printable ASCII (0x21 to 0x7e)';
    const printable = 'it must be printable ASCII (0x21 to 0x7e) without spaces';
    await refused(a.acquire('n'.repeat(300)), 'lock name is 300 bytes; at most 250');
    await refused(a.acquire(`é${'n'.repeat(249)}`), 'lock name is 251 bytes; at most 250');
    await refused(a.acquire(''), 'lock name is empty; it must be 1 to 250 bytes');
    await refused(a.acquire('two words'), `lock name contains a space (at byte 3); ${ascii}`);
    await refused(a.status('two\nPING'), `lock name has byte 0x0a at offset 3; ${printable}`);
    await refused(a.acquire('été'), `lock name has byte 0xc3 at offset 0; ${printable}`);
    await refused(a.acquire(42), 'lock name must be a string, not number');
    await refused(a.lease('n'.repeat(300), { ttl: 1000 }), 'lock name is 300 bytes; at most 250');
    await refused(a.breakLock('n'.repeat(300)), 'lock name is 300 bytes; at most 250');
    await refused(a.acquire('js-bounds', { label: 'l'.repeat(65) }), 'label is 65 bytes; at most 64');
    await refused(a.acquire('js-bounds', { label: 'has space' }), `label contains a space (at byte 3); ${ascii}`);
    await refused(a.acquire('js-bounds', { ttl: 0 }), 'ttl is 0 ms; it must be 1 to 4000000000000 ms');
    await refused(a.acquire('js-bounds', { limit: 2000 }), 'limit is 2000; it must be 1 to 1000');
    const hex = "it must be 32 lowercase hex digits (as the lease's grant gave it)";
    await refused(a.release('js-bounds', 'abc'), `token is 3 characters; ${hex}`);
    await refused(a.extend('js-bounds', 'G'.repeat(32), 1000), `token has 'G' at offset 0; ${hex}`);
    await refused(a.list('p'.repeat(251)), 'prefix is 251 bytes; at most 250');
    await refused(redlockd.connect(d.address, { password: 'p'.repeat(251) }), 'password is 251 bytes; at most 250');
    // The longest name is taken, and nothing refused was sent: the session
    // answers in step.
    await a.using('n'.repeat(250), { timeout: 5000 }, async (signal, lk) => assert.equal(lk.holds, 1));
    assert.ok(await a.ping());
    assert.equal(await a.status('js-bounds'), null);
  });

  // Without an address or environment: the Unix socket (defaults.socket),
  // then TCP (defaults.address), as redlockctl does.
  await t.test('default order: the Unix socket, then TCP', T, async (tt) => {
    const saved = { ...redlockd.defaults };
    const env = { s: process.env.REDLOCKD_SOCKET, a: process.env.REDLOCKD_ADDR };
    delete process.env.REDLOCKD_SOCKET;
    delete process.env.REDLOCKD_ADDR;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlockd-node-order.'));
    tt.after(() => {
      Object.assign(redlockd.defaults, saved);
      if (env.s !== undefined) process.env.REDLOCKD_SOCKET = env.s;
      if (env.a !== undefined) process.env.REDLOCKD_ADDR = env.a;
      fs.rmSync(dir, { recursive: true, force: true });
    });
    const dead = `127.0.0.1:${await freePort()}`;
    const label = async (c, name) => c.using(name, { timeout: 5000 }, async () => (await c.status(name)).label);
    const connect = async () => { const c = await redlockd.connect(); opened.push(c); return c; };

    Object.assign(redlockd.defaults, { socket: d.sock, address: dead });
    let c = await connect();
    assert.equal(c.address, `unix:${d.sock}`);
    assert.match(await label(c, 'js-order-unix'), /:uid=/);      // the daemon saw a Unix peer

    // A socket file nobody listens on, and no file: TCP.
    const stale = path.join(dir, 'stale.sock');
    const srv = net.createServer();
    await new Promise((resolve) => srv.listen(stale, resolve));
    fs.linkSync(stale, `${stale}.kept`);                          // kept when the server closes
    await new Promise((resolve) => srv.close(resolve));
    for (const sock of [`${stale}.kept`, path.join(dir, 'absent.sock')]) {
      Object.assign(redlockd.defaults, { socket: sock, address: d.address });
      c = await connect();
      assert.equal(c.address, d.address);
      assert.match(await label(c, 'js-order-tcp'), /:127\.0\.0\.1:/);
    }

    // Neither: the error names both.
    Object.assign(redlockd.defaults, { socket: path.join(dir, 'absent.sock'), address: dead });
    await assert.rejects(redlockd.connect(), (e) => {
      assert.ok(e instanceof redlockd.ConnectionLost, e);
      assert.equal(e.text, `cannot connect to redlockd: ${redlockd.defaults.socket}: ENOENT; ${dead}: ECONNREFUSED`);
      return true;
    });

    // The environment comes before the default socket.
    Object.assign(redlockd.defaults, { socket: d.sock, address: dead });
    process.env.REDLOCKD_ADDR = d.address;
    try {
      c = await connect();
    } finally {
      delete process.env.REDLOCKD_ADDR;
    }
    assert.equal(c.address, d.address);
  });
});

/* The code blocks of file (from the tree's root) fenced as lang, in order;
 * only those of the section under heading when it is given. */
function fenced(file, lang, heading) {
  let text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  if (heading !== undefined) {
    text = text.slice(text.indexOf(heading));
    const end = text.indexOf('\n## ', 1);
    if (end >= 0) text = text.slice(0, end);
  }
  return text.split(`\`\`\`${lang}\n`).slice(1).map((part) => part.slice(0, part.indexOf('```')));
}

/* Run code as job.js in dir, against a daemon of its own found through
 * $REDLOCKD_ADDR (as connect() without an address finds it; docs/using.md's
 * example names the address, replaced), and check that it holds the lock
 * and stops with "lost: broken" when the lock is broken. */
async function hearsTheLoss(t, dir, code, { name = 'nightly', first = /^held with fence \d+\n$/ } = {}) {
  const { spawn } = require('node:child_process');
  const d = await Daemon.start();
  t.after(() => d.stop());
  fs.writeFileSync(path.join(dir, 'job.js'), code.replace('127.0.0.1:7379', d.address));
  const env = { ...process.env, REDLOCKD_ADDR: d.address };
  delete env.REDLOCKD_SOCKET;
  const child = spawn(process.execPath, ['job.js'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (x) => { out += x; });
  child.stderr.on('data', (x) => { out += x; });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  await waitUntil(() => out.includes('held with fence') || child.exitCode !== null, 5000,
                  'the example holding the lock');
  assert.match(out, first);
  const admin = await redlockd.connect(d.address);
  t.after(() => admin.close());
  await admin.command(`AUTH ${ADMIN_PASSWORD}`);
  await admin.breakLock(name);
  assert.equal(await within(exited, 5000, 'the example stopping'), 1);
  assert.match(out, /\nlost: broken\n$/);
}

function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlockd-node-doc.'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('the example of docs/using.md hears the loss', T, async (t) => {
  const code = fenced('docs/using.md', 'js', '## Using it from Node.js')[0]
    .replace("require('./clients/node')", `require(${JSON.stringify(path.join(ROOT, 'clients', 'node'))})`);
  await hearsTheLoss(t, scratch(t), code);
});

// docs/using.md's "Several names at once": both names held, a fence each,
// and the whole set lost when one of them is broken.
test('the sets example of docs/using.md hears the loss', T, async (t) => {
  const code = fenced('docs/using.md', 'js', '## Several names at once')[0]
    .replace("require('./clients/node')", `require(${JSON.stringify(path.join(ROOT, 'clients', 'node'))})`);
  assert.match(code, /usingMany\(/);
  await hearsTheLoss(t, scratch(t), code, { name: 'account-42', first: /^held with fences \d+,\d+\n$/ });
});

/* The output of docs/using.md's JavaScript example under heading (which
 * calls needs), run to its end as written (but for the address and the
 * path of the client) against a daemon of its own. */
async function outputOf(t, heading, needs) {
  const { execFile } = require('node:child_process');
  const blocks = fenced('docs/using.md', 'js', heading);
  assert.equal(blocks.length, 1, heading);
  assert.ok(blocks[0].includes(needs), `the example under ${heading} has no ${needs}`);
  const d = await Daemon.start();
  t.after(() => d.stop());
  const dir = scratch(t);
  fs.writeFileSync(path.join(dir, 'job.js'), blocks[0]
    .replace("require('./clients/node')", `require(${JSON.stringify(path.join(ROOT, 'clients', 'node'))})`)
    .replaceAll('127.0.0.1:7379', d.address));
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['job.js'], { cwd: dir, timeout: 20000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`the example failed: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout + stderr);
    });
  });
}

// docs/using.md's "Checking a grant before a write": current while held,
// stale with reason free once released.
test('the check example of docs/using.md', T, async (t) => {
  assert.equal(await outputOf(t, '## Checking a grant before a write', '.check('), 'true\nfalse free\n');
});

// docs/using.md's "Lock-delay": a try refused by the delay of a holder
// that vanished, then the name granted once it ran out.
test('the delay example of docs/using.md', T, async (t) => {
  assert.equal(await outputOf(t, '## Lock-delay', 'delay:'), 'delayed: true\nheld\n');
});

// The README's install line, run as written in a project of its own, with
// npm kept offline; then its example, as written.
test('the README installs offline and its example hears the loss', T, async (t) => {
  const { execFileSync } = require('node:child_process');
  const dir = scratch(t);
  const install = fenced('clients/node/README.md', 'sh', '## Installing');
  assert.equal(install.length, 1);
  let npm = true;
  try { execFileSync('npm', ['--version'], { stdio: 'ignore' }); } catch { npm = false; }
  if (npm) {
    execFileSync('sh', ['-ec', install[0].replace('/path/to/redlockd', ROOT)], {
      cwd: dir, stdio: 'pipe', timeout: 60000,
      env: { ...process.env, npm_config_offline: 'true', npm_config_audit: 'false',
             npm_config_fund: 'false', npm_config_update_notifier: 'false' },
    });
  } else {
    t.diagnostic('npm is missing: node_modules/redlockd linked by hand, as npm install of a folder does');
    fs.mkdirSync(path.join(dir, 'node_modules'));
    fs.symlinkSync(path.join(ROOT, 'clients', 'node'), path.join(dir, 'node_modules', 'redlockd'));
  }
  const code = fenced('clients/node/README.md', 'js', '## Using it');
  assert.equal(code.length, 1);
  await hearsTheLoss(t, dir, code[0]);
});

test('AUTH from $REDLOCKD_PASSWORD', T, async (t) => {
  const d = await Daemon.start({ password: 'js-secret' });
  t.after(() => d.stop());
  process.env.REDLOCKD_PASSWORD = 'js-secret';
  try {
    const c = await redlockd.connect(d.address);
    assert.ok(await c.ping());
    c.close();
  } finally {
    delete process.env.REDLOCKD_PASSWORD;
  }
  await assert.rejects(redlockd.connect(d.address, { password: 'wrong' }), redlockd.AuthError);
});

// A refused AUTH on the default socket ends there: no TCP try, one failure.
test('AUTH refused on the default socket', T, async (t) => {
  const d = await Daemon.start({ password: 'js-secret' });
  const saved = { ...redlockd.defaults };
  const env = {};
  for (const k of ['REDLOCKD_SOCKET', 'REDLOCKD_ADDR', 'REDLOCKD_PASSWORD']) { env[k] = process.env[k]; delete process.env[k]; }
  t.after(() => {
    d.stop();
    Object.assign(redlockd.defaults, saved);
    for (const k of Object.keys(env)) if (env[k] !== undefined) process.env[k] = env[k];
  });
  const failures = () => new Promise((resolve, reject) => {
    const s = net.connect({ path: d.sock });
    let data = '';
    s.setTimeout(5000, () => { s.destroy(); reject(new Error('STATS: no reply')); });
    s.on('error', reject);
    s.on('connect', () => s.write('STATS\n'));
    s.on('data', (b) => {
      data += b;
      if (!data.endsWith('END\n')) return;
      s.destroy();
      const m = /^STAT auth_failures (\d+)$/m.exec(data);
      if (m) resolve(Number(m[1])); else reject(new Error('STATS has no auth_failures'));
    });
  });
  const dead = `127.0.0.1:${await freePort()}`;
  for (const tcp of [dead, d.address]) {
    Object.assign(redlockd.defaults, { socket: d.sock, address: tcp });
    const before = await failures();
    await assert.rejects(redlockd.connect(undefined, { password: 'wrong' }), redlockd.AuthError, `TCP default ${tcp}`);
    assert.equal(await failures(), before + 1, `TCP default ${tcp}`);
  }
});

test('a killed daemon: the lock is lost, calls reject', T, async (t) => {
  const d = await Daemon.start();
  t.after(() => d.stop());
  const c = await redlockd.connect(d.address);
  const lk = await c.acquire('js-killed');
  d.proc.kill('SIGKILL');
  await within(aborted(lk.signal), 5000, '! LOST after the daemon was killed');
  assert.equal(lk.lostReason, 'connection');
  await assert.rejects(c.ping(), redlockd.ConnectionLost);
});

test('TLS with a client certificate', T, async (t) => {
  const certs = makeCerts();
  const d = await Daemon.start({ tlsDir: certs });
  t.after(() => { d.stop(); fs.rmSync(certs, { recursive: true, force: true }); });
  const c = await redlockd.connect(`127.0.0.1:${d.tlsPort}`, {
    tls: true, ca: `${certs}/ca.crt`, cert: `${certs}/client.crt`, key: `${certs}/client.key`,
  });
  await c.using('js-tls', async () => {
    assert.equal((await c.status('js-tls')).owner, 'self');
  });
  c.close();
  // Without a certificate the daemon refuses the session.
  await assert.rejects((async () => {
    const bad = await redlockd.connect(`127.0.0.1:${d.tlsPort}`, { tls: true, ca: `${certs}/ca.crt` });
    try { await bad.ping(); } finally { bad.close(); }
  })());
});
