// Types of the redlockd client (index.js).  The words and error codes are
// the daemon's protocol's (proto/PROTOCOL.md in the redlockd tree).

export interface ConnectOptions {
  /** Sent with AUTH first; else $REDLOCKD_PASSWORD. */
  password?: string;
  /** TLS: true, or options for tls.connect. */
  tls?: boolean | import('node:tls').ConnectionOptions;
  /** PEM files: the CA the daemon's certificate chains to, a client certificate and its key. */
  ca?: string;
  cert?: string;
  key?: string;
  /** Connecting, and each reply that is no wait for a lock, ms (default 10000). */
  timeoutMs?: number;
}

export interface LockOptions {
  /** ms to wait; 0: one try (Busy when held); default: for ever. */
  timeout?: number;
  /** Lease in ms (the daemon renews a session-mode lock). */
  ttl?: number;
  shared?: boolean;
  limit?: number;
  fence?: boolean;
  label?: string;
  /** Lock-delay, ms: nobody is granted the name for that long after the hold ends without a release (default: the daemon's lock.delay_ms; 0: none). */
  delay?: number;
}

/** The answer of check(): current with its ttl (ms, -1: no expiry), or stale and why. */
export type Checked =
  | { current: true; ttl: number }
  | { current: false; reason: 'free' | 'other' | 'mixed' };

export type LostReason = 'renew' | 'quorum' | 'gone' | 'shutdown' | 'broken' | 'connection';

export class Lock {
  readonly name: string;
  readonly validity: number;
  /** The session's holds on this name (a lock taken again adds one); 0 once this one is released or lost. */
  readonly holds: number;
  readonly fence?: number;
  readonly permit?: number;
  /** Aborts, with the LostReason, when the lock is lost. */
  readonly signal: AbortSignal;
  readonly lost: boolean;
  readonly lostReason: LostReason | null;
  /** UNLOCK one hold; NotHeld when it was lost. */
  release(): Promise<void>;
}

/** A session-mode hold of several names at once (acquireMany): one hold, lost whole. */
export class LockSet extends Lock {
  /** The names, in the order given. */
  readonly names: string[];
  /** Their fencing tokens, in the order of names (with fence). */
  readonly fences?: number[];
}

/** Options of a set: those of a single lock but shared and limit. */
export type SetOptions = Omit<LockOptions, 'shared' | 'limit'>;

export interface LeaseSet {
  names: string[];
  token: string;
  validity: number;
  fences?: number[];
}

export interface Lease {
  name: string;
  token: string;
  validity: number;
  fence?: number;
}

export interface WatchEvent {
  name: string;
  held: boolean;
  fields: Record<string, string | number>;
}

export class Client {
  /**
   * Without an address: $REDLOCKD_SOCKET, else $REDLOCKD_ADDR, else the Unix
   * socket defaults.socket when a connection to it succeeds, else
   * defaults.address, as redlockctl does (with TLS: $REDLOCKD_ADDR, else
   * defaults.address).  Arguments out of the protocol's bounds (NAME_MAX,
   * LABEL_MAX, TOKEN_LEN, LIMIT_MAX, TTL_MAX) reject with a TypeError
   * naming the bound, before anything is sent.
   */
  static connect(address?: string, opts?: ConnectOptions): Promise<Client>;
  /** Where the client connected. */
  readonly address: string;
  readonly closed: boolean;
  acquire(name: string, opts?: LockOptions): Promise<Lock>;
  using<T>(name: string, opts: LockOptions, fn: (signal: AbortSignal, lock: Lock) => Promise<T>): Promise<T>;
  using<T>(name: string, fn: (signal: AbortSignal, lock: Lock) => Promise<T>): Promise<T>;
  lease(name: string, opts: LockOptions & { ttl: number }): Promise<Lease>;
  /** Every name of names (1 to SET_MAX, none twice), all or none. */
  acquireMany(names: string[], opts?: SetOptions): Promise<LockSet>;
  usingMany<T>(names: string[], opts: SetOptions, fn: (signal: AbortSignal, lock: LockSet) => Promise<T>): Promise<T>;
  usingMany<T>(names: string[], fn: (signal: AbortSignal, lock: LockSet) => Promise<T>): Promise<T>;
  leaseMany(names: string[], opts: SetOptions & { ttl: number }): Promise<LeaseSet>;
  /** name: a name, or the names of a LeaseSet (any order). */
  extend(name: string | string[], token: string, ttl: number): Promise<number>;
  release(name: string | string[], token: string): Promise<void>;
  /** null when free; a name kept by a lock-delay: { state: 'FREE', delayed: ms }. */
  status(name: string, opts?: { token?: string }): Promise<Record<string, string | number> | null>;
  /** Is the grant told fence (and permit) on name, or the lease of token, still current? */
  check(name: string, grant: { fence: number; permit?: number } | { token: string }): Promise<Checked>;
  list(prefix?: string): Promise<Array<Record<string, string | number>>>;
  stats(): Promise<Record<string, string | number>>;
  ping(): Promise<boolean>;
  breakLock(name: string): Promise<string[]>;
  watch(name: string): AsyncIterableIterator<WatchEvent>;
  close(): void;
}

export function connect(address?: string, opts?: ConnectOptions): Promise<Client>;

/** Where connect() goes without an address or environment, in this order. */
export const defaults: { socket: string; address: string };
/** Bytes of a lock name, a LIST prefix, a password (250). */
export const NAME_MAX: number;
/** Bytes of a holder label (64). */
export const LABEL_MAX: number;
/** Lowercase hex digits of a lease's token (32). */
export const TOKEN_LEN: number;
/** Permits of a counted hold (1000). */
export const LIMIT_MAX: number;
/** ms: the largest ttl the protocol reads (4000000000000). */
export const TTL_MAX: number;
/** Names of one set (64). */
export const SET_MAX: number;

export class RedlockdError extends Error {
  readonly code: string;
  readonly text: string;
}
export class Busy extends RedlockdError {
  /** The holder's time left, ms. */
  readonly ttl?: number;
  /** A lock-delay's time left, ms (BUSY ... delayed=MS); undefined when a holder refused. */
  readonly delayed?: number;
}
export class Timeout extends RedlockdError {}
export class NotHeld extends RedlockdError {}
export class NoQuorum extends RedlockdError {}
export class Denied extends RedlockdError {}
export class ProtocolError extends RedlockdError {}
export class LimitError extends RedlockdError {}
export class AuthError extends RedlockdError {}
export class KindError extends RedlockdError {}
export class ShuttingDown extends RedlockdError {}
export class ConnectionLost extends RedlockdError {}
