#!/usr/bin/env bash
# The frozen app, for real: from an empty folder, with no .venv on PATH and no
# LLAMA_SERVER, it must run a 2-request experiment against the llama-server it carries, with
# the model it carries, headless (`workbench run`) and in its window (`workbench gui
# --autorun --quit-when-done`, offscreen), and write a complete session each time.
# Usage: packaging/smoke_test.sh [BUNDLE_DIR]   (default build/bundle, as `make bundle` makes)
set -euo pipefail

bundle_dir=$(cd "${1:-build/bundle}" && pwd)
case "$(uname -s)" in
  Darwin) app="$bundle_dir/Concurrency Workbench.app/Contents/MacOS/workbench" ;;
  *) app="$bundle_dir/workbench/workbench" ;;
esac
[[ -x $app ]] || { echo "smoke test: no frozen app at $app (run make bundle)"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset LLAMA_SERVER VIRTUAL_ENV
# No .venv on PATH, and a home of its own: no preferences naming another server or model.
export PATH=/usr/local/bin:/usr/bin:/bin QT_QPA_PLATFORM=offscreen HOME="$work/home"
export XDG_CONFIG_HOME="$HOME/.config" XDG_DATA_HOME="$HOME/.local/share" XDG_CACHE_HOME="$HOME/.cache"
mkdir -p "$HOME"
if command -v llama-server >/dev/null; then
  echo "smoke test: note: $(command -v llama-server) is on PATH; the app must still use its own"
fi

cat > tiny.toml <<'TOML'
name = "smoke"
description = "Two short requests against the bundled server and model."

[server]
model = "default"
slots = 1
ctx = 1024

[workload]
requests = 2
concurrency = 2
max_tokens = 8
ignore_eos = true
warmup = 0
TOML

# A session is complete, and every one of its requests succeeded.
check_session() {
  local folder=$1 sessions
  sessions=("$folder"/*.session.sqlite)
  [[ -f ${sessions[0]} ]] || { echo "smoke test: no session written in $folder"; return 1; }
  python3 - "${sessions[0]}" <<'PY'
import sqlite3, sys
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
status, error = conn.execute("SELECT status, error FROM session").fetchone()
total, ok = conn.execute("SELECT count(*), coalesce(sum(ok), 0) FROM requests").fetchone()
print(f"  {sys.argv[1]}: status {status}, {ok}/{total} requests ok")
sys.exit(0 if status == "complete" and total == 2 and ok == total and error is None else 1)
PY
}

# Run a command for at most $1 seconds; meanwhile note each llama-server among its
# descendants (ps's args: the path it was started by) in servers.txt.
run_watched() {
  local limit=$1 pid deadline
  shift
  "$@" &
  pid=$!
  deadline=$((SECONDS + limit))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS > deadline)); then
      echo "smoke test: still running after ${limit} s: $*"
      kill -TERM "$pid"
      break
    fi
    descendants "$pid" | while read -r child; do
      ps -o args= -p "$child" 2>/dev/null | awk '$1 ~ /llama-server$/ {print $1}'
    done >>servers.txt
    sleep 0.2
  done
  wait "$pid"
}

descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}

# Every llama-server seen was the app's own.
check_servers() {
  local seen
  seen=$(sort -u servers.txt)
  : >servers.txt
  [[ -n $seen ]] || { echo "smoke test: saw no llama-server running"; return 1; }
  echo "  llama-server: $seen"
  [[ $seen == "$bundle_dir"/* && $seen != *$'\n'* ]] \
    || { echo "smoke test: a llama-server from outside the bundle ran"; return 1; }
}

: >servers.txt
echo "smoke test: $app"
"$app" --version
passed=0 failed=0
echo "smoke test: headless run"
if run_watched 300 "$app" run tiny.toml --out headless --quiet && check_session headless \
  && check_servers; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi
echo "smoke test: the window, offscreen"
if run_watched 300 "$app" gui --experiment tiny.toml --autorun --quit-when-done --out window \
  --screenshot window.png && check_session window && check_servers && [[ -s window.png ]]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi
echo "smoke: $passed passed, $failed failed"
[[ $failed == 0 ]]
