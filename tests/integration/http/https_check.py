#!/usr/bin/python3
"""boto3 against a secured cluster's HTTPS endpoint: https_check.py URL CA.

Run by it_cluster's test_client_tls (cluster.sh up --tls --credentials auto)
with AWS_SHARED_CREDENTIALS_FILE=D/aws-credentials: verified with verify=
the cluster's CA and signed with the cluster's key, requests are served;
the system's CAs do not know the cluster's certificate; unsigned requests
are refused.  Prints "boto3 ok" when all of it held.
"""
import sys

import boto3
import botocore
from botocore.config import Config

url, ca = sys.argv[1], sys.argv[2]
once = Config(retries={"max_attempts": 1})


def client(verify, config=once):
    return boto3.client("dynamodb", endpoint_url=url, region_name="us-east-1", verify=verify,
                        config=config)


c = client(ca)
c.put_item(TableName="tls_t", Item={"k": {"S": "b"}, "v": {"S": "boto3"}})
got = c.get_item(TableName="tls_t", Key={"k": {"S": "b"}}, ConsistentRead=True)
assert got["Item"]["v"] == {"S": "boto3"}, got
assert "tls_t" in c.list_tables()["TableNames"]
try:
    client(True).list_tables()
    sys.exit("verified by the system's CAs")
except botocore.exceptions.SSLError:
    pass
try:
    client(ca, Config(signature_version=botocore.UNSIGNED,
                      retries={"max_attempts": 1})).list_tables()
    sys.exit("served unsigned")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "MissingAuthenticationTokenException", e.response
print("boto3 ok")
