//! Issue 21: one receiver's queue (`ops --receiver`) and the provable
//! cases resolved by a named policy (`recon resolve`, SPEC 9).

mod by_receiver;
mod policy;
