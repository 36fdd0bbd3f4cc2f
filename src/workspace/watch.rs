//! Who watches a long run (`observe`, `resolve`): told how many
//! operations it takes and how many are done, and asked before each
//! request to a receiver whether to stop. A stop is honoured between
//! requests: what was done by then stays recorded, and nothing more is
//! asked of any receiver.

/// A long run's watcher. The defaults never stop and ignore progress.
pub trait Watch {
    /// How many operations are selected, before any is asked about:
    /// `None` when the run cannot tell in advance.
    fn selected(&mut self, _total: Option<usize>) {}

    /// Whether to stop now.
    fn stop(&self) -> bool {
        false
    }

    /// `done` operations have been settled (recorded, failed or passed
    /// over) so far.
    fn progress(&mut self, _done: usize) {}
}

/// A watch that never stops and is told nothing: the library's plain
/// `observe` and `resolve`.
pub(crate) struct Unwatched;

impl Watch for Unwatched {}
