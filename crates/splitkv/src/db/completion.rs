//! [`Completion`]: the handle through which a request submitted to the database delivers its
//! result (the "async" half of the half-sync/half-async front end).
//!
//! The worker that serves a request fills it once; the caller waits for it, or polls. A handle
//! whose worker went away without an answer (the database closed) yields [`Error::Closed`].
//! Thread-safety: the handle is `Send`; its two halves share one mutex and condition variable.
//! A request served on the caller's thread (every write and read without request shards)
//! returns a handle that holds its result itself: no shared slot, no allocation.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

struct Slot<T> {
    result: Mutex<Option<Result<T>>>,
    done: Condvar,
}

/// The result of a submitted request, once its worker has served it.
#[must_use = "a submitted request's result (and any error) arrives through its handle"]
pub struct Completion<T> {
    state: State<T>,
}

enum State<T> {
    /// Served on the caller's thread.
    Ready(Result<T>),
    /// Served by a worker, which fills the slot.
    Pending(Arc<Slot<T>>),
}

/// The worker's half of a [`Completion`]: fills it once, or [`Error::Closed`] if dropped unfilled.
pub(super) struct Completer<T> {
    slot: Option<Arc<Slot<T>>>,
}

impl<T> Completion<T> {
    /// A handle and the half that completes it.
    pub(super) fn pair() -> (Completion<T>, Completer<T>) {
        let slot = Arc::new(Slot { result: Mutex::new(None), done: Condvar::new() });
        (Completion { state: State::Pending(Arc::clone(&slot)) }, Completer { slot: Some(slot) })
    }

    /// A handle that already holds `result` (requests served on the caller's thread).
    pub(super) fn ready(result: Result<T>) -> Completion<T> {
        Completion { state: State::Ready(result) }
    }

    /// True once the result is in.
    pub fn is_done(&self) -> bool {
        match &self.state {
            State::Ready(_) => true,
            State::Pending(slot) => slot.result.lock().is_some(),
        }
    }

    /// Blocks until the request is served and returns its result.
    pub fn wait(self) -> Result<T> {
        let slot = match self.state {
            State::Ready(result) => return result,
            State::Pending(slot) => slot,
        };
        let mut result = slot.result.lock();
        loop {
            if let Some(r) = result.take() {
                return r;
            }
            slot.done.wait(&mut result);
        }
    }
}

impl<T> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion").field("done", &self.is_done()).finish()
    }
}

impl<T> Completer<T> {
    /// Delivers the result and wakes the waiter.
    pub(super) fn complete(mut self, result: Result<T>) {
        if let Some(slot) = self.slot.take() {
            *slot.result.lock() = Some(result);
            slot.done.notify_all();
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            *slot.result.lock() = Some(Err(Error::Closed));
            slot.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_completer_answers_closed() {
        let (handle, completer) = Completion::<u32>::pair();
        drop(completer);
        assert!(matches!(handle.wait(), Err(Error::Closed)));
    }

    #[test]
    fn the_result_crosses_threads() {
        let (handle, completer) = Completion::pair();
        let t = std::thread::spawn(move || completer.complete(Ok(7u32)));
        assert_eq!(handle.wait().ok(), Some(7));
        assert!(t.join().is_ok());
    }
}
