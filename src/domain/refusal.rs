//! Refusals: a safety rule saying no.
//!
//! A [`Refusal`] means the request was understood and deliberately not
//! carried out, and nothing was written. Each variant has the stable code of
//! SPEC.md (`code()`); the binary maps every refusal to exit 3. Refusals are
//! vocabulary of the domain, so they live here, below every layer that
//! raises them; storage errors live above, in `crate::error`.

use super::{Decision, OpState, Verdict};
use thiserror::Error;

/// What a `permission_denied` refusal advises: the role that allows the
/// act, granted to the login; never the owner's, whose grant would hand
/// over the whole outbox (every registration runs a program on every
/// reviewer's host), so an owner's act is done as the owner.
fn grant_advice(role: &str, login: &str) -> String {
    if role == super::team::TeamRole::Owner.as_str() {
        "only the outbox's owner (the role that ran `recon db init`) may, so run it as the \
         owner; granting the owner's role would hand over the whole outbox"
            .to_string()
    } else {
        format!(
            "it needs the role {role}, which the outbox's owner grants (GRANT {role} TO {login})"
        )
    }
}

/// What a `no_receiver` refusal advises, so that it never tells a person
/// to register a receiver for a typo or for a path that holds no
/// workspace at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteAdvice {
    /// Nothing routed is near the kind: register a receiver for it.
    Register,
    /// The kind is probably a typo of this routed kind.
    Nearest(String),
    /// There is no workspace at this path (probably a mistyped one).
    NoWorkspace(String),
}

impl RouteAdvice {
    fn text(&self, kind: &str) -> String {
        let register = format!(
            "`recon receivers add --workspace DIR NAME --actions {kind} -- PROGRAM [ARG...]` \
             (or `--builtin` for recon's own ledger, `--actions '*'` for every kind)"
        );
        match self {
            RouteAdvice::Register => format!("register one first, for example {register}"),
            RouteAdvice::Nearest(near) => {
                format!("did you mean {near}? (it is routed; check the spelling)")
            }
            RouteAdvice::NoWorkspace(path) => format!(
                "there is no workspace at {}: check the path (or set RECON_WORKSPACE), or make \
                 one there by registering a receiver, for example {register}",
                super::sanitize::escape(path)
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refusal {
    #[error("the name has no visible character")]
    EmptyReviewer,
    #[error("{0}")]
    ScopeMismatch(String),
    #[error("the verdict {verdict} does not support the decision {decision}")]
    UnsupportedVerdict {
        decision: Decision,
        verdict: Verdict,
    },
    #[error(
        "expected version {expected}, found {found}; the operation is now {state}{}",
        changed_by.as_ref().map(|who| format!(" (last changed by {who})")).unwrap_or_default()
    )]
    StaleVersion {
        expected: i64,
        found: i64,
        state: OpState,
        changed_by: Option<String>,
    },
    #[error("operation {op_id} is {state}, not unknown")]
    NotUnknown { op_id: String, state: OpState },
    #[error("operation {op_id} is {state}; it is dispatched only once, from prepared")]
    BlindRetry { op_id: String, state: OpState },
    #[error("the receiver has closed operation {0}; no effect can be written for it")]
    OperationClosed(String),
    #[error("no operation {0}")]
    UnknownOperation(String),
    #[error("operation {0} already exists")]
    DuplicateOperation(String),
    #[error("original {op_id} is {state}, not confirmed")]
    OriginalNotConfirmed { op_id: String, state: OpState },
    #[error("effect {requested} is not the confirmed effect {}", confirmed.as_deref().unwrap_or("(none)"))]
    CompensationEffectMismatch {
        requested: String,
        confirmed: Option<String>,
    },
    #[error("effect {effect_id} of {op_id} already has an approved compensation")]
    AlreadyApproved { op_id: String, effect_id: String },
    #[error("compensation {0} has no approval")]
    CompensationNotApproved(String),
    #[error("compensation action {actual} differs from the approved {approved}")]
    CompensationActionMismatch { approved: String, actual: String },
    #[error(
        "receiver {receiver} cannot close an operation, so absence is never proof; \
         nothing was asked of it"
    )]
    CloseUnsupported { receiver: String },
    #[error("the receiver name {0} is reserved for recon's own ledger")]
    ReservedName(String),
    #[error("the adapter's describe answer is malformed: {0}")]
    AdapterMalformed(String),
    #[error("the adapter requires capability {0}, which this recon does not know")]
    AdapterUnknownCapability(String),
    #[error("a receiver named {0} is already registered")]
    ReceiverExists(String),
    /// Team mode has no built-in ledger: a file on one host would let a
    /// reviewer on another read an empty ledger.
    #[error(
        "an outbox in a database has no built-in ledger (a file on one host would serve \
         reviewers on other hosts an empty one); register a receiver every host reaches, \
         such as recon-pg-ledger"
    )]
    BuiltinSingleHost,
    #[error("action kind {action} already routes to receiver {receiver}")]
    ActionRouted { action: String, receiver: String },
    #[error("{}", in_use(receiver, *open, first))]
    ReceiverInUse {
        receiver: String,
        open: i64,
        /// The first few of them, by op id: enough to find the rest.
        first: Vec<String>,
    },
    #[error("no receiver named {0} is registered")]
    UnknownReceiver(String),
    #[error("operation {op_id} is already escalated (by {by})")]
    AlreadyEscalated { op_id: String, by: String },
    #[error("operation {0} is not escalated")]
    NotEscalated(String),
    #[error("no receiver takes action kind {kind}; {}", advice.text(kind))]
    NoReceiver { kind: String, advice: RouteAdvice },
    #[error(
        "{0}; pass the value with `--env NAME` instead, through the adapter's environment \
         (for example PGPASSWORD, or a libpq .pgpass or service file)"
    )]
    SecretInArguments(String),
    #[error(
        "operation {op_id} went to receiver {receiver} as it was registered then, and that \
         registration was removed; a receiver registered again under its name is another \
         receiver, so nothing is sent there"
    )]
    ReceiverGone { op_id: String, receiver: String },
    #[error(
        "receiver {receiver} changed: {what}; store the change with `recon receivers update` \
         or `recon receivers check --accept`, or register another store as another receiver"
    )]
    ReceiverChanged { receiver: String, what: String },
    #[error("operation {0} is not contradicted; there is nothing to acknowledge")]
    NotContradicted(String),
    /// The database refused the act: the login role lacks a role the act
    /// needs (SPEC 10). Nothing was written.
    #[error(
        "{login} may not {act}: {}; nothing was written",
        grant_advice(role, login)
    )]
    PermissionDenied {
        act: String,
        role: String,
        login: String,
    },
    /// Four eyes: the approving role recorded the original's confirmation.
    #[error(
        "four eyes: {role} recorded the confirmation of {op_id}, so another role must approve \
         its compensation; nothing was written"
    )]
    SamePerson { op_id: String, role: String },
    /// A rule of the database (SPEC 12) refused the act: `rule` is what the
    /// database said. Nothing was written.
    #[error("the database's rules refuse it: {rule}; nothing was written")]
    RuleViolation { rule: String },
    /// SPEC 12: a receiver that claims `complete`, `authoritative` or
    /// `can_close` names the store behind it, so that another store is
    /// another receiver.
    #[error(
        "receiver {receiver} claims {claims} but its describe declares no \"instance\": a \
         receiver whose evidence can settle a decision must name the store behind it (a \
         stable id of its database or mailbox), so that pointing it at another store is \
         another receiver; nothing was stored"
    )]
    InstanceRequired { receiver: String, claims: String },
    /// SPEC 14: `--keep` where keeping one effect is not allowed (why).
    #[error("keeping one effect is not allowed: {0}; nothing was written")]
    KeepNotAllowed(String),
    /// SPEC 14: the kept effect is not among the snapshot's matches.
    #[error("effect {0} is not among the snapshot's matches; nothing was written")]
    KeepNotAMatch(String),
    /// SPEC 14: a surplus effect is compensated with the reason `duplicate`.
    #[error(
        "effect {0} is a surplus effect of a kept duplicate: its compensation needs \
         `--reason duplicate`; nothing was written"
    )]
    ReasonRequired(String),
    /// SPEC 12: a decision on a closed snapshot that names no recorded
    /// close holding exactly that snapshot (why, as a sentence).
    #[error("{0}; nothing was written")]
    UnbackedClose(String),
    /// SPEC 12: `db init --roles PREFIX` where the roles of that prefix
    /// already serve another database (they are the cluster's).
    #[error(
        "the roles {prefix}_* already serve another database ({databases}): roles belong to \
         one outbox, so give this one its own with `recon db init --roles PREFIX`; nothing \
         was created"
    )]
    RolesInUse { prefix: String, databases: String },
}

/// How many open operations keep a receiver in use, and which, the first
/// few by name.
fn in_use(receiver: &str, open: i64, first: &[String]) -> String {
    let listed = first.join(", ");
    let more = open - first.len() as i64;
    match (open, more) {
        (1, _) => format!(
            "receiver {receiver} still has 1 prepared or unknown operation routed to it: \
             {listed}"
        ),
        (_, 0) => format!(
            "receiver {receiver} still has {open} prepared or unknown operations routed to it: \
             {listed}"
        ),
        _ => format!(
            "receiver {receiver} still has {open} prepared or unknown operations routed to it, \
             the first {}: {listed} (and {more} more)",
            first.len()
        ),
    }
}

impl Refusal {
    /// The stable code of SPEC.md, printed as `refused: <code>: <detail>`.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::EmptyReviewer => "empty_reviewer",
            Refusal::ScopeMismatch(_) => "scope_mismatch",
            Refusal::UnsupportedVerdict { .. } => "unsupported_verdict",
            Refusal::StaleVersion { .. } => "stale_version",
            Refusal::NotUnknown { .. } => "not_unknown",
            Refusal::BlindRetry { .. } => "blind_retry",
            Refusal::OperationClosed(_) => "operation_closed",
            Refusal::UnknownOperation(_) => "unknown_operation",
            Refusal::DuplicateOperation(_) => "duplicate_operation",
            Refusal::OriginalNotConfirmed { .. } => "original_not_confirmed",
            Refusal::CompensationEffectMismatch { .. } => "compensation_effect_mismatch",
            Refusal::AlreadyApproved { .. } => "already_approved",
            Refusal::CompensationNotApproved(_) => "compensation_not_approved",
            Refusal::CompensationActionMismatch { .. } => "compensation_action_mismatch",
            Refusal::CloseUnsupported { .. } => "close_unsupported",
            Refusal::ReservedName(_) => "reserved_name",
            Refusal::AdapterMalformed(_) => "adapter_malformed",
            Refusal::AdapterUnknownCapability(_) => "adapter_unknown_capability",
            Refusal::ReceiverExists(_) => "receiver_exists",
            Refusal::BuiltinSingleHost => "builtin_single_host",
            Refusal::ActionRouted { .. } => "action_routed",
            Refusal::ReceiverInUse { .. } => "receiver_in_use",
            Refusal::UnknownReceiver(_) => "unknown_receiver",
            Refusal::AlreadyEscalated { .. } => "already_escalated",
            Refusal::NotEscalated(_) => "not_escalated",
            Refusal::NoReceiver { .. } => "no_receiver",
            Refusal::SecretInArguments(_) => "secret_in_arguments",
            Refusal::ReceiverGone { .. } => "receiver_gone",
            Refusal::ReceiverChanged { .. } => "receiver_changed",
            Refusal::NotContradicted(_) => "not_contradicted",
            Refusal::PermissionDenied { .. } => "permission_denied",
            Refusal::SamePerson { .. } => "same_person",
            Refusal::RuleViolation { .. } => "rule_violation",
            Refusal::InstanceRequired { .. } => "instance_required",
            Refusal::KeepNotAllowed(_) => "keep_not_allowed",
            Refusal::KeepNotAMatch(_) => "keep_not_a_match",
            Refusal::ReasonRequired(_) => "reason_required",
            Refusal::UnbackedClose(_) => "unbacked_close",
            Refusal::RolesInUse { .. } => "roles_in_use",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Refusal;

    fn denied(role: &str) -> String {
        Refusal::PermissionDenied {
            act: "receivers".into(),
            role: role.into(),
            login: "rita".into(),
        }
        .to_string()
    }

    #[test]
    fn refusal_advice_names_the_role_that_allows_the_act_never_the_owner() {
        let reviewer = denied("recon_reviewer");
        assert!(
            reviewer.contains("needs the role recon_reviewer")
                && reviewer.contains("GRANT recon_reviewer TO rita"),
            "{reviewer}"
        );
        let owner = denied("owner");
        assert!(!owner.contains("GRANT"), "{owner}");
        assert!(
            owner.contains("only the outbox's owner") && owner.contains("run it as the owner"),
            "{owner}"
        );
    }
}
