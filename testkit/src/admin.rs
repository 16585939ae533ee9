//! The support team's tool, `refund-chat-admin`, as the tests run it: the
//! real binary of its own package (`admin/`), built beside the test binary.
//! Cargo names a binary for the tests of its own package only
//! (`CARGO_BIN_EXE_…`), so the path is found from the test binary's:
//! `target/<profile>/deps/<test>` beside `target/<profile>/refund-chat-admin`.

use std::path::PathBuf;

pub fn admin_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir.join(format!("refund-chat-admin{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is not built: `cargo build -p refund-chat-admin` first (make test does)",
        binary.display()
    );
    binary
}
