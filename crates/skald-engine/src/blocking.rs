//! Running a store call that can take long without stalling the async runtime.
//!
//! The store traits are synchronous (see `skald_store`'s crate docs). Most calls are short —
//! one indexed SQLite statement — and run inline. The ones that can take long — a batch of refs
//! written and `fsync`ed, a memory search over a large store, a transcript import — go through
//! [`blocking`]: on a multi-threaded tokio runtime (a server) it is `block_in_place`, which
//! hands the worker's other tasks to another thread while this one blocks, so one request's disk
//! wait never holds up the others; elsewhere (a current-thread runtime, a test, no runtime at
//! all) the call simply runs. Unlike `spawn_blocking` it borrows: the store, the tenant and the
//! batch stay references, with no copy of the data made to cross to another thread.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `call`, letting a multi-threaded runtime move its other tasks off this worker while it
/// blocks (see the module docs).
pub fn blocking<R>(call: impl FnOnce() -> R) -> R {
    let multi_threaded = Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
    if multi_threaded {
        tokio::task::block_in_place(call)
    } else {
        call()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_runtime_the_call_just_runs() {
        assert_eq!(blocking(|| 2 + 2), 4);
    }

    #[tokio::test]
    async fn on_a_current_thread_runtime_the_call_runs_inline() {
        let data = [1, 2, 3];
        assert_eq!(blocking(|| data.iter().sum::<i32>()), 6);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_multi_threaded_runtime_other_tasks_keep_running_while_a_call_blocks() {
        let (sender, receiver) = std::sync::mpsc::channel();
        let other = tokio::spawn(async move {
            sender.send(()).ok();
        });
        // The blocking call waits for a task that needs a worker: it gets one because this
        // worker's other tasks were handed off.
        let got = blocking(|| {
            receiver
                .recv_timeout(std::time::Duration::from_secs(5))
                .is_ok()
        });
        assert!(got);
        other.await.ok();
    }
}
