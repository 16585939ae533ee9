//! refund-chat: the AI refund agent behind a shop's support chat, run as an
//! AWS Lambda function at `POST /support/refund-chat`.
//!
//! One request runs one agent turn against a pinned OpenAI model with one
//! tool, `issue_refund`, which moves real money through a payments service
//! that has no idempotency key. The design follows from that: at most one
//! payments call per refund scope (a request, or an `Idempotency-Key`),
//! recorded in a ledger before it is made, whatever the model, the network
//! or a retry do.
//!
//! Domain (no I/O of its own):
//! - [`turn`]: the agent turn, its budget, retry and refund latch;
//! - [`refund_tool`]: the tool's schema, argument checks and results;
//! - [`refund`], [`money`]: refund scopes, requests, outcomes, amounts;
//! - [`chat`], [`chat_request`]: the conversation and the request body;
//! - [`ledger`]: the refund ledger's port and records;
//! - [`recorded_refunds`]: "decide, record, then pay" around any refund gateway;
//! - [`idempotency`]: the `Idempotency-Key` header's rules;
//! - [`policy`]: the refund rules that send a refund to a person;
//! - [`approvals`]: a person approving what the rules would not pay alone.
//!
//! Adapters:
//! - [`api`]: the HTTP edge (routing, input, keys, error-to-status map);
//! - [`identity`]: who the customer is (the authorizer's, not the body's);
//! - [`openai`], [`payments`], [`secrets`], [`ledger::dynamo`]: the services;
//! - [`ledger::staff`]: the support team's reads and decisions on the ledger;
//! - [`http_client`]: the outbound HTTP client they share;
//! - [`config`], [`startup`]: configuration and the one place ports are wired;
//! - [`logging`], [`telemetry`]: logs and metrics;
//! - [`untrusted`]: customer- and model-written text, made safe for a terminal, a spreadsheet or a log;
//! - [`clock`]: wall-clock time for records.
//!
//! Binaries: `refund-chat` (the function, `src/main.rs`) and
//! `refund-chat-admin` (approvals and the audit trail, `src/bin/`).
//!
//! [`doubles`] holds in-memory stand-ins for tests and benchmarks.

pub mod api;
pub mod approvals;
pub mod chat;
pub mod chat_request;
pub mod clock;
pub mod config;
pub mod doubles;
pub mod http_client;
pub mod idempotency;
pub mod identity;
pub mod ledger;
pub mod logging;
pub mod money;
pub mod openai;
pub mod payments;
pub mod policy;
pub mod recorded_refunds;
pub mod refund;
pub mod refund_tool;
pub mod secrets;
pub mod startup;
pub mod telemetry;
pub mod turn;
pub mod untrusted;
