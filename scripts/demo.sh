#!/usr/bin/env bash
# Bootstrap .venv, then compare the allreduce algorithms across rank counts and message sizes.
#
#   scripts/demo.sh            # the table
#   scripts/demo.sh --plot     # extra arguments go to `commsim compare`
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
exec .venv/bin/commsim compare -c allreduce -p 8,64,1024 --sizes 1KiB,1MiB,64MiB "$@"
