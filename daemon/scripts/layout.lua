-- Layout registry (daemon/layout.h): KEYS[1], a sorted set with one
-- member per daemon that used these masters, "id layout oldest since
-- window release host", scored by the end of its window (seen + window,
-- this master's clock, ms).  ARGV[1]: the caller's id ('' for a probe,
-- which writes nothing); ARGV[2]: its "layout oldest since window";
-- ARGV[3]: its "release host"; ARGV[4]: the channel that daemons older
-- than the registry subscribe; ARGV[5]: the "layout oldest since window"
-- entered for them, with the id 'legacy', while any is subscribed here.
-- A member whose window has ended is deleted, and the set expires with
-- its last window; a member this script cannot read is left for the
-- daemons to report.  Only commands that the ACL of docs/production.md
-- already allows.  Answers {TIME's seconds, TIME's microseconds, id,
-- "layout oldest since window seen release host", id, ...}: the clock
-- check (daemon/health.h) reads the TIME as the clock keeper's.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
local old = redis.call('ZRANGE', KEYS[1], 0, -1)
local function put(id, head, tail)
  local member = id .. ' ' .. head .. ' ' .. tail
  for i = 1, #old do
    if old[i] ~= member and string.sub(old[i], 1, #id + 1) == id .. ' ' then
      redis.call('ZREM', KEYS[1], old[i])
    end
  end
  local w = tonumber(string.match(head, ' (%d+)$'))
  redis.call('ZADD', KEYS[1], now + w, member)
end
if ARGV[1] ~= '' then
  put(ARGV[1], ARGV[2], ARGV[3])
end
local subs = redis.call('PUBSUB', 'NUMSUB', ARGV[4])
if tonumber(subs[2]) > 0 then
  put('legacy', ARGV[5], '<0.2.0 -')
end
local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
if #all > 0 then
  redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(all[#all]) - now + 1))
end
local out = {t[1], t[2]}
for i = 1, #all, 2 do
  local id, head, w, rest = string.match(all[i], '^(%S+) (%d+ %d+ %d+ (%d+)) (.*)$')
  if id then
    out[#out + 1] = id
    out[#out + 1] = head .. ' ' .. (tonumber(all[i + 1]) - tonumber(w)) .. ' ' .. rest
  else
    out[#out + 1] = string.match(all[i], '^(%S*)') or ''
    out[#out + 1] = all[i]
  end
end
return out
