//! Token accounting. STUB.
