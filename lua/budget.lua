-- budget.lua: budgets (issue 5). A budget lives on a budget partition
-- {b:M} (M = fnv32a(id) % budget partitions); its id is "<ns>/<name>", or
-- "<ns>/<name>@<run id>" for a run-scoped budget. Every function gets the
-- definition key "<prefix>ff:{b:M}:budget:<id>" as KEYS[1] and derives the
-- other keys of the partition from it:
--   <def>:usage                      HASH dimension -> usage
--   <prefix>ff:{b:M}:breached        HASH id -> "<on_hard_limit>\t<dim>\t<usage>\t<hard>"
--                                    (budgets at a hard limit; the scheduler
--                                    reads it once per scan cycle)
--   <prefix>ff:{b:M}:resets          ZSET id -> next scheduled reset ms

local function budget_keys(def)
  local base, id = string.match(def, '^(.*):budget:(.*)$')
  return {def = def, usage = def .. ':usage', breached = base .. ':breached', resets = base .. ':resets',
    base = base, id = id}
end

-- budget_refresh recomputes whether budget k is at a hard limit (any
-- dimension with a hard limit whose usage reached it) and records it in
-- the partition's breached hash. Returns the breached dimension or nil.
local function budget_refresh(k)
  local v = redis.call('HMGET', k.def, 'dims', 'on_hard_limit')
  local dims, mode = v[1] or '', v[2] or 'block'
  for dim in string.gmatch(dims, '[^,]+') do
    local hard = num(redis.call('HGET', k.def, 'h:' .. dim))
    if hard > 0 then
      local used = num(redis.call('HGET', k.usage, dim))
      if used >= hard then
        redis.call('HSET', k.breached, k.id, mode .. '\t' .. dim .. '\t' .. string.format('%d', used) .. '\t' ..
          string.format('%d', hard))
        return dim
      end
    end
  end
  redis.call('HDEL', k.breached, k.id)
  return nil
end

-- budget_touch renews the lifetime of a budget that has one (or makes it
-- permanent again).
local function budget_touch(k)
  local ttl = redis.call('HGET', k.def, 'ttl_ms')
  if ttl and ttl ~= '0' and ttl ~= '' then
    redis.call('PEXPIRE', k.def, ttl)
    redis.call('PEXPIRE', k.usage, ttl)
  else
    redis.call('PERSIST', k.def)
    redis.call('PERSIST', k.usage)
  end
end

-- ff_budget_upsert: create or update a budget. Usage is kept; limits,
-- reset interval, on_hard_limit and scope are replaced; the hard-limit
-- state is recomputed (so raising a limit clears it).
-- KEYS[1]  <prefix>ff:{b:M}:budget:<id>
-- ARGV[1]  scope ('shared' | 'run')
-- ARGV[2]  on_hard_limit ('block' | 'fail')
-- ARGV[3]  reset interval ms ('0' = none)
-- ARGV[4]  '1' = only create (an existing budget is left as it is)
-- ARGV[5]  lifetime ms ('0' = forever): the budget's keys expire after it,
--          renewed by every report and reset (run-scoped budgets)
-- ARGV[6..] triples: dimension, hard limit, soft limit ('0' = none)
-- Reply: {1, 'created' | 'updated' | 'exists'}
local function ff_budget_upsert(keys, argv)
  local k = budget_keys(keys[1])
  local now = now_ms()
  local existed = redis.call('EXISTS', k.def) == 1
  if existed and argv[4] == '1' then return ok('exists') end
  local old = existed and (redis.call('HGET', k.def, 'dims') or '') or ''
  local dims, fields = {}, {}
  for i = 6, #argv, 3 do
    dims[#dims + 1] = argv[i]
    fields[#fields + 1] = 'h:' .. argv[i]
    fields[#fields + 1] = argv[i + 1]
    fields[#fields + 1] = 's:' .. argv[i]
    fields[#fields + 1] = argv[i + 2]
  end
  local keep = {}
  for _, d in ipairs(dims) do keep[d] = true end
  for d in string.gmatch(old, '[^,]+') do
    if not keep[d] then redis.call('HDEL', k.def, 'h:' .. d, 's:' .. d) end
  end
  local reset = tonumber(argv[3])
  local prev_reset = existed and num(redis.call('HGET', k.def, 'reset_ms')) or 0
  redis.call('HSET', k.def, 'scope', argv[1], 'on_hard_limit', argv[2], 'reset_ms', argv[3],
    'ttl_ms', argv[5], 'dims', table.concat(dims, ','), 'updated_at', ts(now), unpack(fields))
  if not existed then redis.call('HSET', k.def, 'created_at', ts(now)) end
  if reset > 0 then
    if reset ~= prev_reset or redis.call('ZSCORE', k.resets, k.id) == false then
      redis.call('HSET', k.def, 'next_reset_at', ts(now + reset))
      redis.call('ZADD', k.resets, ts(now + reset), k.id)
    end
  else
    redis.call('HDEL', k.def, 'next_reset_at')
    redis.call('ZREM', k.resets, k.id)
  end
  budget_refresh(k)
  budget_touch(k)
  return ok(existed and 'updated' or 'created')
end

-- ff_budget_report: add usage to one dimension, once per dedup key.
-- KEYS[1]  <prefix>ff:{b:M}:budget:<id>
-- KEYS[2]  <prefix>ff:{b:M}:usagededup:<id>:<dedup key> (or KEYS[1] when none)
-- ARGV[1]  dimension
-- ARGV[2]  delta (integer >= 0)
-- ARGV[3]  dedup key lifetime, ms
-- Reply: {1, status, usage, hard, soft} with status 'applied', 'duplicate'
--        (the dedup key was seen: nothing added), 'soft_breach' (this report
--        crossed the soft limit) or 'hard_breach' (this report reached the
--        hard limit)
--        {0, 'not_found'} (no such budget)
--        {0, 'invalid', 'dimension', message}
local function ff_budget_report(keys, argv)
  local k = budget_keys(keys[1])
  local dim = argv[1]
  local v = redis.call('HMGET', k.def, 'dims', 'h:' .. dim, 's:' .. dim)
  if not v[1] then return refuse('not_found') end
  local found = false
  for d in string.gmatch(v[1], '[^,]+') do
    if d == dim then found = true end
  end
  if not found then return refuse('invalid', 'dimension', 'budget ' .. k.id .. ' has no dimension ' .. dim) end
  local hard, soft = num(v[2]), num(v[3])
  if keys[2] ~= keys[1] and redis.call('EXISTS', keys[2]) == 1 then
    return ok('duplicate', num(redis.call('HGET', k.usage, dim)), hard, soft)
  end
  local now = now_ms()
  local before = num(redis.call('HGET', k.usage, dim))
  local after = redis.call('HINCRBY', k.usage, dim, argv[2])
  local status = 'applied'
  if soft > 0 and before < soft and after >= soft then
    status = 'soft_breach'
    redis.call('HINCRBY', k.def, 'soft_breaches', 1)
    redis.call('HSET', k.def, 'last_soft_breach_at', ts(now), 'last_soft_breach_dim', dim)
  end
  if hard > 0 and before < hard and after >= hard then
    status = 'hard_breach'
    redis.call('HINCRBY', k.def, 'hard_breaches', 1)
    redis.call('HSET', k.def, 'last_hard_breach_at', ts(now), 'last_hard_breach_dim', dim)
    budget_refresh(k)
  end
  if keys[2] ~= keys[1] then
    redis.call('SET', keys[2], '1', 'PX', argv[3])
  end
  budget_touch(k)
  return ok(status, after, hard, soft)
end

-- budget_reset zeroes the usage of budget k and schedules the next reset.
local function budget_reset(k, now)
  redis.call('DEL', k.usage)
  local reset = num(redis.call('HGET', k.def, 'reset_ms'))
  redis.call('HINCRBY', k.def, 'resets', 1)
  redis.call('HSET', k.def, 'last_reset_at', ts(now))
  if reset > 0 then
    redis.call('HSET', k.def, 'next_reset_at', ts(now + reset))
    redis.call('ZADD', k.resets, ts(now + reset), k.id)
  end
  redis.call('HDEL', k.breached, k.id)
  budget_touch(k)
end

-- ff_budget_reset: reset a budget now (API).
-- KEYS[1]  <prefix>ff:{b:M}:budget:<id>
-- Reply: {1, next_reset_at (0 = none)} | {0, 'not_found'}
local function ff_budget_reset(keys, argv)
  local k = budget_keys(keys[1])
  if redis.call('EXISTS', k.def) == 0 then return refuse('not_found') end
  local now = now_ms()
  budget_reset(k, now)
  return ok(num(redis.call('HGET', k.def, 'next_reset_at')))
end

-- ff_budget_resets: the scheduled resets of one budget partition that are
-- due (the budget reset scanner). It also drops, from a random sample of
-- the breached hash, entries of budgets that expired (run-scoped budgets of
-- old runs), and resets of budgets that no longer exist.
-- KEYS[1]  <prefix>ff:{b:M}:resets
-- ARGV[1]  limit
-- Reply: {1, processed, more}
local function ff_budget_resets(keys, argv)
  local base = string.sub(keys[1], 1, -8) -- strip ':resets'
  local limit = tonumber(argv[1])
  local now = now_ms()
  local list = due(keys[1], now, limit)
  local n = 0
  for _, id in ipairs(list) do
    local k = budget_keys(base .. ':budget:' .. id)
    local next_at = redis.call('HGET', k.def, 'next_reset_at')
    if not next_at or num(redis.call('HGET', k.def, 'reset_ms')) <= 0 then
      redis.call('ZREM', keys[1], id) -- deleted or no longer resetting
    elseif num(next_at) > now then
      redis.call('ZADD', keys[1], next_at, id)
    else
      budget_reset(k, now)
      n = n + 1
    end
  end
  local sample = redis.call('HRANDFIELD', base .. ':breached', 10)
  for _, id in ipairs(sample) do
    if redis.call('EXISTS', base .. ':budget:' .. id) == 0 then
      redis.call('HDEL', base .. ':breached', id)
    end
  end
  return ok(n, #list >= limit and 1 or 0)
end

register('ff_budget_upsert', ff_budget_upsert)
register('ff_budget_report', ff_budget_report)
register('ff_budget_reset', ff_budget_reset)
register('ff_budget_resets', ff_budget_resets)
