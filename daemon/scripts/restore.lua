-- Restore: put records back where a master lost them, only where
-- absent, each with its own expiry: KEYS[i] gets token ARGV[5i-4] for
-- ARGV[5i-3] ms, kind ARGV[5i-2], limit key ARGV[5i-1] and limit
-- ARGV[5i] for a permit.  A shared holder's member goes back only where
-- no exclusive key is (ARGV[5i-1] is then the name's key).  Answers how
-- many were set.
-- uses prelude.lua

local n = 0
for i = 1, #KEYS do
  local k, tok, ms, c = KEYS[i], ARGV[5 * i - 4], tonumber(ARGV[5 * i - 3]), ARGV[5 * i - 2]
  if c == 's' then
    if rl_state('s', k, tok) == 2 and redis.call('EXISTS', ARGV[5 * i - 1]) == 0 then
      rl_set('s', k, tok, ms, '', '')
      n = n + 1
    end
  elseif redis.call('EXISTS', k) == 0 then
    rl_set(c, k, tok, ms, ARGV[5 * i - 1], ARGV[5 * i])
    n = n + 1
  end
end
return n
