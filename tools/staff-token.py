#!/usr/bin/env python3
"""A staff pool's tokens in moto's Cognito, for the tests of the desk's
local door (local/src/pool_gate.rs). Prints one JSON object.

  staff-token.py sign-in ENDPOINT CLIENT_ID USERNAME PASSWORD
      a real sign-in (InitiateAuth, USER_PASSWORD_AUTH): {"id": ..., "access": ...}
  staff-token.py forge CLAIMS_JSON
      a token signed as moto signs its pools' tokens (moto's own bundled
      key, kid "dummy"), with claims a real sign-in never hands out (an
      expired token, another app client's, another pool's): {"token": ...}"""
import json
import sys

import boto3
from joserfc import jwk, jwt
from moto.utilities.utils import load_resource


def sign_in(endpoint, client_id, username, password):
    idp = boto3.client(
        "cognito-idp",
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    result = idp.initiate_auth(
        AuthFlow="USER_PASSWORD_AUTH",
        ClientId=client_id,
        AuthParameters={"USERNAME": username, "PASSWORD": password},
    )["AuthenticationResult"]
    return {"id": result["IdToken"], "access": result["AccessToken"]}


def forge(claims):
    key = jwk.RSAKey.import_key(load_resource("cognitoidp/resources/jwks-private.json"))
    return {"token": jwt.encode({"kid": "dummy", "alg": "RS256"}, claims, key)}


def main():
    if sys.argv[1:2] == ["sign-in"] and len(sys.argv) == 6:
        print(json.dumps(sign_in(*sys.argv[2:])))
    elif sys.argv[1:2] == ["forge"] and len(sys.argv) == 3:
        print(json.dumps(forge(json.loads(sys.argv[2]))))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
