-- worker.lua: the worker protocol: claim, renew, finish.

-- The fields a claim reads from each candidate, in this order.
local CLAIM_FIELDS = {
  'state', 'caps', 'kind', 'priority', 'attempt_count',
  'lease_epoch', 'retry_attempts', 'attempt_timeout_ms', 'payload', 'tags',
  'flow_id', 'flow_node', 'started_at', 'deadline_at', 'input_from', 'ups',
  'budgets', 'quotas', 'handoff',
}

-- The public states of an upstream that ended without an output, which
-- a grant reports (upstream_errors).
local ENDED_WITHOUT = {failed = true, expired = true, cancelled = true, skipped = true}

-- The attempt type of the next attempt, by the attempt state of a waiting
-- execution.
local NEXT_ATTEMPT = {
  pending_first_attempt = 'initial',
  pending_retry_attempt = 'retry',
  pending_reclaim_attempt = 'reclaim',
  pending_replay_attempt = 'replay',
}

local function next_attempt(st)
  return NEXT_ATTEMPT[vec(st).attempt or ''] or 'initial'
end

-- Candidates a claim looks at beyond the first max, when it passed some
-- over, so that executions needing capabilities the worker lacks (which
-- other connected workers have, so they stay eligible) or of kinds it has
-- no handler for do not hide the ones it can run. They are read in
-- chunks, and only their caps and kind until one fits: a deep look costs
-- a two-field HMGET per candidate, not a full read.
local CLAIM_LOOKAHEAD = 512
local CLAIM_CHUNK = 64

-- Sets built from comma-separated lists (a worker's kinds or
-- capabilities), by list: a worker sends the same lists with every claim
-- and hand-off, and building a set of 200 kinds costs about 30 µs. The
-- cache lives as long as the library's Lua state; it is dropped whole
-- when it holds SET_CACHE_MAX lists. Callers never change a set.
local SET_CACHE_MAX = 256
local SETS, SETS_N = {}, 0

-- token_set returns the set of the tokens of a comma-separated list.
local function token_set(list)
  local set = SETS[list]
  if set then return set end
  set = {}
  for token in string.gmatch(list, '[^,]+') do set[token] = true end
  if SETS_N >= SET_CACHE_MAX then SETS, SETS_N = {}, 0 end
  SETS[list] = set
  SETS_N = SETS_N + 1
  return set
end

-- kind_set returns the set of a comma-separated list of kinds, or nil for
-- '' (any kind).
local function kind_set(list)
  if list == '' then return nil end
  return token_set(list)
end

-- Bounds of the upstream results grants carry, in bytes (Go:
-- store.UpstreamsCarried, store.UpstreamsCarriedCall): a grant carries at
-- most UPSTREAMS_CARRIED of them, and the grants of one call (a claim of
-- up to 256, a hand-off) at most UPSTREAMS_CARRIED_CALL in all. An
-- upstream whose result does not fit is listed as omitted (the worker
-- reads it through the API): a fan-in of a thousand upstreams of 1 MiB
-- would otherwise build a 1 GB reply here, in the server's only thread.
-- The member's input (payload: its feeding upstream's result, at most
-- RESULT_MAX) is always carried, outside the bounds; among the upstream
-- results that one is counted first. RESULT_MAX is the largest result
-- (Go: store.MaxPayloadBytes): while a grant has that much room left,
-- every result fits, so none is measured before it is read.
local UPSTREAMS_CARRIED = 4194304
local UPSTREAMS_CARRIED_CALL = 16777216
local RESULT_MAX = 1048576

-- A grant context: what the grants of one call share, and the grants;
-- room is what UPSTREAMS_CARRIED_CALL leaves for their upstream results.
-- Every field is there from the start (false until set: the first
-- grant's, and a hand-off's results), so that the table is sized once:
-- growing it cost about 1 % of a claim.
local function grant_ctx(worker, instance, ttl, prefix)
  return {worker = worker, instance = instance, ttl = ttl, prefix = prefix, list = {}, room = UPSTREAMS_CARRIED_CALL,
    expires_s = false, running = false, who = false, results = false}
end

-- grant_entry appends to g.list the grant of execution u (CLAIM_FIELDS
-- v, in lane) under lease lease_id and epoch of its attempt number
-- attempt, of type atype, expiring at expires, with the attempt deadline
-- attempt_deadline (0 = none): what the worker needs to run it, a flow
-- member's input and its upstreams' results (within the bounds above; the
-- others listed as omitted) and errors included.
local function grant_entry(p, g, u, v, lane, attempt, atype, lease_id, epoch, expires, attempt_deadline)
  local payload = v[9] or ''
  local ups = false
  local errs = false
  local omitted -- nil when none: the grant ends with errs
  if v[11] then
    -- A flow member: its input is the result of its feeding upstream,
    -- and it may read the result of every upstream that succeeded
    -- (each result is read once: the feeding upstream is one of them).
    -- A hand-off knows the results its call just recorded (g.results).
    local results = g.results or {}
    local room, carried, feed_out = g.room, 0, false
    if room > UPSTREAMS_CARRIED then room = UPSTREAMS_CARRIED end
    local feed = v[15]
    if feed and feed ~= '' then
      local r = results[feed]
      if r == nil then
        r = redis.call('HGET', p.xp .. feed, 'result')
        results[feed] = r
      end
      payload = r or ''
      -- The feeding upstream's result, read already, has the first claim
      -- on the room (it is left out only when the call's is spent).
      if r then
        if #r <= room then
          carried = #r
          room = room - carried
        else
          feed_out = true
        end
      end
    end
    for _, name, up in each_up, v[16] or '', 1 do
      local r = results[up]
      if not r then
        if room < RESULT_MAX and redis.call('HSTRLEN', p.xp .. up, 'result') > room then
          -- Too large for the room left: omitted unread (it has a
          -- result, so it ended with no error).
          if not omitted then omitted = {} end
          omitted[#omitted + 1] = name
          omitted[#omitted + 1] = up
        else
          -- Not one this call recorded (or read as missing just above,
          -- for the input): its result, or why it ended
          -- without one (an on failure or on done edge lets a member run
          -- after it failed, expired, was cancelled or skipped).
          local rv = redis.call('HMGET', p.xp .. up, 'result', 'failure_reason', 'state')
          r = rv[1]
          local public = not r and public_of(rv[3])
          if public and ENDED_WITHOUT[public] then
            -- By its state, not its failure_reason: a failure may have an
            -- empty message.
            if not errs then errs = {} end
            errs[#errs + 1] = name
            errs[#errs + 1] = public
            errs[#errs + 1] = rv[2] or ''
          end
        end
      end
      if r then
        local fits
        if up == feed then
          fits = not feed_out -- counted above
        else
          fits = #r <= room
          if fits then
            carried = carried + #r
            room = room - #r
          end
        end
        if fits then
          if not ups then ups = {} end
          ups[#ups + 1] = name
          ups[#ups + 1] = r
        else
          if not omitted then omitted = {} end
          omitted[#omitted + 1] = name
          omitted[#omitted + 1] = up
        end
      end
    end
    if carried > 0 then g.room = g.room - carried end
  end
  local e = {
    u, lane, v[3] or '', v[4] or '0', attempt, atype, lease_id, epoch, expires,
    attempt_deadline, v[7] or '1', payload, v[10] or '', v[11] or '', v[12] or '', ups,
    v[19] == '1' and 1 or 0, errs,
  }
  if omitted then e[19] = omitted end
  g.list[#g.list + 1] = e
end

-- ATTEMPTS_KEPT bounds the attempt history an execution record keeps (two
-- fields per attempt): an execution reclaimed, revoked or replayed many
-- times keeps its last ATTEMPTS_KEPT attempts (Go: store.AttemptsKept).
local ATTEMPTS_KEPT = 100

-- grant leases execution u (record key, the caller's string: building it
-- again costs a concatenation), whose CLAIM_FIELDS are v, to the worker of
-- grant context g at time now (now_s its string): the attempt starts, the
-- execution enters the partition's lease index,
-- and the grant is appended to g.list. The caller has checked that u is
-- eligible and that the worker may run it, and removes it from the index
-- it was in. extra, when set, holds more field/value pairs to write: the
-- quota admission the attempt holds (qheld = "<attempt>#<token>", a
-- claim), or what to_eligible would have written (a hand-off).
local function grant(p, g, key, u, v, lane, now, now_s, extra)
  local attempt = num(v[5]) + 1
  local epoch = num(v[6]) + 1
  local lease_id = g.prefix .. '-' .. itoa(#g.list)
  local expires = now + g.ttl
  if not g.expires_s then g.expires_s = ts(expires) end -- the same for every grant of a call
  local atype = next_attempt(v[1])
  local timeout = num(v[8])
  local attempt_deadline = 0
  local started = v[13]
  if not started or started == '' then started = now_s end
  if not g.running then
    g.running = sv('active', 'leased', 'not_applicable', 'none', 'none', 'running_attempt')
    g.who = '\t' .. g.worker .. '\t' .. g.instance .. '\t'
  end
  local av = atype .. g.who .. lease_id .. '\t' .. itoa(epoch) .. '\t' .. now_s
  extra = extra or NONE
  if timeout > 0 then
    attempt_deadline = now + timeout
    local ad_s = ts(attempt_deadline)
    zadd(p, p.timeouts, ad_s, u)
    redis.call('HSET', key, 'attempt_count', itoa(attempt), 'lease_id', lease_id, 'lease_epoch', itoa(epoch),
      'lease_expires_at', g.expires_s, 'updated_at', now_s, 'started_at', started, 'attempt_deadline_at', ad_s,
      'att:' .. itoa(attempt), av, 'state', g.running, unpack(extra))
  else
    redis.call('HSET', key, 'attempt_count', itoa(attempt), 'lease_id', lease_id, 'lease_epoch', itoa(epoch),
      'lease_expires_at', g.expires_s, 'updated_at', now_s, 'started_at', started,
      'att:' .. itoa(attempt), av, 'state', g.running, unpack(extra))
  end
  if attempt > ATTEMPTS_KEPT then
    -- The record keeps the last ATTEMPTS_KEPT attempts' history.
    local old = 'att:' .. itoa(attempt - ATTEMPTS_KEPT)
    redis.call('HDEL', key, old, old .. ':end')
  end
  zadd(p, p.leases, g.expires_s, u)
  grant_entry(p, g, u, v, lane, attempt, atype, lease_id, epoch, expires, attempt_deadline)
end

-- remember_claim records the grants of a claim call for its worker
-- instance, for as long as their leases (B:claimed:<instance>: "<lease id
-- prefix>\t<uuid>,<uuid>…", the last call on the partition that granted
-- anything; a claim request grants on a partition in one call): when the
-- answer is lost on its way (a connection reset after the server wrote
-- it), the instance's next claim, a resume, has them delivered again
-- (ff_claim_lost) instead of their waiting for their leases to run out
-- and being charged as reclaims. One SET per call that granted.
local function remember_claim(p, g)
  local n = #g.list
  if n == 0 then return end
  local us = g.list[1][1]
  for i = 2, n do us = us .. ',' .. g.list[i][1] end
  redis.call('SET', p.base .. ':claimed:' .. g.instance, g.prefix .. '\t' .. us, 'PX', itoa(g.ttl))
end

-- regrant appends to grant context g the grant of execution u again when
-- it still runs under the lease a call with lease id prefix prefix gave
-- the worker instance of g (its attempt was started by that instance
-- under its current lease, not expired): the grant of a call whose answer
-- was lost. Nothing is written; it reports whether it appended.
local function regrant(p, g, u, prefix, now)
  local key = p.xp .. u
  local v = redis.call('HMGET', key, unpack(CLAIM_FIELDS))
  if not v[1] or not is(v[1], 'active') then return false end
  local lv = redis.call('HMGET', key, 'lease_id', 'lease_expires_at', 'attempt_deadline_at', 'lane',
    'att:' .. (v[5] or ''))
  -- The attempt's record: type, worker, instance, lease id, epoch, start.
  local atype, _, instance, lease_id =
    string.match(lv[5] or '', '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$')
  if instance ~= g.instance or lease_id ~= lv[1] or string.sub(lease_id, 1, #prefix) ~= prefix
      or num(lv[2]) <= now then
    return false
  end
  grant_entry(p, g, u, v, lv[4] or '', num(v[5]), atype, lv[1], num(v[6]), num(lv[2]), num(lv[3] or ''))
  return true
end

-- ff_claim: grant up to max eligible executions of some lanes.
-- KEYS[1]  partition anchor
-- KEYS[2]  <prefix>ff:{fp:N}:leases
-- KEYS[3]  <prefix>ff:{fp:N}:timeouts
-- KEYS[4..] per lane: <prefix>ff:{fp:N}:q:<ns>:<lane>:eligible, then per
--          lane: …:blocked
-- ARGV[1]  worker id
-- ARGV[2]  worker instance id
-- ARGV[3]  worker capabilities, comma-separated ('' = none)
-- ARGV[4]  max grants
-- ARGV[5]  lease duration, ms
-- ARGV[6]  lease id prefix (random, unique per call)
-- ARGV[7]  the union of the capabilities of the namespace's connected
--          workers, comma-separated, or '*' when unknown. A candidate that
--          this worker cannot run is left for others when the union covers
--          it, and moved to the blocked index (blocked_by_route,
--          waiting_for_capable_worker) when not.
-- ARGV[8]  the kinds the worker has handlers for, comma-separated ('' =
--          any). A candidate of another kind is left for other workers.
-- ARGV[9]  n, the number of budgets at a hard limit that follow
-- ARGV[10..9+3n] per breached budget: id, on_hard_limit ('block' | 'fail'),
--          detail. A candidate counting against one is not granted: it is
--          blocked (blocked_by_budget, waiting_for_budget, the detail) or,
--          with 'fail', fails ('budget_exceeded: <detail>').
-- then     m, the number of quota admissions that follow, then m quads:
--          uuid, attempt, resets, token. A candidate with quota references
--          is granted only with an admission for exactly its next attempt
--          and its reset count (field resets: a replay that resets a member
--          counts it, so an admission taken before a reset is not used
--          after it) (recorded by ff_quota_admit for holder
--          "<N>.<uuid>#<attempt>#<token>", the attempt written
--          "<attempt>.<resets>" when resets > 0); the grant stores
--          qheld = "<attempt>#<token>" (the holder's attempt), whose slots
--          the end of the attempt releases (owe_releases). Without an
--          admission it is left eligible and reported in the reply's
--          second table so the caller can admit it. Admitted candidates
--          are tried first.
-- then     the lanes, in KEYS order
-- Reply: {1, grants, needs}; each grant is {uuid, lane, kind, priority,
--        attempt, attempt_type, lease_id, lease_epoch, lease_expires_at,
--        attempt_deadline_at, max_attempts, payload, tags, flow_id,
--        flow_node, upstreams, downstream, upstream_errors[, omitted]}
--        where upstreams = {name, result, ...} of a flow member's
--        upstreams that have a result, within UPSTREAMS_CARRIED per grant
--        and UPSTREAMS_CARRIED_CALL per call (a member's payload, always
--        there, is the result of its feeding upstream, input_from),
--        omitted = {name, uuid, ...} the upstreams whose result did not
--        fit (only when there are some: the grants of a call without
--        such upstreams cost nothing more), upstream_errors = {name,
--        public state, failure_reason, ...}
--        of the upstreams that ended without a result (upstreams and
--        upstream_errors are false, a nil in the reply, when empty: each
--        table costs the reply's encoding about 2,400 instructions), and
--        downstream is 1 when its success alone fires a
--        downstream member (field handoff, written at staging: an edge
--        on success or done into a member whose join needs one edge), so
--        that its completion may hand work off (ff_finish). Each need is
--        {uuid, next attempt, quota references (comma-joined), resets},
--        plus the member's input when a reference is a deferred key
--        ("<quota id>?<key path>", settled by ff_resolve_quotas): what
--        the calls that admit it (ff_resolve_quotas, ff_block, the
--        admitted claim) are fenced by.
--        {0, 'invalid', 'claim', message}: a max, lease duration or lease
--        id prefix missing or not a number, a count of breached budgets or
--        of admissions that is not a whole number or that the arguments
--        do not cover, or lanes that do not match the KEYS (nothing
--        written: checked before the first write).
local function ff_claim(keys, argv)
  local max = tonumber(argv[4])
  local ttl = tonumber(argv[5])
  -- Checked here, not where they are used: a grant comes after other
  -- candidates' writes (parked, blocked, expired), whose index updates
  -- only flush applies.
  if not max or not ttl or not argv[6] then
    return refuse('invalid', 'claim', 'max, lease duration and lease id prefix are required')
  end
  -- The counts bound the loops below: whole, not negative, and covered by
  -- the arguments with at least one lane after them.
  local nbud = tonumber(argv[9])
  local nadm = nbud and nbud >= 0 and nbud == math.floor(nbud) and tonumber(argv[10 + 3 * nbud])
  if not nadm or nadm < 0 or nadm ~= math.floor(nadm) or #argv < 11 + 3 * nbud + 4 * nadm then
    return refuse('invalid', 'claim', 'the budget and admission counts must be whole and match the arguments')
  end
  local p = part(keys[1])
  local have = token_set(argv[3])
  local kinds = kind_set(argv[8])
  local breached = {}
  local ai = 10
  for _ = 1, nbud do
    breached[argv[ai]] = {argv[ai + 1], argv[ai + 2]}
    ai = ai + 3
  end
  local admitted, admitted_list = {}, {}
  ai = ai + 1
  for _ = 1, nadm do
    admitted[argv[ai]] = {tonumber(argv[ai + 1]), tonumber(argv[ai + 2]), argv[ai + 3]}
    admitted_list[#admitted_list + 1] = argv[ai]
    ai = ai + 4
  end
  local lane0 = ai - 1 -- argv[lane0 + i] is lane i

  -- Candidates from every lane, best score first. The first pass reads
  -- max per lane; executions the worker cannot run (capabilities) make
  -- later passes read up to CLAIM_LOOKAHEAD more.
  local nlanes = #argv - lane0
  if nlanes < 1 or #keys ~= 3 + 2 * nlanes then
    return refuse('invalid', 'claim', 'want an eligible and a blocked key per lane')
  end
  local union
  if argv[7] ~= '*' then
    union = {}
    for token in string.gmatch(argv[7], '[^,]+') do union[token] = true end
  end
  local function candidates(from, to)
    local cands = {}
    if nlanes == 1 then
      -- One lane: the index order is the claim order; no scores needed.
      for _, u in ipairs(redis.call('ZRANGE', keys[4], from, to)) do
        cands[#cands + 1] = {u = u, lane = 1}
      end
      return cands
    end
    for i = 1, nlanes do
      local r = redis.call('ZRANGE', keys[3 + i], from, to, 'WITHSCORES')
      for j = 1, #r, 2 do
        cands[#cands + 1] = {u = r[j], score = tonumber(r[j + 1]), lane = i}
      end
    end
    table.sort(cands, function(a, b)
      if a.score ~= b.score then return a.score < b.score end
      return a.u < b.u
    end)
    return cands
  end

  local now, now_s
  local g = grant_ctx(argv[1], argv[2], ttl, argv[6])
  local grants, needs = g.list, {}
  -- over returns {on_hard_limit, detail} of the first budget of a
  -- comma-separated list that is at a hard limit.
  local function over(list)
    if not list or list == '' then return nil end
    for id in string.gmatch(list, '[^,]+') do
      if breached[id] then return breached[id] end
    end
    return nil
  end
  local function try(cand)
    local u = cand.u
    local key = p.xp .. u
    local v = redis.call('HMGET', key, unpack(CLAIM_FIELDS))
    local eligible = keys[3 + cand.lane]
    -- v: 1 state, 2 caps, 3 kind, 4 priority, 5 attempt_count, 6 lease_epoch,
    -- 7 retry_attempts, 8 attempt_timeout_ms, 9 payload, 10 tags, 11 flow_id,
    -- 12 flow_node, 13 started_at, 14 deadline_at, 15 input_from, 16 ups,
    -- 17 budgets, 18 quotas, 19 handoff
    if not now then
      now = now_ms()
      now_s = ts(now)
    end
    local b = over(v[17])
    if not v[1] or not string.find(v[1], ' eligible_now ', 1, true) then
      zrem(p, eligible, u) -- a stale index entry: heal it
    elseif v[14] and v[14] ~= '' and tonumber(v[14]) <= now then
      expire_deadline(p, read_core(p, u), now) -- never start past the deadline
    elseif kinds and not kinds[v[3] or ''] then
      -- A kind the worker has no handler for: left for a worker that has.
    elseif not covers(have, v[2]) then
      if union and not covers(union, v[2]) then
        -- No connected worker of the namespace can run it: park it so it
        -- does not hide the work behind it.
        local missing = {}
        for token in string.gmatch(v[2], '[^,]+') do
          if not union[token] then missing[#missing + 1] = token end
        end
        redis.call('HSET', key, 'updated_at', now_s,
          'blocking_detail', 'no connected worker has ' .. table.concat(missing, ','),
          'state', sv('runnable', 'unowned', 'blocked_by_route', 'waiting_for_capable_worker', 'none',
            vec(v[1]).attempt))
        zrem(p, eligible, u)
        zadd(p, keys[3 + nlanes + cand.lane], now_s, u)
        -- The lane's keys are "<base>:q:<ns>:<lane>:…": its namespace.
        local ns = string.match(string.sub(eligible, #p.base + 4), '^([^:]+):')
        if ns then route_lane(p, ns, argv[lane0 + cand.lane]) end
      end
    elseif b then
      local c = read_core(p, u)
      if b[1] == 'fail' then
        leave_indexes(p, c)
        to_terminal(p, c, 'failed', 'budget_exceeded: ' .. b[2], now)
      else
        redis.call('HSET', key, 'updated_at', now_s, 'blocking_detail', b[2],
          'state', sv('runnable', 'unowned', 'blocked_by_budget', 'waiting_for_budget', 'none',
            vec(v[1]).attempt))
        zrem(p, eligible, u)
        zadd(p, lane_key(p, c.ns, c.lane, 'blocked_budget'), now_s, u)
      end
    elseif v[18] and v[18] ~= '' then
      -- Granted only under an admission for this attempt of the member as
      -- it is now: one taken before a replay reset it (same attempt, maybe
      -- other quota subjects: their key values are read again) is not.
      local attempt = num(v[5]) + 1
      local resets = redis.call('HGET', key, 'resets') or '0'
      local a = admitted[u]
      if a and a[1] == attempt and a[2] == num(resets) then
        zrem(p, eligible, u)
        -- The attempt holds the quota slots admitted for it until it ends
        -- (the holder's attempt carries the reset count once there is one).
        local held = itoa(attempt)
        if a[2] > 0 then held = held .. '.' .. itoa(a[2]) end
        grant(p, g, key, u, v, argv[lane0 + cand.lane], now, now_s, {'qheld', held .. '#' .. a[3]})
        return
      end
      -- Needs a quota admission for this attempt first.
      local need = {u, attempt, v[18], resets}
      if string.find(v[18], '?', 1, true) then
        -- A deferred key ("<quota id>?<key path>", ff_resolve_quotas):
        -- the caller reads it from the member's input, now known.
        local input = v[9] or ''
        if v[15] and v[15] ~= '' then input = redis.call('HGET', p.xp .. v[15], 'result') or '' end
        need[5] = input
      end
      needs[#needs + 1] = need
    else
      zrem(p, eligible, u)
      grant(p, g, key, u, v, argv[lane0 + cand.lane], now, now_s)
    end
  end

  -- Admitted candidates first: quota slots are held for them.
  local tried = {}
  if nadm > 0 then
    local lane_of = {}
    for i = 1, nlanes do lane_of[argv[lane0 + i]] = i end
    for _, u in ipairs(admitted_list) do
      if #grants >= max then break end
      local li = lane_of[redis.call('HGET', p.xp .. u, 'lane') or '']
      if li and redis.call('ZSCORE', keys[3 + li], u) then
        tried[u] = true
        try({u = u, lane = li})
      end
    end
  end
  local seen = 0
  if #grants >= max then
    remember_claim(p, g)
    flush(p)
    return ok(grants, needs)
  end
  for _, cand in ipairs(candidates(0, max - 1)) do
    if #grants >= max then break end
    seen = seen + 1
    if not tried[cand.u] then try(cand) end
  end
  -- Some candidates were passed over: look further down each lane. The
  -- indexes do not change before flush, so positions are stable.
  -- Candidates waiting for a quota admission (needs) count as found: the
  -- admitted claim that follows grants them.
  local from = max
  while #grants + #needs < max and seen >= from and from < max + CLAIM_LOOKAHEAD do
    for _, cand in ipairs(candidates(from, from + CLAIM_CHUNK - 1)) do
      if #grants + #needs >= max then break end
      seen = seen + 1
      if not tried[cand.u] then
        local ck = redis.call('HMGET', p.xp .. cand.u, 'caps', 'kind')
        local caps = ck[1]
        -- Fully tried: what this worker can run, and what no connected
        -- worker can (parked); what another worker can run is left.
        if (not kinds or kinds[ck[2] or '']) and
            (not caps or covers(have, caps) or (union and not covers(union, caps))) then
          try(cand)
        end
      end
    end
    from = from + CLAIM_CHUNK
  end
  remember_claim(p, g)
  flush(p)
  return ok(grants, needs)
end

-- ff_claim_lost: the grants that the claim call ff_claim remembers for a
-- worker instance (remember_claim) made and that it still holds under
-- the leases of that call, delivered again: the instance asks when the
-- answer to its last claim was lost on its way (a claim marked resume).
-- A grant the worker did receive may come again too: the worker knows its
-- leases and drops those. Nothing is written.
-- KEYS[1]  partition anchor
-- ARGV[1]  worker instance id
-- ARGV[2]  max grants
-- Reply: {1, grants} (as ff_claim's) | {0, 'invalid', 'claim', message}
local function ff_claim_lost(keys, argv)
  local max = tonumber(argv[2])
  if not max or max ~= math.floor(max) or max < 1 or not argv[1] or argv[1] == '' then
    return refuse('invalid', 'claim', 'an instance and a whole max are required')
  end
  local p = part(keys[1])
  local g = grant_ctx('', argv[1], 0, '')
  local now = now_ms()
  local seen = {}
  local rec = redis.call('GET', p.base .. ':claimed:' .. argv[1])
  local prefix, list = string.match(rec or '', '^([^\t]*)\t(.*)$')
  if prefix then
    for u in string.gmatch(list, '[^,]+') do
      if #g.list >= max then break end
      if not seen[u] then
        seen[u] = true
        regrant(p, g, u, prefix .. '-', now)
      end
    end
  end
  return ok(g.list)
end

-- ff_renew: extend many leases of one partition.
-- KEYS[1]  partition anchor
-- ARGV[1]  lease duration, ms
-- ARGV[2..] triples: uuid, lease id, lease epoch
-- Reply: {1, item...}; item = {1, lease_expires_at}
--        | {0, 'not_found'} | {0, 'stale_lease', reason, public_state}
--        {0, 'invalid', 'lease_ttl', message} (nothing written)
-- A lease found expired, an attempt found timed out or an execution found
-- past its deadline ends on the spot, as its scanner would have ended it.
local function ff_renew(keys, argv)
  local ttl = tonumber(argv[1])
  -- Before the items: one found expired is written before the next is
  -- renewed, and its index updates wait for flush.
  if not ttl then return refuse('invalid', 'lease_ttl', 'not a number: ' .. tostring(argv[1])) end
  local p = part(keys[1])
  local now = now_ms()
  local expires = now + ttl
  local expires_s = ts(expires)
  local items = {}
  for i = 2, #argv, 3 do
    local u = argv[i]
    local c = read_core(p, u)
    if not c then
      items[#items + 1] = refuse('not_found')
    else
      local why = lease_check(c, argv[i + 1], argv[i + 2], now)
      if why then
        items[#items + 1] = stale_refusal(p, c, why, now, ts(now), i)
      else
        redis.call('HSET', c.key, 'lease_expires_at', expires_s)
        zadd(p, p.leases, expires_s, u)
        items[#items + 1] = ok(expires)
      end
    end
  end
  flush(p)
  return ok(unpack(items))
end

-- ff_lease_check: whether leases of one partition are still held, without
-- writing anything (ffrun's lease watch checks them once before it waits
-- for a notice of their end, lease_ended, so that an end before the watch
-- is not missed).
-- KEYS[1]  partition anchor
-- ARGV[1..] triples: uuid, lease id, lease epoch
-- Reply: {1, item...}; item = {1} while the lease is the execution's
--        current one and none of its limits passed | {0, 'not_found'}
--        | {0, 'stale_lease', reason, public_state} as ff_renew answers,
--        except that a limit found passed (lease_expired,
--        attempt_timed_out, deadline_passed) is reported, not applied:
--        the public state is the record's (active); its scanner, or the
--        worker's next fenced call, applies it.
--        {0, 'invalid', 'leases', message} (not triples)
local function ff_lease_check(keys, argv)
  if #argv % 3 ~= 0 then
    return refuse('invalid', 'leases', 'want triples of uuid, lease id, lease epoch')
  end
  local p = part(keys[1])
  local now = now_ms()
  local items = {}
  for i = 1, #argv, 3 do
    local c = read_core(p, argv[i])
    if not c then
      items[#items + 1] = refuse('not_found')
    else
      local why = lease_check(c, argv[i + 1], argv[i + 2], now)
      if why then
        items[#items + 1] = refuse('stale_lease', why, public_of(c.state))
      else
        items[#items + 1] = ok()
      end
    end
  end
  return ok(unpack(items))
end

-- by_claim_order orders the members a hand-off settles as a claim takes
-- them: best (lowest) eligible score first; members of equal score (a
-- claim would take either next) in the order they became eligible (n).
local function by_claim_order(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[5] < b[5]
end

-- CLAIM_ORDER_INSERT is the most members claim_order orders by insertion.
local CLAIM_ORDER_INSERT = 16

-- claim_order puts the members of fresh in claim order (by_claim_order).
-- They mostly come in it, or nearly (a call finishing the members of many
-- chains makes one member eligible per chain, in about the order the
-- chains were claimed), so a few are ordered by insertion, in line: no
-- function call per comparison (table.sort of 8 cost about 40,000
-- instructions, 1.7 % of a hand-off call of 8 members). More are sorted
-- when one pass finds them out of order (a wide fan-out).
local function claim_order(fresh)
  local n = #fresh
  if n <= CLAIM_ORDER_INSERT then
    for i = 2, n do
      local f = fresh[i]
      local s = f[2]
      local j = i - 1
      while j >= 1 and fresh[j][2] > s do
        fresh[j + 1] = fresh[j]
        j = j - 1
      end
      fresh[j + 1] = f
    end
    return
  end
  for i = 2, n do
    if fresh[i][2] < fresh[i - 1][2] then
      for j, f in ipairs(fresh) do f[5] = j end
      table.sort(fresh, by_claim_order)
      return
    end
  end
end

-- settle_handoff decides, for each downstream member the call made
-- eligible in a lane of the hand-off (p.handoff, see ff_finish), whether
-- the finishing worker gets it at once: while grants are left, when the
-- worker has a handler for its kind (when it said which) and covers its
-- capabilities, it counts against no budget or quota,
-- its deadline has not passed, and it is not behind the head of its lane
-- (a claim of the partition would take it next anyway, so priority and
-- age order hold). The others enter the eligible index and wake claimers.
-- The members are settled in claim order, and one that enters the index
-- becomes the head of its lane for those after it: a member of the same
-- call with a better score that is not granted (a budget, the grants
-- spent) is never overtaken by one with a worse score. Each entry of
-- h.fresh (to_eligible) is an array, cheaper to build than a record:
-- {member record, eligible score, attempt state, more pairs to write or
-- nil[, position, set by claim_order]}.
local function settle_handoff(p, now)
  local h = p.handoff
  local now_s = ts(now)
  local fresh = h.fresh
  if #fresh > 1 then claim_order(fresh) end -- most calls make one member eligible
  for _, f in ipairs(fresh) do
    local c, granted = f[1], false
    if #h.g.list < h.max then
      local eligible = lane_key(p, c.ns, c.lane, 'eligible')
      local head = h.heads[eligible]
      if head == nil then
        local r = redis.call('ZRANGE', eligible, 0, 0, 'WITHSCORES')
        head = r[2] and tonumber(r[2]) or false
        h.heads[eligible] = head
      end
      if not head or f[2] <= head then
        local v = c.claim or redis.call('HMGET', c.key, unpack(CLAIM_FIELDS))
        if covers(h.have, v[2]) and (v[17] or '') == '' and (v[18] or '') == ''
            and not (v[14] and v[14] ~= '' and tonumber(v[14]) <= now)
            and (not h.kinds or h.kinds[v[3] or '']) then
          -- A member blocked by its dependencies has no eligible_at or
          -- blocking_detail to clear (staged without them; a replay
          -- resets only terminal members, which have none).
          grant(p, h.g, c.key, c.u, v, c.lane, now, now_s, f[4])
          granted = true
        end
      end
      if not granted and (not head or f[2] < head) then
        -- It enters the index: the head of its lane for the members after
        -- it (a claim would take it first).
        h.heads[eligible] = f[2]
      end
    end
    if not granted then
      c.fresh = nil -- to_eligible indexes it and wakes claimers
      to_eligible(p, c, f[3], now, unpack(f[4] or NONE))
    end
  end
end

-- redeliver adds to the hand-off h the grants that an earlier call
-- recording success c made to the same worker instance, when c's success
-- is sent again because that call's answer was lost: c's downstream
-- members still running under a lease from that call (its lease id has
-- that call's prefix, which c's success recorded as handoff_prefix; the
-- attempt was started by this instance; not expired), up to h.max grants
-- in all, each once (a join of two successes of that call is downstream
-- of both). The worker never received them; without this they would
-- wait for their leases to run out. Nothing is written.
local function redeliver(p, h, c, now)
  if not c.out or c.out == '' then return end
  local prefix = redis.call('HGET', c.key, 'handoff_prefix')
  if not prefix or prefix == '' then return end
  prefix = prefix .. '-'
  local g = h.g
  h.again = h.again or {}
  for _, d in each_edge, c.out, 1 do
    if #g.list >= h.max then return end
    if not h.again[d] and regrant(p, g, d, prefix, now) then h.again[d] = true end
  end
end

-- failed_with reports whether the attempt of c that ran under lease id
-- lease_id and epoch epoch ended failed with message (as attempt_end
-- recorded it): a failure sent again after its answer was lost, whether
-- that attempt is still the last one or a retry has started since. It
-- looks back from the last attempt while their epochs are not below
-- epoch (each attempt takes a greater epoch than the one before), so a
-- repeat costs a read or two; the record keeps ATTEMPTS_KEPT attempts.
local function failed_with(c, lease_id, epoch, message)
  local want = tonumber(epoch)
  if not want then return false end
  local n = num(c.attempt_count)
  for a = n, math.max(1, n - ATTEMPTS_KEPT + 1), -1 do
    local f = 'att:' .. itoa(a)
    local v = redis.call('HMGET', c.key, f, f .. ':end')
    -- The attempt's record: type, worker, instance, lease id, epoch, start.
    local _, _, _, lid, ep = string.match(v[1] or '', '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t')
    local e = tonumber(ep)
    if not e or e < want then return false end
    if ep == epoch then
      if lid ~= lease_id or not v[2] then return false end
      local _, outcome, msg = string.match(v[2], '^([^\t]*)\t([^\t]*)\t(.*)$')
      return outcome == 'failed' and msg == clip(message)
    end
  end
  return false
end

-- FINISH_KINDS are the kinds of an ff_finish group.
local FINISH_KINDS = {ok = true, retry = true, fail = true}

-- ff_finish: end many attempts of one partition, each a success or a
-- failure, fenced by lease id and epoch; optionally hand the downstream
-- flow members the successes make eligible to the finishing worker.
-- KEYS[1]  partition anchor
-- ARGV[1]  jitter seed (random integer)
-- ARGV[2]  hand-off: the most grants to make (0 = no hand-off)
-- ARGV[3]  hand-off: worker id
-- ARGV[4]  hand-off: worker instance id
-- ARGV[5]  hand-off: worker capabilities, comma-separated
-- ARGV[6]  hand-off: namespace
-- ARGV[7]  hand-off: lanes, comma-separated
-- ARGV[8]  hand-off: lease duration, ms
-- ARGV[9]  hand-off: lease id prefix (random, unique per call)
-- ARGV[10] hand-off: the worker's kinds, comma-separated ('' = any)
-- ARGV[11..] groups of 5: uuid, lease id, lease epoch, kind, data where
--           kind is 'ok' (data = result), 'retry' or 'fail' (data = error
--           message; 'retry' asks for a retry if attempts remain)
-- Reply: {1, items, grants}; item = {1, public_state, retry_at}
--        | {0, 'not_found'} | {0, 'stale_lease', reason, public_state};
--        the success of a flow member that ended its run with a clean
--        success has four more elements: the run's uuid, and its outcome
--        as ff_run_outcome answers it (run fields, result exec name,
--        result);
--        grants as ff_claim's, made by the hand-off (see settle_handoff):
--        each such member goes from pending to active in this call and is
--        never in the eligible index. An 'ok' item repeating the success
--        that ended the same lease's attempt, with the same output, is
--        answered {1, 'completed', 0} and changes nothing (a report sent
--        again after its answer was lost); with a hand-off, the grants the
--        lost answer held for this worker instance are sent again (see
--        redeliver). A 'retry' or 'fail' item repeating the failure that
--        ended the attempt of the same lease (the last attempt, or an
--        earlier one when the retry it scheduled was claimed since), with
--        the same message, is answered {1, public_state, retry_at} with
--        the execution's state now and changes nothing.
--        {0, 'invalid', 'handoff' | 'items', message}: a malformed head,
--        an incomplete group or a kind other than ok, retry and fail
--        (nothing written)
local function ff_finish(keys, argv)
  -- The shape is checked before the first item: an item is written before
  -- the next is read, and the index updates of all wait for flush, after
  -- the hand-off's grants (which use its lease duration).
  local nargv = #argv
  if nargv < 10 or (nargv - 10) % 5 ~= 0 then
    return refuse('invalid', 'items', 'want a head of 10 entries, then groups of uuid, lease id, lease epoch, kind, data')
  end
  for i = 14, nargv, 5 do
    if not FINISH_KINDS[argv[i]] then
      return refuse('invalid', 'items', 'group ' .. itoa((i - 9) / 5) .. ': kind ' .. clip(argv[i]) .. ' is none of ok, retry, fail')
    end
  end
  local max, ttl = tonumber(argv[2]), nil
  if max and max > 0 then ttl = tonumber(argv[8]) end
  if not max or (max > 0 and not ttl) then
    return refuse('invalid', 'handoff', 'max grants and lease duration must be numbers')
  end
  local p = part(keys[1])
  local now = now_ms()
  local h
  if max > 0 then
    h = {max = max, ns = argv[6], lanes = token_set(argv[7]), have = token_set(argv[5]), fresh = {}, fired = {}, fed = {}, heads = {}, kinds = kind_set(argv[10]),
      g = grant_ctx(argv[3], argv[4], ttl, argv[9])}
    h.g.results = {} -- results recorded by this call, for the grants' inputs
    p.handoff = h
  end
  local items = {}
  -- A success that ends its run cleanly returns the outcome with its item
  -- (finish_run sets p.ended) instead of publishing the run-end notice.
  p.collect_ended = true
  for i = 11, nargv, 5 do
    local c = read_core(p, argv[i], FINISH_FIELDS)
    if not c then
      items[#items + 1] = refuse('not_found')
    else
      local why = lease_check(c, argv[i + 1], argv[i + 2], now)
      if why == 'not_active' and argv[i + 3] == 'ok' and c.lease_id == argv[i + 1] and c.lease_epoch == argv[i + 2]
          and public_of(c.state) == 'completed' and (redis.call('HGET', c.key, 'result') or '') == argv[i + 4] then
        -- The success that ended this very attempt, sent again with the
        -- same output (its answer was lost): it was recorded once, and is
        -- answered alike, with the hand-off grants the lost answer held.
        -- Another output is no repeat: refused below.
        items[#items + 1] = ok('completed', 0)
        if h then redeliver(p, h, c, now) end
      elseif why and argv[i + 3] ~= 'ok' and (why == 'not_active' or why == 'lease_mismatch')
          and failed_with(c, argv[i + 1], argv[i + 2], argv[i + 4]) then
        -- The failure that ended the attempt of this lease, sent again
        -- with the same message (its answer was lost), also once the
        -- retry it scheduled was claimed or has ended: recorded once,
        -- answered with the execution's state now (the retry's due time,
        -- if it still waits for one).
        local public = public_of(c.state)
        local due = 0
        if public == 'delayed' then due = num(redis.call('HGET', c.key, 'eligible_at')) end
        items[#items + 1] = ok(public, due)
      elseif why then
        items[#items + 1] = stale_refusal(p, c, why, now, argv[1], i)
      elseif argv[i + 3] == 'ok' then
        leave_indexes(p, c)
        local af, av = attempt_end(c, 'success', '', now)
        if h then h.g.results[c.u] = argv[i + 4] end
        p.success = true -- the members this success helps fire may be handed off (decide)
        local public
        if h then
          -- The prefix of the leases this call grants: a repeat of this
          -- success re-delivers them (see redeliver).
          public = to_terminal(p, c, 'success', nil, now, 'result', argv[i + 4], af, av, 'handoff_prefix', h.g.prefix)
        else
          public = to_terminal(p, c, 'success', nil, now, 'result', argv[i + 4], af, av)
        end
        p.success = nil
        if p.ended then
          items[#items + 1] = ok(public, 0, unpack(p.ended))
          p.ended = nil
        else
          items[#items + 1] = {1, public, 0} -- ok(public, 0), without its vararg call
        end
      else
        local public, due = after_attempt(p, c, 'failed', argv[i + 4], now, true,
          argv[i + 3] == 'retry', jitter_frac(argv[1], i))
        items[#items + 1] = ok(public, due)
      end
    end
  end
  local grants = NONE
  if h then
    settle_handoff(p, now)
    grants = h.g.list
  end
  flush(p)
  return ok(items, grants)
end

register('ff_claim', ff_claim)
register('ff_claim_lost', ff_claim_lost, {'no-writes'})
register('ff_renew', ff_renew)
register('ff_finish', ff_finish)
register('ff_lease_check', ff_lease_check, {'no-writes'})
