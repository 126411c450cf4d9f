-- Raise: a fenced grant's counter, once the grant was won.  KEYS: the
-- counter, the record; ARGV: token, kind, a permit's limit key ('' for
-- the other kinds), '1' to announce (as release.lua's ARGV[2]).  Where
-- the record still holds the token, INCR the counter and answer its new
-- value; elsewhere answer 0 (nothing raised: a BREAK or an expiry took
-- the record).  A counter that is not an integer undoes the grant here
-- and answers an error naming the key; the undone grant is announced as
-- a release is (a waiter it refused must hear that it is gone).
-- in the batch
-- uses prelude.lua

if rl_state(ARGV[2], KEYS[2], ARGV[1]) ~= 1 then return 0 end
local v = redis.pcall('INCR', KEYS[1])
if type(v) ~= 'number' then
  local base = rl_base(ARGV[2], KEYS[2], ARGV[3])
  local gone = rl_delete(ARGV[2], KEYS[2], ARGV[1], ARGV[3], true)
  if gone == 2 and ARGV[4] == '1' then redis.call('PUBLISH', base .. RL_RELEASED, ARGV[1]) end
  if gone > 0 then rl_announce(base, ARGV[1]) end
  return redis.error_reply('fence counter ' .. KEYS[1] .. ' is not an integer')
end
return v
