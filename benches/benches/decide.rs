//! Cost of `parkway_core::decide` on its three hot paths: retry, park and
//! exhausted.
//!
//! Prints criterion estimates, then a plain `Instant` loop (ns per call) and
//! the heap allocations per call counted by a `#[global_allocator]` wrapper,
//! and a verdict against the targets: ≤ 1 µs per call and 0 heap
//! allocations on the retry path.
//!
//! Run: `cargo bench -p parkway-benches --bench decide`
// A bench may abort on a setup failure, and its output is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    hint::black_box,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant, SystemTime},
};

use criterion::Criterion;
use parkway_core::{
    Backoff, Classified, Decision, FailureClass, Jitter, Reason, RetryPolicy, RetryState, Strategy,
    decide,
};

/// `System`, counting every allocation (and reallocation) it serves.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

// Counting heap allocations needs a `GlobalAlloc`, whose trait is unsafe to
// implement. This impl only forwards to `System` and bumps two counters; the
// crate's lints deny (not forbid) `unsafe_code` so this one place can allow it.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's; forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's; forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's; forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's; forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Calls per path in the plain loop.
const CALLS: u64 = 1_000_000;

/// One `decide` input set, and the decision it must produce.
struct Case {
    name: &'static str,
    state: RetryState,
    failure: Classified,
    expect: fn(&Decision) -> bool,
}

/// A realistic policy: exponential backoff 1 s ×2 capped at 5 min with full
/// jitter, 5 attempts, age and total-delay budgets, a few park and discard
/// reasons (looked up by binary search), park when spent.
fn policy() -> RetryPolicy {
    let backoff = Backoff::new(
        Strategy::Exponential {
            initial: Duration::from_secs(1),
            multiplier: 2.0,
        },
        Jitter::Full,
        Some(Duration::from_secs(300)),
    )
    .expect("valid backoff");
    RetryPolicy::builder()
        .backoff(backoff)
        .max_attempts(5)
        .max_age(Duration::from_secs(2 * 3600))
        .max_total_delay(Duration::from_secs(3600))
        .park_on([
            "DESERIALIZATION_FAILED",
            "SCHEMA_INVALID",
            "VALIDATION_FAILED",
            "UNKNOWN_CUSTOMER",
        ])
        .discard_on(["OBSOLETE_EVENT"])
        .build()
        .expect("valid policy")
}

/// The fewest earlier failed attempts at which a transient failure spends
/// the attempt budget (found by asking `decide`, so this bench follows the
/// policy's counting rule whatever it is).
fn exhausting_attempts(policy: &RetryPolicy, now: SystemTime) -> u32 {
    let failure = Classified::new(FailureClass::Transient, "DOWNSTREAM_TIMEOUT");
    (0..=policy.max_attempts())
        .find(|&attempts| {
            let state = RetryState {
                attempts,
                ..RetryState::default()
            };
            matches!(decide(policy, &state, &failure, now, 0), Decision::Park(_))
        })
        .expect("the attempt budget is spent by max_attempts")
}

fn cases(policy: &RetryPolicy, now: SystemTime) -> [Case; 3] {
    let earlier = now - Duration::from_secs(30);
    // Parsed reasons are `Arc<str>`-backed: the worst case for the clone a
    // Park decision makes (a refcount bump, still no allocation).
    let reason = |s: &str| Reason::parse(s).expect("valid reason");
    [
        Case {
            name: "decide/retry",
            // Third attempt failed with a transient reason: budget left.
            state: RetryState {
                attempts: 2,
                local_attempt: 1,
                first_failure_at: Some(earlier),
                total_delay: Duration::from_secs(3),
                last_delay: Some(Duration::from_secs(2)),
            },
            failure: Classified::new(FailureClass::Transient, reason("DOWNSTREAM_TIMEOUT")),
            expect: |d| matches!(d, Decision::RetryLater(_)),
        },
        Case {
            name: "decide/park",
            // First failure, a permanent reason listed in `park_on`.
            state: RetryState::default(),
            failure: Classified::new(
                FailureClass::PermanentTechnical,
                reason("DESERIALIZATION_FAILED"),
            ),
            expect: |d| matches!(d, Decision::Park(_)),
        },
        Case {
            name: "decide/exhausted",
            // The last attempt the budget allows failed: `on_exhausted` = park.
            state: RetryState {
                attempts: exhausting_attempts(policy, now),
                local_attempt: 1,
                first_failure_at: Some(earlier),
                total_delay: Duration::from_secs(15),
                last_delay: Some(Duration::from_secs(8)),
            },
            failure: Classified::new(FailureClass::Transient, reason("DOWNSTREAM_TIMEOUT")),
            expect: |d| matches!(d, Decision::Park(_)),
        },
    ]
}

/// A cheap, varying jitter roll so every call draws a different delay.
fn roll(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

struct Figures {
    ns_per_call: f64,
    allocations_per_call: f64,
    bytes_per_call: f64,
}

/// Times `CALLS` calls with a plain loop and counts the heap allocations
/// they make (this thread is the only one running while it does).
fn measure(policy: &RetryPolicy, case: &Case, now: SystemTime) -> Figures {
    // Warm up (and settle any lazy one-off allocation outside the count).
    for i in 0..10_000 {
        black_box(decide(
            black_box(policy),
            black_box(&case.state),
            black_box(&case.failure),
            black_box(now),
            black_box(roll(i)),
        ));
    }
    let allocs = ALLOCATIONS.load(Ordering::Relaxed);
    let bytes = ALLOCATED_BYTES.load(Ordering::Relaxed);
    let start = Instant::now();
    for i in 0..CALLS {
        black_box(decide(
            black_box(policy),
            black_box(&case.state),
            black_box(&case.failure),
            black_box(now),
            black_box(roll(i)),
        ));
    }
    let elapsed = start.elapsed();
    let allocs = ALLOCATIONS.load(Ordering::Relaxed) - allocs;
    let bytes = ALLOCATED_BYTES.load(Ordering::Relaxed) - bytes;
    Figures {
        ns_per_call: elapsed.as_nanos() as f64 / CALLS as f64,
        allocations_per_call: allocs as f64 / CALLS as f64,
        bytes_per_call: bytes as f64 / CALLS as f64,
    }
}

fn main() {
    let policy = policy();
    let now = SystemTime::now();
    let cases = cases(&policy, now);
    for case in &cases {
        let d = decide(&policy, &case.state, &case.failure, now, roll(1));
        assert!(
            (case.expect)(&d),
            "{}: unexpected decision {d:?}",
            case.name
        );
    }

    // The counter must see a real allocation, or a 0 below would mean nothing.
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    drop(black_box(Box::new(black_box(7u64))));
    assert!(
        ALLOCATIONS.load(Ordering::Relaxed) > before,
        "the counting allocator did not count a Box"
    );

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
        .configure_from_args();
    for case in &cases {
        criterion.bench_function(case.name, |b| {
            let mut i = 0u64;
            b.iter(|| {
                i = i.wrapping_add(1);
                decide(
                    black_box(&policy),
                    black_box(&case.state),
                    black_box(&case.failure),
                    black_box(now),
                    black_box(roll(i)),
                )
            });
        });
    }
    criterion.final_summary();
    println!(
        "(exhausted path: {} earlier failed attempts, max_attempts {})",
        cases[2].state.attempts,
        policy.max_attempts()
    );

    println!();
    println!("plain loop, {CALLS} calls per path, counting global allocator:");
    let mut retry = None;
    for case in &cases {
        let f = measure(&policy, case, now);
        println!(
            "{}: {:.1} ns/op, {:.3} allocations per call ({:.1} bytes per call) ({CALLS} calls)",
            case.name, f.ns_per_call, f.allocations_per_call, f.bytes_per_call
        );
        if case.name == "decide/retry" {
            retry = Some(f);
        }
    }

    let retry = retry.expect("retry case measured");
    let fast = retry.ns_per_call <= 1_000.0;
    let no_alloc = retry.allocations_per_call == 0.0;
    println!();
    println!(
        "verdict (target: ≤ 1 µs per call and 0 heap allocations on the retry path): {} \
         — retry path {:.1} ns/op ({}), {:.3} allocations per call ({})",
        if fast && no_alloc { "MET" } else { "NOT MET" },
        retry.ns_per_call,
        if fast { "≤ 1 µs" } else { "> 1 µs" },
        retry.allocations_per_call,
        if no_alloc { "none" } else { "allocates" },
    );
}
