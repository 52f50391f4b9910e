# Sourced by the benchmarks that talk to `rlcore serve`: start_serve LOG ARGS...
# starts "$build_dir/bin/rlcore" serve --port 0 ARGS... in the background, waits
# for its banner and sets $serve_pid and $server (http://host:port); stop_serve
# ends it (the caller traps it on EXIT).
start_serve() {
  local log=$1; shift
  "$build_dir/bin/rlcore" serve --port 0 "$@" >"$log" 2>&1 &
  serve_pid=$!
  server=
  for _ in $(seq 600); do
    server=$(grep -o 'listening on http://[0-9.:]*' "$log" | sed 's/listening on //' || true)
    [[ -n $server ]] && return 0
    kill -0 "$serve_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  echo "$(basename "$0"): rlcore serve did not start" >&2; cat "$log" >&2; exit 1
}

stop_serve() {
  if [[ -n ${serve_pid:-} ]]; then kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null || true; serve_pid=; fi
}
