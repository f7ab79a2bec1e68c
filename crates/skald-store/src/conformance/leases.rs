//! Checks of a [`MemoryStore`]'s leases (`memories::lease`): a free lease is claimed, a held one
//! is not (its holder named), its own holder renews it, an expired one is taken over, a
//! finished one answers its result to everyone and is never claimed again, a released one is
//! free, only the holder finishes or releases, tenants do not share leases, bad arguments are
//! refused, and of many threads claiming one lease at once exactly one gets it. A lease of
//! zero milliseconds is expired as soon as it is taken, so expiry is checked without a clock.

use std::sync::Barrier;

use super::{NewMemoryStore, tenant_a, tenant_b};
use crate::memories::lease::MAX_LEASE_TTL_MS;
use crate::memories::{LeaseState, MemoryError};

/// A minute, longer than any check runs.
const MINUTE_MS: u64 = 60_000;

const NAME: &str = "archive:session-1:e1..e9";

/// Claims, holders, renewal, expiry, finishing, release and tenants.
pub fn leases_are_claimed_once_and_finished_for_everyone(new: &NewMemoryStore<'_>) {
    let store = new();
    let (a, b) = (tenant_a(), tenant_b());
    assert_eq!(store.lease(&a, NAME, "one").unwrap(), LeaseState::Free);
    assert_eq!(
        store.claim_lease(&a, NAME, "one", MINUTE_MS).unwrap(),
        LeaseState::Claimed,
        "a free lease is claimed"
    );
    assert_eq!(store.lease(&a, NAME, "one").unwrap(), LeaseState::Claimed);
    match store.claim_lease(&a, NAME, "two", MINUTE_MS).unwrap() {
        LeaseState::Held { holder, .. } => assert_eq!(holder, "one"),
        other @ (LeaseState::Free | LeaseState::Claimed | LeaseState::Finished { .. }) => {
            panic!("a held lease must answer its holder, got {other:?}")
        }
    }
    assert_eq!(
        store.claim_lease(&a, NAME, "one", MINUTE_MS).unwrap(),
        LeaseState::Claimed,
        "the holder renews its own lease"
    );
    assert_eq!(
        store.claim_lease(&b, NAME, "two", MINUTE_MS).unwrap(),
        LeaseState::Claimed,
        "another tenant's lease of the same name is its own"
    );
    assert!(
        !store.finish_lease(&a, NAME, "two", "not mine").unwrap(),
        "only the holder finishes a lease"
    );
    assert!(
        !store.release_lease(&a, NAME, "two").unwrap(),
        "only the holder releases a lease"
    );
    assert!(store.finish_lease(&a, NAME, "one", "{\"done\":1}").unwrap());
    let finished = LeaseState::Finished {
        holder: "one".to_owned(),
        result: "{\"done\":1}".to_owned(),
    };
    assert_eq!(
        store.claim_lease(&a, NAME, "two", MINUTE_MS).unwrap(),
        finished
    );
    assert_eq!(store.claim_lease(&a, NAME, "one", 0).unwrap(), finished);
    assert_eq!(store.lease(&a, NAME, "three").unwrap(), finished);
    assert!(
        !store.release_lease(&a, NAME, "one").unwrap(),
        "a finished lease stays"
    );
    assert!(!store.finish_lease(&a, NAME, "one", "again").unwrap());
    assert_eq!(store.lease(&a, NAME, "three").unwrap(), finished);

    // Released: free for the next claimer.
    assert!(store.release_lease(&b, NAME, "two").unwrap());
    assert_eq!(store.lease(&b, NAME, "one").unwrap(), LeaseState::Free);
    assert_eq!(
        store.claim_lease(&b, NAME, "one", MINUTE_MS).unwrap(),
        LeaseState::Claimed
    );

    // Expired: taken over, and the old holder can no longer finish it.
    let other = "archive:session-2:e1..e2";
    assert_eq!(
        store.claim_lease(&a, other, "one", 0).unwrap(),
        LeaseState::Claimed
    );
    assert_eq!(store.lease(&a, other, "two").unwrap(), LeaseState::Free);
    assert_eq!(
        store.claim_lease(&a, other, "two", MINUTE_MS).unwrap(),
        LeaseState::Claimed,
        "an expired lease is taken over"
    );
    assert!(!store.finish_lease(&a, other, "one", "late").unwrap());
    assert!(store.finish_lease(&a, other, "two", "on time").unwrap());
}

/// Names, holders, lengths and results out of bounds are refused, and nothing is claimed.
pub fn bad_lease_arguments_are_refused(new: &NewMemoryStore<'_>) {
    let store = new();
    let a = tenant_a();
    let invalid = |result: Result<LeaseState, MemoryError>, what: &str| match result {
        Err(MemoryError::InvalidInput { .. }) => {}
        other => panic!("{what} must be refused as invalid input, got {other:?}"),
    };
    invalid(store.claim_lease(&a, "", "one", MINUTE_MS), "an empty name");
    invalid(
        store.claim_lease(&a, NAME, "", MINUTE_MS),
        "an empty holder",
    );
    invalid(
        store.claim_lease(&a, &"n".repeat(10_000), "one", MINUTE_MS),
        "a name of 10,000 bytes",
    );
    invalid(
        store.claim_lease(&a, NAME, "one", MAX_LEASE_TTL_MS + 1),
        "a lease longer than a day",
    );
    assert_eq!(store.lease(&a, NAME, "one").unwrap(), LeaseState::Free);
    assert_eq!(
        store.claim_lease(&a, NAME, "one", MINUTE_MS).unwrap(),
        LeaseState::Claimed
    );
    assert!(matches!(
        store.finish_lease(&a, NAME, "one", &"r".repeat(2 << 20)),
        Err(MemoryError::InvalidInput { .. })
    ));
    assert_eq!(store.lease(&a, NAME, "one").unwrap(), LeaseState::Claimed);
}

/// Eight threads claim one lease at once; exactly one holds it and the others name it.
pub fn one_of_many_concurrent_claims_wins(new: &NewMemoryStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let a = tenant_a();
    let threads = 8;
    let barrier = Barrier::new(threads);
    let answers: Vec<(String, LeaseState)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|index| {
                let (barrier, a) = (&barrier, &a);
                scope.spawn(move || {
                    let holder = format!("holder-{index}");
                    barrier.wait();
                    let state = store.claim_lease(a, NAME, &holder, MINUTE_MS).unwrap();
                    (holder, state)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<&String> = answers
        .iter()
        .filter(|(_, state)| *state == LeaseState::Claimed)
        .map(|(holder, _)| holder)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one claim wins: {answers:?}");
    for (holder, state) in &answers {
        if holder == winners[0] {
            continue;
        }
        match state {
            LeaseState::Held { holder, .. } => assert_eq!(holder, winners[0]),
            other @ (LeaseState::Free | LeaseState::Claimed | LeaseState::Finished { .. }) => {
                panic!("a losing claim must name the winner, got {other:?}")
            }
        }
    }
}
