-- Check: is one grant the current holder of the name KEYS[1] here?  A
-- read: it writes nothing.  By token (ARGV[1], ARGV[2] ''): the record
-- that holds that token, whatever its kind (rl_find; O(limit) for a
-- counted name).  By fence (ARGV[2], ARGV[1] ''): the holder of the
-- record (the exclusive key; permit ARGV[3] of a counted name when it
-- is not ''; else any live shared holder) whose field in the record's
-- fences hash (the record's key + ' fenced', written by fence.lua's
-- write-back where the record held that grant's token, and by nothing
-- else) is that fence, and, for an exclusive key or a permit, whose
-- counter is still that fence.  A holder with no field there (a grant without a
-- fence, a record put back by a restore, a grant of a daemon before
-- CHECK) is someone else's as far as this master can tell.  Answers
-- {state, pttl, limit}: state 1 the grant holds its record here (pttl:
-- its time left there, -1 for none); 0 someone else holds the name (or
-- the permit asked about); 2 nobody holds it here; 3 (by fence, without
-- a permit) the name is counted, limit being its limit.
-- uses prelude.lua
-- in the batch

local base, tok, fence, permit = KEYS[1], ARGV[1], ARGV[2], ARGV[3] or ''
-- Whether anyone holds the name here, whatever its kind.
local function anyone()
  local t = redis.call('TYPE', base).ok
  if t == 'none' then return false end
  if t == 'zset' then return rl_readers(base) > 0 end
  if t == 'hash' then
    local n = rl_limit_n(rl_limit(base))
    if n then return rl_permits(base, n) > 0 end
  end
  return true
end
-- Record k's holder who was told fence, and no fenced grant or BREAK of
-- the record has raised its counter (k .. ' fence') since: so a token
-- that holds the record again (written back by hand, or by a Redlock
-- library given a lease's token) after a later grant is not current.
local function fenced(k, who)
  return redis.pcall('HGET', k .. ' fenced', who) == fence
         and redis.pcall('GET', k .. ' fence') == fence
end
if fence == '' then
  local c, k = rl_find(base, tok)
  if rl_state(c, k, tok) == 1 then
    if c == 's' then
      return {1, math.floor(tonumber(redis.call('ZSCORE', k, tok)) - rl_now()), 0}
    end
    return {1, redis.call('PTTL', k), 0}
  end
  if anyone() then return {0, 0, 0} end
  return {2, 0, 0}
end
if permit ~= '' then
  local k = base .. ' permit ' .. permit
  local who = rl_str(k)
  if who and fenced(k, who) then return {1, redis.call('PTTL', k), 0} end
  if who or anyone() then return {0, 0, 0} end
  return {2, 0, 0}
end
local t = redis.call('TYPE', base).ok
if t == 'none' then return {2, 0, 0} end
if t == 'string' then
  if fenced(base, redis.call('GET', base)) then return {1, redis.call('PTTL', base), 0} end
  return {0, 0, 0}
end
if t == 'zset' then
  local now = rl_now()
  local m = redis.call('ZRANGEBYSCORE', base, '(' .. now, '+inf', 'WITHSCORES')
  if #m == 0 then return {2, 0, 0} end
  -- One HGET a holder: the ACL in docs/production.md has no HMGET.  Other
  -- shared holders raise the name's counter legitimately: it is not read.
  local best = -1
  for i = 1, #m, 2 do
    local left = math.floor(tonumber(m[i + 1]) - now)
    if redis.pcall('HGET', base .. ' fenced', m[i]) == fence and left > best then
      best = left
    end
  end
  if best >= 0 then return {1, best, 0} end
  return {0, 0, 0}
end
if t == 'hash' then
  local n = rl_limit_n(rl_limit(base))
  if n and rl_permits(base, n) > 0 then return {3, 0, n} end
  if n then return {2, 0, 0} end
end
return {0, 0, 0}
