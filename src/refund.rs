//! The refund operation as the agent turn sees it: what is asked, what proves
//! it happened, and every way it can fail.
//!
//! The payments service has no idempotency key, and only a rejection proves
//! that no money moved; a timeout, a broken connection or a garbled answer do
//! not. So the turn treats every attempt, whatever its outcome, as spent: see
//! the refund latch in [`crate::turn`].

use std::future::Future;

use serde::{Deserialize, Serialize};

/// The body of `POST /refunds`. `user_id` always comes from the verified
/// request, never from the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefundRequest {
    pub order_id: String,
    pub amount_cents: u64,
    pub user_id: String,
}

/// A refund receipt: what the payments service answers with on 2xx, and
/// exactly what the model is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub refund_id: String,
    pub status: String,
    pub amount_cents: i64,
}

/// Every way a refund attempt can end without a receipt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefundError {
    /// The service refused with a 4xx and a `detail`: no money moved.
    #[error("payments rejected the refund (HTTP {status}): {detail}")]
    Rejected { status: u16, detail: String },
    /// A 5xx with a `detail`: the service failed, possibly after moving money.
    #[error("payments failed (HTTP {status}): {detail}")]
    Failed { status: u16, detail: String },
    /// No answer within the payments timeout: the refund may have gone through.
    #[error("payments did not answer in time")]
    Timeout,
    /// The connection failed or broke: the refund may have gone through.
    #[error("payments could not be reached or the connection broke ({0})")]
    Transport(String),
    /// An answer that is not what the contract promises (not JSON, or a 2xx
    /// that is not a receipt): the refund may have gone through.
    #[error("payments answered HTTP {status} with something that is not {expected}")]
    InvalidResponse { status: u16, expected: &'static str },
}

impl RefundError {
    /// The text the model reads in the tool message's `error` field: what
    /// happened and what it may tell the customer.
    pub fn for_model(&self) -> String {
        match self {
            RefundError::Rejected { detail, .. } => {
                format!("the payments service rejected the refund: {detail}")
            }
            RefundError::Failed { .. }
            | RefundError::Timeout
            | RefundError::Transport(_)
            | RefundError::InvalidResponse { .. } => format!(
                "{self}. The refund may or may not have been made: do not promise either \
                 and do not try again; tell the customer that the support team will check \
                 the refund and confirm it."
            ),
        }
    }

    /// The payments service's own words, for a rejection.
    pub fn rejection_detail(&self) -> Option<&str> {
        match self {
            RefundError::Rejected { detail, .. } | RefundError::Failed { detail, .. } => Some(detail),
            _ => None,
        }
    }

    /// A short class name for logs and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            RefundError::Rejected { .. } => "rejected",
            RefundError::Failed { .. } => "server_error",
            RefundError::Timeout => "timeout",
            RefundError::Transport(_) => "transport",
            RefundError::InvalidResponse { .. } => "invalid_response",
        }
    }
}

/// Moves money. One call is one refund: there is no idempotency key, and an
/// implementation must never retry.
pub trait RefundGateway {
    fn refund(&self, request: &RefundRequest) -> impl Future<Output = Result<Receipt, RefundError>> + Send;
}
