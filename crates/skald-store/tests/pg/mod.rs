//! Schemas for the PostgreSQL tests: each store a schema of its own in the database at
//! `SKALD_TEST_DATABASE_URL`, every one dropped when the test's [`Schemas`] goes.
#![allow(dead_code)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use skald_store::Database;

/// The variable naming the test database.
pub const DATABASE_URL_VAR: &str = "SKALD_TEST_DATABASE_URL";

/// The database the PostgreSQL tests use, or `None` (with a note on stderr) when the variable
/// is not set.
pub fn database_url(test: &str) -> Option<String> {
    match std::env::var(DATABASE_URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        Ok(_) | Err(_) => {
            // CI sets the variable; a CI run without it would pass these tests untested.
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: {DATABASE_URL_VAR} is not set in CI"
            );
            eprintln!("{test}: skipped, {DATABASE_URL_VAR} is not set");
            None
        }
    }
}

/// The schemas of one test.
pub struct Schemas {
    url: String,
    prefix: String,
    next: AtomicUsize,
    made: Mutex<Vec<String>>,
}

impl Schemas {
    /// Schemas named after `test` (and the process and time, so parallel runs never meet), or
    /// `None` when no test database is configured.
    pub fn new(test: &str) -> Option<Schemas> {
        let url = database_url(test)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        Some(Schemas {
            url,
            prefix: format!("t_{test}_{}_{nanos}", std::process::id()),
            next: AtomicUsize::new(0),
            made: Mutex::new(Vec::new()),
        })
    }

    /// The database URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A new, empty schema's database.
    pub fn fresh(&self) -> Database {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.open(&format!("{}_{n}", self.prefix))
    }

    /// The name of the one schema the durability checks reopen.
    pub fn name_of_reopened(&self) -> String {
        format!("{}_reopened", self.prefix)
    }

    /// A new connection pool on `schema` (created, and migrated, if new).
    pub fn open(&self, schema: &str) -> Database {
        let database = Database::connect_in_schema(&self.url, schema).unwrap();
        let mut made = self.made.lock().unwrap();
        if !made.iter().any(|name| name == schema) {
            made.push(schema.to_owned());
        }
        database
    }
}

impl Drop for Schemas {
    fn drop(&mut self) {
        for schema in self
            .made
            .lock()
            .map(|made| made.clone())
            .unwrap_or_default()
        {
            let _ = Database::drop_schema(&self.url, &schema);
        }
    }
}
