#!/usr/bin/env bash
# Write a suite's report and render its index.html in headless Chromium to a PNG, to look at it.
#   benchmarks/render_report.sh SUITE [RESULTS_DIR] [PNG]
# Needs chromium (Debian: apt-get install -y chromium). The page is long: the window is 1400×20000.
set -euo pipefail
suite=${1:?usage: benchmarks/render_report.sh SUITE [RESULTS_DIR] [PNG]}
results=${2:-results}
png=${3:-/tmp/report-shots/${suite##*/}.png}
out=$(mktemp -d)/${suite##*/}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
"$(dirname "$0")/../.venv/bin/bench" report "$suite" --results "$results" --out "$out"
mkdir -p "$(dirname "$png")"
chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$(mktemp -d)" --screenshot="$png" \
  --window-size=1400,20000 "file://$out/index.html" 2>/dev/null
echo "report: $out; screenshot: $png"
