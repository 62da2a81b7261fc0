//! Outpost's one lock helper, and the one tie of a child program to its parent.
//!
//! Every program of the workspace takes its `std::sync` locks through [`lock`], [`read`]
//! and [`write`], so there is one answer to "what if a thread panicked while holding it":
//! the data is taken as it is.
//!
//! Our critical sections move values in and out of maps, queues and slots; none leaves a
//! half-done invariant that a later holder could trip over. A panic is already a bug that
//! the panicking task reports; turning it into a second panic in every later caller (the
//! standard library's default) would take a whole session or the app down with it.
//! `tidy` keeps poison handling out of every other crate.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `m`, taking the data as it is if a holder panicked.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes `l` for reading, as it is if a writer panicked.
pub fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Takes `l` for writing, as it is if a holder panicked.
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// Resolves when standard input reaches its end (or cannot be read); whatever arrives
/// before is ignored. The local demo's room and assistant wait on it beside their other
/// exits, so they end with the program that started them, however it ends. A plain thread
/// reads (a blocking read cannot be cancelled, and the program ends soon after anyway);
/// if that thread cannot start, this resolves at once: better to stop than to outlive the
/// parent.
pub async fn stdin_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("stdin-watch".into())
        .spawn(move || {
            use std::io::Read as _;
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 256];
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = tx.send(());
        });
    if spawned.is_ok() {
        let _ = rx.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_as_it_is() {
        let m = Arc::new(Mutex::new(vec![1]));
        let l = Arc::new(RwLock::new(7));
        let (m2, l2) = (Arc::clone(&m), Arc::clone(&l));
        let joined = std::thread::spawn(move || {
            let _w = l2.write();
            let mut g = lock(&m2);
            g.push(2);
            panic!("a holder panics");
        })
        .join();
        assert!(joined.is_err(), "the thread panicked");
        assert!(
            m.is_poisoned() && l.is_poisoned(),
            "both locks are poisoned"
        );
        assert_eq!(*lock(&m), vec![1, 2], "the data is what the holder left");
        assert_eq!(*read(&l), 7);
        *write(&l) = 8;
        assert_eq!(*read(&l), 8);
    }
}
