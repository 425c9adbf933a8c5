"""Shared fixtures of the conformance suite (tests/conformance/).

The suite checks Shoal's DynamoDB HTTP endpoint operation by operation, as
DynamoDB's API reference and botocore's service model (Debian's
python3-botocore, data/dynamodb/2012-08-10/service-2.json) describe each
one: its parameters, its documented errors with their exception names, and
their messages word for word where DynamoDB documents them or where its
behaviour (and DynamoDB Local's) is well known.  One file per operation
(test_<operation>.py); run.py runs them all in one process against one
cluster, which tests/integration/http/run.sh starts (tests/conformance/run.sh
is the entry point; `make test` runs it as it_conformance).

Environment (set by run.sh; to run a file alone against a running cluster,
set SHOAL_HTTP_ENDPOINT and run `python3 tests/conformance/test_query.py`):
  SHOAL_HTTP_ENDPOINT  http://127.0.0.1:P of a router's HTTP API, or https:// on a
                       cluster up with --tls (SHOAL_TEST_TLS=1: sigv4.py's connection,
                       verified with the cluster's CA; boto3 takes AWS_CA_BUNDLE)

Tables are shared: shared() creates them once per process, in parallel, and
loads the read data once; tests that write use keys of their own (uid()),
so the files are independent and may run alone or in any order.

A check that Shoal fails because Shoal differs from DynamoDB is marked
@gap("..."): an expected failure whose text names the difference.  When the
gap is closed the test passes, unittest reports an unexpected success and
the run fails until the marker is removed.
"""
import json
import os
import re
import sys
import time
import unittest
import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration",
                                "http"))
os.environ.setdefault("SHOAL_HTTP_ENDPOINT", "http://127.0.0.1:7160")
# The hand-made requests' signatures and connections (http:// or https://).
from sigv4 import auth_headers, http_connection, HOST, PORT  # noqa: E402,F401

ENDPOINT = os.environ["SHOAL_HTTP_ENDPOINT"]
CFG = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5,
             read_timeout=30)
# No client-side checks: what answers is the server's validation.
RAW = CFG.merge(Config(parameter_validation=False))
RUN = uuid.uuid4().hex[:6]

# run.sh points AWS_SHARED_CREDENTIALS_FILE at the cluster's key (cluster.sh up
# --credentials auto); against an open cluster any key does.
defaults = [("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_EC2_METADATA_DISABLED", "true")]
if not os.environ.get("AWS_SHARED_CREDENTIALS_FILE"):
    defaults += [("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "y")]
for k, v in defaults:
    os.environ.setdefault(k, v)


def S(x):
    return {"S": x}


def N(x):
    return {"N": str(x)}


def uid(prefix="k"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def ddb(validate=True):
    return boto3.client("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
                        config=CFG if validate else RAW)


def ddbstreams(validate=True):
    return boto3.client("dynamodbstreams", endpoint_url=ENDPOINT, region_name="us-east-1",
                        config=CFG if validate else RAW)


def api(op, body, service="DynamoDB_20120810"):
    """One raw request (for members Debian's botocore 1.29 does not model,
    such as DeletionProtectionEnabled): (HTTP status, decoded body)."""
    conn = http_connection(timeout=30)
    data = json.dumps(body).encode()
    headers = {"X-Amz-Target": "%s.%s" % (service, op),
               "Content-Type": "application/x-amz-json-1.0"}
    headers.update(auth_headers("%s:%d" % (HOST, PORT), data, headers))
    try:
        conn.request("POST", "/", body=data, headers=headers)
        r = conn.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data else {})
    finally:
        conn.close()


def gap(why):
    """An expected failure: Shoal differs from DynamoDB here (why says how)."""
    def mark(fn):
        fn.gap = why
        return unittest.expectedFailure(fn)
    return mark


def poll(fn, deadline=15.0, every=0.05):
    """fn() until it returns something true, or its last answer at the
    deadline (no fixed sleeps: the condition decides)."""
    end = time.monotonic() + deadline
    while True:
        got = fn()
        if got or time.monotonic() > end:
            return got
        time.sleep(every)


# --------------------------------------------------------------------------
# Shared tables
# --------------------------------------------------------------------------
HASH = "conf-hash-" + RUN     # pk S
RANGE = "conf-range-" + RUN   # pk S, sk N; LSI byL (pk, l S); GSI byG (g S, sk N) INCLUDE x
NUMKEY = "conf-num-" + RUN    # pk N, sk B (key types other than S)
STREAM = "conf-stream-" + RUN  # pk S, NEW_AND_OLD_IMAGES stream

# Read data in RANGE (never written by tests): partitions r1 and r2, sort
# keys 1..10; n = 10 * sk, s = "item-<sk>", tags a string set, opt on odd
# sort keys, l (the LSI key) on sk <= 6, g (the GSI key) "G<sk % 2>".
READ_PARTS = ("r1", "r2")


def read_item(p, k):
    item = {"pk": S(p), "sk": N(k), "n": N(k * 10), "s": S("item-%d" % k),
            "tags": {"SS": ["all", "even" if k % 2 == 0 else "odd"]},
            "m": {"M": {"a": N(k), "l": {"L": [S("x"), N(k)]}}},
            "g": S("G%d" % (k % 2)), "x": S("x%d" % k), "y": S("y%d" % k)}
    if k % 2:
        item["opt"] = S("yes")
    if k <= 6:
        item["l"] = S("L%02d" % (11 - k))
    return item


_shared = None


def _create(c, name, attrs, keys, **kw):
    c.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                   AttributeDefinitions=[{"AttributeName": a, "AttributeType": t}
                                         for a, t in attrs],
                   KeySchema=[{"AttributeName": a, "KeyType": t} for a, t in keys], **kw)


def shared():
    """Creates the shared tables (once per process) and returns a client."""
    global _shared
    if _shared is not None:
        return _shared
    c = ddb()
    _create(c, HASH, [("pk", "S")], [("pk", "HASH")])
    _create(c, RANGE, [("pk", "S"), ("sk", "N"), ("l", "S"), ("g", "S")],
            [("pk", "HASH"), ("sk", "RANGE")],
            LocalSecondaryIndexes=[{
                "IndexName": "byL",
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                              {"AttributeName": "l", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"}}],
            GlobalSecondaryIndexes=[{
                "IndexName": "byG",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                              {"AttributeName": "sk", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["x"]}}])
    _create(c, NUMKEY, [("pk", "N"), ("sk", "B")], [("pk", "HASH"), ("sk", "RANGE")])
    _create(c, STREAM, [("pk", "S")], [("pk", "HASH")],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    for t in (HASH, RANGE, NUMKEY, STREAM):
        poll(lambda: c.describe_table(TableName=t)["Table"]["TableStatus"] == "ACTIVE")
    items = [read_item(p, k) for p in READ_PARTS for k in range(1, 11)]
    for i in range(0, len(items), 25):
        c.batch_write_item(RequestItems={RANGE: [{"PutRequest": {"Item": it}}
                                                 for it in items[i:i + 25]]})
    # The GSI is fed asynchronously: wait until it holds every item.
    poll(lambda: c.scan(TableName=RANGE, IndexName="byG", Select="COUNT")["Count"] == 20)
    _shared = c
    return c


class Case(unittest.TestCase):
    """Base of every operation's test class: self.c (boto3 with its checks),
    self.raw (without them), the shared tables and the refusal helper."""

    @classmethod
    def setUpClass(cls):
        cls.c = shared()
        cls.raw = ddb(validate=False)

    def refused(self, fn, code, message=None, **kw):
        """fn(**kw) must fail with exception `code` and HTTP 400; message:
        the exact text, a compiled regex, or None (code only).  Returns the
        message."""
        with self.assertRaises(ClientError) as cm:
            fn(**kw)
        r = cm.exception.response
        err = r["Error"]
        self.assertEqual(err["Code"], code, err)
        self.assertEqual(r["ResponseMetadata"]["HTTPStatusCode"], 400, r)
        if isinstance(message, re.Pattern):
            self.assertRegex(err["Message"], message)
        elif message is not None:
            self.assertEqual(err["Message"], message)
        return err["Message"]

    def invalid(self, fn, message=None, **kw):
        return self.refused(fn, "ValidationException", message, **kw)

    def api_refused(self, op, body, code, message=None, service="DynamoDB_20120810"):
        st, d = api(op, body, service)
        self.assertEqual(st, 400, d)
        self.assertEqual(d.get("__type", "").split("#")[-1], code, d)
        got = d.get("message", d.get("Message"))
        if isinstance(message, re.Pattern):
            self.assertRegex(got, message)
        elif message is not None:
            self.assertEqual(got, message)
        return got

    def key(self, p, k=None):
        return {"pk": S(p)} if k is None else {"pk": S(p), "sk": N(k)}


def constraint(value, member, rule):
    """DynamoDB's (Coral's) one-error validation message."""
    return ("1 validation error detected: Value %s at '%s' failed to satisfy constraint: "
            "Member must %s" % (value, member, rule))


# ------------------------------------------------------------------ runner
class _Result(unittest.TextTestResult):
    subtests = 0

    def addSubTest(self, test, subtest, outcome):
        type(self).subtests += 1
        super().addSubTest(test, subtest, outcome)


def load(names=()):
    """The suite of the named files (test_query or test_query.py), or all."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    if not names:
        names = sorted(f for f in os.listdir(here) if f.startswith("test_") and f.endswith(".py"))
    suite = unittest.TestSuite()
    for n in names:
        mod = __import__(os.path.basename(n)[:-3] if n.endswith(".py") else n)
        suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(mod))
    return suite


def main(names=()):
    t0 = time.monotonic()
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_Result)
    res = runner.run(load(names))
    gaps = [t for t, _ in res.expectedFailures]
    print("conformance: %d tests, %d subtests, %d known gaps, %.1f s"
          % (res.testsRun, _Result.subtests, len(gaps), time.monotonic() - t0))
    for t in gaps:
        fn = getattr(t, t._testMethodName)
        print("  gap: %s: %s" % (t.id(), getattr(fn, "gap", "")))
    sys.exit(0 if res.wasSuccessful() else 1)
