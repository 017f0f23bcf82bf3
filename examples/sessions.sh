#!/usr/bin/env bash
# Mayfly sessions walk-through: per-collection time to live. A "carts"
# collection with Cosmos DB's defaultTTL and a document's own ttl field, and a
# "sessions" collection whose keys slide: every read moves the expiration to
# min(now + idleTTL, created + maxLifetime). Waits about 5 s of wall clock.
#
#   make run                      # in another terminal
#   examples/sessions.sh          # MAYFLY=http://host:port to point elsewhere,
#                                 # MAYFLY_USER/MAYFLY_PASSWORD for other credentials
set -euo pipefail
url=${MAYFLY:-http://127.0.0.1:8091}
bucket=${BUCKET:-default}
creds="${MAYFLY_USER:-Administrator}:${MAYFLY_PASSWORD:-password}" # make run's development password
admin="$url/pools/default/buckets/$bucket"
scope=${SCOPE:-app$$}

say() { printf '\n== %s\n' "$*"; }
call() { curl -sS --fail-with-body -u "$creds" "$@"; echo; }
status() { curl -sS -o /dev/null -w '%{http_code}' -u "$creds" "$@"; }
expiration() { curl -sS -u "$creds" -D - -o /dev/null "$url/$bucket/docs/$1?collection=$scope.$2" | tr -d '\r' | sed -n 's/^X-Mayfly-Expiration: //Ip'; }

say "scope $scope"
call -X POST "$admin/scopes" -d name="$scope"

say "carts: defaultTTL=3600 (documents expire an hour after their last write)"
call -X POST "$admin/scopes/$scope/collections" -d name=carts -d defaultTTL=3600
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/cart1?collection=$scope.carts" --data-binary '{"items":3}'
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/cart2?collection=$scope.carts" --data-binary '{"items":1,"ttl":60}'
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/cart3?collection=$scope.carts" --data-binary '{"items":9,"ttl":-1}'
say "a ttl that is not -1 or a positive integer is refused"
curl -sS -u "$creds" -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/cart4?collection=$scope.carts" --data-binary '{"ttl":0}'
echo

say "removing defaultTTL re-evaluates the collection: nothing there expires any more"
call -X PATCH "$admin/scopes/$scope/collections/carts" -d defaultTTL=null
echo "cart1 expiration: $(expiration cart1 carts)  cart2 expiration: $(expiration cart2 carts)"

say "sessions: idleTTL=4, maxLifetime=7"
call -X POST "$admin/scopes/$scope/collections" -d name=sessions -d idleTTL=4 -d maxLifetime=7
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/used?collection=$scope.sessions" --data-binary '{"user":"ann"}'
call -X PUT -H 'Content-Type: application/json' "$url/$bucket/docs/forgotten?collection=$scope.sessions" --data-binary '{"user":"bo"}'

say "2 s later, a read of 'used' slides its expiration"
sleep 2
status "$url/$bucket/docs/used?collection=$scope.sessions"
echo
sleep 2.2

say "4 s after the writes: 'forgotten' is gone, 'used' is not"
echo "forgotten: $(status "$url/$bucket/docs/forgotten?collection=$scope.sessions")"
echo "used: $(status "$url/$bucket/docs/used?collection=$scope.sessions")"
sleep 0.3

say "reads never carry 'used' past created + maxLifetime"
call "$url/$bucket/docs/used?collection=$scope.sessions&meta=true"
meta=$(curl -sS -u "$creds" "$url/$bucket/docs/used?collection=$scope.sessions&meta=true")
created=$(printf '%s' "$meta" | sed -n 's/.*"created":\([0-9]*\).*/\1/p')
exp=$(printf '%s' "$meta" | sed -n 's/.*"expiration":\([0-9]*\).*/\1/p')
echo "expiration - created = $((exp - created))"

say "ep_sliding_extends"
call "$admin/stats" | tr ',' '\n' | grep ep_sliding_extends
