//! One file per verb, each a `run` that prints for a person and returns
//! how it ended; `main` maps the ending to the exit status.

pub mod approve;
pub mod close_handoff;
pub mod conversation;
pub mod export;
pub mod forget;
pub mod handoffs;
pub mod pending;
pub mod reissue;
pub mod reject;
pub mod replay_task;
pub mod reply;
pub mod resolve;
pub mod routing;
pub mod sample;
pub mod show;
pub mod unknown;
pub mod verdict;
