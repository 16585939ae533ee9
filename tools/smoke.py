"""`make smoke`: the first hour's checks of docs/deploy.md against a deployed
API (or the local stack: `make test` runs it there, so it cannot rot).

    python3 tools/smoke.py --url https://ID.execute-api.REGION.amazonaws.com/Prod/support/refund-chat \
        --token "$ID_TOKEN" --customer SUB [--order A-1001 --amount 1.00] [--turns-per-hour N]

Each step prints ok or FAIL with what came back; the exit status is 1 if
any failed. Only the standard library: it runs wherever Python 3 does.

1. a question (no refund): 200, a reply, a conversation id, JSON;
2. a refund on the test order, with an Idempotency-Key: 200;
3. the conversation read back (GET .../conversations/{id}): 200, both turns;
4. the refund's message sent again with the same key: the same answer, replayed;
5. a malformed body: a 400 with a `detail`, before any model call;
6. with --turns-per-hour (a stack deployed with a tiny budget for the smoke
   customer): messages until the budget answers 429 with Retry-After;
7. a visitor (contract 27, no token): a question answered with a visitor
   token, the conversation read back with it, and without it a 404;
8. the desk (contract 24), beside the endpoint at .../support/staff (or
   --staff-url): its page with a content-security-policy, the folder without
   its slash redirected, a queue read refused without a token (401) and with
   the customer's token (401 or 403), and with --staff-token (a member of
   the support staff group's ID token) the queue read: 200, JSON, its items;
9. with --guest-sign-in and --guest-client-id (contract 27): a guest signs
   in to the guest pool with a one-time code (read from --guest-outbox, the
   local stand-in's, or typed in), asks about --guest-order as `guest:<sub>`
   (200, a reply), and a token of the guest pool's shape that no key of
   the pool signed is refused (401).

It ends by listing what was checked against the documentation only, which a
real deploy confirms, and where to look.
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

failures = []


def step(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(what)
    return ok


def call(method, url, token, body=None, headers=None, redirect=True):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", token)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        opener = urllib.request.build_opener() if redirect else urllib.request.build_opener(_NoRedirect)
        with opener.open(request, timeout=300) as response:
            status, raw, got = response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        status, raw, got = error.code, error.read(), error.headers
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return status, parsed, raw, got


def visitor(url):
    """The visitors' routes: no authorizer, the token the first answer issues."""
    status, answer, raw, _ = call("POST", url + "/visitor", None, {"message": "How long does delivery take?"})
    token = (answer or {}).get("visitor") if status == 200 else None
    step(bool(token) and bool((answer or {}).get("reply")), "a visitor's question is answered, with a token", f"{status} {raw[:200]!r}")
    if not token:
        return
    read = f"{url}/visitor/conversations/{urllib.parse.quote(answer['conversation_id'], safe='')}"
    status, _, raw, _ = call("GET", read, None, headers={"x-visitor-token": token})
    step(status == 200, "the visitor reads the conversation back with the token", f"{status} {raw[:200]!r}")
    status, _, raw, _ = call("GET", read, None)
    step(status == 404, "without the token it is a 404", f"{status} {raw[:200]!r}")


def cognito(sign_in, client_id, target, body):
    """One call of Cognito's JSON API, as the chat page makes it."""
    request = urllib.request.Request(sign_in, data=json.dumps({"ClientId": client_id, **body}).encode(), method="POST")
    request.add_header("content-type", "application/x-amz-json-1.1")
    request.add_header("x-amz-target", "AWSCognitoIdentityProviderService." + target)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def guest(url, sign_in, client_id, email, order, outbox):
    """A guest: the guest pool's passwordless sign-in, then a question about an order."""
    # Without a password, Cognito takes a sign-up that gives the e-mail (the pool's client writes only it).
    status, answer = cognito(sign_in, client_id, "SignUp",
                             {"Username": email, "UserAttributes": [{"Name": "email", "Value": email}]})
    session = None
    if status != 200 and str(answer.get("__type", "")).endswith("UsernameExistsException"):
        status, answer = cognito(sign_in, client_id, "InitiateAuth", {
            "AuthFlow": "USER_AUTH", "AuthParameters": {"USERNAME": email, "PREFERRED_CHALLENGE": "EMAIL_OTP"}})
        session = answer.get("Session")
    if not step(status == 200, "the guest pool sends a code", f"{status} {answer}"):
        return
    if outbox:
        with open(outbox) as sent:
            codes = [json.loads(line) for line in sent if line.strip()]
        code = next((c["code"] for c in reversed(codes) if c["to"].lower() == email.lower()), "")
    else:
        code = input(f"the code sent to {email}: ").strip()
    if session is None:
        status, answer = cognito(sign_in, client_id, "ConfirmSignUp", {"Username": email, "ConfirmationCode": code})
        if status == 200:
            status, answer = cognito(sign_in, client_id, "InitiateAuth", {
                "AuthFlow": "USER_AUTH", "AuthParameters": {"USERNAME": email}, "Session": answer.get("Session")})
    else:
        status, answer = cognito(sign_in, client_id, "RespondToAuthChallenge", {
            "ChallengeName": "EMAIL_OTP", "Session": session,
            "ChallengeResponses": {"USERNAME": email, "EMAIL_OTP_CODE": code}})
    token = ((answer or {}).get("AuthenticationResult") or {}).get("IdToken")
    if not step(status == 200 and bool(token), "the code signs the guest in", f"{status} {answer}"):
        return
    part = token.split(".")[1]
    claims = json.loads(__import__("base64").urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    user_id = "guest:" + claims["sub"]
    status, answer, raw, _ = call("POST", url, token, {"user_id": user_id, "message": f"Where is my order {order}?"})
    step(status == 200 and bool((answer or {}).get("reply")), f"the guest asks about {order}", f"{status} {raw[:200]!r}")
    forged = ".".join([token.split(".")[0], token.split(".")[1], "c2lnbmF0dXJl"])
    status, _, raw, _ = call("POST", url, forged, {"user_id": user_id, "message": "hello"})
    step(status == 401, "a guest token no key of the pool signed is refused (401)", f"{status} {raw[:200]!r}")


def what_only_aws_shows(url):
    """What these checks cannot show against the local stack (its stand-ins
    answer as Cognito's documentation says), and where to look on AWS."""
    local = "127.0.0.1" in url or "localhost" in url
    print("\nchecked against the documentation only" + (", here against the local stand-ins:" if local else "; on AWS, look at:"))
    for line in [
        "Cognito takes a password-less SignUp with the e-mail as its one attribute, first factors EMAIL_OTP and PASSWORD (the guest step above)",
        "the pool sends its codes through the shop's SES identity and From (the code's e-mail: its From and its headers)",
        "WAF's guest-sign-in-per-address rule sees the pool's X-Amz-Target (its GuestSignInPerAddress metric after a sign-up)",
        "a guest's code is good for SignInSessionMinutes (10) on AWS as locally",
    ]:
        print(f"  - {line}")


def desk(staff, customer_token, staff_token):
    """The desk's routes: the page, and the queue only for the staff pool."""
    status, _, raw, headers = call("GET", staff + "/", None)
    page = status == 200 and (headers.get("content-type") or "").startswith("text/html")
    step(page, "the desk's page is served", f"{status} {raw[:120]!r}")
    step("frame-ancestors 'none'" in (headers.get("content-security-policy") or ""), "... with its content-security-policy",
         headers.get("content-security-policy"))
    status, _, _, headers = call("GET", staff, None, redirect=False)
    step(status in (301, 302, 307, 308) and (headers.get("location") or "").endswith("/staff/"),
         "the desk without its slash redirects to the folder", f"{status} {headers.get('location')}")
    status, _, raw, _ = call("GET", staff + "/queue", None)
    step(status == 401, "the queue without a token is refused (401)", f"{status} {raw[:120]!r}")
    if customer_token:
        status, _, raw, _ = call("GET", staff + "/queue", customer_token)
        step(status in (401, 403), "the queue with a customer's token is refused", f"{status} {raw[:120]!r}")
    if staff_token:
        status, queue, raw, _ = call("GET", staff + "/queue", staff_token)
        listed = all(isinstance((queue or {}).get(kind), list) for kind in ("approvals", "handoffs", "unknown_outcomes"))
        step(status == 200 and listed, "the queue reads with a staff token",
             f"{status} {raw[:200]!r}")


def live(realtime, host, staff, url, token, customer, staff_token):
    """Contract 31: the desk's channel, heard with a staff token; a person's
    reply in a conversation handed to a person arrives there as a poke."""
    import base64
    from websockets.sync.client import connect

    auth = {"Authorization": staff_token, "host": host}
    header = base64.urlsafe_b64encode(json.dumps(auth).encode()).decode().rstrip("=")
    try:
        socket = connect(realtime, subprotocols=["aws-appsync-event-ws", "header-" + header], open_timeout=10)
    except Exception as error:  # the socket's failure is the check's
        step(False, "the live socket opens", repr(error))
        return

    def frame(kind, seconds=10):
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                got = json.loads(socket.recv(timeout=max(deadline - time.time(), 0.1)))
            except TimeoutError:
                break
            if got.get("type") == kind or got.get("type", "").endswith("error"):
                return got
        return {}

    with socket:
        socket.send(json.dumps({"type": "connection_init"}))
        step(frame("connection_ack").get("type") == "connection_ack", "the live socket is accepted with a staff token")
        socket.send(json.dumps({"type": "subscribe", "id": str(uuid.uuid4()), "channel": "/desk/queue", "authorization": auth}))
        step(frame("subscribe_success").get("type") == "subscribe_success", "... and hears the desk's channel")
        status, answer, raw, _ = call("POST", url, token, {"user_id": customer, "message": "I want to talk to a person"})
        conversation = (answer or {}).get("conversation_id")
        step(status == 200 and bool(conversation), "a conversation is handed to a person", f"{status} {raw[:200]!r}")
        if not conversation:
            return
        status, _, raw, _ = call("POST", f"{staff}/conversations/{urllib.parse.quote(conversation, safe='')}/reply",
                                 staff_token, {"text": "Smoke test: a person's reply."}, {"idempotency-key": str(uuid.uuid4())})
        step(status == 200, "a person replies from the desk", f"{status} {raw[:200]!r}")
        started = time.time()
        heard = None
        while time.time() - started < 10:
            got = frame("data", 10 - (time.time() - started))
            if not got:
                break
            poke = json.loads(got.get("event") or "{}")
            if poke.get("kind") == "person_reply" and poke.get("conversation_id") == conversation:
                heard = poke
                break
        step(heard is not None and set(heard) == {"conversation_id", "seq", "kind"},
             "the reply's poke arrives, three fields and no words", f"{heard}, {time.time() - started:.2f} s")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def returned(url, token, customer, order, item):
    """Contract 28: code's line asks, the next message's yes starts the return, the reply names its label."""
    status, answer, raw, _ = call("POST", url, token, {
        "user_id": customer, "message": f"I'd like to return the {item} from {order}, I changed my mind"})
    reply = (answer or {}).get("reply") or ""
    if not step(status == 200 and f"To confirm: return from order {order}" in reply,
                "a return is proposed in code's words", f"{status} {raw[:300]!r}"):
        return
    status, answer, raw, _ = call("POST", url, token, {
        "user_id": customer, "message": "yes", "conversation_id": answer.get("conversation_id")})
    reply = (answer or {}).get("reply") or ""
    step(status == 200 and f"from order {order} has started" in reply and "label" in reply,
         "the next message's yes starts it, and the reply gives its label", f"{status} {raw[:300]!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the POST endpoint, .../support/refund-chat")
    parser.add_argument("--token", default="", help="a signed-in test customer's token (Authorization)")
    parser.add_argument("--customer", default="u-1001", help="that customer's id (the token's sub)")
    parser.add_argument("--order", default="A-1003", help="a test order of that customer")
    parser.add_argument("--amount", default="1.00", help="what to refund on it (within the automatic limit)")
    parser.add_argument("--turns-per-hour", type=int, default=0, help="the stack's CUSTOMER_TURNS_PER_HOUR, if tiny")
    parser.add_argument("--staff-url", default="", help="the desk's folder (default: beside --url, .../support/staff)")
    parser.add_argument("--staff-token", default="", help="a support staff member's ID token (Authorization), for the queue read")
    parser.add_argument("--customer-token", default="", help="a customer's token the desk must refuse (default: --token)")
    parser.add_argument("--guest-sign-in", default="", help="the guest pool's Cognito endpoint (https://cognito-idp.REGION.amazonaws.com/)")
    parser.add_argument("--guest-client-id", default="", help="the guest pool's app client (GuestUserPoolClient)")
    parser.add_argument("--guest-email", default="ada@shop.example", help="a test guest's mailbox")
    parser.add_argument("--guest-order", default="A-1001", help="an order placed with that e-mail")
    parser.add_argument("--guest-outbox", default="", help="the local stand-in's outbox (else the code is typed in)")
    parser.add_argument("--guest-url", default="", help="where a guest's message goes (default: --url)")
    parser.add_argument("--live-url", default="", help="the Event API's realtime endpoint (the stack's LiveRealtimeUrl, "
                        "wss://.../event/realtime); with --staff-token, the desk's channel hears a reply's poke")
    parser.add_argument("--live-host", default="", help="the Event API's HTTP host (default: --live-url's, appsync-realtime-api "
                        "read as appsync-api)")
    parser.add_argument("--return-item", default="", help="ORDER:ITEM, a delivered test order's item to return "
                        "(contract 28; starts a real return, so only on a stack that serves `return`)")
    args = parser.parse_args()
    url = args.url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        print("--url must be the deployed endpoint (make smoke URL=https://.../Prod/support/refund-chat TOKEN=...)")
        return 2

    status, answer, raw, headers = call("POST", url, args.token, {
        "user_id": args.customer, "message": "How long do I have to return a damaged item?",
    })
    asked = step(status == 200 and isinstance(answer, dict) and answer.get("reply"), "a question gets a reply", f"{status} {raw[:200]!r}")
    conversation = (answer or {}).get("conversation_id") if asked else None
    step(bool(conversation), "the answer names its conversation", f"{raw[:200]!r}")
    step((headers.get("content-type") or "").startswith("application/json"), "the answer is JSON", headers.get("content-type"))
    step(bool(headers.get("x-request-id")), "the answer carries x-request-id")

    key = str(uuid.uuid4())
    refund = {"user_id": args.customer, "message": f"Order {args.order} arrived broken: please refund {args.amount}."}
    if conversation:
        refund["conversation_id"] = conversation
    status, answer, first_raw, _ = call("POST", url, args.token, refund, {"idempotency-key": key})
    step(status == 200 and isinstance(answer, dict), f"a refund of {args.amount} on {args.order} is answered", f"{status} {first_raw[:200]!r}")

    if conversation:
        read_url = f"{url}/conversations/{urllib.parse.quote(conversation, safe='')}?" + urllib.parse.urlencode({"user_id": args.customer})
        status, read, raw, _ = call("GET", read_url, args.token)
        shown = (read or {}).get("messages") or []
        step(status == 200 and len(shown) >= 3, "the conversation reads back (GET)", f"{status} {raw[:200]!r}")
        step(isinstance((read or {}).get("awaiting_approval"), bool), "the read says whether a refund awaits a person", f"{raw[:200]!r}")

    status, _, again_raw, headers = call("POST", url, args.token, refund, {"idempotency-key": key})
    step(status == 200 and again_raw == first_raw, "the same key again: the same answer", f"{status} {again_raw[:200]!r}")
    step(headers.get("idempotent-replayed") == "true", "... marked as replayed", headers.get("idempotent-replayed"))

    status, answer, raw, _ = call("POST", url, args.token, b"{not json")
    step(status == 400 and isinstance(answer, dict) and answer.get("detail"), "a malformed body is a 400 with a detail", f"{status} {raw[:200]!r}")

    if args.turns_per_hour:
        spent = None
        for _ in range(args.turns_per_hour + 1):
            status, _, _, headers = call("POST", url, args.token, {"user_id": args.customer, "message": "hello"})
            if status == 429:
                spent = headers
                break
        step(spent is not None and spent.get("retry-after"), "a spent budget is a 429 with Retry-After")

    if args.return_item:
        returned(url, args.token, args.customer, *args.return_item.split(":", 1))
    visitor(url)
    if args.guest_sign_in and args.guest_client_id:
        guest(args.guest_url.rstrip("/") or url, args.guest_sign_in, args.guest_client_id, args.guest_email,
              args.guest_order, args.guest_outbox)
    staff = args.staff_url.rstrip("/") or url.rsplit("/", 1)[0] + "/staff"
    desk(staff, args.customer_token or args.token, args.staff_token)
    if args.live_url and args.staff_token:
        host = args.live_host or urllib.parse.urlsplit(args.live_url).netloc.replace("appsync-realtime-api", "appsync-api")
        live(args.live_url, host, staff, url, args.token, args.customer, args.staff_token)

    what_only_aws_shows(url)

    if failures:
        print(f"\n{len(failures)} of the smoke test's checks failed")
        return 1
    print("\nthe smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
