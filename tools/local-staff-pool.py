#!/usr/bin/env python3
"""The staff's user pool in moto's Cognito, for `make run` and the browser
test (contract 24): a pool, its app client (no secret, USER_PASSWORD_AUTH),
the two groups, and two people: Ann, an approver (both groups), and Sam, of
the staff group alone. With --newcomer, a third: Nia, of the staff group,
whose password is a temporary one, as for anyone an administrator adds, so
the desk asks her to choose her own at the first sign-in (Cognito's
NEW_PASSWORD_REQUIRED), then to set up a second factor (MFA_SETUP: TOTP, as
the deployed pool requires). Passwords are new on every run. Prints one JSON
object: the pool, the client, the issuer, the sign-in URL and the people."""
import argparse
import json
import secrets

import boto3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--region", default="eu-west-1")
    parser.add_argument("--staff-group", default="support-staff")
    parser.add_argument("--approver-group", default="refund-approvers")
    parser.add_argument("--newcomer", action="store_true", help="also Nia, who has not signed in yet")
    args = parser.parse_args()
    idp = boto3.client(
        "cognito-idp",
        endpoint_url=args.endpoint,
        region_name=args.region,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    pool = idp.create_user_pool(PoolName="refund-chat-staff")["UserPool"]["Id"]
    # As template.yaml's StaffMfa ON (contract 30): TOTP, set up at a first
    # sign-in. moto asks for it after a newcomer's new password (MFA_SETUP)
    # and at every sign-in once set up (SOFTWARE_TOKEN_MFA); Ann and Sam, made
    # with a permanent password, sign in without one here (moto's
    # USER_PASSWORD_AUTH sets up nothing). moto checks the six digits only
    # with MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP=true.
    idp.set_user_pool_mfa_config(
        UserPoolId=pool,
        SoftwareTokenMfaConfiguration={"Enabled": True},
        MfaConfiguration="ON",
    )
    client = idp.create_user_pool_client(
        UserPoolId=pool,
        ClientName="refund-chat-desk",
        GenerateSecret=False,
        ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        # As template.yaml's: nobody rewrites their own name or e-mail.
        WriteAttributes=["locale"],
        ReadAttributes=["name", "email", "email_verified"],
        EnableTokenRevocation=True,
    )["UserPoolClient"]["ClientId"]
    for group in (args.staff_group, args.approver_group):
        idp.create_group(UserPoolId=pool, GroupName=group)
    people = []
    seeded = [
        ("ann", "Ann Approver", (args.staff_group, args.approver_group), False),
        ("sam", "Sam Staff", (args.staff_group,), False),
    ]
    if args.newcomer:
        seeded.append(("nia", "Nia Newcomer", (args.staff_group,), True))
    for username, name, groups, first_sign_in in seeded:
        # Long, random, and in every class a real pool's policy asks for.
        password = "Desk-" + secrets.token_urlsafe(12) + "9a"
        idp.admin_create_user(
            UserPoolId=pool,
            Username=username,
            TemporaryPassword=password,
            UserAttributes=[
                {"Name": "name", "Value": name},
                {"Name": "email", "Value": f"{username}@shop.example"},
            ],
            MessageAction="SUPPRESS",
        )
        if not first_sign_in:
            idp.admin_set_user_password(UserPoolId=pool, Username=username, Password=password, Permanent=True)
        for group in groups:
            idp.admin_add_user_to_group(UserPoolId=pool, Username=username, GroupName=group)
        people.append(
            {
                "username": username,
                "name": name,
                "password": password,
                "groups": list(groups),
                "first_sign_in": first_sign_in,
            }
        )
    print(
        json.dumps(
            {
                "pool_id": pool,
                "client_id": client,
                "issuer": f"https://cognito-idp.{args.region}.amazonaws.com/{pool}",
                "sign_in_url": args.endpoint.rstrip("/") + "/",
                "people": people,
            }
        )
    )


if __name__ == "__main__":
    main()
