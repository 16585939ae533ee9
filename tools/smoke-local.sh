#!/usr/bin/env bash
# `make test`: the smoke test (tools/smoke.py, `make smoke`) against the
# local stack of `make run`, started here with a state folder of its own
# (so the payments sandbox starts from its seeded orders) and stopped after.
# The stack's ports must be free: stop a running `make run` first.
set -euo pipefail
cd "$(dirname "$0")/.."
state=$(mktemp -d)
REFUND_CHAT_STATE="$state" setsid tools/run-local.sh >"$state/run.log" 2>&1 &
stack=$!
stop() {
  kill -TERM -- "-$stack" 2>/dev/null || true
  wait "$stack" 2>/dev/null || true
  rm -rf "$state"
}
trap stop EXIT
# run-local.sh says so once the function has answered its warm-up request.
until grep -q "is running at" "$state/run.log"; do
  if ! kill -0 "$stack" 2>/dev/null; then
    echo "the local stack did not start:" >&2
    tail -n 30 "$state/run.log" >&2
    exit 1
  fi
  sleep 1
done
# The desk: ann's ID token from moto's staff pool, and a token of another
# pool (a customer's, signed as moto signs) that the door must refuse.
pool=$state/staff-pool.json
field() { .venv/bin/python -c "import json,sys; d=json.load(open('$pool')); print(eval(sys.argv[1]))" "$1"; }
staff_token=$(.venv/bin/python tools/staff-token.py sign-in "http://127.0.0.1:5005" "$(field "d['client_id']")" \
  "$(field "d['people'][0]['username']")" "$(field "d['people'][0]['password']")" | .venv/bin/python -c "import json,sys; print(json.load(sys.stdin)['id'])")
customer_token=$(.venv/bin/python tools/staff-token.py forge \
  '{"iss":"https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Customers","token_use":"id","sub":"u-1001","aud":"customers","exp":4102444800}' \
  | .venv/bin/python -c "import json,sys; print(json.load(sys.stdin)['token'])")
# A guest (contract 27): the guest pool's stand-in and its outbox; the
# guest's messages go through the page server, whose door checks their token.
guests=$state/guest-pool.json
guest_field() { .venv/bin/python -c "import json,sys; print(json.load(open('$guests'))[sys.argv[1]])" "$1"; }
# The venv's Python: the live check's WebSocket client (websockets) is there.
.venv/bin/python tools/smoke.py --url http://127.0.0.1:9000/support/refund-chat \
  --staff-url http://127.0.0.1:8080/staff --staff-token "$staff_token" --customer-token "$customer_token" \
  --guest-sign-in "$(guest_field sign_in_url)" --guest-client-id "$(guest_field client_id)" \
  --guest-outbox "$state/guest-outbox.jsonl" --guest-url http://127.0.0.1:8080/support/refund-chat \
  --return-item "A-1002:Blue mug" \
  --live-url ws://127.0.0.1:8085/event/realtime --live-host 127.0.0.1:8085
