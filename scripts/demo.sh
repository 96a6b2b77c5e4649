#!/usr/bin/env bash
# Sets up, builds and runs phoenix's live demo: the shell phsh runs scripts/demo.phsh, a ray trace on local
# node processes that join, leave, suspend and resume while it renders; the picture is checked at the end.
# Extra arguments go to phsh (e.g. --run-dir DIR); DEMO_WIDTH, DEMO_HEIGHT, DEMO_SAMPLES and DEMO_PNG change the
# picture.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release --target phsh raytrace
export PHSH_APP_PATH="$PWD/build/release/apps/raytrace${PHSH_APP_PATH:+:$PHSH_APP_PATH}"
exec build/release/phoenix/shell/phsh --echo "$@" scripts/demo.phsh
