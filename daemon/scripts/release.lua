-- Release: compare-and-delete, answering 1 when deleted.  KEYS[1] is
-- the name's key (ARGV[3] '?': whichever record holds the token) or the
-- record's key (ARGV[3] its kind, ARGV[4] a permit's limit key).  With
-- ARGV[2] not '', a deleted record is announced on ARGV[2], the name's
-- channel, with the released token (dead from now on) as the message,
-- so that waiters elsewhere try at once and can tell the masters'
-- copies of one announcement apart from a new one.  Every deleted
-- record (announced or not: a failed grant's clean-up too) is told to
-- watchers on ARGV[5], the name's changes channel.
-- uses prelude.lua
-- in the batch

local c, k, aux = ARGV[3], KEYS[1], ARGV[4] or ''
if c == '?' then c, k, aux = rl_find(KEYS[1], ARGV[1]) end
if rl_delete(c, k, ARGV[1], aux) == 1 then
  if ARGV[2] ~= '' then
    redis.call('PUBLISH', ARGV[2], ARGV[1])
  end
  redis.call('PUBLISH', ARGV[5], ARGV[1])
  return 1
end
return 0
