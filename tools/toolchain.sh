#!/usr/bin/env bash
# rust-toolchain.toml pins 1.95.0. Where rustup knows that compiler only as
# `stable` (and may not install toolchains: RUSTUP_AUTO_INSTALL=0), name it
# 1.95.0 too, so that every cargo call in this tree finds the pinned one.
# A no-op where 1.95.0 is installed, or where stable is another version.
set -u
pinned=1.95.0
toolchains="${RUSTUP_HOME:-$HOME/.rustup}/toolchains"
command -v rustup >/dev/null 2>&1 || exit 0
host=$(rustup show 2>/dev/null | sed -n 's/^Default host: //p')
[ -n "$host" ] || exit 0
[ -e "$toolchains/$pinned-$host" ] && exit 0
if [ -d "$toolchains/stable-$host" ] && "$toolchains/stable-$host/bin/rustc" --version 2>/dev/null | grep -q "^rustc $pinned "; then
  ln -s "stable-$host" "$toolchains/$pinned-$host"
fi
exit 0
