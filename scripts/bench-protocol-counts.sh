#!/usr/bin/env bash
# Instructions per operation for outpost-protocol's codec against raw rmp-serde and serde_json
# on the same structs, counted by callgrind (independent of machine load). Each contender runs
# N and 2N times; the difference divided by N removes start-up cost.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release -q -p outpost-protocol --example codec_counts
bin=target/release/examples/codec_counts
n=2000
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" "$3" 2>&1 \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per_op() { echo $(( ($(count "$1" "$2" $((2 * n))) - $(count "$1" "$2" $n)) / n )); }
printf '%-26s %-7s %9s %9s %9s %12s %12s\n' vector op outpost rmp-raw json "ours/rmp" "json/ours"
for v in seed000_request_client seed000_request_server seed001_result_success seed001_result_error; do
  for op in decode encode; do
    o=$(per_op "$op-outpost" "$v"); r=$(per_op "$op-rmp" "$v"); j=$(per_op "$op-json" "$v")
    printf '%-26s %-7s %9d %9d %9d %12s %12s\n' "$v" "$op" "$o" "$r" "$j" \
      "$(python3 -c "print(f'{$o/$r:.2f}x')")" "$(python3 -c "print(f'{$j/$o:.2f}x')")"
  done
done
