-- Fence write-back: raise the counter to ARGV[1] unless it is higher
-- already (set-if-greater); never lowers it.  KEYS[2], when given, is
-- the grant's label, whose fence field then becomes ARGV[1] (its expiry
-- kept), so that readers see the fence the holder was told, and the
-- grant is announced to watchers of the name ARGV[2] when anyone watches.
-- uses prelude.lua
-- in the batch

if KEYS[2] then
  local l = redis.pcall('GET', KEYS[2])
  local g, t = string.match(type(l) == 'string' and l or '', '^(%d+) [%d%-]+ (.+)$')
  local p = redis.call('PTTL', KEYS[2])
  if g and p > 0 then
    redis.call('SET', KEYS[2], g .. ' ' .. ARGV[1] .. ' ' .. t, 'PX', p)
    rl_announce(ARGV[2], '+')
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
return 1
