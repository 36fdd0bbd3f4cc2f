//! The replay's side of the seam between a store and `verify`: every
//! per-operation stream a store feeds in is an iterator of rows in key
//! order, and the merge join over them, which groups the rows of each
//! operation, is written here once for every store.
//!
//! The contract a store must keep is the order of the keys, and it is
//! byte order: a stream is ordered by its key column as [`Key`] orders
//! keys (null first, then numbers, then text by its UTF-8 bytes, then
//! blobs by their bytes), and within one key in the order its rows were
//! appended (the table's `seq`, or what stands for it). SQLite's `BINARY`
//! collation is that order; a server that collates text by locale is not
//! (`op-a` and `op_a` would change places) and must order its keys by
//! their bytes (`COLLATE "C"` in PostgreSQL), or one operation's rows are
//! split into groups that each look like damage.

use super::projection::{
    OpTables, Table, ACKNOWLEDGEMENTS, APPROVALS, CALL_FAILURES, CLOSES, CLOSE_REQUESTS,
    DISPATCH_LOG, ESCALATIONS, EVIDENCE, JOURNAL, NOTES, OBSERVATIONS, OPERATIONS,
};
use super::row::{Column, Row};
use super::Projector;
use std::sync::mpsc::{sync_channel, SyncSender};

/// The per-operation streams [`replay_operations`] takes, in this order:
/// the journal's entries that name an operation, then the tables of
/// [`OpTables`].
pub const OP_STREAMS: [Table; 12] = [
    JOURNAL,
    OPERATIONS,
    DISPATCH_LOG,
    EVIDENCE,
    APPROVALS,
    CLOSES,
    OBSERVATIONS,
    NOTES,
    ESCALATIONS,
    ACKNOWLEDGEMENTS,
    CALL_FAILURES,
    CLOSE_REQUESTS,
];

/// The key rows are grouped by, in the order of the contract above. A key
/// that is a number (a store that keeps the key column as text should
/// never hold one) ranks as `Other`, whatever the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key<'a> {
    Null,
    Other,
    Text(&'a str),
    /// The bytes as lowercase hex, which sorts as the bytes do.
    Blob(&'a str),
}

impl<'a> Key<'a> {
    fn of(column: Column<'a>) -> Key<'a> {
        match column {
            Column::Null => Key::Null,
            Column::Integer(_) | Column::Real(_) => Key::Other,
            Column::Text(text) => Key::Text(text),
            Column::Blob(hex) => Key::Blob(hex),
        }
    }

    /// The operation's id as a mismatch names it.
    fn name(self) -> String {
        match self {
            Key::Null => "null".into(),
            Key::Other => "a number".into(),
            Key::Text(text) | Key::Blob(text) => text.to_string(),
        }
    }
}

/// A key held past the row it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OwnedKey {
    Null,
    Other,
    Text(String),
    Blob(String),
}

impl OwnedKey {
    fn of(key: Key<'_>) -> Self {
        match key {
            Key::Null => OwnedKey::Null,
            Key::Other => OwnedKey::Other,
            Key::Text(text) => OwnedKey::Text(text.to_string()),
            Key::Blob(hex) => OwnedKey::Blob(hex.to_string()),
        }
    }

    fn as_key(&self) -> Key<'_> {
        match self {
            OwnedKey::Null => Key::Null,
            OwnedKey::Other => Key::Other,
            OwnedKey::Text(text) => Key::Text(text),
            OwnedKey::Blob(hex) => Key::Blob(hex),
        }
    }
}

/// One stream, read a row ahead.
struct Peeked<I> {
    rows: I,
    key: usize,
    head: Option<Row>,
}

impl<I, E> Peeked<I>
where
    I: Iterator<Item = Result<Row, E>>,
{
    fn new(key: usize, rows: I) -> Result<Self, E> {
        let mut peeked = Peeked {
            rows,
            key,
            head: None,
        };
        peeked.advance()?;
        Ok(peeked)
    }

    fn advance(&mut self) -> Result<(), E> {
        self.head = self.rows.next().transpose()?;
        Ok(())
    }

    fn key(&self) -> Option<Key<'_>> {
        self.head.as_ref().map(|row| Key::of(row.get(self.key)))
    }

    /// Every row whose key is `key` (the rows are ordered by key).
    fn take(&mut self, key: &OwnedKey) -> Result<Vec<Row>, E> {
        let mut group = Vec::new();
        while self.key() == Some(key.as_key()) {
            if let Some(row) = self.head.take() {
                group.push(row);
            }
            self.advance()?;
        }
        Ok(group)
    }
}

/// Merges streams of rows, each `(key column, rows in key order)`, into
/// groups of one key: hands `each` the key as a mismatch names it and
/// every stream's rows of it (in the streams' order), key by key in
/// ascending order, until the streams end or `each` says stop.
pub fn merge_groups<I, E>(
    streams: impl IntoIterator<Item = (usize, I)>,
    mut each: impl FnMut(String, Vec<Vec<Row>>) -> bool,
) -> Result<(), E>
where
    I: Iterator<Item = Result<Row, E>>,
{
    let mut cursors = streams
        .into_iter()
        .map(|(key, rows)| Peeked::new(key, rows))
        .collect::<Result<Vec<_>, E>>()?;
    while let Some(key) = cursors.iter().filter_map(Peeked::key).min() {
        let (name, key) = (key.name(), OwnedKey::of(key));
        let groups = cursors
            .iter_mut()
            .map(|cursor| cursor.take(&key))
            .collect::<Result<Vec<_>, E>>()?;
        if !each(name, groups) {
            break;
        }
    }
    Ok(())
}

/// One operation's rows, as the merge join gathers them.
type Group = (String, Vec<Row>, OpTables);

/// How many operations go to the replay at once.
const BATCH: usize = 128;

/// Reads the per-operation streams (one for each of [`OP_STREAMS`], in
/// that order) and replays them operation by operation. Reading (a
/// store's work) and replaying (parsing, hashing, comparing) cost about
/// the same, so they run on two threads, with at most a few batches of
/// operations' rows in flight between them, whatever the journal's
/// length. A failed read ends the replay with its error.
pub fn replay_operations<I, E>(mut projector: Projector, streams: Vec<I>) -> Result<Projector, E>
where
    I: Iterator<Item = Result<Row, E>>,
{
    let (send, receive) = sync_channel::<Vec<Group>>(4);
    let (read, projector) = std::thread::scope(|scope| {
        let replay = scope.spawn(move || {
            for (op_id, journal, tables) in receive.into_iter().flatten() {
                projector.operation(&op_id, &journal, &tables);
            }
            projector
        });
        let keys = OP_STREAMS.iter().map(|table| table.key);
        let read = read_groups(keys.zip(streams), &send);
        drop(send);
        let projector = replay
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (read, projector)
    });
    read.map(|()| projector)
}

/// Sends the operations' groups on in batches, until the streams end or
/// nobody listens (a replay that has gone has panicked; its join says so).
fn read_groups<I, E>(
    streams: impl IntoIterator<Item = (usize, I)>,
    send: &SyncSender<Vec<Group>>,
) -> Result<(), E>
where
    I: Iterator<Item = Result<Row, E>>,
{
    let mut batch = Vec::with_capacity(BATCH);
    let mut listening = true;
    merge_groups(streams, |name, groups| {
        let mut groups = groups.into_iter();
        let mut next = || groups.next().unwrap_or_default();
        let journal = next();
        let tables = OpTables {
            operation: next(),
            dispatches: next(),
            evidence: next(),
            approvals: next(),
            closes: next(),
            observations: next(),
            notes: next(),
            escalations: next(),
            acknowledgements: next(),
            call_failures: next(),
            close_requests: next(),
        };
        batch.push((name, journal, tables));
        if batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            listening = send.send(full).is_ok();
        }
        listening
    })?;
    if listening {
        let _ = send.send(batch);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    fn keyed(key: Column<'_>) -> Row {
        let mut row = Row::with_capacity(1, 8);
        match key {
            Column::Null => row.push_null(),
            Column::Integer(i) => row.push_integer(i),
            Column::Real(x) => row.push_real(x),
            Column::Text(text) => row.push_text(text),
            Column::Blob(hex) => row.push_blob(&hex_bytes(hex)),
        }
        row
    }

    fn hex_bytes(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
            .collect()
    }

    fn stream(keys: &[Column<'_>]) -> (usize, std::vec::IntoIter<Result<Row, Infallible>>) {
        let rows: Vec<_> = keys.iter().map(|key| Ok(keyed(*key))).collect();
        (0, rows.into_iter())
    }

    /// Every group as its name and how many rows each stream gave it.
    fn grouped(streams: Vec<&[Column<'_>]>) -> Vec<(String, Vec<usize>)> {
        let mut seen = Vec::new();
        let result: Result<(), Infallible> =
            merge_groups(streams.into_iter().map(stream), |name, groups| {
                seen.push((name, groups.iter().map(Vec::len).collect()));
                true
            });
        assert!(result.is_ok());
        seen
    }

    #[test]
    fn any_source_of_rows_in_byte_order_of_keys_groups_each_operation_once() {
        // Byte order: '-' (2d) < '_' (5f) < 'a' (61); a locale's order
        // (`op_a, op-a, opa`, or `op-a` after `op_a`) would split groups.
        let journal = [
            Column::Null,
            Column::Integer(7),
            Column::Text("op-a"),
            Column::Text("op-a"),
            Column::Text("op_a"),
            Column::Text("opa"),
            Column::Blob("00ff"),
        ];
        let operations = [
            Column::Text("op-a"),
            Column::Text("opa"),
            Column::Blob("00ff"),
        ];
        assert_eq!(
            grouped(vec![&journal, &operations, &[]]),
            [
                ("null".to_string(), vec![1, 0, 0]),
                ("a number".to_string(), vec![1, 0, 0]),
                ("op-a".to_string(), vec![2, 1, 0]),
                ("op_a".to_string(), vec![1, 0, 0]),
                ("opa".to_string(), vec![1, 1, 0]),
                ("00ff".to_string(), vec![1, 1, 0]),
            ]
        );
    }

    #[test]
    fn a_failed_read_ends_the_merge_with_its_error() {
        let rows = vec![Ok(keyed(Column::Text("a"))), Err("lost the connection")];
        let mut names = Vec::new();
        let result = merge_groups([(0, rows.into_iter())], |name, _| {
            names.push(name);
            true
        });
        assert_eq!(result, Err("lost the connection"));
        assert!(names.is_empty(), "{names:?}");
    }
}
