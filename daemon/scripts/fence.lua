-- Fence write-back: raise the counter KEYS[1] to ARGV[1] unless it is
-- higher already (set-if-greater); never lowers it.  A BREAK's
-- write-back gives the counter alone and is answered 1.  A grant's
-- gives its record too: KEYS[2], with ARGV[2] its token and ARGV[3]
-- its kind's letter; the answer is then 1 where the record still holds
-- the token (rl_state), the grant confirmed here, and 0 where it does
-- not (a BREAK, an expiry or another holder took it since the raise):
-- the counter is still raised, the label left alone, and the daemon
-- counts this master against the grant.  A counter found above ARGV[1]
-- is no refusal: the raise's answers after its quorum, and other
-- shared holders, raise it legitimately.  KEYS[3], when given, is the
-- grant's label, whose fence field then becomes ARGV[1] (its expiry
-- kept) where the record holds, so that readers see the fence the
-- holder is told, and the grant is announced to watchers of the name
-- ARGV[4] when anyone watches.  Where the grant is confirmed here, its
-- fence is kept for CHECK (check.lua) in the hash <record> fenced, field
-- the token, value ARGV[1]: only a fenced grant writes it, a lock
-- without a fence costs nothing.  The hash has no expiry, like the
-- counter: a field whose token no longer holds the record answers
-- nothing.  An exclusive key's or a permit's hash keeps this grant's
-- field alone; a shared holder's keeps the fields of the live holders
-- too (O(holders), fenced shared grants only).
-- uses prelude.lua
-- in the batch

local held = 1
if KEYS[2] then
  held = rl_state(ARGV[3], KEYS[2], ARGV[2]) == 1 and 1 or 0
end
if KEYS[3] and held == 1 then
  local l = redis.pcall('GET', KEYS[3])
  local g, t = string.match(type(l) == 'string' and l or '', '^(%d+) [%d%-]+ (.+)$')
  local p = redis.call('PTTL', KEYS[3])
  if g and p > 0 then
    redis.call('SET', KEYS[3], g .. ' ' .. ARGV[1] .. ' ' .. t, 'PX', p)
    rl_announce(ARGV[4], '+')
  end
end
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  return redis.error_reply('fence counter ' .. KEYS[1] .. ' is not a string')
end
local c = 0
if v then
  c = tonumber(v)
  if c == nil then
    return redis.error_reply('fence counter ' .. KEYS[1] .. ' is not an integer')
  end
end
if c < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
if KEYS[2] and held == 1 then
  -- Only commands of the ACL in docs/production.md: no HKEYS, no HGETALL.
  local fk, keep = KEYS[2] .. ' fenced', {}
  if ARGV[3] == 's' and redis.call('TYPE', fk).ok == 'hash' then
    local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. rl_now(), '+inf')
    for i = 1, #live do
      local f = redis.call('HGET', fk, live[i])
      if f then
        keep[#keep + 1] = live[i]
        keep[#keep + 1] = f
      end
    end
  end
  redis.call('DEL', fk)
  keep[#keep + 1] = ARGV[2]
  keep[#keep + 1] = ARGV[1]
  redis.call('HSET', fk, unpack(keep))
end
return held
