//! Checks of a [`KeyStore`](crate::KeyStore): a secret shown once and authenticating its key, the tenant kept,
//! revocation refused with `Revoked` and final, unknown secrets `Unknown`, `any_active`, bad
//! input refused, lookups beside creates and revocations on other threads, and durability across
//! a reopen. Each check panics with the violated property.

use super::{KeyCheck, NewKeyStore, TENANT_A, TENANT_B, tenant_a, tenant_b};
use crate::keys::{KEY_PREFIX, KeyError};

/// Every check but [`survives_reopen`], by name.
pub const CHECKS: &[(&str, KeyCheck)] = &[
    (
        "created_secrets_authenticate_their_key",
        created_secrets_authenticate_their_key,
    ),
    ("revocation_is_final", revocation_is_final),
    ("unknown_secrets_are_unknown", unknown_secrets_are_unknown),
    ("any_active_means_a_live_key", any_active_means_a_live_key),
    ("invalid_input_is_refused", invalid_input_is_refused),
    ("lookups_run_beside_writes", lookups_run_beside_writes),
];

/// Runs every check of [`CHECKS`], each on a fresh store from `new`.
pub fn run_all(new: &NewKeyStore<'_>) {
    for (_, check) in CHECKS {
        check(new);
    }
}

/// `create` returns a `sk-skald-` secret (different every time) and the key without it; the
/// secret authenticates that key, with its tenant; `list` shows the keys, oldest first, and
/// never a secret.
pub fn created_secrets_authenticate_their_key(new: &NewKeyStore<'_>) {
    let store = new();
    let store = store.as_ref();
    assert!(
        store.list().unwrap().is_empty(),
        "a fresh store has no keys"
    );
    let a = store.create(&tenant_a(), "agent a").unwrap();
    let b = store.create(&tenant_b(), "agent b").unwrap();
    let a2 = store.create(&tenant_a(), "agent a, second key").unwrap();
    for created in [&a, &b, &a2] {
        assert!(
            created.secret.starts_with(KEY_PREFIX),
            "a secret starts with {KEY_PREFIX}"
        );
        assert!(
            created.secret.starts_with(&created.key.prefix),
            "the key's prefix is the start of its secret"
        );
        assert!(
            created.key.prefix.len() < created.secret.len(),
            "the prefix is not the whole secret"
        );
        assert_eq!(created.key.revoked_at_ms, None, "a new key is live");
    }
    assert_ne!(a.secret, a2.secret, "every key has its own secret");
    assert_ne!(a.key.id, a2.key.id, "every key has its own id");
    assert_eq!(a.key.tenant, TENANT_A);
    assert_eq!(a.key.name, "agent a");

    for (created, tenant) in [(&a, TENANT_A), (&b, TENANT_B), (&a2, TENANT_A)] {
        let key = store.authenticate(&created.secret).unwrap();
        assert_eq!(key, created.key, "the secret authenticates its own key");
        assert_eq!(key.tenant, tenant, "the key keeps its tenant");
    }
    let listed = store.list().unwrap();
    assert_eq!(
        listed,
        [a.key.clone(), b.key.clone(), a2.key.clone()],
        "list shows every key, oldest first"
    );
    let shown = format!("{listed:?}");
    for created in [&a, &b, &a2] {
        assert!(
            !shown.contains(&created.secret),
            "a listing never holds a secret"
        );
    }
}

/// A revoked key is refused with `Revoked` (naming it), revoking it again is `AlreadyRevoked`,
/// an unknown id is `NoSuchId`, the listing keeps it revoked, and other keys keep working.
pub fn revocation_is_final(new: &NewKeyStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let doomed = store.create(&tenant_a(), "laptop").unwrap();
    let kept = store.create(&tenant_a(), "ci").unwrap();
    let revoked = store.revoke(&doomed.key.id).unwrap();
    assert_eq!(
        revoked.id, doomed.key.id,
        "revoke returns the key it revoked"
    );
    assert!(revoked.revoked_at_ms.is_some(), "and marks it revoked");
    for attempt in 0..2 {
        let refused = store.authenticate(&doomed.secret);
        match refused {
            Err(KeyError::Revoked { ref id }) => {
                assert_eq!(*id, doomed.key.id, "Revoked names the key");
            }
            ref other => panic!(
                "a revoked key must be refused with Revoked (attempt {attempt}), got {other:?}"
            ),
        }
    }
    let again = store.revoke(&doomed.key.id);
    assert!(
        matches!(again, Err(KeyError::AlreadyRevoked(_))),
        "revoking twice is AlreadyRevoked, got {again:?}"
    );
    let unknown = store.revoke("key_0000000000000000");
    assert!(
        matches!(unknown, Err(KeyError::NoSuchId(_))),
        "revoking an unknown id is NoSuchId, got {unknown:?}"
    );
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 2, "a revoked key stays listed");
    assert_eq!(
        listed[0], revoked,
        "listed as revoked, with its revocation time"
    );
    // A new key for the same tenant and name does not bring the old secret back.
    store.create(&tenant_a(), "laptop").unwrap();
    assert!(matches!(
        store.authenticate(&doomed.secret),
        Err(KeyError::Revoked { .. })
    ));
    assert_eq!(store.authenticate(&kept.secret).unwrap(), kept.key);
}

/// Text no key has is `Unknown`: other providers' keys, an empty string, a skald-looking secret
/// never issued, a key's id or prefix instead of its secret, a secret with one character changed.
pub fn unknown_secrets_are_unknown(new: &NewKeyStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let created = store.create(&tenant_a(), "real").unwrap();
    let mut altered = created.secret.clone();
    let last = if altered.ends_with('0') { "1" } else { "0" };
    altered.pop();
    altered.push_str(last);
    let never = format!("{KEY_PREFIX}{}", "0".repeat(48));
    let uppercase = created.secret.to_uppercase();
    for text in [
        "",
        "sk-proj-provider-key",
        "Bearer x",
        never.as_str(),
        created.key.id.as_str(),
        created.key.prefix.as_str(),
        altered.as_str(),
        uppercase.as_str(),
    ] {
        let refused = store.authenticate(text);
        assert!(
            matches!(refused, Err(KeyError::Unknown)),
            "authenticate({text:?}) is Unknown, got {refused:?}"
        );
    }
    assert_eq!(store.authenticate(&created.secret).unwrap(), created.key);
}

/// `any_active` is false with no key, true once a key is created, still true while one live key
/// remains, and false once every key is revoked.
pub fn any_active_means_a_live_key(new: &NewKeyStore<'_>) {
    let store = new();
    let store = store.as_ref();
    assert!(!store.any_active().unwrap(), "no key: none active");
    let first = store.create(&tenant_a(), "one").unwrap();
    assert!(store.any_active().unwrap(), "a created key is active");
    let second = store.create(&tenant_b(), "two").unwrap();
    store.revoke(&first.key.id).unwrap();
    assert!(
        store.any_active().unwrap(),
        "one live key left (of another tenant): still active"
    );
    store.revoke(&second.key.id).unwrap();
    assert!(
        !store.any_active().unwrap(),
        "every key revoked: none active"
    );
}

/// Invalid names (empty, blank, over 200 characters, control characters) are refused, and no
/// key is stored. (The tenant is a [`Tenant`], well formed by its type.)
pub fn invalid_input_is_refused(new: &NewKeyStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let long = "n".repeat(201);
    for name in ["", "   ", "a\nb", "tab\tname", long.as_str()] {
        let refused = store.create(&tenant_a(), name);
        assert!(
            matches!(refused, Err(KeyError::InvalidName(_))),
            "create with name {name:?} is InvalidName, got {refused:?}"
        );
    }
    assert!(
        store.list().unwrap().is_empty(),
        "refused creates store nothing"
    );
    assert!(!store.any_active().unwrap());
    store.create(&tenant_a(), &"n".repeat(200)).unwrap();
}

/// Authentications and listings on several threads while another thread creates and revokes
/// keys: each lookup sees every create and revoke that returned before it began (a revoked key
/// is refused at once, as the server relies on).
pub fn lookups_run_beside_writes(new: &NewKeyStore<'_>) {
    let store = new();
    let store = store.as_ref();
    let created = std::sync::Mutex::new(Vec::new());
    super::reads_beside_writes(
        16,
        3,
        &|step| {
            let key = store.create(&tenant_a(), &format!("agent {step}")).unwrap();
            // Every other key is revoked at once: its revocation returned before `written`
            // counts the step.
            if step % 2 == 1 {
                store.revoke(&key.key.id).unwrap();
            }
            created.lock().unwrap().push(key);
        },
        &|written| {
            let created: Vec<_> = created.lock().unwrap()[..written].to_vec();
            for (step, key) in created.iter().enumerate() {
                let found = store.authenticate(&key.secret);
                if step % 2 == 1 {
                    assert!(
                        matches!(found, Err(KeyError::Revoked { .. })),
                        "key {step} was revoked before this lookup began, got {found:?}"
                    );
                } else {
                    assert!(
                        matches!(&found, Ok(found) if found.id == key.key.id),
                        "key {step} was created before this lookup began, got {found:?}"
                    );
                }
            }
            let listed = store.list().unwrap().len();
            assert!(
                listed >= written,
                "a listing after {written} creates returned shows them all, not {listed}"
            );
            assert!(store.any_active().unwrap());
        },
    );
}

/// Keys created and revoked through one handle authenticate (or are refused) the same way
/// through a reopened handle. `open` returns a new handle on the same persistent storage on
/// every call.
pub fn survives_reopen(open: &NewKeyStore<'_>) {
    let (live, revoked, listed) = {
        let store = open();
        let live = store.create(&tenant_a(), "kept").unwrap();
        let revoked = store.create(&tenant_b(), "revoked").unwrap();
        store.revoke(&revoked.key.id).unwrap();
        (live, revoked, store.list().unwrap())
    };
    let store = open();
    assert_eq!(
        store.list().unwrap(),
        listed,
        "every key survives, as it was"
    );
    assert_eq!(store.authenticate(&live.secret).unwrap(), live.key);
    assert!(
        matches!(
            store.authenticate(&revoked.secret),
            Err(KeyError::Revoked { .. })
        ),
        "a revocation survives a reopen"
    );
    assert!(store.any_active().unwrap());
}
