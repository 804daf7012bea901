//! Each scenario with small parameters, asserting the qualitative results the seeds promise.
//! No wall-clock assertions: only counts and queue positions.

use super::*;
use std::time::Duration;

#[test]
fn fairness_bounds_the_queue_position_with_a_quota_and_not_without() {
    progress::set_quiet(true);
    let params = fairness::Params {
        quota: Some(4),
        apply: Duration::from_micros(20),
        human_ops: 30,
        human_interval: Duration::from_micros(300),
        agent_backlog: 500,
    };
    let runs = fairness::run(&params);
    let by = |label: &str| runs.iter().find(|r| r.label.starts_with(label)).unwrap();
    let none = by("no defence");
    let defaults = by("admit defaults");
    let yours = by("your quota");
    assert_eq!(none.waits.len(), 30);
    assert!(
        none.max_ahead > admit::fairness::DEFAULT_QUOTA as usize,
        "{}",
        none.max_ahead
    );
    assert!(defaults.max_ahead <= admit::fairness::DEFAULT_QUOTA as usize);
    assert!(yours.max_ahead <= 4, "{}", yours.max_ahead);
    // The agent claiming a new key id per op from one address: keyed by the claim, the quota
    // counts every key id apart and the agent's backlog passes it; keyed by the source, the
    // address holds Q places whatever it claims.
    let by_claim = by(fairness::ROTATING_BY_CLAIM);
    let by_source = by(fairness::ROTATING_BY_SOURCE);
    assert!(
        by_claim.max_ahead > admit::fairness::DEFAULT_QUOTA as usize,
        "{}",
        by_claim.max_ahead
    );
    assert!(
        by_source.max_ahead <= admit::fairness::DEFAULT_QUOTA as usize,
        "{}",
        by_source.max_ahead
    );
    assert_eq!(by_source.waits.len(), 30);
    assert!(by_source.bounded() && !by_claim.bounded());
    let table = fairness::table(&params, &runs);
    assert_eq!(table.columns.len(), 5);
}

#[test]
fn registrar_records_are_bounded_with_the_limiter_and_grow_without_it() {
    progress::set_quiet(true);
    let params = registrar::Params {
        wave_hosts: 8,
        modules_per_host: 8,
        flood: 3_000,
        churn: 2_000,
        config: None,
    };
    let runs = registrar::run(&params).unwrap();
    let (none, admit) = (&runs[0], &runs[1]);
    // Without a limiter every invocation writes both records.
    assert_eq!(none.intents, 5_000 + 64);
    assert_eq!(none.outcomes, none.intents);
    // With it: the flood's burst, at most one per entry the cap allows, the overflow burst,
    // the refills of a short run, and the wave.
    let bound = 32 + 256 + 32 + 64 + 64;
    assert!(admit.intents <= bound, "{} intent records", admit.intents);
    assert_eq!(
        admit.mints_admitted, 64,
        "the legitimate wave is fully admitted"
    );
    assert_eq!(admit.mints_throttled, 0);
    let (live, cap) = admit.live_entries.unwrap();
    assert!(live <= cap);
    assert_eq!(admit.limited_predecision + admit.intents - 64, 5_000);
}

#[test]
fn sizing_says_how_much_longer_an_uncovered_wave_takes_and_the_replay_agrees() {
    progress::set_quiet(true);
    let params = sizing::Params {
        wave_hosts: 200,
        modules_per_host: 12,
        config: None,
    };
    let runs = sizing::run(&params).unwrap();
    let run = &runs[0];
    assert!(!run.covered);
    assert_eq!(run.extra_secs, 944);
    let (elapsed, throttles) = run.replay.unwrap();
    assert_eq!(elapsed, Duration::from_secs(944));
    assert!(throttles > 0);
    let covered = sizing::run(&sizing::Params {
        wave_hosts: 64,
        modules_per_host: 8,
        config: None,
    })
    .unwrap();
    assert!(covered[0].covered);
    assert_eq!(covered[0].replay, Some((Duration::ZERO, 0)));
}

#[test]
fn errors_become_one_line() {
    assert_eq!(one_line("a\n  |\n b \n"), "a: b");
    assert_eq!(one_line("only"), "only");
}

#[test]
fn quota_bounds_the_abusive_sessions_bytes_and_not_without_it() {
    progress::set_quiet(true);
    let params = small_quota();
    let runs = quota::run(&params).unwrap();
    let limit = u64::from(admit::quota::Quota::default().events()) * params.big_write;
    let none = &runs[0];
    assert_eq!(none.abusive_max_session_bytes, 1_300 * params.big_write);
    for run in &runs[1..] {
        assert!(
            run.abusive_max_session_bytes <= limit,
            "{}: {}",
            run.label,
            run.abusive_max_session_bytes
        );
        assert!(run.memory_bytes.is_some());
    }
    // Twenty heavy actors in 65,536 buckets: no honest actor shares all of its four.
    assert_eq!(runs[1].honest_refused_actors, 0);
    // Every rotating name is new, so the quota does not stop it: the documented limit of
    // what a claimed name is worth.
    assert_eq!(runs[1].rotating_bytes, 5_000 * params.big_write);
}

/// The quota scenario at a size a debug build runs in a moment: 32,000 writes, D = 0.32 s.
fn small_quota() -> quota::Params {
    quota::Params {
        abusive: 20,
        abusive_writes: 1_300,
        honest: 200,
        honest_writes: 5,
        rotating: 5_000,
        ..quota::Params::default()
    }
}

#[test]
fn the_source_limit_beside_the_claim_quota_bounds_the_rotating_attacker_by_its_formula() {
    progress::set_quiet(true);
    let params = small_quota();
    let runs = quota::run(&params).unwrap();
    let by = |label: &str| runs.iter().find(|r| r.label.starts_with(label)).unwrap();
    let alone = by("admit defaults");
    let composed = by(quota::COMPOSED);
    assert_eq!(composed.duration, params.duration());
    assert_eq!(composed.duration, Duration::from_millis(320));
    // S x (B + R·D) x largest write = 4 x (32 + 10/s x 0.32 s) x 4096 B.
    let bound = composed.bound_bytes(&params).unwrap();
    assert_eq!(bound, 4 * (32 + 4) * 4_096);
    assert!(
        composed.rotating_bytes <= bound,
        "{} > {bound}",
        composed.rotating_bytes
    );
    // The acceptance: at most a tenth of what the claim quota alone lets it store.
    assert!(
        composed.rotating_bytes * 10 <= alone.rotating_bytes,
        "{} vs {}",
        composed.rotating_bytes,
        alone.rotating_bytes
    );
    // Honest actors lose nothing: each address's burst covers its actor's writes, and the
    // cap holds every source.
    assert_eq!(composed.honest_refused_writes, 0);
    assert_eq!(composed.honest_refused_actors, 0);
    assert_eq!(composed.honest_bytes, 200 * 5 * params.small_write);
    // The table prints the bound beside what it stored, in text and JSON.
    let table = quota::table(&params, &runs);
    let text = table.render();
    assert!(
        text.contains("S x (B + R·D) x largest write = 4 x (32 + 10/s x 0.3 s) x 4096 B"),
        "{text}"
    );
    let json = table.json();
    assert_eq!(
        json["rows"]["rotating_bound_bytes"][quota::COMPOSED],
        serde_json::json!(bound)
    );
    assert_eq!(
        json["rows"]["rotating_bytes"][quota::COMPOSED],
        serde_json::json!(composed.rotating_bytes)
    );
}

#[test]
fn honest_claims_behind_one_address_keep_their_share_only_with_the_address_sized_for_them() {
    let params = small_quota();
    let runs = quota::nat(&params).unwrap();
    let (per_address, every, nat_only) = (&runs[0], &runs[1], &runs[2]);
    // 200 claims x 5 writes from one address against 10/s, burst 32: most are refused.
    assert_eq!(per_address.admitted + per_address.refused, 1_000);
    assert!(per_address.admitted <= 32 + 4, "{}", per_address.admitted);
    assert!(per_address.claims_refused > 100, "{per_address:?}");
    // N x the per-address limit on the address: nothing refused, every claim keeps its 5.
    for sized in [every, nat_only] {
        assert_eq!(sized.refused, 0, "{sized:?}");
        assert_eq!(sized.fewest_kept, 5, "{sized:?}");
    }
    // Given to every address, it multiplies the attacker's bound; given to the NAT's alone,
    // the bound stays.
    assert!(every.attacker_bound > 100 * per_address.attacker_bound);
    assert_eq!(nat_only.attacker_bound, per_address.attacker_bound);
    let table = quota::nat_table(&params, &runs);
    assert_eq!(
        table.json()["rows"]["honest_writes_refused"]["per-address limit"],
        965
    );
}

#[test]
fn fleet_per_door_limits_multiply_the_budget_and_redis_holds_the_bound() {
    progress::set_quiet(true);
    if !std::path::Path::new("/usr/bin/redis-server").exists() {
        eprintln!("skipped: no redis-server binary (apt-get install -y redis-server)");
        return;
    }
    let params = fleet::Params {
        doors: 4,
        per_second: 500,
        burst: 50,
        run: Duration::from_secs(1),
        lease_cap: 16,
        cluster: false,
        fault: None,
    };
    let (runs, _) = fleet::run(&params).unwrap();
    let (alone, shared) = (&runs[0], &runs[1]);
    // Each door its own limit: about 4 budgets (at least 3 on a loaded machine).
    assert!(
        alone.admitted >= 3 * params.budget(alone.elapsed),
        "{}",
        alone.admitted
    );
    assert!(
        shared.admitted <= params.bound(shared.elapsed),
        "{}",
        shared.admitted
    );
    assert!(shared.redis_calls.unwrap() > 0);
    // Paced, the flood's calls stay within the call bound; unpaced, admissions still within
    // the admission bound.
    let bound = params.call_bound(shared.leases.unwrap(), shared.elapsed);
    assert!(
        shared.redis_calls.unwrap() <= bound,
        "{shared:?}: bound {bound}"
    );
    let unpaced = shared.unpaced.as_ref().unwrap();
    assert!(
        unpaced.admitted <= params.bound(unpaced.elapsed),
        "{unpaced:?}"
    );
    let table = fleet::table(&params, &runs);
    assert_eq!(table.columns.len(), 2);
}

#[test]
fn fleet_through_a_local_cluster_holds_the_bound() {
    if !cluster_binaries() {
        return;
    }
    let params = cluster_params(None);
    let (runs, _) = fleet::run(&params).unwrap();
    let shared = &runs[1];
    assert_eq!(shared.label, "Redis Cluster-shared");
    assert!(
        shared.admitted <= params.bound(shared.elapsed),
        "{}",
        shared.admitted
    );
    assert!(shared.admitted > 0 && shared.redis_calls.unwrap() > 0);
}

#[test]
fn adaptive_meets_its_targets_where_none_and_a_fast_sized_cap_do_not() {
    progress::set_quiet(true);
    let params = adaptive::Params::default();
    let runs = adaptive::run(&params);
    let by = |total: adaptive::Total| runs.iter().find(|r| r.total == total).unwrap();
    let (notes, ok) = adaptive::targets(&params, by(adaptive::Total::Adaptive));
    assert!(ok, "{notes:#?}");
    for seg in by(adaptive::Total::Adaptive)
        .segments
        .iter()
        .filter(|s| s.steady)
    {
        assert!(
            seg.human_waits.len() >= 100,
            "{}: {}",
            seg.name,
            seg.human_waits.len()
        );
    }
    let p99 = |run: &adaptive::Run, steady: usize| {
        let seg = run
            .segments
            .iter()
            .filter(|s| s.steady)
            .nth(steady)
            .unwrap();
        report::percentile(&seg.human_waits, 99.0)
    };
    assert!(p99(by(adaptive::Total::None), 0) > params.target * 100);
    let fast_sized = runs
        .iter()
        .find(|r| matches!(r.total, adaptive::Total::Static(cap) if cap > 20))
        .unwrap();
    assert!(
        p99(fast_sized, 1) > params.target * 2,
        "too long a queue once slow"
    );
    let table = adaptive::table(&params, &runs);
    assert_eq!(table.columns.len(), 4);
}

/// `--fault kill` and `--fault pause`: the primaries the fault did not strike see no
/// fail-policy decision and keep leasing; the struck one follows the policy.
#[test]
fn fleet_cluster_fault_stays_on_the_struck_primary() {
    if !cluster_binaries() {
        return;
    }
    for fault in [fleet::Fault::Kill, fleet::Fault::Pause] {
        let (_, faulted) = fleet::run(&cluster_params(Some(fault))).unwrap();
        let faulted = faulted.unwrap();
        let table = fleet::fault_table(&faulted);
        println!("{}", table.render());
        let struck = faulted
            .faulted
            .iter()
            .find(|n| n.address == faulted.failed)
            .unwrap();
        assert!(struck.fail_policy_decisions > 0, "{fault:?}: {faulted:?}");
        let healthy: Vec<_> = faulted
            .base
            .iter()
            .filter(|n| n.address != faulted.failed)
            .collect();
        assert_eq!(healthy.len(), 2, "{faulted:?}");
        for base in healthy {
            let now = faulted
                .faulted
                .iter()
                .find(|n| n.address == base.address)
                .unwrap();
            assert_eq!(now.fail_policy_decisions, 0, "{fault:?}: {faulted:?}");
            assert!(now.tokens_per_second > 0.0, "{fault:?}: {faulted:?}");
        }
    }
}

/// Quiet progress, and whether redis-server and redis-cli are installed (if not, says the
/// test is skipped and why).
fn cluster_binaries() -> bool {
    progress::set_quiet(true);
    match crate::cluster::binary("redis-server").and(crate::cluster::binary("redis-cli")) {
        Ok(_) => true,
        Err(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// The cluster tests' fleet run: short, small.
fn cluster_params(fault: Option<fleet::Fault>) -> fleet::Params {
    fleet::Params {
        doors: 4,
        per_second: 500,
        burst: 50,
        run: Duration::from_secs(1),
        lease_cap: 16,
        cluster: true,
        fault,
    }
}

/// Small sizes: 20,000 attacker requests a second for 2 s against an address cap of 256, a
/// /48 limit of 4/s in bursts of 8 (at most 8 + 4/s × 1 s = 12 address entries per /48).
fn small_prefix() -> prefix::Params {
    prefix::Params {
        run: Duration::from_secs(2),
        attack_per_sec: 20_000,
        prefixes: 4,
        newcomers_per_sec: 50,
        newcomer_requests: 3,
        per_address: quota::SourceLimit {
            per_second: 10,
            burst: 10,
        },
        per_prefix: quota::SourceLimit {
            per_second: 4,
            burst: 8,
        },
        address_cap: 256,
        prefix_cap: 256,
    }
}

#[test]
fn newcomers_keep_their_own_entries_under_a_rotating_prefix_only_with_the_prefix_limit() {
    progress::set_quiet(true);
    let params = small_prefix();
    let runs = prefix::run(&params).unwrap();
    let [one_without, one_with, p_without, p_with, rented_48, rented_32]: [prefix::Run; 6] =
        runs.clone().try_into().unwrap();
    // Without the prefix limit the fresh addresses fill the table: newcomers pay the shared
    // overflow, and are refused.
    for without in [&one_without, &p_without] {
        assert_eq!(without.prefix_limit, None);
        assert!(without.newcomer_overflow > 0, "{without:?}");
        assert!(without.newcomers_refused > 0, "{without:?}");
    }
    // With it, within the bound, every newcomer is admitted on its own entry, and the
    // attacker gets at most its prefixes' budget.
    for with in [&one_with, &p_with] {
        assert!(params.address_need(with.prefixes) <= params.address_cap as u64);
        assert_eq!(with.newcomer_refused, 0, "{with:?}");
        assert_eq!(with.newcomer_overflow, 0, "{with:?}");
        let bound = u64::from(with.prefixes) * params.per_prefix.admits_over(params.run);
        assert_eq!(with.prefix_limit, Some(48));
        assert!(with.attacker_admitted <= bound, "{with:?} > {bound}");
        assert!(with.newcomers > 50, "{with:?}");
    }
    assert_eq!(p_with.prefixes, 4);
    // A rented /32 keyed by /48: 65,536 prefixes, past both tables; newcomers pay the
    // overflow again. Keyed by /32 it is one prefix, and newcomers keep their entries.
    assert_eq!(rented_48.prefixes, prefix::RENTED);
    assert!(params.address_need(prefix::RENTED) > params.address_cap as u64);
    assert!(rented_48.newcomer_overflow > 0, "{rented_48:?}");
    assert!(rented_48.newcomers_refused > 0, "{rented_48:?}");
    assert_eq!(rented_32.newcomer_refused, 0, "{rented_32:?}");
    assert_eq!(rented_32.newcomer_overflow, 0, "{rented_32:?}");
    assert!(rented_32.attacker_admitted <= params.per_prefix.admits_over(params.run));
    let table = prefix::table(&params, &runs);
    assert_eq!(table.columns.len(), 6);
    assert!(table
        .render()
        .contains("newcomer requests paid by a shared overflow"));
}
