#!/usr/bin/env python3
"""Reads the logs and criterion results `benches/report.sh` collected, and writes the results
page (from `template.md` beside this file) and its plot, an SVG drawn by hand.

Standard library only. Usage (the script calls it):

    report.py WORK_DIR OUT_DIR

WORK_DIR holds `instructions.log`, the other benches' logs, `machine.txt`, `meta.txt` and
`criterion/` (criterion's output, `CRITERION_HOME`); OUT_DIR receives `benchmarks.md` and
`benchmarks.svg`. A row whose bench did not run (no redis-server, `--quick`) prints as "–".
"""

import json
import os
import re
import sys
from html import escape

WORK, OUT = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))


def read(name):
    path = os.path.join(WORK, name)
    return open(path, encoding="utf-8").read() if os.path.exists(path) else ""


# ---- the inputs ------------------------------------------------------------------------------


def parse_instructions(text):
    """`benches/instructions.rs` prints `NAME admit N   LABEL N   ratio R ... (runs A–B)`."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^(?P<name>\S.*?)\s+admit\s+(?P<admit>-?\d+)(?P<rest>.*)$", line)
        if not m:
            continue
        rest = m.group("rest")
        spread = re.search(r"\(runs ([^)]*)\)", rest)
        anchors = re.findall(r"\s{3}(\S.*?)\s+(-?\d+)\s{3}ratio\s+(-?[\d.]+)", rest)
        rows[m.group("name").strip()] = {
            "admit": int(m.group("admit")),
            "anchors": [(label, int(n)) for label, n, _ in anchors],
            "spread": spread.group(1) if spread else None,
        }
    return rows


def parse_criterion(home):
    """Median ns per iteration by criterion's full id (`group/function`)."""
    out = {}
    for root, _, files in os.walk(home):
        if os.path.basename(root) != "new" or "benchmark.json" not in files:
            continue
        with open(os.path.join(root, "benchmark.json"), encoding="utf-8") as f:
            full_id = json.load(f)["full_id"]
        with open(os.path.join(root, "estimates.json"), encoding="utf-8") as f:
            out[full_id] = json.load(f)["median"]["point_estimate"]
    return out


ICOUNT = parse_instructions(read("instructions.log"))
NS = parse_criterion(os.path.join(WORK, "criterion"))
META = dict(
    line.split("=", 1) for line in read("meta.txt").splitlines() if "=" in line
)


COMMANDS = dict(
    line.split("=", 1) for line in read("commands.txt").splitlines() if "=" in line
)
TIME_LOSSES = []


def icount(name, anchor=0):
    """(admit, anchor label, anchor count) of an instruction row, or Nones."""
    row = ICOUNT.get(name)
    if not row:
        return None, None, None
    label, n = row["anchors"][anchor] if len(row["anchors"]) > anchor else (None, None)
    return row["admit"], label, n


def ns(full_id, per=1.0):
    v = NS.get(full_id)
    return None if v is None else v / per


def tower_overhead(workload, who):
    """A layer's ns per request over the bare service (criterion times batches of 1,000)."""
    a, bare = ns(f"tower/{workload}/{who}"), ns(f"tower/{workload}/no layer")
    return None if a is None or bare is None else (a - bare) / 1000.0


# ---- formatting ------------------------------------------------------------------------------


def num(v):
    if v is None:
        return "–"
    if isinstance(v, int):
        return f"{v:,}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    if r is None:
        return "–"
    text = f"{r:.2f}×" if r >= 0.01 else f"{r:.4f}×"
    return f"**{text}**" if r > 1.0 else text


def table(rows, primitive=""):
    """rows: (workload, anchor, admit instr, anchor instr, admit ns, anchor ns). A time ratio
    over 1.05 is also listed among the losses."""
    out = [
        "| workload | anchor | admit instr. | anchor instr. | ratio | admit ns | anchor ns | ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for workload, anchor, ai, bi, an, bn in rows:
        r = ratio(an, bn)
        if r is not None and r > 1.05 and "floor" not in anchor and "the same" not in anchor:
            TIME_LOSSES.append(f"{primitive}, {workload}: {an:,.1f} ns against {anchor}'s "
                               f"{bn:,.1f} ns ({r:.2f}×)")
        out.append(
            f"| {workload} | {anchor} | {num(ai)} | {num(bi)} | {fmt_ratio(ratio(ai, bi))} "
            f"| {num(an)} | {num(bn)} | {fmt_ratio(ratio(an, bn))} |"
        )
    return "\n".join(out)


# ---- the tables, per primitive ---------------------------------------------------------------

LIM = "limiter/hit, 1 hot key/"
LIM200 = "limiter/hit, 200 keys cycled/"
GOV_OWN = "governor check_key (own clock)"


def bucket_rows():
    hit = icount("bucket hit")
    refusal = icount("bucket refusal")
    gov_hit = ns("bucket/governor check: admit")
    return [
        ("hit, `now` handed", "governor `check`", hit[0], hit[2],
         ns("bucket/try_acquire_at: admit"), gov_hit),
        ("refusal, `now` handed", "governor `check`, refused", refusal[0], refusal[2],
         ns("bucket/try_acquire_at: deny"), ns("bucket/governor check: deny")),
        ("hit, reading `MonotonicClock` each time", "governor `check`", None, None,
         ns("bucket/try_acquire(&MonotonicClock): admit"), gov_hit),
        ("hit, `now` handed", "one uncontended `compare_exchange` (floor)", None, None,
         ns("bucket/try_acquire_at: admit"), ns("bucket/floor: uncontended compare_exchange")),
        ("hit, 2 threads on one bucket (per take)", "the same on 1 thread (contention's cost)",
         None, None,
         ns("bucket/try_acquire_at: admit, 2 threads on one bucket"),
         ns("bucket/try_acquire_at: admit")),
    ]


def limiter_rows():
    g = "governor `check_key`"
    h1, h200 = icount("limiter hit, 1 key"), icount("limiter hit, 200 keys")
    ref, once = icount("limiter refusal, 1 key"), icount("limiter hit, hashed once, 200 keys")
    sat, first = icount("limiter saturated miss, 200 keys"), icount("limiter first charge")
    sat_g = "limiter/saturated miss, 200 absent keys cycled/"
    two = "limiter/2 threads, distinct keys (100 each, cycled)/"
    one = "limiter/2 threads, one key/"
    return [
        ("hit, 1 key, `now` handed", g, h1[0], h1[2],
         ns(LIM + "admit charge_at (now handed)"), ns(LIM + GOV_OWN)),
        ("hit, 200 keys, `now` handed", g, h200[0], h200[2],
         ns(LIM200 + "admit charge_at (now handed)"), ns(LIM200 + GOV_OWN)),
        ("hit, 200 keys, each on its own clock", g, None, None,
         ns(LIM200 + "admit charge (own clock)"), ns(LIM200 + GOV_OWN)),
        ("hit, 200 keys, hashed once per connection", g, once[0], once[2],
         ns(LIM200 + "admit try_acquire_hashed_at (hashed once, now handed)"),
         ns(LIM200 + GOV_OWN)),
        ("refusal, 1 key", f"{g}, refused", ref[0], ref[2], None, None),
        ("saturated miss (table full), 200 keys", f"{g} hit (it keeps every key)", sat[0],
         sat[2], ns(sat_g + "admit charge_at (now handed)"), ns(LIM200 + GOV_OWN)),
        ("first charge of a key", f"{g}, first sight", first[0], first[2], None, None),
        ("2 threads, distinct keys (per charge)", g, None, None,
         ns(two + "admit charge (own clock)"), ns(two + GOV_OWN)),
        ("2 threads, one key (per charge)", g, None, None,
         ns(one + "admit charge (own clock)"), ns(one + GOV_OWN)),
    ]


def in_flight_rows():
    d, s = icount("in-flight acquire+release", 0), icount("in-flight acquire+release", 1)
    f = "fairness/"
    return [
        ("acquire + release, 1 actor", "`DashMap<String, AtomicU32>`", d[0], d[2],
         ns(f + "uncontended/admit"), ns(f + "uncontended/dashmap")),
        ("acquire + release, 1 actor", "`Mutex<HashMap<String, u32>>`", None, None,
         ns(f + "uncontended/admit"), ns(f + "uncontended/mutex-hashmap")),
        ("acquire + release, 1 actor", "tokio `Semaphore::try_acquire` (not keyed)", s[0], s[2],
         None, None),
        ("acquire + release, actor already in flight", "`DashMap<String, AtomicU32>`", None, None,
         ns(f + "uncontended-in-flight/admit"), ns(f + "uncontended-in-flight/dashmap")),
        ("2 threads, distinct actors", "`DashMap<String, AtomicU32>`", None, None,
         ns(f + "2-threads-distinct-actors/admit"), ns(f + "2-threads-distinct-actors/dashmap")),
        ("2 threads, one actor", "`DashMap<String, AtomicU32>`", None, None,
         ns(f + "2-threads-one-actor/admit"), ns(f + "2-threads-one-actor/dashmap")),
    ]


def volume_rows():
    v = icount("volume charge, 200 keys")
    a4 = "admit check_at, rows = 4 (default)"
    gk, dm = "governor keyed (DashMap)", "DashMap<String, AtomicU64>"
    return [
        ("charge, `now` handed (instr.: 200 names, ns: 4,096)", "governor `check_key`", v[0], v[2],
         ns("quota/" + a4), ns("quota/" + gk)),
        ("charge, `now` handed (4,096 names)", "`DashMap<String, AtomicU64>`", None, None,
         ns("quota/" + a4), ns("quota/" + dm)),
        ("charge, default build and clock", "governor `check_key`", None, None,
         ns("quota/admit check, default build + default clock, rows = 4"), ns("quota/" + gk)),
        ("2 threads, distinct names (per charge)", "governor `check_key`", None, None,
         ns("quota, 2 threads/" + a4), ns("quota, 2 threads/" + gk)),
        ("2 threads, one actor (per charge)", "governor `check_key`", None, None,
         ns("quota, 2 threads, one actor/" + a4), ns("quota, 2 threads, one actor/" + gk)),
    ]


OBVIOUS = "governor check_key + DashMap in-flight + DashMap volume"
GATE = "admit Gate, hashed per request, now handed"
GATE_ONCE = "admit Gate, hashed once per connection, now handed"


def paired(threads, column):
    """A `request_paired` result: (median ns, median ratio to the obvious stack)."""
    m = re.search(
        rf"request_paired/{threads} thread\(s\)/{re.escape(column)}: median ([\d.]+) ns; "
        r"to obvious: median ([\d.]+)",
        read("request_paired.log"),
    )
    return (float(m.group(1)), float(m.group(2))) if m else (None, None)


def gate_rows():
    per, once = icount("gate request, hashed per request"), icount("gate request, hashed once")
    r = "request/1 thread/"
    anchor = "governor + DashMap + DashMap"
    a2, ratio_a = paired(2, "admit, one HashedActor, now handed")
    c2, ratio_c = paired(2, "admit, hashed once per connection, now handed")
    g2, ratio_g = paired(2, GATE)
    o2, _ = paired(2, OBVIOUS)
    return [
        ("one request through `Gate`, actor hashed per request", anchor, per[0], per[2],
         ns(r + GATE), ns(r + OBVIOUS)),
        ("one request, the three calls by hand, hashed per request", anchor, None, None,
         ns(r + "admit, one HashedActor, now handed"), ns(r + OBVIOUS)),
        ("one request through `Gate`, actor hashed once per connection", anchor, once[0],
         once[2], ns(r + GATE_ONCE), ns(r + OBVIOUS)),
        ("one request, the three calls by hand, hashed once", anchor, None, None,
         ns(r + "admit, hashed once per connection, now handed"), ns(r + OBVIOUS)),
        ("2 threads, `Gate`, hashed per request (paired turns, medians)", anchor, None, None,
         g2, o2),
        ("2 threads, by hand, hashed per request (paired turns, medians)", anchor, None, None,
         a2, o2),
        ("2 threads, by hand, hashed once (paired turns, medians)", anchor, None, None, c2, o2),
    ], (ratio_g, ratio_a, ratio_c)


def tower_rows():
    t = icount("tower layer overhead, 1 hot key")
    a, g = "admit AdmitLayer", "tower_governor GovernorLayer"
    return [
        ("overhead over no layer, 1 hot key", "tower_governor", t[0], t[2],
         tower_overhead("1 hot key", a), tower_overhead("1 hot key", g)),
        ("overhead over no layer, 10,000 keys", "tower_governor", None, None,
         tower_overhead("10,000 keys", a), tower_overhead("10,000 keys", g)),
    ]


def fleet_rows():
    f = icount("fleet leased decision, 1 key")
    leased = ns("fleet/fleet leased decision (try_acquire_at)")
    return [
        ("leased decision, 1 hot key", "admit `Limiter` hit (no fleet)", f[0], f[2],
         leased, ns("fleet/limiter hit (try_acquire_at)")),
        ("leased decision, 1 hot key", "one `EVALSHA` GCRA round trip to the same Redis", None,
         None, leased, ns("fleet/EVALSHA GCRA round trip (one token)")),
    ]


# ---- the lines printed beside the tables -----------------------------------------------------


def grep(log, pattern, fmt, missing="not measured in this run"):
    m = re.search(pattern, read(log), re.M)
    return fmt(m) if m else missing


def mib(b):
    return f"{int(b) / (1 << 20):.1f} MiB"


def limiter_memory():
    admit = grep(
        "limiter.log",
        r"memory: admit \(cap (\d+)\): memory_bytes\(\) = (\d+) B .*net growth over (\d+) keys = (-?\d+) B",
        lambda m: f"admit's table (cap {int(m.group(1)):,}) is {int(m.group(2)) / 1024:.0f} KiB "
        f"and grew {int(m.group(4)):,} B over {int(m.group(3)):,} distinct keys",
    )
    gov = grep(
        "limiter.log",
        r"memory: governor keyed \(DashMap\):.*net growth over (\d+) keys = (-?\d+) B",
        lambda m: f"governor's keyed map grew {mib(m.group(2))} over the same keys "
        f"(it keeps every key until `retain_recent` is called)",
    )
    return f"{admit}; {gov}."


def in_flight_memory():
    admit = grep(
        "fairness.log",
        r"memory admit\s+churn of (\d+): net\s+(-?\d+) B.*memory_bytes\(\) (\d+) B",
        lambda m: f"admit's table is {int(m.group(3)) / 1024:.0f} KiB and allocated "
        f"{int(m.group(2)):,} B over a churn of {int(m.group(1)):,} names",
        missing="",
    )
    dash = grep(
        "fairness.log",
        r"memory dashmap\s+churn of (\d+): net\s+(-?\d+) B, peak\s+(-?\d+) B",
        lambda m: f"the DashMap peaked at {int(m.group(3)):,} B (it removes an actor at zero)",
        missing="",
    )
    return f"Memory: {admit}; {dash}." if admit and dash else ""


def volume_memory():
    admit = grep(
        "quota.log",
        r"admit RateLimit, rows = 4: (\d+) B at construction, (-?\d+) B more after the names",
        lambda m: f"admit's `RateLimit` (4 rows) is {int(m.group(1)) / 1024:.0f} KiB at "
        f"construction and {int(m.group(2)):,} B more after 1,000,000 distinct names",
    )
    gov = grep(
        "quota.log",
        r"governor keyed \(DashMap\): (-?\d+) B \((\d+) B per name\)",
        lambda m: f"governor's keyed map holds {mib(m.group(1))} ({m.group(2)} B per name)",
    )
    return f"Memory: {admit}; {gov}."


def fleet_lines():
    calls = grep(
        "fleet.log",
        r"steady hot load \(lease cap (\d+)\): (\d+) decisions, (\d+) admitted, (\d+) Redis calls: ([\d.]+) per 1,000",
        lambda m: f"Redis calls per 1,000 decisions, one hot identity at a steady load within "
        f"its budget (lease cap {m.group(1)}): **{m.group(5)}**",
    )
    procs = grep(
        "fleet.log",
        r"4 processes, one identity.*: ([\d.]+) M decisions/s, ([\d.]+) M admissions/s",
        lambda m: f"4 processes flooding one identity through one Redis: {m.group(1)} M "
        f"decisions/s together ({m.group(2)} M admitted/s); 4 processes and redis-server on "
        f"2 vCPUs, so this shows that the fleet does not serialise on Redis, not a ceiling",
    )
    return f"* {calls}.\n* {procs}."


def scaling_table():
    """`benches/scaling.rs` prints, per workload (a line of its own), `CONTENDER THREADS X.X M
    NS` lines: admit's, governor's, and a third (the DashMap counter, or the flood paths'
    floor)."""
    text = read("scaling.log")
    if not text:
        return "(not run)"
    cells, order, workload = {}, [], None
    for line in text.splitlines():
        m = re.match(r"^(\S.*?)\s+(\d+)\s+([\d.]+) M\s+([\d.]+)$", line)
        if m and workload:
            name = m.group(1)
            column = 0 if name.startswith("admit") else 1 if name.startswith("governor") else 2
            key = (workload, int(m.group(2)))
            if key not in cells:
                cells[key] = [None, None, None, None]
                order.append(key)
            cells[key][column] = float(m.group(3))
            if column == 2:
                cells[key][3] = name
            continue
        if line and not line.startswith(("contender", "scaling:", " ", "(")):
            # A workload's title: the three keyed ones, then the flood paths, whose title
            # runs on in parentheses.
            workload = line.split(" (")[0]
    out = [
        "| workload | threads | admit (M decisions/s) | governor | third: DashMap counter, or floor "
        "| admit / governor |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for workload, threads in order:
        a, g, d, third = cells[(workload, threads)]
        r = ratio(a, g)
        if a is not None and g is not None and g > 1.05 * a:
            TIME_LOSSES.append(f"threads, {workload}, {threads} thread(s): {a:.1f} M "
                               f"decisions/s against governor's {g:.1f} M")
        if third and third.startswith("DashMap") and a is not None and d is not None \
                and d > 1.05 * a:
            TIME_LOSSES.append(f"threads, {workload}, {threads} thread(s): {a:.1f} M "
                               f"decisions/s against the DashMap counter's {d:.1f} M")
        label = "" if third is None or third.startswith("DashMap") else f" ({third})"
        out.append(f"| {workload} | {threads} | {num(a)} | {num(g)} | {num(d)}{label} | "
                   f"{'–' if r is None else f'{r:.2f}×'} |")
    return "\n".join(out)


# ---- where admit loses -----------------------------------------------------------------------

WHY = {
    "bucket refusal": "within a few percent: a refusal also reads the shadow-mode flag and "
    "works out when the next token is due (the wait it returns)",
    "limiter refusal, 1 key": "the refusal computes its wait and reads the shadow flag",
    "limiter hit, 1 key": "within a few percent: half of the keyed decision is SipHash-1-3 of "
    "the key, which a caller can pay once per connection (`HashedActor`)",
    "limiter hit, 200 keys": "within a few percent, as above",
    "limiter saturated miss, 200 keys": "a key with no place in the full table reads its "
    "window of 16 slots, reads it once more after the insert finds the cap full (so a copy of "
    "the key that a racing insert made visible meanwhile is charged, not the overflow), "
    "consults the reclaim hint, then charges the class's overflow bucket; governor never "
    "misses because its map grows with every key (see the memory line)",
    "limiter first charge": "claiming a place for a new key (a reserve, a claim, a publish, "
    "the resolution's RMW, a promotion, the first charge) is seven atomic writes",
    "in-flight acquire+release": "tokio's `Semaphore` is one unkeyed count, a floor rather than "
    "a contender: admit's keyed table hashes the actor first",
    "volume charge, 200 keys": "the default quota writes four rows (two CASes each) so that one "
    "heavy actor cannot exhaust the budget of the innocent actors hashed beside it",
    "tower layer overhead, 1 hot key": "the layer's own plumbing costs more than "
    "tower_governor's: the decision (a plan of keys and limits, a typed refusal for the "
    "response, the logs and the fields), the request re-typed to meter its body, and the "
    "response body wrapped to hold the in-flight place to its last byte; tower_governor's "
    "layer does none of these, and neither does `RateLayer` (the rate-limit rows), the layer "
    "for rate limits alone",
    "tower layer overhead, 1 route rule": "the same plumbing, and the rule tried and the weight "
    "set",
    "tower layer overhead, 1 forwarded hop": "the same plumbing; the extraction itself, walking "
    "the chain from the right across every field line, costs less than `SmartIpKeyExtractor`'s "
    "(the next row)",
    "rate-limit layer overhead, 1 hot key": "the gate's plan around the one limiter charge "
    "(its empty in-flight and volume slots checked, the pass it returns, the typed refusal "
    "kept ready), where tower_governor calls `check_key` on its one limiter",
    "rate-limit layer overhead, 1 forwarded hop": "the same plan around the charge; the "
    "extraction, walking the chain from the right, costs less than `SmartIpKeyExtractor`'s",
    "tower layer overhead, IETF fields on": "building the fields' text, an item per defence "
    "(every limit by name, the volume's two, the in-flight places), then allocating the two "
    "header values; tower_governor writes three numbers of one limit",
    "limiter hit, 10,000 keys, default cap": "within a few percent: as the 200-key hit, and "
    "some of the 10,000 keys sit past the first slot of either block of their window, which a "
    "lookup reaches by scanning on",
    "gate request, claim + source, two limits": "within a few percent: per limit, the grant held "
    "for the rollback and the plan's cost word cost more than the stack's calls, though the "
    "gate hashes two keys where the stack hashes four times",
    "in-flight acquire+release, adaptive": "not a loss but a price, anchored to the plain row: "
    "two clock reads, the CAS on the word of L and the total, the sample and the age bucket",
}


def losses():
    out = []
    for name, row in ICOUNT.items():
        for label, n in row["anchors"]:
            if n and row["admit"] / n > 1.0:
                why = WHY.get(name, "")
                out.append(
                    f"* **{name}**: {row['admit']:,} instructions against {label}'s {n:,} "
                    f"({row['admit'] / n:.2f}×)" + (f": {why}." if why else ".")
                )
    return "\n".join(out) if out else "* No instruction row loses in this run."


def icount_table():
    out = [
        "| decision | admit | anchor | anchor's instructions | admit / anchor |",
        "|---|---:|---|---:|---:|",
    ]
    for name, row in ICOUNT.items():
        spread = f" (runs {row['spread']})" if row["spread"] else ""
        for i, (label, n) in enumerate(row["anchors"]):
            left = f"{name} | {row['admit']:,}{spread}" if i == 0 else " | "
            out.append(f"| {left} | {label} | {n:,} | {fmt_ratio(ratio(row['admit'], n))} |")
    if "fleet leased decision, 1 key" not in ICOUNT:
        out.append("| fleet leased decision, 1 key | – | (no `redis-server`: not measured) | – | – |")
    return "\n".join(out)


# ---- the plot --------------------------------------------------------------------------------

PLOT = [
    # (label, instruction row, (admit ns id, anchor ns id) or None)
    ("bucket hit", "bucket hit",
     ("bucket/try_acquire_at: admit", "bucket/governor check: admit")),
    ("bucket refusal", "bucket refusal",
     ("bucket/try_acquire_at: deny", "bucket/governor check: deny")),
    ("limiter hit, 1 key", "limiter hit, 1 key",
     (LIM + "admit charge_at (now handed)", LIM + GOV_OWN)),
    ("limiter hit, 200 keys", "limiter hit, 200 keys",
     (LIM200 + "admit charge_at (now handed)", LIM200 + GOV_OWN)),
    ("limiter hit, hashed once", "limiter hit, hashed once, 200 keys",
     (LIM200 + "admit try_acquire_hashed_at (hashed once, now handed)", LIM200 + GOV_OWN)),
    ("limiter refusal", "limiter refusal, 1 key", None),
    ("limiter saturated miss", "limiter saturated miss, 200 keys",
     ("limiter/saturated miss, 200 absent keys cycled/admit charge_at (now handed)",
      LIM200 + GOV_OWN)),
    ("limiter first charge", "limiter first charge", None),
    ("volume charge", "volume charge, 200 keys",
     ("quota/admit check_at, rows = 4 (default)", "quota/governor keyed (DashMap)")),
    ("Gate request (vs 3-crate stack)", "gate request, hashed per request",
     ("request/1 thread/" + GATE, "request/1 thread/" + OBVIOUS)),
    ("Gate request, hashed once", "gate request, hashed once",
     ("request/1 thread/" + GATE_ONCE, "request/1 thread/" + OBVIOUS)),
    ("tower layer overhead", "tower layer overhead, 1 hot key", "tower"),
]


def plot_data():
    data = []
    for label, row, pair in PLOT:
        r = ICOUNT.get(row)
        ri = r["admit"] / r["anchors"][0][1] if r and r["anchors"] else None
        if pair == "tower":
            rn = ratio(tower_overhead("1 hot key", "admit AdmitLayer"),
                       tower_overhead("1 hot key", "tower_governor GovernorLayer"))
        elif pair:
            rn = ratio(ns(pair[0]), ns(pair[1]))
        else:
            rn = None
        if ri is not None or rn is not None:
            data.append((label, ri, rn))
    return data


def svg(data):
    left, right, top, bar, gap, group_gap = 230, 40, 80, 11, 2, 12
    width = 760
    plot_w = width - left - right
    top_value = max([1.5] + [v for _, a, b in data for v in (a, b) if v is not None])
    top_value = min(top_value * 1.08, 4.0)
    x = lambda v: left + plot_w * min(v, top_value) / top_value
    group_h = 2 * bar + gap + group_gap
    height = top + group_h * len(data) + 56
    o = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">'
        "admit ÷ governor, per decision (below 1.0: admit is cheaper)</text>",
        f'<rect x="{left}" y="34" width="12" height="10" fill="#1f5fa8"/>'
        f'<text x="{left + 16}" y="43">instructions (callgrind)</text>'
        f'<rect x="{left + 180}" y="34" width="12" height="10" fill="#9cc3ea"/>'
        f'<text x="{left + 196}" y="43">time (criterion median, noisy)</text>',
    ]
    # Grid lines every 0.5.
    step, v = 0.5, 0.0
    while v <= top_value + 1e-9:
        gx = x(v)
        o.append(f'<line x1="{gx:.1f}" y1="{top - 6}" x2="{gx:.1f}" '
                 f'y2="{height - 44}" stroke="#e3e3e3"/>')
        o.append(f'<text x="{gx:.1f}" y="{height - 30}" text-anchor="middle" '
                 f'fill="#555">{v:.1f}×</text>')
        v += step
    one = x(1.0)
    o.append(f'<line x1="{one:.1f}" y1="{top - 10}" x2="{one:.1f}" y2="{height - 44}" '
             'stroke="#c0392b" stroke-width="2" stroke-dasharray="5,3"/>')
    o.append(f'<text x="{one:.1f}" y="{top - 13}" text-anchor="middle" fill="#c0392b" '
             'font-size="11">1.0 = same cost</text>')
    for i, (label, ri, rn) in enumerate(data):
        y = top + i * group_h
        o.append(f'<text x="{left - 8}" y="{y + bar + 4}" text-anchor="end">{escape(label)}</text>')
        for k, (value, colour) in enumerate(((ri, "#1f5fa8"), (rn, "#9cc3ea"))):
            by = y + k * (bar + gap)
            if value is None:
                o.append(f'<text x="{left + 4}" y="{by + bar - 2}" font-size="10" '
                         f'fill="#888">no criterion row</text>')
                continue
            o.append(f'<rect x="{left}" y="{by}" width="{x(value) - left:.1f}" '
                     f'height="{bar}" fill="{colour}"/>')
            text = f"{value:.2f}" + ("+" if value > top_value else "")
            o.append(f'<text x="{x(value) + 4:.1f}" y="{by + bar - 1}" font-size="10" '
                     f'stroke="#ffffff" stroke-width="3" paint-order="stroke">{text}</text>')
    o.append(f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle" fill="#555" '
             'font-size="11">anchor: governor check / check_key; the Gate rows: governor + DashMap '
             '+ DashMap; the layer: tower_governor</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


# ---- the page --------------------------------------------------------------------------------


def main():
    gate, (paired_g, paired_a, paired_c) = gate_rows()
    paired_line = (
        f"In paired turns on 2 threads, a request through `Gate` took {paired_g:.2f}× the "
        f"stack's time, and the three calls by hand {paired_a:.2f}× hashed per request and "
        f"{paired_c:.2f}× hashed once (medians of the per-round ratios over 100 rounds)."
        if None not in (paired_g, paired_a, paired_c)
        else "The paired two-thread run (`request_paired`) was not part of this run."
    )
    values = {
        "machine": read("machine.txt").rstrip(),
        "commit": META.get("commit", "?"),
        "elapsed": META.get("elapsed", "?"),
        "mode": META.get("mode", "full"),
        "criterion_args": META.get("criterion_args", ""),
        "icount_runs": META.get("icount_runs", "5"),
        "features": META.get("features", "tower,redis"),
        "icount_table": icount_table(),
        "bucket_table": table(bucket_rows(), "token bucket"),
        "limiter_table": table(limiter_rows(), "keyed limiter"),
        "limiter_memory": limiter_memory(),
        "in_flight_table": table(in_flight_rows(), "in-flight quotas"),
        "in_flight_memory": in_flight_memory(),
        "volume_table": table(volume_rows(), "volume quota"),
        "volume_memory": volume_memory(),
        "gate_table": table(gate, "Gate"),
        "gate_paired": paired_line,
        "tower_table": table(tower_rows(), "tower layer"),
        "fleet_table": table(fleet_rows(), "fleet"),
        "fleet_lines": fleet_lines(),
        "scaling_table": scaling_table(),
    }
    values["losses"] = losses()
    values["time_losses"] = (
        "\n".join(f"* {t}." for t in TIME_LOSSES) or "* No time row loses by more than 5 %."
    )
    for name in ("instructions", "bucket", "limiter", "fairness", "quota", "request", "tower",
                 "fleet", "request_paired", "scaling"):
        values[f"cmd_{name}"] = COMMANDS.get(name, f"(not run: `cargo bench --bench {name}`)")
    template = open(os.path.join(HERE, "template.md"), encoding="utf-8").read()

    def fill(m):
        key = m.group(1)
        if key not in values:
            raise SystemExit(f"report.py: template names an unknown value {{{{{key}}}}}")
        return values[key]

    page = re.sub(r"\{\{(\w+)\}\}", fill, template)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "benchmarks.md"), "w", encoding="utf-8") as f:
        f.write(page)
    with open(os.path.join(OUT, "benchmarks.svg"), "w", encoding="utf-8") as f:
        f.write(svg(plot_data()))
    missing = [k for k, v in NS.items() if v is None]
    print(f"report.py: wrote {OUT}/benchmarks.md ({page.count(chr(10))} lines) and "
          f"{OUT}/benchmarks.svg; {len(ICOUNT)} instruction rows, {len(NS)} criterion results"
          + (f", missing {missing}" if missing else ""))


main()
