//! The refund ledger (contract 6): the system of record for refund
//! decisions, written before any money moves.
//!
//! Two kinds of record live in it:
//! - **refund records**, one per [`RefundScope`], written on the condition
//!   that none exists *before* payments is called, then moved to the
//!   outcome. Never deleted, never overwritten, no expiry: a record already
//!   there is the durable form of the turn's refund latch;
//! - **request records**, one per customer and `Idempotency-Key`: a lease
//!   while the first request runs, then its answer for replays, until they
//!   expire.
//!
//! Every write is safe to retry, in one of two ways. A conditional write
//! that had already landed fails its condition, and the item it finds
//! carries the writer's own mark ([`crate::intake::Invocation::writer`]),
//! which is how it knows it was its own. A counter's `ADD` (a budget's turn
//! given back, a turn's tokens settled) has no condition that could tell,
//! so it is sent as a transaction, whose idempotency token makes DynamoDB
//! answer a retry of one that had landed without applying it again. The
//! DynamoDB adapter is
//! [`dynamo::DynamoLedger`].

mod budgets;
mod conversations;
pub mod dynamo;
pub mod memory;
mod refunds;
mod requests;
mod staff;

pub use budgets::*;
pub use conversations::*;
pub use refunds::*;
pub use requests::*;
pub use staff::*;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("the ledger did not answer within LEDGER_TIMEOUT_SECS")]
    Timeout,
    #[error("the ledger could not be reached: {0}")]
    Unavailable(String),
    /// A conditional write found the record in a state it did not expect
    /// (another writer got there first).
    #[error("the ledger record changed under us: {0}")]
    Conflict(String),
    /// DynamoDB cancelled a transaction because another one held one of its
    /// items at that moment (`TransactionConflict`): nothing was written.
    #[error("the ledger was busy with a concurrent write to the same item")]
    Contended,
    #[error("the ledger holds a record that cannot be read: {0}")]
    Malformed(String),
}
