"""SigV4 for the suite's hand-made HTTP requests.

run.sh starts the cluster with credentials (cluster.sh up --credentials auto)
and points AWS_SHARED_CREDENTIALS_FILE at its key, so boto3 and the AWS CLI
sign by themselves; requests the suite writes byte by byte (malformed
bodies, headers boto3 would not send) get their Authorization and
X-Amz-Date here, signed by botocore's own signer with the same key.
Without credentials in the environment nothing is added.
"""
import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

_creds = []


def auth_headers(host, body, headers, region="us-east-1"):
    """The headers that sign a POST / to `host` (exactly the Host header
    that will be sent, "127.0.0.1:7160" or "x") with `body` (bytes or str)
    and `headers` (the ones that will be sent): a dict, empty when there
    are no credentials."""
    if not _creds:
        _creds.append(boto3.Session().get_credentials())
    if _creds[0] is None:
        return {}
    if isinstance(body, str):
        body = body.encode()
    req = AWSRequest(method="POST", url="http://%s/" % host, data=body, headers=dict(headers))
    SigV4Auth(_creds[0], "dynamodb", region).add_auth(req)
    return {k: req.headers[k] for k in ("Authorization", "X-Amz-Date")}


def auth_lines(host, body, headers, region="us-east-1"):
    """auth_headers as header lines for a raw request (bytes, each ending in CRLF)."""
    return b"".join(("%s: %s\r\n" % kv).encode() for kv in
                    auth_headers(host, body, headers, region).items())
