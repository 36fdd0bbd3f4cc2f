//! `recon mcp` (SPEC 13): the agent's door, an MCP server on stdin and
//! stdout over the outbox a workspace directory or a database holds. The
//! server itself is `crate::mcp`; this opens the outbox there with the
//! environment's storage options and prints nothing of its own (stdout
//! is the protocol's). `--gateway FILE` is read and checked here, before
//! anything starts; `recon gateway-adapter` is here too.

use super::open::{open_options, Place};
use super::{Failure, Out, Render};
use crate::cli::{GatewayAdapterArgs, McpArgs};
use crate::error::StoreError;
use crate::gateway::Gateway;
use crate::mcp::ServeError;
use crate::receiver::protocol::Verb;
use crate::workspace::{Location, Workspace};

/// `recon mcp`: where the outbox is.
pub struct Mcp {
    location: Location,
    gateway: Option<Gateway>,
}

impl Mcp {
    pub fn validate(args: McpArgs, place: Place) -> Result<Self, Failure> {
        let gateway = args.gateway.as_deref().map(load).transpose()?;
        Ok(Mcp {
            location: place.required()?,
            gateway,
        })
    }

    /// Serves until the client closes stdin, then returns with every call
    /// it was given carried out.
    pub fn run(self) -> Result<Served, Failure> {
        let options = open_options()?;
        let location = self.location;
        let gateway = self.gateway;
        crate::mcp::serve(move || Ok(Workspace::open(&location, options)?), gateway).map_err(
            |e| match e {
                ServeError::Open(error) => Failure::Engine(error),
                ServeError::Runtime(why) => {
                    Failure::Engine(StoreError::Io(std::io::Error::other(why)).into())
                }
            },
        )?;
        Ok(Served)
    }
}

/// A server that ran and stopped: nothing to print.
pub struct Served;

impl Render for Served {
    fn text(&self, _out: &mut Out) -> Result<(), Failure> {
        Ok(())
    }

    fn json(&self, _out: &mut Out) -> Result<(), Failure> {
        Ok(())
    }
}

/// A gateway file, checked; a bad one is a usage error of one line.
fn load(path: &std::path::Path) -> Result<Gateway, Failure> {
    crate::gateway::load(path).map_err(Failure::Usage)
}

/// `recon gateway-adapter --gateway FILE VERB` (SPEC 13): the gateway's
/// receiver, one call per process.
pub struct GatewayAdapter {
    gateway: Gateway,
    verb: Verb,
}

impl GatewayAdapter {
    pub fn validate(args: GatewayAdapterArgs, _place: Place) -> Result<Self, Failure> {
        let verb = Verb::parse(&args.verb)
            .ok_or_else(|| Failure::Usage(format!("unknown verb {}", args.verb)))?;
        Ok(GatewayAdapter {
            gateway: load(&args.gateway)?,
            verb,
        })
    }

    pub fn run(self) -> Result<Answered, Failure> {
        let code = crate::gateway::adapter::serve(&self.gateway, self.verb).map_err(Failure::io)?;
        Ok(Answered(code))
    }
}

/// What the gateway's adapter answered, as its diagnostic exit code.
pub struct Answered(i32);

impl Render for Answered {
    fn text(&self, _out: &mut Out) -> Result<(), Failure> {
        Ok(())
    }

    fn json(&self, _out: &mut Out) -> Result<(), Failure> {
        Ok(())
    }

    fn exit_code(&self) -> i32 {
        self.0
    }
}
