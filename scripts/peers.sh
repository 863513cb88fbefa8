#!/usr/bin/env bash
# peers.sh — non-streamed request rate of wakebench's load generator against
# wrk (Debian package) and vegeta (Go module), on the same vllmsim endpoint
# (no modelled delay, pinned to CPU 0) from the same core (CPU 1), same
# concurrency and request body. Installs the peers if they are missing.
#
#   scripts/peers.sh PERF_TEST_BINARY OUT_FILE
#
# PERF_TEST_BINARY is `go test -c ./internal/perf`; OUT_FILE gets benchfmt
# lines (BenchmarkRequestRate/gen=wakebench|wrk|vegeta ... req/s) that
# cmd/perftable reads. PEER_SECONDS (default 5) is each generator's run.
set -euo pipefail
cd "$(dirname "$0")/.."
perf_test=$(realpath "$1")
out=$2
secs=${PEER_SECONDS:-5}
conc=32
vegeta_version=v12.13.0

log() { echo "peers: $*" >&2; }

if ! command -v wrk >/dev/null; then
	log "installing wrk (apt)"
	apt-get install -y -qq wrk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
fi
vegeta=$(go env GOPATH)/bin/vegeta
if [ ! -x "$vegeta" ]; then
	log "installing vegeta $vegeta_version (go install)"
	go install "github.com/tsenart/vegeta/v12@$vegeta_version"
fi

# Pin the server and the generators to different CPUs where there are two.
server_pin=() client_pin=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
	server_pin=(taskset -c 0) client_pin=(taskset -c 1)
fi

tmp=$(mktemp -d)
server_pid=
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/vllmsim" ./cmd/vllmsim
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
VLLMSIM_PROFILE=tiny VLLMSIM_TIME_SCALE=0 VLLM_SERVER_DEV_MODE=1 VLLMSIM_GPU_DIR="$tmp/gpu" VLLMSIM_CACHE_DIR="$tmp/cache" \
	"${server_pin[@]}" "$tmp/vllmsim" serve tiny-a --host 127.0.0.1 --port "$port" \
	--max-model-len 4096 --kv-cache-memory-bytes 1073741824 >"$tmp/vllmsim.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do
	curl -fs "$url/health" >/dev/null 2>&1 && break
	sleep 0.05
done
curl -fs "$url/health" >/dev/null || { cat "$tmp/vllmsim.log" >&2; log "vllmsim did not start"; exit 1; }

# The body the wakebench generator sends for this benchmark (vllm.CompletionRequest, NoStream).
prompt="Explain why a model server that sleeps between requests can share one GPU with another model."
body="{\"model\":\"tiny-a\",\"prompt\":\"$prompt\",\"max_tokens\":16,\"min_tokens\":16,\"ignore_eos\":true,\"temperature\":0,\"stream\":false}"
printf '%s' "$body" >"$tmp/body.json"
curl -fs -H 'Content-Type: application/json' -d @"$tmp/body.json" "$url/v1/completions" | grep -q '"completion_tokens":16' ||
	{ log "the request body is not answered as expected"; exit 1; }

: >"$out"
log "wakebench generator, $conc connections, ${secs}s"
WAKEBENCH_PERF_URL=$url "${client_pin[@]}" "$perf_test" -test.run '^$' -test.bench '^BenchmarkRequestRate$' \
	-test.benchtime "${secs}s" | tee -a "$out" | grep -q 'req/s' || { log "wakebench generator failed"; exit 1; }

log "wrk, 1 thread, $conc connections, ${secs}s"
cat >"$tmp/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[$body]]
LUA
"${client_pin[@]}" wrk -t1 -c"$conc" -d"${secs}s" -s "$tmp/post.lua" "$url/v1/completions" >"$tmp/wrk.txt"
cat "$tmp/wrk.txt" >&2
if grep -q 'Non-2xx' "$tmp/wrk.txt"; then log "wrk got errors"; exit 1; fi
rate=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk.txt")
echo "BenchmarkRequestRate/gen=wrk 1 $rate req/s" >>"$out"

log "vegeta, GOMAXPROCS=1, $conc workers, ${secs}s"
echo "POST $url/v1/completions" |
	GOMAXPROCS=1 "${client_pin[@]}" "$vegeta" attack -rate=0 -workers="$conc" -max-workers="$conc" -duration="${secs}s" \
		-body "$tmp/body.json" -header 'Content-Type: application/json' >"$tmp/vegeta.bin"
"$vegeta" report -type=json <"$tmp/vegeta.bin" >"$tmp/vegeta.json"
python3 - "$tmp/vegeta.json" "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if r["success"] < 1:
    sys.exit(f"peers: vegeta: success ratio {r['success']}, errors {r.get('errors')}")
with open(sys.argv[2], "a") as f:
    f.write(f"BenchmarkRequestRate/gen=vegeta 1 {r['throughput']:.1f} req/s\n")
PY
awk '/^BenchmarkRequestRate\/gen=/ { split($1, a, "="); sub(/-[0-9]+$/, "", a[2]); rate[a[2]] = $(NF-1) }
	END {
		best = rate["wrk"] > rate["vegeta"] ? "wrk" : "vegeta"
		printf "peers: wakebench %.0f req/s, wrk %.0f, vegeta %.0f: %.2f x the best (%s); goal >= 0.5\n",
			rate["wakebench"], rate["wrk"], rate["vegeta"], rate["wakebench"] / rate[best], best
	}' "$out" >&2
log "done: $out"
