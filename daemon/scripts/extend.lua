-- Extend n records: compare-and-PEXPIRE each; never create one.  KEYS
-- are the records; ARGV per record: token, ttl, kind, a permit's limit
-- key ('' for the other kinds), the holder's flags (rl_flags: a label
-- and a stored lock-delay are extended with the record).  Per record: 1 extended, 0 someone
-- else's, 2 not there (a master that lost it, for redlock_restore).
-- uses prelude.lua

local out = {}
for i = 1, #KEYS do
  local a = 5 * (i - 1)
  local tok, c = ARGV[a + 1], ARGV[a + 3]
  local st = rl_state(c, KEYS[i], tok)
  if st == 1 then
    local label, delayed = rl_flags(ARGV[a + 5])
    rl_expire(c, KEYS[i], tok, tonumber(ARGV[a + 2]), ARGV[a + 4], label)
    if delayed and c == 'x' then
      redis.call('PEXPIRE', KEYS[i] .. RL_DELAY_KEY, tonumber(ARGV[a + 2]))
    end
  end
  out[i] = st
end
return out
