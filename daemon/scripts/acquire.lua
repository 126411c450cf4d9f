-- Acquire.  KEYS: the name's key, the record's key, and the fence
-- counter when fenced.  ARGV: token, ttl, '1' when the daemon asks how
-- many wait elsewhere ('' for no), the old token of a hand-over ('' for
-- none), the kind, the limit ('' unless a permit), '1' when the request
-- waits if refused (it then marks the name as waited for, and an
-- exclusive one may close the gate; '2': a master closed it for this
-- waiter before), the holder's label ('' for none), and what names the
-- waiter in its gate ('' for the token: a waiter's token changes from
-- one try to the next, the gate's owner does not), and, for an exclusive
-- hold that asked for a lock-delay, its ms ('' or absent for none), and
-- '1' when an exclusive request may take over a waiting set's claim
-- (acquire_set.lua) on the name: it has waited on claims for its ttl
-- (a claim is no hold: nothing is taken from anyone).
--
-- Lock-delay: a name whose key holds a delay mark (rl_delayed) refuses
-- every kind as a holder would, {pttl, mark}: its SET NX fails, and the
-- mark is the same on every master, so waiters wait for its pttl as for
-- one holder on a quorum.  A grant with a delay writes "<ms> <token>"
-- at the name's key + RL_DELAY_KEY with the record's expiry (renewals
-- extend it, releases delete it), so that a BREAK through any daemon
-- starts the delay the holder asked for.
--
-- The name's key holds whichever kind holds the name (prelude.lua), so
-- an exclusive request on a free name is one SET NX and reads no more;
-- only when that fails does the key's TYPE tell the kind.  A name is one
-- kind at a time, and a master that holds it as another answers
-- {'kind', what}.  A limit key left by permits that all expired by
-- themselves (their fields are still there) is found out by reading the
-- permits, and deleted; so is a set of shared holders that all expired.
-- Then the grant: SET NX PX (a shared holder: its member), or, when the
-- record already holds our token, renew it; with an old token (a
-- hand-over, or the waiter's own earlier try that may have landed late)
-- a record that still holds it is given the new token in the same step,
-- so it is never free for an outsider in between (a shared holder's old
-- member is removed).  An exclusive request that only shared holders keep out sets
-- the gate (when asked), so that new shared requests wait behind it,
-- and says so ({left, who, 'gate'}; {left, who, 'shared'} when another
-- waiter's gate is there: either way the daemon learns that shared
-- holders refused it, so that a master whose answer its round did not
-- count may have closed its gate); a shared request waits while an
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
-- with the record's expiry (the fence is 0 for a grant without one,
-- and '-' for a fenced grant until its write-back sets it, so that a
-- reader can tell a fence still to come from none), drops a
-- hand-over's old label, and announces itself on the
-- name's changes channel when anyone watches (rl_announce; a fenced
-- grant does so at its write-back, once its label has the fence).
-- Watchers have a channel of their own so that the count of the release
-- channel's subscribers stays a count of waiting daemons.
--
-- A refusal of a request that waits sets the name's waiters' mark (its
-- key + RL_WAITING) for the holder's time left plus ttl, so that the
-- release that frees the name announces it (release.lua); a request that
-- waits retries by then anyway, and marks again if still refused.
--
-- A grant answers {1, n, b}: n is, when asked, how many clients are
-- subscribed to the name's release channel, which tells the daemon
-- whether other daemons are waiting (0 when not asked); b is the branch
-- that granted (enum redlock_branch: 1 set on a free record, 2 swapped
-- from the old token, 3 ours already), so that a hand-over's releaser
-- learns where its own token was really there to hand over.  A fenced grant (KEYS[3], the
-- counter) does not touch the counter here: its increments come once
-- the grant is won (raise.lua), never before the decision.
-- uses prelude.lua
-- in the batch

local base, k, fkey = KEYS[1], KEYS[2], KEYS[3]
local tok, px, old, c, limit = ARGV[1], ARGV[2], ARGV[4], ARGV[5], ARGV[6]
local ms, aux = tonumber(px), ''
local gid = ARGV[9] or ''
if gid == '' then gid = tok end
local granted = false
if c == 'x' then
  if old ~= '' and redis.pcall('GET', k) == old then
    redis.call('SET', k, tok, 'PX', px)
    granted = 2
  elseif redis.call('SET', k, tok, 'NX', 'PX', px) then
    granted = 1
  else
    local t = redis.call('TYPE', k).ok
    local v = t == 'string' and redis.call('GET', k) or nil
    if v == tok then
      rl_expire(c, k, tok, ms, aux, false)
      granted = 3
    elseif v and ARGV[11] == '1' and string.sub(v, 1, #RL_CLAIM_MARK) == RL_CLAIM_MARK then
      -- A set's claim this request has waited on for its ttl: taken over.
      redis.call('SET', k, tok, 'PX', px)
      granted = 1
    elseif t == 'hash' and rl_limit(base) then
      local kind = rl_other_limit(base, limit)
      if kind then return {'kind', kind} end
    elseif t == 'zset' then
      local r = rl_last_reader(base)
      if r then
        if ARGV[7] ~= '0' then
          local gk = base .. ' gate'
          local g = rl_str(gk)
          if not g or g == gid then
            redis.call('SET', gk, gid, 'PX', ms)
            r[3] = 'gate'
          else
            r[3] = 'shared'
          end
        end
        return rl_refused(base, ms, ARGV[7], r)
      end
    end
    if not granted and t ~= 'string' and redis.call('EXISTS', k) == 0 then
      redis.call('SET', k, tok, 'PX', px)
      granted = 1
    end
  end
elseif c == 's' then
  local t = redis.call('TYPE', k).ok
  if t == 'hash' and rl_limit(base) then
    local kind = rl_other_limit(base, limit)
    if kind then return {'kind', kind} end
    t = 'none'
  end
  if t ~= 'zset' and t ~= 'none' then
    return rl_refused(base, ms, ARGV[7], {redis.call('PTTL', k), rl_str(k) or ''})
  end
  local gk = base .. ' gate'
  local g = rl_str(gk)
  if g and g ~= tok then return rl_refused(base, ms, ARGV[7], {redis.call('PTTL', gk), g}) end
  granted = 1
  if t == 'zset' and rl_state('s', k, tok) == 1 then granted = 3 end
  if t == 'zset' and old ~= '' then redis.call('ZREM', k, old) end
  rl_set('s', k, tok, ms, '', '')
else
  aux = base
  local t = redis.call('TYPE', base).ok
  if t == 'zset' then
    if rl_last_reader(base) then return {'kind', 'shared'} end
  elseif t == 'hash' and rl_limit(base) then
    local kind = rl_other_limit(base, limit)
    if kind then return {'kind', kind} end
  elseif t ~= 'none' then
    -- A lock-delay keeps every permit out, full until it ends; so does a
    -- waiting set's claim (acquire_set.lua), as a holder would.
    local d = rl_delayed(base)
    local m = rl_str(base)
    if not d and m and string.sub(m, 1, #RL_CLAIM_MARK) == RL_CLAIM_MARK then
      d = redis.call('PTTL', base)
    end
    if d then
      local out = {d, rl_str(base), tonumber(limit), d}
      for i = 0, tonumber(limit) - 1 do out[i + 5] = i end
      return rl_refused(base, ms, ARGV[7], out)
    end
    return {'kind', 'exclusive'}
  end
  if old ~= '' and redis.pcall('GET', k) == old then
    rl_set(c, k, tok, ms, aux, limit)
    granted = 2
  elseif redis.call('SET', k, tok, 'NX', 'PX', px) then
    rl_mark(aux, k, limit, ms)
    granted = 1
  elseif redis.pcall('GET', k) == tok then
    rl_expire(c, k, tok, ms, aux, false)
    granted = 3
  end
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
  return rl_refused(base, ms, ARGV[7], out)
end
if c == 'x' and ARGV[7] == '2' and rl_str(base .. ' gate') == gid then
  redis.call('DEL', base .. ' gate')
end
if granted == 2 then redis.call('DEL', k .. ' label ' .. old) end
if c == 'x' and (ARGV[10] or '') ~= '' then
  -- A hold with a lock-delay keeps it next to its record, for a BREAK.
  redis.call('SET', base .. RL_DELAY_KEY, ARGV[10] .. ' ' .. tok, 'PX', px)
end
if ARGV[8] ~= '' then
  -- A fenced grant's fence is written back later (fence.lua): '-' until then.
  redis.call('SET', k .. ' label ' .. tok, rl_now() .. (fkey and ' - ' or ' 0 ') .. ARGV[8],
             'PX', ms)
end
if not fkey then rl_announce(base, tok) end
local peers = 0
if ARGV[3] == '1' then peers = redis.call('PUBSUB', 'NUMSUB', base .. RL_RELEASED)[2] end
return {1, peers, granted}
