//! `refund-chat-local payments|model|widget [--port N] ...`: runs one local
//! stand-in (or the chat page) on 127.0.0.1 until stopped.

use std::path::PathBuf;

use refund_chat_local::local_model::LocalModel;
use refund_chat_local::payments_sandbox::Sandbox;

const USAGE: &str = "usage: refund-chat-local payments [--port 8081] [--refunds-file FILE]
       refund-chat-local model [--port 8082]
       refund-chat-local widget [--port 8080] [--web DIR] [--function URL]";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let port = |default: u16| {
        option("--port")
            .map(|p| p.parse::<u16>())
            .transpose()
            .map(|p| p.unwrap_or(default))
    };

    let (name, port, router) = match args.first().map(String::as_str) {
        Some("payments") => {
            let ledger = option("--refunds-file").map(PathBuf::from);
            ("payments sandbox", port(8081)?, Sandbox::open(ledger)?.router())
        }
        Some("model") => ("local model", port(8082)?, LocalModel::new(None).router()),
        Some("widget") => {
            let web = option("--web").map_or_else(|| PathBuf::from("web"), PathBuf::from);
            let function = option("--function").unwrap_or_else(|| "http://127.0.0.1:9000/support/refund-chat".into());
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port(8080)?)).await?;
            println!("chat page on http://{}", listener.local_addr()?);
            let widget = refund_chat_local::widget::Widget::new(web, function);
            tokio::select! {
                () = refund_chat_local::widget::serve(listener, widget) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return Ok(());
        }
        _ => return Err(USAGE.into()),
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("{name} listening on http://{}", listener.local_addr()?);
    tokio::select! {
        served = refund_chat_local::serve(listener, router) => served?,
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}
