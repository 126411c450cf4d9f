-- Layout registry (daemon/layout.h): KEYS[1], a hash with one field per
-- daemon that used these masters, its value "layout oldest since window
-- seen release host" (seen: this master's clock, ms).  ARGV[1]: the
-- caller's field ('' for a probe, which writes nothing); ARGV[2]: its
-- "layout oldest since window"; ARGV[3]: its "release host"; ARGV[4]:
-- the channel that daemons older than the registry subscribe; ARGV[5]:
-- the "layout oldest since window" entered for them as the field
-- 'legacy' while any is subscribed here.  Fields whose seen plus window
-- has passed are deleted; a field this script cannot read is left for
-- the daemons to report.  Answers {now ms, field, value, field, value...}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. now .. ' ' .. ARGV[3])
end
local subs = redis.call('PUBSUB', 'NUMSUB', ARGV[4])
if tonumber(subs[2]) > 0 then
  redis.call('HSET', KEYS[1], 'legacy', ARGV[5] .. ' ' .. now .. ' <0.2.0 -')
end
local all = redis.call('HGETALL', KEYS[1])
local out = {now}
for i = 1, #all, 2 do
  local w, s = string.match(all[i + 1], '^%d+ %d+ %d+ (%d+) (%d+) ')
  if w and now > tonumber(s) + tonumber(w) then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
