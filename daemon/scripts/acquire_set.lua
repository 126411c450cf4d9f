-- Acquire a set: every name of KEYS (the names' keys, in the daemon's
-- canonical order), exclusively, all at once or not at all.  ARGV:
-- token, ttl, '1' when the request waits if refused ('0' for one
-- attempt), an old token of ours whose records may be here ('' for
-- none: an earlier try whose link failed, taken over as acquire.lua
-- takes over a ghost), the holders' label ('' for none), and the fence
-- field of the labels: '0' for a grant without one, '-' for a fenced
-- grant whose fences the daemon raises and writes back next (fence.lua
-- then puts each name's fence in its label), and for holds that asked
-- for a lock-delay its ms ('' or absent for none), kept next to each
-- record as acquire.lua keeps it (ttl is then the record's, ttl + delay).
-- A name under a lock-delay (its key holds the delay's mark) refuses the
-- set as a holder would: its GET is a string that is not the token.
--
-- A first pass reads every name and writes nothing but the removal of
-- leftovers (a set of shared holders that all expired, a limit key whose
-- permits all expired): the first name that keeps the set out answers
-- as acquire.lua's refusal of that name, {pttl, who} (a live shared
-- holder: the one whose hold ends last), and marks it as waited for
-- when the request waits (rl_refused), so that its release announces;
-- a name held as counted answers {'kind', 'limit=N'}.  Nothing of the
-- set is written then: no master ever keeps part of a set from a try.
-- Only when every name is free, or holds the token (or the old token),
-- does the second pass write the token on every name (SET PX; an old
-- token's label goes), with the label when asked ("<grant ms> 0
-- <text>", as acquire.lua writes it), and tell watchers (a fenced grant's
-- write-back tells them again once its label has the fence).  The grant
-- answers {1, 0, 1} (acquire.lua's shape: no peer count, branch
-- "set"), so the daemon reads it as it reads a single name's.
-- uses prelude.lua
-- in the batch

local tok, px, wait, old, label = ARGV[1], ARGV[2], ARGV[3], ARGV[4] or '', ARGV[5] or ''
local fenced = ARGV[6] or '0'
local delay = ARGV[7] or ''
local ms = tonumber(px)
for i = 1, #KEYS do
  local k = KEYS[i]
  local v = redis.pcall('GET', k)
  if type(v) == 'string' then
    if v ~= tok and (old == '' or v ~= old) then
      return rl_refused(k, ms, wait, {redis.call('PTTL', k), v})
    end
  elseif v then
    local t = redis.call('TYPE', k).ok
    if t == 'zset' then
      local r = rl_last_reader(k)
      if r then return rl_refused(k, ms, wait, r) end
    elseif t == 'hash' and rl_limit(k) then
      local kind = rl_other_limit(k, '')
      if kind then return {'kind', kind} end
    else
      return rl_refused(k, ms, wait, {redis.call('PTTL', k), ''})
    end
  end
end
local now = rl_now()
for i = 1, #KEYS do
  local k = KEYS[i]
  redis.call('SET', k, tok, 'PX', px)
  if old ~= '' then redis.call('DEL', k .. ' label ' .. old) end
  if label ~= '' then
    redis.call('SET', k .. ' label ' .. tok, now .. ' ' .. fenced .. ' ' .. label, 'PX', px)
  end
  if delay ~= '' then
    redis.call('SET', k .. RL_DELAY_KEY, delay .. ' ' .. tok, 'PX', px)
  end
  rl_announce(k, tok)
end
return {1, 0, 1}
