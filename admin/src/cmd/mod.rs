//! One file per verb, each a `run` that prints for a person and returns
//! how it ended; `main` maps the ending to the exit status.

pub mod conversation;
pub mod decide;
pub mod export;
pub mod forget;
pub mod handoffs;
pub mod pending;
pub mod replay_task;
pub mod routing;
pub mod sample;
pub mod show;
pub mod unknown;
