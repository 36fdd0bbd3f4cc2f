//! One integration-test binary for all of recon (one link step on two cores).
//! Each module is named after the part of the contract it proves.

mod cli;
mod demo;
mod support;
