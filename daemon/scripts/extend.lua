-- Extend n records: compare-and-PEXPIRE each; never create one.  KEYS
-- are the records; ARGV per record: token, ttl, kind, a permit's limit
-- key ('' for the other kinds).  Per record: 1 extended, 0 someone
-- else's, 2 not there (a master that lost it, for redlock_restore).
-- uses prelude.lua

local out = {}
for i = 1, #KEYS do
  local tok, c = ARGV[4 * i - 3], ARGV[4 * i - 1]
  local st = rl_state(c, KEYS[i], tok)
  if st == 1 then
    rl_expire(c, KEYS[i], tok, tonumber(ARGV[4 * i - 2]), ARGV[4 * i])
  end
  out[i] = st
end
return out
