-- luacheck's settings for the masters' scripts (tests/check_lua.sh).
-- Redis runs Lua 5.1; a script sees KEYS, ARGV and redis, and the
-- names that daemon/scripts/embed.sh replaces with the C headers' values.
std = "lua51"
read_globals = { "KEYS", "ARGV", "redis", "RL_LIMIT_MAX", "RL_CHANGED", "RL_RELEASED",
                 "RL_WAITING", "RL_WATCHING", "RL_DELAY_KEY", "RL_DELAY_MARK",
                 "RL_CLAIM_MARK" }
max_line_length = 100
-- The prelude's functions are there for every script; each uses some.
ignore = { "211/rl_.*" }
