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
-- ARGV[7]  the kinds it has handlers for, comma-separated (sorted; '' =
--          not said: any kind)
-- Reply: {1, 'registered' | 'refreshed', expires_at}
--        {0, 'invalid', 'ttl', message} (nothing written)
-- Registry keys are not on a flow partition: they are per namespace, with
-- their own hash tag {w:<ns>}. Expired instances are dropped from the ZSET
-- here; their hashes expire on their own.
local function ff_worker_heartbeat(keys, argv)
  local ttl, bad = int_arg(argv[6], 'ttl', 1)
  if not ttl then return bad end
  local now = now_ms()
  local expires = now + ttl
  local fresh = redis.call('ZSCORE', keys[1], argv[2])
  local now_s, expires_s = ts(now), ts(expires)
  local status, connected = 'refreshed', NONE
  if not fresh or tonumber(fresh) <= now then
    status, connected = 'registered', {'connected_at', now_s}
  end
  redis.call('HSET', keys[2], 'worker_id', argv[3], 'lanes', argv[4], 'caps', argv[5], 'kinds', argv[7] or '',
    'seen_at', now_s, 'expires_at', expires_s, unpack(connected))
  redis.call('PEXPIREAT', keys[2], expires_s)
  redis.call('ZADD', keys[1], expires_s, argv[2])
  redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', now_s)
  return ok(status, expires)
end

-- ff_worker_sweep: drop the expired instances of a namespace's worker
-- registry (the retention scanner, for namespaces no heartbeat comes to
-- any more). The ZSET goes with its last entry, so a namespace without a
-- connected worker has no registry key left; the store then drops it from
-- <prefix>ff:namespaces (Store.PruneNamespaces). The instances' hashes
-- expire on their own.
-- KEYS[1]  <prefix>ff:{w:<ns>}:workers   ZSET instance -> expiry ms
-- Reply: {1, connected instances left}
local function ff_worker_sweep(keys)
  redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', ts(now_ms()))
  return ok(redis.call('ZCARD', keys[1]))
end

-- ff_prune_lanes: drop from the partition's lane set (the anchor) the
-- lanes that hold nothing, so that what walks it (the scanners, listings)
-- costs what is in use, not every lane ever used. A lane holds nothing
-- when every index of it is empty and no execution of it runs (a running
-- execution is in no lane index, only in B:leases, and comes back to one
-- when its attempt ends). Everything that puts an execution in a lane
-- index without it running before (a creation, a staging) adds the lane
-- to the set again, and this call is atomic, so a lane is never missing
-- while it holds something. The set is walked with SSCAN, about limit
-- members a call, from where the last call stopped (B:lanes:sweep, the
-- cursor; deleted at the end of a pass). The running executions are read
-- only when an empty lane was found, and not at all on a partition with
-- more than PRUNE_RUNNING_MAX of them: its empty lanes wait for a quieter
-- pass.
-- KEYS[1]  partition anchor
-- ARGV[1]  limit (about how many lanes a call looks at, 1..1000)
-- Reply: {1, lanes dropped, more}: more = the pass is not over and this
--        call dropped some (more may follow)
--        {0, 'invalid', 'limit', message} (nothing written)
local LANE_INDEXES = {'eligible', 'delayed', 'pending', 'blocked', 'blocked_budget', 'blocked_quota', 'terminal'}
-- PRUNE_RUNNING_MAX bounds the running executions a call reads (one HMGET
-- each, a few microseconds, in one atomic call).
local PRUNE_RUNNING_MAX = 2000

local function ff_prune_lanes(keys, argv)
  local limit = tonumber(argv[1])
  if not limit or limit ~= math.floor(limit) or limit < 1 or limit > 1000 then
    return refuse('invalid', 'limit', 'not an integer in 1..1000: ' .. tostring(argv[1]))
  end
  local p = part(keys[1])
  local sweep = p.base .. ':lanes:sweep'
  local from = redis.call('GET', sweep)
  if not from or not string.match(from, '^%d+$') then from = '0' end
  local r = redis.call('SSCAN', keys[1], from, 'COUNT', itoa(limit))
  local empty, n = {}, 0
  for _, m in ipairs(r[2]) do
    local ns, lane = string.match(m, '^([^:]+):(.+)$')
    if ns then
      local q, ks = p.base .. ':q:' .. ns .. ':' .. lane .. ':', {}
      for i, index in ipairs(LANE_INDEXES) do ks[i] = q .. index end
      if redis.call('EXISTS', unpack(ks)) == 0 then
        empty[m] = true
        n = n + 1
      end
    end
  end
  local dropped = 0
  if n > 0 then
    local running = redis.call('ZCARD', p.leases)
    if running <= PRUNE_RUNNING_MAX then
      if running > 0 then
        for _, u in ipairs(redis.call('ZRANGE', p.leases, 0, -1)) do
          local f = redis.call('HMGET', p.xp .. u, 'ns', 'lane')
          if f[1] and f[2] then empty[f[1] .. ':' .. f[2]] = nil end
        end
      end
      local list = {}
      for m in pairs(empty) do list[#list + 1] = m end
      call_all('SREM', keys[1], list)
      for _, m in ipairs(list) do
        local ns, lane = string.match(m, '^([^:]+):(.+)$')
        redis.call('SREM', p.base .. ':route:' .. ns, lane) -- a list left by a namespace without workers
      end
      dropped = #list
    end
  end
  local cursor = r[1]
  if cursor ~= '0' then
    redis.call('SET', sweep, cursor)
  elseif from ~= '0' then
    redis.call('DEL', sweep) -- the end of the pass: the next starts again
  end
  return ok(dropped, (cursor ~= '0' and dropped > 0) and 1 or 0)
end

-- ff_unblock_route: make executions waiting for a capable worker eligible
-- again when the namespace's connected workers now cover them.
-- KEYS[1]  partition anchor
-- ARGV[1]  limit (executions looked at, 1..1000)
-- ARGV[2]  namespace
-- ARGV[3]  the union of the capabilities of its connected workers
-- ARGV[4..] lane, offset, lap end triples: where the caller's cursor
--          starts reading the lane's blocked index and where its lap
--          through it ends (each 0..2^32-1; a lane not listed: 0, 0)
-- Reply: {1, processed, more, {lane, next offset, lap end, ...}}
--        {0, 'invalid', 'limit' | 'offsets', message} (nothing written)
-- Each lane of the namespace gets a share of the limit (what a lane leaves
-- unused goes to the lanes after it), starting at a lane that rotates with
-- the clock, and is read in score order from its offset, not only the due
-- entries (what changed is the union, not the time). An execution the
-- union still does not cover keeps its place and score: the index is
-- never reordered, so listings and the park log see a stable order. A
-- lane is read in laps: a read from offset 0 starts one, which ends at the
-- lane's length then (ZCARD), so executions parked during a lap are left
-- to the next. The reply gives each lane read its next offset and lap
-- end: when the read filled the share, the offset plus the entries read
-- that stay parked, and the lap end less the entries read that left (the
-- promoted and healed ones, so what followed slid down), unless that
-- offset is 0 or reaches the lap end; else 0, 0 (the end of the lane or of
-- the lap was reached: the next call starts a new lap at the head). A
-- caller that keeps them reads a backlog nobody can run a share at a time,
-- even one growing at its tail, so it never hides one a worker now covers
-- for more than a lap; a stale offset only changes which entries a call
-- looks at first. more = something was promoted and a lane's read filled its share
-- (parked executions alone never make the scanner hurry).
-- The lanes read are those B:route:<ns> lists (every call that parks an
-- execution in a blocked index lists its lane there: route_lane), so a
-- call costs the namespace's lanes with something parked, whatever the
-- other lanes and namespaces of the partition. A lane found empty from
-- the head (a read from offset 0 to its end that left nothing parked)
-- leaves the list. Each call also looks at ROUTE_SEED_LANES members of
-- the lane set (SSCAN from the cursor in B:route:sweep) and lists a lane
-- of any namespace whose blocked index has entries the list lacks
-- (parked by a release before the list, or any drift): the whole set is
-- seen every (lanes / ROUTE_SEED_LANES) calls.
local ROUTE_SEED_LANES = 32

local function ff_unblock_route(keys, argv)
  local limit = tonumber(argv[1])
  if not limit or limit ~= math.floor(limit) or limit < 1 or limit > 1000 then
    return refuse('invalid', 'limit', 'not an integer in 1..1000: ' .. tostring(argv[1]))
  end
  if (#argv - 3) % 3 ~= 0 then
    return refuse('invalid', 'offsets', 'want lane, offset, lap end triples, got ' .. (#argv - 3) .. ' values')
  end
  local from = {}
  for i = 4, #argv, 3 do
    local at = {}
    for j, what in ipairs({'offset', 'lap end'}) do
      local v = tonumber(argv[i + j])
      if not v or v ~= math.floor(v) or v < 0 or v > 4294967295 then
        return refuse('invalid', 'offsets', what .. ' of lane ' .. argv[i] .. ' not an integer in 0..4294967295: ' .. argv[i + j])
      end
      at[j] = v
    end
    from[argv[i]] = at
  end
  local p = part(keys[1])
  local ns = argv[2]
  local union = {}
  for token in string.gmatch(argv[3], '[^,]+') do union[token] = true end
  local now = now_ms()
  -- First the seeding, so that a lane it lists is read at once.
  local sweep = p.base .. ':route:sweep'
  local swept = redis.call('GET', sweep)
  if not swept or not string.match(swept, '^%d+$') then swept = '0' end
  local r = redis.call('SSCAN', p.anchor, swept, 'COUNT', itoa(ROUTE_SEED_LANES))
  for _, m in ipairs(r[2]) do
    local lns, lane = string.match(m, '^([^:]+):(.+)$')
    if lns and redis.call('EXISTS', p.base .. ':q:' .. m .. ':blocked') == 1 then
      redis.call('SADD', p.base .. ':route:' .. lns, lane)
    end
  end
  if r[1] == '0' then redis.call('DEL', sweep) else redis.call('SET', sweep, r[1]) end
  local routed = p.base .. ':route:' .. ns
  local lanes = redis.call('SMEMBERS', routed)
  table.sort(lanes)
  local n, seen, cut, resume = 0, 0, false, {}
  local start = now % math.max(1, #lanes)
  for i = 0, #lanes - 1 do
    if seen >= limit then
      cut = true
      break
    end
    local lane = lanes[(start + i) % #lanes + 1]
    local key = lane_key(p, ns, lane, 'blocked')
    local share = math.ceil((limit - seen) / (#lanes - i))
    local at = from[lane] or {0, 0}
    local off, stop = at[1], at[2]
    if off == 0 then stop = redis.call('ZCARD', key) end -- a new lap: it ends where the lane ends now
    local list = redis.call('ZRANGE', key, off, off + share - 1)
    seen = seen + #list
    local full = #list >= share -- else the read reached the end of the lane
    cut = cut or full
    local stay = 0
    for _, u in ipairs(list) do
      local c = read_core(p, u)
      if not c or not is(c.state, 'runnable') or RUNNABLE_INDEX[split(c).eligibility] ~= 'blocked' then
        zrem(p, key, u) -- not blocked any more: heal the index
      elseif covers(union, redis.call('HGET', c.key, 'caps')) then
        leave_indexes(p, c)
        to_eligible(p, c, c.v.attempt, now)
        n = n + 1
      else
        stay = stay + 1 -- still parked: left where it is
      end
    end
    local noff, nstop = off + stay, stop - (#list - stay)
    if not full or noff == 0 or noff >= nstop then noff, nstop = 0, 0 end -- the next call starts a new lap
    if off == 0 and not full and stay == 0 then
      -- Read from the head to the end and nothing stayed: the index is
      -- empty once flush applies the removals (a later park lists it again).
      redis.call('SREM', routed, lane)
    end
    resume[#resume + 1] = lane
    resume[#resume + 1] = noff
    resume[#resume + 1] = nstop
  end
  flush(p)
  return ok(n, (cut and n > 0) and 1 or 0, resume)
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
-- ARGV[5]  optional: the next attempt and ARGV[6] the reset count the
--          caller's claim read (a quota denial of ClaimAdmitted): blocked
--          only while they are still the execution's, so a member a
--          replay reset in between (same attempt, its deferred quota
--          references back) is not parked under what was read before
-- Reply: {1, 'blocked'}
--        {0, 'not_found'}
--        {0, 'wrong_state', public_state}  (not eligible now)
--        {0, 'wrong_state', public_state, 'changed'}  (not the attempt or
--        reset count given; nothing written)
--        {0, 'invalid', 'reason' | 'delay', message} (nothing written)
local function ff_block(keys, argv)
  local p = part(keys[1])
  local elig = BLOCK_ELIGIBILITY[argv[2]]
  if not elig then return refuse('invalid', 'reason', 'not an admission blocking reason: ' .. tostring(argv[2])) end
  local delay = tonumber(argv[4])
  if not delay then return refuse('invalid', 'delay', 'not a number: ' .. tostring(argv[4])) end
  local c = read_core(p, argv[1])
  if not c then return refuse('not_found') end
  if not is(c.state, 'runnable') or split(c).eligibility ~= 'eligible_now' then
    return refuse('wrong_state', public_of(c.state))
  end
  if argv[5] and (num(c.attempt_count) + 1 ~= num(argv[5])
      or num(redis.call('HGET', c.key, 'resets')) ~= num(argv[6])) then
    return refuse('wrong_state', public_of(c.state), 'changed')
  end
  local now = now_ms()
  leave_indexes(p, c)
  redis.call('HSET', c.key, 'updated_at', ts(now), 'blocking_detail', clip(argv[3]),
    'state', sv('runnable', 'unowned', elig, argv[2], 'none', c.v.attempt))
  zadd(p, lane_key(p, c.ns, c.lane, RUNNABLE_INDEX[elig]), ts(now + delay), c.u)
  if elig == 'blocked_by_route' then route_lane(p, c.ns, c.lane) end
  flush(p)
  return ok('blocked')
end

-- ff_unblock: make blocked executions eligible again when they are still
-- blocked for the given reason (the caller checked that it cleared), and
-- heal the entries of the reason's index that the caller found stale.
-- KEYS[1]  partition anchor
-- ARGV[1]  reason: waiting_for_budget | waiting_for_quota
-- ARGV[2]  n, how many uuids to unblock follow
-- ARGV[3..2+n]  uuids to unblock
-- ARGV[3+n..]   uuids whose entry in the reason's index the caller found
--               stale (the record says not blocked for the reason)
-- A uuid of either list whose execution is no longer blocked for the
-- reason leaves the reason's index (healing a stale entry) and is not
-- counted. One of the second list that is blocked for the reason after
-- all keeps its entry. No entry that stays blocked is re-scored: the
-- unblock scanner's cursor (store.UnblockCursor), not the order of the
-- index, spreads its passes over a long line.
-- Reply: {1, unblocked}
--        {0, 'invalid', 'reason' | 'count', message} (nothing written)
local function ff_unblock(keys, argv)
  local elig = BLOCK_ELIGIBILITY[argv[1]]
  if not elig or argv[1] == 'waiting_for_capable_worker' then
    return refuse('invalid', 'reason', 'not a budget or quota blocking reason: ' .. tostring(argv[1]))
  end
  local nu = tonumber(argv[2])
  if not nu or nu ~= math.floor(nu) or nu < 0 or nu > #argv - 2 then
    return refuse('invalid', 'count', 'not an integer in 0..' .. (#argv - 2) .. ': ' .. tostring(argv[2]))
  end
  local p = part(keys[1])
  local now = now_ms()
  local n = 0
  for i = 3, #argv do
    local c = read_core(p, argv[i])
    if c then
      if not is(c.state, 'runnable') or split(c).reason ~= argv[1] or c.v.eligibility ~= elig then
        zrem(p, lane_key(p, c.ns, c.lane, RUNNABLE_INDEX[elig]), c.u) -- not blocked for the reason: not in its index
      elseif i <= 2 + nu then
        leave_indexes(p, c)
        to_eligible(p, c, c.v.attempt, now)
        n = n + 1
      end
    end
  end
  flush(p)
  return ok(n)
end

register('ff_worker_heartbeat', ff_worker_heartbeat)
register('ff_worker_sweep', ff_worker_sweep)
register('ff_prune_lanes', ff_prune_lanes)
register('ff_block', ff_block)
register('ff_unblock', ff_unblock)
register('ff_unblock_route', ff_unblock_route)
