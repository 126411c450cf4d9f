-- Extend n records: compare-and-PEXPIRE each; never create one.  KEYS
-- are the records; ARGV per record: token, ttl, kind, a permit's limit
-- key ('' for the other kinds), '1' when the holder may have a label
-- (extended with it) else '0'.  Per record: 1 extended, 0 someone
-- else's, 2 not there (a master that lost it, for redlock_restore).
-- uses prelude.lua

local out = {}
for i = 1, #KEYS do
  local a = 5 * (i - 1)
  local tok, c = ARGV[a + 1], ARGV[a + 3]
  local st = rl_state(c, KEYS[i], tok)
  if st == 1 then
    rl_expire(c, KEYS[i], tok, tonumber(ARGV[a + 2]), ARGV[a + 4], ARGV[a + 5] ~= '0')
  end
  out[i] = st
end
return out
