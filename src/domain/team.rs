//! Who may do what in team mode (SPEC 10): the roles an operator grants,
//! and each act's roles and the journal entries it may write.
//!
//! The table is the rule; the PostgreSQL outbox's `db init` renders it
//! into the functions and triggers that enforce it (`store::postgres::
//! roles`), so what the database refuses and what recon says it needs are
//! one table. On a workspace directory nobody is authenticated, and the
//! acts carry no role.

use std::fmt;

/// A role `recon db init` creates (`NOLOGIN`), granted to login roles by
/// the operator; or the owner, the role that ran `db init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TeamRole {
    /// Reads everything, changes nothing.
    Reader,
    /// Prepares and dispatches, and records what the receiver answered.
    Sender,
    /// Decides, notes, escalates, acknowledges and observes.
    Reviewer,
    /// Closes operations at their receivers and records the closing reads.
    Closer,
    /// Approves compensations.
    Approver,
    /// The role that ran `db init`: registers, updates and removes
    /// receivers (a registered program runs on every reviewer's host).
    Owner,
}

impl TeamRole {
    /// The roles `db init` creates, in the order it creates them.
    pub const CREATED: [TeamRole; 5] = [
        TeamRole::Reader,
        TeamRole::Sender,
        TeamRole::Reviewer,
        TeamRole::Closer,
        TeamRole::Approver,
    ];

    /// The role's name under the default prefix (`recon_reviewer`); the
    /// owner has none of its own (it is whichever role ran `db init`).
    pub fn as_str(self) -> &'static str {
        match self {
            TeamRole::Reader => "recon_reader",
            TeamRole::Sender => "recon_sender",
            TeamRole::Reviewer => "recon_reviewer",
            TeamRole::Closer => "recon_closer",
            TeamRole::Approver => "recon_approver",
            TeamRole::Owner => "owner",
        }
    }

    /// The name `db grant`, `db revoke` and `db status` use, and the
    /// database's act check is asked with: `reviewer` for
    /// `recon_reviewer` (the part after the roles' prefix).
    pub fn short(self) -> &'static str {
        let name = self.as_str();
        name.strip_prefix("recon_").unwrap_or(name)
    }

    /// The role's name in an outbox whose roles carry `prefix` (SPEC 12,
    /// "Roles belong to one outbox"): `PREFIX_reviewer`; the owner's is
    /// `owner` under every prefix.
    pub fn name_in(self, prefix: &str) -> String {
        match self {
            TeamRole::Owner => self.short().to_string(),
            _ => format!("{prefix}_{}", self.short()),
        }
    }

    /// A created role by its short name.
    pub fn from_short(name: &str) -> Option<TeamRole> {
        TeamRole::CREATED
            .into_iter()
            .find(|role| role.short() == name)
    }
}

/// The prefix of the roles `db init` creates when it is given none, and
/// of an outbox that records none (every outbox made before the prefix).
pub const DEFAULT_ROLES_PREFIX: &str = "recon";

/// The longest prefix: its longest role name, `PREFIX_approver`, stays
/// within PostgreSQL's 63 bytes of a name.
pub const MAX_ROLES_PREFIX: usize = 40;

/// Whether `prefix` may name an outbox's roles: a lower-case letter, then
/// lower-case letters, digits and `_`, at most [`MAX_ROLES_PREFIX`] bytes,
/// so every role name is a plain SQL identifier that needs no quoting.
pub fn valid_roles_prefix(prefix: &str) -> bool {
    let mut chars = prefix.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && prefix.len() <= MAX_ROLES_PREFIX
}

impl fmt::Display for TeamRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One write transaction of the outbox, as authorization sees it: which
/// roles it needs (all of them) and which journal entries it may append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Act {
    Prepare,
    Dispatch,
    /// A receipt the receiver printed for a dispatch.
    Receipt,
    Decide,
    Observe,
    Note,
    Escalate,
    Acknowledge,
    /// A failed call of an adapter's `query`: part of a reviewer's read.
    QueryFailed,
    Close,
    Approve,
    /// A decision by a named policy (`recon resolve`).
    Resolve,
    Receivers,
    /// `recon db upgrade`: the outbox brought to this build's schema.
    Upgrade,
    /// `recon db init`: the outbox's settings, journaled (SPEC 12).
    Settings,
}

impl Act {
    pub const ALL: [Act; 15] = [
        Act::Prepare,
        Act::Dispatch,
        Act::Receipt,
        Act::Decide,
        Act::Observe,
        Act::Note,
        Act::Escalate,
        Act::Acknowledge,
        Act::QueryFailed,
        Act::Close,
        Act::Approve,
        Act::Resolve,
        Act::Receivers,
        Act::Upgrade,
        Act::Settings,
    ];

    /// Its name, as the database's `recon_begin_write` is told it.
    pub fn as_str(self) -> &'static str {
        match self {
            Act::Prepare => "prepare",
            Act::Dispatch => "dispatch",
            Act::Receipt => "receipt",
            Act::Decide => "decide",
            Act::Observe => "observe",
            Act::Note => "note",
            Act::Escalate => "escalate",
            Act::Acknowledge => "acknowledge",
            Act::QueryFailed => "query_failed",
            Act::Close => "close",
            Act::Approve => "approve",
            Act::Resolve => "resolve",
            Act::Receivers => "receivers",
            Act::Upgrade => "upgrade",
            Act::Settings => "settings",
        }
    }

    /// The roles the act needs, every one of them.
    pub fn roles(self) -> &'static [TeamRole] {
        match self {
            Act::Prepare | Act::Dispatch | Act::Receipt => &[TeamRole::Sender],
            Act::Decide
            | Act::Observe
            | Act::Note
            | Act::Escalate
            | Act::Acknowledge
            | Act::QueryFailed => &[TeamRole::Reviewer],
            Act::Close => &[TeamRole::Closer],
            Act::Approve => &[TeamRole::Approver],
            Act::Resolve => &[TeamRole::Closer, TeamRole::Reviewer],
            Act::Receivers | Act::Upgrade | Act::Settings => &[TeamRole::Owner],
        }
    }

    /// The kinds of journal entry the act may append.
    pub fn entries(self) -> &'static [&'static str] {
        match self {
            Act::Prepare => &["prepared"],
            Act::Dispatch => &["dispatched", "call_failed"],
            Act::Receipt => &["receipt"],
            Act::Decide => &["observed", "decided"],
            Act::Observe => &["observed"],
            Act::Note => &["noted"],
            Act::Escalate => &["escalated", "deescalated"],
            Act::Acknowledge => &["acknowledged"],
            Act::QueryFailed => &["call_failed"],
            Act::Close => &["closed", "close_requested", "observed", "call_failed"],
            Act::Approve => &["approved"],
            Act::Resolve => &["decided"],
            // `escalated`: each open operation of a receiver removed as
            // lost (the database accepts it only there, `roles.rs`).
            Act::Receivers => &[
                "receiver_registered",
                "receiver_updated",
                "receiver_removed",
                "escalated",
            ],
            // The upgrade journals the settings it found (and the prefix
            // it records for an outbox made before one).
            Act::Upgrade => &["upgraded", "settings"],
            Act::Settings => &["settings"],
        }
    }

    /// The act that records a failed call of an adapter's verb (`apply`,
    /// `query`, `close`): the act the call was part of.
    pub fn of_failed_call(verb: &str) -> Act {
        match verb {
            "apply" => Act::Dispatch,
            "close" => Act::Close,
            _ => Act::QueryFailed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_act_needs_a_role_and_a_reader_is_needed_by_none() {
        for act in Act::ALL {
            assert!(!act.roles().is_empty(), "{act:?}");
            assert!(!act.entries().is_empty(), "{act:?}");
            assert!(!act.roles().contains(&TeamRole::Reader), "{act:?}");
        }
    }

    #[test]
    fn a_roles_name_carries_its_outboxs_prefix_and_the_owners_none() {
        assert_eq!(TeamRole::Reviewer.name_in("team_a"), "team_a_reviewer");
        assert_eq!(TeamRole::Reader.name_in("recon"), TeamRole::Reader.as_str());
        assert_eq!(TeamRole::Owner.name_in("team_a"), "owner");
        for role in TeamRole::CREATED {
            assert_eq!(TeamRole::from_short(role.short()), Some(role));
        }
    }

    #[test]
    fn a_roles_prefix_is_a_plain_lower_case_identifier_that_leaves_room_for_approver() {
        for good in ["recon", "team_a", "a", "t2", &"a".repeat(MAX_ROLES_PREFIX)] {
            assert!(valid_roles_prefix(good), "{good}");
        }
        let long = "a".repeat(MAX_ROLES_PREFIX + 1);
        for bad in [
            "", "Recon", "2team", "_x", "team-a", "team a", "tëam", "a\"", &long,
        ] {
            assert!(!valid_roles_prefix(bad), "{bad}");
        }
        let longest = TeamRole::Approver.name_in(&"a".repeat(MAX_ROLES_PREFIX));
        assert!(longest.len() <= 63, "{longest}");
    }

    #[test]
    fn resolve_needs_the_closer_and_the_reviewer() {
        assert_eq!(
            Act::Resolve.roles(),
            &[TeamRole::Closer, TeamRole::Reviewer]
        );
    }
}
