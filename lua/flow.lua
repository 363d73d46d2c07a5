-- flow.lua: flow runs: staging a compiled DAG, resolving edges when a
-- member ends, the run's state, and cancelling a run. Every member of a
-- run lives on the run's partition, so each of these is one FCALL.
--
-- Run record B:f:<uuid> (HASH): ns, flow, state (running, succeeded,
-- failed, cancelled), total, left (members not ended yet), failed,
-- skipped, cancelled, unhandled (failed members without an `on failure`/
-- `on done` edge out), result_node (uuid), result_outcome (set when the
-- result exec ends; kept by a replay when it succeeded), input, idem_key,
-- cancelling, cancel_reason, cancel_cursor, created_at, updated_at (the
-- run's own changes: staging, end, cancel, replay), ended_at, replays,
-- replayed_at, deciding ('1' while a replay by steps is decided: see
-- decide_step). A member's end costs the record one
-- HINCRBY: successes are counted by `left` alone (the store derives done
-- and succeeded). Runs staged before `left` existed carry done and
-- succeeded instead; their next member end converts them (count_end).
-- B:f:<uuid>:nodes (HASH): exec name -> uuid.
-- B:f:<uuid>:order (STRING): the run's members in flow order,
-- "<name>=<uuid>,..." (written by ff_stage_flow or ff_commit_flow as the
-- store sends it; absent on runs staged before it existed), for reads of
-- the run or a page of it without the node map.
-- B:f:<uuid>:failed (SET): the uuids of the members that ended failed,
-- expired or cancelled (added where the run counts the end, removed when
-- a replay resets the member), so that a read finds the failures without
-- reading every member.
--
-- Member record fields on top of an execution's: flow_id, flow_node,
-- is_result ('1' on the run's result exec),
-- join_need (edges that must hold; absent = deps_total, the default join
-- all), deps_total (absent on roots), deps_done, deps_ok,
-- out ("<uuid>:<on>,..." with on = success, failure or done), handled ('1'
-- when a failure is handled by an edge), input_from (uuid of the upstream
-- whose result is the input; '' = its own payload), ups ("<name>=<uuid>,..."
-- every upstream, for Task.Upstream).

-- Run counters by member outcome; a success has none (left counts it).
local RUN_COUNTER = {
  failed = 'failed', expired = 'failed', skipped = 'skipped', cancelled = 'cancelled',
}

-- holds reports whether an edge with condition on holds for an upstream
-- that ended with outcome. Skipped and cancelled upstreams satisfy no edge.
local function holds(on, outcome)
  local failed = outcome == 'failed' or outcome == 'expired'
  if on == 'success' then return outcome == 'success' end
  if on == 'failure' then return failed end
  return outcome == 'success' or failed -- done
end

-- decide records one decided edge into downstream d and fires it: eligible
-- when its join is satisfied, skipped when it can no longer be.
local function decide(p, d, ok_edge, now)
  if p.handoff and p.handoff.fired[d] then return end -- fired earlier in this call
  -- The one read of the downstream; while a hand-off may still grant,
  -- with what a grant needs.
  local h = p.handoff
  local dc = read_core(p, d, (h and #h.fresh < h.max) and HANDOFF_FIELDS or DOWNSTREAM_FIELDS)
  if not dc or not is(dc.state, 'runnable') or split(dc).eligibility ~= 'blocked_by_dependencies' then
    return -- gone, or already fired
  end
  -- The join counters, in the values read (deps_total, deps_done,
  -- deps_ok, join_need from at on).
  local raw, at = dc.raw, 9
  if not raw then raw, at = dc.claim, 23 end
  -- A hand-off grants only members whose join a success of the call
  -- (p.success, ff_finish) helps satisfy: not one fired by failures alone
  -- (a failure reported with a hand-off, or a lease the call found
  -- expired), whatever the order of the call's items.
  if h and ok_edge and p.success then h.fed[d] = true end
  local total, done, okc = num(raw[at]), num(raw[at + 1]) + 1, num(raw[at + 2])
  local need = total -- join all: staging writes join_need only when it differs
  local jn = raw[at + 3]
  if jn and jn ~= '' then need = num(jn) end
  if ok_edge then okc = okc + 1 end
  if okc >= need then
    leave_indexes(p, dc)
    dc.fresh = h ~= nil and h.fed[d] == true -- a hand-off may grant it (to_eligible)
    -- Its own attempt state: a member a replay put back is pending a replay.
    -- A member that fired is never decided again (above): its counters
    -- are not written (each field written costs the call ~2.7k
    -- instructions).
    to_eligible(p, dc, split(dc).attempt, now)
  elseif total - (done - okc) < need then
    leave_indexes(p, dc)
    to_terminal(p, dc, 'skipped', 'its join can no longer be satisfied', now)
  else
    redis.call('HSET', dc.key, 'deps_done', itoa(done), 'deps_ok', itoa(okc))
  end
end

-- The run record fields an outcome carries (store.runOf reads them): not
-- the run's input, which may be large.
local OUTCOME_FIELDS = {
  'ns', 'flow', 'state', 'total', 'left', 'done', 'succeeded', 'failed', 'skipped', 'cancelled',
  'result_node', 'result_outcome', 'created_at', 'ended_at', 'replays', 'replayed_at', 'idem_key',
}

-- The run record fields finish_run reads, in one HMGET: OUTCOME_FIELDS
-- (their positions), then what deciding the run's state needs on top.
local FINISH_RUN_FIELDS = {
  'ns', 'flow', 'state', 'total', 'left', 'done', 'succeeded', 'failed', 'skipped', 'cancelled',
  'result_node', 'result_outcome', 'created_at', 'ended_at', 'replays', 'replayed_at', 'idem_key',
  'cancelling', 'unhandled', 'cancel_cursor',
}
local NOUTCOME = #OUTCOME_FIELDS

-- outcome_of returns the OUTCOME_FIELDS of values v (an HMGET of them, in
-- their order, maybe longer) as field, value pairs (as HGETALL gives
-- them, the missing ones left out).
local function outcome_of(v)
  local f = {}
  for i = 1, NOUTCOME do
    local x = v[i]
    if x then
      f[#f + 1] = OUTCOME_FIELDS[i]
      f[#f + 1] = x
    end
  end
  return f
end

-- clean_outcome returns the outcome of a run, f its outcome_of(v) and v
-- the values they come from (OUTCOME_FIELDS order), that succeeded
-- cleanly (no member failed or was cancelled, and its result exec, if it
-- has one, succeeded): {f, the result exec's name, its result} ({f, '',
-- false} without a result exec); or nil for any other run (read in full
-- by the caller).
local function clean_outcome(p, f, v)
  if v[3] ~= 'succeeded' or num(v[8]) ~= 0 or num(v[10]) ~= 0 then return nil end
  local node = v[11]
  if not node or node == '' then return {f, '', false} end
  if v[12] ~= 'success' then return nil end
  local rv = redis.call('HMGET', p.xp .. node, 'flow_node', 'result')
  return {f, rv[1] or '', rv[2]}
end

-- finish_run sets the final state of a run whose members all ended and
-- publishes the run-end notice. When the call collects ended runs
-- (p.collect_ended, ff_finish) and the run succeeded cleanly, its outcome
-- goes to p.ended
-- there instead of a notice: the finish's reply carries it to the ffrun
-- process, which answers its own waiting result requests from it, then
-- publishes the notice for the others. The record is read once, before
-- it is written: the outcome is what it holds then with the fields
-- written here.
local function finish_run(p, runkey, run, now)
  local r = redis.call('HMGET', runkey, unpack(FINISH_RUN_FIELDS))
  local node, result_outcome = r[11], r[12] or ''
  local state
  if r[20] then
    -- Ended while cancelled by steps (the last member's end, or one's
    -- deadline between steps): nothing of the stepping stays.
    zrem(p, p.base .. ':runs:cancelling', run)
    redis.call('HDEL', runkey, 'cancel_cursor')
    redis.call('DEL', runkey .. ':replay_dropped')
  end
  if node and node ~= '' and result_outcome == '' then
    -- A run staged before members carried is_result: its result exec's
    -- end was not recorded; its record tells.
    result_outcome = vec(redis.call('HGET', p.xp .. node, 'state')).outcome or ''
  end
  if r[18] == '1' then
    state = 'cancelled'
  elseif node and node ~= '' then
    state = result_outcome == 'success' and 'succeeded' or 'failed'
  elseif num(r[10]) > 0 then
    state = 'cancelled' -- a member was cancelled on its own
  else
    state = num(r[19]) > 0 and 'failed' or 'succeeded'
  end
  local now_s = ts(now)
  redis.call('HSET', runkey, 'state', state, 'result_outcome', result_outcome, 'ended_at', now_s, 'updated_at', now_s)
  redis.call('ZADD', p.base .. ':runs:ended', now_s, run)
  if p.collect_ended and state == 'succeeded' then
    r[3], r[12], r[14] = state, result_outcome, now_s -- as written above
    local o = clean_outcome(p, outcome_of(r), r)
    if o then
      -- The caller publishes the notice, after its own waiters have the
      -- outcome (Store.FinishHandoff).
      p.ended = {run, o[1], o[2], o[3]}
      return
    end
  end
  local prefix, n = string.match(p.anchor, '^(.*)ff:{fp:(%d+)}:lanes$')
  redis.call('PUBLISH', prefix .. 'ff:runs', n .. '.' .. run .. ':' .. state)
end

-- count_end counts the end of a member in its run's record and returns
-- how many members have not ended, or nil when the run is gone (purged)
-- or every end was counted already. A run staged before the record had
-- `left` is converted first.
local function count_end(runkey)
  local left = redis.call('HINCRBY', runkey, 'left', -1)
  if left >= 0 then return left end
  local r = redis.call('HMGET', runkey, 'total', 'done')
  if not r[1] then
    redis.call('DEL', runkey) -- only what the HINCRBY just created
    return nil
  end
  if not r[2] then
    -- Every member's end was counted already (a member cannot end
    -- twice): undo, and leave the run as it is.
    redis.call('HINCRBY', runkey, 'left', 1)
    return nil
  end
  left = num(r[1]) - num(r[2]) - 1
  redis.call('HSET', runkey, 'left', itoa(left))
  redis.call('HDEL', runkey, 'done', 'succeeded')
  return left
end

-- resolve_member counts the end of a member in its run and decides its
-- outgoing edges; the last member's end ends the run. out, handled and
-- is_result are the member's fields of those names when the caller read
-- them (out nil: read them here). The result exec's outcome is recorded
-- when it ends (finish_run reads its record only for a run staged before
-- is_result). Edges are
-- not decided while the run is being cancelled (p.cancelling,
-- ff_cancel_run): its members all end cancelled.
local function resolve_member(p, u, run, outcome, now, out, handled, is_result)
  local runkey = p.base .. ':f:' .. run
  local left = count_end(runkey)
  if not left then return end
  if out == nil then
    local m = redis.call('HMGET', p.xp .. u, 'out', 'handled', 'is_result')
    out, handled, is_result = m[1] or '', m[2] or '', m[3] or ''
  end
  if is_result == '1' then
    redis.call('HSET', runkey, 'result_outcome', outcome)
  end
  local counter = RUN_COUNTER[outcome]
  if counter then
    redis.call('HINCRBY', runkey, counter, 1)
    if counter == 'failed' and handled ~= '1' then
      redis.call('HINCRBY', runkey, 'unhandled', 1)
    end
    if counter ~= 'skipped' then
      -- One of the run's failures (a success, the hot path, adds nothing).
      redis.call('SADD', runkey .. ':failed', u)
    end
  end
  -- While a run is cancelled by steps (cancel_run), a member not cancelled
  -- yet may still fail (its deadline passed): its edges fire nothing. No
  -- member of such a run succeeds (cancel_live), so a success does not
  -- look.
  if out ~= '' and not p.cancelling and outcome ~= 'success'
      and redis.call('HGET', runkey, 'cancelling') == '1' then
    out = ''
  end
  if not p.cancelling and out ~= '' then
    for _, d, on in each_edge, out, 1 do
      decide(p, d, holds(on, outcome), now)
    end
  end
  if left == 0 then finish_run(p, runkey, run, now) end
end

-- on_flow_terminal resolves the member and, at the outermost level, the
-- queue of members that ended meanwhile: skips found while resolving are
-- queued, not recursed into, so a long chain of skips cannot exhaust the
-- Lua stack.
on_flow_terminal = function(p, c, outcome, now)
  if p.resolving then
    local q = p.flowq
    if not q then
      q = {}
      p.flowq = q
    end
    q[#q + 1] = {c.u, c.flow_id, outcome, c.out, c.handled, c.is_result}
    return
  end
  -- The outermost member is resolved at once (most ends queue nothing).
  p.resolving = true
  resolve_member(p, c.u, c.flow_id, outcome, now, c.out, c.handled, c.is_result)
  local q = p.flowq
  if q then
    local i = 1
    while i <= #q do
      local e = q[i]
      resolve_member(p, e[1], e[2], e[3], now, e[4], e[5], e[6])
      i = i + 1
    end
    p.flowq = nil
  end
  p.resolving = false
end

-- The state fields of a staged member: a root, and one that waits (sv,
-- looked up once).
local STAGED_ROOT, STAGED_WAITING

-- stage_member writes the record of the member whose entries start at
-- argv[i] (the entry count; see ff_stage_flow) and returns its uuid, lane,
-- priority, dependency count and deadline (absolute ms, 0 = none). With
-- hidden set, a root is written pending like the others (a chunk of a run
-- that is not committed yet). Fields that would be empty are not written
-- (the caller sends the optional ones only when set; a missing field reads
-- as empty, and each field written costs the call about 2.7k
-- instructions); updated_at is written by the first change.
local function stage_member(p, argv, i, run, ns, input, now, hidden)
  local n = num(argv[i])
  local name, u, lane = argv[i + 1], argv[i + 2], argv[i + 3]
  local priority = num(argv[i + 4])
  local deps = num(argv[i + 6])
  local deadline = num(argv[i + 8])
  if deadline > 0 then deadline = now + deadline end
  local key = p.xp .. u
  if not STAGED_ROOT then
    STAGED_ROOT = sv('runnable', 'unowned', 'eligible_now', 'waiting_for_worker', 'none', 'pending_first_attempt')
    STAGED_WAITING = sv('runnable', 'unowned', 'blocked_by_dependencies', 'waiting_for_dependencies', 'none',
      'pending_first_attempt')
  end
  local st = STAGED_ROOT
  if deps > 0 or hidden then st = STAGED_WAITING end
  if argv[i + 7] == '1' then
    redis.call('HSET', key, 'ns', ns, 'lane', lane, 'priority', argv[i + 4], 'created_at', ts(now), 'flow_id', run,
      'flow_node', name, 'state', st, 'payload', input, unpack(argv, i + 9, i + n))
  else
    redis.call('HSET', key, 'ns', ns, 'lane', lane, 'priority', argv[i + 4], 'created_at', ts(now), 'flow_id', run,
      'flow_node', name, 'state', st, unpack(argv, i + 9, i + n))
  end
  if deadline > 0 and not hidden then
    -- A hidden member's deadline runs from the commit (ff_commit_flow).
    redis.call('HSET', key, 'deadline_at', ts(deadline))
  end
  return name, u, lane, priority, deps, deadline, n
end

-- The offsets of a member's numbers from its entry count (priority,
-- deps_total, deadline), and how many entries come before its field/value
-- pairs: what members_ok checks.
local MEMBER_NUMBERS = {4, 6, 8}
local MEMBER_FIXED = 8

-- members_ok reports whether argv[i..] holds members as ff_stage_flow
-- takes them (items_ok). Staging checks every member before it writes the
-- first: a member found malformed later would leave the ones written
-- before it in no index and no run, where retention never finds them.
local function members_ok(argv, i)
  return items_ok(argv, i, MEMBER_FIXED, MEMBER_NUMBERS)
end

-- write_run writes the record of run (a uuid) and its node map (name, uuid
-- pairs), and indexes the run in its namespace.
local function write_run(p, run, ns, flow, result, input, ikey, total, nodes, now)
  local runkey = p.base .. ':f:' .. run
  redis.call('HSET', runkey, 'ns', ns, 'flow', flow, 'state', 'running', 'total', itoa(total), 'left', itoa(total),
    'failed', '0', 'skipped', '0', 'cancelled', '0', 'unhandled', '0',
    'result_node', result, 'input', input, 'idem_key', ikey, 'created_at', ts(now), 'updated_at', ts(now))
  call_all('HSET', runkey .. ':nodes', nodes)
  -- The namespace's run index (listings), until retention deletes the run.
  zadd(p, p.base .. ':runs:ns:' .. ns, ts(now), run)
end

-- duplicate_run looks up idempotency key ikey of namespace ns for a run of
-- flow: it returns the uuid of the run staged first with the key (nil when
-- there is none, or it is gone) and the key's name; when that run is of
-- another flow, also the other flow's name (the staging is refused: a key
-- names one piece of work, and the caller would take the other run's
-- result for its own).
local function duplicate_run(p, ns, ikey, flow)
  if ikey == '' then return nil end
  local ik = p.base .. ':fidem:' .. ns .. ':' .. ikey
  local first = redis.call('GET', ik)
  if not first then return nil, ik end
  local other = redis.call('HGET', p.base .. ':f:' .. first, 'flow')
  if not other then return nil, ik end
  if other ~= flow then return first, ik, other end
  return first, ik
end

-- enqueue_member indexes a member of a run made visible at now: pending
-- while it waits for upstreams, else eligible (wake publishes once per
-- lane and call). registered holds the lanes the call already added to the
-- partition's lane set.
local function enqueue_member(p, ns, lane, u, priority, deps, now, registered)
  if deps > 0 then
    zadd(p, lane_key(p, ns, lane, 'pending'), ts(now), u)
  else
    zadd(p, lane_key(p, ns, lane, 'eligible'), ts(eligible_score(priority, now)), u)
    wake(p, ns, lane)
  end
  if not registered[lane] then
    registered[lane] = true
    redis.call('SADD', p.anchor, ns .. ':' .. lane)
  end
end

-- ff_stage_flow: stage a run of a compiled flow: the run record, every
-- member and its edges, in one call. Roots are eligible at once, the
-- others pending until their joins are satisfied. (Large runs use
-- ff_stage_chunk and ff_commit_flow instead.)
-- KEYS[1]  partition anchor
-- ARGV[1]  run uuid
-- ARGV[2]  namespace
-- ARGV[3]  flow name
-- ARGV[4]  uuid of the result exec ('' = none)
-- ARGV[5]  idempotency key ('' = none)
-- ARGV[6]  idempotency key lifetime, ms
-- ARGV[7]  the run's input (bytes; the payload of roots that take it)
-- ARGV[8]  '1' when the caller found the idempotency key held and so
--          created no run-scoped budget or quota for this run; '' else
-- ARGV[9]  the members in flow order, "<name>=<uuid>,...": kept as
--          B:f:<uuid>:order ('' = none kept)
-- ARGV[10..] members, each: the number of entries that follow, then name,
--          uuid, lane, priority, join_need, deps_total, takes the run's
--          input ('1': its payload is the input; else '0'), deadline ms
--          ('0' = none), and field/value pairs stored verbatim: kind, and
--          only when set deps_total (not on roots), join_need (only when
--          not deps_total), caps, handoff, retry_*, attempt_timeout_ms,
--          input_from (the feeding upstream's uuid), ups, out, handled
--          ('1'), budgets, quotas.
-- Reply: {1, 'created', now} | {1, 'duplicate', run uuid}
--        | {1, 'released'} (ARGV[8] is '1' and the key is no longer held:
--        the run would be new and lacks its resources; nothing written)
--        | {0, 'idempotency_conflict', flow, run uuid} (the key was used by
--        a run of another flow; nothing written)
--        | {0, 'invalid', 'members', message} (a member's entries are not
--        as above, or the key's lifetime is not a positive integer;
--        nothing written)
local function ff_stage_flow(keys, argv)
  if (argv[5] ~= '' and not px_ok(argv[6])) or not members_ok(argv, 10) then
    return refuse('invalid', 'members', 'want members as ff_stage_flow takes them')
  end
  local p = part(keys[1])
  local run, ns = argv[1], argv[2]
  local first, ik, other = duplicate_run(p, ns, argv[5], argv[3])
  if other then return refuse('idempotency_conflict', other, first) end
  if first then return ok('duplicate', first) end
  if argv[8] == '1' then return ok('released') end
  local now = now_ms()
  local nodes = {}
  local registered = {}
  local i = 10
  while i <= #argv do
    local name, u, lane, priority, deps, deadline, n = stage_member(p, argv, i, run, ns, argv[7], now, false)
    if deadline > 0 then zadd(p, p.deadlines, ts(deadline), u) end
    enqueue_member(p, ns, lane, u, priority, deps, now, registered)
    nodes[#nodes + 1] = name
    nodes[#nodes + 1] = u
    i = i + n + 1
  end
  write_run(p, run, ns, argv[3], argv[4], argv[7], argv[5], #nodes / 2, nodes, now)
  if argv[9] ~= '' then redis.call('SET', p.base .. ':f:' .. run .. ':order', argv[9]) end
  if ik then redis.call('SET', ik, run, 'PX', argv[6]) end
  flush(p)
  return ok('created', now)
end

-- ff_stage_chunk: write some members of a large run that is not committed
-- yet. They are in no index (invisible to claims, scanners and lists); an
-- uncommitted staging is deleted by retention after its lifetime.
-- KEYS[1]  partition anchor
-- ARGV[1]  run uuid
-- ARGV[2]  namespace
-- ARGV[3]  the run's input
-- ARGV[4]  staging lifetime, ms
-- ARGV[5..] members, as in ff_stage_flow
-- Reply: {1, members written} | {0, 'run_exists'} (the run is already
--        committed: nothing written) | {0, 'invalid', 'staging_ttl' |
--        'members', message} (nothing written)
local function ff_stage_chunk(keys, argv)
  -- Used after the members are written: checked first, or they would be
  -- left in no staging that retention drops.
  local lifetime = tonumber(argv[4])
  if not lifetime then return refuse('invalid', 'staging_ttl', 'not a number: ' .. tostring(argv[4])) end
  if not members_ok(argv, 5) then return refuse('invalid', 'members', 'want members as ff_stage_flow takes them') end
  local p = part(keys[1])
  local run, ns = argv[1], argv[2]
  -- Rewriting members of a live run would reset their state under the
  -- scheduler's feet.
  if redis.call('EXISTS', p.base .. ':f:' .. run) == 1 then return refuse('run_exists') end
  local now = now_ms()
  local staged = {}
  local i = 5
  while i <= #argv do
    local _, u, _, _, _, _, n = stage_member(p, argv, i, run, ns, argv[3], now, true)
    staged[#staged + 1] = u
    i = i + n + 1
  end
  call_all('SADD', p.base .. ':f:' .. run .. ':staged', staged)
  redis.call('ZADD', p.base .. ':staging', ts(now + lifetime), run)
  return ok(#staged)
end

-- ff_commit_flow: make a run staged with ff_stage_chunk visible: the run
-- record and node map, roots eligible, the others in the pending index,
-- deadlines armed.
-- KEYS[1]  partition anchor
-- ARGV[1]  run uuid
-- ARGV[2]  namespace
-- ARGV[3]  flow name
-- ARGV[4]  uuid of the result exec ('' = none)
-- ARGV[5]  idempotency key ('' = none)
-- ARGV[6]  idempotency key lifetime, ms
-- ARGV[7]  the run's input
-- ARGV[8]  '1' when the key was found held, as in ff_stage_flow
-- ARGV[9]  the number of members, m
-- ARGV[10..] m groups of name, uuid, lane, priority, deps_total, deadline
--          ms ('0' = none; it runs from the commit, when the run comes to
--          exist, not from the chunk's writing)
-- ARGV[10+6m] (optional) the members in flow order, "<name>=<uuid>,...":
--          kept as B:f:<uuid>:order ('' or absent: none kept)
-- The staged members it deletes (below) go as drop_staged deletes them:
-- up to STAGED_DROP_STEP in this call, the rest by retention.
-- Reply: {1, 'created', now} | {1, 'duplicate', run uuid} (the staged
--        members are deleted) | {1, 'released'} (as in ff_stage_flow; the
--        staging is kept for the next commit) | {0, 'idempotency_conflict', flow, run
--        uuid} (a run of another flow has the key; the staged members are
--        deleted) | {0, 'not_found'} (nothing staged) | {0,
--        'staging_expired'} (retention dropped some of the staged members:
--        the rest are deleted too) | {0, 'invalid', 'members', message}
--        (the groups do not match the count, a priority or deps_total is
--        not a number, or the key's lifetime is not a positive integer;
--        nothing written)
local function ff_commit_flow(keys, argv)
  -- Checked first: a staged root is made eligible before the next member
  -- is read, and a malformed count would drop the staging.
  local m = numv(argv[9])
  if not m or (#argv ~= 9 + 6 * m and #argv ~= 10 + 6 * m) or (argv[5] ~= '' and not px_ok(argv[6])) then
    return refuse('invalid', 'members', 'want a member count and as many groups of six')
  end
  for b = 10, 9 + 6 * m, 6 do
    if not numv(argv[b + 3]) or not numv(argv[b + 4]) or not numv(argv[b + 5]) then
      return refuse('invalid', 'members', 'a priority, deps_total or deadline is not a number')
    end
  end
  local p = part(keys[1])
  local run, ns = argv[1], argv[2]
  if redis.call('ZSCORE', p.base .. ':staging', run) == false then return refuse('not_found') end
  local first, ik, other = duplicate_run(p, ns, argv[5], argv[3])
  if first then
    drop_staged(p, run, STAGED_DROP_STEP, now_ms())
    if other then return refuse('idempotency_conflict', other, first) end
    return ok('duplicate', first)
  end
  if argv[8] == '1' then return ok('released') end
  -- Retention drops a staging whose lifetime passed, members and all; a
  -- later chunk of a stalled stager registers the run again with only its
  -- own members. Such a run must not become visible with members that
  -- have no record.
  if redis.call('SCARD', p.base .. ':f:' .. run .. ':staged') ~= m then
    drop_staged(p, run, STAGED_DROP_STEP, now_ms())
    return refuse('staging_expired')
  end
  local now = now_ms()
  local now_s = ts(now)
  local root_state = sv('runnable', 'unowned', 'eligible_now', 'waiting_for_worker', 'none', 'pending_first_attempt')
  local nodes = {}
  local registered = {}
  for j = 0, m - 1 do
    local b = 10 + j * 6
    local name, u, lane, priority, deps = argv[b], argv[b + 1], argv[b + 2], num(argv[b + 3]), num(argv[b + 4])
    nodes[#nodes + 1] = name
    nodes[#nodes + 1] = u
    local key = p.xp .. u
    -- A deadline runs from now, when the run comes to exist (not from
    -- the writing of the member's chunk). A root is created now too (its
    -- age orders the eligible); the others keep their chunk's time.
    local deadline = num(argv[b + 5])
    if deadline > 0 then
      local at = ts(now + deadline)
      zadd(p, p.deadlines, at, u)
      if deps == 0 then
        redis.call('HSET', key, 'created_at', now_s, 'updated_at', now_s, 'state', root_state, 'deadline_at', at)
      else
        redis.call('HSET', key, 'deadline_at', at)
      end
    elseif deps == 0 then
      redis.call('HSET', key, 'created_at', now_s, 'updated_at', now_s, 'state', root_state)
    end
    enqueue_member(p, ns, lane, u, priority, deps, now, registered)
  end
  write_run(p, run, ns, argv[3], argv[4], argv[7], argv[5], m, nodes, now)
  local order = argv[10 + 6 * m]
  if order and order ~= '' then
    redis.call('SET', p.base .. ':f:' .. run .. ':order', order)
  end
  redis.call('DEL', p.base .. ':f:' .. run .. ':staged')
  redis.call('ZREM', p.base .. ':staging', run)
  if ik then redis.call('SET', ik, run, 'PX', argv[6]) end
  flush(p)
  return ok('created', now)
end

-- A run cancel cancels at most CANCEL_STEP members by their node map in
-- one call (Go: store.CancelStepMembers): a run of 10,000 members
-- cancelled in one call kept Valkey from everyone else for a quarter of a
-- second. A run of up to CANCEL_STEP members is cancelled whole in its
-- first call.
local CANCEL_STEP = 500

-- stepped records in list (B:runs:cancelling or B:runs:replaying) that
-- a step of run's cancel or replay was taken now: ff_resume_runs leaves
-- the run to its caller for an age. A step ff_resume_runs takes
-- (p.resume_due: the time a run's last step must be at or before for it
-- to be due) scores the run there instead: a run the scanner took over
-- stays due, and its next call goes on with it, until the run's steps end
-- or a caller (its own, back, or a new one) takes a step again.
local function stepped(p, list, run, now)
  zadd(p, list, ts(p.resume_due or now), run)
end

-- cancel_live marks run (record runkey, not cancelling yet) cancelling and
-- cancels every member that runs or could start: any not terminal and not
-- blocked by its dependencies (running, eligible, delayed, blocked by a
-- budget, quota or route). Such a member's state is all that is read of
-- the others. Afterwards no member of the run can start or succeed: the
-- rest wait for their dependencies, and only a failure (a deadline's
-- expiry) or a cancel could end one of them, whose edges the run's
-- cancelling flag keeps from firing anything (resolve_member). The rest
-- are cancelled by steps (cancel_step). Returns the members cancelled.
local function cancel_live(p, run, runkey, reason, now)
  redis.call('HSET', runkey, 'cancelling', '1', 'cancel_reason', reason, 'cancel_cursor', '0')
  local n = 0
  for _, u in ipairs(redis.call('HVALS', runkey .. ':nodes')) do
    local st = redis.call('HGET', p.xp .. u, 'state')
    if st and not is(st, 'terminal') and vec(st).eligibility ~= 'blocked_by_dependencies' then
      local c = read_core(p, u)
      end_execution(p, c, 'cancelled', reason, now, 'cancel_reason', reason)
      n = n + 1
    end
  end
  return n
end

-- cancel_step cancels the members of a cancelling run found by the next
-- step of a scan of its node map, from the cursor the last step recorded
-- (cancel_cursor), up to about limit of them, and records where the next
-- step starts. Returns the members cancelled, the entries looked at, and
-- whether the scan is over (it came back to cursor 0: every member was
-- seen).
local function cancel_step(p, runkey, cursor, reason, limit, now)
  local r = redis.call('HSCAN', runkey .. ':nodes', cursor, 'COUNT', itoa(limit))
  local n = 0
  local entries = r[2]
  for i = 2, #entries, 2 do
    local c = read_core(p, entries[i])
    if c and not is(c.state, 'terminal') then
      end_execution(p, c, 'cancelled', reason, now, 'cancel_reason', reason)
      n = n + 1
    end
  end
  -- A step whose cancels ended the run (finish_run dropped the cursor)
  -- leaves no cursor behind, though its scan was not over.
  if r[1] ~= '0' and redis.call('HGET', runkey, 'state') == 'running' then
    redis.call('HSET', runkey, 'cancel_cursor', r[1])
  end
  return n, #entries / 2, r[1] == '0'
end

-- cancel_ended ends a cancelling run every member of which was seen
-- ended, if it still runs: its count of members left is off (a member
-- record gone), and nothing else would end it.
local function cancel_ended(p, run, runkey, now)
  if redis.call('HGET', runkey, 'state') == 'running' then
    finish_run(p, runkey, run, now)
  end
end

-- decide_drop deletes the state of a replay being decided (decide_step);
-- with back, the run, which stays as it ended, goes back to B:runs:ended
-- at its end time. Deciding changes no member: dropped, it leaves the run
-- as it was.
local function decide_drop(p, run, runkey, back)
  redis.call('DEL', runkey .. ':rd', runkey .. ':rq', runkey .. ':rdlist', runkey .. ':rdskip')
  redis.call('HDEL', runkey, 'deciding')
  zrem(p, p.base .. ':runs:replaying', run)
  local ended = redis.call('HGET', runkey, 'ended_at')
  if back and ended and ended ~= '' then
    redis.call('ZADD', p.base .. ':runs:ended', ended, run)
  end
end

-- uncount_dropped settles, up to limit of them, the decisions of a replay
-- by steps that a cancel stopped (B:f:<uuid>:replay_dropped, see
-- cancel_run): the replay's first call counted every member it would reset
-- as left to run and every member it would turn skipped as skipped; those
-- it never reached kept how they had ended, and are counted so (left one
-- less, and their outcome's counter). Returns the entries settled and
-- whether some are left.
local function uncount_dropped(p, run, runkey, limit, now)
  local list = runkey .. ':replay_dropped'
  local entries = redis.call('LPOP', list, itoa(limit))
  if not entries then return 0, false end
  local left, counts = 0, {}
  for _, e in ipairs(entries) do
    local kind, u = string.match(e, '^(%a)\t([^\t]+)\t')
    local v = u and redis.call('HMGET', p.xp .. u, 'state', 'handled')
    if v and v[1] and is(v[1], 'terminal') then
      local outcome = vec(v[1]).outcome or ''
      local counter = RUN_COUNTER[outcome]
      if kind == 's' then
        counts.skipped = (counts.skipped or 0) - 1
      else
        left = left - 1
      end
      if counter then
        counts[counter] = (counts[counter] or 0) + 1
        if counter == 'failed' and v[2] ~= '1' then counts.unhandled = (counts.unhandled or 0) + 1 end
      end
    end
  end
  for field, d in pairs(counts) do
    if d ~= 0 then redis.call('HINCRBY', runkey, field, d) end
  end
  if left ~= 0 and redis.call('HINCRBY', runkey, 'left', left) == 0 then
    finish_run(p, runkey, run, now)
  end
  return #entries, redis.call('EXISTS', list) == 1
end

-- cancel_run cancels run. A call that starts the cancel (the run was not
-- cancelling) marks it cancelling and cancels its live members
-- (cancel_live), a run of up to limit members whole; each call then takes
-- one step: the decisions of a replay by steps it stopped (uncount_dropped),
-- then the scan (cancel_step). Edges are not decided while the run is
-- cancelling, so every member ends cancelled (or, by its deadline between
-- steps, expired). A run being cancelled by steps is listed in
-- B:runs:cancelling (score: its last step's time) until it ends, for
-- ff_resume_runs to finish what a caller left. With only_go_on (a caller
-- going on with a cancel it started, whose run's replays count was gen;
-- ff_resume_runs, whose gen is nil), a run that is not being cancelled any
-- more (it ended, or was replayed since) is left alone. Returns the run's
-- state (false when it is gone), the members cancelled, the entries looked
-- at, whether another call is needed, the run's replays count (the
-- generation a caller going on passes), and whether the run was running
-- when this call came.
local function cancel_run(p, run, reason, limit, now, only_go_on, gen)
  local runkey = p.base .. ':f:' .. run
  local r = redis.call('HMGET', runkey, 'state', 'cancelling', 'cancel_cursor', 'cancel_reason', 'total', 'replays',
    'deciding')
  local replays = r[6] or '0'
  local going = r[1] == 'running' and r[2] == '1' and (gen == nil or gen == replays)
  if r[1] ~= 'running' or (only_go_on and not going) then
    if r[7] == '1' and not only_go_on then
      -- A replay being decided stops here, before it changed anything:
      -- the run stays as it ended.
      decide_drop(p, run, runkey, true)
    end
    if r[2] ~= '1' or r[1] ~= 'running' then
      -- Gone, ended, or running with no cancel under way: an entry left
      -- in the list is stale (an ended run's end removed its own). A
      -- cancel under way of another generation keeps its entry and cursor.
      zrem(p, p.base .. ':runs:cancelling', run)
    end
    return r[1], 0, 0, false, replays, false
  end
  p.cancelling = true
  local n = 0
  local cursor = r[3]
  if r[2] ~= '1' then
    reason = clip(reason)
    -- A replay by steps under way ends here: what it did not reset yet
    -- stays as it ended, and is counted so by the steps.
    local dropped = false
    if redis.call('EXISTS', runkey .. ':replay') == 1 then
      redis.call('RENAME', runkey .. ':replay', runkey .. ':replay_dropped')
      zrem(p, p.base .. ':runs:replaying', run)
      dropped = true
    end
    if num(r[5]) <= limit and not dropped then
      -- A small run: every member in this call.
      redis.call('HSET', runkey, 'cancelling', '1', 'cancel_reason', reason)
      for _, u in ipairs(redis.call('HVALS', runkey .. ':nodes')) do
        local c = read_core(p, u)
        if c and not is(c.state, 'terminal') then
          end_execution(p, c, 'cancelled', reason, now, 'cancel_reason', reason)
          n = n + 1
        end
      end
      cancel_ended(p, run, runkey, now)
      p.cancelling = false
      return redis.call('HGET', runkey, 'state'), n, num(r[5]), false, replays, true
    end
    n = cancel_live(p, run, runkey, reason, now)
    cursor = '0'
  else
    reason = r[4] or 'run cancelled'
    -- A run marked by a version before steps has no cursor: its members
    -- were all cancelled by that call.
    cursor = cursor or '0'
  end
  local looked = 0
  local settled, unsettled = uncount_dropped(p, run, runkey, limit, now)
  looked = looked + settled
  local state = redis.call('HGET', runkey, 'state')
  if state == 'running' and looked < limit then
    local k, seen, over = cancel_step(p, runkey, cursor, reason, limit - looked, now)
    n, looked = n + k, looked + seen
    if over and not unsettled then cancel_ended(p, run, runkey, now) end
    state = redis.call('HGET', runkey, 'state')
  end
  p.cancelling = false
  if state == 'running' then
    stepped(p, p.base .. ':runs:cancelling', run, now)
  end
  -- An ended run's end (finish_run) removed its entry and cursor.
  return state, n, looked, state == 'running', replays, true
end

-- ff_cancel_run: cancel a run's members, every non-terminal one; the run
-- ends cancelled. Members end cancelled (not skipped): edges are not
-- resolved while the run is cancelling. A run of more than CANCEL_STEP
-- members is cancelled by steps, a call each (see cancel_run): the first
-- cancels those that run or could start, so none starts once it returns;
-- the caller calls again while the reply says more, passing the
-- generation the first reply gave, so that its later calls only go on
-- with its own cancel (not one of a run ended and replayed since). A new
-- cancel of a run whose cancel is under way takes its next step. The
-- reason of the first call is the reason of every member. The lease of
-- each running member cancelled is published (lease_ended, 'cancelled').
-- KEYS[1]  partition anchor
-- ARGV[1]  run uuid
-- ARGV[2]  reason
-- ARGV[3]  generation: '' (a new cancel) or what the first reply gave (a
--          caller going on)
-- Reply: {1, run state, members cancelled by this call, more (1: call
--        again; 0: done), generation, running (1: the run was running
--        when the call came: this cancel stops it)} | {0, 'not_found'}
local function ff_cancel_run(keys, argv)
  local p = part(keys[1])
  local run = argv[1]
  if redis.call('EXISTS', p.base .. ':f:' .. run) == 0 then return refuse('not_found') end
  local reason = argv[2]
  if reason == nil or reason == '' then reason = 'run cancelled' end
  local gen = argv[3]
  if gen == '' then gen = nil end
  local state, n, _, more, replays, running = cancel_run(p, run, reason, CANCEL_STEP, now_ms(), gen ~= nil, gen)
  flush(p)
  return ok(state, n, more and 1 or 0, replays, running and 1 or 0)
end

-- A run replay applies its decisions to at most REPLAY_STEP members in
-- one call (Go: store.ReplayStepMembers): a replay of a run of 10,000
-- members in one call kept Valkey from everyone else for 150 - 420 ms. A
-- replay of up to REPLAY_STEP decisions is applied in the call that
-- decides it.
local REPLAY_STEP = 500

-- The fields of a member a replay reads: to decide (state, edges, join)
-- and to apply its decision (lane, attempts, deferred quota references,
-- reset count).
local REPLAY_FIELDS = {'state', 'ns', 'lane', 'attempt_count', 'out', 'ups', 'deps_total', 'join_need', 'quotas_deferred',
  'resets'}

-- read_replayed returns member u as a replay reads it, or nil when its
-- record is gone.
local function read_replayed(p, u)
  local key = p.xp .. u
  local v = redis.call('HMGET', key, unpack(REPLAY_FIELDS))
  if not v[1] then return nil end
  local deps_total = num(v[7])
  return {key = key, u = u, state = v[1], ns = v[2] or '', lane = v[3] or '', attempt_count = v[4] or '',
    out = v[5] or '', ups = v[6] or '', deps_total = deps_total, join_need = v[8] and num(v[8]) or deps_total,
    quotas_deferred = v[9], resets = v[10]}
end

-- replay_member applies a replay's decision about member c of the run of
-- record runkey: kind 's' (it stays skipped: one that ended otherwise, say
-- cancelled with its run, becomes skipped), 'e' (it runs again, eligible
-- at once: its join is satisfied) or 'p' (it runs again once its join is,
-- pending), with done and okc its join counters from the kept members.
-- Either way it is none of the run's failures any more. A success that
-- becomes skipped (it consumed an outcome the replay changes) loses its
-- result: a skipped upstream gives its downstream members no output, only
-- an upstream error. A member that becomes skipped ends now, as a skip
-- does: its end time (and terminal index score) is the replay's, and the
-- last attempt's error of its old end goes (its attempts are kept).
local function replay_member(p, runkey, c, kind, done, okc, now)
  redis.call('SREM', runkey .. ':failed', c.u)
  if kind == 's' then
    local attempted = c.attempt_count ~= '' and c.attempt_count ~= '0'
    if split(c).outcome == 'success' then redis.call('HDEL', c.key, 'result', 'handoff_prefix') end
    local now_s = ts(now)
    redis.call('HSET', c.key, 'state', sv('terminal', 'unowned', 'not_applicable', 'none', 'skipped',
      attempted and 'attempt_terminal' or 'none'), 'failure_reason', 'its join can no longer be satisfied',
      'last_error', '', 'ended_at', now_s, 'updated_at', now_s)
    zadd(p, lane_key(p, c.ns, c.lane, 'terminal'), now_s, c.u)
    return
  end
  zrem(p, lane_key(p, c.ns, c.lane, 'terminal'), c.u)
  redis.call('HDEL', c.key, 'result', 'handoff_prefix')
  -- Its allowances start again: retries (charged_attempts) and lost
  -- leases (reclaims). Its reset count moves: a claim's admission of it
  -- that began before (ff_resolve_quotas, ff_block, the admitted
  -- ff_claim: same attempt, same deferred references) is not applied.
  local common = {'deps_done', itoa(done), 'deps_ok', itoa(okc), 'charged_attempts', '0', 'reclaims', '0', 'deadline_at', '',
    'ended_at', '', 'failure_reason', '', 'last_error', '', 'eligible_at', '', 'updated_at', ts(now),
    'resets', itoa(num(c.resets) + 1)}
  if c.quotas_deferred then
    -- Its key values are read again from the input it gets this time.
    common[#common + 1] = 'quotas'
    common[#common + 1] = c.quotas_deferred
  end
  if kind == 'e' then
    redis.call('HSET', c.key, 'state',
      sv('runnable', 'unowned', 'eligible_now', 'waiting_for_worker', 'none', 'pending_replay_attempt'),
      unpack(common))
    more(c)
    zadd(p, lane_key(p, c.ns, c.lane, 'eligible'), ts(eligible_score(num(c.priority), num(c.created_at))), c.u)
    wake(p, c.ns, c.lane)
  else
    redis.call('HSET', c.key, 'state',
      sv('runnable', 'unowned', 'blocked_by_dependencies', 'waiting_for_dependencies', 'none',
        'pending_replay_attempt'),
      unpack(common))
    zadd(p, lane_key(p, c.ns, c.lane, 'pending'), ts(now), c.u)
  end
end

-- replay_step applies the next decisions, up to limit, of the replay by
-- steps of run (listed in B:f:<uuid>:replay by its first call), and
-- reports how many it applied and whether some are left. A run that was
-- cancelled meanwhile (or is gone) keeps what is left as it ended: the
-- list is dropped. The last step of a replay that runs nothing again
-- (only skips) ends the run again.
local function replay_step(p, run, runkey, limit, now)
  local list = runkey .. ':replay'
  local r = redis.call('HMGET', runkey, 'state', 'cancelling')
  if r[1] ~= 'running' or r[2] == '1' then
    redis.call('DEL', list)
    zrem(p, p.base .. ':runs:replaying', run)
    return 0, false
  end
  local n = 0
  for _, e in ipairs(redis.call('LPOP', list, itoa(limit)) or NONE) do
    local kind, u, done, okc = string.match(e, '^(%a)\t([^\t]+)\t(%d+)\t(%d+)$')
    local c = u and read_replayed(p, u)
    if c then
      replay_member(p, runkey, c, kind, num(done), num(okc), now)
      n = n + 1
    end
  end
  if redis.call('EXISTS', list) == 1 then
    stepped(p, p.base .. ':runs:replaying', run, now)
    return n, true
  end
  zrem(p, p.base .. ':runs:replaying', run)
  if redis.call('HGET', runkey, 'left') == '0' then finish_run(p, runkey, run, now) end
  return n, false
end

-- A replay of a run of more than REPLAY_STEP members is decided by steps
-- too (deciding it in one call read and weighed every member: 260 - 430
-- ms for 10,000 on a slow machine). The run keeps its ended state while
-- it is decided (its members are ended: nothing changes them), with
-- 'deciding' = '1' in its record, out of B:runs:ended (retention leaves
-- it alone) and in B:runs:replaying (ff_resume_runs goes on with it).
-- A decision needs only the member's own outcome and join and what was
-- decided about its upstreams, so the members are decided in a
-- topological order (Kahn's), each once, as replay_decide decides them
-- all at once:
--   scan  HSCAN of the node map, about limit members a step: every record
--         must be there (else 'purged', nothing changed), and the roots
--         are queued;
--   walk  members whose upstreams are all decided are popped from the
--         queue and decided: kept (it succeeded, and no reset upstream
--         fired it over an edge that held on its outcome, or the kept
--         ones satisfy its join alone), stays skipped (its join can no
--         longer hold: applied at once, as it changes nothing that runs)
--         or runs again (listed, the list built downstream first); then
--         each of its out-edges updates the downstream's counters (a
--         member with many out-edges is walked over several steps), and
--         a downstream whose upstreams are all decided is queued. A step
--         spends about limit members and edges.
--   end   the counts make the run running as replay_decide's end does,
--         and the list becomes the replay's steps (B:f:<uuid>:replay).
-- Scratch, deleted at the end (or by retention): B:f:<uuid>:rd, a HASH of
-- per-member counters "<upstreams left> <okc> <done> <consumed>" ('x'
-- once decided) and of the step's state ('~scan' cursor, '~walk', '~at'
-- a member whose out-edges are being walked, '~kept', '~stays',
-- '~reset', '~changes', '~result'); B:f:<uuid>:rq, the LIST of members
-- ready to decide; B:f:<uuid>:rdlist, the decisions of the members that
-- run again.

-- decide_counters returns a member's counters in the scratch hash rd:
-- upstreams not decided yet, okc, done, consumed; nil once decided. A
-- member seen first gets its upstream count from its record.
local function decide_counters(p, rd, u)
  local v = redis.call('HGET', rd, u)
  if v == 'x' then return nil end
  if not v then
    return num(redis.call('HGET', p.xp .. u, 'deps_total')), 0, 0, 0
  end
  local a, b, c, d = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
  return tonumber(a), tonumber(b), tonumber(c), tonumber(d)
end

-- decide_scan takes a step of the scan: the next members of the node map,
-- about limit; a root is queued once (HSCAN may return a member twice).
-- Returns 'purged' when a member's record is gone, else whether the scan
-- is over and the members looked at.
local function decide_scan(p, runkey, rd, rq, limit)
  local r = redis.call('HSCAN', runkey .. ':nodes', redis.call('HGET', rd, '~scan') or '0', 'COUNT', itoa(limit))
  local entries = r[2]
  for i = 2, #entries, 2 do
    local u = entries[i]
    local v = redis.call('HMGET', p.xp .. u, 'state', 'deps_total')
    if not v[1] then return 'purged' end
    if num(v[2]) == 0 and redis.call('HSETNX', rd, u, '0 0 0 0') == 1 then
      redis.call('RPUSH', rq, u)
    end
  end
  if r[1] == '0' then
    redis.call('HDEL', rd, '~scan')
    redis.call('HSET', rd, '~walk', '1')
  else
    redis.call('HSET', rd, '~scan', r[1])
  end
  return r[1] == '0', #entries / 2
end

-- decide_walk takes a step of the walk, spending about limit members and
-- edges. Returns 'purged' when a member's record is gone, else whether
-- the walk is over and what it spent.
local function decide_walk(p, runkey, rd, rq, result_u, limit)
  local list = runkey .. ':rdlist'
  local spent = 0
  local at = redis.call('HGET', rd, '~at')
  while spent < limit do
    local u, status, was, pos, out
    if at then
      local spos
      u, status, was, spos = string.match(at, '^(%S+) (%a) (%a+) (%d+)$')
      pos = tonumber(spos)
      out = redis.call('HGET', p.xp .. u, 'out') or ''
      at = nil
    else
      u = redis.call('LPOP', rq)
      if not u then break end
      local queued, okc, done, consumed = decide_counters(p, rd, u)
      local c = queued and read_replayed(p, u)
      if queued and not c then return 'purged' end
      if not queued then
        out, pos = '', 1 -- queued twice (a record whose edges disagree): decided already
      else
        was = split(c).outcome
        if was == 'success' and (consumed == 0 or okc >= c.join_need) then
          status = 'k'
          redis.call('HINCRBY', rd, '~kept', 1)
          if u == result_u then redis.call('HSET', rd, '~result', '1') end
        elseif c.deps_total - (done - okc) < c.join_need then
          status = 's'
          redis.call('HINCRBY', rd, '~stays', 1)
          if was ~= 'skipped' then
            redis.call('RPUSH', runkey .. ':rdskip', 's\t' .. u .. '\t0\t0')
            redis.call('HSET', rd, '~changes', '1')
          end
        else
          status = 'a'
          redis.call('HINCRBY', rd, '~reset', 1)
          redis.call('LPUSH', list, (okc >= c.join_need and 'e' or 'p') .. '\t' .. u .. '\t' .. itoa(done) .. '\t' .. itoa(okc))
        end
        redis.call('HSET', rd, u, 'x')
        spent = spent + 1
        out, pos = c.out, 1
      end
    end
    while true do
      local s, e, d, cond = string.find(out, '([^,:]+):(%a+)', pos)
      if not s then break end
      if spent >= limit then
        redis.call('HSET', rd, '~at', u .. ' ' .. status .. ' ' .. was .. ' ' .. itoa(pos))
        return false, spent
      end
      pos = e + 1
      spent = spent + 1
      local left, okc, done, consumed = decide_counters(p, rd, d)
      if left then
        left = left - 1
        if status == 'k' then
          done = done + 1
          if holds(cond, 'success') then okc = okc + 1 end
        else
          if status == 's' then done = done + 1 end
          if holds(cond, was) then consumed = 1 end
        end
        redis.call('HSET', rd, d, itoa(math.max(left, 0)) .. ' ' .. itoa(okc) .. ' ' .. itoa(done) .. ' ' .. itoa(consumed))
        if left <= 0 then redis.call('RPUSH', rq, d) end
      end
    end
    redis.call('HDEL', rd, '~at')
  end
  return redis.call('LLEN', rq) == 0 and redis.call('HEXISTS', rd, '~at') == 0, spent
end

-- decide_step takes the next step of deciding the replay of run (a step
-- of the scan or of the walk, about limit members and edges); after the
-- walk's last it makes the run running with the counts (or ends it again
-- when only skips changed, or leaves it as it ended when nothing would
-- change). Returns what it spent, whether another step is needed, and a
-- refusal ({code, detail...}) when the replay cannot be.
local function decide_step(p, run, runkey, limit, now)
  local r = redis.call('HMGET', runkey, 'state', 'total', 'result_node', 'deciding')
  if r[4] ~= '1' then return 0, false end
  local rd, rq = runkey .. ':rd', runkey .. ':rq'
  local replaying = p.base .. ':runs:replaying'
  if redis.call('HEXISTS', rd, '~walk') == 0 then
    local done, k = decide_scan(p, runkey, rd, rq, limit)
    if done == 'purged' then
      decide_drop(p, run, runkey, true)
      return 0, false, {'wrong_state', 'purged'}
    end
    stepped(p, replaying, run, now)
    return k, true
  end
  local done, k = decide_walk(p, runkey, rd, rq, r[3] or '', limit)
  if done == 'purged' then
    decide_drop(p, run, runkey, true)
    return 0, false, {'wrong_state', 'purged'}
  end
  if not done then
    stepped(p, replaying, run, now)
    return k, true
  end
  -- The skips go to the head of the list, applied first (the run's count
  -- of members left counts them done already).
  local list, skips = runkey .. ':rdlist', runkey .. ':rdskip'
  while k < limit and redis.call('LMOVE', skips, list, 'RIGHT', 'LEFT') do k = k + 1 end
  if redis.call('EXISTS', skips) == 1 then
    stepped(p, replaying, run, now)
    return k, true
  end
  local v = redis.call('HMGET', rd, '~kept', '~stays', '~reset', '~changes', '~result')
  local kept, stays, reset = num(v[1]), num(v[2]), num(v[3])
  if kept + stays + reset ~= num(r[2]) then
    -- Members the walk never reached: records whose edges disagree (or
    -- gone); nothing was changed, and nothing is.
    decide_drop(p, run, runkey, true)
    return k, false, {'wrong_state', 'purged'}
  end
  if reset == 0 and v[4] ~= '1' then
    decide_drop(p, run, runkey, true)
    return k, false, {'wrong_state', r[1], 'nothing_to_replay'}
  end
  redis.call('DEL', rd, rq)
  redis.call('HDEL', runkey, 'deciding', 'done', 'succeeded')
  redis.call('HSET', runkey, 'state', 'running', 'left', itoa(num(r[2]) - kept - stays),
    'failed', '0', 'skipped', itoa(stays), 'cancelled', '0', 'unhandled', '0', 'cancelling', '', 'cancel_reason', '',
    'result_outcome', v[5] == '1' and 'success' or '', 'ended_at', '', 'updated_at', ts(now), 'replayed_at', ts(now))
  redis.call('HINCRBY', runkey, 'replays', 1)
  -- Its decisions (skips first) are applied by steps (replay_step): the
  -- last ends the run when nothing runs again.
  redis.call('RENAME', list, runkey .. ':replay')
  zrem(p, p.base .. ':runs:ended', run)
  stepped(p, replaying, run, now)
  return k, true
end

-- replay_go_on takes the next step of run's replay: of its deciding, or of
-- applying its decisions (replay_step).
local function replay_go_on(p, run, runkey, limit, now)
  if redis.call('HGET', runkey, 'deciding') == '1' then
    local k, more = decide_step(p, run, runkey, limit, now)
    return k, more
  end
  return replay_step(p, run, runkey, limit, now)
end

-- ff_resume_runs: take the next steps of the run cancels and replays by
-- steps their callers left (an ffrun that stopped between two steps): the
-- runs of B:runs:cancelling and of B:runs:replaying whose last step is
-- older than an age, up to a limit of members in all. A run it takes a
-- step of stays due (stepped): the next call goes on with it, unless a
-- caller took a step meanwhile. The reply says more while such a run has
-- steps left, so that the scanner's catch-up ticks finish it.
-- KEYS[1]  partition anchor
-- ARGV[1]  limit (members looked at)
-- ARGV[2]  age, ms
-- Reply: {1, members cancelled or replayed (and members and edges of
--        replays being decided), more (1 when the limit was reached or a
--        run it took a step of has steps left)}
local function ff_resume_runs(keys, argv)
  local limit, age = numv(argv[1]), numv(argv[2])
  if not limit or limit < 1 or not age then
    return refuse('invalid', 'resume', 'want a limit and an age in ms')
  end
  local p = part(keys[1])
  local now = now_ms()
  p.resume_due = now - age
  local n, spent, left = 0, 0, false
  for _, run in ipairs(due(p.base .. ':runs:cancelling', p.resume_due, limit)) do
    if spent >= limit then break end
    local _, k, looked, more = cancel_run(p, run, '', math.max(limit - spent, 1), now, true)
    n = n + k
    spent = spent + math.max(looked, 1)
    left = left or more
  end
  if spent < limit then
    for _, run in ipairs(due(p.base .. ':runs:replaying', p.resume_due, limit - spent)) do
      if spent >= limit then break end
      local k, more = replay_go_on(p, run, p.base .. ':f:' .. run, math.max(limit - spent, 1), now)
      n = n + k
      spent = spent + math.max(k, 1)
      left = left or more
    end
  end
  flush(p)
  return ok(n, (spent >= limit or left) and 1 or 0)
end

-- ff_replay_run: run a failed or cancelled run again from its failed
-- members. Members that succeeded keep their results, unless they ran
-- because of an outcome the replay changes: a member fired over an edge
-- that held on the outcome of a member the replay resets (an `on failure`
-- compensation of a failed member, an `on done`, and in turn what those
-- fired) runs again too, unless the kept members satisfy its join on
-- their own. Every other member goes back to pending, or
-- straight to eligible when the edges from kept members already satisfy
-- its join (its next attempt is a replay, its retry budget starts again,
-- its deadline is dropped). A member whose join the kept members already
-- make impossible stays skipped, and so, in turn, do the members that
-- only it could have fired.
-- A replay of a run of more than REPLAY_STEP members (or of the step
-- ARGV[3] says) goes by steps: its first calls decide it (decide_step: the
-- run keeps its ended state meanwhile), the last of them makes the run
-- running with its counters and lists the decisions, skips first, then
-- downstream members first, in B:f:<uuid>:replay; each later call (the
-- caller repeats while the reply says more) applies the next REPLAY_STEP
-- of them (replay_step). A member made eligible by a step may run and end before
-- the last step: its downstream members were reset by an earlier step or
-- earlier in the same one, so its edges are decided as in any run. A call
-- on a running run whose replay has steps left takes the next step.
-- The caller calls again while the reply says more, passing the
-- generation the first reply gave (the run's replays count), so that its
-- later calls only go on with its own replay: one that another caller
-- finished, a cancel stopped or another replay followed is done, never
-- started again.
-- KEYS[1]  partition anchor
-- ARGV[1]  run uuid
-- ARGV[2]  generation: '' (a new replay) or what the first reply gave
-- ARGV[3]  step (optional, 1..REPLAY_STEP; default REPLAY_STEP): tests
--          take small runs by steps with it
-- Reply: {1, members reset, more, generation} (members reset 0: no member
--        runs again, but some became skipped and the run ended again, or
--        will with the last step; a later step also answers 0;
--        more 1: call again) | {0, 'not_found'} |
--        {0, 'wrong_state', run state} | {0, 'wrong_state', run state,
--        'nothing_to_replay'} (a failed or cancelled run none of whose
--        members would run again or change: the members that succeeded
--        decide every other; nothing is changed) | {0, 'wrong_state',
--        'purged'} when retention deleted some member's record (its
--        outcome is unknown: nothing is changed) | to a caller going on
--        (ARGV[2] set): {0, 'wrong_state', run state, 'replay_dropped'}
--        (its replay was never decided: a cancel of the run dropped it
--        while it was decided, or another caller's step of it was
--        refused; nothing was changed) | {0, 'wrong_state', 'cancelled',
--        'replay_cancelled'} (its replay was decided, and a cancel of the
--        run came after it: the run is cancelled, or being cancelled)
local function ff_replay_run(keys, argv)
  local step = REPLAY_STEP
  if argv[3] and argv[3] ~= '' then
    step = tonumber(argv[3])
    if not step or step ~= math.floor(step) or step < 1 or step > REPLAY_STEP then
      return refuse('invalid', 'step', 'not an integer in 1..' .. REPLAY_STEP .. ': ' .. argv[3])
    end
  end
  local p = part(keys[1])
  local run = argv[1]
  local runkey = p.base .. ':f:' .. run
  local r = redis.call('HMGET', runkey, 'state', 'total', 'result_node', 'replays', 'deciding', 'cancelling')
  if not r[1] then return refuse('not_found') end
  local now = now_ms()
  local replays = r[4] or '0'
  local gen = argv[2]
  if gen == '' then gen = nil end
  if r[5] == '1' then
    -- Being decided: a caller going on with it (its generation is the
    -- replays count the run will have), or a new replay of the run: the
    -- next step. A caller of an older replay is done.
    local deciding = itoa(num(replays) + 1)
    if gen and gen ~= deciding then return ok(0, 0, replays) end
    local _, more, refusal = decide_step(p, run, runkey, step, now)
    flush(p)
    if refusal then return refuse(unpack(refusal)) end
    return ok(0, more and 1 or 0, deciding)
  end
  local under_way = r[1] == 'running' and redis.call('EXISTS', runkey .. ':replay') == 1
  if gen or under_way then
    -- A caller going on with the replay it started (generation gen), or a
    -- new replay of a run whose replay by steps is under way: the next
    -- step. A replay that ended (another caller took its last step) or
    -- was followed by another replay has none: done. One that was never
    -- decided (a cancel dropped its deciding, or another caller's step
    -- of it was refused) changed nothing, and one a cancel of the run
    -- followed (a cancel stops a replay being applied) left the run
    -- cancelled: the caller is told, not answered as replayed.
    local more = false
    if under_way and (gen == nil or gen == replays) then
      local _, m = replay_step(p, run, runkey, step, now)
      more = m
    elseif gen and num(gen) > num(replays) then
      return refuse('wrong_state', r[1], 'replay_dropped')
    elseif gen == replays and r[6] == '1' then
      return refuse('wrong_state', 'cancelled', 'replay_cancelled')
    end
    flush(p)
    return ok(0, more and 1 or 0, replays)
  end
  if r[1] ~= 'failed' and r[1] ~= 'cancelled' then return refuse('wrong_state', r[1]) end
  if num(r[2]) > step then
    -- Decided by steps (see decide_step): the first is taken here.
    redis.call('DEL', runkey .. ':rd', runkey .. ':rq', runkey .. ':rdlist')
    redis.call('HSET', runkey, 'deciding', '1')
    zrem(p, p.base .. ':runs:ended', run)
    local _, more, refusal = decide_step(p, run, runkey, step, now)
    flush(p)
    if refusal then return refuse(unpack(refusal)) end
    return ok(0, more and 1 or 0, itoa(num(replays) + 1))
  end
  local members = {}
  local on = {} -- on[up .. '>' .. down] = condition
  local kept = {}
  for _, u in ipairs(redis.call('HVALS', runkey .. ':nodes')) do
    local c = read_replayed(p, u)
    if not c then return refuse('wrong_state', 'purged') end
    members[#members + 1] = c
    if split(c).outcome == 'success' then kept[u] = true end
    for d, cond in string.gmatch(c.out, '([^,:]+):(%a+)') do
      on[u .. '>' .. d] = cond
    end
  end
  local by_uuid = {}
  for _, c in ipairs(members) do by_uuid[c.u] = c end
  -- A succeeded member fired over an edge that held on the outcome of a
  -- member the replay resets consumed that outcome: it is reset too, and
  -- so, in turn, are the members it fired. One that succeeded otherwise
  -- (an on success edge that did not hold) keeps its result, and so does
  -- one whose join the kept members satisfy on their own (a join any or
  -- join N another upstream fired: reset, it would run again at once,
  -- before the replayed member ends). kok[d] counts the edges into d from
  -- kept members (all succeeded) that hold; it is counted when first
  -- needed and drops as members are reset, and a member whose count
  -- drops is checked again when its reset upstream's edges are walked.
  local again, consumed, kok = {}, {}, {}
  for _, c in ipairs(members) do
    if not kept[c.u] then again[#again + 1] = c end
  end
  local function kept_ok(dc)
    local n = kok[dc.u]
    if n then return n end
    n = 0
    for up in string.gmatch(dc.ups, '[^,=]+=([^,]+)') do
      if kept[up] and holds(on[up .. '>' .. dc.u] or 'success', 'success') then n = n + 1 end
    end
    kok[dc.u] = n
    return n
  end
  local a = 1
  while a <= #again do
    local c = again[a]
    a = a + 1
    local was = split(c).outcome
    for d, cond in string.gmatch(c.out, '([^,:]+):(%a+)') do
      local dc = by_uuid[d]
      if dc and kept[d] then
        if holds(cond, was) then consumed[d] = true end
        if consumed[d] and kept_ok(dc) < dc.join_need then
          kept[d] = nil
          again[#again + 1] = dc
          for e, econd in string.gmatch(dc.out, '([^,:]+):(%a+)') do
            if kok[e] and holds(econd, 'success') then kok[e] = kok[e] - 1 end
          end
        end
      end
    end
  end
  -- The members whose join the kept members make impossible stay (or
  -- become) skipped; a member that stays skipped decides its edges as a
  -- skip does (none holds), so staying skipped propagates downstream. A
  -- worklist: every member is checked once, and again only when one of
  -- its upstreams starts to stay skipped (a long chain of skips costs
  -- one pass, not one pass per link). The others are reset.
  local stays = {}
  local function decided(c)
    local done, okc = 0, 0
    for up in string.gmatch(c.ups, '[^,=]+=([^,]+)') do
      if kept[up] then
        done = done + 1
        if holds(on[up .. '>' .. c.u] or 'success', 'success') then okc = okc + 1 end
      elseif stays[up] then
        done = done + 1
      end
    end
    return done, okc
  end
  local work = {}
  for _, c in ipairs(members) do
    if not kept[c.u] then work[#work + 1] = c end
  end
  local w = 1
  while w <= #work do
    local c = work[w]
    w = w + 1
    if not stays[c.u] then
      local done, okc = decided(c)
      if c.deps_total - (done - okc) < c.join_need then
        stays[c.u] = true
        for d in string.gmatch(c.out, '([^,:]+):%a+') do
          local dc = by_uuid[d]
          if dc and not kept[d] and not stays[d] then work[#work + 1] = dc end
        end
      end
    end
  end
  local reset, skipped = 0, 0
  for _, c in ipairs(members) do
    if stays[c.u] then
      skipped = skipped + 1
    elseif not kept[c.u] then
      reset = reset + 1
    end
  end
  if reset == 0 then
    -- Nothing runs again: the members that succeeded decide every other.
    -- A replay that changes nothing is refused; one that only turns
    -- members whose join can no longer hold (cancelled, failed, expired,
    -- or successes that consumed a changed outcome) into skipped ones
    -- ends the run again at once, with the outcome those give it.
    local changes = false
    for _, c in ipairs(members) do
      if stays[c.u] and split(c).outcome ~= 'skipped' then changes = true end
    end
    if not changes then return refuse('wrong_state', r[1], 'nothing_to_replay') end
  end
  -- The decisions: the skips first, then the members that run again,
  -- downstream first (reverse topological order: Kahn's, over the edges
  -- between them), so that a replay by steps resets a member before any
  -- of its upstreams can run.
  local decisions = {}
  local again_set, indeg, order = {}, {}, {}
  for _, c in ipairs(members) do
    if stays[c.u] then
      if split(c).outcome ~= 'skipped' then decisions[#decisions + 1] = {'s', c, 0, 0} end
    elseif not kept[c.u] then
      again_set[c.u] = true
    end
  end
  for _, c in ipairs(members) do
    if again_set[c.u] then
      for d in string.gmatch(c.out, '([^,:]+):%a+') do
        if again_set[d] then indeg[d] = (indeg[d] or 0) + 1 end
      end
    end
  end
  for _, c in ipairs(members) do
    if again_set[c.u] and not indeg[c.u] then order[#order + 1] = c end
  end
  local o = 1
  while o <= #order do
    local c = order[o]
    o = o + 1
    for d in string.gmatch(c.out, '([^,:]+):%a+') do
      if again_set[d] then
        indeg[d] = indeg[d] - 1
        if indeg[d] == 0 then order[#order + 1] = by_uuid[d] end
      end
    end
  end
  for i = #order, 1, -1 do
    local c = order[i]
    local done, okc = decided(c)
    decisions[#decisions + 1] = {okc >= c.join_need and 'e' or 'p', c, done, okc}
  end
  for _, d in ipairs(decisions) do replay_member(p, runkey, d[2], d[1], d[3], d[4], now) end
  local succeeded = 0
  for _ in pairs(kept) do succeeded = succeeded + 1 end
  redis.call('HSET', runkey, 'state', 'running', 'left', itoa(num(r[2]) - succeeded - skipped),
    'failed', '0', 'skipped', itoa(skipped), 'cancelled', '0', 'unhandled', '0', 'cancelling', '', 'cancel_reason', '',
    'result_outcome', kept[r[3]] and 'success' or '', 'ended_at', '', 'updated_at', ts(now), 'replayed_at', ts(now))
  replays = itoa(redis.call('HINCRBY', runkey, 'replays', 1))
  redis.call('HDEL', runkey, 'done', 'succeeded') -- of a run staged before `left`
  if reset > 0 then
    zrem(p, p.base .. ':runs:ended', run)
  else
    finish_run(p, runkey, run, now) -- every member has ended
  end
  flush(p)
  return ok(reset, 0, replays)
end

-- ff_run_outcome: what a run's result needs, in one call: the run record
-- and, for a run that succeeded with no failed or cancelled member, its
-- result exec's name and result (the members need not be read). Read-only.
-- KEYS[1]  partition anchor
-- ARGV[1]  run uuid
-- Reply: {1, fields, result_name, result} with fields the run record's
--        outcome fields (outcome_of: not its input) as HGETALL gives
--        them; result_name '' and result nil unless read | {0, 'not_found'}
local function ff_run_outcome(keys, argv)
  local p = part(keys[1])
  local v = redis.call('HMGET', p.base .. ':f:' .. argv[1], unpack(OUTCOME_FIELDS))
  local f = outcome_of(v)
  if #f == 0 then return refuse('not_found') end
  local o = clean_outcome(p, f, v)
  if o then return ok(o[1], o[2], o[3]) end
  return ok(f, '', false)
end

-- ff_resolve_quotas: settle the deferred quota keys of flow members. A
-- member whose input is an upstream's result (unknown at staging) and
-- that is admitted by a keyed quota is staged with the reference
-- "<quota id>?<key path>"; ff_claim returns it among the admission needs
-- with the member's input and its reset count, and the caller reads the
-- key value from that input.
-- KEYS[1]  partition anchor
-- ARGV     quints: uuid, the reset count and the quotas field as the claim
--          read them, the quotas field with every key value read ('' when
--          one could not be), the failure reason when it could not
-- A member whose quotas field or reset count changed since is left alone:
-- a replay that reset it in between puts back the same deferred quotas,
-- but its input is about to change, so what was read from the old one
-- must not key it. One whose key could not be read fails (when eligible):
-- its input will not change, so waiting would never admit it.
-- Reply: {1, item...}, item = 1 when written (or failed), 0 when left
--        {0, 'invalid', 'items', message} (not quints; nothing written)
local function ff_resolve_quotas(keys, argv)
  if #argv % 5 ~= 0 then
    return refuse('invalid', 'items', 'want quints of uuid, resets, quotas read, quotas resolved, reason')
  end
  local p = part(keys[1])
  local items = {}
  local now
  for i = 1, #argv, 5 do
    local c = read_core(p, argv[i])
    local done = 0
    local r = c and redis.call('HMGET', c.key, 'quotas', 'resets')
    if r and r[1] == argv[i + 2] and num(r[2]) == num(argv[i + 1]) then
      if argv[i + 3] ~= '' then
        -- The deferred references are kept: a replay that runs the
        -- feeding upstream again restores them (its new output may name
        -- another key value).
        redis.call('HSET', c.key, 'quotas', argv[i + 3])
        redis.call('HSETNX', c.key, 'quotas_deferred', argv[i + 2])
        done = 1
      elseif is(c.state, 'runnable') and split(c).eligibility == 'eligible_now' then
        now = now or now_ms()
        leave_indexes(p, c)
        to_terminal(p, c, 'failed', argv[i + 4], now)
        done = 1
      end
    end
    items[#items + 1] = done
  end
  flush(p)
  return ok(unpack(items))
end

register('ff_stage_flow', ff_stage_flow)
register('ff_run_outcome', ff_run_outcome, {'no-writes'})
register('ff_stage_chunk', ff_stage_chunk)
register('ff_commit_flow', ff_commit_flow)
register('ff_cancel_run', ff_cancel_run)
register('ff_resume_runs', ff_resume_runs)
register('ff_replay_run', ff_replay_run)
register('ff_resolve_quotas', ff_resolve_quotas)
