-- Break: end every hold of the name KEYS[1], whoever holds it.  Deletes
-- the exclusive key, every permit and the limit key, every shared
-- holder, the gate, and their labels; raises the name's fence counter
-- (and the counter of each permit that was held) by one, whatever it
-- was; announces each deleted holder's token on the name's channel
-- ARGV[1] (as a release, so that waiters everywhere try at once), its
-- changes channel (for watchers, when anyone watches), and
-- the key with every deleted token on the daemons' channel ARGV[2], so
-- that a daemon whose session held one tells it LOST.  Answers {holders
-- deleted, the name's counter after the raise, the first holder's
-- label as "<age> <fence> <text>" or '', the limit of a counted name or
-- 0}, or an error naming a counter that is not an integer, checked
-- first: that master then changes nothing.  An exclusive holder that
-- asked for a lock-delay (its "<ms> <token>" next to the name's key,
-- written at grant) leaves the delay mark for that long, as if its
-- session had closed; a delay already in force is not a holder, and
-- stays.
-- uses prelude.lua

local base, chan, bchan = KEYS[1], ARGV[1], ARGV[2]
local toks, first, permits = {}, nil, {}
-- First the counters: one that is not an integer changes nothing here.
local function counter_ok(k)
  local v = redis.pcall('GET', k)
  return not v or (type(v) == 'string' and tonumber(v) ~= nil)
end
if not counter_ok(base .. ' fence') then
  return redis.error_reply('fence counter ' .. base .. ' fence is not an integer')
end
local n = rl_limit_n(rl_limit(base))
if n then
  for i = 0, n - 1 do
    local k = base .. ' permit ' .. i
    if redis.call('EXISTS', k) == 1 then
      if not counter_ok(k .. ' fence') then
        return redis.error_reply('fence counter ' .. k .. ' fence is not an integer')
      end
      permits[#permits + 1] = k
    end
  end
end
local function gone(k, tok)
  if tok then
    first = first or rl_info(k, tok)
    redis.call('DEL', k .. ' label ' .. tok)
    toks[#toks + 1] = tok
  end
end
local t = redis.call('TYPE', base).ok
local delay, mark = nil, rl_delayed(base)
if t == 'zset' then
  local m = redis.call('ZRANGEBYSCORE', base, '(' .. rl_now(), '+inf')
  for i = 1, #m do gone(base, m[i]) end
elseif t ~= 'none' and not n and not mark then
  local who = rl_str(base)
  gone(base, who)
  -- The lock-delay the holder asked for (kept at grant) starts now.
  if who then delay = rl_hold_delay(base, who) end
  if delay then delay = {delay, who} end
end
if mark then
  -- A delay in force is no holder: it stays, and so does the key.
  redis.call('DEL', base .. ' gate')
else
  redis.call('DEL', base, base .. ' gate')
end
if delay then rl_delay(base, delay[2], delay[1]) end
for i = 1, #permits do
  gone(permits[i], rl_str(permits[i]))
  redis.call('DEL', permits[i])
  redis.call('INCR', permits[i] .. ' fence')
end
local f = redis.call('INCR', base .. ' fence')
for i = 1, #toks do redis.call('PUBLISH', chan, toks[i]) end
if #toks > 0 then rl_announce(base, '!') end
if #toks > 0 then redis.call('PUBLISH', bchan, base .. ' ' .. table.concat(toks, ' ')) end
return {#toks, f, first or '', n or 0}
