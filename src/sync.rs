//! Locking the process's small shared maps and estimates.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, also when a panic poisoned it: every mutex here guards a cache or an
/// estimate that stays usable after an interrupted update (at worst a little stale).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
