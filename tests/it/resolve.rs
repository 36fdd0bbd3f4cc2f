//! Issue 21: one receiver's queue (`ops --receiver`) and the provable
//! cases resolved by a named policy (`recon resolve`, SPEC 9), and a long
//! resolve stopped with Ctrl-C.

mod by_receiver;
mod interrupt;
mod policy;
