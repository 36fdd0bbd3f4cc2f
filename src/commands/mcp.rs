//! `recon mcp` (SPEC 13): the agent's door, an MCP server on stdin and
//! stdout over the outbox a workspace directory or a database holds. The
//! server itself is `crate::mcp`; this opens the outbox there with the
//! environment's storage options and prints nothing of its own (stdout
//! is the protocol's).

use super::open::{open_options, Place};
use super::{Failure, Out, Render};
use crate::cli::McpArgs;
use crate::error::StoreError;
use crate::mcp::ServeError;
use crate::workspace::{Location, Workspace};

/// `recon mcp`: where the outbox is.
pub struct Mcp {
    location: Location,
}

impl Mcp {
    pub fn validate(_args: McpArgs, place: Place) -> Result<Self, Failure> {
        Ok(Mcp {
            location: place.required()?,
        })
    }

    /// Serves until the client closes stdin, then returns with every call
    /// it was given carried out.
    pub fn run(self) -> Result<Served, Failure> {
        let options = open_options()?;
        let location = self.location;
        crate::mcp::serve(move || Ok(Workspace::open(&location, options)?)).map_err(
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
