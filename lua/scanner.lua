-- scanner.lua: the steps of the background scanners. Each handles at most
-- a limit of due entries of one partition, re-checks every entry against
-- the record (so running it from several processes at once is safe) and
-- drops entries that no longer apply.
--
-- Every function replies {1, processed, more} where more is 1 when the
-- limit was reached, or {0, 'invalid', field, message} for a limit (or
-- age) that is not a whole number in range (nothing written).

-- sweep is the step of a scanner over one time-scored index of a
-- partition (p[index]). For each due member, at(c) gives the time its
-- record says the entry is due, or nil when the entry no longer applies;
-- such an entry is dropped, one not yet due is rescheduled at that time,
-- and one due is handed to act(p, c, now, i), which is counted.
-- keys and argv are the scanner function's: KEYS[1] is the partition
-- anchor, ARGV[1] the limit.
local function sweep(keys, argv, index, at, act)
  local limit, bad = int_arg(argv[1], 'limit', 1)
  if not limit then return bad end
  local p = part(keys[1])
  local key = p[index]
  local now = now_ms()
  local list = due(key, now, limit)
  local n = 0
  for i, u in ipairs(list) do
    local c = read_core(p, u)
    local t = c and at(c)
    if not t then
      zrem(p, key, u)
    elseif t > now then
      redis.call('ZADD', key, ts(t), u)
    else
      act(p, c, now, i)
      n = n + 1
    end
  end
  flush(p)
  return ok(n, #list >= limit and 1 or 0)
end

-- first_overdue returns the act of a sweep over an index of running
-- executions whose own limit is own (a reason of OVERDUE): it applies the
-- first limit of the execution that passed (overdue), which is own unless
-- another passed before it (a lease that expired before the attempt timed
-- out makes a reclaim, not a timeout), so that the outcome does not depend
-- on which scanner, or which fenced call of the worker, comes first. The
-- transition leaves the indexes of the running attempt (leases, timeouts),
-- and deadlines when it ends the execution. seed is the scanner's jitter
-- seed (a timeout's retry backoff).
local function first_overdue(own, seed)
  return function(p, c, now, i)
    end_overdue(p, c, overdue(c, now) or own, now, jitter_frac(seed, i))
  end
end

-- ff_expire_leases: requeue (or fail) executions whose lease expired;
-- one whose attempt timeout or deadline passed before it is timed out or
-- expired instead. Each lease ended is published (lease_ended).
-- KEYS[1]  partition anchor
-- ARGV[1]  limit
-- ARGV[2]  jitter seed
local function ff_expire_leases(keys, argv)
  return sweep(keys, argv, 'leases', function(c)
    return is(c.state, 'active') and num(c.lease_expires_at) or nil
  end, first_overdue('lease_expired', argv[2]))
end

-- ff_timeout_attempts: fail running attempts whose attempt timeout passed;
-- they are retried per the policy. One whose lease expired or deadline
-- passed before the timeout is reclaimed or expired instead. Each lease
-- ended is published (lease_ended).
-- KEYS[1]  partition anchor
-- ARGV[1]  limit
-- ARGV[2]  jitter seed
local function ff_timeout_attempts(keys, argv)
  return sweep(keys, argv, 'timeouts', function(c)
    if not is(c.state, 'active') then return nil end -- stale
    local deadline = num(c.attempt_deadline_at)
    return deadline ~= 0 and deadline or nil
  end, first_overdue('attempt_timed_out', argv[2]))
end

-- ff_expire_deadlines: end executions whose execution deadline passed, in
-- any non-terminal state, with outcome expired. A running attempt whose
-- lease expired or timeout passed before the deadline ends as that limit
-- makes it end first (reclaim, retry or failure, as its scanner would
-- have), then the execution expires unless that ended it. A running
-- attempt's lease ended is published once (lease_ended).
-- KEYS[1]  partition anchor
-- ARGV[1]  limit
-- ARGV[2]  jitter seed
local function ff_expire_deadlines(keys, argv)
  return sweep(keys, argv, 'deadlines', function(c)
    return not is(c.state, 'terminal') and c.deadline_at ~= '' and num(c.deadline_at) or nil
  end, function(p, c, now, i)
    if is(c.state, 'active') then
      local why = overdue(c, now) or 'deadline_passed'
      if why ~= 'deadline_passed' then
        end_overdue(p, c, why, now, jitter_frac(argv[2], i))
        c = read_core(p, c.u) -- what the end of the attempt left
        if is(c.state, 'terminal') then return end
      end
    end
    expire_deadline(p, c, now)
  end)
end

-- lanes_due hands act(key, u, lane) every member due at `at` of the index
-- `index` of each lane of the partition, while seen (the entries looked
-- at so far) is under limit; it returns seen.
local function lanes_due(p, index, at, limit, seen, act)
  for _, l in ipairs(lane_list(p)) do
    if seen >= limit then break end
    local key = lane_key(p, l[1], l[2], index)
    local list = due(key, at, limit - seen)
    seen = seen + #list
    for _, u in ipairs(list) do act(key, u, l) end
  end
  return seen
end

-- SEED_LANES is how many members of the lane set one promoter call looks
-- at to list in B:due:delayed the lanes with delayed entries it lacks
-- (entries written by a release before the list, or any drift): the
-- whole set is seen every (lanes / SEED_LANES) calls.
local SEED_LANES = 16

-- ff_promote_delayed: make due delayed executions eligible: those of the
-- lanes B:due:delayed says have something due (due_lane), up to the
-- limit. Once the entries read left their indexes, each lane read is
-- scored at its next entry, or leaves the list when it has none: a lane
-- with more due entries than the limit takes its turn again by its next
-- entry's time, after the lanes with entries due before that. Each call
-- then looks at SEED_LANES members of the lane set (SSCAN from the cursor
-- in B:due:sweep), listing a lane whose delayed index has entries the
-- list lacks (the lanes read are listed right already). A call costs
-- about its limit and SEED_LANES, whatever the lanes of the partition.
-- KEYS[1]  partition anchor
-- ARGV[1]  limit
local function ff_promote_delayed(keys, argv)
  local limit, bad = int_arg(argv[1], 'limit', 1)
  if not limit then return bad end
  local p = part(keys[1])
  local now = now_ms()
  local n, seen = 0, 0
  local lanes = p.base .. ':due:delayed'
  local read, read_key = {}, {} -- the lanes read, in order, and their delayed index keys
  for _, m in ipairs(due(lanes, now, limit)) do
    if seen >= limit then break end
    local ns, lane = string.match(m, '^([^:]+):(.+)$')
    if not ns then
      redis.call('ZREM', lanes, m)
    else
      local key = lane_key(p, ns, lane, 'delayed')
      local list = due(key, now, limit - seen)
      seen = seen + math.max(#list, 1)
      for _, u in ipairs(list) do
        local c = read_core(p, u)
        zrem(p, key, u)
        if c and split(c).eligibility == 'not_eligible_until_time' and c.ns == ns and c.lane == lane then
          to_eligible(p, c, c.v.attempt, now)
          n = n + 1
        end
      end
      read[#read + 1] = m
      read_key[m] = key
    end
  end
  -- The entries read leave their indexes before anything reads a lane's
  -- first entry.
  flush(p)
  for _, m in ipairs(read) do
    local first = redis.call('ZRANGE', read_key[m], '0', '0', 'WITHSCORES')
    if first[2] then
      redis.call('ZADD', lanes, first[2], m)
    else
      redis.call('ZREM', lanes, m)
    end
  end
  local sweep = p.base .. ':due:sweep'
  local r = redis.call('SSCAN', p.anchor, redis.call('GET', sweep) or '0', 'COUNT', itoa(SEED_LANES))
  for _, m in ipairs(r[2]) do
    local ns, lane = string.match(m, '^([^:]+):(.+)$')
    if ns and not read_key[m] then
      local first = redis.call('ZRANGE', lane_key(p, ns, lane, 'delayed'), '0', '0', 'WITHSCORES')
      if first[2] then redis.call('ZADD', lanes, 'LT', first[2], m) end
    end
  end
  if r[1] == '0' then redis.call('DEL', sweep) else redis.call('SET', sweep, r[1]) end
  return ok(n, seen >= limit and 1 or 0)
end

-- ff_purge_terminal: delete flow runs ended longer ago than an age with
-- their members, then executions terminal for longer than the age, then
-- chunked stagings never committed whose deadline passed. A flow member
-- lives as long as its run: its downstream members read its result, and a
-- replay its outcome, until the run is deleted. One due in its lane's
-- terminal index while its run is kept is seen again an age later.
-- KEYS[1]  partition anchor
-- ARGV[1]  limit (index entries, members and staged members looked at)
-- ARGV[2]  age, ms
-- Reply: {1, executions deleted, more, {budget id...}}: the ids of the
--        run-scoped budgets of the deleted runs that the members deleted
--        (or looked at) in this call name; the same id may come again in
--        a later call, while the run's members are drained
local function ff_purge_terminal(keys, argv)
  local limit, bad = int_arg(argv[1], 'limit', 1)
  if not limit then return bad end
  local age
  age, bad = int_arg(argv[2], 'age', 0)
  if not age then return bad end
  local p = part(keys[1])
  local now = now_ms()
  local cutoff = now - age
  local n, seen = 0, 0
  -- Flow runs ended before the cutoff, first (the lane pass below must not
  -- keep members deleted here). A run goes at once: its record and
  -- idempotency key are deleted and its node map renamed to
  -- B:f:<uuid>:purge, so that it is neither read nor replayed half
  -- deleted; its members then go as the limit allows, over several calls
  -- for a large run (B:runs:purging lists the runs whose members are left).
  local purging = p.base .. ':runs:purging'
  -- The run-scoped budgets of the runs deleted, as their members name
  -- them: the reply carries them, and the store deletes them (budgets
  -- live on other hash slots; see Store.PurgeTerminal).
  local budgets, listed = {}, {}
  local function run_budgets(run, ids)
    if not ids or ids == '' then return end
    local own = '.' .. run
    for id in string.gmatch(ids, '[^,]+') do
      if not listed[id] and string.find(id, '@', 1, true) and string.sub(id, -#own) == own then
        listed[id] = true
        budgets[#budgets + 1] = id
      end
    end
  end
  -- drain deletes members of a run being deleted, at least one and up to
  -- the limit, and reports whether none is left.
  local function drain(run)
    local nodes = p.base .. ':f:' .. run .. ':purge'
    -- Any members (HSCAN from cursor 0 would stall on the empty buckets
    -- the deletions leave at the start of a large map).
    local batch = redis.call('HRANDFIELD', nodes, itoa(math.max(limit - seen, 1)), 'WITHVALUES')
    local names = {}
    for i = 1, #batch, 2 do
      local u = batch[i + 1]
      local ck = core_key(p, u)
      local v = redis.call('HMGET', ck, 'state', 'ns', 'lane', 'budgets')
      run_budgets(run, v[4])
      if is(v[1], 'terminal') then
        redis.call('DEL', ck)
        zrem(p, lane_key(p, v[2], v[3], 'terminal'), u)
        zrem(p, p.deadlines, u)
        n = n + 1
      end
      names[#names + 1] = batch[i]
    end
    seen = seen + #names
    call_all('HDEL', nodes, names)
    return redis.call('EXISTS', nodes) == 0
  end
  for _, run in ipairs(redis.call('ZRANGE', purging, '0', itoa(limit - 1))) do
    if seen >= limit then break end
    seen = seen + 1
    if drain(run) then zrem(p, purging, run) end
  end
  if seen < limit then
    local ended = p.base .. ':runs:ended'
    for _, run in ipairs(due(ended, cutoff, limit - seen)) do
      if seen >= limit then break end
      seen = seen + 1
      local runkey = p.base .. ':f:' .. run
      local v = redis.call('HMGET', runkey, 'idem_key', 'ns')
      if v[1] and v[1] ~= '' then
        local ik = p.base .. ':fidem:' .. v[2] .. ':' .. v[1]
        if redis.call('GET', ik) == run then redis.call('DEL', ik) end
      end
      redis.call('DEL', runkey, runkey .. ':order', runkey .. ':failed')
      zrem(p, ended, run)
      if v[2] then zrem(p, p.base .. ':runs:ns:' .. v[2], run) end
      if redis.call('EXISTS', runkey .. ':nodes') == 1 then
        redis.call('RENAME', runkey .. ':nodes', runkey .. ':purge')
        if not drain(run) then zadd(p, purging, ts(now), run) end
      end
    end
  end
  -- Then executions terminal for longer than the age.
  seen = lanes_due(p, 'terminal', cutoff, limit, seen, function(key, u)
    local ck = core_key(p, u)
    local v = redis.call('HMGET', ck, 'state', 'idem_key', 'ns', 'flow_id')
    if v[4] and v[4] ~= '' and is(v[1], 'terminal') and redis.call('EXISTS', p.base .. ':f:' .. v[4]) == 1 then
      zadd(p, key, ts(now), u) -- goes with its run
      return
    end
    zrem(p, key, u)
    if is(v[1], 'terminal') then
      if v[2] then
        local ik = p.base .. ':idem:' .. v[3] .. ':' .. v[2]
        if redis.call('GET', ik) == u then redis.call('DEL', ik) end
      end
      redis.call('DEL', ck)
      zrem(p, p.deadlines, u)
      n = n + 1
    end
  end)
  -- Stagings of large runs never committed (a stager that crashed or gave
  -- up): their members go, as the limit allows (each counts, as a purged
  -- run's members do); a staging stays listed until its last is gone.
  if seen < limit then
    for _, run in ipairs(due(p.base .. ':staging', now, limit - seen)) do
      if seen >= limit then break end
      seen = seen + 1 + drop_staged(p, run, limit - seen - 1, now)
    end
  end
  flush(p)
  return ok(n, seen >= limit and 1 or 0, budgets)
end

register('ff_expire_leases', ff_expire_leases)
register('ff_timeout_attempts', ff_timeout_attempts)
register('ff_expire_deadlines', ff_expire_deadlines)
register('ff_promote_delayed', ff_promote_delayed)
register('ff_purge_terminal', ff_purge_terminal)
