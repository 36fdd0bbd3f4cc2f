//! The MCP gateway (SPEC 13): a downstream MCP server whose tools recon
//! re-exposes, each declared in a TOML file as `pass`, `effect` or
//! `evidence`. [`file`] reads that file; [`downstream`] is the client
//! side of the downstream server; [`adapter`] is the gateway's receiver,
//! `recon gateway-adapter`, which speaks `recon-adapter/1` by calling the
//! downstream's tools. `recon mcp --gateway` (`crate::mcp`) routes each
//! effect call, as an operation, to that receiver, and lends the receiver
//! its running downstream through [`relay`].

pub mod adapter;
pub mod downstream;
pub mod file;
pub mod relay;

pub use file::{load, Gateway, ToolMode};
