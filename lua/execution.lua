-- execution.lua: creating executions and operator actions on them.

-- write_new writes the record of a new execution and returns its public
-- state, eligible-at time (0 when eligible now) and deadline (0 = none).
-- argv[from..to] are field, value pairs stored verbatim (kind, payload,
-- tags, caps, budgets, quotas, retry_*, attempt_timeout_ms, idem_key); the
-- caller adds the index entries.
local function write_new(key, priority, now, delay_until, delay, deadline_in, argv, from, to)
  local due = delay_until
  if delay > 0 and now + delay > due then due = now + delay end
  local deadline = 0
  if deadline_in > 0 then deadline = now + deadline_in end
  local now_s = ts(now)
  -- Without a deadline the record has no deadline_at field (read as '').
  if due > now then
    if deadline > 0 then
      redis.call('HSET', key, 'deadline_at', ts(deadline), 'priority', itoa(priority), 'created_at', now_s,
        'updated_at', now_s, 'eligible_at', ts(due),
        'state', sv('runnable', 'unowned', 'not_eligible_until_time', 'waiting_for_delay', 'none', 'pending_first_attempt'),
        unpack(argv, from, to))
    else
      redis.call('HSET', key, 'priority', itoa(priority), 'created_at', now_s, 'updated_at', now_s,
        'eligible_at', ts(due),
        'state', sv('runnable', 'unowned', 'not_eligible_until_time', 'waiting_for_delay', 'none', 'pending_first_attempt'),
        unpack(argv, from, to))
    end
    return 'delayed', due, deadline
  end
  if deadline > 0 then
    redis.call('HSET', key, 'deadline_at', ts(deadline), 'priority', itoa(priority), 'created_at', now_s,
      'updated_at', now_s,
      'state', sv('runnable', 'unowned', 'eligible_now', 'waiting_for_worker', 'none', 'pending_first_attempt'),
      unpack(argv, from, to))
  else
    redis.call('HSET', key, 'priority', itoa(priority), 'created_at', now_s, 'updated_at', now_s,
      'state', sv('runnable', 'unowned', 'eligible_now', 'waiting_for_worker', 'none', 'pending_first_attempt'),
      unpack(argv, from, to))
  end
  return 'waiting', 0, deadline
end

-- ff_create: create one standalone execution (the hot path of single
-- creates: every key comes from the caller).
-- KEYS[1]  <prefix>ff:{fp:N}:lanes                  partition anchor
-- KEYS[2]  <prefix>ff:{fp:N}:x:<uuid>               the new record
-- KEYS[3]  <prefix>ff:{fp:N}:q:<ns>:<lane>:eligible
-- KEYS[4]  <prefix>ff:{fp:N}:q:<ns>:<lane>:delayed
-- KEYS[5]  <prefix>ff:{fp:N}:deadlines
-- KEYS[6]  <prefix>ff:{fp:N}:idem:<ns>:<key>        (the anchor when no key)
-- ARGV[1]  idempotency key lifetime, ms
-- ARGV[2]  the number of entries that follow (as in ff_create_many)
-- ARGV[3..] uuid, namespace, lane, priority, delay-until, delay, deadline,
--          idempotency key, field/value pairs: one item of ff_create_many
-- ARGV[last-1] wake-up channel
-- ARGV[last]   wake-up message
-- Reply: {1, item} with item as in ff_create_many, or {0, 'invalid',
-- 'items', message} as there (nothing written).
-- The uuid is random (122 bits from crypto/rand): it is not checked for
-- collisions.
local function ff_create(keys, argv)
  local u = argv[3]
  local ikey = argv[10]
  -- The record is written before the lane is registered and the key set:
  -- what those need is checked first, the item as ff_create_many checks
  -- its items (a number that is none would raise, not refuse).
  local n = numv(argv[2])
  local priority, delay_until, delay, deadline_in = numv(argv[6]), numv(argv[7]), numv(argv[8]), numv(argv[9])
  if not n or n < 8 or (n - 8) % 2 ~= 0 or #argv ~= n + 4 or not (priority and delay_until and delay and deadline_in)
    or (ikey ~= '' and not px_ok(argv[1])) then
    return refuse('invalid', 'items', 'want an idempotency key lifetime, one item as ff_create_many takes it, a channel and a message')
  end
  if ikey ~= '' then
    local first = redis.call('GET', keys[6])
    if first and redis.call('EXISTS', string.sub(keys[2], 1, -#u - 1) .. first) == 1 then
      return ok(ok('duplicate', first))
    end
  end
  local now = now_ms()
  local last = 2 + n
  local public, due, deadline = write_new(keys[2], priority, now, delay_until, delay, deadline_in, argv, 11, last)
  if deadline > 0 then
    redis.call('ZADD', keys[5], ts(deadline), u)
  end
  if due > 0 then
    redis.call('ZADD', keys[4], ts(due), u)
    -- The lanes with delayed entries (due_lane), on the anchor's partition.
    redis.call('ZADD', string.sub(keys[1], 1, -7) .. ':due:delayed', 'LT', ts(due), argv[4] .. ':' .. argv[5])
  else
    redis.call('ZADD', keys[3], ts(eligible_score(priority, now)), u)
    redis.call('PUBLISH', argv[last + 1], argv[last + 2])
  end
  redis.call('SADD', keys[1], argv[4] .. ':' .. argv[5])
  if ikey ~= '' then
    redis.call('SET', keys[6], u, 'PX', argv[1])
  end
  return ok(ok('created', now, public, due, deadline))
end

-- ff_create_many: create standalone executions of one partition.
-- KEYS[1]  <prefix>ff:{fp:N}:lanes  partition anchor
-- ARGV[1]  idempotency key lifetime, ms
-- ARGV[2..] items, each: the number of the item's entries that follow, then
--          uuid, namespace, lane, priority (0..1000), delay-until (absolute
--          ms, '0' = none), delay (ms from now, '0' = none), deadline (ms
--          from now, '0' = none), idempotency key ('' = none), and field,
--          value pairs stored verbatim on the record (see write_new).
-- Reply: {1, item...}; item = {1, 'created', now, public_state, eligible_at, deadline_at}
--        | {1, 'duplicate', uuid of the first execution with that key};
--        or {0, 'invalid', 'items', message} when an item's entries are
--        not as above or the idempotency key lifetime is not a positive
--        integer (nothing written: every item is checked first)
-- The uuids are random (122 bits from crypto/rand): they are not checked
-- for collisions. One wake-up is published per lane that got eligible work.
local CREATE_NUMBERS = {4, 5, 6, 7} -- priority, delay-until, delay, deadline

local function ff_create_many(keys, argv)
  if not px_ok(argv[1]) or not items_ok(argv, 2, 8, CREATE_NUMBERS) then
    return refuse('invalid', 'items', 'want an idempotency key lifetime, then items as ff_create_many takes them')
  end
  local p = part(keys[1])
  local now = now_ms()
  local items = {}
  local woken, registered = {}, {}
  local scores = {} -- eligible score strings by priority: one clock per call
  local i = 2
  while i <= #argv do
    local n = num(argv[i])
    local u, ns, lane = argv[i + 1], argv[i + 2], argv[i + 3]
    local priority = num(argv[i + 4])
    local ikey = argv[i + 8]
    local ik, first
    if ikey ~= '' then
      ik = p.base .. ':idem:' .. ns .. ':' .. ikey
      first = redis.call('GET', ik)
      if first and redis.call('EXISTS', p.xp .. first) == 0 then first = nil end
    end
    if first then
      items[#items + 1] = ok('duplicate', first)
    else
      local public, due, deadline = write_new(p.xp .. u, priority, now, num(argv[i + 5]),
        num(argv[i + 6]), num(argv[i + 7]), argv, i + 9, i + n)
      if deadline > 0 then
        zadd(p, p.deadlines, ts(deadline), u)
      end
      if due > 0 then
        zadd(p, lane_key(p, ns, lane, 'delayed'), ts(due), u)
        due_lane(p, ns, lane, ts(due))
      else
        local ek = lane_key(p, ns, lane, 'eligible')
        local score = scores[priority]
        if not score then
          score = ts(eligible_score(priority, now))
          scores[priority] = score
        end
        zadd(p, ek, score, u)
        if not woken[ek] then
          woken[ek] = true
          wake(p, ns, lane)
        end
      end
      local member = ns .. ':' .. lane
      if not registered[member] then
        registered[member] = true
        redis.call('SADD', p.anchor, member)
      end
      if ik then
        redis.call('SET', ik, u, 'PX', argv[1])
      end
      items[#items + 1] = ok('created', now, public, due, deadline)
    end
    i = i + n + 1
  end
  flush(p)
  return ok(unpack(items))
end

-- ff_cancel: cancel an execution in any non-terminal state. A running
-- attempt's lease ends with it, published (lease_ended, why 'cancelled').
-- KEYS[1]  partition anchor
-- ARGV[1]  uuid
-- ARGV[2]  reason (optional: '' or none = 'cancelled')
-- Reply: {1, public_state}
--        {0, 'not_found'}
--        {0, 'wrong_state', public_state}  (terminal, not cancelled)
local function ff_cancel(keys, argv)
  local p = part(keys[1])
  local c = read_core(p, argv[1])
  if not c then return refuse('not_found') end
  if is(c.state, 'terminal') then
    if split(c).outcome == 'cancelled' then return ok(c.v.public) end
    return refuse('wrong_state', public_of(c.state))
  end
  local now = now_ms()
  -- No reason reads as '' (a nil one would raise in end_execution after it
  -- wrote: the quota release of a running attempt).
  local reason = argv[2] or ''
  if reason == '' then reason = 'cancelled' end
  local public = end_execution(p, c, 'cancelled', reason, now, 'cancel_reason', clip(reason))
  flush(p)
  return ok(public)
end

-- ff_change_priority: change the priority of a runnable execution.
-- KEYS[1]  partition anchor
-- ARGV[1]  uuid
-- ARGV[2]  new priority (0..1000)
-- Reply: {1, public_state}
--        {0, 'not_found'}
--        {0, 'wrong_state', public_state}  (active or terminal)
--        {0, 'invalid', 'priority', message}  (nothing written)
local function ff_change_priority(keys, argv)
  local priority, bad = int_arg(argv[2], 'priority', 0, 1000)
  if not priority then return bad end
  local p = part(keys[1])
  local c = read_core(p, argv[1])
  if not c then return refuse('not_found') end
  if not is(c.state, 'runnable') then return refuse('wrong_state', public_of(c.state)) end
  more(c)
  redis.call('HSET', c.key, 'priority', itoa(priority), 'updated_at', ts(now_ms()))
  if split(c).eligibility == 'eligible_now' then
    redis.call('ZADD', lane_key(p, c.ns, c.lane, 'eligible'), ts(eligible_score(priority, num(c.created_at))), c.u)
  end
  return ok(c.v.public)
end

-- ff_revoke_lease: take the lease from a running execution; the attempt
-- ends as revoked (not charged) and the execution is eligible again. The
-- lease's end is published (lease_ended, why 'revoked'), also for a fenced
-- revoke (a worker giving back its own attempt, or a grant it never got).
-- KEYS[1]  partition anchor
-- ARGV[1]  uuid
-- ARGV[2]  reason
-- ARGV[3]  optional: lease id, ARGV[4] lease epoch: revoke only that lease
--          (a grant the worker never received)
-- Reply: {1, public_state}
--        {0, 'not_found'}
--        {0, 'wrong_state', public_state}  (not active; without a lease)
--        {0, 'stale_lease', reason, public_state[, retry due]}  (fenced:
--        not active (not_active: the worker lost it, as a late report of
--        the lease is told), another lease; or its lease expired, attempt
--        timed out or deadline passed, and the call applied that limit
--        instead)
local function ff_revoke_lease(keys, argv)
  local p = part(keys[1])
  local c = read_core(p, argv[1])
  if not c then return refuse('not_found') end
  local now = now_ms()
  if argv[3] then
    local why = lease_check(c, argv[3], argv[4], now)
    if why then
      -- A limit passed ends the attempt, not the give-back (as for a late
      -- report).
      local r = stale_refusal(p, c, why, now, ts(now), 1)
      flush(p)
      return r
    end
  elseif not is(c.state, 'active') then
    return refuse('wrong_state', public_of(c.state))
  end
  local reason = argv[2]
  if reason == '' then reason = 'lease revoked' end
  lease_ended(p, c, 'revoked')
  local public = after_attempt(p, c, 'revoked', reason, now, false, true, 0)
  flush(p)
  return ok(public)
end

register('ff_create', ff_create)
register('ff_create_many', ff_create_many)
register('ff_cancel', ff_cancel)
register('ff_change_priority', ff_change_priority)
register('ff_revoke_lease', ff_revoke_lease)
