'use strict';
// Real masters and a real daemon for the client's tests: five redis-server
// masters on free ports and $REDLOCKD_BIN (default ../../../build/redlockd),
// in a fresh temporary directory; stop() kills them all, and so does the
// exit of the test process.
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = process.env.REDLOCKD_BIN || path.join(ROOT, 'build', 'redlockd');
const ADMIN_PASSWORD = 'admin-pw';
const children = new Set();
process.on('exit', () => { for (const c of children) c.kill('SIGKILL'); });
// A run stopped from outside (make's timeout sends SIGTERM) still goes
// through the exit hook above.
process.on('SIGTERM', () => process.exit(143));

// A deadline for the whole file: whatever hangs (a handle left open, a
// promise never settled), the process ends with a line saying so, its
// children killed by the exit hook above.  Unreferenced, so it never keeps
// a finished run alive.
const FILE_DEADLINE_MS = 180000;
setTimeout(() => {
  process.stderr.write(`harness: the tests did not end within ${FILE_DEADLINE_MS} ms\n`);
  process.exit(1);
}, FILE_DEADLINE_MS).unref();

/* within(promise, ms, what): the promise's value, or a rejection naming
 * what did not happen within ms. */
function within(promise, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/* aborted(signal): resolves when the signal aborts (at once if it has). */
function aborted(signal) {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
}

/* A free port of 127.0.0.1 this run has not handed out before: a port just handed
 * out may be free again until its server binds it. */
const givenPorts = new Set();

async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer();
      s.listen(0, '127.0.0.1', () => { const a = s.address(); s.close(() => resolve(a.port)); });
      s.on('error', reject);
    });
    if (!givenPorts.has(port)) {
      givenPorts.add(port);
      return port;
    }
  }
}

async function waitUntil(cond, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

function ask(where, line, until) {
  return new Promise((resolve) => {
    const s = net.connect(where);
    let data = '';
    const done = (v) => { s.destroy(); resolve(v); };
    s.setTimeout(1000, () => done(null));
    s.on('error', () => done(null));
    s.on('connect', () => s.write(line));
    s.on('data', (d) => { data += d; if (until(data)) done(data); });
  });
}

function run(cmd, args, out) {
  const c = spawn(cmd, args, { stdio: ['ignore', out || 'ignore', out || 'ignore'] });
  children.add(c);
  c.on('exit', () => children.delete(c));
  return c;
}

class Daemon {
  static async start({ password, tlsDir } = {}) {
    const d = new Daemon();
    d.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlockd-node.'));
    d.masters = [];
    for (let i = 0; i < 5; i++) {
      const port = await freePort();
      d.masters.push({ port, proc: run('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']) });
    }
    for (const m of d.masters) {
      await waitUntil(async () => ((await ask({ port: m.port, host: '127.0.0.1' }, 'PING\r\n', (s) => s.includes('\n'))) || '').startsWith('+PONG'), 5000, `master ${m.port}`);
    }
    d.port = await freePort();
    d.sock = path.join(d.dir, 'redlockd.sock');
    d.tlsPort = tlsDir ? await freePort() : null;
    let conf = `listen:\n  tcp: "127.0.0.1:${d.port}"\n  unix: "${d.sock}"\n`;
    if (tlsDir) {
      conf += `  tls: "127.0.0.1:${d.tlsPort}"\ntls:\n  cert_file: "${tlsDir}/server.crt"\n  key_file: "${tlsDir}/server.key"\n  client_ca_file: "${tlsDir}/ca.crt"\n`;
    }
    conf += 'masters:\n' + d.masters.map((m) => `  - "127.0.0.1:${m.port}"\n`).join('');
    conf += 'lock:\n  restart_quarantine: false\n  min_ttl_ms: 100\n  retry_delay_ms: 50\n';
    conf += `auth:\n  password: "${password || ''}"\n  admin_password: "${ADMIN_PASSWORD}"\nmetrics:\n  listen: ""\n`;
    fs.writeFileSync(path.join(d.dir, 'redlockd.yml'), conf);
    const log = fs.openSync(path.join(d.dir, 'redlockd.log'), 'w');
    d.proc = run(BIN, ['-c', path.join(d.dir, 'redlockd.yml')], log);
    await waitUntil(async () => {
      if (d.proc.exitCode !== null) throw new Error('redlockd exited: ' + fs.readFileSync(path.join(d.dir, 'redlockd.log'), 'utf8').slice(-2000));
      const s = await ask({ path: d.sock }, 'STATS\n', (x) => x.endsWith('END\n'));
      return s !== null && s.includes('STAT masters_up 5\n');
    }, 10000, 'redlockd with 5 masters up');
    return d;
  }

  get address() { return `127.0.0.1:${this.port}`; }

  /* DEL key on every master, behind the daemon's back. */
  async delEverywhere(key) {
    for (const m of this.masters) {
      const r = await ask({ port: m.port, host: '127.0.0.1' },
                          `*2\r\n$3\r\nDEL\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`, (x) => x.includes('\n'));
      if (r === null || !r.startsWith(':')) throw new Error(`DEL ${key} on master ${m.port}: ${r}`);
    }
  }

  signalMasters(sig, n) { for (const m of this.masters.slice(0, n)) m.proc.kill(sig); }

  stop() {
    for (const m of this.masters) m.proc.kill('SIGCONT');
    for (const c of [this.proc, ...this.masters.map((m) => m.proc)]) c.kill('SIGKILL');
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/*
 * A relay between a client and the daemon on a port of its own, which can
 * hold back what the daemon sends and then pass it on in one write: two
 * lines in one read, as a slow network or a busy client sees them.
 */
class Relay {
  static start(port) {
    const r = new Relay();
    r.holding = false;
    r.buffered = [];
    r.toClient = [];
    r.server = net.createServer((c) => {
      const up = net.connect(port, '127.0.0.1');
      r.toClient.push(c);
      c.on('data', (x) => up.write(x));
      up.on('data', (x) => { if (r.holding) r.buffered.push(x); else c.write(x); });
      c.on('error', () => up.destroy());
      up.on('error', () => c.destroy());
      c.on('close', () => up.destroy());
      up.on('close', () => c.destroy());
    });
    return new Promise((resolve) => r.server.listen(0, '127.0.0.1', () => resolve(r)));
  }

  get address() { return `127.0.0.1:${this.server.address().port}`; }

  hold() { this.holding = true; }

  held() { return Buffer.concat(this.buffered).toString(); }

  /* Pass on what was held, in one write, and stop holding. */
  flush() {
    this.holding = false;
    const all = Buffer.concat(this.buffered);
    this.buffered = [];
    for (const c of this.toClient) c.write(all);
  }

  close() {
    for (const c of this.toClient) c.destroy();
    this.server.close();
  }
}

function makeCerts() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlockd-node-certs.'));
  const r = spawnSync('sh', [path.join(ROOT, 'tests', 'tls', 'make-certs.sh'), dir], { stdio: 'ignore' });
  if (r.status !== 0) throw new Error('tests/tls/make-certs.sh failed');
  return dir;
}

module.exports = { Daemon, Relay, ADMIN_PASSWORD, makeCerts, waitUntil, within, aborted, freePort };
