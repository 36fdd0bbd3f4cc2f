//! `recon` keeps side effects whose receipt was lost durably `unknown`,
//! refuses every blind retry, gathers receiver evidence, classifies it
//! conservatively, and lets a named human reviewer decide.
//!
//! The library holds the whole engine; the binary (`src/main.rs`) only parses
//! arguments, calls it, and maps errors to exit codes. `ARCHITECTURE.md` has
//! the map.

pub mod actlog;
pub mod audit;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod console;
pub mod demo;
pub mod dispatch;
pub mod domain;
pub mod error;
pub mod experiment;
pub mod faults;
pub mod gateway;
pub mod mcp;
pub mod receiver;
pub mod settings;
mod store;
pub mod workspace;

pub use domain::sanitize;

pub use error::{Error, Refusal, Result, StoreError};
pub use settings::OpenOptions;
pub use workspace::{ConnectError, DatabaseUrl, Location, Workspace};
