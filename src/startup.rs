//! Where every port is wired, once (in the manner of zero2prod's
//! `Application::build`): the shared HTTP client, the payments adapter, the
//! ledger, "record, then pay" around payments, the order system, and the key
//! source. `main` calls [`build`]; tests call [`wire`] with a key source and
//! an AWS configuration of their own (moto on 127.0.0.1).

use aws_config::SdkConfig;
use aws_config::timeout::TimeoutConfig;

use crate::config::Config;
use crate::http::App;
use crate::http_client::money_path_client;
use crate::http_client::sdk::sdk_http_client;
use crate::intake::Ports;
use crate::ledger::dynamo::conversations::DynamoConversations;
use crate::ledger::dynamo::{DynamoLedger, client_on};
use crate::orders::http::HttpOrders;
use crate::record_then_pay::RecordedRefunds;
use crate::refund::payments::HttpPayments;
use crate::secrets::{SECRET_READ_TIMEOUT, SecretsManagerKey};

/// The function as deployed.
pub type FunctionApp<K = SecretsManagerKey> =
    App<K, RecordedRefunds<DynamoLedger, HttpPayments>, DynamoLedger, DynamoConversations, HttpOrders>;

/// The function's AWS configuration: region and credentials from the
/// environment only, where Lambda puts them (`AWS_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`).
/// Not the default chain: at every cold start its web-identity provider
/// builds an STS client (which loaded the SDK's TLS root store) and its region
/// chain an IMDS client, for sources a Lambda function never uses
/// (`docs/benchmarks.md`, "Start-up").
///
/// Its HTTP client is `http`, the function's own ([`crate::http_client::sdk`]).
pub async fn function_aws_config(http: &reqwest::Client) -> SdkConfig {
    use aws_config::environment::{EnvironmentVariableCredentialsProvider, EnvironmentVariableRegionProvider};
    loader()
        .region(EnvironmentVariableRegionProvider::new())
        .credentials_provider(EnvironmentVariableCredentialsProvider::new())
        .http_client(sdk_http_client(http.clone()))
        .load()
        .await
}

/// The secret read's bound is the default operation timeout, and half of it
/// each attempt's (one stalled attempt leaves room for a retry); the ledger
/// sets its own.
fn loader() -> aws_config::ConfigLoader {
    aws_config::from_env().timeout_config(
        TimeoutConfig::builder()
            .operation_timeout(SECRET_READ_TIMEOUT)
            .operation_attempt_timeout(SECRET_READ_TIMEOUT / 2)
            .build(),
    )
}

pub async fn build(config: Config) -> reqwest::Result<FunctionApp> {
    if config.identity.source == crate::config::IdentitySource::Body {
        tracing::warn!(
            event = "configuration",
            "USER_IDENTITY=body: the request body's user_id is trusted; for local development only"
        );
    }
    let http = money_path_client()?;
    let aws = function_aws_config(&http).await;
    let key_source = SecretsManagerKey::new(
        aws_sdk_secretsmanager::Client::new(&aws),
        config.openai_key_secret_id.clone(),
    );
    wire_on(config, http, &aws, None, key_source)
}

/// Every port but the key source, from `config` and `aws`.
pub fn wire<K>(config: Config, aws: &SdkConfig, key_source: K) -> reqwest::Result<FunctionApp<K>>
where
    K: crate::secrets::ApiKeySource,
{
    wire_on(config, money_path_client()?, aws, None, key_source)
}

/// The same, on `http` (in the function, the client `ledger_aws`'s SDK
/// calls go through as well: [`build`]), with the conversation table
/// reached through an AWS configuration of its own when given (tests put a
/// faulty proxy before one of the two); else both tables share the
/// ledger's client, and so its connections.
pub fn wire_on<K>(
    config: Config,
    http: reqwest::Client,
    ledger_aws: &SdkConfig,
    conversations_aws: Option<&SdkConfig>,
    key_source: K,
) -> reqwest::Result<FunctionApp<K>>
where
    K: crate::secrets::ApiKeySource,
{
    let ledger = DynamoLedger::new(
        client_on(ledger_aws, config.ledger_timeout, http.clone()),
        &config.ledger_table,
    );
    let (table, life, bound) = (
        &config.conversation_table,
        config.conversation_lifetime(),
        config.ledger_timeout,
    );
    let conversations = match conversations_aws {
        Some(aws) => DynamoConversations::from_sdk_config(aws, table, &config.ledger_table, life, bound),
        None => DynamoConversations::new(ledger.client().clone(), table, &config.ledger_table, life),
    };
    let payments = HttpPayments::new(http.clone(), &config.payments_base_url, config.payments_timeout);
    let refunds = RecordedRefunds::new(ledger.clone(), payments, config.limits);
    let orders = HttpOrders::new(http.clone(), &config.orders_base_url, config.orders_timeout);
    let push = crate::push::Publisher::new(
        config.live.events_url.as_deref(),
        ledger_aws,
        http.clone(),
        config.live.publish_timeout,
    );
    Ok(App::new(
        config,
        Ports {
            key_source,
            refunds,
            orders,
            ledger,
            conversations,
            http,
        },
    )
    .with_push(push))
}

/// The Event API's authorizer (contract 31) from its settings: each pool
/// with the rule the routes apply to its tokens, and the conversations,
/// only read. `jwks_endpoint`: where the pools' keys are served when not
/// beside their issuer (moto, under `make run`); none in Lambda.
pub fn listening(
    config: &crate::config::ListenConfig,
    aws: &SdkConfig,
    http: reqwest::Client,
    jwks_endpoint: Option<&str>,
) -> crate::push::listen::Listening {
    use crate::pool_token::PoolKeys;
    use crate::push::listen::{Listening, Pool, Verifier};
    let pool = |issuer: &Option<String>, audiences: Option<Vec<String>>| {
        issuer.as_ref().map(|issuer| Pool {
            keys: PoolKeys::new(&crate::config::jwks_url(issuer, jwks_endpoint), issuer, http.clone()),
            audiences,
        })
    };
    Listening {
        verifier: Verifier {
            claim: config.user_id_claim.clone(),
            customers: pool(&config.customer_issuer, config.customer_audiences.clone()),
            guests: pool(
                &config.guest_issuer,
                config.guest_audience.clone().map(|client| vec![client]),
            ),
            staff: pool(
                &config.staff_issuer,
                config.staff_audience.clone().map(|client| vec![client]),
            ),
            staff_group: config.staff_group.clone(),
            visitors: config.visitors,
        },
        conversations: DynamoConversations::from_sdk_config(
            aws,
            &config.conversation_table,
            &config.ledger_table,
            crate::conversation::Lifetime {
                ttl: std::time::Duration::ZERO,
                max_age: std::time::Duration::ZERO,
            },
            config.ledger_timeout,
        ),
    }
}
