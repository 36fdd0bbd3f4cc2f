//! The facade's side of receivers: registering adapters, routing an
//! operation to its receiver, and reading or writing through it with every
//! rule of `receiver::rules` applied on the way back.
//!
//! The built-in ledger is read in process (a read is one SQLite
//! transaction, and spawning for it would only add cost); its answer is
//! still hashed as the answer the built-in adapter would have written, and
//! judged by the same rules. Every write goes through a child process
//! speaking the protocol, the built-in ledger's included.

use super::Workspace;
use crate::dispatch::adapter::{AdapterProgram, PassEnv, Reply, Session};
use crate::dispatch::{AdapterCall, Applying, DispatchOptions, DispatchReport, PendingDispatch};
use crate::domain::{
    classify, AdapterFailure, CloseRecord, Description, Effect, EffectRequest, FailureKind,
    LostReceiver, NewObservation, Observation, Operation, Provenance, Registration, Snapshot,
};
use crate::error::{Error, Refusal, Result, StoreError};
use crate::receiver::protocol::{self, Answer, Verb};
use crate::receiver::rules::{self, failure};
use crate::receiver::{Builtin, Receiver, BUILTIN_NAME};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Who escalates the operations of a receiver removed as lost on a
/// workspace directory, where nobody is authenticated: the owner, the
/// role that ends registrations (SPEC 10).
pub const LOST_BY_OWNER: &str = "owner";

/// The timeout of a registered receiver when none is given.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// What `recon receivers add` asks for.
#[derive(Debug, Clone)]
pub struct NewReceiver<'a> {
    pub name: &'a str,
    pub actions: &'a [String],
    /// As typed: a path, or a name looked up on `PATH` now (never later).
    pub program: &'a Path,
    pub args: &'a [String],
    pub timeout_ms: Option<u64>,
    /// Variables passed from recon's environment to the adapter, by name.
    pub env: &'a [String],
}

/// What `recon receivers update` (or `check --accept`) changes; `None`
/// keeps the stored value.
#[derive(Debug, Clone, Default)]
pub struct ReceiverChange<'a> {
    pub name: &'a str,
    pub command: Option<(&'a Path, &'a [String])>,
    pub env: Option<&'a [String]>,
    pub timeout_ms: Option<u64>,
    /// `check --accept`: a changed claim (closing, ceiling, mandatory) is
    /// accepted as the person's decision; another instance never is.
    pub accept_claims: bool,
}

/// A registered receiver's stored `describe` answer beside a fresh one.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReceiverCheck {
    pub name: String,
    pub unchanged: bool,
    pub stored: Description,
    pub stored_sha256: String,
    pub current: Description,
    pub current_sha256: String,
}

fn request_of(op: &Operation) -> EffectRequest<'_> {
    EffectRequest {
        op_id: &op.op_id,
        action_kind: &op.action_kind,
        payload: &op.payload,
        compensates_effect_id: op.compensates_effect_id.as_deref(),
    }
}

fn provenance(registration: &Registration, response_sha256: String) -> Provenance {
    Provenance {
        receiver: registration.name.clone(),
        receiver_describe_sha256: registration.describe_sha256.clone(),
        response_sha256,
        receiver_id: Some(registration.id),
        receiver_version: Some(registration.version),
    }
}

/// A failed call as a storage error naming the receiver, with the last line
/// the adapter wrote on stderr (escaped: it is untrusted text).
fn call_failed(name: &str, failure: &AdapterFailure, stderr: &str) -> Error {
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    StoreError::Call {
        code: failure.kind.as_str(),
        message: format!(
            "receiver {name}: {}: {}{}",
            failure.kind.as_str(),
            failure.detail,
            last.map(|l| format!(" (stderr: {})", crate::domain::sanitize::escape(l.trim())))
                .unwrap_or_default()
        ),
    }
    .into()
}

impl Workspace {
    /// The receiver an operation routes to: the registration its route
    /// names. A receiver can be removed once no open operation routes to
    /// it (or as lost, its open operations escalated: their acts end
    /// here), yet a compensation approved later routes to its original's
    /// receiver: such a route is refused `unknown_receiver` (register the
    /// receiver again to use it), not reported as damage.
    ///
    /// An operation names the registration it was routed to (a
    /// compensation, its original's): when that one was removed it is
    /// refused `receiver_gone`, even while another registration holds the
    /// name, for a name can be taken again and an identity cannot. One
    /// prepared before schema 6 names no registration and routes by name.
    pub fn registration_of(&self, op: &Operation) -> Result<Registration> {
        let route =
            (self.sender.routes_of(&[(&op.op_id, &op.receiver)])?.pop()).unwrap_or((None, None));
        routed(op, route)
    }

    /// [`Workspace::registration_of`] for each of `ops`, in one read of
    /// the outbox (each registration read once): what each one's own
    /// lookup would return, refusals included.
    pub(crate) fn registrations_of(&self, ops: &[&Operation]) -> Result<Vec<Result<Registration>>> {
        let keys: Vec<(&str, &str)> = (ops.iter())
            .map(|op| (op.op_id.as_str(), op.receiver.as_str()))
            .collect();
        let routes = self.sender.routes_of(&keys)?;
        Ok((ops.iter().zip(routes))
            .map(|(op, route)| routed(op, route))
            .collect())
    }

    /// The operation's registration, its `describe` run again before its
    /// first use in this process and before anything is committed for the
    /// act (SPEC 8, "Re-checked"): an answer unchanged but for its name or
    /// version is stored as a new version of the registration and used; a
    /// changed instance, closing, ceiling or mandatory capability is
    /// refused `receiver_changed` until a person accepts it. recon's own
    /// ledger is this program and is not asked.
    pub(crate) fn current_registration(&mut self, op: &Operation) -> Result<Registration> {
        let registration = self.registration_of(op)?;
        self.described(registration)
    }

    /// `registration` (an operation's, just read) as
    /// [`Workspace::current_registration`] would return it.
    fn described(&mut self, registration: Registration) -> Result<Registration> {
        if registration.builtin || self.described.contains(&registration.id) {
            return Ok(registration);
        }
        let (current, sha) = self.describe_program(&self.adapter_program(&registration)?)?;
        let registration = if sha == registration.describe_sha256 {
            registration
        } else if let Some(what) = rules::identity_change(&registration.describe, &current) {
            return Err(Refusal::ReceiverChanged {
                receiver: registration.name,
                what,
            }
            .into());
        } else {
            let next = Registration {
                version: registration.version + 1,
                describe: current,
                describe_sha256: sha,
                ..registration
            };
            self.sender.update_receiver(&next, &*self.clock)?
        };
        self.described.insert(registration.id);
        Ok(registration)
    }

    /// Whether the operation's receiver is the built-in ledger (under any
    /// name, as the experiment's ledger that cannot close is): only it
    /// reads the drill fields of a request.
    pub fn accepts_drills(&self, op_id: &str) -> Result<bool> {
        let op = self.sender.require(op_id)?;
        Ok(self.registration_of(&op)?.builtin)
    }

    /// The program a registration runs: its own, or for the built-in
    /// ledger this recon's `receiver adapter` on this workspace.
    /// Refused `builtin_single_host` for the built-in ledger behind a
    /// database, which has no workspace directory.
    fn adapter_program(&self, registration: &Registration) -> Result<AdapterProgram> {
        let timeout = Duration::from_millis(registration.timeout_ms);
        if registration.builtin {
            // Absolute: the child runs in `/`, so a workspace named
            // relative to where recon was started would name another.
            let ledger_dir = self.ledger_dir()?;
            let dir = std::path::absolute(ledger_dir).unwrap_or_else(|_| ledger_dir.to_path_buf());
            let mut args = vec![
                "receiver".to_string(),
                "adapter".to_string(),
                "--workspace".to_string(),
                dir.display().to_string(),
            ];
            args.extend(registration.args.iter().cloned());
            // Its child is this recon, under this recon's timeout.
            return Ok(AdapterProgram {
                program: self.program.program.clone(),
                args,
                timeout: self.program.timeout,
                env: PassEnv {
                    names: registration.env.clone(),
                    recon_own: true,
                },
            });
        }
        Ok(AdapterProgram {
            program: PathBuf::from(&registration.program),
            args: registration.args.clone(),
            timeout,
            env: PassEnv {
                names: registration.env.clone(),
                recon_own: false,
            },
        })
    }

    /// Registers recon's own ledger under `name` for `actions` (`*` for
    /// every kind routed nowhere else); with `can_close` false it declares
    /// that it cannot close (`--no-close`).
    pub fn register_builtin(
        &mut self,
        name: &str,
        actions: &[String],
        can_close: bool,
    ) -> Result<Registration> {
        self.ensure_present()?;
        self.builtin()?;
        let describe = Builtin::description(can_close);
        let registration = Registration {
            id: 0,
            version: 1,
            name: name.to_string(),
            actions: actions.to_vec(),
            builtin: true,
            program: String::new(),
            args: if can_close {
                Vec::new()
            } else {
                vec!["--no-close".to_string()]
            },
            env: Vec::new(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            describe_sha256: protocol::sha256_of(&describe.answer()),
            describe,
        };
        self.sender.register_receiver(&registration, &*self.clock)?;
        self.registered(name)
    }

    /// A registration as stored, with the id and version the store gave it.
    fn registered(&self, name: &str) -> Result<Registration> {
        self.sender
            .registration(name)?
            .ok_or_else(|| Refusal::UnknownReceiver(name.to_string()).into())
    }

    /// Changes a registered receiver (its program and arguments, the
    /// variables it is passed, its timeout) as a new journaled version of
    /// the same registration, after running the new `describe`: refused
    /// `receiver_changed` when it answers for another store, or makes
    /// other claims, than the registration's (another receiver is
    /// registered with `add`). With `accept` alone it stores the program's
    /// current answer (`receivers check --accept`).
    pub fn update_receiver(&mut self, change: &ReceiverChange<'_>) -> Result<Registration> {
        self.ensure_present()?;
        let stored = self.registered(change.name)?;
        if stored.builtin && change.command.is_some() {
            return Err(Refusal::ReservedName(stored.name).into());
        }
        let mut next = stored.clone();
        if let Some((program, args)) = change.command {
            if let Some(why) = crate::domain::secrets::secret_in_arguments(args) {
                return Err(Refusal::SecretInArguments(why).into());
            }
            next.program = absolute_program(program)?.display().to_string();
            next.args = args.to_vec();
        }
        if let Some(env) = change.env {
            next.env = env.to_vec();
        }
        if let Some(timeout_ms) = change.timeout_ms {
            next.timeout_ms = timeout_ms;
        }
        let (current, sha) = self.describe_program(&self.adapter_program(&next)?)?;
        // A missing instance is refused as such, before any comparison: a
        // different one stays `receiver_changed`.
        if !stored.builtin {
            rules::check_instance(&stored.name, &current)?;
        }
        if !change.accept_claims {
            if let Some(what) = rules::identity_change(&stored.describe, &current) {
                return Err(Refusal::ReceiverChanged {
                    receiver: stored.name,
                    what,
                }
                .into());
            }
        } else if stored.describe.instance != current.instance {
            return Err(Refusal::ReceiverChanged {
                receiver: stored.name,
                what: format!(
                    "it answers for another store (instance {:?}, not {:?}): another store is \
                     another receiver, to register with `recon receivers add`",
                    current.instance, stored.describe.instance
                ),
            }
            .into());
        }
        next.describe = current;
        next.describe_sha256 = sha;
        rules::check_description(&next)?;
        if next == stored {
            return Ok(stored);
        }
        next.version = stored.version + 1;
        let updated = self.sender.update_receiver(&next, &*self.clock)?;
        self.described.insert(updated.id);
        Ok(updated)
    }

    /// Runs `describe` and checks the answer: one `recon-adapter/1` object
    /// with every required field, and no mandatory capability this recon
    /// does not know. Returns the description and the answer's SHA-256.
    pub fn describe_program(&self, program: &AdapterProgram) -> Result<(Description, String)> {
        let reply = program.call(
            &self.program,
            Verb::Describe,
            &protocol::request(
                Verb::Describe,
                &self.id,
                &EffectRequest {
                    op_id: "",
                    action_kind: "",
                    payload: &Value::Null,
                    compensates_effect_id: None,
                },
                None,
            ),
        );
        // What the adapter said on stderr is often the reason (a missing
        // module, a bad flag, a server asking for a password): said with the
        // failure, escaped.
        let said = stderr_tail(&reply.stderr);
        // A program that ran and gave no usable answer (a crash, a timeout,
        // `ok: false`) is a failed call, exit 4, as any verb's is (SPEC 12);
        // `adapter_malformed` is for an answer that is not a valid describe.
        let failed = |detail: String| {
            StoreError::Receiver(format!("the adapter's describe failed: {detail}{said}"))
        };
        let malformed = |detail: String| Refusal::AdapterMalformed(format!("{detail}{said}"));
        let answer = match reply.answer {
            Ok(answer) => answer,
            Err(f) if f.kind == FailureKind::SpawnFailed => {
                return Err(StoreError::Receiver(f.detail).into())
            }
            Err(f) if matches!(f.kind, FailureKind::Crash | FailureKind::Timeout) => {
                return Err(failed(f.detail).into())
            }
            Err(f) => return Err(malformed(f.detail).into()),
        };
        let description = match protocol::parse_answer(Verb::Describe, "", &answer) {
            Ok(Answer::Described(description)) => description,
            Ok(Answer::Failed(f)) => {
                let message = crate::domain::sanitize::escape(&f.message);
                return Err(failed(format!("it answered {}: {message}", f.code.as_str())).into());
            }
            Ok(_) => return Err(malformed("not a describe answer".into()).into()),
            Err(detail) => return Err(malformed(detail).into()),
        };
        Ok((description, protocol::sha256_of(&answer)))
    }

    /// Registers a receiver: its name checked, its program made absolute,
    /// its `describe` run and checked, the answer and its SHA-256 stored
    /// with the routes of its action kinds. A refusal stores nothing.
    pub fn register_receiver(&mut self, new: &NewReceiver<'_>) -> Result<Registration> {
        if new.name == BUILTIN_NAME {
            return Err(Refusal::ReservedName(new.name.to_string()).into());
        }
        if let Some(why) = crate::domain::secrets::secret_in_arguments(new.args) {
            return Err(Refusal::SecretInArguments(why).into());
        }
        self.ensure_present()?;
        let program = absolute_program(new.program)?;
        let mut registration = Registration {
            id: 0,
            version: 1,
            name: new.name.to_string(),
            actions: new.actions.to_vec(),
            builtin: false,
            program: program.display().to_string(),
            args: new.args.to_vec(),
            env: new.env.to_vec(),
            timeout_ms: new.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
            describe: Builtin::description(false),
            describe_sha256: String::new(),
        };
        let (describe, sha) = self.describe_program(&self.adapter_program(&registration)?)?;
        registration.describe = describe;
        registration.describe_sha256 = sha;
        rules::check_description(&registration)?;
        self.sender.register_receiver(&registration, &*self.clock)?;
        self.registered(new.name)
    }

    /// The registered receivers, by name.
    pub fn receivers(&self) -> Result<Vec<Registration>> {
        self.sender.receivers()
    }

    /// Re-runs a registered receiver's `describe` and compares it with the
    /// stored answer; stores nothing.
    pub fn check_receiver(&self, name: &str) -> Result<ReceiverCheck> {
        let stored = self
            .sender
            .registration(name)?
            .ok_or_else(|| Refusal::UnknownReceiver(name.to_string()))?;
        let (current, current_sha256) = self.describe_program(&self.adapter_program(&stored)?)?;
        Ok(ReceiverCheck {
            name: stored.name,
            unchanged: current_sha256 == stored.describe_sha256,
            stored: stored.describe,
            stored_sha256: stored.describe_sha256,
            current,
            current_sha256,
        })
    }

    /// Removes a registration, refused while an open operation routes to it.
    pub fn remove_receiver(&mut self, name: &str) -> Result<()> {
        self.ensure_present()?;
        self.sender.remove_receiver(name, None, &*self.clock)?;
        Ok(())
    }

    /// Removes a registration whose store is gone, even while operations
    /// route to it (`receivers remove --lost`): each open one is escalated
    /// with `reason` in the same transaction, and its acts are refused
    /// `receiver_gone` from then on ([`Self::registration_of`]). The
    /// escalations are by the database login in team mode; on a workspace
    /// directory nobody is authenticated, and they are by
    /// [`LOST_BY_OWNER`], the role that ends registrations. Returns the
    /// operations escalated, by op id.
    pub fn remove_lost_receiver(&mut self, name: &str, reason: &str) -> Result<Vec<String>> {
        self.ensure_present()?;
        let by = self.session_role().unwrap_or(LOST_BY_OWNER).to_string();
        let lost = LostReceiver { by: &by, reason };
        self.sender.remove_receiver(name, Some(&lost), &*self.clock)
    }

    /// Reads (or, with `close`, closes and reads) the operation's receiver,
    /// held to its registration. A close on a receiver that cannot close is
    /// refused `close_unsupported` before anything is invoked. `close` names
    /// who authorized it; `recorded_by`, whose observation the read will be
    /// recorded as (a closing read is recorded with the close, as the
    /// authorizer's unless another is named).
    pub(crate) fn read_receiver(
        &mut self,
        op: &Operation,
        close: Option<&str>,
        recorded_by: Option<&str>,
    ) -> Result<Read> {
        let observer = recorded_by.or(close).unwrap_or_default();
        // A receiver registered as unable to close is not asked anything,
        // not even its `describe`; one that answers differently now is held
        // to what it says.
        if close.is_some() {
            rules::check_close(&self.registration_of(op)?)?;
        }
        let registration = self.current_registration(op)?;
        if let Some(who) = close {
            rules::check_close(&registration)?;
            // Journaled before the receiver is asked: a close whose answer
            // is lost keeps its authorization all the same.
            let ids = [op.op_id.as_str()];
            only((self.sender).record_close_requests(
                &ids,
                &registration.name,
                who,
                &*self.clock,
            )?)?;
        }
        let verb = if close.is_some() {
            Verb::Close
        } else {
            Verb::Query
        };
        // A close and a read someone records are acts: a failed call is
        // kept with them. A read only shown keeps nothing.
        let keep = close.is_some() || recorded_by.is_some();
        let answer = self.ask(op, &registration, verb, close, keep)?;
        self.judge_read(op, &registration, verb, (close, observer), &answer)
    }

    /// A read's answer judged (SPEC 8 rules 2 and 4) and, for a close the
    /// receiver committed, journaled; `who` is who authorized the close, if
    /// it is one, and who observed it.
    fn judge_read(
        &mut self,
        op: &Operation,
        registration: &Registration,
        verb: Verb,
        who: (Option<&str>, &str),
        answer: &Value,
    ) -> Result<Read> {
        let judged = judge_answer(op, registration, verb, answer);
        only(self.journal_reads(&[op], vec![judged], who))
    }

    /// Judged reads of `ops`, each with the journal of its close when it
    /// is a close the receiver committed (`who`: who authorized the close,
    /// if these are closes, and who observed them): the closes of the
    /// batch in one outbox transaction, each refused alone.
    fn journal_reads(
        &mut self,
        ops: &[&Operation],
        judged: Vec<Result<(Snapshot, Provenance)>>,
        (close, observer): (Option<&str>, &str),
    ) -> Vec<Result<Read>> {
        let mut journaled: Vec<Option<Result<Observation>>> =
            (0..judged.len()).map(|_| None).collect();
        if let Some(who) = close {
            let (closed, closing): (Vec<usize>, Vec<(&Operation, Closing<'_>)>) =
                (ops.iter().zip(&judged).enumerate())
                    .filter_map(|(i, (op, judged))| match judged {
                        Ok((snapshot, provenance)) if snapshot.closed => Some((
                            i,
                            (
                                *op,
                                Closing {
                                    authorized_by: who,
                                    observed_by: observer,
                                    snapshot,
                                    provenance,
                                },
                            ),
                        )),
                        _ => None,
                    })
                    .unzip();
            for (i, observation) in closed.into_iter().zip(self.journal_closes(&closing)) {
                journaled[i] = Some(observation);
            }
        }
        (judged.into_iter().zip(journaled))
            .map(|(judged, observation)| {
                let (snapshot, provenance) = judged?;
                Ok(Read {
                    snapshot,
                    provenance,
                    observation: observation.transpose()?,
                })
            })
            .collect()
    }

    /// Reads the receivers of `ops` to be recorded as `by`'s observations,
    /// each exactly as [`Workspace::read_receiver`] would, in order; a
    /// receiver that declares `"batch": N` is asked about up to N of them
    /// in one request, and each result is judged on its own. `stop` is
    /// asked before each request: once it says stop, nothing more is
    /// asked, and the operations not read are `None`.
    pub(crate) fn read_receivers(
        &mut self,
        ops: &[Operation],
        by: &str,
        stop: &dyn Fn() -> bool,
    ) -> Vec<Option<Result<Read>>> {
        self.ask_receivers(ops, None, by, stop)
    }

    /// Closes `ops` at their receivers, authorized by `who` (each closing
    /// read recorded as theirs), each exactly as [`Workspace::read_receiver`]
    /// would close it, in order; a receiver that declares `"batch": N`
    /// closes up to N of them in one request. `stop` as for
    /// [`Workspace::read_receivers`].
    pub(crate) fn close_receivers(
        &mut self,
        ops: &[Operation],
        who: &str,
        stop: &dyn Fn() -> bool,
    ) -> Vec<Option<Result<Read>>> {
        self.ask_receivers(ops, Some(who), who, stop)
    }

    /// Reads, or with `close` closes, the receivers of `ops` in order,
    /// batched where a receiver batches.
    fn ask_receivers(
        &mut self,
        ops: &[Operation],
        close: Option<&str>,
        by: &str,
        stop: &dyn Fn() -> bool,
    ) -> Vec<Option<Result<Read>>> {
        let mut reads: Vec<Option<Result<Read>>> = (0..ops.len()).map(|_| None).collect();
        let mut batches: std::collections::BTreeMap<(i64, i64), (Registration, Vec<usize>)> =
            Default::default();
        let refs: Vec<&Operation> = ops.iter().collect();
        let found = match self.registrations_of(&refs) {
            Ok(found) => found,
            // Each looked up alone, to fail as its own lookup does.
            Err(_) => ops.iter().map(|op| self.registration_of(op)).collect(),
        };
        for ((i, op), registration) in ops.iter().enumerate().zip(found) {
            match registration.and_then(|r| self.described(r)) {
                Ok(registration) if batches_reads(&registration) => {
                    let key = (registration.id, registration.version);
                    let entry = batches.entry(key).or_insert((registration, Vec::new()));
                    entry.1.push(i);
                }
                Ok(_) if stop() => return reads,
                Ok(_) => reads[i] = Some(self.read_receiver(op, close, Some(by))),
                Err(error) => reads[i] = Some(Err(error)),
            }
        }
        for (registration, indices) in batches.into_values() {
            for chunk in indices.chunks(registration.describe.batch_size()) {
                if stop() {
                    return reads;
                }
                // Each batch's closes are authorized just before it is
                // sent, so a run stopped between batches journals no
                // authorization for a close it never asked.
                let chunk = match close {
                    Some(who) => {
                        self.authorize_closes(&registration, ops, chunk.to_vec(), who, &mut reads)
                    }
                    None => chunk.to_vec(),
                };
                if chunk.is_empty() {
                    continue;
                }
                let batch: Vec<&Operation> = chunk.iter().map(|&i| &ops[i]).collect();
                let read = self.read_batch(&registration, &batch, (close, by));
                for (&i, read) in chunk.iter().zip(read) {
                    reads[i] = Some(read);
                }
            }
        }
        reads
    }

    /// One batched query (or, with `close`, close) about `ops` (all routed
    /// to `registration`), split into one result per operation. An answer
    /// that is not one result per id, in order, fails the whole batch as
    /// `mismatch`; a failed call fails each operation of it as the call
    /// would have failed alone, and is kept with each. A batched close is
    /// refused `close_unsupported` by a receiver that cannot close, and
    /// journals each authorization before the receiver is asked; a close
    /// whose answer is lost is a commit of unknown outcome for each.
    fn read_batch(
        &mut self,
        registration: &Registration,
        ops: &[&Operation],
        (close, by): (Option<&str>, &str),
    ) -> Vec<Result<Read>> {
        let verb = if close.is_some() {
            Verb::Close
        } else {
            Verb::Query
        };
        let ids: Vec<&str> = ops.iter().map(|op| op.op_id.as_str()).collect();
        let request = protocol::batch_request(verb, &self.id, &ids, close);
        let Ok(reply) = self.exchange(registration, verb, &request) else {
            // Only the built-in ledger's program can be missing (an outbox
            // with no directory), and it is never asked in batches (it is
            // read in process): each operation is refused as its own read
            // would be.
            return (ops.iter())
                .map(|op| self.read_receiver(op, close, Some(by)))
                .collect();
        };
        let results = (reply.answer.clone()).and_then(|answer| split_batch(&answer, &ids));
        match results {
            Ok(results) => {
                let judged = (ops.iter().zip(results))
                    .map(|(op, answer)| {
                        // A close's `ok: false` is kept, as a single one's is.
                        let refused =
                            refusal_in(verb, &op.op_id, &answer).filter(|_| close.is_some());
                        if let Some(f) = refused {
                            let call = (verb.as_str(), registration.name.as_str());
                            let call = (call.0, call.1, reply.exit_code, reply.stderr.as_str());
                            self.keep_failure(op, call, &f)?;
                        }
                        judge_answer(op, registration, verb, &answer)
                    })
                    .collect();
                self.journal_reads(ops, judged, (close, by))
            }
            Err(f) => (ops.iter())
                .map(|op| {
                    let call = (verb.as_str(), registration.name.as_str());
                    let call = (call.0, call.1, reply.exit_code, reply.stderr.as_str());
                    self.keep_failure(op, call, &f)?;
                    let failed = call_failed(&registration.name, &f, &reply.stderr);
                    Err(match (close, f.kind) {
                        (Some(_), kind) if kind != FailureKind::SpawnFailed => {
                            failed.after(close_unknown(&op.op_id, &registration.name))
                        }
                        _ => failed,
                    })
                })
                .collect(),
        }
    }

    /// Before a batched close: the receiver must be able to close
    /// (else each is refused `close_unsupported`), and each close's
    /// authorization is journaled, as a single close's is. Returns the
    /// operations (of `indices`) whose authorization was journaled; each
    /// other one's failure goes to `done`.
    fn authorize_closes(
        &mut self,
        registration: &Registration,
        ops: &[Operation],
        indices: Vec<usize>,
        who: &str,
        done: &mut [Option<Result<Read>>],
    ) -> Vec<usize> {
        if let Err(refused) = rules::check_close(registration) {
            for &i in &indices {
                done[i] = Some(Err(refused.clone().into()));
            }
            return Vec::new();
        }
        let ids: Vec<&str> = indices.iter().map(|&i| ops[i].op_id.as_str()).collect();
        let name = &registration.name;
        let requested = (self.sender).record_close_requests(&ids, name, who, &*self.clock);
        let mut authorized = Vec::with_capacity(indices.len());
        for (i, requested) in indices.into_iter().zip(spread(requested, ids.len())) {
            match requested {
                Ok(()) => authorized.push(i),
                Err(error) => done[i] = Some(Err(error)),
            }
        }
        authorized
    }

    /// The receiver's answer to a read or a close, as the answer line it
    /// gave (recon's own ledger is read in process). A close whose call gave
    /// no usable answer is kept with the operation, and reported as a
    /// commit of unknown outcome when the request reached a live receiver.
    fn ask(
        &mut self,
        op: &Operation,
        registration: &Registration,
        verb: Verb,
        close: Option<&str>,
        keep: bool,
    ) -> Result<Value> {
        if reads_in_process(registration) {
            let id = self.id.clone();
            let ledger = self.builtin_mut()?;
            let snapshot = match close {
                Some(who) => ledger.close(&id, &op.op_id, who)?,
                None => ledger.query(&id, &op.op_id)?,
            };
            return Ok(protocol::snapshot_answer(&snapshot));
        }
        let request = protocol::request(verb, &self.id, &request_of(op), close);
        let reply = self.exchange(registration, verb, &request)?;
        let name = registration.name.as_str();
        let f = match reply.answer {
            Ok(answer) => {
                // An `ok: false` answer is a failed call too (SPEC 8 rule
                // 7): kept with the act, then judged as the answer it is.
                if let Some(f) = refusal_in(verb, &op.op_id, &answer).filter(|_| keep) {
                    let call = (verb.as_str(), name, reply.exit_code, reply.stderr.as_str());
                    self.keep_failure(op, call, &f)?;
                }
                return Ok(answer);
            }
            Err(f) => f,
        };
        let failed = call_failed(&registration.name, &f, &reply.stderr);
        if keep {
            let call = (verb.as_str(), name, reply.exit_code, reply.stderr.as_str());
            self.keep_failure(op, call, &f)?;
        }
        if close.is_none() {
            return Err(failed);
        }
        Err(match f.kind {
            FailureKind::SpawnFailed => failed,
            _ => failed.after(close_unknown(&op.op_id, name)),
        })
    }

    /// One read or close request to a receiver's program: through this
    /// command's session with it when its description declares `session`
    /// (started on first use), else one process for the call. Writes never
    /// come here: every apply is a child of its own (`start_apply`), so
    /// the built-in ledger's drills keep their one request per process
    /// (or, for a running gateway's own calls, answered in process).
    fn exchange(
        &mut self,
        registration: &Registration,
        verb: Verb,
        request: &Value,
    ) -> Result<Reply> {
        let program = self.adapter_program(registration)?;
        if !registration.describe.session {
            return Ok(program.call(&self.program, verb, request));
        }
        Ok(self
            .sessions
            .entry((registration.id, registration.version))
            .or_insert_with(|| Session::new(program))
            .request(&self.program, verb, request))
    }

    /// Journals closes the receivers committed (for each, the `closed`
    /// entry and its `closes` row, and the closing read as an observation:
    /// one outbox transaction for them all, each refused alone). The
    /// receivers' commits came first, in their own stores, so a failure
    /// here says the operation is closed there all the same.
    fn journal_closes(
        &mut self,
        closing: &[(&Operation, Closing<'_>)],
    ) -> Vec<Result<Observation>> {
        let at = self.clock.now();
        let records: Vec<(CloseRecord, NewObservation<'_>)> = (closing.iter())
            .map(|(op, closing)| {
                let snapshot = serde_json::to_value(closing.snapshot).unwrap_or_default();
                let close = CloseRecord {
                    receiver: closing.provenance.receiver.clone(),
                    authorized_by: closing.authorized_by.to_string(),
                    response_sha256: closing.provenance.response_sha256.clone(),
                    matches: (closing.snapshot.matches.iter())
                        .map(|m| m.effect_id.clone())
                        .collect(),
                    snapshot_sha256: crate::domain::canonical_sha256(&snapshot),
                    snapshot,
                    closed_by: closing.snapshot.closed_by.clone(),
                    closed_at: at,
                };
                let observation = NewObservation {
                    op_id: &op.op_id,
                    by: closing.observed_by,
                    at,
                    snapshot: closing.snapshot,
                    verdict: classify(op.scope(), closing.snapshot),
                    provenance: closing.provenance,
                };
                (close, observation)
            })
            .collect();
        let recorded = spread(
            self.sender.record_closes(&records, &*self.clock),
            records.len(),
        );
        (closing.iter().zip(recorded))
            .map(|((op, closing), recorded)| {
                recorded.map_err(|e| e.after(super::committed_close(op, closing.authorized_by)))
            })
            .collect()
    }

    /// Starts the receiver call of a dispatch whose `unknown` state is
    /// committed. A call that cannot start is reported when it is finished.
    /// A receiver whose apply this process answers itself
    /// ([`Workspace::apply_in_process`]) is asked here, to the end: its
    /// reply is judged when the dispatch is finished, as a child's is.
    pub(crate) fn start_apply(
        &self,
        operation: Operation,
        options: DispatchOptions,
    ) -> Result<PendingDispatch> {
        let registration = self.registration_of(&operation)?;
        let mut request = protocol::request(Verb::Apply, &self.id, &request_of(&operation), None);
        options.add_to(&mut request);
        let local = (self.in_process.as_ref()).filter(|local| local.serves(&registration));
        if let (Some(local), false) = (local, options.has_drills()) {
            let timeout = Duration::from_millis(registration.timeout_ms);
            let reply = local.apply(&request, timeout);
            return Ok(PendingDispatch {
                operation,
                child: AdapterCall(Applying::Answered(reply)),
                registration,
            });
        }
        let program = self.adapter_program(&registration)?;
        let mut call = program.start(&self.program, Verb::Apply, &request, options.wait_permit);
        if let (Ok(running), true) = (&mut call, options.wait_permit) {
            running
                .await_ready()
                .map_err(|detail| StoreError::Receiver(format!("the permit drill: {detail}")))?;
        }
        Ok(PendingDispatch {
            operation,
            child: AdapterCall(Applying::Child(call)),
            registration,
        })
    }
}

/// Whether a receiver's reads are asked in batches: it declares a batch
/// above one, and it is not recon's own ledger read in process.
/// The registration an operation's route names (see
/// [`Workspace::registration_of`]), or the refusal for a route to nowhere.
fn routed(op: &Operation, (id, registration): crate::store::Route) -> Result<Registration> {
    match (id, registration) {
        (_, Some(registration)) => Ok(registration),
        (Some(_), None) => Err(Refusal::ReceiverGone {
            op_id: op.op_id.clone(),
            receiver: op.receiver.clone(),
        }
        .into()),
        (None, None) => Err(Refusal::UnknownReceiver(op.receiver.clone()).into()),
    }
}

fn batches_reads(registration: &Registration) -> bool {
    registration.describe.batch_size() > 1 && !reads_in_process(registration)
}

/// Whether reads of this receiver are made in process: recon's own ledger
/// when it can close (the one registered `--no-close` is read through its
/// adapter, as the experiment needs).
fn reads_in_process(registration: &Registration) -> bool {
    registration.builtin && registration.can_close()
}

/// The results of a batch answer, one per id in order. A failure answer to
/// the whole batch (`ok: false`, no results) is each operation's answer.
/// Results of another count, or one naming an operation of the batch other
/// than its own, fail the whole batch as `mismatch`.
fn split_batch(answer: &Value, ids: &[&str]) -> std::result::Result<Vec<Value>, AdapterFailure> {
    if answer.get("ok") == Some(&Value::Bool(false)) && answer.get("results").is_none() {
        return Ok(vec![answer.clone(); ids.len()]);
    }
    let Some(results) = answer.get("results").and_then(Value::as_array) else {
        return Err(failure(
            FailureKind::Garbage,
            "the batch answer has no results array",
        ));
    };
    if results.len() != ids.len() {
        return Err(failure(
            FailureKind::Mismatch,
            format!(
                "the batch answer has {} results for {} operations",
                results.len(),
                ids.len()
            ),
        ));
    }
    for (i, (result, id)) in results.iter().zip(ids).enumerate() {
        let named = (result
            .get("matches")
            .and_then(Value::as_array)
            .into_iter()
            .flatten())
        .filter_map(|m| m.get("op_id").and_then(Value::as_str));
        if let Some(other) = named
            .filter(|named| named != id)
            .find(|named| ids.contains(named))
        {
            return Err(failure(
                FailureKind::Mismatch,
                format!(
                    "result {} is for operation {other}, not {id}: the results are out of order",
                    i + 1
                ),
            ));
        }
    }
    Ok(results.clone())
}

/// A close whose answer was lost: the receiver may have committed it (a
/// close is idempotent, so asking again is safe and tells).
fn close_unknown(op_id: &str, receiver: &str) -> crate::error::Committed {
    crate::error::Committed {
        sentence: format!(
            "the close of {op_id} may have been committed at receiver {receiver}, whose answer \
             was lost: the operation may now be closed there; take the closing snapshot again \
             to learn which (a close is idempotent)"
        ),
        json: serde_json::json!({"close": "unknown", "receiver": receiver}),
    }
}

/// What a read of a receiver gave: the snapshot held to the receiver's
/// ceiling, the answer it rests on, and for a close the observation it was
/// recorded as.
pub(crate) struct Read {
    pub snapshot: Snapshot,
    pub provenance: Provenance,
    pub observation: Option<Observation>,
}

/// A close the receiver committed, to journal.
struct Closing<'a> {
    authorized_by: &'a str,
    observed_by: &'a str,
    snapshot: &'a Snapshot,
    provenance: &'a Provenance,
}

/// Judges a dispatch's reply (SPEC 8 rule 1): the receipt, with the
/// provenance it will be recorded with, or why none counts.
pub(super) fn judge_apply(
    operation: &Operation,
    registration: &Registration,
    reply: &Reply,
) -> std::result::Result<(Effect, Provenance), AdapterFailure> {
    let answer = reply.answer.clone()?;
    let sha = protocol::sha256_of(&answer);
    let parsed = protocol::parse_answer(Verb::Apply, &operation.op_id, &answer)
        .map_err(|detail| failure(FailureKind::Garbage, detail))?;
    let effect = rules::judge_receipt(&request_of(operation), parsed)?;
    Ok((effect, provenance(registration, sha)))
}

/// The report of a dispatch, before a receipt is recorded.
pub(super) fn report_of(
    op: &Operation,
    reply: Reply,
    judged: &std::result::Result<(Effect, Provenance), AdapterFailure>,
) -> DispatchReport {
    DispatchReport {
        op_id: op.op_id.clone(),
        receiver: op.receiver.clone(),
        outcome: if judged.is_ok() { "receipt" } else { "unknown" },
        receiver_exit_code: reply.exit_code,
        effect_id: judged.as_ref().ok().map(|(e, _)| e.effect_id.clone()),
        state: op.state,
        version: op.version,
        adapter_failure: judged.as_ref().err().cloned(),
        receiver_stderr: reply.stderr,
        late: false,
        contradicts: None,
    }
}

/// The program as an absolute path, fixed now: a name without a slash is
/// looked up on `PATH` once, at registration, never when it runs.
fn absolute_program(program: &Path) -> Result<PathBuf> {
    let found = if program.components().count() > 1 || program.is_absolute() {
        std::path::absolute(program).ok()
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(program))
                .find(|candidate| candidate.is_file())
        })
    };
    match found {
        Some(path) if path.is_file() => Ok(path),
        _ => Err(StoreError::Receiver(format!(
            "cannot find the program {}",
            crate::domain::sanitize::escape(&program.display().to_string())
        ))
        .into()),
    }
}

/// A read's answer judged (SPEC 8 rules 2 and 4): its snapshot, and the
/// provenance it is recorded with.
fn judge_answer(
    op: &Operation,
    registration: &Registration,
    verb: Verb,
    answer: &Value,
) -> Result<(Snapshot, Provenance)> {
    let sha = protocol::sha256_of(answer);
    let parsed = protocol::parse_answer(verb, &op.op_id, answer).map_err(|detail| {
        call_failed(
            &registration.name,
            &failure(FailureKind::Garbage, detail),
            "",
        )
    })?;
    let snapshot = rules::judge_snapshot(registration, &op.op_id, parsed)?;
    Ok((snapshot, provenance(registration, sha)))
}

/// The failed call an `ok: false` answer to a read or a close is (kind
/// `error`, its code and message), or `None` for any other answer.
fn refusal_in(verb: Verb, op_id: &str, answer: &Value) -> Option<AdapterFailure> {
    match protocol::parse_answer(verb, op_id, answer) {
        Ok(Answer::Failed(failed)) => Some(failure(
            FailureKind::Error,
            format!("{}: {}", failed.code.as_str(), failed.message),
        )),
        _ => None,
    }
}

/// The one result of a batch of one.
fn only<T>(results: Vec<Result<T>>) -> Result<T> {
    (results.into_iter().next())
        .unwrap_or_else(|| Err(StoreError::Corrupt("a batch of one gave no result".into()).into()))
}

/// Each item's result of a batch act of `count` items: the act's own, or,
/// when its transaction failed as a whole, that failure for every item
/// (the first keeps the error itself, the others its text).
fn spread<T>(batch: Result<Vec<Result<T>>>, count: usize) -> Vec<Result<T>> {
    match batch {
        Ok(results) => results,
        Err(error) => {
            let text = error.to_string();
            std::iter::once(Err(error))
                .chain((1..count).map(|_| Err(StoreError::Unavailable(text.clone()).into())))
                .collect()
        }
    }
}

/// The most lines of an adapter's stderr a failed `describe` repeats.
const STDERR_TAIL_LINES: usize = 4;

/// The last non-empty lines of an adapter's stderr (at most
/// [`STDERR_TAIL_LINES`]), escaped and joined with ` | `, as the tail of a
/// message: ` (its stderr: ...)`, or nothing when it wrote none.
fn stderr_tail(stderr: &str) -> String {
    let mut lines: Vec<&str> = (stderr.lines().rev())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(STDERR_TAIL_LINES)
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    lines.reverse();
    let text: Vec<String> = lines
        .iter()
        .map(|l| crate::domain::sanitize::escape(l).into_owned())
        .collect();
    format!(" (its stderr: {})", text.join(" | "))
}
