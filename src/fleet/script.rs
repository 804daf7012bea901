//! The one Lua script: GCRA on the server's clock, granting a lease of up to `k` tokens.
//!
//! `KEYS[1]` is the (identity, class) key; `ARGV` are the emission interval in microseconds
//! (may be fractional), the burst, and `k`. The key holds the bucket's theoretical arrival
//! time (TAT) in whole microseconds of the server's `TIME`, so the processes' clocks never
//! disagree. The bucket holds `burst` tokens when `TAT <= now`; granting `n` moves TAT on by
//! `n` intervals, allowed while `TAT − now <= burst × interval`. The reply is
//! `{granted, wait_us, fresh}`: `wait_us` is how long until one more token could be granted (0
//! when the whole request was granted); `fresh` is 1 when the key was missing (first use,
//! expiry of a full bucket, or a memory loss), so a process can count its key's losses. The key expires when its bucket would be full again
//! (`PX` = TAT − now, rounded up), so an idle identity costs Redis nothing.
//!
//! A missing key is a full bucket (first use, expiry, eviction or a restart with empty
//! memory: the last two are the "memory loss" term of the bound in [`crate::fleet`]). A key of
//! another type makes `GET` fail (`WRONGTYPE`); a string that is not a number is refused by
//! the script itself: both come back as errors, which the worker treats as a key fault.
//! TAT is rounded up, never down: rounding only ever grants less.

/// The script's source.
pub(crate) const GCRA_LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local stored = redis.call('GET', KEYS[1])
local tat = now
local fresh = 1
if stored then
  fresh = 0
  tat = tonumber(stored)
  if tat == nil then
    return redis.error_reply('ADMITBADVALUE the value under ' .. KEYS[1] .. ' is not a GCRA bucket')
  end
end
if tat < now then tat = now end
local room = math.floor((burst * interval - (tat - now)) / interval)
if room < 0 then room = 0 end
local n = want
if room < n then n = room end
if n > 0 then
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
