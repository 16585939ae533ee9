//! `refund-chat-local payments|model|widget [--port N] ...`: runs one local
//! stand-in (or the chat page) on 127.0.0.1 until stopped.

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
        Cli::Widget {
            port,
            web,
            function,
            desk_function,
            staff_endpoint,
            staff_pool_id,
            staff_issuer,
            staff_client_id,
        } => {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            println!("chat page on http://{}", listener.local_addr()?);
            let widget = match (
                desk_function,
                staff_endpoint,
                staff_pool_id,
                staff_issuer,
                staff_client_id,
            ) {
                (Some(desk), Some(endpoint), Some(pool), Some(issuer), Some(client)) => {
                    println!("the desk on http://{}/staff/", listener.local_addr()?);
                    let gate = refund_chat_local::staff_gate::StaffGate::new(&endpoint, &pool, &issuer, &client);
                    let door = refund_chat_local::widget::DeskDoor { gate, function: desk };
                    refund_chat_local::widget::Widget::with_desk(web, function, None, door)
                }
                _ => refund_chat_local::widget::Widget::new(web, function),
            };
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
