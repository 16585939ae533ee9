"""The SAM-transformed template, checked (contract 20): what API Gateway and
Lambda are given, not only what template.yaml says. Run by `make test`
with the project's .venv (the SAM CLI's translator).

Every route's integration streams (response-streaming-invocations URI,
responseTransferMode STREAM) with a timeout above the function's and at
most 900 s; only the named stage exists; no concurrency is reserved unless
asked for; API Gateway's own 4xx and 5xx answers carry the page's CORS
header and a {"detail"} body; the function and the stage trace; the stage
writes access logs."""

import json
import os
import sys

import yaml
from samtranslator.translator.transform import transform


class NoManagedPolicies:
    """The template names its own roles: no SAM policy template to look up."""

    def load(self):
        return {}


def main(path, written=None):
    # The translator names a region in ARNs; any will do, nothing is called.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with open(path) as f:
        template = yaml.safe_load(f)
    # As `sam validate` does: a local CodeUri is uploaded by `sam deploy`.
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://bucket/key"
    # The translator logs its feature toggles on stderr: noise here.
    import logging

    logging.disable(logging.WARNING)
    out = transform(template, {}, NoManagedPolicies())
    # Kept for cfn-lint (make test): the transformed template is linted with
    # no exception, so the SAM pass's one exception hides nothing of the API.
    if written:
        with open(written, "w") as f:
            json.dump(out, f, indent=1)
    resources = out["Resources"]
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    function_timeout = resources["RefundChatFunction"]["Properties"]["Timeout"]
    apis = [r for r in resources.values() if r["Type"] == "AWS::ApiGateway::RestApi"]
    check(len(apis) == 1, "one REST API")
    timeout_default = template["Parameters"]["IntegrationTimeoutMillis"]["Default"]
    methods = 0
    for path, item in apis[0]["Properties"]["Body"]["paths"].items():
        for method, operation in item.items():
            integration = operation.get("x-amazon-apigateway-integration")
            if not integration or integration.get("type") != "aws_proxy":
                continue
            methods += 1
            uri = json.dumps(integration["uri"])
            check("response-streaming-invocations" in uri, f"{method.upper()} {path}: the streaming invocation URI")
            check(integration.get("responseTransferMode") == "STREAM", f"{method.upper()} {path}: responseTransferMode STREAM")
            timeout = integration.get("timeoutInMillis")
            check(timeout == {"Ref": "IntegrationTimeoutMillis"}, f"{method.upper()} {path}: the integration timeout parameter")
            # Who may call it: the customers' pool on the chat's routes, the
            # staff's on the desk's (contract 24), nobody's on the page's files
            # and the visitors' routes (contract 27).
            security = [name for entry in operation.get("security", []) for name in entry]
            staff = path.startswith("/support/staff")
            page = path in ("/support/staff/", "/support/staff/desk.js", "/support/staff/desk.css",
                            "/support/", "/support/chat.js", "/support/chat.css")
            visitor = path.startswith("/support/refund-chat/visitor")
            expected = ["NONE"] if page or visitor else ["StaffCognito"] if staff else ["CustomerCognito"]
            check(security == expected, f"{method.upper()} {path}: authorizer {expected[0]} ({security})")
            called = "RefundChatStaffFunction" if staff else "RefundChatFunction"  # the chat's page is the chat function's
            check(called in uri, f"{method.upper()} {path}: integrates {called}")
    check(methods == 28, f"the chat's 10 routes (3 the visitors', 3 its page's, the claim, the rating) and the desk's 18 integrate their functions ({methods})")
    check(function_timeout * 1000 < timeout_default <= 900000, f"function {function_timeout} s < integration {timeout_default} ms <= 900 s")
    staff_timeout = resources["RefundChatStaffFunction"]["Properties"]["Timeout"]
    check(staff_timeout * 1000 < timeout_default, f"the desk's function {staff_timeout} s < integration {timeout_default} ms")

    stages = [r for r in resources.values() if r["Type"] == "AWS::ApiGateway::Stage"]
    check([s["Properties"]["StageName"] for s in stages] == ["Prod"], "only the named stage (Prod), no 'Stage'")
    stage = stages[0]["Properties"]
    check(stage.get("TracingEnabled") is True, "the stage traces (X-Ray)")
    check("DestinationArn" in stage.get("AccessLogSetting", {}), "the stage writes access logs")
    # The web ACL (contract 27) on the stage SAM made, and on the guest pool.
    stage_name = next(name for name, r in resources.items() if r["Type"] == "AWS::ApiGateway::Stage")
    on_stage = resources.get("WebAclOnTheStage", {}).get("Properties", {}).get("ResourceArn", {})
    check(f"${{{stage_name}}}" in on_stage.get("Fn::Sub", ""), f"the web ACL is on the stage ({stage_name})")
    on_pool = resources.get("WebAclOnTheGuestPool", {}).get("Properties", {}).get("ResourceArn")
    check(on_pool == {"Fn::GetAtt": ["GuestUserPool", "Arn"]}, "the web ACL is on the guest pool")
    # The visitors' routes are throttled on their own (contract 27).
    settings = {(m.get("ResourcePath"), m.get("HttpMethod")): m for m in stage.get("MethodSettings", [])}
    for path, method in [("/~1support~1refund-chat~1visitor", "POST"),
                         ("/~1support~1refund-chat~1visitor~1conversations~1{id}", "GET")]:
        throttle = settings.get((path, method), {})
        check(throttle.get("ThrottlingRateLimit") == {"Ref": "VisitorRateLimit"},
              f"{method} {path}: the visitors' own throttle on the stage")

    # A stage with access logs is refused until the account has its logging
    # role: the stage must come after ApiGatewayAccount (when the stack
    # creates it), through the dependency graph CloudFormation builds.
    stage_name = next(name for name, r in resources.items() if r["Type"] == "AWS::ApiGateway::Stage")
    check(
        "ApiGatewayAccount" in depends_on(resources, stage_name),
        f"the stage ({stage_name}) is created after ApiGatewayAccount",
    )

    function = resources["RefundChatFunction"]["Properties"]
    check(function.get("TracingConfig", {}).get("Mode") == "Active", "the function traces (X-Ray, active)")
    reserved = function.get("ReservedConcurrentExecutions", {})
    condition = out["Conditions"].get("ReservesConcurrency")
    check(
        "Fn::If" in reserved and template["Parameters"]["ReservedConcurrency"]["Default"] == 0 and condition is not None,
        "no concurrency reserved by default (ReservedConcurrency 0, through a condition)",
    )

    # Guests (contract 27): the customers' authorizer takes both pools; the
    # guest pool signs in by an e-mail code only, and its client has no secret.
    body = apis[0]["Properties"]["Body"]
    schemes = body.get("securityDefinitions") or body.get("components", {}).get("securitySchemes", {})
    customers = schemes.get("CustomerCognito", {}).get("x-amazon-apigateway-authorizer", {})
    check(customers.get("providerARNs") == [{"Ref": "CustomerUserPoolArn"}, {"Fn::GetAtt": ["GuestUserPool", "Arn"]}],
          f"the customers' authorizer takes the shop's pool and the guest pool ({customers.get('providerARNs')})")
    staff_scheme = schemes.get("StaffCognito", {}).get("x-amazon-apigateway-authorizer", {})
    check(staff_scheme.get("providerARNs") == [{"Fn::GetAtt": ["StaffUserPool", "Arn"]}],
          "the desk's authorizer takes the staff pool alone")
    guests = resources["GuestUserPool"]["Properties"]
    check(guests.get("UserPoolTier") == "ESSENTIALS", "the guest pool is on Essentials")
    check(guests.get("Policies", {}).get("SignInPolicy", {}).get("AllowedFirstAuthFactors") == ["EMAIL_OTP", "PASSWORD"],
          "the guest pool's first factors are EMAIL_OTP and PASSWORD (Cognito requires it; no guest has one)")
    check(guests.get("AccountRecoverySetting", {}).get("RecoveryMechanisms") == [{"Name": "admin_only", "Priority": 1}],
          "a guest cannot set a password through recovery (admin_only)")
    check(guests.get("MfaConfiguration") == "OFF" and "PasswordPolicy" not in guests.get("Policies", {}),
          "no MFA, no password policy on the guest pool")
    check(guests.get("UsernameAttributes") == ["email"]
          and guests.get("AdminCreateUserConfig", {}).get("AllowAdminCreateUserOnly") is False,
          "guests sign themselves up by e-mail")
    mail = guests.get("EmailConfiguration", {}).get("Fn::If", [])
    check(len(mail) == 3 and mail[0] == "HasGuestEmailIdentity" and mail[1].get("EmailSendingAccount") == "DEVELOPER"
          and mail[1].get("SourceArn") == {"Ref": "GuestEmailIdentityArn"},
          "the guest pool sends through SES when GuestEmailIdentityArn is given")
    client = resources["GuestUserPoolClient"]["Properties"]
    check(client.get("GenerateSecret") is False and client.get("PreventUserExistenceErrors") == "ENABLED",
          "the guests' client: no secret, no user existence errors")
    check(sorted(client.get("ExplicitAuthFlows", [])) == ["ALLOW_REFRESH_TOKEN_AUTH", "ALLOW_USER_AUTH"],
          "the guests' client: USER_AUTH and refresh only")
    check(client.get("WriteAttributes") == ["email"]
          and guests.get("UserAttributeUpdateSettings", {}).get("AttributesRequireVerificationBeforeUpdate") == ["email"],
          "a guest writes only the e-mail a password-less sign-up needs, and a new one counts once confirmed")
    env = function["Environment"]["Variables"]
    check("GuestUserPool" in json.dumps(env.get("GUEST_POOL_ISSUER")), "the function knows the guest pool's issuer")

    # In the API's own definition, where SAM puts them.
    responses = apis[0]["Properties"]["Body"].get("x-amazon-apigateway-gateway-responses", {})
    for kind in ["DEFAULT_4XX", "DEFAULT_5XX"]:
        response = responses.get(kind, {})
        headers = response.get("responseParameters", {})
        origin = json.dumps(headers.get("gatewayresponse.header.Access-Control-Allow-Origin"))
        check("ChatWidgetOrigin" in origin, f"{kind}: the page's CORS origin")
        body = response.get("responseTemplates", {}).get("application/json", "")
        check('"detail"' in body, f"{kind}: a {{\"detail\"}} body")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("the transformed template streams every route")


def references(value):
    """The logical ids a resource's definition names: Ref, Fn::GetAtt, and
    the ${Name} of Fn::Sub, in any branch of an Fn::If."""
    found = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) else str(inner).split(".")[0]
                found.add(target)
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                if isinstance(text, str):
                    import re

                    found.update(name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", text))
                found |= references(inner)
            else:
                found |= references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner)
    return found


def depends_on(resources, name):
    """Every resource `name` waits for, directly or not (DependsOn and references)."""
    seen, todo = set(), [name]
    while todo:
        resource = resources.get(todo.pop(), {})
        direct = resource.get("DependsOn", [])
        direct = {direct} if isinstance(direct, str) else set(direct)
        direct |= references(resource.get("Properties", {}))
        for other in direct & set(resources) - seen:
            seen.add(other)
            todo.append(other)
    return seen


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "template.yaml", sys.argv[2] if len(sys.argv) > 2 else None)
