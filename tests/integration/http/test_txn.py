"""Transactions through DynamoDB's own clients (boto3, the AWS CLI) and the
`shoal` CLI: TransactWriteItems and TransactGetItems, every cancellation
reason and validation error a client can provoke, ClientRequestToken, and a
transaction left prepared by a router that died (tests/tools/txn_hold),
which holds its items until recovery ends it.

Imported by test_http.py (run.sh starts the cluster); the environment is
test_http's.  Two reasons are not provoked here: ItemCollectionSizeLimit-
Exceeded needs a 10 GB item collection (tests/unit/test_txn.c provokes it
with a small limit) and ProvisionedThroughputExceeded a full index outbox.
"""
import json
import os
import subprocess
import time
import unittest
import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["SHOAL_HTTP_ENDPOINT"]
DIR = os.environ["SHOAL_CLUSTER_DIR"]
BIN = os.environ["SHOAL_BIN"]
AWS = "/usr/bin/aws"
SHOAL = os.path.join(BIN, "shoal")
NATIVE = "file://" + os.path.join(DIR, "router.endpoint")
CFG = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=30)


def client():
    return boto3.client("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1", config=CFG)


def S(x):
    return {"S": x}


def N(x):
    return {"N": str(x)}


class Transactions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()
        cls.t = "tx-" + uuid.uuid4().hex[:10]
        cls.u = "tx-" + uuid.uuid4().hex[:10]
        for name in (cls.t, cls.u):
            cls.c.create_table(
                TableName=name, BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                      {"AttributeName": "g", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                GlobalSecondaryIndexes=[{"IndexName": "byG",
                                         "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                         "Projection": {"ProjectionType": "ALL"}}])
        for name in (cls.t, cls.u):
            cls.c.get_waiter("table_exists").wait(TableName=name)

    def key(self, k, table=None):
        return {"TableName": table or self.t, "Key": {"pk": S(k)}}

    def get(self, k, table=None):
        return self.c.get_item(ConsistentRead=True, **self.key(k, table)).get("Item")

    def cancelled(self, items, **kw):
        with self.assertRaises(ClientError) as cm:
            self.c.transact_write_items(TransactItems=items, **kw)
        e = cm.exception.response
        self.assertEqual(e["Error"]["Code"], "TransactionCanceledException", e)
        return e

    def invalid(self, op, code="ValidationException", **kw):
        with self.assertRaises(ClientError) as cm:
            getattr(self.c, op)(**kw)
        self.assertEqual(cm.exception.response["Error"]["Code"], code)
        return cm.exception.response["Error"]["Message"]

    # ---------------------------------------------------------------------

    def test_all_or_nothing_across_tables_and_groups(self):
        ks = ["a-%d" % i for i in range(12)]  # 12 keys: every group of the cluster
        items = [{"Put": {"TableName": self.t, "Item": {"pk": S(k), "v": N(1), "g": S("G")}}}
                 for k in ks]
        items.append({"Put": {"TableName": self.u, "Item": {"pk": S("other"), "v": N(1)}}})
        r = self.c.transact_write_items(TransactItems=items, ReturnConsumedCapacity="TOTAL")
        cap = {x["TableName"]: x["CapacityUnits"] for x in r["ConsumedCapacity"]}
        # Twice a write's unit per item (and its GSI entry on t).
        self.assertEqual(cap[self.u], 2.0)
        self.assertEqual(cap[self.t], 48.0)
        for k in ks:
            self.assertEqual(self.get(k)["v"], N(1))
        # One failing condition among 13 actions: nothing changes.
        items = [{"Update": {"TableName": self.t, "Key": {"pk": S(k)},
                             "UpdateExpression": "ADD v :one",
                             "ExpressionAttributeValues": {":one": N(1)}}} for k in ks]
        items.append({"ConditionCheck": {"TableName": self.u, "Key": {"pk": S("other")},
                                         "ConditionExpression": "v = :two",
                                         "ExpressionAttributeValues": {":two": N(2)},
                                         "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}})
        e = self.cancelled(items)
        reasons = e["CancellationReasons"]
        self.assertEqual([r["Code"] for r in reasons], ["None"] * 12 + ["ConditionalCheckFailed"])
        self.assertEqual(reasons[12]["Item"], {"pk": S("other"), "v": N(1)})
        self.assertEqual(reasons[12]["Message"], "The conditional request failed")
        self.assertEqual(e["Error"]["Message"],
                         "Transaction cancelled, please refer cancellation reasons for specific "
                         "reasons [" + ", ".join(["None"] * 12 + ["ConditionalCheckFailed"]) + "]")
        for k in ks:
            self.assertEqual(self.get(k)["v"], N(1))
        # The same with the condition holding: everything, once.
        items[12]["ConditionCheck"]["ExpressionAttributeValues"][":two"] = N(1)
        self.c.transact_write_items(TransactItems=items)
        for k in ks:
            self.assertEqual(self.get(k)["v"], N(2))
        # The GSI follows (asynchronously): every item under g = G.
        deadline = time.monotonic() + 15
        while True:
            q = self.c.query(TableName=self.t, IndexName="byG",
                             KeyConditionExpression="g = :g",
                             ExpressionAttributeValues={":g": S("G")})
            if sorted(int(i["v"]["N"]) for i in q["Items"]) == [2] * 12 or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(sorted(int(i["v"]["N"]) for i in q["Items"]), [2] * 12)
        # Deletes in a transaction.
        self.c.transact_write_items(TransactItems=[{"Delete": self.key(k)} for k in ks[:3]])
        for k in ks[:3]:
            self.assertIsNone(self.get(k))

    def test_reasons(self):
        self.c.put_item(TableName=self.t, Item={"pk": S("r1"), "s": S("text"), "n": N(5)})
        # A runtime error of one action (ADD to a string) is its
        # ValidationError; conditions that fail are ConditionalCheckFailed,
        # with the old item only when asked.
        e = self.cancelled([
            {"Update": {"TableName": self.t, "Key": {"pk": S("r1")},
                        "UpdateExpression": "ADD s :one",
                        "ExpressionAttributeValues": {":one": N(1)}}},
            {"Put": {"TableName": self.t, "Item": {"pk": S("r2")},
                     "ConditionExpression": "attribute_exists(pk)"}},
            {"Delete": {"TableName": self.t, "Key": {"pk": S("r3")}}},
        ])
        codes = [r["Code"] for r in e["CancellationReasons"]]
        self.assertEqual(codes, ["ValidationError", "ConditionalCheckFailed", "None"])
        self.assertIn("An operand in the update expression has an incorrect data type",
                      e["CancellationReasons"][0]["Message"])
        self.assertNotIn("Item", e["CancellationReasons"][1])
        self.assertIsNone(self.get("r2"))

    def test_validation(self):
        t = self.t
        put = lambda k: {"Put": {"TableName": t, "Item": {"pk": S(k)}}}
        msg = self.invalid("transact_write_items", TransactItems=[put("d"), put("d")])
        self.assertEqual(msg, "Transaction request cannot include multiple operations on one item")
        msg = self.invalid("transact_write_items",
                           TransactItems=[put("d"), {"Delete": self.key("d")}])
        self.assertEqual(msg, "Transaction request cannot include multiple operations on one item")
        self.invalid("transact_write_items", TransactItems=[put("x%d" % i) for i in range(101)])
        msg = self.invalid("transact_write_items", TransactItems=[
            {"Put": {"TableName": t, "Item": {"pk": N(1)}}}])
        self.assertEqual(msg, "One or more parameter values were invalid: Type mismatch for key "
                              "pk expected: S actual: N")
        msg = self.invalid("transact_write_items", TransactItems=[
            {"Update": {"TableName": t, "Key": {"pk": S("k")}, "UpdateExpression": "SET = 1"}}])
        self.assertIn("Invalid UpdateExpression", msg)
        msg = self.invalid("transact_write_items", code="ResourceNotFoundException",
                           TransactItems=[put("k"), {"Put": {"TableName": "no-such-table",
                                                             "Item": {"pk": S("k")}}}])
        self.assertEqual(msg, "Requested resource not found: Table: no-such-table not found")
        self.invalid("transact_write_items", TransactItems=[put("k")],
                     ClientRequestToken="x" * 37)
        big = {"Put": {"TableName": t, "Item": {"pk": S("big"), "b": S("x" * 400 * 1024)}}}
        msg = self.invalid("transact_write_items", TransactItems=[big])
        self.assertIn("Item size has exceeded the maximum allowed size", msg)
        # TransactGetItems: the same rules.
        g = lambda k: {"Get": self.key(k)}
        msg = self.invalid("transact_get_items", TransactItems=[g("a"), g("a")])
        self.assertEqual(msg, "Transaction request cannot include multiple operations on one item")
        self.invalid("transact_get_items", TransactItems=[g("x%d" % i) for i in range(101)])
        self.invalid("transact_get_items", code="ResourceNotFoundException",
                     TransactItems=[{"Get": {"TableName": "no-such-table",
                                             "Key": {"pk": S("a")}}}])
        # Nothing of the refused requests was written.
        self.assertIsNone(self.get("d"))
        self.assertIsNone(self.get("k"))

    def test_client_request_token(self):
        tok = uuid.uuid4().hex
        items = [{"Update": {"TableName": self.t, "Key": {"pk": S("cnt-%d" % i)},
                             "UpdateExpression": "ADD n :one",
                             "ExpressionAttributeValues": {":one": N(1)}}} for i in range(4)]
        r1 = self.c.transact_write_items(TransactItems=items, ClientRequestToken=tok,
                                         ReturnConsumedCapacity="TOTAL")
        r2 = self.c.transact_write_items(TransactItems=items, ClientRequestToken=tok,
                                         ReturnConsumedCapacity="TOTAL")
        self.assertEqual(r1["ConsumedCapacity"], r2["ConsumedCapacity"])
        for i in range(4):
            self.assertEqual(self.get("cnt-%d" % i)["n"], N(1))  # applied once
        # The same token with another request.
        msg = self.invalid("transact_write_items", code="IdempotentParameterMismatchException",
                           TransactItems=items[:3], ClientRequestToken=tok)
        self.assertIn("ClientRequestToken", msg)
        # A cancelled transaction's token answers the same cancellation.
        tok2 = uuid.uuid4().hex
        bad = [{"ConditionCheck": {"TableName": self.t, "Key": {"pk": S("cnt-0")},
                                   "ConditionExpression": "n = :z",
                                   "ExpressionAttributeValues": {":z": N(0)}}},
               {"Put": {"TableName": self.t, "Item": {"pk": S("tok-never")}}}]
        e1 = self.cancelled(bad, ClientRequestToken=tok2)
        e2 = self.cancelled(bad, ClientRequestToken=tok2)
        self.assertEqual(e1["CancellationReasons"], e2["CancellationReasons"])
        self.assertIsNone(self.get("tok-never"))

    def test_get_items(self):
        ks = ["g-%d" % i for i in range(10)]
        self.c.transact_write_items(TransactItems=[
            {"Put": {"TableName": self.t, "Item": {"pk": S(k), "v": N(i), "w": S("x")}}}
            for i, k in enumerate(ks)])
        r = self.c.transact_get_items(
            TransactItems=[{"Get": {"TableName": self.t, "Key": {"pk": S(k)},
                                    "ProjectionExpression": "#v",
                                    "ExpressionAttributeNames": {"#v": "v"}}} for k in ks] +
                          [{"Get": self.key("g-missing")}],
            ReturnConsumedCapacity="TOTAL")
        self.assertEqual([x.get("Item") for x in r["Responses"]],
                         [{"v": N(i)} for i in range(10)] + [None])
        self.assertEqual(r["ConsumedCapacity"], [{"TableName": self.t, "CapacityUnits": 22.0}])

    def test_router_died_after_prepares(self):
        """txn_hold prepares a transaction everywhere and exits: its items
        are held -- a single write gets TransactionConflictException, a
        transaction the TransactionConflict reason, a TransactGetItems is
        cancelled -- until recovery aborts it (about 5 s)."""
        ks = ["held-%d" % i for i in range(6)]
        held = [{"Put": {"TableName": self.t, "Item": {"pk": S(k), "by": S("dead router")}}}
                for k in ks]
        t0 = time.monotonic()
        r = subprocess.run([os.path.join(BIN, "txn_hold"), "--cluster",
                            os.path.join(DIR, "cluster.ini"), "--transact-items", json.dumps(held)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        err = self.invalid("put_item", code="TransactionConflictException",
                           TableName=self.t, Item={"pk": S(ks[0])})
        self.assertEqual(err, "Transaction is ongoing for the item")
        e = self.cancelled([{"Put": {"TableName": self.t, "Item": {"pk": S(ks[1])}}},
                            {"Put": {"TableName": self.t, "Item": {"pk": S("free-1")}}}])
        self.assertEqual([x["Code"] for x in e["CancellationReasons"]],
                         ["TransactionConflict", "None"])
        with self.assertRaises(ClientError) as cm:
            self.c.transact_get_items(TransactItems=[{"Get": self.key(k)} for k in ks])
        self.assertEqual(cm.exception.response["Error"]["Code"], "TransactionCanceledException")
        self.assertIn("TransactionConflict",
                      [x["Code"] for x in cm.exception.response["CancellationReasons"]])
        # Recovery: the transaction is aborted, every item free, none written.
        deadline = time.monotonic() + 30
        while True:
            try:
                self.c.transact_write_items(TransactItems=[
                    {"Put": {"TableName": self.t, "Item": {"pk": S(k), "by": S("alive")}}}
                    for k in ks])
                break
            except ClientError as x:
                if time.monotonic() > deadline:
                    raise
                self.assertEqual(x.response["Error"]["Code"], "TransactionCanceledException")
                time.sleep(0.1)
        print("items held by a dead router's transaction freed after %.1f s"
              % (time.monotonic() - t0))
        for k in ks:
            self.assertEqual(self.get(k)["by"], S("alive"))

    def test_cli(self):
        """`aws dynamodb` and `shoal` take the same file and answer alike."""
        path = os.path.join(DIR, "tx-items-%s.json" % uuid.uuid4().hex[:6])
        with open(path, "w") as f:
            json.dump([{"Put": {"TableName": self.t, "Item": {"pk": S("cli-1"), "v": N(1)},
                                "ConditionExpression": "attribute_not_exists(pk)"}},
                       {"Put": {"TableName": self.u, "Item": {"pk": S("cli-2"), "v": N(2)}}}], f)
        get = os.path.join(DIR, "tx-get-%s.json" % uuid.uuid4().hex[:6])
        with open(get, "w") as f:
            json.dump([{"Get": {"TableName": self.t, "Key": {"pk": S("cli-1")}}},
                       {"Get": {"TableName": self.u, "Key": {"pk": S("cli-2")}}}], f)
        aws = [AWS, "--endpoint-url", ENDPOINT, "dynamodb"]
        shoal = [SHOAL, "--endpoint", NATIVE]
        r = subprocess.run(aws + ["transact-write-items", "--transact-items", "file://" + path],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        outs = []
        for cmd in (aws, shoal):
            r = subprocess.run(cmd + ["transact-write-items", "--transact-items", "file://" + path],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 254, r.stderr)
            outs.append(r.stderr.strip())
        self.assertEqual(outs[1], "An error occurred (TransactionCanceledException) when calling "
                                  "the TransactWriteItems operation: Transaction cancelled, please "
                                  "refer cancellation reasons for specific reasons "
                                  "[ConditionalCheckFailed, None]")
        self.assertIn(outs[1], outs[0])
        answers = []
        for cmd in (aws + ["--output", "json"], shoal):
            r = subprocess.run(cmd + ["transact-get-items", "--transact-items", "file://" + get],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            answers.append(json.loads(r.stdout))
        self.assertEqual(answers[0], answers[1])
        self.assertEqual(answers[1]["Responses"][1]["Item"]["v"], N(2))
        r = subprocess.run(shoal + ["transact-get-items", "--transact-items", "[]"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 254)
        self.assertIn("ValidationException", r.stderr)
