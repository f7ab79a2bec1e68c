//! The executor of `fetch_original_data`: looks each requested ref up in the tenant's store and
//! renders the slice the model asked for; every id gets its own answer or its own error.

use serde_json::Value;
use skald_core::fetch::{FetchArgs, render_payload};
use skald_core::ids::Tenant;
use skald_store::{RefStore, StoreError};

/// The text to return to the model as the tool's result, and whether any id failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchOutput {
    /// The tool result for the model: each found ref's requested slice, and one `=== …` line per id
    /// that failed.
    pub text: String,
    /// Ids that could not be parsed or were not in the tenant's store (1 when the arguments
    /// themselves were invalid).
    pub failed_ids: usize,
    /// Ids whose original was found and rendered.
    pub found_ids: usize,
}

impl FetchOutput {
    /// True when no id could be fetched (the tool result should be flagged as an error).
    pub fn is_error(&self) -> bool {
        self.found_ids == 0
    }
}

/// Runs one `fetch_original_data` call with the model's JSON arguments.
pub fn execute_fetch<S: RefStore + ?Sized>(
    store: &S,
    tenant: &Tenant,
    arguments: &Value,
) -> FetchOutput {
    let args = match FetchArgs::from_json(arguments) {
        Ok(args) => args,
        Err(error) => {
            return FetchOutput {
                text: format!("fetch_original_data: {error}"),
                failed_ids: 1,
                found_ids: 0,
            };
        }
    };
    let mut text = String::new();
    let mut failed_ids = 0;
    let mut found_ids = 0;
    for (raw, parsed) in args.parsed_ids() {
        let id = match parsed {
            Ok(id) => id,
            Err(error) => {
                failed_ids += 1;
                text.push_str(&format!("=== {raw}: {error}\n"));
                continue;
            }
        };
        match store.get(tenant, id.as_str()) {
            Ok(payload) => {
                found_ids += 1;
                text.push_str(&render_payload(&id, &payload, &args));
            }
            Err(error) => {
                failed_ids += 1;
                text.push_str(&format!("=== REF_ID {id}: {}\n", describe(&error)));
            }
        }
    }
    FetchOutput {
        text,
        failed_ids,
        found_ids,
    }
}

/// The model-facing explanation of a lookup failure.
fn describe(error: &StoreError) -> String {
    error.to_string()
}
