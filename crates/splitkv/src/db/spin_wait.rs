//! A short busy-wait before a writer sleeps on a condition variable.
//!
//! In group commit a waiting writer is usually released within a few microseconds: the leader
//! ahead of it hands over the lead, or the group before its own publishes. Sleeping on a futex
//! for that costs a system call on each side and a context switch, which a profile of two
//! writer threads showed as about a fifth of all samples. A waiter therefore first watches the
//! condition for a bounded time (RocksDB's write threads do the same) and only then sleeps; the
//! waker still signals the condition variable, which costs next to nothing when nobody sleeps.

use std::time::{Duration, Instant};

/// How long a waiter spins before it sleeps: a few puts' worth, so that a handover in a busy
/// group is caught, while a waiter behind a long group (a sync, a memtable switch) gives up its
/// core soon.
const SPIN_LIMIT: Duration = Duration::from_micros(10);

/// Spin-loop hints between looks at the clock (reading it costs about as much as a look at the
/// condition).
const SPINS_PER_CLOCK: u32 = 32;

/// Busy-waits until `ready` returns true (then returns true) or [`SPIN_LIMIT`] has passed
/// (then returns false, and the caller sleeps). `ready` must be cheap and lock-free.
pub(super) fn spin_until(ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..SPINS_PER_CLOCK {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= SPIN_LIMIT {
            return ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn returns_true_once_the_condition_holds_and_false_when_it_never_does() {
        assert!(spin_until(|| true));
        assert!(!spin_until(|| false));
        // Within the first round of looks, before the clock is read, so never timed out.
        let looks = Cell::new(0);
        assert!(spin_until(|| {
            looks.set(looks.get() + 1);
            looks.get() == SPINS_PER_CLOCK / 2
        }));
        assert_eq!(looks.get(), SPINS_PER_CLOCK / 2, "it looks until the condition holds, and no more");
    }
}
