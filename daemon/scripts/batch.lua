-- Batch: the operations of one loop iteration for one master in one
-- call.  KEYS: every item's keys, item after item; ARGV: per item its
-- operation (the name of a script with the line "-- in the batch"),
-- how many keys and how many arguments it has, then its arguments.
-- Answers one element per item, in order: what that script alone would
-- answer (false for nothing), or an error reply naming the item when
-- its script failed, so that a failed item never fails its neighbours
-- (what it wrote before failing stays, as for a script of its own).
-- Every item reads the master's clock once for the whole call (rl_now),
-- so the items share one TIME.  A malformed list of items answers an
-- error and runs nothing.
-- uses prelude.lua
-- uses the batched scripts

local items, k, a = {}, 0, 0
while a < #ARGV do
  local op, nk, na = ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  if not rl_ops[op] or not nk or not na or nk < 0 or na < 0
      or k + nk > #KEYS or a + 3 + na > #ARGV then
    return redis.error_reply('batch: item ' .. (#items + 1) .. ' is malformed')
  end
  items[#items + 1] = { op, k, nk, a + 3, na }
  k, a = k + nk, a + 3 + na
end
if k ~= #KEYS then
  return redis.error_reply('batch: ' .. (#KEYS - k) .. ' keys belong to no item')
end
local out = {}
for i = 1, #items do
  local op, k0, nk, a0, na = unpack(items[i])
  local ok, r = pcall(rl_ops[op], {unpack(KEYS, k0 + 1, k0 + nk)},
                      {unpack(ARGV, a0 + 1, a0 + na)})
  if not ok then
    if type(r) == 'table' and r.err then r = r.err end
    out[i] = redis.error_reply('batch item ' .. i .. ' (' .. op .. '): ' .. tostring(r))
  elseif r == nil then
    out[i] = false
  else
    out[i] = r
  end
end
return out
