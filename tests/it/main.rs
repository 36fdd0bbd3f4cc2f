//! One integration-test binary for all of recon (one link step on two cores).
//! Each module is named after the part of the contract it proves.

mod adapters;
mod audit;
mod bad_input;
mod canonical;
mod classify;
mod cli;
mod console;
mod crash;
mod creation;
mod demo;
mod engine;
mod experiment;
mod guards;
mod honest;
mod invariants;
mod json;
mod layout;
mod live;
mod mcp;
mod metrics;
mod model;
mod outage;
mod pg_store;
mod policy;
mod races;
mod random_kill;
mod readme;
mod real_receivers;
mod resolve;
mod stores;
mod stress;
mod support;
mod terminal;
mod triage;
mod upgrade;
