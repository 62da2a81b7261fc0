//! Counting the server's own tasks, so tests can check that none outlives its
//! session and that shutdown leaves nothing behind.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A counter of live tasks spawned through it. Cloning shares the counter.
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    live: Arc<AtomicUsize>,
}

struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Tasks {
    /// Spawns `fut` on the current runtime, counted until it finishes or is aborted.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.live.fetch_add(1, Ordering::AcqRel);
        let guard = Guard(self.live.clone());
        tokio::spawn(async move {
            let _guard = guard;
            fut.await
        })
    }

    /// Tasks still running.
    pub fn count(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

impl Tasks {
    /// Wraps a future that something else spawns (e.g. a WebSocket upgrade) so it is
    /// counted while it runs.
    pub fn track<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        self.live.fetch_add(1, Ordering::AcqRel);
        let guard = Guard(self.live.clone());
        async move {
            let _guard = guard;
            fut.await
        }
    }
}
