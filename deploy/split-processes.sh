#!/usr/bin/env bash
# Tries the split shape on one machine: a private redis-server, a config service, a registry service, a stats service,
# a security service and two gateways (:8081, :8082) that call them over HTTP. Every service checks tokens itself, against the
# users, roles and JWT key in Redis; log in through either gateway as root with GOV_SUPER_PASSWORD (default below).
# Ctrl-C stops everything (by PID).
set -euo pipefail
cd "$(dirname "$0")/.."
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
# A signal ends the script (the EXIT trap then stops what it started); a trap that only cleaned up would let the script
# go on and start the processes still to come, with nobody left to stop them.
trap 'exit 130' INT
trap 'exit 143' TERM

npm run -s build # once, before the processes start
# Each process is started as `node scripts/start.mjs <kind>` (what `npm run start:<kind>` runs), not through npm: the PIDs
# kept are then the servers' own, and the SIGTERM of cleanup reaches them (npm run leaves its child running).
redis-server --port 6395 --save '' --appendonly no & pids+=($!)
sleep 0.5
REDIS_URL=redis://127.0.0.1:6395 GOV_CONFIG_SERVICE_PORT=8091 GOV_CONFIG_SERVICE_GRPC_PORT=9091 node scripts/start.mjs config & pids+=($!)
REDIS_URL=redis://127.0.0.1:6395 GOV_REGISTRY_SERVICE_PORT=8092 GOV_REGISTRY_SERVICE_GRPC_PORT=9092 node scripts/start.mjs registry & pids+=($!)
REDIS_URL=redis://127.0.0.1:6395 GOV_SUPER_PASSWORD=${GOV_SUPER_PASSWORD:-change-me} GOV_SECURITY_SERVICE_PORT=8095 GOV_SECURITY_SERVICE_GRPC_PORT=9095 node scripts/start.mjs security & pids+=($!)
REDIS_URL=redis://127.0.0.1:6395 GOV_STATS_SERVICE_PORT=8093 GOV_STATS_SERVICE_GRPC_PORT=9093 node scripts/start.mjs stats & pids+=($!)
sleep 3
for port in 8081 8082; do
  # REDIS_URL: the gateways lease their ID generators' machine ids there (without it both would use machine id 0)
  REDIS_URL=redis://127.0.0.1:6395 GOV_CONFIG_SERVICE_URL=http://127.0.0.1:8091 GOV_REGISTRY_SERVICE_URL=http://127.0.0.1:8092 GOV_STATS_SERVICE_URL=http://127.0.0.1:8093 GOV_SECURITY_SERVICE_URL=http://127.0.0.1:8095 PORT=$port MANAGEMENT_SERVER_PORT=$((port + 100)) \
    node scripts/start.mjs gateway & pids+=($!)
done
echo "gateways on :8081 and :8082, config service on :8091 (gRPC :9091), registry on :8092 (gRPC :9092), stats (and a stats worker) on :8093, security on :8095, Redis on :6395 — Ctrl-C to stop"
wait
