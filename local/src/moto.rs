//! moto's server (Secrets Manager and DynamoDB), the one way every stack of
//! this project starts it: the test binaries, `make chaos` and `make eval`.
//! It runs under a shell that kills it when our end of its stdin closes:
//! when the [`Moto`] is dropped, or this process exits, however it exits.
//! Synchronous, with its output drained by a thread of its own, so that a
//! moto shared by many tests outlives the runtime of the test that started it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// A running moto server; dropping it stops the server.
pub struct Moto {
    pub endpoint: String,
    _child: Child,
    _stdin: ChildStdin,
}

impl Moto {
    /// Starts moto's server (`MOTO_SERVER`, else `<root>/.venv/bin/moto_server`)
    /// on a free port of 127.0.0.1, and returns once it listens.
    pub fn start(root: &Path) -> std::io::Result<Moto> {
        let binary = std::env::var_os("MOTO_SERVER").map_or_else(|| root.join(".venv/bin/moto_server"), PathBuf::from);
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut child = Command::new("sh")
            .args(["-c", r#""$0" -H 127.0.0.1 -p "$1" & pid=$!; read _; kill $pid"#])
            .arg(&binary)
            .arg(port.to_string())
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| std::io::Error::other(format!("{}: {e} (make test installs it)", binary.display())))?;
        let stdin = child.stdin.take().ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stderr = child.stderr.take().ok_or_else(|| std::io::Error::other("no stderr"))?;
        // moto announces itself on stderr once it listens; reading blocks until then.
        let mut lines = BufReader::new(stderr).lines();
        let mut said = String::new();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("Running on") => break,
                Some(Ok(line)) => said.push_str(&line),
                _ => {
                    return Err(std::io::Error::other(format!(
                        "{} exited before listening (make test installs it): {said}",
                        binary.display()
                    )));
                }
            }
        }
        // Keep draining, so moto never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            _child: child,
            _stdin: stdin,
        })
    }
}
