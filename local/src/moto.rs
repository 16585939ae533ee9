//! moto's server (Secrets Manager and DynamoDB) for the tools that run a
//! whole stack in one process (`make chaos`, `make eval`). It runs under a
//! shell that kills it when our end of its stdin closes: when the returned
//! child is dropped, or this process exits, however it exits.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

/// Starts moto's server (`MOTO_SERVER`, else `<root>/.venv/bin/moto_server`)
/// on a free port of 127.0.0.1: the child, and its endpoint.
pub async fn start(root: &Path) -> std::io::Result<(tokio::process::Child, String)> {
    let binary = std::env::var_os("MOTO_SERVER").map_or_else(|| root.join(".venv/bin/moto_server"), PathBuf::from);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", r#""$0" -H 127.0.0.1 -p "$1" & pid=$!; read _; kill $pid"#])
        .arg(&binary)
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Not killed on drop: killing the shell would orphan moto. Dropping
        // the child closes its stdin instead, and the shell then stops moto.
        .spawn()?;
    let stderr = child.stderr.take().ok_or_else(|| std::io::Error::other("no stderr"))?;
    let mut lines = BufReader::new(stderr).lines();
    while let Some(line) = lines.next_line().await? {
        if line.contains("Running on") {
            // Keep draining stderr so moto never blocks on a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return Ok((child, format!("http://127.0.0.1:{port}")));
        }
    }
    Err(std::io::Error::other(format!(
        "{} did not start (make test installs it into .venv)",
        binary.display()
    )))
}
