-- quota.lua: admission quotas (issue 5). A quota lives on a quota
-- partition {q:K} (K = fnv32a(id) % quota partitions); its id is
-- "<ns>/<name>". A reference ("subject") is the id, or "<id>=<key value>"
-- for a keyed quota, whose limits apply to each key value separately.
--   <prefix>ff:{q:K}:quota:<id>              HASH definition: rate, window_ms,
--                                            concurrency, jitter_ms, key
--   <prefix>ff:{q:K}:quota:<id>:keys         SET key values seen (keyed quotas)
--   <prefix>ff:{q:K}:quota:<subject>:window  ZSET admissions in the sliding
--                                            window: holder -> admission ms
--   <prefix>ff:{q:K}:quota:<subject>:slots   ZSET concurrency slots: holder ->
--                                            admission ms, or when the slot
--                                            reconciler last found it running
--   <prefix>ff:{q:K}:quota:<subject>:paused  HASH until (ms), reason, at: no
--                                            admission before until (expires
--                                            then)
--   <prefix>ff:{q:K}:quotas                  ZSET the ids of the partition's
--                                            quotas, score 0 (see budget.lua)
-- A holder is "<execution id>#<attempt>#<token>": one admission per attempt
-- and admitting call (the token is random per ClaimAdmitted call, so two
-- schedulers admitting the same candidate at once hold separate slots and
-- each gives back its own unused one: a slot in use is never released by
-- someone else). The attempt is "<attempt>.<resets>" for a flow member a
-- replay reset (resets > 0): a replay puts a member back to the attempt
-- number it had, and an admission of it taken before the reset is not one
-- for the attempt after it.

-- ff_quota_upsert: create or update a quota definition. Windows and slots
-- are kept. The quota's id is added to <prefix>ff:{q:K}:quotas, its
-- partition's index. Every argument is checked before the first write.
-- KEYS[1]  definition key
-- ARGV[1]  rate (admissions per window, '0' = no rate limit)
-- ARGV[2]  window ms
-- ARGV[3]  concurrency cap ('0' = none)
-- ARGV[4]  jitter ms
-- ARGV[5]  key field path ('' = unkeyed)
-- ARGV[6]  '1' = only create, '0' = create or update
-- Reply: {1, 'created' | 'updated' | 'exists' | 'differs'}: 'differs' is
--        an existing definition left as it is although the one given
--        (only create) is another
--        {0, 'invalid', field, message} (nothing written): rate and
--        concurrency not whole numbers (up to 19 digits), or both 0 (a
--        quota that limits nothing: field rate), window and jitter not
--        whole numbers of ms, no key path, only create not 0 or 1
local function ff_quota_upsert(keys, argv)
  if not is_uint(argv[1]) then return refuse('invalid', 'rate', 'want a whole number') end
  if not is_uint(argv[2], 15) then return refuse('invalid', 'window', 'want a whole number of milliseconds') end
  if not is_uint(argv[3]) then return refuse('invalid', 'concurrency', 'want a whole number') end
  if argv[1] == '0' and argv[3] == '0' then
    return refuse('invalid', 'rate', 'a quota needs a rate or a concurrency limit')
  end
  if not is_uint(argv[4], 15) then return refuse('invalid', 'jitter', 'want a whole number of milliseconds') end
  if not argv[5] then return refuse('invalid', 'key', "want a key field path ('' for none)") end
  if argv[6] ~= '0' and argv[6] ~= '1' then return refuse('invalid', 'only_create', 'want 0 or 1') end
  local base, id = string.match(keys[1], '^(.*):quota:(.*)$')
  local existed = redis.call('EXISTS', keys[1]) == 1
  -- The partition's index (see budget.lua); again when it exists, in case
  -- an older version created it.
  redis.call('ZADD', base .. ':quotas', 0, id)
  if existed then
    local d = redis.call('HMGET', keys[1], 'rate', 'window_ms', 'concurrency', 'jitter_ms', 'key')
    local same = true
    for i = 1, 5 do
      if (d[i] or '') ~= argv[i] then same = false end
    end
    if argv[6] == '1' then return ok(same and 'exists' or 'differs') end
    -- The definition it has (a server start declaring it again):
    -- nothing to write, and updated_at stays when it changed.
    if same then return ok('updated') end
  end
  local now = now_ms()
  redis.call('HSET', keys[1], 'rate', argv[1], 'window_ms', argv[2], 'concurrency', argv[3],
    'jitter_ms', argv[4], 'key', argv[5], 'updated_at', ts(now))
  if not existed then redis.call('HSET', keys[1], 'created_at', ts(now)) end
  return ok(existed and 'updated' or 'created')
end

-- ff_quota_admit: admit attempts of executions under one quota subject, in
-- order: for each holder, record the admission in the sliding window and
-- take a concurrency slot, or deny. Idempotent per holder: a holder that
-- already has a slot is admitted again without recording anything.
-- KEYS[1]  definition key
-- KEYS[2]  window key of the subject
-- KEYS[3]  slots key of the subject
-- KEYS[4]  paused key of the subject
-- ARGV[1]  key value ('' = unkeyed)
-- ARGV[2]  jitter seed (random integer)
-- ARGV[3]  the subject (recorded in <prefix>ff:{q:K}:subjects for the
--          slot reconciler)
-- ARGV[4..] holders ("<execution id>#<attempt>#<token>")
-- Reply: {1, item...} with item = {'admitted' | 'already', '', 0, window count, active count}
--        or {'denied', 'rate' | 'concurrency' | 'contended', retry after ms, window count, active count}
--        ('contended': at the concurrency cap, one of the slots held for
--        this execution's same attempt under another token)
--        or {'denied', 'paused', ms until the pause ends (plus jitter), window count,
--        active count, pause end ms, reason}
--        {0, 'not_found'} (no such quota)
-- CONTENDED_SCAN bounds the slots held_for reads: a denial past it is
-- reported as a plain concurrency denial.
local CONTENDED_SCAN = 64

-- held_for reports whether slots (a subject's slot key) holds a slot of
-- holder's execution and attempt (and reset count) under another token.
local function held_for(slots, holder)
  local attempt = string.match(holder, '^(.-#[^#]*#)')
  if not attempt then return false end
  for _, h in ipairs(redis.call('ZRANGE', slots, 0, -1)) do
    if string.sub(h, 1, #attempt) == attempt then return true end
  end
  return false
end

local function ff_quota_admit(keys, argv)
  local d = redis.call('HMGET', keys[1], 'rate', 'window_ms', 'concurrency', 'jitter_ms')
  if not d[1] then return refuse('not_found') end
  local rate, window, cap, jitter = num(d[1]), num(d[2]), num(d[3]), num(d[4])
  local now = now_ms()
  local pause = redis.call('HMGET', keys[4], 'until', 'reason')
  local paused_to = tonumber(pause[1] or '') or 0
  if paused_to <= now then paused_to = 0 end
  if rate > 0 and window > 0 then
    redis.call('ZREMRANGEBYSCORE', keys[2], '-inf', ts(now - window))
  end
  local in_window = redis.call('ZCARD', keys[2])
  local active = redis.call('ZCARD', keys[3])
  local oldest
  local items = {}
  local took = false
  for i = 4, #argv do
    local holder = argv[i]
    local extra = 0
    if jitter > 0 then extra = math.floor(jitter_frac(argv[2], i) * jitter) end
    if redis.call('ZSCORE', keys[3], holder) then
      items[#items + 1] = {'already', '', 0, in_window, active}
    elseif paused_to > 0 then
      items[#items + 1] = {'denied', 'paused', paused_to - now + extra, in_window, active, ts(paused_to), pause[2] or ''}
    elseif cap > 0 and active >= cap then
      -- No time to wait for: a slot frees when an attempt ends (jitter
      -- spreads the retries of rate and pause denials only). A slot held
      -- for this very attempt by another caller (another scheduler
      -- admitted it too) is 'contended': that caller's claim grants it.
      local cause = 'concurrency'
      if active <= CONTENDED_SCAN and held_for(keys[3], holder) then cause = 'contended' end
      items[#items + 1] = {'denied', cause, 0, in_window, active}
    elseif rate > 0 and in_window >= rate then
      if not oldest then
        local o = redis.call('ZRANGE', keys[2], 0, 0, 'WITHSCORES')
        oldest = o[2] and num(o[2]) or now
      end
      local wait = oldest + window - now
      if wait < 0 then wait = 0 end
      items[#items + 1] = {'denied', 'rate', wait + extra, in_window, active}
    else
      if rate > 0 then
        redis.call('ZADD', keys[2], ts(now), holder)
        in_window = in_window + 1
      end
      redis.call('ZADD', keys[3], ts(now), holder)
      active = active + 1
      took = true
      items[#items + 1] = {'admitted', '', 0, in_window, active}
    end
  end
  if took then
    if rate > 0 then redis.call('PEXPIRE', keys[2], string.format('%d', window + 1000)) end
    redis.call('SADD', string.match(keys[1], '^(.*):quota:') .. ':subjects', argv[3])
    if argv[1] ~= '' then
      redis.call('SADD', keys[1] .. ':keys', argv[1])
    end
  end
  return ok(unpack(items))
end

-- ff_quota_pause: pause admissions under one subject of a quota until a
-- time (attempts admitted before keep running and keep their slots), or
-- end a pause. A keyed subject paused is listed with the quota's keys and
-- subjects (so that ff_quota_forget drops its key value once the pause
-- ended).
-- KEYS[1]  definition key (<prefix>ff:{q:K}:quota:<id>)
-- KEYS[2]  paused key of the subject
-- ARGV[1]  the pause's end, ms since the epoch; '0' = end the pause now;
--          '' = ARGV[4] from the server's clock
-- ARGV[2]  reason
-- ARGV[3]  key value ('' = unkeyed)
-- ARGV[4]  the pause's length, ms, when ARGV[1] is ''
-- Reply: {1, 'paused', end ms} | {1, 'resumed'} | {1, 'not_paused'}
--        | {0, 'not_found'} (no such quota)
--        | {0, 'invalid', 'until' | 'for_ms' | 'key' | 'args', message}
--        (nothing written; a pause ends at most 7 days ahead)
local PAUSE_MAX_MS = 7 * 24 * 3600 * 1000

local function ff_quota_pause(keys, argv)
  if #argv ~= 4 then return refuse('invalid', 'args', 'want end, reason, key value, length') end
  local now = now_ms()
  local to
  if argv[1] == '' then
    local d = tonumber(argv[4])
    if not d or d < 1 or d ~= math.floor(d) or d > PAUSE_MAX_MS then
      return refuse('invalid', 'for_ms', 'not a whole number of ms from 1 to 7 days: ' .. argv[4])
    end
    to = now + d
  else
    to = tonumber(argv[1])
    if not to or to < 0 or to ~= math.floor(to) then
      return refuse('invalid', 'until', 'not a whole number of ms: ' .. argv[1])
    end
  end
  local key = redis.call('HGET', keys[1], 'key')
  if not key then return refuse('not_found') end
  if key == '' and argv[3] ~= '' then
    return refuse('invalid', 'key', 'the quota is not keyed: give no key value')
  elseif key ~= '' and argv[3] == '' then
    return refuse('invalid', 'key', 'the quota is keyed by ' .. key .. ': give the key value')
  end
  local base, id = string.match(keys[1], '^(.*):quota:(.*)$')
  if to ~= 0 then
    if to <= now then return refuse('invalid', 'until', 'the end of the pause has passed') end
    -- A minute of slack: the caller checked 7 days by its own clock.
    if to - now > PAUSE_MAX_MS + 60000 then return refuse('invalid', 'until', 'more than 7 days ahead') end
  end
  redis.call('ZADD', base .. ':quotas', 0, id) -- indexed if an older version created it
  if to == 0 then
    if redis.call('DEL', keys[2]) == 1 then return ok('resumed') end
    return ok('not_paused')
  end
  redis.call('HSET', keys[2], 'until', ts(to), 'reason', argv[2], 'at', ts(now))
  redis.call('PEXPIREAT', keys[2], ts(to))
  if argv[3] ~= '' then
    redis.call('SADD', keys[1] .. ':keys', argv[3])
    redis.call('SADD', base .. ':subjects', id .. '=' .. argv[3])
  end
  return ok('paused', to)
end

-- ff_quota_release: free the slots of holders (idempotent). With ARGV[1] =
-- '1' (the admission was never used: its claim did not grant it) the
-- admissions leave the window too.
-- KEYS[1]  slots key of the subject
-- KEYS[2]  window key of the subject
-- ARGV[1]  '1' = also forget the admissions
-- ARGV[2..] holders
-- Reply: {1, slots freed}
local function ff_quota_release(keys, argv)
  local holders = {}
  for i = 2, #argv do holders[#holders + 1] = argv[i] end
  if #holders == 0 then return ok(0) end
  local n = redis.call('ZREM', keys[1], unpack(holders))
  if argv[1] == '1' then redis.call('ZREM', keys[2], unpack(holders)) end
  return ok(n)
end

-- ff_quota_forget: forget subjects that hold no slot and have no admission
-- in their window (so the subjects and key value sets do not grow without
-- bound); an admission later records them again.
-- KEYS[1]  <prefix>ff:{q:K}:subjects
-- ARGV[1..] subjects
-- Reply: {1, forgotten}
local function ff_quota_forget(keys, argv)
  local base = string.sub(keys[1], 1, -10) -- strip ':subjects'
  local n = 0
  for _, sub in ipairs(argv) do
    local k = base .. ':quota:' .. sub
    if redis.call('ZCARD', k .. ':slots') == 0 and redis.call('ZCARD', k .. ':window') == 0
        and redis.call('EXISTS', k .. ':paused') == 0 then
      n = n + redis.call('SREM', keys[1], sub)
      local id, key = string.match(sub, '^([^=]*)=(.*)$')
      if id then redis.call('SREM', base .. ':quota:' .. id .. ':keys', key) end
    end
  end
  return ok(n)
end

register('ff_quota_upsert', ff_quota_upsert)
register('ff_quota_forget', ff_quota_forget)
register('ff_quota_admit', ff_quota_admit)
register('ff_quota_release', ff_quota_release)
register('ff_quota_pause', ff_quota_pause)
