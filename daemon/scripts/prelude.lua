-- Every script begins with this prelude: the three kinds of record a
-- holder has on a master (redlock.h, enum redlock_kind), read and
-- written one way everywhere.  c is the kind's letter, k the record's
-- key, tok the holder's token, aux a counted name's limit key ('' for
-- the other kinds).  A shared holder is a member of the sorted set k
-- whose score is its expiry on the master's clock (ms, from TIME, the
-- clock PX uses); the set itself expires no sooner than its last
-- member.  A counted name's limit key is a hash: field limit, the
-- limit, and a field named after each permit that may be alive on this
-- master (set with the permit; removed when the permit is released, or
-- found gone by a release).  It expires no sooner than any of its
-- permits and is deleted with its last permit field, so a master
-- without it holds no permit of the name; no script has to read all
-- the permits to know that.

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
  local v = redis.pcall('HGET', base .. ' limit', 'limit')
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
-- the last.
local function rl_unmark(aux, k)
  redis.call('HDEL', aux, string.match(k, '(%d+)$'))
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
-- Set the expiry of a record tok holds, and of its label (never creates one).
local function rl_expire(c, k, tok, ms, aux)
  if c == 's' then
    redis.call('ZADD', k, 'XX', rl_now() + ms, tok)
    rl_raise(k, ms)
  else
    redis.call('PEXPIRE', k, ms)
  end
  redis.call('PEXPIRE', k .. ' label ' .. tok, ms)
  if aux ~= '' then rl_raise(aux, ms) end
end
-- The label of tok's record k as {age ms, fence, text}, or nil when it wrote
-- none.
local function rl_info(k, tok)
  if not tok then return nil end
  local v = rl_str(k .. ' label ' .. tok)
  local g, f, l = string.match(v or '', '^(%d+) (%d+) (.+)$')
  if not g then return nil end
  local age = rl_now() - tonumber(g)
  if age < 0 then age = 0 end
  return age .. ' ' .. f .. ' ' .. l
end
-- Delete tok's record and label; 1 when it held it. The last permit takes the
-- limit along.
local function rl_delete(c, k, tok, aux)
  local st = rl_state(c, k, tok)
  redis.call('DEL', k .. ' label ' .. tok)
  if c == 's' then
    if st ~= 0 then
      redis.call('ZREM', k, tok)
      redis.call('ZREMRANGEBYSCORE', k, '-inf', rl_now())
    end
  else
    if st == 1 then redis.call('DEL', k) end
    if st ~= 0 and aux ~= '' then rl_unmark(aux, k) end
  end
  if st == 1 then return 1 end
  return 0
end
-- The record of the name base that tok holds, whatever its kind: c, k, aux.
local function rl_find(base, tok)
  if redis.pcall('GET', base) == tok then return 'x', base, '' end
  local sk = base .. ' shared'
  if rl_state('s', sk, tok) == 1 then return 's', sk, '' end
  local n = rl_limit_n(rl_limit(base))
  if n then
    for i = 0, n - 1 do
      local k = base .. ' permit ' .. i
      if redis.pcall('GET', k) == tok then return 'p', k, base .. ' limit' end
    end
  end
  return 'x', base, ''
end
