-- Every script begins with this prelude: the three kinds of record a
-- holder has on a master (redlock.h, enum redlock_kind), read and
-- written one way everywhere.  c is the kind's letter, k the record's
-- key, tok the holder's token, aux a counted name's limit key ('' for
-- the other kinds).  The name's key itself is whatever kind holds the
-- name, so that one SET NX on it tells an exclusive request that no
-- other kind is there: a string, the exclusive holder's token; a sorted
-- set, the shared holders, each a member whose score is its expiry on
-- the master's clock (ms, from TIME, the clock PX uses), the set
-- expiring no sooner than its last member; a hash, a counted name's
-- limit key (aux is then the name's key): field limit, the limit, and a
-- field named after each permit that may be alive on this master (set
-- with the permit; removed when the permit is released, or found gone
-- by a release).  The limit key expires no sooner than any of its
-- permits and is deleted with its last permit field, so a master
-- without it holds no permit of the name; no script has to read all the
-- permits to know that.  The permits are keys of their own, k = the
-- name's key + ' permit <i>'.

-- Whether any daemon watches a name anywhere: each daemon with a WATCH
-- is subscribed to RL_WATCHING on every master (daemon/watch.c).  Read
-- once per script call, and only by a script about to announce, so that
-- a lock nobody watches announces nothing.
local rl_watching = nil
local function rl_watched()
  if rl_watching == nil then
    rl_watching = redis.call('PUBSUB', 'NUMSUB', RL_WATCHING)[2] > 0
  end
  return rl_watching
end
-- Tell watchers of the name base: msg on its changes channel.
local function rl_announce(base, msg)
  if rl_watched() then redis.call('PUBLISH', base .. RL_CHANGED, msg) end
end

-- The master's TIME in ms, read once per script (daemon/master.h,
-- rl_clock_us).
local function rl_now()
  if not rl_clock_us then
    local t = redis.call('TIME')
    rl_clock_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return math.floor(rl_clock_us / 1000)
end
local function rl_str(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'string' then return v end
  return nil
end
local function rl_raise(k, ms)
  local p = redis.call('PTTL', k)
  if p >= 0 and p < ms then redis.call('PEXPIRE', k, ms) end
end
local function rl_limit(base)
  local v = redis.pcall('HGET', base, 'limit')
  if type(v) == 'string' then return v end
  return nil
end
-- A limit as a number of permits, or nil when it is not one (a key written by
-- hand).
local function rl_limit_n(v)
  local n = tonumber(v or '')
  if n and n >= 1 and n <= RL_LIMIT_MAX and n == math.floor(n) then
    return n
  end
  return nil
end
-- Permit k was written: the limit key names it and lives as long.
local function rl_mark(aux, k, limit, ms)
  redis.call('HSET', aux, 'limit', limit, string.match(k, '(%d+)$'), 1)
  if redis.call('PTTL', aux) < ms then redis.call('PEXPIRE', aux, ms) end
end
-- Permit k is gone from this master: so is its field, and the limit key with
-- the last.  A limit key that is no hash any more (written over by hand)
-- has nothing to unmark.
local function rl_unmark(aux, k)
  if type(redis.pcall('HDEL', aux, string.match(k, '(%d+)$'))) ~= 'number' then return end
  if redis.call('HLEN', aux) <= 1 then redis.call('DEL', aux) end
end
-- Permits of base (limit n) alive on this master: O(n), for a kind in doubt
-- only.
local function rl_permits(base, n)
  local keys = {}
  for i = 0, n - 1 do keys[i + 1] = base .. ' permit ' .. i end
  return redis.call('EXISTS', unpack(keys))
end
local function rl_readers(sk)
  if redis.call('TYPE', sk).ok ~= 'zset' then return 0 end
  return redis.call('ZCOUNT', sk, '(' .. rl_now(), '+inf')
end
-- 1: tok holds the record here; 0: someone else's; 2: absent
local function rl_state(c, k, tok)
  if c == 's' then
    if redis.call('TYPE', k).ok ~= 'zset' then
      if redis.call('EXISTS', k) == 1 then return 0 end
      return 2
    end
    local s = redis.call('ZSCORE', k, tok)
    if s and tonumber(s) > rl_now() then return 1 end
    return 2
  end
  if redis.pcall('GET', k) == tok then return 1 end
  if redis.call('EXISTS', k) == 1 then return 0 end
  return 2
end
-- Write tok's record to expire in ms; a permit marks its limit key.
local function rl_set(c, k, tok, ms, aux, limit)
  if c == 's' then
    local now = rl_now()
    redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
    redis.call('ZADD', k, now + ms, tok)
    if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
  else
    redis.call('SET', k, tok, 'PX', ms)
  end
  if aux ~= '' then rl_mark(aux, k, limit, ms) end
end
-- Set the expiry of a record tok holds, and of its label when it may
-- have one (label true; never creates one).
local function rl_expire(c, k, tok, ms, aux, label)
  if c == 's' then
    redis.call('ZADD', k, 'XX', rl_now() + ms, tok)
    rl_raise(k, ms)
  else
    redis.call('PEXPIRE', k, ms)
  end
  if label then redis.call('PEXPIRE', k .. ' label ' .. tok, ms) end
  if aux ~= '' then rl_raise(aux, ms) end
end
-- The label of tok's record k as "<age ms> <fence> <text>", or nil when it
-- wrote none; the fence is '-' while a fenced grant's write-back is to come.
local function rl_info(k, tok)
  if not tok then return nil end
  local v = rl_str(k .. ' label ' .. tok)
  local g, f, l = string.match(v or '', '^(%d+) ([%d%-]+) (.+)$')
  if not g then return nil end
  local age = rl_now() - tonumber(g)
  if age < 0 then age = 0 end
  return age .. ' ' .. f .. ' ' .. l
end
-- Not granted: a request that waits (wait not '0') marks the name base
-- as waited for, for the holder's time left (out[1]) plus ms.
local function rl_refused(base, ms, wait, out)
  if wait ~= '0' then
    local p = tonumber(out[1]) or 0
    if p < 0 then p = 0 end
    redis.call('SET', base .. RL_WAITING, '1', 'PX', p + ms)
  end
  return out
end
-- The counted name's limit on the name's key (a hash) when it is not
-- limit: its kind while a permit of it is alive here, else it is a
-- leftover (permits that expired by themselves) and goes.  nil: free.
local function rl_other_limit(base, limit)
  local have = rl_limit(base)
  if not have or have == limit then return nil end
  local hn = rl_limit_n(have)
  if not hn or rl_permits(base, hn) > 0 then return 'limit=' .. have end
  redis.call('DEL', base)
  return nil
end
-- Live shared holders of base keep an exclusive request out: {left, who}
-- of the one whose hold ends last.  A set of expired holders is a
-- leftover and goes (nil).
local function rl_last_reader(base)
  if rl_readers(base) > 0 then
    local last = redis.call('ZRANGE', base, -1, -1, 'WITHSCORES')
    local left = math.floor(tonumber(last[2]) - rl_now())
    if left < 0 then left = 0 end
    return {left, last[1]}
  end
  redis.call('DEL', base)
  return nil
end
-- The name's key of record k (kind c, a permit's limit key aux).
local function rl_base(c, k, aux)
  if c == 'p' then return aux end
  return k
end
-- Delete tok's record, and its label when it may have one (label true).
-- The last permit takes the limit along.  Answers 0 when tok did not
-- hold it, 1 when deleted, 2 when deleted and a refused request had
-- marked the name as waited for (its key + RL_WAITING, set by
-- acquire.lua; deleted here with the record, in the same command), so
-- that the release announces only when someone waits.
local function rl_delete(c, k, tok, aux, label)
  local st = rl_state(c, k, tok)
  if label then redis.call('DEL', k .. ' label ' .. tok) end
  if st ~= 1 then
    if c == 's' and st == 2 then redis.call('ZREM', k, tok) end
    if c ~= 's' and st == 2 and aux ~= '' then rl_unmark(aux, k) end
    return 0
  end
  local wk = rl_base(c, k, aux) .. RL_WAITING
  local n
  if c == 's' then
    redis.call('ZREM', k, tok)
    redis.call('ZREMRANGEBYSCORE', k, '-inf', rl_now())
    n = redis.call('DEL', wk) + 1
  else
    n = redis.call('DEL', k, wk)
  end
  if aux ~= '' then rl_unmark(aux, k) end
  return n
end
-- The record of the name base that tok holds, whatever its kind: c, k, aux.
local function rl_find(base, tok)
  if redis.pcall('GET', base) == tok then return 'x', base, '' end
  if rl_state('s', base, tok) == 1 then return 's', base, '' end
  local n = rl_limit_n(rl_limit(base))
  if n then
    for i = 0, n - 1 do
      local k = base .. ' permit ' .. i
      if redis.pcall('GET', k) == tok then return 'p', k, base end
    end
  end
  return 'x', base, ''
end

-- Lock-delay (PROTOCOL.md section 9).  A hold that ended without UNLOCK
-- leaves the name's key holding RL_DELAY_MARK .. its token, for the
-- delay it asked for: every SET NX fails on it, so a request that does
-- not ask pays nothing to honour it, and Redlock libraries and older
-- daemons see a holder and wait too.  The ms left of that delay on the
-- name base, or nil when none is in force (a free name, a holder).
-- Call it where a request found base taken (its SET NX failed), or on
-- any name of a request that must not be granted during a delay.
local function rl_delayed(base)
  local v = rl_str(base)
  if v and string.sub(v, 1, #RL_DELAY_MARK) == RL_DELAY_MARK then
    return redis.call('PTTL', base)
  end
  return nil
end
-- The flags word of a record's holder ('0' .. '3'): bit 1, it may have a
-- label; bit 2, it asked for a lock-delay, kept in base .. RL_DELAY_KEY
-- as "<ms> <token>" with the record's expiry.  Two booleans.
local function rl_flags(f)
  local n = tonumber(f or '0') or 0
  return n % 2 == 1, n >= 2
end
-- The hold tok of base (an exclusive record) ended without UNLOCK: its
-- stored delay, if any ("<ms> <tok>" at base .. RL_DELAY_KEY), as ms, or
-- nil.  The key goes with the hold either way.
local function rl_hold_delay(base, tok)
  local v = rl_str(base .. RL_DELAY_KEY)
  if not v then return nil end
  local ms, who = string.match(v, '^(%d+) (.+)$')
  if who ~= tok then return nil end
  redis.call('DEL', base .. RL_DELAY_KEY)
  return tonumber(ms)
end
-- Start the delay of the hold tok on base, ms long: only where the name's
-- key is free now (its record was just deleted, or is gone).
local function rl_delay(base, tok, ms)
  if ms and ms > 0 then
    redis.call('SET', base, RL_DELAY_MARK .. tok, 'NX', 'PX', ms)
  end
end
