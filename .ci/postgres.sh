#!/usr/bin/env bash
# Start Debian's PostgreSQL on loopback and print a URL for the test suite.
# Installs it first when missing. Safe to run again.
set -euo pipefail

if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | grep -q "^$version main"; then
  pg_createcluster "$version" main >/dev/null
fi
pg_ctlcluster "$version" main start 2>/dev/null || true
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p "$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')" && break
  sleep 1
done
pg_isready -q -h 127.0.0.1 || { echo "PostgreSQL did not start" >&2; exit 1; }
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname='agentwatch'\"" | grep -q 1 ||
  su postgres -c "psql -qc \"CREATE ROLE agentwatch LOGIN CREATEDB PASSWORD 'agentwatch'\""
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname='agentwatch'\"" | grep -q 1 ||
  su postgres -c "createdb -O agentwatch agentwatch"
port=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')
echo "postgresql://agentwatch:agentwatch@127.0.0.1:${port}/agentwatch"
