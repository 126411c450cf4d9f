-- Second raise of a BREAK, once no grant its first round broke can be
-- told a fence any more: the name's counter KEYS[1] becomes
-- max(counter, ARGV[1]) + 1 (ARGV[1]: the largest counter the first
-- round saw), and the counter of each permit of the name KEYS[2] below
-- ARGV[2] (the largest limit the first round found) that exists is
-- raised by one.  Answers the name's new counter, or an error naming a
-- counter that is not an integer (then nothing changes here).

local function num(k)
  local v = redis.pcall('GET', k)
  if not v then return 0 end
  if type(v) ~= 'string' or tonumber(v) == nil then
    return redis.error_reply('fence counter ' .. k .. ' is not an integer')
  end
  return tonumber(v)
end
local c = num(KEYS[1])
if type(c) == 'table' then return c end
local permits = {}
for i = 0, tonumber(ARGV[2]) - 1 do
  local k = KEYS[2] .. ' permit ' .. i .. ' fence'
  local v = num(k)
  if type(v) == 'table' then return v end
  if redis.call('EXISTS', k) == 1 then permits[#permits + 1] = k end
end
for i = 1, #permits do redis.call('INCR', permits[i]) end
if c < tonumber(ARGV[1]) then c = tonumber(ARGV[1]) end
redis.call('SET', KEYS[1], c + 1)
return c + 1
