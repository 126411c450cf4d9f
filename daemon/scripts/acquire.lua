-- Acquire.  KEYS: the name's key, the record's key, and the fence
-- counter when fenced.  ARGV: token, ttl, the release channel, the old
-- token of a hand-over ('' for none), the kind, the limit ('' unless a
-- permit), '1' when a waiting exclusive LOCK may close the gate, the
-- holder's label ('' for none).
--
-- One EXISTS tells whether anything but the record itself is there (a
-- limit key, shared holders, a gate); an uncontended exclusive LOCK
-- reads no more.  First the kind: a name is one kind at a time, and a
-- master that holds it as another answers {'kind', what}.  A limit key left by permits
-- that all expired by themselves (their fields are still there) is
-- found out by reading the permits, and deleted.  Then the grant: SET NX PX (a
-- shared holder: its member), or, when the record already holds our
-- token (a retry after a set that landed late), renew it; with an old
-- token (a hand-over) a record that still holds it is given the new
-- token in the same step, so it is never free for an outsider in
-- between.  An exclusive request that only shared holders keep out sets
-- the gate (when asked), so that new shared requests wait behind it,
-- and says so ({left, who, 'gate'}); a shared request waits while an
-- exclusive key or someone else's gate is there.  Not granted: {pttl,
-- who} of what keeps us out, who being the token that keeps it: the
-- value of the key that refused (the exclusive key, the permit asked
-- for, the gate; '' when that key is not a string), or for shared
-- holders the one whose hold ends last here (left, its time left, is
-- the pttl).  The daemon counts the masters each token refuses on, to
-- tell one holder on a quorum (wait for its release or expiry) from
-- refusals split among several (try again soon).  For a permit also how
-- many permits are held here, the shortest pttl among them, and their
-- indices, {pttl, who, held, shortest, index...}, so that the daemon
-- can pick a free one.  Only a refusal reads who: the grant path runs
-- the same commands with or without it.
--
-- A grant also writes the holder's label (ARGV[8], unless '') next to
-- the record, as "<grant time, ms on the master's clock> <fence> <text>"
-- with the record's expiry (the fence is 0 until the write-back sets
-- it), drops a hand-over's old label, and announces itself on the
-- name's changes channel for watchers (one PUBLISH, a lookup when nobody
-- watches; a fenced grant does so at its write-back, once its label has
-- the fence).  Watchers have a channel of their own so that the count of the
-- release channel's subscribers stays a count of waiting daemons.
--
-- A grant answers {1, n, b}: n is how many clients are subscribed to
-- the name's release channel, which tells the daemon whether other
-- daemons are waiting; b is the branch that granted (enum
-- redlock_branch: 1 set on a free record, 2 swapped from the old token,
-- 3 ours already), so that a hand-over's releaser learns where its own
-- token was really there to hand over.  A fenced grant (KEYS[3], the
-- counter) does not touch the counter here: its increments come once
-- the grant is won (raise.lua), never before the decision.
-- uses prelude.lua
-- in the batch

local base, k, fkey = KEYS[1], KEYS[2], KEYS[3]
local tok, ms, chan, old, c, limit = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local sk, gk, lk, aux = base .. ' shared', base .. ' gate', base .. ' limit', ''
local marked = redis.call('EXISTS', lk, sk, gk) > 0
local have = marked and rl_limit(base)
if have and have ~= limit then
  local hn = rl_limit_n(have)
  if not hn or rl_permits(base, hn) > 0 then return {'kind', 'limit=' .. have} end
  redis.call('DEL', lk)
end
if c == 'p' then
  aux = lk
  if redis.call('EXISTS', base) == 1 then return {'kind', 'exclusive'} end
  if marked and rl_readers(sk) > 0 then return {'kind', 'shared'} end
end
local granted = false
if c == 's' then
  if redis.call('EXISTS', base) == 1 then
    return {redis.call('PTTL', base), rl_str(base) or ''}
  end
  local g = marked and rl_str(gk)
  if g and g ~= tok then return {redis.call('PTTL', gk), g} end
  granted = 1
  if rl_state('s', k, tok) == 1 then granted = 3 end
  rl_set('s', k, tok, ms, '', '')
elseif old ~= '' and redis.pcall('GET', k) == old then
  rl_set(c, k, tok, ms, aux, limit)
  granted = 2
elseif c == 'x' and marked and rl_readers(sk) > 0 then
  local last = redis.call('ZRANGE', sk, -1, -1, 'WITHSCORES')
  local left = math.floor(tonumber(last[2]) - rl_now())
  if left < 0 then left = 0 end
  if ARGV[7] == '1' then
    local g = rl_str(gk)
    if not g or g == tok then
      redis.call('SET', gk, tok, 'PX', ms)
      return {left, last[1], 'gate'}
    end
  end
  return {left, last[1]}
elseif redis.call('SET', k, tok, 'NX', 'PX', ms) then
  if aux ~= '' then rl_mark(aux, k, limit, ms) end
  granted = 1
elseif redis.pcall('GET', k) == tok then
  rl_expire(c, k, tok, ms, aux)
  granted = 3
end
if not granted then
  local out = {redis.call('PTTL', k), rl_str(k) or ''}
  if c == 'p' then
    local n, short = 0, -1
    out[3], out[4] = 0, -1
    for i = 0, tonumber(limit) - 1 do
      local p = redis.call('PTTL', base .. ' permit ' .. i)
      if p ~= -2 then
        n = n + 1
        out[n + 4] = i
        if short == -1 or (p >= 0 and p < short) then short = p end
      end
    end
    out[3], out[4] = n, short
  end
  return out
end
if c == 'x' and marked and rl_str(gk) == tok then redis.call('DEL', gk) end
if granted == 2 then redis.call('DEL', k .. ' label ' .. old) end
if ARGV[8] ~= '' then
  redis.call('SET', k .. ' label ' .. tok, rl_now() .. ' 0 ' .. ARGV[8], 'PX', ms)
end
if not fkey then redis.call('PUBLISH', base .. RL_CHANGED, tok) end
return {1, redis.call('PUBSUB', 'NUMSUB', chan)[2], granted}
