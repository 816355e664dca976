#!/usr/bin/env bash
# Regenerates the demo's text data from Debian packages (both public domain):
#   bible-kjv   -> kjv-ot.txt (training and calibration), kjv-nt.txt (held-out evaluation)
#   jargon-text -> jargon.txt (out-of-domain evaluation)
# One verse per line without its label, as the foundation issue specifies.
set -euo pipefail
out="${1:-$(dirname "$0")/../resources/demo/data}"
mkdir -p "$out"
bible -f 'gen1:1-mal4:6' | sed -E 's/^[^ ]+ //' > "$out/kjv-ot.txt"
bible -f 'mat1:1-rev22:21' | sed -E 's/^[^ ]+ //' > "$out/kjv-nt.txt"
zcat /usr/share/doc/jargon-text/jargon.txt.gz > "$out/jargon.txt"
wc -c "$out"/*.txt
