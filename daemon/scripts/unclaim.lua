-- Unclaim: drop a set's claims (acquire_set.lua) once it was granted or
-- gave up.  KEYS: the set's names' keys; ARGV: the claim's value
-- (RL_CLAIM_MARK .. the set's id), and '1' to announce.  Each key that
-- still holds the claim is deleted with the name's waiters' mark, and
-- when there was one (a request the claim refused waits), the release
-- is announced on the name's channel with the claim as the token, as
-- release.lua announces a holder's; keys that hold anything else are
-- left alone.  Answers how many claims it dropped.
-- uses prelude.lua
-- in the batch

local n = 0
for i = 1, #KEYS do
  local k = KEYS[i]
  if rl_str(k) == ARGV[1] then
    n = n + 1
    if redis.call('DEL', k, k .. RL_WAITING) == 2 and ARGV[2] == '1' then
      redis.call('PUBLISH', k .. RL_RELEASED, ARGV[1])
    end
  end
end
return n
