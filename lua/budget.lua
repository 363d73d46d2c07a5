-- budget.lua: budgets (issue 5). A budget lives on a budget partition
-- {b:M} (M = fnv32a(id) % budget partitions); its id is "<ns>/<name>", or
-- "<ns>/<name>@<run id>" for a run-scoped budget. Every budget function
-- gets the definition key "<prefix>ff:{b:M}:budget:<id>" as KEYS[1] and
-- derives the other keys of the partition from it:
--   <def>:usage                      HASH dimension -> usage
--   <prefix>ff:{b:M}:breached        HASH id -> "<on_hard_limit>\t<dim>\t<usage>\t<hard>"
--                                    (budgets at a hard limit; the scheduler
--                                    caches it, see breached_moved)
--   <prefix>ff:{b:M}:breached:version STRING a counter: bumped by every
--                                    change of the breached hash but a
--                                    rewrite of the usage it records
--   <prefix>ff:{b:M}:resets          ZSET id -> next scheduled reset ms
--   <prefix>ff:{b:M}:budgets         ZSET the ids of the partition's budgets,
--                                    score 0 (the index, below)
-- ff_usage_fence, the fence of a worker's usage report, is a function of
-- the execution's partition {fp:N} instead (KEYS[1] its anchor).
--
-- Usage and limits are integers 0..2^63-1, handled as the decimal strings
-- the server stores (Lua numbers are doubles, exact only below 2^53): they
-- are compared with ucmp, never as numbers, and usage saturates at 2^63-1
-- (INT64_MAX; is_uint, in lib.lua, checks such a string).

-- uval returns a stored usage or limit as a canonical decimal string: '0'
-- for none (and for a negative usage an older version let in).
local function uval(s)
  if is_uint(s) then return s end
  return '0'
end

-- ucmp compares two canonical decimal strings of integers 0..INT64_MAX:
-- -1, 0 or 1. The parts it converts have at most ten digits, so the
-- numbers are exact.
local function ucmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  if a == b then return 0 end
  local n = #a - 9
  if n > 0 then
    local ha, hb = tonumber(string.sub(a, 1, n)), tonumber(string.sub(b, 1, n))
    if ha ~= hb then return ha < hb and -1 or 1 end
    a, b = string.sub(a, n + 1), string.sub(b, n + 1)
  end
  return tonumber(a) < tonumber(b) and -1 or 1
end

-- Budget and quota indexes. Every budget partition keeps the ids of its
-- budgets in <prefix>ff:{b:M}:budgets, every quota partition the ids of
-- its quotas in <prefix>ff:{q:K}:quotas: ZSETs whose scores are all 0, read
-- in id order (byte order) with ZRANGEBYLEX. The functions that create or
-- touch a budget or quota add its id; ff_limit_list and the sweep of
-- ff_budget_resets drop the ids whose record is gone (run-scoped budgets
-- expire), so expired ids are never listed and do not pile up.
--   <prefix>ff:{b:M}:budgets:sweep   STRING the last id the sweep examined

-- LIMIT_BATCH is how many index entries one ZRANGEBYLEX reads.
local LIMIT_BATCH = 100

-- limit_walk walks the ids of index between the ZRANGEBYLEX bounds min and
-- max in order, examining at most examine of them: an id whose record
-- (record .. id) is gone leaves the index, an id keep accepts is returned,
-- up to limit of them. Returns the ids, whether ids follow in the range
-- after the last examined (1 or 0) and that last id (nil: none examined).
local function limit_walk(index, record, min, max, examine, limit, keep)
  local out, last = {}, nil
  local function more()
    if not last then return 0 end
    return #redis.call('ZRANGEBYLEX', index, '(' .. last, max, 'LIMIT', 0, 1) > 0 and 1 or 0
  end
  while examine > 0 do
    local want = math.min(examine, LIMIT_BATCH)
    local batch = redis.call('ZRANGEBYLEX', index, min, max, 'LIMIT', 0, want)
    for _, id in ipairs(batch) do
      examine = examine - 1
      last = id
      if redis.call('EXISTS', record .. id) == 0 then
        redis.call('ZREM', index, id)
      elseif keep(id) then
        out[#out + 1] = id
        if #out >= limit then return out, more(), last end
      end
    end
    if #batch < want then return out, 0, last end
    min = '(' .. last
  end
  return out, more(), last
end

-- ff_limit_list: one page of the ids of a budget or quota partition, in
-- id order (GET /v1/budgets and /v1/quotas merge the partitions' pages).
-- It examines at most 4 * limit + 100 ids and drops those whose record is
-- gone.
-- KEYS[1]  <prefix>ff:{b:M}:budgets | <prefix>ff:{q:K}:quotas
-- ARGV[1]  lower bound, as ZRANGEBYLEX takes it: '-', '[<id>' or '(<id>'
-- ARGV[2]  upper bound: '+', '[<id>' or '(<id>'
-- ARGV[3]  limit: ids to return at most (1..1000)
-- ARGV[4]  namespace prefix '<ns>/' ('' = every namespace): only ids of
--          that namespace itself, not of '<ns>/<sub>'
-- ARGV[5]  scope: '' (any), 'shared' (ids without '@') or 'run' (with '@')
-- Reply: {1, more, last, id...}: the ids, at most limit; every id of the
--        range up to last (the last examined, '' for none) was examined;
--        more is 1 when ids follow last in the range
--        {0, 'invalid', 'bounds' | 'limit' | 'index' | 'scope', message}
local function ff_limit_list(keys, argv)
  local base, kind = string.match(keys[1], '^(.*):(%a+)s$')
  if kind ~= 'budget' and kind ~= 'quota' then
    return refuse('invalid', 'index', 'want a :budgets or :quotas key')
  end
  for i = 1, 2 do
    if argv[i] ~= '-' and argv[i] ~= '+' and not string.match(argv[i], '^[%[%(]') then
      return refuse('invalid', 'bounds', 'want -, +, [id or (id')
    end
  end
  local limit = tonumber(argv[3])
  if not limit or limit < 1 or limit > 1000 or limit ~= math.floor(limit) then
    return refuse('invalid', 'limit', 'want an integer 1..1000')
  end
  local pfx, scope = argv[4], argv[5]
  if scope ~= '' and scope ~= 'shared' and scope ~= 'run' then
    return refuse('invalid', 'scope', 'want shared or run')
  end
  local keep = function(id)
    local rest = id
    if pfx ~= '' then
      if string.sub(id, 1, #pfx) ~= pfx then return false end
      rest = string.sub(id, #pfx + 1)
    end
    local at = string.find(rest, '@', 1, true)
    if pfx ~= '' and string.find(string.sub(rest, 1, (at or 0) - 1), '/', 1, true) then
      return false -- a namespace under this one
    end
    if scope == 'shared' then return at == nil end
    if scope == 'run' then return at ~= nil end
    return true
  end
  local ids, more, last = limit_walk(keys[1], base .. ':' .. kind .. ':', argv[1], argv[2], 4 * limit + 100, limit, keep)
  return ok(more, last or '', unpack(ids))
end

-- ff_limit_index: add budgets or quotas to their partition's index (the
-- upgrade backfill: those created before the indexes existed). An id
-- whose record is not there (or is not a hash) is skipped.
-- KEYS[1]  <prefix>ff:{b:M}:budgets | <prefix>ff:{q:K}:quotas
-- ARGV[1..] ids
-- Reply: {1, ids added} | {0, 'invalid', 'index', message}
local function ff_limit_index(keys, argv)
  local base, kind = string.match(keys[1], '^(.*):(%a+)s$')
  if kind ~= 'budget' and kind ~= 'quota' then
    return refuse('invalid', 'index', 'want a :budgets or :quotas key')
  end
  local n = 0
  for _, id in ipairs(argv) do
    if redis.call('TYPE', base .. ':' .. kind .. ':' .. id)['ok'] == 'hash' then
      n = n + redis.call('ZADD', keys[1], 0, id)
    end
  end
  return ok(n)
end

local function budget_keys(def)
  local base, id = string.match(def, '^(.*):budget:(.*)$')
  return {def = def, usage = def .. ':usage', breached = base .. ':breached', resets = base .. ':resets',
    index = base .. ':budgets', base = base, id = id}
end

-- breached_moved bumps the version of the breached hash of base (a budget
-- partition's base key): every call that adds a budget to the hash,
-- removes one, or may change what it says of one but its usage calls it,
-- in the same call. The scheduler claims with a copy of the hash and
-- reads it again only when the version moved (or the copy is a second
-- old: Store.BreachVersion, scheduler admission), so a budget reaching its
-- hard limit is known to the next claim, as when every claim read the
-- hash. A report that only rewrites the usage of a budget already there
-- does not bump it: the detail it gives blocked executions is a second
-- late at worst.
local function breached_moved(base)
  redis.call('INCR', base .. ':breached:version')
end

-- breached_drop removes budget k from its partition's breached hash.
local function breached_drop(k)
  if redis.call('HDEL', k.breached, k.id) == 1 then breached_moved(k.base) end
end

-- budget_refresh recomputes whether budget k is at a hard limit (any
-- dimension with a hard limit whose usage reached it) and records it in
-- the partition's breached hash. defined says the definition may have
-- changed (an upsert): the entry's on_hard_limit may be another, so the
-- version moves even when the budget was there already. Returns the
-- breached dimension or nil.
local function budget_refresh(k, defined)
  local v = redis.call('HMGET', k.def, 'dims', 'on_hard_limit')
  local dims, mode = v[1] or '', v[2] or 'block'
  for dim in string.gmatch(dims, '[^,]+') do
    local hard = uval(redis.call('HGET', k.def, 'h:' .. dim))
    if hard ~= '0' then
      local used = uval(redis.call('HGET', k.usage, dim))
      if ucmp(used, hard) >= 0 then
        local added = redis.call('HSET', k.breached, k.id, mode .. '\t' .. dim .. '\t' .. used .. '\t' .. hard)
        if added == 1 or defined then breached_moved(k.base) end
        return dim
      end
    end
  end
  breached_drop(k)
  return nil
end

-- budget_touch renews the lifetime of a budget that has one (or makes it
-- permanent again) and adds it to its partition's index (again: a budget
-- an older version created is indexed once touched). Upserts and reports
-- call it; resets do not (a run-scoped budget with a reset interval would
-- never expire).
local function budget_touch(k)
  redis.call('ZADD', k.index, 0, k.id)
  local ttl = redis.call('HGET', k.def, 'ttl_ms')
  if ttl and ttl ~= '0' and ttl ~= '' then
    redis.call('PEXPIRE', k.def, ttl)
    redis.call('PEXPIRE', k.usage, ttl)
  else
    redis.call('PERSIST', k.def)
    redis.call('PERSIST', k.usage)
  end
end

-- budget_same reports whether budget k is defined as the upsert arguments
-- argv (its limit fields, keep: its dimension set, ndims: their count)
-- say: scope, on_hard_limit, reset, the same dimensions in any order with
-- the same limits, and with_ttl the same lifetime.
local function budget_same(k, argv, fields, keep, ndims, with_ttl)
  local want = {'scope', argv[1], 'on_hard_limit', argv[2], 'reset_ms', argv[3], 'dims', ''}
  if with_ttl then
    want[#want + 1] = 'ttl_ms'
    want[#want + 1] = argv[5]
  end
  for i = 1, #fields, 2 do
    want[#want + 1] = fields[i]
    want[#want + 1] = fields[i + 1]
  end
  local names = {}
  for i = 1, #want, 2 do names[#names + 1] = want[i] end
  local have = redis.call('HMGET', k.def, unpack(names))
  local n = 0
  for d in string.gmatch(have[4] or '', '[^,]+') do
    if not keep[d] then return false end
    n = n + 1
  end
  if n ~= ndims then return false end
  for i = 1, #names do
    if i ~= 4 and (have[i] or '') ~= want[2 * i] then return false end
  end
  return true
end

-- DURATION_DIGITS bounds the digits of a reset interval or lifetime (ms):
-- below 10^15, so that now + it stays exact.
local DURATION_DIGITS = 15

-- ff_budget_upsert: create or update a budget. Usage is kept; limits,
-- reset interval, on_hard_limit and scope are replaced; the hard-limit
-- state is recomputed (so raising a limit clears it). Every argument is
-- checked before the first write.
-- KEYS[1]  <prefix>ff:{b:M}:budget:<id>
-- ARGV[1]  scope ('shared' | 'run')
-- ARGV[2]  on_hard_limit ('block' | 'fail')
-- ARGV[3]  reset interval ms ('0' = none)
-- ARGV[4]  '1' = only create (an existing budget is left as it is, its
--          lifetime too)
-- ARGV[5]  lifetime ms ('0' = forever): the budget's keys expire after it,
--          renewed by every upsert (but an only-create one of a budget
--          that exists) and report (run-scoped budgets); resets do not
--          renew it
-- ARGV[6..] triples: dimension, hard limit, soft limit ('0' = none);
--          limits are integers 0..2^63-1
-- Reply: {1, 'created' | 'updated' | 'exists' | 'differs'}: 'differs' is
--        an existing budget left as it is although the definition given
--        (only create) is another
--        {0, 'invalid', field, message} (nothing written)
local function ff_budget_upsert(keys, argv)
  if argv[1] ~= 'shared' and argv[1] ~= 'run' then
    return refuse('invalid', 'scope', 'want shared or run')
  end
  if argv[2] ~= 'block' and argv[2] ~= 'fail' then
    return refuse('invalid', 'on_hard_limit', 'want block or fail')
  end
  if not is_uint(argv[3], DURATION_DIGITS) then
    return refuse('invalid', 'reset_interval', 'want a whole number of milliseconds')
  end
  if argv[4] ~= '0' and argv[4] ~= '1' then
    return refuse('invalid', 'only_create', 'want 0 or 1')
  end
  if not is_uint(argv[5], DURATION_DIGITS) then
    return refuse('invalid', 'ttl', 'want a whole number of milliseconds')
  end
  if #argv < 8 or (#argv - 5) % 3 ~= 0 then
    return refuse('invalid', 'dimensions', 'want triples of dimension, hard limit, soft limit')
  end
  local dims, fields, keep = {}, {}, {}
  for i = 6, #argv, 3 do
    local d = argv[i]
    if #d > 64 or not string.match(d, '^[%w_%.%-]+$') then
      return refuse('invalid', 'dimensions', 'dimension ' .. clip(d) .. ': want 1..64 letters, digits, _ - .')
    end
    if keep[d] then return refuse('invalid', 'dimensions', 'dimension ' .. d .. ' appears twice') end
    if not is_uint(argv[i + 1]) or not is_uint(argv[i + 2]) then
      return refuse('invalid', 'dimensions', 'dimension ' .. d .. ': limits must be integers 0..' .. INT64_MAX)
    end
    keep[d] = true
    dims[#dims + 1] = d
    fields[#fields + 1] = 'h:' .. d
    fields[#fields + 1] = argv[i + 1]
    fields[#fields + 1] = 's:' .. d
    fields[#fields + 1] = argv[i + 2]
  end
  local k = budget_keys(keys[1])
  local now = now_ms()
  local existed = redis.call('EXISTS', k.def) == 1
  if existed and argv[4] == '1' then
    redis.call('ZADD', k.index, 0, k.id) -- indexed if an older version created it
    return ok(budget_same(k, argv, fields, keep, #dims, false) and 'exists' or 'differs')
  end
  if existed and budget_same(k, argv, fields, keep, #dims, true)
      and (argv[3] == '0' or redis.call('ZSCORE', k.resets, k.id) ~= false) then
    -- The definition it has (a server start declaring it again): only
    -- the lifetime is renewed, and updated_at stays when it changed.
    budget_touch(k)
    return ok('updated')
  end
  local old = existed and (redis.call('HGET', k.def, 'dims') or '') or ''
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
  budget_refresh(k, true)
  budget_touch(k)
  return ok(existed and 'updated' or 'created')
end

-- ff_budget_report: add usage to one dimension, once per dedup key. The
-- usage saturates at 2^63-1.
-- KEYS[1]  <prefix>ff:{b:M}:budget:<id>
-- KEYS[2]  <prefix>ff:{b:M}:usagededup:<id>:<dedup key> (or KEYS[1] when none)
-- ARGV[1]  dimension
-- ARGV[2]  delta (integer 0..2^63-1)
-- ARGV[3]  dedup key lifetime, ms
-- Reply: {1, status, usage, hard, soft} with status 'applied', 'duplicate'
--        (the dedup key was seen: nothing added), 'soft_breach' (this report
--        crossed the soft limit) or 'hard_breach' (this report reached the
--        hard limit); usage and limits as decimal strings
--        {0, 'not_found'} (no such budget)
--        {0, 'invalid', 'dimension' | 'delta' | 'dedup_ttl', message}
--        (nothing written)
local function ff_budget_report(keys, argv)
  local k = budget_keys(keys[1])
  local dim, delta = argv[1], argv[2]
  if not is_uint(delta) then
    return refuse('invalid', 'delta', 'want an integer 0..' .. INT64_MAX)
  end
  if keys[2] ~= keys[1] and (not is_uint(argv[3], DURATION_DIGITS) or argv[3] == '0') then
    return refuse('invalid', 'dedup_ttl', 'want a positive whole number of milliseconds')
  end
  local v = redis.call('HMGET', k.def, 'dims', 'h:' .. dim, 's:' .. dim)
  if not v[1] then return refuse('not_found') end
  local found = false
  for d in string.gmatch(v[1], '[^,]+') do
    if d == dim then found = true end
  end
  if not found then return refuse('invalid', 'dimension', 'budget ' .. k.id .. ' has no dimension ' .. dim) end
  local hard, soft = uval(v[2]), uval(v[3])
  local before = uval(redis.call('HGET', k.usage, dim))
  if keys[2] ~= keys[1] and redis.call('EXISTS', keys[2]) == 1 then
    return ok('duplicate', before, hard, soft)
  end
  local now = now_ms()
  local r = redis.pcall('HINCRBY', k.usage, dim, delta)
  if not tonumber(r) then
    -- An error reply: past 2^63-1 the usage stays at its largest value.
    if not string.find(r.err or '', 'overflow', 1, true) then return r end
    redis.call('HSET', k.usage, dim, INT64_MAX)
  end
  -- HINCRBY's reply is a Lua number, inexact past 2^53: read the string.
  local after = uval(redis.call('HGET', k.usage, dim))
  local status = 'applied'
  if soft ~= '0' and ucmp(before, soft) < 0 and ucmp(after, soft) >= 0 then
    status = 'soft_breach'
    redis.call('HINCRBY', k.def, 'soft_breaches', 1)
    redis.call('HSET', k.def, 'last_soft_breach_at', ts(now), 'last_soft_breach_dim', dim)
  end
  if hard ~= '0' and ucmp(before, hard) < 0 and ucmp(after, hard) >= 0 then
    status = 'hard_breach'
    redis.call('HINCRBY', k.def, 'hard_breaches', 1)
    redis.call('HSET', k.def, 'last_hard_breach_at', ts(now), 'last_hard_breach_dim', dim)
  end
  if hard ~= '0' and ucmp(after, hard) >= 0 then
    -- At or past the limit: the breached entry (and so the detail of what
    -- it blocks) says the usage as it is now, not as it was when crossed.
    budget_refresh(k, false)
  end
  if keys[2] ~= keys[1] then
    redis.call('SET', keys[2], '1', 'PX', argv[3])
  end
  budget_touch(k)
  return ok(status, after, hard, soft)
end

-- budget_reset zeroes the usage of budget k and schedules the next reset.
-- It does not renew the budget's lifetime: a run-scoped budget expires
-- RunBudgetTTL after its last upsert or report, whatever its resets.
local function budget_reset(k, now)
  redis.call('DEL', k.usage)
  local reset = num(redis.call('HGET', k.def, 'reset_ms'))
  redis.call('HINCRBY', k.def, 'resets', 1)
  redis.call('HSET', k.def, 'last_reset_at', ts(now))
  if reset > 0 then
    redis.call('HSET', k.def, 'next_reset_at', ts(now + reset))
    redis.call('ZADD', k.resets, ts(now + reset), k.id)
  end
  breached_drop(k)
end

-- ff_budget_reset: reset a budget now (API).
-- KEYS[1]  <prefix>ff:{b:M}:budget:<id>
-- Reply: {1, next_reset_at (0 = none)} | {0, 'not_found'}
local function ff_budget_reset(keys, argv)
  local k = budget_keys(keys[1])
  if redis.call('EXISTS', k.def) == 0 then return refuse('not_found') end
  redis.call('ZADD', k.index, 0, k.id)
  local now = now_ms()
  budget_reset(k, now)
  return ok(num(redis.call('HGET', k.def, 'next_reset_at')))
end

-- ff_budget_resets: the scheduled resets of one budget partition that are
-- due (the budget reset scanner). It also drops, from a random sample of
-- the breached hash, entries of budgets that expired (run-scoped budgets of
-- old runs), and resets of budgets that no longer exist; and it sweeps
-- limit ids of the partition's index (<base>:budgets) from where the last
-- sweep stopped (<base>:budgets:sweep), dropping those of budgets that
-- expired, so that they do not pile up when nobody lists budgets.
-- KEYS[1]  <prefix>ff:{b:M}:resets
-- ARGV[1]  limit
-- Reply: {1, processed, more}
--        {0, 'invalid', 'limit', message} (nothing written)
local function ff_budget_resets(keys, argv)
  local limit, bad = int_arg(argv[1], 'limit', 1)
  if not limit then return bad end
  local base = string.sub(keys[1], 1, -8) -- strip ':resets'
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
      breached_drop(budget_keys(base .. ':budget:' .. id))
    end
  end
  local sweep = base .. ':budgets:sweep'
  local from = redis.call('GET', sweep)
  local _, more, last = limit_walk(base .. ':budgets', base .. ':budget:', from and '(' .. from or '-', '+', limit,
    limit, function() return false end)
  if more == 1 then
    redis.call('SET', sweep, last)
  elseif from then
    redis.call('DEL', sweep) -- the end: the next sweep starts again
  end
  return ok(n, #list >= limit and 1 or 0)
end

-- ff_budget_delete: delete a run-scoped budget whose run retention
-- deleted (Store.PurgeTerminal): its definition, usage, breached entry,
-- scheduled reset and index entry. Nothing can count against it any more
-- (its run's members are gone with the run, and a deleted run is never
-- replayed), so it stops costing the readers of the breached hash at
-- once rather than when its lifetime ends (RunBudgetTTL after its last
-- report). Its usage dedup keys expire on their own.
-- KEYS[1]  <prefix>ff:{b:M}:budget:<id>
-- Reply: {1, 1 | 0 (there was no such budget)}
--        {0, 'invalid', 'id', message} (not a run-scoped id; nothing
--        written)
local function ff_budget_delete(keys, argv)
  local k = budget_keys(keys[1])
  if not k.id or not string.find(k.id, '@', 1, true) then
    return refuse('invalid', 'id', 'only a run-scoped budget is deleted with its run')
  end
  local n = redis.call('DEL', k.def, k.usage)
  breached_drop(k)
  redis.call('ZREM', k.resets, k.id)
  redis.call('ZREM', k.index, k.id)
  return ok(n > 0 and 1 or 0)
end

-- ff_usage_fence: the fence of a worker's usage report, on the execution's
-- partition (budgets live on others: the store charges them after this
-- call, see Store.ReportAttemptUsage). The lease must be the execution's
-- current one and unexpired, and neither the attempt's timeout nor the
-- execution's deadline may have passed (lease_check, as for ff_renew and
-- ff_finish); a limit found passed ends the attempt on the spot, as its
-- scanner would have. A report that passes is recorded under its dedup
-- key, "<base>:usagefence:<uuid>:<dedup key>" = "<dimension>\t<delta>" for
-- the dedup lifetime: its retry (the charges failed) passes again even
-- after the lease ended, so a report the fence accepted is never lost to a
-- retry that comes too late. An execution that counts against no budget
-- charges nothing: nothing is recorded for it.
-- KEYS[1]  partition anchor
-- ARGV[1]  uuid
-- ARGV[2]  lease id
-- ARGV[3]  lease epoch
-- ARGV[4]  dedup key ('' = none: nothing recorded)
-- ARGV[5]  dimension
-- ARGV[6]  delta
-- ARGV[7]  dedup lifetime, ms
-- Reply: {1, budgets} (the ids of the budgets it counts against,
--        comma-joined)
--        {0, 'not_found'} | {0, 'stale_lease', reason, public_state}
--        {0, 'invalid', 'dedup_ttl', message} (nothing written)
local function ff_usage_fence(keys, argv)
  local dedup = argv[4]
  if dedup ~= '' and (not is_uint(argv[7], DURATION_DIGITS) or argv[7] == '0') then
    return refuse('invalid', 'dedup_ttl', 'want a positive whole number of milliseconds')
  end
  local p = part(keys[1])
  local c = read_core(p, argv[1])
  if not c then return refuse('not_found') end
  local seen, what
  if dedup ~= '' then
    seen = p.base .. ':usagefence:' .. c.u .. ':' .. dedup
    what = argv[5] .. '\t' .. argv[6]
    if redis.call('GET', seen) == what then
      return ok(redis.call('HGET', c.key, 'budgets') or '') -- accepted before
    end
  end
  local now = now_ms()
  local why = lease_check(c, argv[2], argv[3], now)
  if why then
    local r = stale_refusal(p, c, why, now, ts(now), 1)
    flush(p)
    return r
  end
  local budgets = redis.call('HGET', c.key, 'budgets') or ''
  if seen and budgets ~= '' then redis.call('SET', seen, what, 'PX', argv[7]) end
  return ok(budgets)
end

register('ff_budget_upsert', ff_budget_upsert)
register('ff_budget_report', ff_budget_report)
register('ff_budget_reset', ff_budget_reset)
register('ff_budget_resets', ff_budget_resets)
register('ff_budget_delete', ff_budget_delete)
register('ff_usage_fence', ff_usage_fence)
register('ff_limit_list', ff_limit_list)
register('ff_limit_index', ff_limit_index)
