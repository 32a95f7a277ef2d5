#!/usr/bin/env bash
# The installed tree (`cmake --install BUILD --prefix P`: the CLI, its isolation helper, libplugboard.so
# and the CUDA bridge where it was built) needs at run time only what every glibc Linux has:
# scripts/audit_native.sh on it, which also says the oldest glibc it runs on.
#
#   audit_install_test.sh BUILD_DIR AUDIT_SCRIPT
set -euo pipefail
build=$1 audit=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" || { cat "$work/install.log"; exit 1; }
"$audit" "$work/prefix"
