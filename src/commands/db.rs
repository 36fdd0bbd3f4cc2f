//! `recon db init`: the PostgreSQL outbox's schema (SPEC 10).
//!
//! The database comes from `--database`, else `RECON_DATABASE_URL`; it is
//! printed only redacted (`DatabaseUrl`). `--workspace` has no meaning
//! here and is a usage error rather than ignored.

use super::open::{open_options, Place, DATABASE_VARIABLE};
use super::render::Render;
use super::{Failure, Out};
use crate::cli::DbInitArgs;
use crate::domain::sanitize::escape;
use crate::workspace::{DatabaseInit, DatabaseUrl, Workspace};

pub struct Init {
    database: DatabaseUrl,
    four_eyes: bool,
}

impl Init {
    pub fn validate(args: DbInitArgs, place: Place) -> Result<Self, Failure> {
        if place.workspace.is_some() {
            return Err(Failure::Usage(
                "db init takes --database URL, not --workspace: it creates a database's schema"
                    .into(),
            ));
        }
        Ok(Init {
            four_eyes: args.four_eyes,
            database: place.database_url()?.ok_or_else(|| {
                Failure::Usage(format!(
                    "db init needs the database: --database URL, or {DATABASE_VARIABLE}"
                ))
            })?,
        })
    }

    pub fn run(self) -> Result<Initialized, Failure> {
        Ok(Initialized(Workspace::init_database(
            &self.database,
            open_options()?,
            self.four_eyes,
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
            "roles: recon_reader, recon_sender, recon_reviewer, recon_closer, recon_approver \
             (grant them to login roles); receivers are registered by the owner, {}; four \
             eyes {}",
            escape(&init.owner),
            if init.four_eyes { "on" } else { "off" },
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0)
    }
}
