#!/usr/bin/env bash
# `make run`: the function under `cargo lambda watch`, with every dependency
# emulated on 127.0.0.1. Ctrl-C stops everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
STATE=${REFUND_CHAT_STATE:-.local}
MOTO_PORT=5005 PAYMENTS_PORT=8081 MODEL_PORT=8082 GUESTS_PORT=8083 STAFF_POOL_PORT=8084 LIVE_PORT=8085 FUNCTION_PORT=9000 PAGE_PORT=8080 DESK_PORT=9001
SECRET_ID=refund-chat/openai-api-key
mkdir -p "$STATE"

groups=()
stop_all() {
  trap - EXIT INT TERM
  for pgid in "${groups[@]}"; do kill -TERM -- "-$pgid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "stopped the local stack"
}
trap stop_all EXIT
trap 'exit 0' INT TERM  # Ctrl-C is the normal way to stop

# Starts a command in its own process group (so stop_all ends its children too).
start() {
  local name=$1; shift
  setsid "$@" >"$STATE/$name.log" 2>&1 &
  groups+=("$!")
}

wait_for_port() {
  local name=$1 port=$2 tries=${3:-300}
  for ((i = 0; i < tries; i++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "$name did not start on port $port; its log: $STATE/$name.log" >&2
  tail -n 20 "$STATE/$name.log" >&2 || true
  exit 1
}

for port in $MOTO_PORT $PAYMENTS_PORT $MODEL_PORT $GUESTS_PORT $LIVE_PORT $FUNCTION_PORT $PAGE_PORT $DESK_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port on 127.0.0.1 is in use: stop whatever runs there (an earlier make run?) and try again" >&2
    exit 1
  fi
done

echo "building the function and the local stand-ins..."
# Built one at a time: together, cargo would unify their features and
# `cargo lambda watch` would then rebuild the function from scratch.
cargo build --quiet -p refund-chat
cargo build --quiet -p refund-chat-local
cargo build --quiet -p refund-chat-testkit --bin refund-chat-local-aws

start moto "$VENV/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT"
start payments target/debug/refund-chat-local payments --port "$PAYMENTS_PORT" --refunds-file "$STATE/payments-refunds.jsonl"
start model target/debug/refund-chat-local model --port "$MODEL_PORT"
wait_for_port moto "$MOTO_PORT"
wait_for_port payments "$PAYMENTS_PORT"
wait_for_port model "$MODEL_PORT"

# The key the function reads through the real Secrets Manager client (the local
# model ignores it; a real OpenAI-compatible server would need a real one), and
# the refund ledger table. moto keeps both in memory: every run starts afresh.
target/debug/refund-chat-local-aws --endpoint "http://127.0.0.1:$MOTO_PORT" setup \
  --secret-id "$SECRET_ID" --api-key "${OPENAI_API_KEY:-sk-local-not-a-real-key}"

# The support team's desk (contract 24): the staff pool in moto's Cognito
# (two people, new passwords every run), and the staff function under a
# second watch, reading the person from the headers the page server sets
# once a token has passed its door (as API Gateway's authorizer would).
# The page signs in through a door to moto's pool that answers RevokeToken
# (contract 30: "Sign out" revokes), which moto lacks.
"$VENV/bin/python" tools/local-staff-pool.py --endpoint "http://127.0.0.1:$MOTO_PORT" >"$STATE/staff-pool.json"
pool() { "$VENV/bin/python" -c "import json,sys; d=json.load(open('$STATE/staff-pool.json')); print(eval(sys.argv[1]))" "$1"; }
start staff-pool target/debug/refund-chat-local staff-pool --port "$STAFF_POOL_PORT" --moto "http://127.0.0.1:$MOTO_PORT"
wait_for_port staff-pool "$STAFF_POOL_PORT"
{
  cat local.env
  echo "STAFF_IDENTITY=header"
  echo "STAFF_POOL_CLIENT_ID=$(pool "d['client_id']")"
  echo "STAFF_SIGN_IN_URL=http://127.0.0.1:$STAFF_POOL_PORT/"
} >"$STATE/staff.env"

# Guests (contract 27): the guest pool in moto, and the stand-in for the
# passwordless sign-in moto lacks. Every code it "sends" lands in the
# outbox, which this terminal shows (below) as a mailbox would.
OUTBOX="$STATE/guest-outbox.jsonl"
: >"$OUTBOX"
rm -f "$STATE/guest-pool.json"
start guests target/debug/refund-chat-local guests --port "$GUESTS_PORT" --moto "http://127.0.0.1:$MOTO_PORT" \
  --outbox "$OUTBOX" --describe "$STATE/guest-pool.json"
wait_for_port guests "$GUESTS_PORT"
guests() { "$VENV/bin/python" -c "import json,sys; d=json.load(open('$STATE/guest-pool.json')); print(d[sys.argv[1]])" "$1"; }
{
  cat local.env
  echo "GUEST_POOL_ISSUER=$(guests issuer)"
  echo "GUEST_POOL_CLIENT_ID=$(guests client_id)"
  echo "GUEST_SIGN_IN_URL=$(guests sign_in_url)"
} >"$STATE/function.env"

# Live pokes (contract 31): the Event API's stand-in, every connect and
# subscribe decided by the project's own authorizer code over the same
# tables and pools; a customer picked on the page (USER_IDENTITY=body)
# listens as the body names them. Both functions publish to it.
{
  cat "$STATE/function.env"
  echo "STAFF_POOL_ISSUER=$(pool "d['issuer']")"
  echo "STAFF_POOL_CLIENT_ID=$(pool "d['client_id']")"
} >"$STATE/live.env"
start live bash -c 'set -a; . "$0"; set +a; exec "$@"' "$STATE/live.env" \
  target/debug/refund-chat-local event-api --port "$LIVE_PORT" --moto "http://127.0.0.1:$MOTO_PORT" --body-customers
wait_for_port live "$LIVE_PORT"
for env in function staff; do
  {
    echo "LIVE_EVENTS_URL=http://127.0.0.1:$LIVE_PORT/event"
    echo "LIVE_REALTIME_URL=ws://127.0.0.1:$LIVE_PORT/event/realtime"
  } >>"$STATE/$env.env"
done

start function "$VENV/bin/cargo-lambda" lambda watch --package refund-chat --bin refund-chat --env-file "$STATE/function.env" \
  --invoke-address 127.0.0.1 --invoke-port "$FUNCTION_PORT"
wait_for_port function "$FUNCTION_PORT"
start desk "$VENV/bin/cargo-lambda" lambda watch --package refund-chat --bin refund-chat-staff --env-file "$STATE/staff.env" \
  --invoke-address 127.0.0.1 --invoke-port "$DESK_PORT"
wait_for_port desk "$DESK_PORT"
URL="http://127.0.0.1:$FUNCTION_PORT/support/refund-chat"
# The page links a return's label on the origins the function links it on.
RETURN_LABEL_ORIGINS="$(sed -n 's/^RETURN_LABEL_ORIGINS=//p' local.env)"
export RETURN_LABEL_ORIGINS
start page target/debug/refund-chat-local widget --port "$PAGE_PORT" --web web --function "$URL" \
  --desk-function "http://127.0.0.1:$DESK_PORT" --staff-endpoint "http://127.0.0.1:$MOTO_PORT" \
  --staff-pool-id "$(pool "d['pool_id']")" --staff-issuer "$(pool "d['issuer']")" --staff-client-id "$(pool "d['client_id']")" \
  --guest-pool "$STATE/guest-pool.json" --guest-endpoint "http://127.0.0.1:$MOTO_PORT" \
  --live-url "ws://127.0.0.1:$LIVE_PORT/event/realtime"
wait_for_port page "$PAGE_PORT"
# Warm-up: the first invocation waits for watch to start the function; a GET
# is answered 405 without touching the model, payments or the secret. The
# desk's page holds no data: its first GET starts the staff function.
curl -s -o /dev/null --max-time 900 -X GET "$URL"
curl -s -o /dev/null --max-time 900 "http://127.0.0.1:$PAGE_PORT/staff/"
cat <<TXT

refund-chat is running at $URL

  Chat page:  http://127.0.0.1:$PAGE_PORT/   (pick a customer, type a message, press Enter;
              or pick "a visitor", ask about order A-1001, and confirm the e-mail ada@shop.example
              with the code this terminal shows: the guest pool's outbox)
  The desk:   http://127.0.0.1:$PAGE_PORT/staff/   (the support team: approvals, handoffs, replies)
              ann / $(pool "d['people'][0]['password']")   an approver
              sam / $(pool "d['people'][1]['password']")   the support staff group alone (reads, replies, closes)

  Secrets Manager (moto)  http://127.0.0.1:$MOTO_PORT   secret $SECRET_ID
  DynamoDB (moto)         http://127.0.0.1:$MOTO_PORT   refund ledger table refund-chat-ledger
  payments sandbox        http://127.0.0.1:$PAYMENTS_PORT   refunds made: $STATE/payments-refunds.jsonl
  local model             http://127.0.0.1:$MODEL_PORT/v1
  live pokes (AppSync Events' stand-in)  http://127.0.0.1:$LIVE_PORT/event   (POST /_faults: drop_sockets, no_keepalive,
                          refuse_subscribe, delay_ms, publish: down|error|failed)
  guest pool sign-in      http://127.0.0.1:$GUESTS_PORT/   (moto's pool $(guests pool_id); codes: $OUTBOX)
  chat page               http://127.0.0.1:$PAGE_PORT/   (same origin as the function: it passes chat requests on;
                          curl -X POST http://127.0.0.1:$PAGE_PORT/__faults/drop-next-answer drops the next answer)
  the desk's function     http://127.0.0.1:$DESK_PORT/support/staff/   (behind the page server's door only)
  staff pool (moto)       $(pool "d['pool_id']")   $STATE/staff-pool.json
  logs                    $STATE/*.log  (the function's trace: $STATE/function.log; the desk's: $STATE/desk.log)

Refund a seeded order (u-1001 paid 12.50 for order A-1001):

  curl -s $URL -H 'content-type: application/json' \\
    -d '{"user_id":"u-1001","message":"My mug from order A-1001 arrived broken, please refund 12.50"}'

Run it twice: the second time the payments rejection reaches you in words.

With an Idempotency-Key (what the chat widget sends), the same request twice is
one refund, and the second answer is the first, replayed:

  curl -si $URL -H 'content-type: application/json' -H 'idempotency-key: demo-1' \
    -d '{"user_id":"u-1001","message":"Order A-1002: the shade is cracked, please refund 5.00"}'

Money moved:      curl -s http://127.0.0.1:$PAYMENTS_PORT/refunds
Refund ledger:    make ledger
Replay an event:  make invoke EVENT=events/refund.json
Start afresh:     make reset-payments (while stopped)

Ctrl-C stops everything. The one-time codes the guest pool sends appear below.
TXT
# The guests' mailbox: each code as it is "sent" (contract 27).
setsid bash -c 'tail -n 0 -F "$1" 2>/dev/null | sed -u "s/^/guest pool outbox: /"' _ "$OUTBOX" &
groups+=("$!")
wait
