//! refund-chat: the AI refund agent behind a shop's support chat, run as an
//! AWS Lambda function at `POST /support/refund-chat`.
//!
//! One request runs one agent turn against a pinned OpenAI model with one
//! tool, `issue_refund`, which moves real money through a payments service
//! that has no idempotency key, in a conversation the function keeps. The
//! design follows from that: at most one
//! payments call per refund scope (a request, or an `Idempotency-Key`),
//! recorded in a ledger before it is made, whatever the model, the network
//! or a retry do.
//!
//! Each folder is a port with its adapters beside it, and the folders stand
//! on floors: a folder imports only from folders below it, and no file
//! imports a sibling that imports it (`tests/architecture.rs` checks both
//! against the imports and prints the floors; `docs/architecture.md` has
//! them). From the ground up:
//!
//! - [`budget`]: the customers' turn and token windows (the counters are the
//!   ledger's). [`refund`]: the domain. Scopes, requests, outcomes, money,
//!   the customer's message, the policy's rules, the `issue_refund` tool;
//!   the [`refund::RefundGateway`] port and its payments adapter.
//!   [`orders`]: the shop's order system, read only (contract 16): the
//!   port, its HTTP adapter, a memory double and the `get_order` tool.
//! - [`handoff`]: handing a conversation to a person: the screen before the
//!   model, the `hand_off_to_person` tool, the fixed replies. [`chat`]: the
//!   model port and its OpenAI adapter. [`help`]: the shop's help centre
//!   (contract 17): the articles, loaded and checked once, their BM25
//!   index and the `search_help_centre` tool.
//! - [`conversation`]: what a turn adds to a conversation and the window
//!   the model sees. [`router`]: the routing call before the agent and
//!   what code decides from its labels (contract 21). [`tools`]: the
//!   agent's tools, one list and one file a tool: when each is offered and
//!   how its call is carried out against the ports. [`turn`]: one agent
//!   turn, its budget and retry, the loop that hands each call to the tools. [`visitor`]: people with no token (contract 27): their token,
//!   kept only as a hash, their source address's keyed hash, the intents
//!   that need an account. [`ledger`]: the stores' ports (request records, refund records,
//!   conversations, budgets), their records, the memory books and the
//!   DynamoDB adapters, with the support team's reads and decisions.
//! - [`record_then_pay`]: "decide, record, then pay" around any gateway, and
//!   a person approving what the rules would not pay alone. [`ops`]: logs,
//!   the summary line and metrics. [`config`]: every setting, read once.
//!   [`push`]: live pokes between the desk and the page (contract 31): what
//!   is published after a write, signed, best effort, and who may listen.
//! - [`intake`]: one checked message through admission, the conversation,
//!   the screen, the budget, the turn and the append.
//! - [`http`]: the edge: routing, the body, identity, the `Idempotency-Key`
//!   header, and the one error-to-status map. [`staff`]: the support team's
//!   decisions and reads, one library that `refund-chat-admin` and the desk
//!   (`refund-chat-staff`, its edge in [`staff::http`]) both call.
//!   [`startup`]: the one place the function's ports are wired.
//!
//! At the ground, used from any floor: [`clock`], [`mask`] (card numbers
//! and IBANs, read as a person reads them), [`live`] (what a turn shows
//! while it runs, for event-stream mode), [`untrusted`] (customer- and
//! model-written text made safe for a terminal, a spreadsheet or a log),
//! [`http_client`], [`secrets`], [`web_page`] (what serving a page compiled
//! into a function takes: the chat's and the desk's), [`pool_token`] (a
//! Cognito pool's ID token checked by code, where no API Gateway does it),
//! [`office_hours`] (the team's hours and office minutes, contract 32).
//!
//! Binaries: `refund-chat` (the function, `src/main.rs`),
//! `refund-chat-sweep`, `refund-chat-staff` (the desk) and
//! `refund-chat-live` (the Event API's authorizer) in `src/bin/`. The support team's `refund-chat-admin`
//! is a package of its own (`admin/`). With the `test-support` feature (and
//! in unit tests), `doubles` holds in-memory stand-ins for tests and
//! benchmarks.

pub mod budget;
pub mod chat;
pub mod clock;
pub mod config;
pub mod confirm;
pub mod conversation;
#[cfg(any(test, feature = "test-support"))]
pub mod doubles;
pub mod guest;
pub mod handoff;
pub mod help;
pub mod http;
pub mod http_client;
pub mod intake;
pub mod keyed_hash;
pub mod ledger;
pub mod live;
pub mod mask;
pub mod office_hours;
pub mod ops;
pub mod orders;
pub mod pool_token;
pub mod push;
pub mod record_then_pay;
pub mod refund;
pub mod router;
pub mod secrets;
pub mod staff;
pub mod startup;
pub mod tools;
pub mod turn;
pub mod untrusted;
pub mod visitor;
pub mod web_page;
