//! `admit-sim`: the demonstration. Until the scenarios land this runs a small token-bucket demo.

use admit::{BucketConfig, TokenBucket};

fn main() {
    let Ok(config) = BucketConfig::new(4, 250) else {
        eprintln!("admit-sim: the demo's bucket config is invalid");
        std::process::exit(2);
    };
    let bucket = TokenBucket::new(config);
    println!("bucket: burst 4, one token per 250 ms");
    for step in 0..8u64 {
        let now_ns = step * 100_000_000;
        match bucket.try_take_at(now_ns) {
            Ok(()) => println!("t = {:>4} ms: admitted", now_ns / 1_000_000),
            Err(err) => println!("t = {:>4} ms: refused, {err}", now_ns / 1_000_000),
        }
    }
}
