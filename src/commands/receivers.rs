//! `recon receivers add|list|check|remove`: the registry of receivers
//! (SPEC 8, "Registration").
//!
//! A registration is the one place a person says which program performs
//! which action kinds, so everything about it is checked before anything
//! runs: the name's pattern and the action kinds are usage errors here; the
//! program's `describe` answer, the reserved name and the routes are the
//! facade's refusals (`Workspace::register_receiver`). A registration is
//! printed the same way wherever it appears (`add --json` prints a row of
//! `list --json`), and every part of it a person or an adapter typed is
//! escaped before it reaches a terminal.

use super::open::{open, open_options, Place};
use super::{Failure, Out, Render, EXIT_MISMATCH, EXIT_OK};
use crate::cli::{
    identifier, receiver_name, ReceiversAddArgs, ReceiversCheckArgs, ReceiversListArgs,
    ReceiversRemoveArgs, ReceiversUpdateArgs, UsageError,
};
use crate::domain::sanitize::escape;
use crate::domain::{canonical_json, free_text, names, Description, Registration, ANY_ACTION};
use crate::error::StoreError;
use crate::workspace::{Location, NewReceiver, ReceiverChange, ReceiverCheck, Workspace};
use serde::Serialize;
use std::path::PathBuf;

/// `recon receivers add`.
pub struct Add {
    location: Location,
    name: String,
    actions: Vec<String>,
    source: Source,
}

/// What performs a registered receiver's effects.
enum Source {
    /// recon's own ledger, able to close or not.
    Builtin { can_close: bool },
    Program {
        program: PathBuf,
        args: Vec<String>,
        env: Vec<String>,
        timeout_ms: Option<u64>,
    },
}

impl Add {
    pub fn validate(args: ReceiversAddArgs, place: Place) -> Result<Self, Failure> {
        receiver_name(&args.name)?;
        let mut seen = std::collections::BTreeSet::new();
        for action in &args.actions {
            if action != ANY_ACTION {
                identifier("action kind", action)?;
            }
            if !seen.insert(action.as_str()) {
                return Err(
                    UsageError(format!("action kind {} is listed twice", escape(action))).into(),
                );
            }
        }
        for var in &args.env {
            names::env_var(var).map_err(UsageError)?;
        }
        let source = if args.builtin {
            Source::Builtin {
                can_close: !args.no_close,
            }
        } else {
            let mut command = args.command.into_iter();
            let program = command
                .next()
                .filter(|p| !p.is_empty())
                .ok_or_else(|| UsageError("the program after -- is empty".into()))?;
            Source::Program {
                program: PathBuf::from(program),
                args: command.collect(),
                env: args.env,
                timeout_ms: args.timeout_ms,
            }
        };
        Ok(Add {
            location: place.required()?,
            name: args.name,
            actions: args.actions,
            source,
        })
    }

    /// Registers the receiver, creating the workspace when there is none;
    /// a refused registration leaves no workspace behind.
    pub fn run(self) -> Result<Registered, Failure> {
        let registered =
            Workspace::create_for(&self.location, open_options()?, |ws| match &self.source {
                Source::Builtin { can_close } => {
                    ws.register_builtin(&self.name, &self.actions, *can_close)
                }
                Source::Program {
                    program,
                    args,
                    env,
                    timeout_ms,
                } => ws.register_receiver(&NewReceiver {
                    name: &self.name,
                    actions: &self.actions,
                    program,
                    args,
                    timeout_ms: *timeout_ms,
                    env,
                }),
            })?;
        Ok(Registered(registered))
    }
}

/// A registration as `receivers list --json` prints it.
#[derive(Serialize)]
struct Row<'a> {
    name: &'a str,
    actions: &'a [String],
    /// recon's own ledger: no program of its own (`program` is empty in
    /// the JSON, whose fields SPEC 8 fixes).
    #[serde(skip)]
    builtin: bool,
    program: &'a str,
    args: &'a [String],
    timeout_ms: u64,
    can_close: bool,
    complete: bool,
    authoritative: bool,
    describe_sha256: &'a str,
    /// The variables the adapter is passed (`--env`), by name only.
    env: &'a [String],
    /// The version the adapter's `describe` gives.
    version: &'a str,
    /// The store behind the adapter, as its `describe` names it.
    instance: Option<&'a str>,
    /// The registration's own version (a new one at each update).
    registration_version: i64,
}

impl<'a> Row<'a> {
    fn of(registration: &'a Registration) -> Self {
        Row {
            name: &registration.name,
            actions: &registration.actions,
            builtin: registration.builtin,
            program: &registration.program,
            args: &registration.args,
            timeout_ms: registration.timeout_ms,
            can_close: registration.describe.can_close,
            complete: registration.describe.query.complete,
            authoritative: registration.describe.query.authoritative,
            describe_sha256: &registration.describe_sha256,
            env: &registration.env,
            version: &registration.describe.version,
            instance: registration.describe.instance.as_deref(),
            registration_version: registration.version,
        }
    }

    /// One line: name, routes, ceiling, timeout, the adapter's version and
    /// instance, the variables it is passed, then the command line.
    fn line(&self) -> String {
        let program = if self.builtin {
            "(recon's own ledger)".to_string()
        } else {
            shell_word(self.program)
        };
        let command: Vec<String> = std::iter::once(program)
            .chain(self.args.iter().map(|arg| shell_word(arg)))
            .collect();
        let env = match self.env {
            [] => String::new(),
            names => format!("  env {}", escape(&names.join(","))),
        };
        format!(
            "{}  actions {}  can_close {} complete {} authoritative {}  timeout {} ms  \
             version {} (registration version {})  instance {}{env}  {}",
            escape(self.name),
            escape(&self.actions.join(",")),
            self.can_close,
            self.complete,
            self.authoritative,
            self.timeout_ms,
            escape(self.version),
            self.registration_version,
            self.instance
                .map_or_else(|| "(none)".to_string(), |i| escape(i).into_owned()),
            command.join(" ")
        )
    }
}

/// A word of a command line as a shell would need it typed, escaped for
/// the terminal: quoted when it holds anything but plain characters.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./=:@%+,-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", escape(&word.replace('\'', r"'\''")))
    }
}

/// What `add` stored.
pub struct Registered(Registration);

impl Render for Registered {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        warn_unset_env(&self.0, out);
        out.line(format!("registered {}", Row::of(&self.0).line()))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        warn_unset_env(&self.0, out);
        out.json(&Row::of(&self.0))
    }
}

/// A warning on stderr for each `--env` variable of a registration that is
/// not set where recon runs now: the adapter is started with only the
/// variables set in each command's own environment, so one unset here
/// (a password, a host) is missing from every call made from here, and a
/// failed call later is all that would show it.
fn warn_unset_env(registration: &Registration, out: &mut Out) {
    for name in &registration.env {
        if std::env::var_os(name).is_none() {
            out.stderr_line(&format!(
                "warning: --env {} is not set here, so {} gets no such variable when recon \
                 runs it from this environment; set it where recon runs",
                escape(name),
                escape(&registration.name)
            ));
        }
    }
}

/// `recon receivers update`.
pub struct Update {
    location: Location,
    name: String,
    command: Option<(PathBuf, Vec<String>)>,
    env: Option<Vec<String>>,
    timeout_ms: Option<u64>,
}

impl Update {
    pub fn validate(args: ReceiversUpdateArgs, place: Place) -> Result<Self, Failure> {
        receiver_name(&args.name)?;
        for var in &args.env {
            names::env_var(var).map_err(UsageError)?;
        }
        let mut command = args.command.into_iter();
        let command = match command.next() {
            None => None,
            Some(program) if program.is_empty() => {
                return Err(UsageError("the program after -- is empty".into()).into())
            }
            Some(program) => Some((PathBuf::from(program), command.collect())),
        };
        let env = (!args.env.is_empty()).then_some(args.env);
        if command.is_none() && env.is_none() && args.timeout_ms.is_none() {
            return Err(UsageError(
                "nothing to change: give --timeout-ms, --env or `-- PROGRAM [ARG...]`".into(),
            )
            .into());
        }
        Ok(Update {
            location: place.required()?,
            name: args.name,
            command,
            env,
            timeout_ms: args.timeout_ms,
        })
    }

    pub fn run(self) -> Result<Updated, Failure> {
        let mut ws = open(&self.location, false)?;
        let change = ReceiverChange {
            name: &self.name,
            command: self
                .command
                .as_ref()
                .map(|(program, args)| (program.as_path(), args.as_slice())),
            env: self.env.as_deref(),
            timeout_ms: self.timeout_ms,
            accept_claims: false,
        };
        Ok(Updated(ws.update_receiver(&change)?))
    }
}

/// A registration as it now stands, after an update.
pub struct Updated(Registration);

impl Render for Updated {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        warn_unset_env(&self.0, out);
        out.line(format!(
            "updated {} (registration {}, version {})",
            Row::of(&self.0).line(),
            self.0.id,
            self.0.version
        ))
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        warn_unset_env(&self.0, out);
        out.json(&Row::of(&self.0))
    }
}

/// `recon receivers list`.
pub struct List {
    location: Location,
}

impl List {
    pub fn validate(_args: ReceiversListArgs, place: Place) -> Result<Self, Failure> {
        Ok(List {
            location: place.required()?,
        })
    }

    pub fn run(self) -> Result<Listed, Failure> {
        Ok(Listed(open(&self.location, false)?.receivers()?))
    }
}

pub struct Listed(Vec<Registration>);

impl Render for Listed {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        if self.0.is_empty() {
            return out.line("no receivers registered; every action kind goes to builtin");
        }
        for registration in &self.0 {
            out.line(Row::of(registration).line())?;
        }
        Ok(())
    }

    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        out.json(&self.0.iter().map(Row::of).collect::<Vec<_>>())
    }
}

/// `recon receivers check`.
pub struct Check {
    location: Location,
    name: String,
    accept: bool,
}

impl Check {
    pub fn validate(args: ReceiversCheckArgs, place: Place) -> Result<Self, Failure> {
        receiver_name(&args.name)?;
        Ok(Check {
            location: place.required()?,
            name: args.name,
            accept: args.accept,
        })
    }

    /// Compares; with `--accept`, a differing answer is then stored as a
    /// new version of the registration (and the result says so).
    pub fn run(self) -> Result<Checked, Failure> {
        let mut ws = open(&self.location, false)?;
        let check = ws.check_receiver(&self.name)?;
        let accepted = match (self.accept, check.unchanged) {
            (true, false) => Some(ws.update_receiver(&ReceiverChange {
                name: &self.name,
                accept_claims: true,
                ..Default::default()
            })?),
            _ => None,
        };
        Ok(Checked(check, accepted))
    }
}

/// A stored describe answer beside a fresh one: a finding (exit 1) when
/// they differ.
pub struct Checked(ReceiverCheck, Option<Registration>);

impl Render for Checked {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        let check = &self.0;
        if check.unchanged {
            return out.line(format!(
                "{}: describe unchanged (sha256 {})",
                escape(&check.name),
                escape(&check.stored_sha256)
            ));
        }
        out.line(format!("{}: describe differs", escape(&check.name)))?;
        out.line(format!(
            "  stored  sha256 {}  {}",
            escape(&check.stored_sha256),
            description_line(&check.stored)?
        ))?;
        out.line(format!(
            "  current sha256 {}  {}",
            escape(&check.current_sha256),
            description_line(&check.current)?
        ))?;
        match &self.1 {
            Some(accepted) => out.line(format!(
                "  accepted: stored as version {} of registration {}",
                accepted.version, accepted.id
            )),
            None => Ok(()),
        }
    }

    /// The comparison; with `--accept`, also `accepted_version`.
    fn json(&self, out: &mut Out) -> Result<(), Failure> {
        let mut value = serde_json::to_value(&self.0)
            .map_err(|e| Failure::from(StoreError::Corrupt(e.to_string())))?;
        if let (Some(accepted), Some(object)) = (&self.1, value.as_object_mut()) {
            object.insert("accepted_version".into(), accepted.version.into());
        }
        out.json(&value)
    }

    fn exit_code(&self) -> i32 {
        if self.0.unchanged || self.1.is_some() {
            EXIT_OK
        } else {
            EXIT_MISMATCH
        }
    }
}

/// A describe answer as one line of canonical JSON, escaped.
fn description_line(description: &Description) -> Result<String, Failure> {
    let value = serde_json::to_value(description)
        .map_err(|e| Failure::from(StoreError::Corrupt(e.to_string())))?;
    Ok(escape(&canonical_json(&value)).into_owned())
}

/// `recon receivers remove`.
pub struct Remove {
    location: Location,
    name: String,
    /// `--lost --reason TEXT`: the reason (clap has required both).
    lost: Option<String>,
}

impl Remove {
    pub fn validate(args: ReceiversRemoveArgs, place: Place) -> Result<Self, Failure> {
        receiver_name(&args.name)?;
        let lost = match (args.lost, args.reason) {
            (true, Some(reason)) => {
                free_text("--reason", &reason).map_err(Failure::Usage)?;
                Some(reason)
            }
            (false, None) => None,
            _ => {
                return Err(Failure::Usage(
                    "--lost and --reason TEXT go together".into(),
                ))
            }
        };
        Ok(Remove {
            location: place.required()?,
            name: args.name,
            lost,
        })
    }

    pub fn run(self) -> Result<Removed, Failure> {
        let mut ws = open(&self.location, false)?;
        let escalated = match &self.lost {
            None => {
                ws.remove_receiver(&self.name)?;
                None
            }
            Some(reason) => Some(ws.remove_lost_receiver(&self.name, reason)?),
        };
        Ok(Removed {
            name: self.name,
            escalated,
        })
    }
}

/// A removed registration, and with `--lost` the operations escalated.
pub struct Removed {
    name: String,
    escalated: Option<Vec<String>>,
}

impl Render for Removed {
    fn text(&self, out: &mut Out) -> Result<(), Failure> {
        out.line(format!("removed receiver {}", escape(&self.name)))?;
        if let Some(escalated) = &self.escalated {
            out.line(format!(
                "lost: escalated {} open operation(s){}{}",
                escalated.len(),
                if escalated.is_empty() { "" } else { ": " },
                escape(&escalated.join(", "))
            ))?;
        }
        Ok(())
    }
}
