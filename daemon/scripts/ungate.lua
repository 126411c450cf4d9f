-- Ungate: delete the gate KEYS[1] if it holds ARGV[1], announced on ARGV[2].

if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
