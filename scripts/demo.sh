#!/usr/bin/env bash
# Sets up, builds and runs phoenix's live demo: node processes on 127.0.0.1 pass a token through every
# virtual node while one node joins late. Extra arguments go to the demo (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release --target phoenix_demo
exec build/release/apps/demo/phoenix_demo "$@"
