"""DynamoDB's legacy conditional parameters (AttributesToGet, Expected,
ConditionalOperator, AttributeUpdates, KeyConditions, QueryFilter,
ScanFilter) through boto3, the AWS CLI and the `shoal` CLI: each request in
its legacy form and in its expression form must give the same items and the
same outcome, on the HTTP endpoint and on the native protocol.

Imported by test_http.py (run.sh starts the cluster); the environment is
test_http's.
"""
import json
import os
import subprocess
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
CFG = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30)


def S(x):
    return {"S": x}


def N(x):
    return {"N": str(x)}


# One filter condition per operator, with the FilterExpression that says the
# same thing (#a / :v... placeholders); attribute a is numeric, s a string,
# tags a string set, opt present on odd items only.
OPERATORS = [
    ("EQ", "n", [N(30)], "#a = :v0"),
    ("NE", "n", [N(30)], "#a <> :v0"),
    ("LE", "n", [N(30)], "#a <= :v0"),
    ("LT", "n", [N(30)], "#a < :v0"),
    ("GE", "n", [N(30)], "#a >= :v0"),
    ("GT", "n", [N(30)], "#a > :v0"),
    ("NOT_NULL", "opt", [], "attribute_exists(#a)"),
    ("NULL", "opt", [], "attribute_not_exists(#a)"),
    ("CONTAINS", "tags", [S("even")], "contains(#a, :v0)"),
    ("CONTAINS", "s", [S("-1")], "contains(#a, :v0)"),
    ("NOT_CONTAINS", "tags", [S("even")], "attribute_exists(#a) AND NOT contains(#a, :v0)"),
    # NOT_CONTAINS is false where the attribute is absent (NE is true).
    ("NOT_CONTAINS", "opt", [S("zzz")], "attribute_exists(#a) AND NOT contains(#a, :v0)"),
    ("NE", "opt", [S("yes")], "#a <> :v0"),
    ("BEGINS_WITH", "s", [S("item-1")], "begins_with(#a, :v0)"),
    ("IN", "n", [N(10), N(40), N(70)], "#a IN (:v0, :v1, :v2)"),
    ("BETWEEN", "n", [N(20), N(60)], "#a BETWEEN :v0 AND :v1"),
]


def expr_args(attr, values, text):
    out = {"ExpressionAttributeNames": {"#a": attr}}
    if values:
        out["ExpressionAttributeValues"] = {":v%d" % i: v for i, v in enumerate(values)}
    return text, out


class Legacy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = boto3.client("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
                             config=CFG)
        # t: the items the reads compare on; w: what the writes write.
        cls.t = "legacy-" + uuid.uuid4().hex[:10]
        cls.w = "legacy-" + uuid.uuid4().hex[:10]
        for name in (cls.t, cls.w):
            cls.c.create_table(
                TableName=name, BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                      {"AttributeName": "sk", "AttributeType": "N"}],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                           {"AttributeName": "sk", "KeyType": "RANGE"}])
        for name in (cls.t, cls.w):
            cls.c.get_waiter("table_exists").wait(TableName=name)
        for p in ("p1", "p2"):
            for k in range(1, 11):
                item = {"pk": S(p), "sk": N(k), "n": N(k * 10), "s": S("item-%d" % k),
                        "tags": {"SS": ["all", "even" if k % 2 == 0 else "odd"]}}
                if k % 2:
                    item["opt"] = S("yes")
                cls.c.put_item(TableName=cls.t, Item=item)

    def key(self, p, k):
        return {"pk": S(p), "sk": N(k)}

    def get(self, p, k):
        return self.c.get_item(TableName=self.w, Key=self.key(p, k), ConsistentRead=True).get("Item")

    def refused(self, op, code="ValidationException", **kw):
        with self.assertRaises(ClientError) as cm:
            getattr(self.c, op)(**kw)
        self.assertEqual(cm.exception.response["Error"]["Code"], code, cm.exception.response)
        return cm.exception.response["Error"]["Message"]

    # ------------------------------------------------------------ reads
    def test_query_filters_match_expressions(self):
        for op, attr, values, text in OPERATORS:
            with self.subTest(op=op, attr=attr):
                legacy = self.c.query(
                    TableName=self.t, ConsistentRead=True,
                    KeyConditions={"pk": {"ComparisonOperator": "EQ", "AttributeValueList": [S("p1")]}},
                    QueryFilter={attr: {"ComparisonOperator": op, "AttributeValueList": values}})
                f, args = expr_args(attr, values, text)
                args.setdefault("ExpressionAttributeValues", {})[":p"] = S("p1")
                modern = self.c.query(TableName=self.t, ConsistentRead=True,
                                      KeyConditionExpression="pk = :p", FilterExpression=f, **args)
                self.assertEqual(legacy["Items"], modern["Items"])
                self.assertEqual(legacy["Count"], modern["Count"])
                self.assertEqual(legacy["ScannedCount"], 10)
                self.assertGreater(legacy["Count"], 0)
                self.assertLess(legacy["Count"], 10)

    def test_query_key_conditions_and_pages(self):
        cases = [("EQ", [N(3)], "sk = :a"), ("LT", [N(4)], "sk < :a"), ("LE", [N(4)], "sk <= :a"),
                 ("GT", [N(8)], "sk > :a"), ("GE", [N(8)], "sk >= :a"),
                 ("BETWEEN", [N(3), N(6)], "sk BETWEEN :a AND :b")]
        for op, values, text in cases:
            with self.subTest(op=op):
                legacy = self.c.query(TableName=self.t, KeyConditions={
                    "sk": {"ComparisonOperator": op, "AttributeValueList": values},
                    "pk": {"ComparisonOperator": "EQ", "AttributeValueList": [S("p2")]}},
                    ConsistentRead=True)
                vals = {":p": S("p2"), ":a": values[0]}
                if len(values) > 1:
                    vals[":b"] = values[1]
                modern = self.c.query(TableName=self.t, KeyConditionExpression="pk = :p AND " + text,
                                      ExpressionAttributeValues=vals, ConsistentRead=True)
                self.assertEqual(legacy["Items"], modern["Items"])
                self.assertGreater(legacy["Count"], 0)
        # Backwards, in pages of 3, projected, ORed filter: the same pages.
        legacy_kw = dict(KeyConditions={"pk": {"ComparisonOperator": "EQ",
                                               "AttributeValueList": [S("p1")]}},
                         QueryFilter={"n": {"ComparisonOperator": "GT", "AttributeValueList": [N(80)]},
                                      "opt": {"ComparisonOperator": "NOT_NULL"}},
                         ConditionalOperator="OR", AttributesToGet=["sk", "n", "opt"])
        modern_kw = dict(KeyConditionExpression="pk = :p",
                         FilterExpression="n > :n OR attribute_exists(opt)",
                         ProjectionExpression="sk, n, opt",
                         ExpressionAttributeValues={":p": S("p1"), ":n": N(80)})
        pages = []
        for kw in (legacy_kw, modern_kw):
            got, start = [], None
            while True:
                extra = {"ExclusiveStartKey": start} if start else {}
                r = self.c.query(TableName=self.t, Limit=3, ScanIndexForward=False,
                                 ConsistentRead=True, **kw, **extra)
                got.append((r["Items"], r.get("LastEvaluatedKey")))
                start = r.get("LastEvaluatedKey")
                if not start:
                    break
            pages.append(got)
        self.assertEqual(pages[0], pages[1])
        items = [i for p, _ in pages[0] for i in p]
        self.assertEqual([int(i["sk"]["N"]) for i in items], [10, 9, 7, 5, 3, 1])
        self.assertEqual(set(items[0]), {"sk", "n"})

    def test_scan_filters_match_expressions(self):
        def scan(**kw):
            items, start = [], None
            while True:
                extra = {"ExclusiveStartKey": start} if start else {}
                r = self.c.scan(TableName=self.t, ConsistentRead=True, **kw, **extra)
                items += r["Items"]
                start = r.get("LastEvaluatedKey")
                if not start:
                    return sorted(items, key=lambda i: (i["pk"]["S"], int(i["sk"]["N"])))
        for op, attr, values, text in OPERATORS:
            with self.subTest(op=op, attr=attr):
                legacy = scan(ScanFilter={attr: {"ComparisonOperator": op,
                                                 "AttributeValueList": values}})
                f, args = expr_args(attr, values, text)
                modern = scan(FilterExpression=f, **args)
                self.assertEqual(legacy, modern)
                self.assertTrue(0 < len(legacy) < 20, len(legacy))
        # Two conditions, AND (the default) and OR; AttributesToGet.
        both = {"n": {"ComparisonOperator": "LE", "AttributeValueList": [N(50)]},
                "tags": {"ComparisonOperator": "CONTAINS", "AttributeValueList": [S("even")]}}
        self.assertEqual(scan(ScanFilter=both, AttributesToGet=["pk", "sk"]),
                         scan(FilterExpression="n <= :n AND contains(tags, :e)",
                              ProjectionExpression="pk, sk",
                              ExpressionAttributeValues={":n": N(50), ":e": S("even")}))
        self.assertEqual(len(scan(ScanFilter=both)), 4)
        self.assertEqual(scan(ScanFilter=both, ConditionalOperator="OR"),
                         scan(FilterExpression="n <= :n OR contains(tags, :e)",
                              ExpressionAttributeValues={":n": N(50), ":e": S("even")}))

    def test_get_attributes_to_get(self):
        r = self.c.get_item(TableName=self.t, Key=self.key("p1", 3), AttributesToGet=["s", "opt", "zz"])
        self.assertEqual(r["Item"], {"s": S("item-3"), "opt": S("yes")})
        self.assertEqual(r["Item"], self.c.get_item(TableName=self.t, Key=self.key("p1", 3),
                                                    ProjectionExpression="s, opt, zz")["Item"])
        r = self.c.batch_get_item(RequestItems={self.t: {
            "Keys": [self.key("p1", 1), self.key("p2", 2)], "AttributesToGet": ["sk", "n"]}})
        got = sorted(r["Responses"][self.t], key=lambda i: int(i["sk"]["N"]))
        self.assertEqual(got, [{"sk": N(1), "n": N(10)}, {"sk": N(2), "n": N(20)}])

    # ------------------------------------------------------------ writes
    def test_put_and_delete_expected(self):
        k = self.key("w-" + uuid.uuid4().hex[:8], 1)
        item = dict(k, v=N(1), s=S("x"))
        self.c.put_item(TableName=self.w, Item=item, Expected={"pk": {"Exists": False}})
        msg = self.refused("put_item", "ConditionalCheckFailedException", TableName=self.w,
                           Item=item, Expected={"pk": {"Exists": False}})
        self.assertEqual(msg, "The conditional request failed")
        # Value form, operator form, OR.
        self.c.put_item(TableName=self.w, Item=dict(item, v=N(2)), Expected={"v": {"Value": N(1)}})
        self.refused("put_item", "ConditionalCheckFailedException", TableName=self.w,
                     Item=item, Expected={"v": {"ComparisonOperator": "GT",
                                                "AttributeValueList": [N(2)]}})
        self.c.put_item(TableName=self.w, Item=dict(item, v=N(3)), ConditionalOperator="OR",
                        Expected={"v": {"ComparisonOperator": "GT", "AttributeValueList": [N(2)]},
                                  "s": {"Value": S("x")}})
        self.assertEqual(self.get(k["pk"]["S"], 1)["v"], N(3))
        self.refused("delete_item", "ConditionalCheckFailedException", TableName=self.w, Key=k,
                     Expected={"v": {"Value": N(9)}})
        r = self.c.delete_item(TableName=self.w, Key=k, ReturnValues="ALL_OLD",
                               Expected={"v": {"ComparisonOperator": "BETWEEN",
                                               "AttributeValueList": [N(1), N(3)]}})
        self.assertEqual(r["Attributes"]["v"], N(3))
        self.assertIsNone(self.get(k["pk"]["S"], 1))

    def test_attribute_updates_match_update_expression(self):
        p = "u-" + uuid.uuid4().hex[:8]
        base = {"n": N(5), "ss": {"SS": ["a", "b", "c"]}, "ns": {"NS": ["1", "2"]},
                "l": {"L": [S("x")]}, "gone": S("g"), "keep": S("k")}
        for k in (1, 2):
            self.c.put_item(TableName=self.w, Item=dict(self.key(p, k), **base))
        legacy = self.c.update_item(
            TableName=self.w, Key=self.key(p, 1), ReturnValues="ALL_NEW",
            AttributeUpdates={
                "n": {"Action": "ADD", "Value": N(-7)},
                "ss": {"Action": "ADD", "Value": {"SS": ["d"]}},
                "ns": {"Action": "DELETE", "Value": {"NS": ["2", "3"]}},
                "l": {"Action": "ADD", "Value": {"L": [S("y")]}},
                "gone": {"Action": "DELETE"},
                "keep": {"Action": "PUT", "Value": {"M": {"m": S("v")}}},
                "fresh": {"Action": "ADD", "Value": N(1)},
                "fresh_set": {"Action": "ADD", "Value": {"SS": ["z"]}}},
            Expected={"n": {"Value": N(5)}, "gone": {"Exists": True, "Value": S("g")}})["Attributes"]
        modern = self.c.update_item(
            TableName=self.w, Key=self.key(p, 2), ReturnValues="ALL_NEW",
            UpdateExpression="SET l = list_append(l, :y), keep = :m REMOVE gone "
                             "ADD n :n, ss :d, fresh :one, fresh_set :z DELETE ns :ns",
            ConditionExpression="n = :five AND gone = :g",
            ExpressionAttributeValues={":y": {"L": [S("y")]}, ":m": {"M": {"m": S("v")}},
                                       ":n": N(-7), ":d": {"SS": ["d"]}, ":one": N(1),
                                       ":z": {"SS": ["z"]}, ":ns": {"NS": ["2", "3"]},
                                       ":five": N(5), ":g": S("g")})["Attributes"]
        legacy.pop("sk")
        modern.pop("sk")
        self.assertEqual(legacy, modern)
        self.assertEqual(legacy["n"], N(-2))
        self.assertEqual(sorted(legacy["ss"]["SS"]), ["a", "b", "c", "d"])
        self.assertEqual(legacy["ns"], {"NS": ["1"]})
        self.assertEqual(legacy["l"], {"L": [S("x"), S("y")]})
        self.assertNotIn("gone", legacy)
        # Expected that no longer holds: nothing changes.
        msg = self.refused("update_item", "ConditionalCheckFailedException", TableName=self.w,
                           Key=self.key(p, 1), AttributeUpdates={"n": {"Action": "ADD", "Value": N(1)}},
                           Expected={"n": {"Value": N(5)}})
        self.assertEqual(msg, "The conditional request failed")
        self.assertEqual(self.get(p, 1)["n"], N(-2))
        # An update of a new item creates it; UPDATED_NEW names what changed.
        r = self.c.update_item(TableName=self.w, Key=self.key(p, 3), ReturnValues="UPDATED_NEW",
                               AttributeUpdates={"c": {"Action": "ADD", "Value": N(2)},
                                                 "x": {"Action": "DELETE"}})
        self.assertEqual(r["Attributes"], {"c": N(2)})
        self.assertEqual(self.get(p, 3), dict(self.key(p, 3), c=N(2)))

    # ------------------------------------------------------------ misuse
    def test_errors(self):
        t = self.t
        msg = self.refused("put_item", TableName=t, Item=self.key("e", 1),
                           Expected={"a": {"Exists": False}}, ConditionExpression="attribute_exists(b)")
        self.assertEqual(msg, "Can not use both expression and non-expression parameters in the same "
                              "request: Non-expression parameters: {Expected} Expression parameters: "
                              "{ConditionExpression}")
        msg = self.refused("query", TableName=t, KeyConditionExpression="pk = :p",
                           ExpressionAttributeValues={":p": S("p1")},
                           QueryFilter={"n": {"ComparisonOperator": "NULL"}})
        self.assertEqual(msg, "Can not use both expression and non-expression parameters in the same "
                              "request: Non-expression parameters: {QueryFilter} Expression parameters: "
                              "{KeyConditionExpression}")
        msg = self.refused("get_item", TableName=t, Key=self.key("e", 1), AttributesToGet=["a"],
                           ExpressionAttributeNames={"#a": "a"})
        self.assertEqual(msg, "ExpressionAttributeNames can only be specified when using expressions")
        msg = self.refused("scan", TableName=t, ScanFilter={"n": {"ComparisonOperator": "EQ"}})
        self.assertEqual(msg, "One or more parameter values were invalid: Invalid number of argument(s) "
                              "for the EQ ComparisonOperator")
        msg = self.refused("scan", TableName=t, ScanFilter={"n": {
            "ComparisonOperator": "BEGINS_WITH", "AttributeValueList": [N(1)]}})
        self.assertEqual(msg, "One or more parameter values were invalid: ComparisonOperator "
                              "BEGINS_WITH is not valid for N AttributeValue type")
        msg = self.refused("update_item", TableName=t, Key=self.key("e", 1),
                           AttributeUpdates={"a": {"Action": "DELETE", "Value": S("x")}})
        self.assertEqual(msg, "One or more parameter values were invalid: DELETE action with value "
                              "is not supported for the type S")
        msg = self.refused("query", TableName=t, KeyConditions={
            "pk": {"ComparisonOperator": "NE", "AttributeValueList": [S("p1")]}})
        self.assertEqual(msg, "Attempted conditional constraint is not an indexable operation")
        # A key condition on an attribute that is not the key: the key
        # condition's own check, as for expressions.
        msg = self.refused("query", TableName=t, KeyConditions={
            "n": {"ComparisonOperator": "EQ", "AttributeValueList": [N(1)]}})
        self.assertIn("key schema element", msg)

    # ------------------------------------------------------------ CLIs
    def test_clis(self):
        """The AWS CLI's legacy flags: the shoal CLI (native protocol) prints
        what the AWS CLI (HTTP) prints, and updates through the native path
        land."""
        args = ["query", "--table-name", self.t, "--consistent-read",
                "--key-conditions", json.dumps({"pk": {"ComparisonOperator": "EQ",
                                                       "AttributeValueList": [S("p2")]}}),
                "--query-filter", json.dumps({"n": {"ComparisonOperator": "GE",
                                                    "AttributeValueList": [N(70)]},
                                              "opt": {"ComparisonOperator": "NULL"}}),
                "--conditional-operator", "AND", "--attributes-to-get", "sk", "n"]
        mine = subprocess.run([SHOAL, "--endpoint", NATIVE] + args, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(mine.returncode, 0, mine.stderr)
        theirs = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb"] + args +
                                ["--output", "json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(theirs.returncode, 0, theirs.stderr)
        self.assertEqual(mine.stdout, theirs.stdout)
        self.assertEqual([i["sk"]["N"] for i in json.loads(mine.stdout)["Items"]], ["8", "10"])

        args = ["scan", "--table-name", self.t, "--scan-filter",
                json.dumps({"s": {"ComparisonOperator": "EQ", "AttributeValueList": [S("item-4")]}}),
                "--attributes-to-get", "pk", "s"]
        mine = subprocess.run([SHOAL, "--endpoint", NATIVE] + args, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(mine.returncode, 0, mine.stderr)
        self.assertEqual(sorted(i["pk"]["S"] for i in json.loads(mine.stdout)["Items"]), ["p1", "p2"])

        p = "cli-" + uuid.uuid4().hex[:8]
        key = json.dumps(self.key(p, 1))
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "put-item", "--table-name", self.w,
                            "--item", key, "--expected", '{"pk":{"Exists":false}}'],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "update-item", "--table-name", self.w,
                            "--key", key, "--attribute-updates",
                            '{"c":{"Action":"ADD","Value":{"N":"5"}}}', "--expected",
                            '{"c":{"ComparisonOperator":"NULL"}}', "--return-values", "ALL_NEW"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["Attributes"]["c"], N(5))
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "delete-item", "--table-name", self.w,
                            "--key", key, "--expected", '{"c":{"Value":{"N":"4"}}}'],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("An error occurred (ConditionalCheckFailedException) when calling the "
                      "DeleteItem operation", r.stderr)
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "get-item", "--table-name", self.w,
                            "--key", key, "--attributes-to-get", "c", "--consistent-read"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["Item"], {"c": N(5)})
