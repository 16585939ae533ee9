//! Key sources that fail on purpose.

use std::sync::atomic::{AtomicUsize, Ordering};

use refund_chat::secrets::{ApiKey, ApiKeySource, SecretError};

use crate::*;

/// Fails the test if a request ever gets as far as reading the secret.
pub struct PanickingKey;

impl ApiKeySource for PanickingKey {
    async fn fetch(&self) -> Result<ApiKey, SecretError> {
        panic!("the secret was read")
    }
}

/// Fails its first read, then returns the key.
#[derive(Default)]
pub struct FlakyKey(AtomicUsize);

impl ApiKeySource for FlakyKey {
    async fn fetch(&self) -> Result<ApiKey, SecretError> {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(SecretError::Read("AccessDeniedException".into()));
        }
        refund_chat::secrets::parse_secret_string(API_KEY)
    }
}
