"""SigV4 and connections for the suite's hand-made HTTP requests.

run.sh starts the cluster with credentials (cluster.sh up --credentials auto)
and points AWS_SHARED_CREDENTIALS_FILE at its key, so boto3 and the AWS CLI
sign by themselves; requests the suite writes byte by byte (malformed
bodies, headers boto3 would not send) get their Authorization and
X-Amz-Date here, signed by botocore's own signer with the same key.
Without credentials in the environment nothing is added.

The endpoint (SHOAL_HTTP_ENDPOINT) is http:// or, on a cluster started with
--tls (run.sh with SHOAL_TEST_TLS=1), https:// verified with the cluster's
CA (SHOAL_CLUSTER_DIR/tls/ca.pem; boto3 and the AWS CLI take it from
AWS_CA_BUNDLE): HOST, PORT and connect() serve both.
"""
import http.client
import os
import socket
import ssl

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

_creds = []

ENDPOINT = os.environ.get("SHOAL_HTTP_ENDPOINT", "http://127.0.0.1:0")
SCHEME, _hostport = ENDPOINT.split("://", 1)
HOST, PORT = _hostport.rsplit(":", 1)
PORT = int(PORT)
TLS = None
if SCHEME == "https":
    TLS = ssl.create_default_context(
        cafile=os.path.join(os.environ["SHOAL_CLUSTER_DIR"], "tls", "ca.pem"))


def connect(timeout=10.0, host=None, port=None):
    """A connection to the endpoint (or host:port, plain): a socket, wrapped
    in TLS for an https:// endpoint."""
    s = socket.create_connection((host or HOST, port or PORT), timeout=timeout)
    if TLS is not None and host is None:
        return TLS.wrap_socket(s, server_hostname=HOST)
    return s


def http_connection(timeout=30):
    """An http.client connection to the endpoint (HTTPS for https://)."""
    if TLS is not None:
        return http.client.HTTPSConnection(HOST, PORT, timeout=timeout, context=TLS)
    return http.client.HTTPConnection(HOST, PORT, timeout=timeout)


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
