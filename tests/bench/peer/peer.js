'use strict';
/*
 * peer.js: the peer rows of `make bench` (tests/bench/README.md, "The
 * peer rows").  One Node.js program drives, with the same loop, either
 *
 *   --client redlockd         redlockd through its Node.js client
 *                             (clients/node): one connection per worker,
 *                             acquire(name, {limit}) and release(), that
 *                             is LOCK <name> wait=inf [limit=N] / UNLOCK
 *                             <name>, one reply line each
 *   --client redlock          node-redlock 5.0.0-beta.2 in this process:
 *                             one Redlock over five ioredis clients (one
 *                             per master), shared by every worker
 *   --client redis-semaphore  redis-semaphore 5.8.0's RedlockSemaphore
 *                             over the same five ioredis clients (needs
 *                             --limit)
 *
 * so that the client language is the same on both sides of a comparison.
 * Each of --workers workers loops acquire/release for --seconds:
 * --shape own gives each worker a name of its own, --shape one puts them
 * all on one name.  The clock starts once every connection is up and one
 * warm-up pair has loaded the scripts.  A pair counts when its release
 * was answered before the end of the run; acquire latency runs from
 * sending the acquire (or calling the library) to having it granted,
 * on process.hrtime.bigint().
 *
 * Output: one JSON line on stdout,
 *
 *   {"mode":"peer","client":...,"workers":W,"shape":...,"limit":N,
 *    "seconds":S,"pairs":P,"pairs_per_s":R,"p50_us":...,"p90_us":...,
 *    "p99_us":...,"max_us":...,"errors":E,"min_acq":A,"max_acq":B,
 *    "fairness":A/B}
 *
 * min_acq and max_acq are the fewest and most pairs of one worker.
 * Errors: a reply other than OK, a "! LOST" line, a closed socket (its
 * worker stops), a rejected acquire or release.
 * Exit status 0 when the run happened (errors are in the line), 1 when
 * it could not start, 2 on a usage error.  `node peer.js --check` exits
 * 0 when this Node.js is recent enough (NODE_MIN), else 1 with a line
 * saying so.
 *
 * The libraries come from the directory given by --modules (its
 * node_modules, installed from this directory's package-lock.json; see
 * tests/bench/README.md); --client redlockd needs none.
 */

const events = require('events');
const path = require('path');
const { createRequire } = require('module');

/*
 * The oldest Node.js that runs this program and its packages
 * (redis-semaphore calls AbortSignal.throwIfAborted, from Node.js 17.3).
 */
const NODE_MIN = 18;
/* The daemon's default ttl (lock.default_ttl_ms): the lease on both sides. */
const TTL_MS = 30000;
/* Deadline for every connection to be up. */
const CONNECT_MS = 10000;

const USAGE = 'usage: node peer.js --client redlockd|redlock|redis-semaphore ' +
    '[--workers N] [--shape own|one] [--limit N] [--seconds S] ' +
    '[--target HOST:PORT|/unix/path] [--masters HOST:PORT,...] [--modules DIR] ' +
    '[--retry-ms MS --jitter-ms MS]';

function usage(msg) {
    process.stderr.write(`peer.js: ${msg}\n${USAGE}\n`);
    process.exit(2);
}

function parseArgs(argv) {
    const o = { client: null, workers: 1, shape: 'own', limit: 0, seconds: 10,
                target: null, masters: [], modules: __dirname, retryMs: -1, jitterMs: -1 };

    for (let i = 0; i < argv.length; i += 2) {
        const key = argv[i], val = argv[i + 1];

        if (val === undefined) {
            usage(`${key} needs a value`);
        }
        switch (key) {
        case '--client': o.client = val; break;
        case '--workers': o.workers = parseInt(val, 10); break;
        case '--shape': o.shape = val; break;
        case '--limit': o.limit = parseInt(val, 10); break;
        case '--seconds': o.seconds = parseFloat(val); break;
        case '--target': o.target = val; break;
        case '--masters': o.masters = val.split(','); break;
        case '--modules': o.modules = path.resolve(val); break;
        case '--retry-ms': o.retryMs = parseInt(val, 10); break;
        case '--jitter-ms': o.jitterMs = parseInt(val, 10); break;
        default: usage(`unknown option ${key}`);
        }
    }
    if (!['redlockd', 'redlock', 'redis-semaphore'].includes(o.client)) {
        usage('--client is redlockd, redlock or redis-semaphore');
    }
    if (!(o.workers >= 1) || !(o.seconds > 0) || !(o.limit >= 0)
        || !['own', 'one'].includes(o.shape)) {
        usage('bad --workers, --seconds, --limit or --shape');
    }
    if (o.client === 'redlockd' && !o.target) {
        usage('--client redlockd needs --target');
    }
    if (o.client !== 'redlockd' && o.masters.length === 0) {
        usage(`--client ${o.client} needs --masters`);
    }
    if (o.client === 'redis-semaphore' && o.limit < 1) {
        usage('--client redis-semaphore needs --limit');
    }
    if ((o.retryMs !== -1 || o.jitterMs !== -1)
        && (o.client !== 'redlock' || !(o.retryMs >= 1) || !(o.jitterMs >= 0))) {
        usage('--retry-ms (>= 1) and --jitter-ms (>= 0) go together, with --client redlock');
    }
    if (o.client === 'redlock' && o.limit > 0) {
        usage('--client redlock takes no --limit (node-redlock has no counted lock)');
    }
    return o;
}

/* --check: exit 0 when this Node.js can run the rows, else say why on one line. */
if (process.argv[2] === '--check') {
    if (parseInt(process.versions.node, 10) < NODE_MIN) {
        process.stdout.write(`node ${process.version} is older than ${NODE_MIN}\n`);
        process.exit(1);
    }
    process.exit(0);
}

const opts = parseArgs(process.argv.slice(2));
const stats = { errors: 0, lat: [], perWorker: [] };
let deadline = 0n;     /* hrtime (ns) of the end of the run; 0 before it starts */
let stopping = false;

function now() {
    return process.hrtime.bigint();
}

function fail(msg) {
    process.stderr.write(`peer.js: ${msg}\n`);
    process.exit(1);
}

/* ---- redlockd: through its Node.js client, one connection per worker ---- */

/* The acquire and release of each worker of --client redlockd. */
function daemonSide(clients) {
    const o = opts.limit > 0 ? { limit: opts.limit } : {};

    return clients.map((c) => {
        const held = new Map();

        return {
            acquire: async (name) => {
                const lk = await c.acquire(name, o);

                lk.signal.addEventListener('abort', () => {
                    if (lk.lostReason !== 'connection' || !stopping) {
                        stats.errors++;     /* a "! LOST", or the socket gone */
                    }
                });
                held.set(name, lk);
            },
            release: async (name) => {
                const lk = held.get(name);

                held.delete(name);
                await lk.release();
            },
            broken: () => c.closed,
            close: () => c.close()
        };
    });
}

/* ---- the libraries: five ioredis clients shared by every worker ---- */

function connectMasters(req) {
    const Redis = req('ioredis');

    return opts.masters.map((m) => {
        const colon = m.lastIndexOf(':');

        /* ioredis defaults (noDelay: true among them). */
        return new Redis({ host: m.slice(0, colon), port: parseInt(m.slice(colon + 1), 10) });
    });
}

function ready(client) {
    if (client.status === 'ready') {
        return Promise.resolve();
    }
    return new Promise((resolve) => client.once('ready', resolve));
}

/*
 * node-redlock: library defaults (driftFactor 0.01, retryDelay 200 ms,
 * retryJitter 100 ms) except retryCount -1 on acquire, so that an
 * acquire waits (retries without end) instead of giving up after 10
 * retries; the release keeps the default retryCount.  --retry-ms and
 * --jitter-ms set retryDelay and retryJitter instead (a user who tuned
 * the library for a contended name).
 */
function redlockSide(req, clients) {
    const Redlock = req('redlock').default;
    const redlock = new Redlock(clients, opts.retryMs >= 1
        ? { retryDelay: opts.retryMs, retryJitter: opts.jitterMs } : {});
    const workers = [];

    for (let i = 0; i < opts.workers; i++) {
        let lock = null;

        workers.push({
            acquire: async (name) => {
                lock = await redlock.acquire([name], TTL_MS, { retryCount: -1 });
            },
            release: async () => {
                const l = lock;

                lock = null;
                await l.release();
            },
            broken: () => false,
            close: () => {}
        });
    }
    return workers;
}

/*
 * redis-semaphore: one RedlockSemaphore per worker and name, reused for
 * every pair; library defaults (lockTimeout 10000 ms, refreshInterval 8000 ms,
 * retryInterval 10 ms, acquireAttemptsLimit Infinity) except
 * acquireTimeout Infinity (default 10000 ms), so that an acquire waits
 * however long it takes; the end of the run aborts the acquires still
 * waiting.
 */
function semaphoreSide(req, clients, abort) {
    const { RedlockSemaphore } = req('redis-semaphore');
    const workers = [];

    for (let i = 0; i < opts.workers; i++) {
        const sems = new Map();     /* name -> this worker's RedlockSemaphore */

        workers.push({
            acquire: async (name) => {
                if (!sems.has(name)) {
                    sems.set(name, new RedlockSemaphore(clients, name, opts.limit,
                                                        { acquireTimeout: Infinity,
                                                          acquireAttemptsLimit: Infinity }));
                }
                await sems.get(name).acquire(abort.signal);
            },
            release: async (name) => {
                await sems.get(name).release();
            },
            broken: () => false,
            close: () => {}
        });
    }
    return workers;
}

/* ---- the run ---- */

function nameOf(i) {
    const kind = opts.limit > 0 ? 'sem' : opts.shape === 'one' ? 'hot' : String(i);

    return `peer-${process.pid}-${kind}`;
}

/* A failed step: count it unless the run is over; false when the worker must stop. */
async function failed(w) {
    if (stopping) {
        return false;
    }
    stats.errors++;
    /* Let timers run (the end of the run) before the next try. */
    await new Promise((resolve) => setImmediate(resolve));
    return !w.broken();
}

async function worker(w, i) {
    const name = nameOf(i);

    stats.perWorker[i] = 0;
    while (!stopping) {
        const t0 = now();

        try {
            await w.acquire(name);
        } catch (e) {
            if (!await failed(w)) {
                break;
            }
            continue;
        }
        const t1 = now();

        if (t1 <= deadline) {
            stats.lat.push(Number(t1 - t0) / 1000);
        }
        try {
            await w.release(name);
        } catch (e) {
            if (!await failed(w)) {
                break;
            }
            continue;
        }
        if (now() <= deadline) {
            stats.perWorker[i]++;
        }
    }
}

function percentile(sorted, p) {
    if (sorted.length === 0) {
        return 0;
    }
    return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

function report(seconds) {
    const lat = Float64Array.from(stats.lat).sort();
    const pairs = stats.perWorker.reduce((a, b) => a + b, 0);
    const minAcq = Math.min(...stats.perWorker), maxAcq = Math.max(...stats.perWorker);
    const line = {
        mode: 'peer', client: opts.client, workers: opts.workers, shape: opts.shape,
        limit: opts.limit, seconds: Number(seconds.toFixed(3)), pairs,
        pairs_per_s: Math.round(pairs / seconds),
        p50_us: Math.round(percentile(lat, 0.50)), p90_us: Math.round(percentile(lat, 0.90)),
        p99_us: Math.round(percentile(lat, 0.99)),
        max_us: Math.round(lat.length > 0 ? lat[lat.length - 1] : 0),
        errors: stats.errors, min_acq: minAcq, max_acq: maxAcq,
        fairness: maxAcq > 0 ? Number((minAcq / maxAcq).toFixed(3)) : 0
    };

    process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function main() {
    const abort = new AbortController();
    let workers, clients = [];

    /* Every waiting semaphore acquire listens on the one signal of the run's end. */
    events.setMaxListeners(opts.workers + 10, abort.signal);

    const guard = setTimeout(() => fail(`not connected within ${CONNECT_MS} ms`), CONNECT_MS);

    if (opts.client === 'redlockd') {
        const redlockd = require(path.join(__dirname, '..', '..', '..', 'clients', 'node'));
        const conns = [];

        for (let i = 0; i < opts.workers; i++) {
            conns.push(await redlockd.connect(opts.target)
                .catch((e) => fail(`${opts.target}: ${e.message}`)));
        }
        workers = daemonSide(conns);
    } else {
        let req;

        try {
            req = createRequire(path.join(opts.modules, 'package.json'));
            req.resolve(opts.client);
        } catch (e) {
            fail(`${opts.client} is not installed under ${opts.modules} (npm ci there)`);
        }
        clients = connectMasters(req);
        await Promise.all(clients.map(ready));
        workers = opts.client === 'redlock' ? redlockSide(req, clients)
                                            : semaphoreSide(req, clients, abort);
    }
    clearTimeout(guard);

    /* One warm-up pair: the masters load the library's scripts (NOSCRIPT, EVAL). */
    try {
        await workers[0].acquire(`peer-${process.pid}-warm`);
        await workers[0].release(`peer-${process.pid}-warm`);
    } catch (e) {
        fail(`warm-up pair: ${e.message}`);
    }

    const start = now();

    deadline = start + BigInt(Math.round(opts.seconds * 1e9));
    workers.forEach((w, i) => { worker(w, i); });

    const atEnd = () => {
        const left = deadline - now();

        if (left > 0n) {
            setTimeout(atEnd, Math.ceil(Number(left) / 1e6));
            return;
        }
        stopping = true;
        abort.abort();
        report(Number(deadline - start) / 1e9);
        /* Locks still waited for or held go with the process (sockets closed, ttl). */
        workers.forEach((w) => w.close());
        for (const c of clients) {
            c.disconnect();
        }
        process.exit(0);
    };
    setTimeout(atEnd, Math.ceil(opts.seconds * 1000));
}

main().catch((e) => fail(e.stack || e.message));
