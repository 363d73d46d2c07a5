-- lib.lua: helpers shared by every function of the library. They are local
-- to the library and cannot be called with FCALL.
--
-- Conventions (spec/runtime.md, "Functions"):
--   * KEYS[1] of every partition function is the partition's lane registry
--     "<prefix>ff:{fp:N}:lanes" (the anchor). Keys the caller knows are
--     passed as further KEYS; keys that depend on what the function reads
--     (an execution's lane indexes, candidates of a claim) are derived from
--     the anchor, so every key of a call shares the hash tag {fp:N}.
--   * Replies are envelopes: {1, ...} on success, {0, code, detail...} on a
--     refused request. Batch functions reply {1, item, item, ...} where each
--     item is an envelope. A Lua error is a bug, never a refusal.
--   * The server's TIME is the only clock. Times are integer milliseconds.
--   * Numbers are handed to redis.call as decimal strings (ts, itoa): Redis
--     7.0 prints a Lua number with %.17g, which is slow, and Lua's own
--     number-to-string conversion is not much cheaper.
--   * The state vector is one field, "state": the seven dimensions
--     separated by spaces, in the order lifecycle, ownership, eligibility,
--     blocking reason, outcome, attempt state, public state. Writing one
--     field instead of seven keeps transitions cheap; sv() builds it and
--     vec() splits it. blocking_detail is a field of its own.
--   * Index updates of a call are collected (zadd/zrem) and applied once per
--     key at the end (flush), removals first; a removal drops an addition
--     of the same member collected before it, so the last update of a
--     member wins.

-- The server runs a library's functions with an empty globals table whose
-- metatable leads to the real globals, so every use of a global name
-- (redis, string, tonumber, unpack, ...) costs three table lookups. The
-- library keeps the globals it uses in locals of the same names, bound by
-- the first call into the library (bind, from the callbacks register
-- makes); while FUNCTION LOAD runs the top level, only the loading API
-- (redis.register_function, redis.log) exists, so nothing at the top
-- level may use the others.
local redis = redis
local string, math, table, tonumber, tostring, unpack, select, ipairs, pairs
local bound = false
local GC_PAUSE = 400

local function bind()
  local g = _G
  redis, string, math, table = g.redis, g.string, g.math, g.table
  tonumber, tostring, unpack, select, ipairs, pairs = g.tonumber, g.tostring, g.unpack, g.select, g.ipairs, g.pairs
  -- The collector starts a cycle when the heap has grown to GC_PAUSE % of
  -- what the last one left (Lua's default: 200). Each cycle traverses the
  -- whole library (its code and caches), and the calls allocate fast (a
  -- hand-off finish builds tables and strings for every member): at 400,
  -- a hand-off finish runs 2.6 % fewer instructions (scripts/lua-cost.sh),
  -- for a heap that may reach four times its live size instead of twice
  -- (a few MB). The setting is the server's functions engine's, shared
  -- with any other library loaded there.
  g.collectgarbage('setpause', GC_PAUSE)
  bound = true
end

-- register registers fn(keys, argv) as the function called
-- name_<LIBRARY_VERSION>, with flags (a list, optional): versioned names
-- let two versions of the library share a server (see lua.go).
local function register(name, fn, flags)
  redis.register_function{function_name = name .. '_' .. LIBRARY_VERSION, flags = flags, callback = function(keys, argv)
    if not bound then bind() end
    return fn(keys, argv)
  end}
end

-- Eligible score: lower is claimed first. Priority occupies the high part,
-- creation age the low part; both stay exact below 2^53.
local SCORE_EPOCH_MS = 1735689600000 -- 2025-01-01T00:00:00Z
local SCORE_AGE_SPAN = 2199023255552 -- 2^41 ms, about 69 years
local PRIORITY_MAX = 1000
local ERROR_MAX = 4096
local RECLAIMS_DEFAULT = 3 -- Go: store.MaxReclaimsDefault

-- The clock of the current call, as a number and as the string the server
-- stores: formatting numbers inside the server is expensive (Redis 7.0
-- prints them with %.17g), so each call formats its time once, from the
-- strings TIME returns.
local CLOCK_NOW, CLOCK_S = -1, ''
local MS3 = {} -- "000".."999", cached

local function now_ms()
  local t = redis.call('TIME')
  local ms = math.floor(tonumber(t[2]) / 1000)
  local s3 = MS3[ms]
  if not s3 then
    s3 = string.format('%03d', ms)
    MS3[ms] = s3
  end
  CLOCK_NOW = tonumber(t[1]) * 1000 + ms
  CLOCK_S = t[1] .. s3
  return CLOCK_NOW
end

-- ts returns the decimal string of an integral time or score: the cached
-- string of the call's clock, else a %d format (cheaper than the server's
-- conversion of a Lua number).
local function ts(x)
  if x == CLOCK_NOW then return CLOCK_S end
  return string.format('%d', x)
end

-- Strings of small integers, cached: turning a number into a string inside
-- the server is expensive.
local INTS = {}

local function itoa(n)
  local s = INTS[n]
  if not s then
    s = tostring(n)
    if n >= 0 and n < 1024 then INTS[n] = s end
  end
  return s
end

-- Numbers of short strings (counts, epochs, priorities), cached: tonumber
-- parses its argument twice. Dropped whole at NUMS_MAX entries.
local NUMS_MAX = 4096
local NUMS, NUMS_N = {}, 0

local function num(s)
  if not s or s == '' then return 0 end
  local n = NUMS[s]
  if n then return n end
  n = tonumber(s)
  if not n then return 0 end -- not cached: the cache holds numbers only (numv)
  if #s <= 4 then
    if NUMS_N >= NUMS_MAX then NUMS, NUMS_N = {}, 0 end
    NUMS[s] = n
    NUMS_N = NUMS_N + 1
  end
  return n
end

-- numv returns the number s holds, or nil when it holds none: the check of
-- an argument that a later num() reads (from num's cache when it has s).
local function numv(s)
  if not s then return nil end
  return NUMS[s] or tonumber(s)
end

-- px_ok reports whether s is a lifetime SET ... PX accepts: a positive
-- integer of milliseconds (checked before a call's first write, since the
-- SET of an idempotency key comes after the records it names).
local function px_ok(s)
  return s ~= nil and #s <= 15 and string.find(s, '^[1-9]%d*$') ~= nil
end

-- items_ok reports whether argv[i..] is a list of items, each the number n
-- of the entries that follow and those entries: at least fixed of them,
-- then field/value pairs; and whether, in each, the entries at the
-- offsets of numbers (from the item's count, at most fixed, so that they
-- exist once the count is checked) hold numbers. Batch functions check
-- every item with it before the first is written: an item found malformed
-- after earlier items were written would end the call with their records
-- written and their index updates (applied at the end, flush) lost. numv
-- is inlined: staging checks every member.
local function items_ok(argv, i, fixed, numbers)
  local last, k = #argv, #numbers
  while i <= last do
    local n = argv[i]
    n = NUMS[n] or tonumber(n)
    if not n or n < fixed or (n - fixed) % 2 ~= 0 or i + n > last then return false end
    for j = 1, k do
      local s = argv[i + numbers[j]]
      if not (NUMS[s] or tonumber(s)) then return false end
    end
    i = i + n + 1
  end
  return true
end

-- entry_iter returns a stateless iterator over the entries "<a><sep><b>"
-- of a comma-separated list (an edge list "<uuid>:<on>,...", an upstream
-- list "<name>=<uuid>,..."): for _, a, b in iter, list, 1 do. It splits
-- with plain finds: the equivalent gmatch pattern costs about three times
-- as much per entry. An entry without sep ends the walk (staging writes
-- none).
local function entry_iter(sep)
  return function(s, i)
    local n = #s
    if i > n then return nil end
    local j = string.find(s, ',', i, true) or n + 1
    local k = string.find(s, sep, i, true)
    if not k or k > j then return nil end
    return j + 1, string.sub(s, i, k - 1), string.sub(s, k + 1, j - 1)
  end
end
local each_edge, each_up = entry_iter(':'), entry_iter('=')

local function ok(...)
  return {1, ...}
end

local function refuse(code, ...)
  return {0, code, ...}
end

local function clip(s)
  if #s > ERROR_MAX then return string.sub(s, 1, ERROR_MAX) end
  return s
end

-- INT64_MAX is the largest usage or limit.
local INT64_MAX = '9223372036854775807'

-- is_uint reports whether s is the canonical decimal form of an integer in
-- 0..INT64_MAX (what Go's strconv.FormatInt writes for one), at most
-- maxlen digits (default 19).
local function is_uint(s, maxlen)
  if not s or not string.match(s, '^%d+$') then return false end
  if #s > 1 and string.byte(s, 1) == 48 then return false end -- a leading '0'
  if #s > (maxlen or 19) then return false end
  return #s < 19 or s <= INT64_MAX
end

-- int_arg returns the number that argument s holds when is_uint(s, 15)
-- (15 digits: exact as a Lua number, and now + it too: what the store
-- sends for a count, a limit or a time in ms) and it lies in lo..hi (hi
-- nil: no bound but that), else nil and the
-- refusal {0, 'invalid', name, message} for the caller to return: the
-- check, before the first write, of a number argument such as a limit,
-- an age or a lifetime.
local function int_arg(s, name, lo, hi)
  if is_uint(s, 15) then
    local n = NUMS[s] or tonumber(s)
    if n >= lo and (not hi or n <= hi) then return n end
  end
  local want = hi and string.format('%d..%d', lo, hi) or string.format('%d or more', lo)
  return nil, refuse('invalid', name, 'want a whole number ' .. want .. ', got ' .. clip(tostring(s)))
end

local function eligible_score(priority, created)
  local age = created - SCORE_EPOCH_MS
  if age < 0 then age = 0 end
  return (PRIORITY_MAX - priority) * SCORE_AGE_SPAN + age
end

-- derive_public is the one rule mapping the state vector to public_state
-- (Go: store.DerivePublicState).
local function derive_public(lifecycle, eligibility, outcome)
  if lifecycle == 'active' then
    return 'active'
  elseif lifecycle == 'terminal' then
    if outcome == 'success' then return 'completed'
    elseif outcome == 'cancelled' then return 'cancelled'
    elseif outcome == 'expired' then return 'expired'
    elseif outcome == 'skipped' then return 'skipped'
    end
    return 'failed'
  end
  if eligibility == 'not_eligible_until_time' then return 'delayed'
  elseif eligibility == 'blocked_by_dependencies' then return 'pending'
  elseif eligibility == 'blocked_by_budget' or eligibility == 'blocked_by_quota'
      or eligibility == 'blocked_by_route' then return 'blocked'
  end
  return 'waiting'
end

-- Built state strings, in nested tables by the six independent dimensions
-- (so that a lookup builds no string). The cache is bounded by the number
-- of valid combinations (well under a thousand).
local STATES = {}

local function sub(t, k)
  local v = t[k]
  if not v then
    v = {}
    t[k] = v
  end
  return v
end

-- sv returns the state field of a state vector.
local function sv(lifecycle, ownership, eligibility, reason, outcome, attempt)
  local t = sub(sub(sub(sub(sub(STATES, lifecycle), ownership), eligibility), reason), outcome)
  local v = t[attempt]
  if not v then
    v = table.concat({lifecycle, ownership, eligibility, reason, outcome, attempt,
      derive_public(lifecycle, eligibility, outcome)}, ' ')
    t[attempt] = v
  end
  return v
end

-- Split state fields, by field: a state field takes one of a few hundred
-- values, and splitting one with a pattern costs more than the rest of a
-- transition's Lua. Bounded like the sets of worker.lua; callers never
-- change a split state.
local VECS_MAX = 1024
local VECS, VECS_N = {}, 0

-- vec splits a state field into a table of its dimensions.
local function vec(st)
  st = st or ''
  local v = VECS[st]
  if v then return v end
  local l, o, e, r, out, a, pub = string.match(st, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  v = {lifecycle = l, ownership = o, eligibility = e, reason = r, outcome = out, attempt = a, public = pub}
  if VECS_N >= VECS_MAX then VECS, VECS_N = {}, 0 end
  VECS[st] = v
  VECS_N = VECS_N + 1
  return v
end

-- is reports whether state field st is in lifecycle phase l ('active',
-- 'runnable' or 'terminal'), from the cached split (a table lookup rather
-- than a search).
local function is(st, l)
  return st and (VECS[st] or vec(st)).lifecycle == l -- vec's cache, without its call
end

-- public_of returns the public state of a state field.
local function public_of(st)
  return string.match(st or '', '(%S+)$') or ''
end

-- The index of a lane that holds a runnable execution, by eligibility. Each
-- admission reason has its own blocked index, so that the unblock scans of
-- one reason never wade through executions blocked for another.
local RUNNABLE_INDEX = {
  eligible_now = 'eligible',
  not_eligible_until_time = 'delayed',
  blocked_by_dependencies = 'pending',
  blocked_by_budget = 'blocked_budget',
  blocked_by_quota = 'blocked_quota',
  blocked_by_route = 'blocked',
}

-- The keys of a partition that do not depend on a call, by anchor, and
-- the lane index keys built so far (lanes: by namespace, lane and index).
-- Building them anew made garbage in every call, and the collector's
-- work grows with the garbage. Dropped whole at PARTS_MAX anchors; a
-- partition's lane keys are dropped at LANE_KEYS_MAX.
local PARTS_MAX, LANE_KEYS_MAX = 1024, 4096
local PARTS, PARTS_N = {}, 0

-- part returns the context of one call on the partition of an anchor key:
-- its keys and the collected index updates.
local function part(anchor)
  local s = PARTS[anchor]
  if not s then
    local base = string.sub(anchor, 1, -7) -- strip ':lanes'
    s = {base = base, xp = base .. ':x:', leases = base .. ':leases', timeouts = base .. ':timeouts',
      deadlines = base .. ':deadlines', lanes = {}, nlanes = 0}
    if PARTS_N >= PARTS_MAX then PARTS, PARTS_N = {}, 0 end
    PARTS[anchor] = s
    PARTS_N = PARTS_N + 1
  end
  return {
    anchor = anchor,
    base = s.base,
    xp = s.xp,
    leases = s.leases,
    timeouts = s.timeouts,
    deadlines = s.deadlines,
    adds = {},
    rems = {},
    static = s,
  }
end

local function core_key(p, u)
  return p.xp .. u
end

-- lane_key returns an index key of a lane (cached with the partition's
-- keys).
local function lane_key(p, ns, lane, index)
  local s = p.static
  local t = sub(sub(s.lanes, ns), lane)
  local k = t[index]
  if not k then
    if s.nlanes >= LANE_KEYS_MAX then
      s.lanes, s.nlanes = {}, 0
      t = sub(sub(s.lanes, ns), lane)
    end
    k = p.base .. ':q:' .. ns .. ':' .. lane .. ':' .. index
    t[index] = k
    s.nlanes = s.nlanes + 1
  end
  return k
end

local function zadd(p, key, score, member)
  local t = p.adds[key]
  if not t then t = {}; p.adds[key] = t end
  t[#t + 1] = score
  t[#t + 1] = member
end

-- zrem collects the removal of member from index key. Removals are
-- applied before additions (flush), so an addition of the same member
-- collected earlier in the call is dropped here: the member ends the call
-- out of the index whatever the order (a deadline sweep that fires a
-- downstream member, adding it to the eligible index, and then expires
-- it). Only a call that both adds to and removes from one index scans.
local function zrem(p, key, member)
  local a = p.adds[key]
  if a then
    local n = #a
    for i = n, 2, -2 do
      if a[i] == member then
        a[i - 1], a[i] = a[n - 1], a[n]
        a[n - 1], a[n] = nil, nil
        n = n - 2
      end
    end
  end
  local t = p.rems[key]
  if not t then t = {}; p.rems[key] = t end
  t[#t + 1] = member
end

-- UNPACK_MAX bounds the values handed to one redis.call with unpack (the
-- Lua stack holds about 8000); it is even, so pairs are never split.
local UNPACK_MAX = 4000

-- call_all runs cmd on key with every value of list, in as many calls as
-- the Lua stack needs.
local function call_all(cmd, key, list)
  local n = #list
  if n <= UNPACK_MAX then
    if n > 0 then redis.call(cmd, key, unpack(list)) end
    return
  end
  for i = 1, n, UNPACK_MAX do
    redis.call(cmd, key, unpack(list, i, math.min(i + UNPACK_MAX - 1, n)))
  end
end

-- due_lane records that lane "<ns>:<lane>" of partition p has a delayed
-- entry due at score (a string of ms): B:due:delayed lists the lanes with
-- delayed entries, each scored at or before its earliest one, so that the
-- promoter reads the lanes with something due, not every lane (flush
-- writes it, ZADD LT: a score only goes down here; the promoter raises it).
local function due_lane(p, ns, lane, score)
  local d = p.due
  if not d then
    d = {}
    p.due = d
  end
  local m = ns .. ':' .. lane
  local old = d[m]
  if not old or tonumber(score) < tonumber(old) then d[m] = score end
end

-- flush applies the collected index updates.
local function flush(p)
  for key, t in pairs(p.rems) do call_all('ZREM', key, t) end
  for key, t in pairs(p.adds) do call_all('ZADD', key, t) end
  p.adds, p.rems = {}, {}
  if p.due then
    for m, score in pairs(p.due) do redis.call('ZADD', p.base .. ':due:delayed', 'LT', score, m) end
    p.due = nil
  end
end

-- wake publishes "<partition>:<ns>:<lane>" on "<prefix>ff:wake", once per
-- lane and call: a wake-up says "this lane may have work", and the
-- scheduler passes it on while claims come back full, so a call that makes
-- many executions of a lane eligible (a fan-out) publishes once.
local function wake(p, ns, lane)
  if not p.channel then
    local prefix, n = string.match(p.anchor, '^(.*)ff:{fp:(%d+)}:lanes$')
    p.channel, p.wake_prefix, p.woken = prefix .. 'ff:wake', n .. ':', {}
  end
  local msg = p.wake_prefix .. ns .. ':' .. lane
  if p.woken[msg] then return end
  p.woken[msg] = true
  redis.call('PUBLISH', p.channel, msg)
end

-- The fields every transition reads first (the fence, the limits and the
-- indexes).
local FENCE_FIELDS = {
  'state', 'ns', 'lane', 'lease_id', 'lease_epoch', 'lease_expires_at', 'attempt_count',
  'attempt_timeout_ms', 'deadline_at', 'flow_id', 'qheld', 'attempt_deadline_at',
}

-- The fields transitions that may retry or requeue read on top.
local MORE_FIELDS = {
  'priority', 'created_at', 'charged_attempts',
  'retry_attempts', 'retry_backoff', 'retry_delay_ms', 'retry_max_delay_ms', 'retry_jitter',
  'attempt_deadline_at', 'reclaims', 'max_reclaims',
}

-- The fields a finish reads: the fence, and what resolving a flow member's
-- edges needs (so that its record is read once). Code at the library's top
-- level cannot use ipairs and friends while FUNCTION LOAD runs it, so these
-- lists are spelled out rather than built: each starts with FENCE_FIELDS.
local FINISH_FIELDS = {
  'state', 'ns', 'lane', 'lease_id', 'lease_epoch', 'lease_expires_at', 'attempt_count',
  'attempt_timeout_ms', 'deadline_at', 'flow_id', 'qheld', 'attempt_deadline_at',
  'out', 'handled', 'is_result',
}

-- The fields of a flow member whose upstream ended, in one HMGET: all that
-- decide() and the transitions of a member blocked by its dependencies read
-- (leave_indexes of a runnable execution, to_eligible and to_terminal):
-- the state, the lane, the eligible score (priority, created_at) and the
-- join counters. Fence fields of an attempt (lease, timeouts, quota) and
-- the retry policy are not read: such a member has no attempt running. Its
-- edges (out, handled) are read only when it is skipped (resolve_member):
-- most downstream members become eligible.
local DOWNSTREAM_FIELDS = {
  'state', 'ns', 'lane', 'attempt_count', 'deadline_at', 'flow_id',
  'priority', 'created_at',
  'deps_total', 'deps_done', 'deps_ok', 'join_need',
}

-- The fields of a downstream member that a hand-off may grant: those of
-- CLAIM_FIELDS (worker.lua), in its order, so that the values are what a
-- grant reads (grant), then what DOWNSTREAM_FIELDS reads on top, so that
-- decide() and the grant read the member once.
local HANDOFF_FIELDS = {
  'state', 'caps', 'kind', 'priority', 'attempt_count',
  'lease_epoch', 'retry_attempts', 'attempt_timeout_ms', 'payload', 'tags',
  'flow_id', 'flow_node', 'started_at', 'deadline_at', 'input_from', 'ups',
  'budgets', 'quotas', 'handoff',
  'ns', 'lane', 'created_at', 'deps_total', 'deps_done', 'deps_ok', 'join_need',
}

-- read_core returns the fence fields of an execution as a table, or nil
-- when it does not exist. c.v is the split state (vec), filled by split().
-- fields, when given, is another list to read instead: FINISH_FIELDS
-- (starts with the fence fields), or DOWNSTREAM_FIELDS (only for a member
-- blocked by its dependencies: with it the record needs no more(), which
-- to_eligible would call for priority and created_at).
local function read_core(p, u, fields)
  local key = core_key(p, u)
  fields = fields or FENCE_FIELDS
  local v = redis.call('HMGET', key, unpack(fields))
  if not v[1] then return nil end -- every record has a state
  -- The tables are built by constructors, in the order of the lists: a
  -- constructor is about twice as fast as filling a table in a loop.
  -- A downstream member is split and may be marked fresh by decide():
  -- both fields are in the constructor, so that setting them later does
  -- not grow (rehash) the table.
  if fields == DOWNSTREAM_FIELDS then
    -- The join counters stay in the values (raw, which decide reads):
    -- each key a constructor sets costs about 400 instructions.
    return {key = key, u = u, more = true, v = vec(v[1]), fresh = false,
      state = v[1], ns = v[2] or '', lane = v[3] or '', attempt_count = v[4] or '',
      deadline_at = v[5] or '', flow_id = v[6] or '', priority = v[7] or '', created_at = v[8] or '', raw = v}
  end
  if fields == HANDOFF_FIELDS then
    -- claim: the values, in CLAIM_FIELDS order, for grant(); the join
    -- counters follow them.
    return {key = key, u = u, more = true, v = vec(v[1]), fresh = false,
      state = v[1], ns = v[20] or '', lane = v[21] or '', attempt_count = v[5] or '',
      deadline_at = v[14] or '', flow_id = v[11] or '', priority = v[4] or '', created_at = v[22] or '', claim = v}
  end
  if fields == FINISH_FIELDS then
    return {key = key, u = u,
      state = v[1], ns = v[2] or '', lane = v[3] or '', lease_id = v[4] or '', lease_epoch = v[5] or '',
      lease_expires_at = v[6] or '', attempt_count = v[7] or '', attempt_timeout_ms = v[8] or '',
      deadline_at = v[9] or '', flow_id = v[10] or '', qheld = v[11] or '', attempt_deadline_at = v[12] or '',
      out = v[13] or '', handled = v[14] or '', is_result = v[15] or ''}
  end
  return {key = key, u = u,
    state = v[1], ns = v[2] or '', lane = v[3] or '', lease_id = v[4] or '', lease_epoch = v[5] or '',
    lease_expires_at = v[6] or '', attempt_count = v[7] or '', attempt_timeout_ms = v[8] or '',
    deadline_at = v[9] or '', flow_id = v[10] or '', qheld = v[11] or '', attempt_deadline_at = v[12] or ''}
end

-- split fills c.v with the dimensions of c's state.
local function split(c)
  if not c.v then c.v = vec(c.state) end
  return c.v
end

-- more loads the remaining transition fields into c.
local function more(c)
  if c.more then return c end
  local v = redis.call('HMGET', c.key, unpack(MORE_FIELDS))
  for i, f in ipairs(MORE_FIELDS) do
    c[f] = v[i] or ''
  end
  c.more = true
  return c
end

-- attempt_end is the history field of the end of the running attempt:
-- "att:<n>:end" = "<ended_at>\t<outcome>\t<error>".
local function attempt_end(c, outcome, message, now)
  return 'att:' .. c.attempt_count .. ':end', ts(now) .. '\t' .. outcome .. '\t' .. clip(message or '')
end

-- owe_releases records that the quota slots held by the ending attempt of
-- c must be released: one entry "<quota ref>\t<holder>" per quota in the
-- partition's release queue B:qrelease (score = time), drained by the store
-- (DrainQuotaReleases, the quota scanner). The holder is
-- "<partition>.<uuid>#<qheld>" = "<execution id>#<attempt>#<token>", as
-- admitted by ff_quota_admit and recorded by ff_claim.
local function owe_releases(p, c)
  if c.qheld == '' then return end
  local n = string.match(p.anchor, '{fp:(%d+)}')
  local holder = n .. '.' .. c.u .. '#' .. c.qheld
  local quotas = redis.call('HGET', c.key, 'quotas') or ''
  for ref in string.gmatch(quotas, '[^,]+') do
    zadd(p, p.base .. ':qrelease', ts(CLOCK_NOW), ref .. '\t' .. holder)
  end
  redis.call('HDEL', c.key, 'qheld')
  c.qheld = ''
end

-- leave_indexes removes an execution from the indexes of its current state.
-- An attempt that ends also owes the release of its quota slots.
local function leave_indexes(p, c)
  local u = c.u
  if is(c.state, 'active') then
    zrem(p, p.leases, u)
    if c.attempt_timeout_ms ~= '' and c.attempt_timeout_ms ~= '0' then
      zrem(p, p.timeouts, u)
    end
    owe_releases(p, c)
  elseif is(c.state, 'runnable') then
    local index = RUNNABLE_INDEX[split(c).eligibility]
    if index then
      zrem(p, lane_key(p, c.ns, c.lane, index), u)
    end
  end
end

-- to_eligible makes an execution eligible now and wakes claimers. The
-- varargs are more field/value pairs to write. A downstream flow member
-- (c.fresh, set by decide) in a lane of the call's hand-off (p.handoff,
-- ff_finish) is queued for settle_handoff instead, which grants it to the
-- finishing worker or indexes it and wakes claimers.
local function to_eligible(p, c, attempt, now, ...)
  more(c)
  local score = eligible_score(num(c.priority), num(c.created_at))
  local h = p.handoff
  if h and c.fresh and c.ns == h.ns and h.lanes[c.lane] then
    -- settle_handoff writes the record, granted or eligible, in one HSET.
    -- The score stays a number: a granted member is never indexed, so
    -- its string is never needed.
    local extra -- more pairs to write; most members have none
    if select('#', ...) > 0 then extra = {...} end
    h.fresh[#h.fresh + 1] = {c, score, attempt, extra} -- an array: see settle_handoff
    h.fired[c.u] = true -- its record still reads as before: decide must not fire it again
    return 'waiting'
  end
  redis.call('HSET', c.key, 'eligible_at', '', 'updated_at', ts(now), 'blocking_detail', '',
    'state', sv('runnable', 'unowned', 'eligible_now', 'waiting_for_worker', 'none', attempt), ...)
  zadd(p, lane_key(p, c.ns, c.lane, 'eligible'), ts(score), c.u)
  wake(p, c.ns, c.lane)
  return 'waiting'
end

-- to_delayed makes an execution wait until due.
local function to_delayed(p, c, attempt, reason, due, now, ...)
  local due_s = ts(due)
  redis.call('HSET', c.key, 'eligible_at', due_s, 'updated_at', ts(now),
    'state', sv('runnable', 'unowned', 'not_eligible_until_time', reason, 'none', attempt), ...)
  zadd(p, lane_key(p, c.ns, c.lane, 'delayed'), due_s, c.u)
  due_lane(p, c.ns, c.lane, due_s)
  return 'delayed'
end

-- on_flow_terminal is called by to_terminal for members of a flow run
-- (set by flow.lua): it updates the run and resolves the member's edges.
local on_flow_terminal

-- The terminal state fields, by whether an attempt ran and by outcome.
local TERMINAL = {[false] = {}, [true] = {}}

-- to_terminal ends an execution with outcome; this is the only place an
-- execution becomes terminal, so flow members resolve their edges here.

local function to_terminal(p, c, outcome, reason, now, ...)
  local attempted = c.attempt_count ~= '' and c.attempt_count ~= '0'
  local st = TERMINAL[attempted][outcome]
  if not st then
    st = sv('terminal', 'unowned', 'not_applicable', 'none', outcome, attempted and 'attempt_terminal' or 'none')
    TERMINAL[attempted][outcome] = st
  end
  local now_s = ts(now)
  if is(c.state, 'runnable') then
    redis.call('HSET', c.key, 'ended_at', now_s, 'updated_at', now_s, 'eligible_at', '', 'blocking_detail', '',
      'failure_reason', reason and clip(reason) or '', 'state', st, ...)
  elseif reason then
    redis.call('HSET', c.key, 'ended_at', now_s, 'updated_at', now_s,
      'failure_reason', clip(reason), 'state', st, ...)
  else
    -- A success: a record that is not terminal has no failure reason (a
    -- replay clears it), so there is none to clear.
    redis.call('HSET', c.key, 'ended_at', now_s, 'updated_at', now_s, 'state', st, ...)
  end
  zadd(p, lane_key(p, c.ns, c.lane, 'terminal'), now_s, c.u)
  if c.deadline_at ~= '' then
    zrem(p, p.deadlines, c.u)
  end
  if c.flow_id ~= '' then
    on_flow_terminal(p, c, outcome, now)
  end
  return derive_public('terminal', 'not_applicable', outcome)
end

-- RETRY_DELAY_MAX bounds every retry delay (ms, 366 days: the API's
-- longest duration): an exponential backoff without a cap would pass what
-- a timestamp holds after some 50 retries, and its retry would run at
-- once.
local RETRY_DELAY_MAX = 366 * 24 * 3600 * 1000

-- backoff returns the delay before retry number r (1-based) of policy c,
-- with frac in [0,1) choosing the jitter.
local function backoff(c, r, frac)
  local d = num(c.retry_delay_ms)
  if c.retry_backoff == 'exponential' then
    d = d * math.pow(2, math.min(r - 1, 64))
  end
  local cap = num(c.retry_max_delay_ms)
  if cap <= 0 or cap > RETRY_DELAY_MAX then cap = RETRY_DELAY_MAX end
  if d > cap then d = cap end
  if c.retry_jitter == '1' then
    d = d / 2 + frac * (d / 2)
  end
  return math.floor(d)
end

-- after_attempt ends the running attempt of an active execution and decides
-- what comes next: a retry when the attempt is charged, retryable and
-- attempts remain; a reclaim when it is not charged (revoked); terminal
-- failure otherwise. Returns the public state and the retry due time (0
-- when eligible now or terminal).
local function after_attempt(p, c, outcome, message, now, charge, retryable, frac)
  more(c)
  leave_indexes(p, c)
  local af, av = attempt_end(c, outcome, message, now)
  local charged = num(c.charged_attempts)
  if charge then charged = charged + 1 end
  local err = clip(message or '')
  local limit = num(c.retry_attempts)
  if limit < 1 then limit = 1 end
  if charge and (not retryable or charged >= limit) then
    return to_terminal(p, c, 'failed', message, now, af, av, 'charged_attempts', itoa(charged), 'last_error', err), 0
  end
  if not charge then
    if outcome == 'lease_expired' then
      -- An interrupted attempt (the worker died) is not charged to the
      -- retry policy; reclaims have their own allowance.
      local reclaims = num(c.reclaims) + 1
      local cap = RECLAIMS_DEFAULT
      if c.max_reclaims ~= '' then cap = num(c.max_reclaims) end
      if reclaims > cap then
        return to_terminal(p, c, 'failed', 'reclaims_exhausted: the lease was lost ' .. itoa(reclaims) ..
          ' times (max_reclaims ' .. itoa(cap) .. ')', now, af, av, 'reclaims', itoa(reclaims), 'last_error', err), 0
      end
      return to_eligible(p, c, 'pending_reclaim_attempt', now, af, av, 'reclaims', itoa(reclaims), 'last_error', err), 0
    end
    return to_eligible(p, c, 'pending_reclaim_attempt', now, af, av, 'last_error', err), 0
  end
  local attempt = 'pending_retry_attempt'
  local delay = backoff(c, charged, frac)
  if delay <= 0 then
    return to_eligible(p, c, attempt, now, af, av, 'charged_attempts', itoa(charged), 'last_error', err), 0
  end
  return to_delayed(p, c, attempt, 'waiting_for_retry_backoff', now + delay, now,
    af, av, 'charged_attempts', itoa(charged), 'last_error', err), now + delay
end

-- overdue returns the first of the limits of active execution c that
-- passed by now: lease_expired, attempt_timed_out or deadline_passed (one
-- of OVERDUE, which end_overdue applies), or nil when none did. A limit
-- that passed ends the attempt whether or not its scanner came by yet,
-- and when several passed, the first to pass decides (on a tie the lease,
-- then the timeout), as scanners running at every instant would have: a
-- worker's fenced call (lease_check) and each scanner (scanner.lua) apply
-- that one, whichever of them comes first.
local function overdue(c, now)
  local why, at = nil, num(c.lease_expires_at)
  if at <= now then why = 'lease_expired' end
  if num(c.attempt_timeout_ms) > 0 then
    -- Read with the fence (FENCE_FIELDS, FINISH_FIELDS); a downstream
    -- record has no attempt running, so none.
    local ad = num(c.attempt_deadline_at or more(c).attempt_deadline_at)
    if ad > 0 and ad <= now and (not why or ad < at) then why, at = 'attempt_timed_out', ad end
  end
  local dl = num(c.deadline_at)
  if dl > 0 and dl <= now and (not why or dl < at) then why = 'deadline_passed' end
  return why
end

-- lease_check returns nil when the lease (id, epoch) is the current,
-- unexpired lease of c and neither the attempt's timeout nor the
-- execution's deadline has passed, else the refusal reason: not_active,
-- lease_mismatch, or the first limit that passed (overdue).
local function lease_check(c, lease_id, epoch, now)
  if not is(c.state, 'active') then return 'not_active' end
  if c.lease_id ~= lease_id or c.lease_epoch ~= epoch then return 'lease_mismatch' end
  return overdue(c, now)
end

-- expire_lease applies the lease-expiry transition: the interrupted attempt
-- is not charged to the retry policy; the execution is eligible again at
-- once (a reclaim) until its reclaims exceed max_reclaims, then it fails.
local function expire_lease(p, c, now)
  return after_attempt(p, c, 'lease_expired', 'lease expired', now, false, true, 0)
end

-- jitter_frac turns a caller-supplied seed and an item index into [0,1).
local function jitter_frac(seed, i)
  return ((num(seed) + i * 7919) % 1000003) / 1000003
end

-- lease_ended publishes "<N>.<uuid>:<epoch>:<why>" on "<prefix>ff:leases"
-- (N: the partition, epoch: c.lease_epoch) for active execution c whose
-- lease the calling transition ends from the outside, not by its worker's
-- report: why is cancelled (a cancel of it or of its run), revoked,
-- timeout (its attempt timeout), expired (its lease) or deadline (its
-- execution deadline). ffrun passes it on to the worker watching the
-- lease (POST /v1/worker/watch), whose handler then learns of it at once
-- instead of at its next renew. The callers are the transitions of those
-- ends (end_execution, end_overdue, ff_revoke_lease), never ff_finish's
-- own report nor a claim or renew of a live lease: the hot path publishes
-- nothing. Pub/sub is at most once: a lost message delays the news until
-- the worker's next renew.
local function lease_ended(p, c, why)
  local s = p.static
  if not s.ended_channel then
    local prefix, n = string.match(p.anchor, '^(.*)ff:{fp:(%d+)}:lanes$')
    s.ended_channel, s.ended_id = prefix .. 'ff:leases', n .. '.'
  end
  redis.call('PUBLISH', s.ended_channel, s.ended_id .. c.u .. ':' .. (c.lease_epoch or '') .. ':' .. why)
end

-- What ended the lease of an active execution that end_execution ends, by
-- outcome (lease_ended).
local ENDED_BY = {cancelled = 'cancelled', expired = 'deadline'}

-- end_execution ends a non-terminal execution with outcome and reason from
-- the outside (a cancel, a deadline): a running attempt ends with it, and
-- its worker is told (lease_ended). The varargs are more field/value pairs
-- to write. Returns the public state.
local function end_execution(p, c, outcome, reason, now, ...)
  local active = is(c.state, 'active')
  leave_indexes(p, c)
  if active then
    lease_ended(p, c, ENDED_BY[outcome] or outcome)
    local af, av = attempt_end(c, outcome, reason, now)
    return to_terminal(p, c, outcome, reason, now, af, av, ...)
  end
  return to_terminal(p, c, outcome, reason, now, ...)
end

-- expire_deadline ends a non-terminal execution whose deadline passed.
local function expire_deadline(p, c, now)
  return end_execution(p, c, 'expired', 'execution deadline passed', now)
end

-- end_overdue applies to active execution c the transition of the limit
-- overdue found passed first (why): what the lease, timeout or deadline
-- scanner would have done. jitter is the retry jitter fraction of a
-- timeout. Returns the public state (and, for a lease expiry or a
-- timeout, the retry due time: 0 when eligible now or terminal). The
-- worker is told that its lease ended (lease_ended; for a deadline, by
-- end_execution).
local function end_overdue(p, c, why, now, jitter)
  if why == 'lease_expired' then
    lease_ended(p, c, 'expired')
    return expire_lease(p, c, now)
  end
  if why == 'attempt_timed_out' then
    lease_ended(p, c, 'timeout')
    return after_attempt(p, c, 'timed_out', 'attempt timed out', now, true, true, jitter)
  end
  return expire_deadline(p, c, now)
end

-- OVERDUE holds the reasons of lease_check that end_overdue applies.
local OVERDUE = {lease_expired = true, attempt_timed_out = true, deadline_passed = true}

-- stale_refusal is the answer of a fenced call whose lease lease_check
-- refused for why. A limit found passed (OVERDUE) is applied now, ending
-- the attempt as its scanner would (the retry jitter is drawn from seed
-- and i only then); the refusal carries the public state after it.
local function stale_refusal(p, c, why, now, seed, i)
  if OVERDUE[why] then
    return refuse('stale_lease', why, end_overdue(p, c, why, now, jitter_frac(seed, i)))
  end
  return refuse('stale_lease', why, public_of(c.state))
end

-- STAGED_DROP_STEP is how many staged members a commit that drops its
-- staging (duplicate, conflict, staging_expired) deletes itself: the rest
-- are left to retention, which deletes about its limit per call.
local STAGED_DROP_STEP = 1000

-- drop_staged deletes members of a flow run staged in chunks and never
-- committed (see ff_stage_chunk): up to max of them (at least one), so
-- that no call grows with the staging (a run has up to 10,000 members:
-- deleted in one call, 20,000 took over 100 ms). Each goes from the
-- staged set with its record, so the set lists exactly the records left.
-- A staging with members left stays in B:staging, due now, until its set
-- is empty: retention (ff_purge_terminal) deletes the rest, and a commit
-- arriving meanwhile finds the set short and refuses (staging_expired)
-- rather than make the run visible without them, then not_found once the
-- set is gone. now is the call's clock. Returns the members deleted.
local function drop_staged(p, run, max, now)
  local set = p.base .. ':f:' .. run .. ':staged'
  local members = redis.call('SPOP', set, itoa(math.max(max, 1)))
  for i = 1, #members, UNPACK_MAX do
    local batch = {}
    for j = i, math.min(i + UNPACK_MAX - 1, #members) do batch[#batch + 1] = p.xp .. members[j] end
    redis.call('DEL', unpack(batch))
  end
  if redis.call('EXISTS', set) == 1 then
    redis.call('ZADD', p.base .. ':staging', ts(now), run)
  else
    redis.call('ZREM', p.base .. ':staging', run)
  end
  return #members
end

-- Helpers the files after this one share. Each of those files is a block
-- of its own (lua.go wraps it in do ... end), so its top-level locals are
-- its own: what several of them use lives here.

-- NONE is an empty table, shared by replies (never written): the upstreams of a
-- grant that is not a flow member, the grants of a finish without hand-off.
local NONE = {}

-- covers reports whether the worker capability set has every token of the
-- comma-separated list required.
local function covers(have, required)
  if not required or required == '' then return true end
  for token in string.gmatch(required, '[^,]+') do
    if not have[token] then return false end
  end
  return true
end

-- due returns up to limit members of a time-scored index due at now.
local function due(key, now, limit)
  return redis.call('ZRANGEBYSCORE', key, '-inf', ts(now), 'LIMIT', '0', itoa(limit))
end

-- route_lane records that lane `lane` of namespace ns of partition p has
-- an entry in its blocked index (blocked_by_route): B:route:<ns> lists
-- those lanes, so that ff_unblock_route reads the namespace's lanes with
-- something parked, not every lane of every namespace. Once per lane and
-- call.
local function route_lane(p, ns, lane)
  local seen = p.routed
  if not seen then
    seen = {}
    p.routed = seen
  end
  local m = ns .. ':' .. lane
  if seen[m] then return end
  seen[m] = true
  redis.call('SADD', p.base .. ':route:' .. ns, lane)
end

-- lane_list returns the "<ns>:<lane>" pairs of the partition as
-- {ns, lane} tables.
local function lane_list(p)
  local out = {}
  for _, m in ipairs(redis.call('SMEMBERS', p.anchor)) do
    local ns, lane = string.match(m, '^([^:]+):(.+)$')
    if ns then out[#out + 1] = {ns, lane} end
  end
  return out
end
