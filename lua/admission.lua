-- admission.lua: the worker registry, capability routing, and blocking and
-- unblocking executions for budgets and quotas (issue 5). The budget and
-- quota records themselves are in budget.lua and quota.lua.

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
  local now_s, expires_s = ts(now), ts(expires)
  local status, connected = 'refreshed', NONE
  if not fresh or tonumber(fresh) <= now then
    status, connected = 'registered', {'connected_at', now_s}
  end
  redis.call('HSET', keys[2], 'worker_id', argv[3], 'lanes', argv[4], 'caps', argv[5], 'seen_at', now_s,
    'expires_at', expires_s, unpack(connected))
  redis.call('PEXPIREAT', keys[2], expires_s)
  redis.call('ZADD', keys[1], expires_s, argv[2])
  redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', now_s)
  return ok(status, expires)
end

-- ff_unblock_route: make executions waiting for a capable worker eligible
-- again when the namespace's connected workers now cover them.
-- KEYS[1]  partition anchor
-- ARGV[1]  limit
-- ARGV[2]  namespace
-- ARGV[3]  the union of the capabilities of its connected workers
-- Reply: {1, processed, more}
local function ff_unblock_route(keys, argv)
  local p = part(keys[1])
  local limit = tonumber(argv[1])
  local ns = argv[2]
  local union = {}
  for token in string.gmatch(argv[3], '[^,]+') do union[token] = true end
  local now = now_ms()
  local n, seen = 0, 0
  for _, l in ipairs(lane_list(p)) do
    if seen >= limit then break end
    if l[1] == ns then
      local key = lane_key(p, ns, l[2], 'blocked')
      local list = redis.call('ZRANGE', key, 0, limit - seen - 1)
      seen = seen + #list
      for _, u in ipairs(list) do
        local c = read_core(p, u)
        if not c or not is(c.state, 'runnable') or RUNNABLE_INDEX[split(c).eligibility] ~= 'blocked' then
          zrem(p, key, u) -- not blocked any more: heal the index
        elseif c.v.reason == 'waiting_for_capable_worker' then
          if covers(union, redis.call('HGET', c.key, 'caps')) then
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

-- The eligibility of each admission blocking reason.
local BLOCK_ELIGIBILITY = {
  waiting_for_budget = 'blocked_by_budget',
  waiting_for_quota = 'blocked_by_quota',
  waiting_for_capable_worker = 'blocked_by_route',
}

-- ff_block: move an eligible execution to its lane's blocked index of the
-- reason (…:blocked for capable workers, …:blocked_budget, …:blocked_quota).
-- KEYS[1]  partition anchor
-- ARGV[1]  uuid
-- ARGV[2]  reason: waiting_for_budget | waiting_for_quota | waiting_for_capable_worker
-- ARGV[3]  detail (human-readable)
-- ARGV[4]  recheck delay, ms: the blocked index score is now + delay, and
--          the unblock scanner looks at entries whose score has passed
-- Reply: {1, public_state}
--        {0, 'not_found'}
--        {0, 'wrong_state', public_state}  (not eligible now)
--        {0, 'invalid', 'reason', message}
local function ff_block(keys, argv)
  local p = part(keys[1])
  local elig = BLOCK_ELIGIBILITY[argv[2]]
  if not elig then return refuse('invalid', 'reason', 'not an admission blocking reason: ' .. argv[2]) end
  local c = read_core(p, argv[1])
  if not c then return refuse('not_found') end
  if not is(c.state, 'runnable') or split(c).eligibility ~= 'eligible_now' then
    return refuse('wrong_state', public_of(c.state))
  end
  local now = now_ms()
  leave_indexes(p, c)
  redis.call('HSET', c.key, 'updated_at', ts(now), 'blocking_detail', clip(argv[3]),
    'state', sv('runnable', 'unowned', elig, argv[2], 'none', c.v.attempt))
  zadd(p, lane_key(p, c.ns, c.lane, RUNNABLE_INDEX[elig]), ts(now + tonumber(argv[4])), c.u)
  flush(p)
  return ok('blocked')
end

-- ff_unblock: make blocked executions eligible again when they are still
-- blocked for the given reason (the caller checked that it cleared).
-- KEYS[1]  partition anchor
-- ARGV[1]  reason: waiting_for_budget | waiting_for_quota
-- ARGV[2..] uuids
-- Reply: {1, unblocked}
local function ff_unblock(keys, argv)
  local p = part(keys[1])
  local now = now_ms()
  local n = 0
  for i = 2, #argv do
    local c = read_core(p, argv[i])
    if c and is(c.state, 'runnable') and split(c).reason == argv[1]
        and c.v.eligibility == BLOCK_ELIGIBILITY[argv[1]] then
      leave_indexes(p, c)
      to_eligible(p, c, c.v.attempt, now)
      n = n + 1
    end
  end
  flush(p)
  return ok(n)
end

register('ff_worker_heartbeat', ff_worker_heartbeat)
register('ff_block', ff_block)
register('ff_unblock', ff_unblock)
register('ff_unblock_route', ff_unblock_route)
