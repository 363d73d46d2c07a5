-- schedule.lua: schedules that start runs of flow templates at the times
-- of a cron expression. Every schedule key has the hash tag {s}: one slot
-- holds them all (schedules are few; each changes once per fire).
--   <prefix>ff:{s}:schedule:<name>  HASH template, cron, tz, ns, input,
--                                   created_at, updated_at, last_fire_at,
--                                   last_run, last_error, fires
--   <prefix>ff:{s}:schedules        ZSET name -> next fire ms
-- ffrun computes the fire times (the cron expression is parsed in Go); the
-- functions keep the index and the record in step, atomically.

-- ms_ok reports whether s is a time in ms as the index takes it: digits
-- only (tonumber would take ' 5' or '1e999', which ZADD refuses after an
-- earlier write).
local function ms_ok(s)
  return type(s) == 'string' and #s <= 16 and string.match(s, '^%d+$') ~= nil
end

-- ff_schedule_put: create or replace a schedule; its next fire is set
-- anew (the expression may have changed), unless the definition (template,
-- expression, zone, namespace, input) is the stored one: a put that only
-- marks where it comes from, or repeats itself, keeps a fire that is due.
-- What it last did is kept.
-- KEYS[1]  the schedule's record
-- KEYS[2]  the index
-- ARGV[1]  name
-- ARGV[2]  template
-- ARGV[3]  cron expression
-- ARGV[4]  time zone
-- ARGV[5]  namespace ('' = the template's)
-- ARGV[6]  input (JSON)
-- ARGV[7]  next fire, ms
-- ARGV[8]  the most schedules there may be
-- ARGV[9]  where it comes from: 'declared' (a .ff file, put by ffrun at
--          start) or '' (the API)
-- Reply: {1, 'created' | 'updated'}
--        | {0, 'invalid', 'next' | 'limit' | 'source' | 'name', message}
--        (nothing written; 'name': a new schedule over the limit)
local function ff_schedule_put(keys, argv)
  if not ms_ok(argv[7]) then return refuse('invalid', 'next', 'not a time in ms: ' .. tostring(argv[7])) end
  local max = numv(argv[8])
  if not max then return refuse('invalid', 'limit', 'not a number: ' .. tostring(argv[8])) end
  local source = argv[9]
  if source ~= '' and source ~= 'declared' then
    return refuse('invalid', 'source', "not '' or declared: " .. tostring(source))
  end
  local existed = redis.call('EXISTS', keys[1]) == 1
  local same = false
  if existed then
    local cur = redis.call('HMGET', keys[1], 'template', 'cron', 'tz', 'ns', 'input')
    same = cur[1] == argv[2] and cur[2] == argv[3] and cur[3] == argv[4] and cur[4] == argv[5] and cur[5] == argv[6]
  end
  if not existed then
    local n = redis.call('ZCARD', keys[2])
    if n >= max then
      return refuse('invalid', 'name', 'there are ' .. n .. ' schedules already, the limit is ' .. argv[8])
    end
  end
  local now = ts(now_ms())
  redis.call('HSET', keys[1], 'template', argv[2], 'cron', argv[3], 'tz', argv[4], 'ns', argv[5],
    'input', argv[6], 'source', source, 'updated_at', now)
  if not existed then redis.call('HSET', keys[1], 'created_at', now) end
  if not (same and redis.call('ZSCORE', keys[2], argv[1])) then
    redis.call('ZADD', keys[2], argv[7], argv[1])
  end
  return ok(existed and 'updated' or 'created')
end

-- ff_schedule_delete: delete a schedule.
-- KEYS[1]  the schedule's record
-- KEYS[2]  the index
-- ARGV[1]  name
-- Reply: {1, 1 | 0} (0: there was none)
local function ff_schedule_delete(keys, argv)
  local n = redis.call('DEL', keys[1])
  redis.call('ZREM', keys[2], argv[1])
  return ok(n)
end

-- ff_schedule_fired: record a fire of a schedule and move it to its next
-- fire time, only if it is still due at the fire time the caller read (two
-- processes firing it at once: the second finds it moved; a schedule
-- replaced meanwhile keeps its new time).
-- KEYS[1]  the schedule's record
-- KEYS[2]  the index
-- ARGV[1]  name
-- ARGV[2]  the fire time read, ms
-- ARGV[3]  next fire, ms
-- ARGV[4]  the run started ('' = none)
-- ARGV[5]  why none was started ('' = one was)
-- Reply: {1, 'advanced' | 'moved' | 'gone'}
--        | {0, 'invalid', 'fire', message} (nothing written)
local function ff_schedule_fired(keys, argv)
  if not ms_ok(argv[2]) or not ms_ok(argv[3]) then
    return refuse('invalid', 'fire', 'fire and next times must be times in ms')
  end
  local at = redis.call('ZSCORE', keys[2], argv[1])
  if not at then return ok('gone') end
  if tonumber(at) ~= tonumber(argv[2]) then return ok('moved') end
  redis.call('ZADD', keys[2], argv[3], argv[1])
  redis.call('HSET', keys[1], 'last_fire_at', argv[2], 'last_run', argv[4], 'last_error', argv[5])
  redis.call('HINCRBY', keys[1], 'fires', 1)
  return ok('advanced')
end

-- ff_schedule_note: record why a due fire started no run yet, leaving the
-- schedule due (another process may start it: one serving its template;
-- or a passing failure), only if it is still due at the fire time read.
-- KEYS[1]  the schedule's record
-- KEYS[2]  the index
-- ARGV[1]  name
-- ARGV[2]  the fire time read, ms
-- ARGV[3]  why
-- Reply: {1, 'noted' | 'moved' | 'gone'} | {0, 'invalid', 'fire', message}
local function ff_schedule_note(keys, argv)
  if not ms_ok(argv[2]) then return refuse('invalid', 'fire', 'not a time in ms: ' .. tostring(argv[2])) end
  local at = redis.call('ZSCORE', keys[2], argv[1])
  if not at then return ok('gone') end
  if tonumber(at) ~= tonumber(argv[2]) then return ok('moved') end
  redis.call('HSET', keys[1], 'last_error', argv[3])
  return ok('noted')
end

register('ff_schedule_put', ff_schedule_put)
register('ff_schedule_note', ff_schedule_note)
register('ff_schedule_delete', ff_schedule_delete)
register('ff_schedule_fired', ff_schedule_fired)
