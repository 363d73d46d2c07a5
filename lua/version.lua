-- version.lua: the library version.

-- ff_version: the version of the loaded library; the store reloads the
-- library when it differs from its own.
-- KEYS: none. ARGV: none.
-- Reply: the version string (LIBRARY_VERSION, set by lua.go from a hash of
-- the library's source).
local function ff_version()
  return LIBRARY_VERSION
end

register('ff_version', ff_version, {'no-writes'})

-- ff_writable: nothing, as a function that may write: the server refuses
-- to run it when it refuses writes (maxmemory reached without eviction,
-- a replica), which is what a readiness probe wants to know.
-- KEYS: none. ARGV: none. Reply: 1.
local function ff_writable()
  return 1
end

register('ff_writable', ff_writable)

-- ff_library_use: records that a process uses this version of the library
-- (field LIBRARY_VERSION of the libraries hash = the server's clock, ms)
-- and returns the other versions recorded there that nobody has recorded
-- for idle_ms: the caller deletes those libraries (FUNCTION DELETE cannot
-- run inside a function) and then their fields.
-- KEYS: the libraries hash. ARGV: idle_ms (a positive integer).
-- Reply: {1, version, ...} or {0, 'invalid', 'idle'}.
local function ff_library_use(keys, argv)
  local idle = tonumber(argv[1])
  if not idle or idle < 1 or idle ~= math.floor(idle) then return refuse('invalid', 'idle') end
  local now = now_ms()
  redis.call('HSET', keys[1], LIBRARY_VERSION, CLOCK_S)
  local all = redis.call('HGETALL', keys[1])
  local out = {1}
  for i = 1, #all, 2 do
    if all[i] ~= LIBRARY_VERSION and (tonumber(all[i + 1]) or 0) <= now - idle then
      out[#out + 1] = all[i]
    end
  end
  return out
end

register('ff_library_use', ff_library_use)

-- ff_unlock: release a lock taken with SET NX PX by the holder of token:
-- the key is deleted only while it still holds token (a holder that
-- outlived its lock must not free the next holder's).
-- KEYS[1]  the lock. ARGV[1]  the holder's token.
-- Reply: {1, 1} deleted | {1, 0} not held by token (expired, or another's).
local function ff_unlock(keys, argv)
  if redis.call('GET', keys[1]) ~= argv[1] then return ok(0) end
  return ok(redis.call('DEL', keys[1]))
end

register('ff_unlock', ff_unlock)
