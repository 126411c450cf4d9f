-- Acquire a set: every name of KEYS (the names' keys, in the daemon's
-- canonical order), exclusively, all at once or not at all.  ARGV:
-- token, ttl, '1' when the request waits if refused ('0' for one
-- attempt; '2': it waits, and a master closed a gate for it before), an
-- old token of ours whose records may be here ('' for
-- none: an earlier try whose link failed, taken over as acquire.lua
-- takes over a ghost), the holders' label ('' for none), the fence
-- field of the labels ('0' for a grant without one, '-' for a fenced
-- grant whose fences the daemon raises and writes back next: fence.lua
-- then puts each name's fence in its label), for holds that asked for a
-- lock-delay its ms ('' for none: kept next to each record as
-- acquire.lua keeps it; ttl is then the record's, ttl + delay), and the
-- set's id, which names its claims ('' for the token: the token changes
-- from one try to the next, the id does not).
--
-- A first pass takes each free name with SET NX (a free set, the common
-- case, costs one command per name) and reads the others; it writes
-- nothing else but the removal of leftovers (a set of shared holders that
-- all expired, a limit key whose permits all expired).  The first name
-- that keeps the set out gives back what the pass took, and answers
-- as acquire.lua's refusal of that name, {pttl, who} (a live shared
-- holder: the one whose hold ends last; a name under a lock-delay or
-- claimed by another set: its mark, as a holder), and marks it as waited
-- for when the request waits (rl_refused), so that its release
-- announces; a name held as counted answers {'kind', 'limit=N'}.  No
-- name of the set is granted then: no master ever keeps part of a set
-- from a try.
--
-- Gates.  A set that waits and is refused by live shared holders of a
-- name closes that name's gate for its id, as a single exclusive request
-- does (acquire.lua), so that new shared holders wait behind it; its
-- grant opens its gates (with '2'), and the daemon opens what is left when
-- the set goes (ungate.lua, per name).
--
-- Claims.  A set that waits and is refused at its i-th name claims the
-- names before it, in the canonical order, that are free here: their
-- keys get RL_CLAIM_MARK .. id for the set's ttl (renewed by each try;
-- a dead daemon's claims last no longer than its locks would), so that
-- nobody else takes them meanwhile
-- (their SET NX fails as on a holder) and the set finds them free when
-- the i-th name is released; it then answers {pttl, who, 'claim'}.  A
-- claim is not a grant: nothing is held, the key only refuses others.
-- Claims never make a cycle: a set claims only names below the one it
-- waits for, so one that waits for a name claimed by another waits for a
-- set that waits, itself, for a name above that one.  The daemon drops
-- a set's claims once it is granted or gives up (unclaim.lua).
--
-- Only when every name is free, claimed by this set or holds the token
-- (or the old token) does the second pass write the token on every name
-- (SET PX, over the set's claims; an old token's label goes), with the
-- label when asked ("<grant ms> <fence> <text>", as acquire.lua writes
-- it), and tell watchers (a fenced grant's write-back tells them again
-- once its label has the fence).  The grant answers {1, 0, 1}
-- (acquire.lua's shape: no peer count, branch "set"), so the daemon reads
-- it as it reads a single name's.
-- uses prelude.lua
-- in the batch

local tok, px, wait, old, label = ARGV[1], ARGV[2], ARGV[3], ARGV[4] or '', ARGV[5] or ''
local fenced, delay = ARGV[6] or '0', ARGV[7] or ''
local id = ARGV[8] or ''
if id == '' then id = tok end
local ms, mine = tonumber(px), RL_CLAIM_MARK .. id
-- The refusal at the i-th name: claim the free names before it, then answer
-- ('claim' added to the answer when it claimed any).
local function refused(i, out)
  if wait ~= '0' then
    for j = 1, i - 1 do
      local v = redis.pcall('GET', KEYS[j])
      if not v or v == mine then
        redis.call('SET', KEYS[j], mine, 'PX', px)
        if out[#out] ~= 'claim' then out[#out + 1] = 'claim' end
      end
    end
  end
  return rl_refused(KEYS[i], ms, wait, out)
end
-- Live shared holders refuse the set at the i-th name: when it waits it
-- closes the name's gate, as acquire.lua's exclusive request does, so that
-- new shared holders wait behind it ({left, who, 'gate'}; 'shared' when
-- another's gate is there).
local function readers(i, r)
  if wait ~= '0' then
    local gk = KEYS[i] .. ' gate'
    local g = rl_str(gk)
    if not g or g == id then
      redis.call('SET', gk, id, 'PX', ms)
      r[3] = 'gate'
    else
      r[3] = 'shared'
    end
  end
  return refused(i, r)
end
-- The names this call took with SET NX (free ones), given back when a later
-- name refuses the set: nothing of a refused try stays.
local won = {}
local function undo()
  for j = 1, #KEYS do
    if won[j] then redis.call('DEL', KEYS[j]) end
  end
end
for i = 1, #KEYS do
  local k = KEYS[i]
  if redis.call('SET', k, tok, 'NX', 'PX', px) then
    won[i] = true
  else
    local v = redis.pcall('GET', k)
    if type(v) == 'string' then
      if v ~= tok and v ~= mine and (old == '' or v ~= old) then
        undo()
        return refused(i, {redis.call('PTTL', k), v})
      end
    else
      local t = redis.call('TYPE', k).ok
      if t == 'zset' then
        local r = rl_last_reader(k)
        if r then
          undo()
          return readers(i, r)
        end
      elseif t == 'hash' and rl_limit(k) then
        local kind = rl_other_limit(k, '')
        if kind then
          undo()
          return {'kind', kind}
        end
      else
        undo()
        return refused(i, {redis.call('PTTL', k), ''})
      end
    end
  end
end
local now = rl_now()
for i = 1, #KEYS do
  local k = KEYS[i]
  if not won[i] then redis.call('SET', k, tok, 'PX', px) end
  -- A set that closed gates on its way opens them with its grant.
  if wait == '2' and rl_str(k .. ' gate') == id then redis.call('DEL', k .. ' gate') end
  if old ~= '' then redis.call('DEL', k .. ' label ' .. old) end
  if label ~= '' then
    redis.call('SET', k .. ' label ' .. tok, now .. ' ' .. fenced .. ' ' .. label, 'PX', px)
  end
  if delay ~= '' then
    redis.call('SET', k .. RL_DELAY_KEY, delay .. ' ' .. tok, 'PX', px)
  end
  -- A fenced grant is told to watchers at its write-back, with its fence.
  if fenced == '0' then rl_announce(k, tok) end
end
return {1, 0, 1}
