//! `recon db init`: the PostgreSQL outbox's schema (SPEC 10); `recon db
//! status`: what it is and who may act on it (SPEC 12); `recon db grant`
//! and `recon db revoke`: its roles, given and taken by its owner; `recon
//! db upgrade`: an older recon's outbox brought to this schema (SPEC 10).
//!
//! The database comes from `--database`, else `RECON_DATABASE_URL`; it is
//! printed only redacted (`DatabaseUrl`). `--workspace` has no meaning
//! here and is a usage error rather than ignored.

use super::open::{open_options, Place, DATABASE_VARIABLE};
use super::render::Render;
use super::{Failure, Out};
use crate::cli::{DbGrantArgs, DbInitArgs, DbStatusArgs, DbUpgradeArgs};
use crate::domain::sanitize::escape;
use crate::domain::team::{valid_roles_prefix, TeamRole, MAX_ROLES_PREFIX};
use crate::workspace::{
    DatabaseInit, DatabaseStatus, DatabaseUpgrade, DatabaseUrl, LoginRoles, Workspace,
};

pub struct Init {
    database: DatabaseUrl,
    four_eyes: bool,
    roles: Option<String>,
}

impl Init {
    pub fn validate(args: DbInitArgs, place: Place) -> Result<Self, Failure> {
        if let Some(prefix) = &args.roles {
            if !valid_roles_prefix(prefix) {
                return Err(Failure::Usage(format!(
                    "--roles {}: a roles' prefix is a lower-case letter, then lower-case \
                     letters, digits and _, at most {MAX_ROLES_PREFIX} characters",
                    escape(prefix)
                )));
            }
        }
        Ok(Init {
            four_eyes: args.four_eyes,
            roles: args.roles,
            database: database("init", place)?,
        })
    }

    pub fn run(self) -> Result<Initialized, Failure> {
        Ok(Initialized(Workspace::init_database(
            &self.database,
            open_options()?,
            self.four_eyes,
            self.roles.as_deref(),
        )?))
    }
}

pub struct Initialized(DatabaseInit);

impl Render for Initialized {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let init = &self.0;
        let what = if init.created {
            "created the recon outbox"
        } else {
            "the recon outbox was there already, nothing changed:"
        };
        out.line(format!(
            "{what} schema version {} in {} (workspace id {})",
            init.schema_version,
            escape(&init.database),
            escape(&init.workspace_id),
        ))?;
        out.line(format!(
            "roles: {} (grant them with `recon db grant`); receivers are registered by the \
             owner, {}; four eyes {}",
            init.roles.join(", "),
            escape(&init.owner),
            if init.four_eyes { "on" } else { "off" },
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

/// The database a `db` command names: `--database`, else
/// `RECON_DATABASE_URL`; `--workspace` is a usage error.
fn database(verb: &str, place: Place) -> Result<DatabaseUrl, Failure> {
    if place.workspace.is_some() {
        return Err(Failure::Usage(format!(
            "db {verb} takes --database URL, not --workspace: it is about a database's outbox"
        )));
    }
    place.database_url()?.ok_or_else(|| {
        Failure::Usage(format!(
            "db {verb} needs the database: --database URL, or {DATABASE_VARIABLE}"
        ))
    })
}

pub struct Status {
    database: DatabaseUrl,
}

impl Status {
    pub fn validate(_args: DbStatusArgs, place: Place) -> Result<Self, Failure> {
        Ok(Status {
            database: database("status", place)?,
        })
    }

    pub fn run(self) -> Result<StatusReport, Failure> {
        Ok(StatusReport(Workspace::database_status(
            &self.database,
            open_options()?,
        )?))
    }
}

pub struct StatusReport(DatabaseStatus);

impl Render for StatusReport {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let status = &self.0;
        let on = |set: bool| if set { "on" } else { "off" };
        out.line(format!(
            "recon outbox in {}: schema version {}, roles {}_*, four eyes {}, TLS {} on this \
             connection",
            escape(&status.database),
            status.schema,
            escape(&status.roles_prefix),
            on(status.four_eyes),
            on(status.tls),
        ))?;
        out.line(format!(
            "owner (registers receivers): {}",
            escape(&status.owner)
        ))?;
        if status.logins.is_empty() {
            out.line("no login holds its roles yet (the owner grants them)")?;
        }
        for login in &status.logins {
            out.line(format!(
                "  {}: {}",
                escape(&login.login),
                escape(&login.roles.join(", "))
            ))?;
        }
        if !status.foreign_grants.is_empty() {
            out.line("granted by another role than the owner (these count for nothing):")?;
        }
        for grant in &status.foreign_grants {
            out.line(format!(
                "  {}: {}, granted by {}",
                escape(&grant.login),
                escape(&grant.role),
                escape(&grant.grantor)
            ))?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

/// `recon db grant` or `recon db revoke` (SPEC 12): a login and the short
/// names of the roles, checked before anything connects.
pub struct Grant {
    database: DatabaseUrl,
    login: String,
    roles: Vec<TeamRole>,
    grant: bool,
}

impl Grant {
    pub fn validate(args: DbGrantArgs, grant: bool, place: Place) -> Result<Self, Failure> {
        let verb = if grant { "grant" } else { "revoke" };
        let mut roles = Vec::new();
        for name in &args.roles {
            let role = TeamRole::from_short(name.trim()).ok_or_else(|| {
                Failure::Usage(format!(
                    "db {verb}: {} is no role of the outbox: one of reader, sender, reviewer, \
                     closer, approver",
                    escape(name)
                ))
            })?;
            if !roles.contains(&role) {
                roles.push(role);
            }
        }
        if args.login.is_empty() || args.login.len() > 63 {
            return Err(Failure::Usage(format!(
                "db {verb}: a login's name has 1 to 63 bytes"
            )));
        }
        Ok(Grant {
            database: database(verb, place)?,
            login: args.login,
            roles,
            grant,
        })
    }

    pub fn run(self) -> Result<Granted, Failure> {
        let held = Workspace::change_grants(
            &self.database,
            open_options()?,
            &self.login,
            &self.roles,
            self.grant,
        )?;
        Ok(Granted(held))
    }
}

pub struct Granted(LoginRoles);

impl Render for Granted {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let held = &self.0;
        let roles = if held.roles.is_empty() {
            "no role of the outbox".to_string()
        } else {
            held.roles.join(", ")
        };
        out.line(format!(
            "{} now holds {}",
            escape(&held.login),
            escape(&roles)
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}

pub struct Upgrade {
    database: DatabaseUrl,
}

impl Upgrade {
    pub fn validate(_args: DbUpgradeArgs, place: Place) -> Result<Self, Failure> {
        Ok(Upgrade {
            database: database("upgrade", place)?,
        })
    }

    pub fn run(self) -> Result<Upgraded, Failure> {
        Ok(Upgraded(Workspace::upgrade_database(
            &self.database,
            open_options()?,
        )?))
    }
}

pub struct Upgraded(DatabaseUpgrade);

impl Render for Upgraded {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let upgrade = &self.0;
        match upgrade.seq {
            Some(seq) => out.line(format!(
                "upgraded the recon outbox in {} from schema version {} to {} (journal entry \
                 #{seq}, upgraded)",
                escape(&upgrade.database),
                upgrade.from,
                upgrade.to,
            )),
            None => out.line(format!(
                "the recon outbox in {} is at schema version {} already, nothing changed",
                escape(&upgrade.database),
                upgrade.to,
            )),
        }
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}
