//! Transcript repair. STUB.
