//! The guest pool, as the support team's side reads it (contract 27). A
//! guest's refund that waits for a person is approved with the order read
//! afresh, and the order system answers a guest only by the e-mail they
//! proved: the e-mail is kept nowhere of the project's, so it is read from
//! the pool here, by the guest's `sub`, when an approval needs it. Forgetting
//! a guest (contract 11) deletes the pool's user, found by `sub` or by e-mail.
//!
//! A guest the pool no longer has, or whose e-mail is not verified, has no
//! e-mail: their order is not found, and nothing is paid.

use std::time::Duration;

use aws_sdk_cognitoidentityprovider::Client;
use aws_sdk_cognitoidentityprovider::operation::admin_get_user::AdminGetUserError;

use super::GuestEmail;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    #[error("the guest pool did not answer in time")]
    Timeout,
    /// The pool's error, by its code only (never a message that may name someone).
    #[error("the guest pool answered {0}")]
    Pool(String),
}

/// The guest pool (`GUEST_POOL_ID`).
pub struct GuestDirectory {
    client: Client,
    pool_id: String,
    timeout: Duration,
}

impl GuestDirectory {
    pub fn new(aws: &aws_config::SdkConfig, pool_id: impl Into<String>, timeout: Duration) -> GuestDirectory {
        GuestDirectory {
            client: Client::new(aws),
            pool_id: pool_id.into(),
            timeout,
        }
    }

    /// The verified e-mail of the guest `sub`; `None` when the pool has no
    /// such guest or their e-mail is not verified.
    pub async fn email(&self, sub: &str) -> Result<Option<GuestEmail>, DirectoryError> {
        let asked = self
            .client
            .admin_get_user()
            .user_pool_id(&self.pool_id)
            .username(sub)
            .send();
        let user = match tokio::time::timeout(self.timeout, asked).await {
            Err(_) => return Err(DirectoryError::Timeout),
            Ok(Err(error)) => {
                return match error.into_service_error() {
                    AdminGetUserError::UserNotFoundException(_) => Ok(None),
                    other => Err(DirectoryError::Pool(code_of(&other))),
                };
            }
            Ok(Ok(user)) => user,
        };
        let attribute = |name: &str| {
            user.user_attributes()
                .iter()
                .find(|attribute| attribute.name() == name)
                .and_then(|attribute| attribute.value())
        };
        if attribute("email_verified") != Some("true") {
            return Ok(None);
        }
        Ok(attribute("email").and_then(GuestEmail::parse))
    }

    /// The `sub` of the guest whose e-mail is `email`, if the pool has one:
    /// as typed, else in lower case (the pool's filter compares exactly).
    pub async fn find(&self, email: &GuestEmail) -> Result<Option<String>, DirectoryError> {
        if let Some(sub) = self.find_exactly(email.expose()).await? {
            return Ok(Some(sub));
        }
        let lower = email.expose().to_lowercase();
        if lower == email.expose() {
            return Ok(None);
        }
        self.find_exactly(&lower).await
    }

    async fn find_exactly(&self, email: &str) -> Result<Option<String>, DirectoryError> {
        // The filter's value is quoted: a quote or backslash in it is escaped.
        let quoted = email.replace('\\', "\\\\").replace('"', "\\\"");
        let asked = self
            .client
            .list_users()
            .user_pool_id(&self.pool_id)
            .filter(format!("email = \"{quoted}\""))
            .limit(2)
            .send();
        let users = tokio::time::timeout(self.timeout, asked)
            .await
            .map_err(|_| DirectoryError::Timeout)?
            .map_err(|error| DirectoryError::Pool(code_of(&error.into_service_error())))?;
        Ok(users.users().iter().find_map(|user| {
            user.attributes()
                .iter()
                .find(|attribute| attribute.name() == "sub")
                .and_then(|attribute| attribute.value())
                .map(str::to_owned)
        }))
    }

    /// Deletes the guest `sub` from the pool: `false` if there was none.
    pub async fn delete(&self, sub: &str) -> Result<bool, DirectoryError> {
        use aws_sdk_cognitoidentityprovider::operation::admin_delete_user::AdminDeleteUserError;
        let asked = self
            .client
            .admin_delete_user()
            .user_pool_id(&self.pool_id)
            .username(sub)
            .send();
        match tokio::time::timeout(self.timeout, asked).await {
            Err(_) => Err(DirectoryError::Timeout),
            Ok(Ok(_)) => Ok(true),
            Ok(Err(error)) => match error.into_service_error() {
                AdminDeleteUserError::UserNotFoundException(_) => Ok(false),
                other => Err(DirectoryError::Pool(code_of(&other))),
            },
        }
    }
}

fn code_of(error: &impl aws_sdk_cognitoidentityprovider::error::ProvideErrorMetadata) -> String {
    error.code().unwrap_or("an unknown error").to_owned()
}
