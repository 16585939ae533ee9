//! `refund-chat-local payments|model|guests|widget [--port N] ...`: runs one
//! local stand-in (or the chat page) on 127.0.0.1 until stopped.

use std::path::PathBuf;

use refund_chat_local::local_model::LocalModel;
use refund_chat_local::payments_sandbox::Sandbox;

#[derive(clap::Parser)]
#[command(name = "refund-chat-local")]
enum Cli {
    /// The payments sandbox over the seeded orders.
    Payments {
        #[arg(long, default_value_t = 8081)]
        port: u16,
        /// Where the refunds it makes are kept across restarts.
        #[arg(long)]
        refunds_file: Option<PathBuf>,
    },
    /// The local OpenAI-compatible model.
    Model {
        #[arg(long, default_value_t = 8082)]
        port: u16,
        /// The longest a streamed answer takes, in ms (its chunks spread over it).
        #[arg(long, default_value_t = 1500)]
        stream_within_ms: u64,
    },
    /// The guest pool's sign-in (contract 27): makes the pool in moto, writes
    /// what the others need of it to `--describe`, answers the page's calls.
    Guests {
        #[arg(long, default_value_t = 8083)]
        port: u16,
        /// moto's server, where the pool and its tokens live.
        #[arg(long)]
        moto: String,
        /// Every code "sent", one JSON line each (the terminal shows them too).
        #[arg(long)]
        outbox: PathBuf,
        /// Where to write the pool's id, client, issuer and sign-in URL (JSON).
        #[arg(long)]
        describe: PathBuf,
    },
    /// The staff pool's sign-in door: moto's Cognito, with `RevokeToken`
    /// (which moto lacks) answered as Cognito does (contract 30).
    StaffPool {
        #[arg(long, default_value_t = 8084)]
        port: u16,
        /// moto's server, where the staff pool lives.
        #[arg(long)]
        moto: String,
    },
    /// AppSync Events' stand-in (contract 31): the publish, the WebSocket,
    /// every connect and subscribe decided by the project's own code with
    /// the pools and tables the environment names (as `refund-chat-live`
    /// reads them), the pools' keys at `--moto`.
    EventApi {
        #[arg(long, default_value_t = 8085)]
        port: u16,
        #[arg(long)]
        moto: String,
        /// Take `body-user:<id>` for a customer picked on the page (the
        /// function runs with `USER_IDENTITY=body`).
        #[arg(long)]
        body_customers: bool,
    },
    /// The chat page, passing chat requests on to the function.
    Widget {
        #[arg(long, default_value_t = 8080)]
        port: u16,
        #[arg(long, default_value = "web")]
        web: PathBuf,
        #[arg(long, default_value = "http://127.0.0.1:9000/support/refund-chat")]
        function: String,
        /// The desk's function (`refund-chat-staff` under watch): serves the desk at /staff/.
        #[arg(long, requires_all = ["staff_endpoint", "staff_pool_id", "staff_issuer", "staff_client_id"])]
        desk_function: Option<String>,
        /// Where the staff pool lives (moto), its id, its tokens' issuer and its app client.
        #[arg(long)]
        staff_endpoint: Option<String>,
        #[arg(long)]
        staff_pool_id: Option<String>,
        #[arg(long)]
        staff_issuer: Option<String>,
        #[arg(long)]
        staff_client_id: Option<String>,
        /// The guest pool as `guests --describe` wrote it: the page offers
        /// "confirm my e-mail" and the chat's door checks its tokens (at `--guest-endpoint`, moto).
        #[arg(long, requires = "guest_endpoint")]
        guest_pool: Option<PathBuf>,
        #[arg(long)]
        guest_endpoint: Option<String>,
        /// The Event API stand-in's realtime URL (`ws://127.0.0.1:8085/event/realtime`):
        /// the page subscribes there (contract 31).
        #[arg(long)]
        live_url: Option<String>,
        /// The poll while the page's socket is up, in seconds.
        #[arg(long, default_value_t = 60)]
        live_poll_seconds: u32,
    },
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (name, port, router) = match <Cli as clap::Parser>::parse() {
        Cli::Payments { port, refunds_file } => ("payments sandbox", port, Sandbox::open(refunds_file)?.router()),
        Cli::Model { port, stream_within_ms } => (
            "local model",
            port,
            LocalModel::new(None)
                .streaming_within(std::time::Duration::from_millis(stream_within_ms))
                .router(),
        ),
        Cli::Guests {
            port,
            moto,
            outbox,
            describe,
        } => {
            let pool = refund_chat_local::guest_pool::GuestPool::create(&moto, outbox).await?;
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            let ids = pool.ids();
            let described = serde_json::json!({
                "pool_id": ids.pool_id, "client_id": ids.client_id, "issuer": ids.issuer,
                "sign_in_url": format!("http://{}/", listener.local_addr()?),
            });
            std::fs::write(&describe, described.to_string())?;
            println!("guest pool sign-in on http://{}", listener.local_addr()?);
            tokio::select! {
                () = refund_chat_local::guest_pool::serve(listener, pool) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return Ok(());
        }
        Cli::StaffPool { port, moto } => {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            println!("staff pool sign-in on http://{}", listener.local_addr()?);
            let door = refund_chat_local::staff_pool::StaffPoolDoor::new(&moto);
            tokio::select! {
                () = refund_chat_local::staff_pool::serve(listener, door) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return Ok(());
        }
        Cli::EventApi {
            port,
            moto,
            body_customers,
        } => {
            // The tables and pools as the environment names them (local.env:
            // moto's DynamoDB, region and credentials), as the authorizer reads them.
            let config = refund_chat::config::ListenConfig::from_env()?;
            let http = refund_chat::http_client::money_path_client()?;
            let aws = refund_chat::startup::function_aws_config(&http).await;
            let listening = refund_chat::startup::listening(&config, &aws, http, Some(&moto));
            let api = refund_chat_local::event_api::EventApi::new(refund_chat_local::event_api::deciding(
                std::sync::Arc::new(listening),
                body_customers,
            ));
            ("event API", port, refund_chat_local::event_api::router(api))
        }
        Cli::Widget {
            port,
            web,
            function,
            desk_function,
            staff_endpoint,
            staff_pool_id,
            staff_issuer,
            staff_client_id,
            guest_pool,
            guest_endpoint,
            live_url,
            live_poll_seconds,
        } => {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            println!("chat page on http://{}", listener.local_addr()?);
            let desk = match (
                desk_function,
                staff_endpoint,
                staff_pool_id,
                staff_issuer,
                staff_client_id,
            ) {
                (Some(desk), Some(endpoint), Some(pool), Some(issuer), Some(client)) => {
                    println!("the desk on http://{}/staff/", listener.local_addr()?);
                    let gate = refund_chat_local::pool_gate::PoolGate::new(&endpoint, &pool, &issuer, &client);
                    Some(refund_chat_local::widget::DeskDoor { gate, function: desk })
                }
                _ => None,
            };
            let guests = match (guest_pool, guest_endpoint) {
                (Some(described), Some(endpoint)) => {
                    let pool: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(described)?)?;
                    let text = |name: &str| pool[name].as_str().unwrap_or_default().to_owned();
                    Some(refund_chat_local::widget::GuestDoor {
                        gate: refund_chat_local::pool_gate::PoolGate::new(
                            &endpoint,
                            &text("pool_id"),
                            &text("issuer"),
                            &text("client_id"),
                        ),
                        sign_in_url: text("sign_in_url"),
                        client_id: text("client_id"),
                    })
                }
                _ => None,
            };
            let live = live_url.map(|url| refund_chat_local::widget::LiveDoor {
                host: url
                    .trim_start_matches("ws://")
                    .split('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
                url,
                poll_seconds: live_poll_seconds,
            });
            let widget = refund_chat_local::widget::Widget::serving(web, function, None, desk, guests).with_live(live);
            tokio::select! {
                () = refund_chat_local::widget::serve(listener, widget) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return Ok(());
        }
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("{name} listening on http://{}", listener.local_addr()?);
    tokio::select! {
        served = refund_chat_local::serve(listener, router) => served?,
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}
