//! Who works at the desk (contract 24): the person the staff pool's
//! Cognito authorizer verified, never a name a request carries.
//!
//! API Gateway passes a user pool authorizer's claims in
//! `requestContext.authorizer.claims`, every value a string; `cognito:groups`
//! is one group's name, several joined by commas, or (defensively) the
//! token's list or a bracketed `[a b]`. `STAFF_IDENTITY=header` reads the
//! same from `x-staff-sub`, `x-staff-name` and `x-staff-groups` instead:
//! the local page server sets them once it has checked the token itself;
//! deployed, nothing does.

use lambda_http::{Request, RequestExt};
use serde_json::Value;

use crate::config::{DeskConfig, StaffIdentity};

pub const SUB_HEADER: &str = "x-staff-sub";
pub const NAME_HEADER: &str = "x-staff-name";
pub const GROUPS_HEADER: &str = "x-staff-groups";

/// A verified person at the desk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub sub: String,
    /// `name`, else `email`, else the user name, else the `sub`.
    pub name: String,
    pub groups: Vec<String>,
}

/// What a person may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Read, reply, close handoffs.
    Staff,
    /// Also approve, reject and resolve refunds.
    Approver,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("sign in to the support team's desk")]
    Unauthenticated,
    #[error("not a member of the support team")]
    NotStaff,
    /// `STAFF_IDENTITY=header` behind an authorizer: deployed by mistake.
    #[error("the desk is misconfigured")]
    Misconfigured,
}

impl Member {
    /// The person's role, if any: `STAFF_GROUP` for the desk, and
    /// `APPROVER_GROUP` besides for money.
    pub fn role(&self, config: &DeskConfig) -> Option<Role> {
        let has = |group: &str| self.groups.iter().any(|g| g == group);
        match (has(&config.staff_group), has(&config.approver_group)) {
            (true, true) => Some(Role::Approver),
            (true, false) => Some(Role::Staff),
            _ => None,
        }
    }

    pub fn person(&self) -> crate::conversation::person::Person<'_> {
        crate::conversation::person::Person {
            name: &self.name,
            sub: Some(&self.sub),
        }
    }
}

/// `cognito:groups` in any of the forms it reaches a function in.
pub fn groups(value: &Value) -> Vec<String> {
    let names: Vec<String> = match value {
        Value::Array(list) => list.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        Value::String(text) => text
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split([',', ' '])
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    names
        .into_iter()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// The person of an ID token's claims: a `sub`, an ID token of the desk's
/// own app client (`aud`), and where the configuration names the staff
/// pool's issuer, that issuer.
pub fn from_claims(claims: &Value, issuer: Option<&str>, audience: &str) -> Result<Member, Refused> {
    let claim = |name: &str| claims.get(name).and_then(Value::as_str).filter(|v| !v.is_empty());
    let sub = claim("sub").ok_or(Refused::Unauthenticated)?;
    if issuer.is_some_and(|issuer| claim("iss") != Some(issuer))
        || claim("token_use").is_some_and(|use_| use_ != "id")
        || claim("aud") != Some(audience)
    {
        return Err(Refused::NotStaff);
    }
    Ok(Member {
        sub: sub.to_owned(),
        name: claim("name")
            .or_else(|| claim("email"))
            .or_else(|| claim("cognito:username"))
            .unwrap_or(sub)
            .to_owned(),
        groups: claims.get("cognito:groups").map(groups).unwrap_or_default(),
    })
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The person a request comes from, as the configuration says to read it.
pub fn member(request: &Request, config: &DeskConfig) -> Result<Member, Refused> {
    match &config.identity {
        StaffIdentity::Header => {
            if has_authorizer_context(request) {
                tracing::error!(
                    event = "staff_refused",
                    why = "misconfigured",
                    "STAFF_IDENTITY=header behind an authorizer: every request is refused"
                );
                return Err(Refused::Misconfigured);
            }
            let sub = header(request, SUB_HEADER).ok_or(Refused::Unauthenticated)?;
            Ok(Member {
                sub: sub.to_owned(),
                name: header(request, NAME_HEADER).unwrap_or(sub).to_owned(),
                groups: groups(&Value::String(
                    header(request, GROUPS_HEADER).unwrap_or_default().to_owned(),
                )),
            })
        }
        StaffIdentity::Authorizer { issuer, audience } => {
            let authorizer = request
                .request_context_ref()
                .and_then(|context| context.authorizer())
                .ok_or(Refused::Unauthenticated)?;
            let claims = match &authorizer.jwt {
                Some(jwt) => serde_json::to_value(&jwt.claims).unwrap_or(Value::Null),
                None => authorizer.fields.get("claims").cloned().unwrap_or(Value::Null),
            };
            from_claims(&claims, issuer.as_deref(), audience)
        }
    }
}

/// An authorizer's context with claims: API Gateway put a verified
/// person there, so this is no local page server's request.
fn has_authorizer_context(request: &Request) -> bool {
    request
        .request_context_ref()
        .and_then(|context| context.authorizer())
        .is_some_and(|authorizer| {
            authorizer.jwt.is_some() || authorizer.fields.get("claims").is_some_and(|claims| !claims.is_null())
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn groups_in_every_form_they_arrive_in() {
        let both = vec!["support-staff".to_owned(), "refund-approvers".to_owned()];
        assert_eq!(groups(&json!("support-staff,refund-approvers")), both);
        assert_eq!(groups(&json!("[support-staff refund-approvers]")), both);
        assert_eq!(groups(&json!(["support-staff", "refund-approvers"])), both);
        assert_eq!(groups(&json!("support-staff")), vec!["support-staff".to_owned()]);
        assert!(groups(&json!("")).is_empty());
        assert!(groups(&json!(3)).is_empty());
    }

    #[test]
    fn a_token_of_another_pool_or_an_access_token_is_refused() {
        let issuer = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_staff";
        let staff = json!({"sub": "s-1", "name": "Sam", "iss": issuer, "token_use": "id", "aud": "desk",
                           "cognito:groups": "support-staff"});
        let member = from_claims(&staff, Some(issuer), "desk").unwrap();
        assert_eq!((member.sub.as_str(), member.name.as_str()), ("s-1", "Sam"));
        let customer = json!({"sub": "u-1", "iss": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_shop",
                              "token_use": "id", "cognito:groups": "support-staff"});
        assert_eq!(from_claims(&customer, Some(issuer), "desk"), Err(Refused::NotStaff));
        let access = json!({"sub": "s-1", "iss": issuer, "token_use": "access"});
        assert_eq!(from_claims(&access, Some(issuer), "desk"), Err(Refused::NotStaff));
        assert_eq!(
            from_claims(&json!({"name": "x"}), None, "desk"),
            Err(Refused::Unauthenticated)
        );
        let email_only = json!({"sub": "s-2", "email": "kim@shop.example", "aud": "desk"});
        assert_eq!(from_claims(&email_only, None, "desk").unwrap().name, "kim@shop.example");
    }

    /// API Gateway's authorizer checks no audience: a token another app
    /// client of the staff pool issued, or one with none, is refused here.
    #[test]
    fn a_token_of_another_app_client_is_refused() {
        let issuer = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_staff";
        for aud in [json!("another-client"), json!(""), Value::Null] {
            let claims = json!({"sub": "s-1", "name": "Ann", "iss": issuer, "token_use": "id", "aud": aud,
                                "cognito:groups": "support-staff,refund-approvers"});
            assert_eq!(
                from_claims(&claims, Some(issuer), "desk"),
                Err(Refused::NotStaff),
                "{aud}"
            );
        }
    }
}
