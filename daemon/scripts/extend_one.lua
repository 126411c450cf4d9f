-- Extend one lease by its token: KEYS[1] the name's key (ARGV[3] '?':
-- whichever record holds the token) or the record's key (ARGV[3] its
-- kind, ARGV[4] a permit's limit key; ARGV[5] '0' when the holder has
-- no label to extend with it).  Compare-and-PEXPIRE, answering
-- the PTTL the record had before (-1: no expiry), or -3 when it is not
-- ours.  Never creates a record: one that is gone stays gone.
-- uses prelude.lua
-- in the batch

local c, k, aux = ARGV[3], KEYS[1], ARGV[4] or ''
if c == '?' then c, k, aux = rl_find(KEYS[1], ARGV[1]) end
if rl_state(c, k, ARGV[1]) ~= 1 then return -3 end
local left = redis.call('PTTL', k)
if c == 's' then
  left = math.floor(tonumber(redis.call('ZSCORE', k, ARGV[1])) - rl_now())
end
rl_expire(c, k, ARGV[1], tonumber(ARGV[2]), aux, ARGV[5] ~= '0')
return left
