#!/usr/bin/env bash
# Builds raidd and runs its embedded default: a 4-member RAID5 on sparse
# files in ./raidd-demo, served over NBD at nbd://127.0.0.1:10809/demo.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
export GOFLAGS="${GOFLAGS:--mod=mod}"
exec go run ./cmd/raidd demo "$@"
