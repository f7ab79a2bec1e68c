//! The context-window pipeline: stages that each take messages and settings and return messages
//! plus a report of what they changed and why. Pure: originals a stage removes come back as
//! [`crate::refs::NewRef`]s for the caller to store before it shows the output to a model.

pub mod offload;
pub mod policy;
