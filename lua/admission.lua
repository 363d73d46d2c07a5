-- admission.lua: the worker registry and capability routing (issue 5).
-- Budgets and quotas will join this file.

-- ff_worker_heartbeat: register or refresh a connected worker instance.
-- KEYS[1]  <prefix>ff:{w:<ns>}:workers          ZSET instance -> expiry ms
-- KEYS[2]  <prefix>ff:{w:<ns>}:worker:<instance> HASH
-- ARGV[1]  namespace
-- ARGV[2]  instance id
-- ARGV[3]  worker id
-- ARGV[4]  lanes, comma-separated
-- ARGV[5]  capabilities, comma-separated (sorted)
-- ARGV[6]  time to live, ms
-- Reply: {1, 'registered' | 'refreshed', expires_at}
-- Registry keys are not on a flow partition: they are per namespace, with
-- their own hash tag {w:<ns>}. Expired instances are dropped from the ZSET
-- here; their hashes expire on their own.
local function ff_worker_heartbeat(keys, argv)
  local now = now_ms()
  local expires = now + tonumber(argv[6])
  local fresh = redis.call('ZSCORE', keys[1], argv[2])
  local status = 'refreshed'
  if not fresh or tonumber(fresh) <= now then
    status = 'registered'
    redis.call('HSET', keys[2], 'connected_at', now)
  end
  redis.call('HSET', keys[2], 'worker_id', argv[3], 'lanes', argv[4], 'caps', argv[5], 'seen_at', now,
    'expires_at', expires)
  redis.call('PEXPIREAT', keys[2], expires)
  redis.call('ZADD', keys[1], expires, argv[2])
  redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', now)
  return ok(status, expires)
end

-- ff_unblock_route: make executions waiting for a capable worker eligible
-- again when the namespace's connected workers now cover them.
-- KEYS[1]  partition anchor
-- ARGV[1]  namespace
-- ARGV[2]  the union of the capabilities of its connected workers
-- ARGV[3]  limit
-- Reply: {1, processed, more}
local function ff_unblock_route(keys, argv)
  local p = part(keys[1])
  local ns = argv[1]
  local limit = tonumber(argv[3])
  local union = {}
  for token in string.gmatch(argv[2], '[^,]+') do union[token] = true end
  local now = now_ms()
  local n, seen = 0, 0
  for _, m in ipairs(redis.call('SMEMBERS', p.anchor)) do
    if seen >= limit then break end
    local mns, lane = string.match(m, '^([^:]+):(.+)$')
    if mns == ns then
      local key = lane_key(p, ns, lane, 'blocked')
      local list = redis.call('ZRANGE', key, 0, limit - seen - 1)
      seen = seen + #list
      for _, u in ipairs(list) do
        local c = read_core(p, u)
        if not c or not is(c.state, 'runnable') or RUNNABLE_INDEX[split(c).eligibility] ~= 'blocked' then
          zrem(p, key, u) -- not blocked any more: heal the index
        elseif c.v.reason == 'waiting_for_capable_worker' then
          local caps = redis.call('HGET', c.key, 'caps') or ''
          local covered = true
          for token in string.gmatch(caps, '[^,]+') do
            if not union[token] then covered = false end
          end
          if covered then
            leave_indexes(p, c)
            to_eligible(p, c, c.v.attempt, now)
            n = n + 1
          end
        end
      end
    end
  end
  flush(p)
  return ok(n, seen >= limit and 1 or 0)
end

redis.register_function('ff_worker_heartbeat', ff_worker_heartbeat)
redis.register_function('ff_unblock_route', ff_unblock_route)
