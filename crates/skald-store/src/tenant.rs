//! Tenant names: every stored row belongs to one. The store traits take a
//! [`Tenant`](skald_core::ids::Tenant), checked where the name entered skald; [`validate_tenant`]
//! checks a name given as text that is not kept as one.

use crate::StoreError;

/// The longest tenant name accepted.
pub use skald_core::ids::MAX_TENANT_LEN;

/// Checks a tenant name by [`skald_core::ids::Tenant`]'s rules: 1 to [`MAX_TENANT_LEN`]
/// characters from `[A-Za-z0-9._-]`, starting with a letter or digit (so `.`/`..` and names that
/// look like options are never tenants).
pub fn validate_tenant(tenant: &str) -> Result<(), StoreError> {
    skald_core::ids::check_tenant(tenant).map_err(|refused| StoreError::InvalidTenant {
        shown: refused.shown,
        reason: refused.reason,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for good in [
            "default",
            "acme-corp",
            "team_7",
            "a",
            "user.name",
            &"x".repeat(128),
        ] {
            assert!(validate_tenant(good).is_ok(), "{good} was rejected");
        }
    }

    #[test]
    fn rejects_bad_names_with_a_reason() {
        for bad in [
            "",
            "..",
            ".hidden",
            "-rf",
            "a/b",
            "a b",
            "tenant\0",
            "ténant",
            &"x".repeat(129),
        ] {
            let error = validate_tenant(bad).unwrap_err();
            assert!(
                matches!(error, StoreError::InvalidTenant { .. }),
                "{bad}: {error}"
            );
        }
        let message = validate_tenant("").unwrap_err().to_string();
        assert!(message.contains("must not be empty"), "{message}");
    }

    /// The store traits take a [`Tenant`] and a [`SessionId`] and check neither again: the names
    /// the conformance suite fed to every store to see them refused are refused where they are
    /// parsed, with the words the stores used.
    #[test]
    fn the_parse_edge_refuses_what_the_stores_refused() {
        use skald_core::ids::{SessionId, Tenant};

        for bad in ["", "../a", "a b", "a/b"] {
            assert_eq!(
                Tenant::parse(bad).unwrap_err().to_string(),
                validate_tenant(bad).unwrap_err().to_string(),
                "{bad:?}"
            );
        }
        let long = "s".repeat(129);
        for bad in [
            "",
            "../etc/passwd",
            "a b",
            "-leading-dash",
            "a/b",
            long.as_str(),
        ] {
            assert_eq!(
                SessionId::parse(bad).unwrap_err().to_string(),
                crate::sessions::validate_session_id(bad)
                    .unwrap_err()
                    .to_string(),
                "{bad:?}"
            );
        }
    }
}
