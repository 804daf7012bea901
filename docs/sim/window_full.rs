// The window-full simulation of docs/design.md §2: two-choice blocks at saturation under churn.
// Build: rustc -O docs/sim/window_full.rs -o /tmp/window_full
// Run:   /tmp/window_full CAP SIXTEENTHS_OF_A_SLOT_PER_ENTRY BLOCK INSERTS   (e.g. 65536 40 8 100000000)
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cap: usize = args[1].parse().unwrap();
    let num: usize = args[2].parse().unwrap(); // slots per cap * 16 (e.g. 40 = 2.5)
    let block: usize = args[3].parse().unwrap();
    let ops: usize = args[4].parse().unwrap();
    let left: bool = args.get(5).map(|s| s == "left").unwrap_or(false);
    let blocks = ((cap * num + 16 * block - 1) / (16 * block)).max(1);
    let mut occ = vec![0u8; blocks];
    let mut live: Vec<usize> = Vec::with_capacity(cap); // block of each live key
    let mut rng = Rng(args.get(6).map(|s| s.parse().unwrap()).unwrap_or(1));
    let mut hist = vec![0u64; block + 1];
    let mut full = 0u64;
    let pick = |rng: &mut Rng| -> (usize, usize) {
        let h1 = rng.next();
        let h2 = rng.next();
        if left {
            let half = (blocks / 2).max(1);
            let a = ((h1 as u128 * half as u128) >> 64) as usize;
            let b = half + ((h2 as u128 * (blocks - half) as u128) >> 64) as usize;
            (a, b.min(blocks - 1))
        } else {
            let a = ((h1 as u128 * blocks as u128) >> 64) as usize;
            let mut b = ((h2 as u128 * blocks as u128) >> 64) as usize;
            if b == a && blocks > 1 {
                b = (a + 1) % blocks;
            }
            (a, b)
        }
    };
    let mut insert = |occ: &mut Vec<u8>, rng: &mut Rng, live: &mut Vec<usize>, count: bool| {
        let (a, b) = pick(rng);
        let (oa, ob) = (occ[a] as usize, occ[b] as usize);
        if count {
            hist[oa.min(ob)] += 1;
        }
        let t = if ob < oa { b } else { a };
        if occ[t] as usize >= block {
            if count {
                full += 1;
            }
            return false;
        }
        occ[t] += 1;
        live.push(t);
        true
    };
    while live.len() < cap {
        insert(&mut occ, &mut rng, &mut live, false);
    }
    for _ in 0..ops {
        let i = (rng.next() % live.len() as u64) as usize;
        let b = live.swap_remove(i);
        occ[b] -= 1;
        while !insert(&mut occ, &mut rng, &mut live, true) {}
    }
    let total: u64 = hist.iter().sum();
    print!(
        "cap {cap} slots/cap {:.3} block {block} blocks {blocks} B/cap {:.1} left={left}: ",
        (blocks * block) as f64 / cap as f64,
        (blocks * block * 12) as f64 / cap as f64
    );
    let mut tail = 0u64;
    let mut tails = vec![];
    for k in (0..=block).rev() {
        tail += hist[k];
        tails.push((k, tail as f64 / total as f64));
    }
    tails.reverse();
    for (k, p) in tails.iter().skip(3) {
        print!("P(min>={k})={p:.2e} ");
    }
    println!("full={full}");
}
