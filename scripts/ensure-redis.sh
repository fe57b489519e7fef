#!/usr/bin/env bash
# ensure-redis.sh: make sure redis-server is on PATH. Installs Debian's
# redis-server with apt-get when run as root; otherwise says how. Tests start
# their own redis-server processes (package redistest); this script never
# starts, configures or flushes a shared Redis.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "redis-server missing: installing it with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
  # Debian's package may start a service on 6379; tests never use it.
  command -v redis-server >/dev/null && exit 0
fi
echo "redis-server is not installed. Install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) and run again." >&2
exit 1
