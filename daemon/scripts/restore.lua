-- Restore: put records back where a master lost them, only where
-- absent, each with its own expiry: KEYS[i] gets token ARGV[5i-4] for
-- ARGV[5i-3] ms, kind ARGV[5i-2], limit key ARGV[5i-1] and limit
-- ARGV[5i] for a permit.  A shared holder's member goes back only where
-- the name's key holds shared holders or nothing, a permit only where it
-- holds the name's limit or nothing.  Answers how many were set.
-- uses prelude.lua

-- Where a record may go back: a shared holder's member where the name's
-- key holds shared holders or nothing, a permit where the name's key
-- holds this limit or nothing, an exclusive key where it is free.
local function room(c, k, tok, aux, limit)
  if c == 's' then return rl_state('s', k, tok) == 2 end
  if c == 'p' and redis.call('EXISTS', aux) == 1 and rl_limit(aux) ~= limit then
    return false
  end
  return redis.call('EXISTS', k) == 0
end
local n = 0
for i = 1, #KEYS do
  local k, tok, ms, c = KEYS[i], ARGV[5 * i - 4], tonumber(ARGV[5 * i - 3]), ARGV[5 * i - 2]
  local aux, limit = ARGV[5 * i - 1], ARGV[5 * i]
  if c ~= 'p' then aux = '' end
  if room(c, k, tok, aux, limit) then
    rl_set(c, k, tok, ms, aux, limit)
    n = n + 1
  end
end
return n
