//! One integration-test binary for all of recon (one link step on two cores).
//! Each module is named after the part of the contract it proves.

mod audit;
mod bad_input;
mod crash;
mod invariants;
mod model;
mod races;
mod stress;
mod support;
