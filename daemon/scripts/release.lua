-- Release: compare-and-delete, answering 1 when deleted.  KEYS[1] is
-- the name's key (ARGV[3] '?': whichever record holds the token) or the
-- record's key (ARGV[3] its kind, ARGV[4] a permit's limit key).
-- ARGV[5] is '1' when the holder may have written a label (it is then
-- deleted too; '0' saves the command).  With ARGV[2] '1', a deletion
-- that finds the name marked as waited for (rl_delete) is announced on
-- the name's release channel with the released token (dead from now
-- on) as the message, so that waiters elsewhere try at once and can
-- tell the masters' copies of one announcement apart from a new one;
-- nobody waits, nothing is published.  Every deleted record (announced
-- or not: a failed grant's clean-up too) is told to watchers on the
-- name's changes channel, when anyone watches (rl_announce).  ARGV[5]
-- is the holder's flags (rl_flags: '2' or '3' when it asked for a
-- lock-delay, whose stored delay goes with it).  ARGV[6], when given,
-- is a lock-delay in ms to start on an exclusive name (its holder ended
-- without UNLOCK): the key gets the delay mark wherever it is free after
-- the delete, whether the record was ours there or was already gone
-- (a lost hold), never over someone else's record.
-- uses prelude.lua
-- in the batch

local c, k, aux = ARGV[3], KEYS[1], ARGV[4] or ''
if c == '?' then c, k, aux = rl_find(KEYS[1], ARGV[1]) end
local label, delayed = rl_flags(ARGV[5])
local gone = rl_delete(c, k, ARGV[1], aux, label)
local delay = tonumber(ARGV[6] or '')
if delayed and c == 'x' then rl_hold_delay(k, ARGV[1]) end
if delay and c == 'x' then rl_delay(k, ARGV[1], delay) end
if gone == 0 then return 0 end
local base = rl_base(c, k, aux)
if gone == 2 and ARGV[2] == '1' then
  redis.call('PUBLISH', base .. RL_RELEASED, ARGV[1])
end
rl_announce(base, ARGV[1])
return 1
