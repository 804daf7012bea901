//! The one Lua script: GCRA on the server's clock, granting a lease of up to `k` tokens.
//!
//! `KEYS[1]` is the (identity, class) key; `ARGV` are the emission interval in microseconds
//! (may be fractional), the burst, `k`, and whether a key missing on a young server is
//! created drained (`1`, the default, below) or full (`0`: the builder's
//! `restart_drains(false)`). The key holds the bucket's theoretical arrival
//! time (TAT) in whole microseconds of the server's `TIME`, so the processes' clocks never
//! disagree. The bucket holds `burst` tokens when `TAT <= now`; granting `n` moves TAT on by
//! `n` intervals, allowed while `TAT − now <= burst × interval` (`H`, the refill horizon).
//! The reply is `{granted, wait_us, fresh}`: `wait_us` is how long until one more token could
//! be granted (0 when the whole request was granted); `fresh` is 0 when the key existed, 1
//! when it was missing and created full, 2 when it was missing and created drained (below).
//! The key expires when its bucket would be full again (`PX` = TAT − now, rounded up), so an
//! idle identity costs Redis nothing.
//!
//! # A missing key
//!
//! A missing key is a first use, the expiry of a full bucket, or a memory loss (a restart
//! with empty memory, an eviction, a failover, a `DEL`). The script cannot tell these apart
//! from the key, but it can tell whether the *server* may have lost it by restarting: any
//! key the previous server process wrote was written before this one started, at `S`, so its
//! TAT was at most `S + H`. The script reads the start second from `INFO server` (only on
//! this path): `stat_starttime = ⌊server_time_usec / 10⁶⌋ − uptime_in_seconds`, both from
//! the same cached clock, so `S < S⁺ = (stat_starttime + 1) s`, and creates the key with
//!
//! `TAT = max(now, min(now, S⁺) + H)`
//!
//! which is never below the lost key's TAT (a restart hands out nothing the lost key would
//! not have), and is `now` (full, as before) once the server has been up `H` plus at most the
//! one second of the start time's resolution. The price: every key created in that window
//! — including on a first deployment, which the script cannot tell from a restart — starts
//! drained (at most one `burst` short) and refills at the rate. If `INFO` is refused (an ACL
//! user without `+info`) or does not parse, every missing key is created drained (`now + H`):
//! never a fault, never a fresh burst. Evictions, failovers and `DEL`s on a server up
//! longer than that still read as a full bucket (the `m` term of the bound in
//! [`crate::fleet`]). This needs the server's `TIME` not to step back across the restart.
//!
//! With `ARGV[4]` = `0` the script skips all this and creates every missing key full: a
//! restart with empty memory then counts in the bound's `m` like an eviction.
//!
//! A key of another type makes `GET` fail (`WRONGTYPE`); a string that is not a number is
//! refused by the script itself: both come back as errors, which the worker treats as a key
//! fault. TAT is rounded up, never down: rounding only ever grants less. A key created drained is
//! stored even when nothing was granted, so the next call finds it and skips `INFO`.

/// The script's source.
pub(crate) const GCRA_LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local drains = ARGV[4] ~= '0'
local horizon = burst * interval
local stored = redis.call('GET', KEYS[1])
local tat = now
local fresh = 0
if stored then
  tat = tonumber(stored)
  if tat == nil then
    return redis.error_reply('ADMITBADVALUE the value under ' .. KEYS[1] .. ' is not a GCRA bucket')
  end
elseif drains then
  local info = redis.pcall('INFO', 'server')
  local up, usec
  if type(info) == 'string' then
    local a = string.find(info, 'server_time_usec:', 1, true)
    if a then usec = tonumber(string.match(info, '^(%d+)', a + 17)) end
    local b = string.find(info, 'uptime_in_seconds:', 1, true)
    if b then up = tonumber(string.match(info, '^(%d+)', b + 18)) end
  end
  local since = now
  if up and usec then
    since = (math.floor(usec / 1000000) - up + 1) * 1000000
  end
  if since > now then since = now end
  tat = math.ceil(since + horizon)
  fresh = 2
  if tat <= now then
    tat = now
    fresh = 1
  end
else
  fresh = 1
end
if tat < now then tat = now end
local room = math.floor((horizon - (tat - now)) / interval)
if room < 0 then room = 0 end
local n = want
if room < n then n = room end
if n > 0 or fresh == 2 then
  tat = math.ceil(tat + n * interval)
  local ttl = math.ceil((tat - now) / 1000)
  if ttl < 1 then ttl = 1 end
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', ttl)
end
local wait = 0
if n < want then
  wait = math.ceil(tat - (burst - 1) * interval - now)
  if wait < 0 then wait = 0 end
end
return {n, wait, fresh}
";
