-- Status of the name KEYS[1], whatever its kind: {limit or 0, then per
-- holder: kind, id, pttl, 1 if it holds ARGV[1], its token (as far as
-- the record tells: '' for a key that is not a string), its label as
-- "<age ms> <fence> <text>" ('' when it wrote none)}.  The id is '' for
-- the exclusive key, the permit's index, or a shared holder's token.
-- A lock-delay in force is the entry {'d', '', its pttl, 0, '', ''}.
-- uses prelude.lua

local base, tok, out = KEYS[1], ARGV[1], {0}
local function add(c, id, pttl, mine, k, who)
  out[#out + 1] = c
  out[#out + 1] = id
  out[#out + 1] = pttl
  out[#out + 1] = mine
  out[#out + 1] = who or ''
  out[#out + 1] = rl_info(k, who) or ''
end
local t = redis.call('TYPE', base).ok
local d = t == 'string' and rl_delayed(base)
if d then
  -- A lock-delay in force: kind 'd', no holder.
  add('d', '', d, 0, base, nil)
elseif t ~= 'none' and t ~= 'zset' and not (t == 'hash' and rl_limit(base)) then
  local who = rl_str(base)
  local mine = 0
  if tok ~= '' and who == tok then mine = 1 end
  add('x', '', redis.call('PTTL', base), mine, base, who)
end
local n = rl_limit_n(rl_limit(base))
if n then
  out[1] = n
  for i = 0, n - 1 do
    local k = base .. ' permit ' .. i
    local p = redis.call('PTTL', k)
    if p ~= -2 then
      local who = rl_str(k)
      local mine = 0
      if tok ~= '' and who == tok then mine = 1 end
      add('p', tostring(i), p, mine, k, who)
    end
  end
end
if t == 'zset' then
  local now = rl_now()
  local m = redis.call('ZRANGEBYSCORE', base, '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #m, 2 do
    local mine = 0
    if m[i] == tok then mine = 1 end
    add('s', m[i], math.floor(tonumber(m[i + 1]) - now), mine, base, m[i])
  end
end
return out
