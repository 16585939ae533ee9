//! The whole function, handler to adapters, against local servers on
//! 127.0.0.1 (wiremock for OpenAI and payments, moto for DynamoDB and
//! Secrets Manager, the project's own local model and payments sandbox).
//! One test binary with a module per concern; each test checks what the
//! servers received (bodies, order, counts) and what the ledger holds, as
//! well as the answer.

mod address;
mod approval_checks;
mod approvals;
mod budgets;
mod conversations;
mod event_stream;
mod events;
mod events_pipes;
mod guards;
mod guests;
mod handoff;
mod hearing_back;
mod help;

mod idempotency;
mod identity;
mod input;
mod ledger;
mod live;
mod masking;
mod observability;
mod office_hours;
mod openapi;
mod operations;
mod orders;
mod policy;
mod ratings;
mod refunds;
mod retries;
mod returns;
mod review;
mod router;
mod routing;
mod secrets;
mod staff_desk;
mod team_desk;
mod visitors;
