//! Generated load (`recon demo --ops N`) through the facade: operations
//! whose receipts were lost, each with the built-in ledger's effects for it
//! and, for some, an observation of them, written in large transactions on
//! both stores in parallel.
//!
//! Per chunk: the ledger's transaction takes the write lock and says where
//! its rows start, so the outbox knows the effect ids its observations
//! name; both write; the outbox commits first, and the ledger only after
//! it, so no effect is ever committed for an operation the outbox does not
//! have. Should the ledger fail after the outbox committed, at most one
//! chunk of operations is left without its effects (an honest state for
//! `unknown` operations) and their observations name effects a fresh read
//! will not find: an observation is what someone saw, and a decision never
//! rests on one (it takes its own snapshot).

use super::Workspace;
use crate::domain::{BulkEffect, BulkOperation, NumberedIds, Provenance, Snapshot};
use crate::error::{Result, StoreError};
use crate::receiver::protocol;
use crate::store::BulkLoad;
use std::ops::RangeInclusive;
use std::sync::mpsc::sync_channel;

/// What a generator of load provides: the chunks to write, and for each
/// numbered operation its row, its ledger rows and how many there are.
pub trait GeneratedLoad: Sync {
    /// The operations to write, one transaction per chunk.
    fn chunks(&self) -> Vec<RangeInclusive<u64>>;
    /// Operation `n`, whose first ledger row will have `first_effect_seq`
    /// (its observation names its effects' ids).
    fn operation(&self, n: u64, first_effect_seq: i64) -> BulkOperation;
    /// The ledger rows written around operation `n`, in order.
    fn effects(&self, n: u64) -> Box<dyn Iterator<Item = BulkEffect> + '_>;
    /// How many rows [`GeneratedLoad::effects`] yields for `n`.
    fn effect_count(&self, n: u64) -> u64;
}

impl Workspace {
    /// The greatest number of an op id of the series `ids` the outbox
    /// holds: where generated load continues.
    pub fn last_numbered_op(&mut self, ids: NumberedIds) -> Result<Option<u64>, StoreError> {
        self.bulk()?.last_numbered_op(ids)
    }

    /// Writes operations whose receipts were lost, routed to the adapter
    /// registered as `receiver`, in one transaction of the outbox's bulk
    /// load: what an outage leaves behind a receiver recon does not hold
    /// (whose effects, if any, the caller has made there itself). Refused
    /// `unknown_receiver` for a name not registered, and for recon's own
    /// ledger, whose generated load is [`Workspace::append_generated`]
    /// (it writes the ledger's effects with the operations).
    pub fn append_lost_receipts(
        &mut self,
        receiver: &str,
        ops: &mut dyn Iterator<Item = BulkOperation>,
    ) -> Result<u64> {
        let registration = self.sender.registration(receiver)?.filter(|r| !r.builtin);
        let registration = registration
            .ok_or_else(|| crate::error::Refusal::UnknownReceiver(receiver.to_string()))?;
        self.bulk()?.insert_lost_receipts(&registration.name, ops)
    }

    /// The outbox's bulk load, or `Unsupported` for a store without one.
    fn bulk(&mut self) -> Result<&mut dyn BulkLoad, StoreError> {
        self.sender
            .bulk()
            .ok_or(StoreError::Unsupported("generated load"))
    }

    /// Writes generated load chunk by chunk, the outbox's operations and
    /// the ledger's effects in parallel on their own connections (see the
    /// module's comment for the order of the commits). Returns the
    /// operations and ledger rows written.
    pub fn append_generated(&mut self, load: &dyn GeneratedLoad) -> Result<(u64, u64)> {
        let registration = self
            .sender
            .registration(crate::domain::BUILTIN_NAME)?
            .filter(|r| r.builtin)
            .ok_or_else(|| crate::error::Refusal::NoReceiver {
                kind: crate::domain::ANY_ACTION.to_string(),
                advice: crate::domain::RouteAdvice::Register,
            })?;
        let ledger = self
            .ledger
            .as_mut()
            .ok_or(crate::error::Refusal::BuiltinSingleHost)?;
        let sender = self
            .sender
            .bulk()
            .ok_or(StoreError::Unsupported("generated load"))?;
        let registration = &registration;
        std::thread::scope(|scope| {
            // Rendezvous channels: the ledger says where each chunk starts,
            // the outbox says when it has committed it.
            let (starts, started) = sync_channel::<i64>(0);
            let (committed, sender_done) = sync_channel::<Result<u64>>(0);
            let provenance = |snapshot: &Snapshot| Provenance {
                receiver: registration.name.clone(),
                receiver_describe_sha256: registration.describe_sha256.clone(),
                response_sha256: protocol::sha256_of(&protocol::snapshot_answer(snapshot)),
                receiver_id: Some(registration.id),
                receiver_version: Some(registration.version),
            };
            scope.spawn(move || {
                for chunk in load.chunks() {
                    let Ok(mut seq) = started.recv() else {
                        break;
                    };
                    let mut ops = chunk.map(|n| {
                        let mut op = load.operation(n, seq);
                        seq += i64::try_from(load.effect_count(n)).unwrap_or(0);
                        if let Some(o) = op.observation.as_mut() {
                            o.provenance = provenance(&o.snapshot);
                        }
                        op
                    });
                    let result = sender.insert_lost_receipts(&registration.name, &mut ops);
                    let failed = result.is_err();
                    if committed.send(result).is_err() || failed {
                        break;
                    }
                }
            });
            let mut operations = 0;
            let mut rows = 0;
            for chunk in load.chunks() {
                let mut sender_error = None;
                let effects = chunk.flat_map(|n| load.effects(n));
                let start = |first| starts.send(first).is_ok();
                let appended =
                    ledger.append_effects(effects, start, || match sender_done.recv() {
                        Ok(Ok(n)) => {
                            operations += n;
                            true
                        }
                        Ok(Err(e)) => {
                            sender_error = Some(e);
                            false
                        }
                        Err(_) => false,
                    })?;
                match appended {
                    Some(appended) => rows += appended.count,
                    None => {
                        return Err(sender_error.unwrap_or_else(|| {
                            StoreError::Corrupt("the outbox's bulk writer stopped".into()).into()
                        }))
                    }
                }
            }
            Ok((operations, rows))
        })
    }
}
