"""The local stack's AWS side, in moto: `setup` creates the OpenAI key secret
and the refund ledger table (as template.yaml defines it); `ledger` prints the
ledger's items, oldest first. Used by `make run` and `make ledger`."""

import json
import os
import sys

import boto3

ENDPOINT = os.environ.get("MOTO_ENDPOINT", "http://127.0.0.1:5005")
REGION = "eu-west-1"
TABLE = os.environ.get("LEDGER_TABLE", "refund-chat-ledger")
SECRET_ID = "refund-chat/openai-api-key"


def client(service):
    return boto3.client(service, region_name=REGION, endpoint_url=ENDPOINT,
                        aws_access_key_id="local", aws_secret_access_key="local")


def setup(api_key):
    client("secretsmanager").create_secret(Name=SECRET_ID, SecretString=json.dumps({"api_key": api_key}))
    dynamodb = client("dynamodb")
    dynamodb.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"}
                              for name in ("pk", "waiting_for", "created_at")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[{
            "IndexName": "waiting",
            "KeySchema": [{"AttributeName": "waiting_for", "KeyType": "HASH"},
                          {"AttributeName": "created_at", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "ALL"},
        }],
    )
    dynamodb.update_time_to_live(TableName=TABLE,
                                 TimeToLiveSpecification={"AttributeName": "expires_at", "Enabled": True})


def plain(item):
    """A DynamoDB item as plain JSON values."""
    return {name: next(iter(value.values())) for name, value in item.items()}


def ledger():
    dynamodb = client("dynamodb")
    items, start = [], None
    while True:
        page = dynamodb.scan(TableName=TABLE, **({"ExclusiveStartKey": start} if start else {}))
        items += [plain(item) for item in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    items.sort(key=lambda item: item.get("created_at", ""))
    for item in items:
        print(json.dumps(item, sort_keys=True))
    if not items:
        print("the ledger is empty", file=sys.stderr)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "setup":
        setup(sys.argv[2])
    elif command == "ledger":
        ledger()
    else:
        sys.exit("usage: local_aws.py setup API_KEY | ledger")
