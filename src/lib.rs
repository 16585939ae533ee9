//! refund-chat: the AI refund agent behind a shop's support chat, run as an
//! AWS Lambda function at `POST /support/refund-chat`.
//!
//! One request runs one agent turn against a pinned OpenAI model with one
//! tool, `issue_refund`, which moves real money through a payments service
//! that has no idempotency key. The design follows from that: at most one
//! payments call per request, whatever the model or the network do.
//!
//! Domain (no I/O of its own):
//! - [`turn`]: the agent turn, its budget, retry and refund latch;
//! - [`refund_tool`]: the tool's schema and argument checks;
//! - [`chat`], [`refund`]: what the turn needs from a model and from payments.
//!
//! Adapters:
//! - [`api`]: the HTTP edge (routing, input, error-to-status map);
//! - [`openai`], [`payments`], [`secrets`]: the three services;
//! - [`config`]: start-up configuration;
//! - [`logging`], [`telemetry`], [`redact`]: logs, metrics, and what they may not contain.

pub mod api;
pub mod chat;
pub mod chat_request;
pub mod config;
pub mod logging;
pub mod openai;
pub mod payments;
pub mod redact;
pub mod refund;
pub mod refund_tool;
pub mod secrets;
pub mod telemetry;
pub mod turn;
