#!/usr/bin/python3
"""The router's DynamoDB HTTP endpoint, driven by DynamoDB's own clients.

Run by run.sh (which starts the cluster and sets the environment):
  SHOAL_HTTP_ENDPOINT  http://127.0.0.1:P of router 1
  SHOAL_CLUSTER_DIR    the cluster directory (cluster.ini, router.endpoint)
  SHOAL_BIN, SHOAL_ROOT, SHOAL_HTTP_BASE
Every table a test makes has its own name, so tests are independent.
"""
import base64
import decimal
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import unittest
import uuid
import warnings
import zlib

import boto3
import botocore
from boto3.dynamodb.conditions import Attr, Key
from botocore.config import Config
from botocore.exceptions import ClientError

from sigv4 import HOST, PORT, TLS, auth_lines, connect

ENDPOINT = os.environ["SHOAL_HTTP_ENDPOINT"]
DIR = os.environ["SHOAL_CLUSTER_DIR"]
BIN = os.environ["SHOAL_BIN"]
ROOT = os.environ["SHOAL_ROOT"]
BASE = int(os.environ["SHOAL_HTTP_BASE"])
AWS = "/usr/bin/aws"
SHOAL = os.path.join(BIN, "shoal")
NATIVE = "file://" + os.path.join(DIR, "router.endpoint")

CFG = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30)


def client(**kw):
    return boto3.client("dynamodb", endpoint_url=kw.pop("endpoint_url", ENDPOINT),
                        region_name="us-east-1", config=kw.pop("config", CFG), **kw)


def new_table(c, hash_only=False, name=None):
    name = name or "t-" + uuid.uuid4().hex[:12]
    attrs = [{"AttributeName": "pk", "AttributeType": "S"}]
    keys = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if not hash_only:
        attrs.append({"AttributeName": "sk", "AttributeType": "N"})
        keys.append({"AttributeName": "sk", "KeyType": "RANGE"})
    c.create_table(TableName=name, AttributeDefinitions=attrs, KeySchema=keys,
                   BillingMode="PAY_PER_REQUEST")
    return name


def raw(data, timeout=10.0, read=True):
    """Sends raw bytes on a new connection; returns (status, headers, body)
    of the first response (or None when the server closed without one)."""
    s = connect(timeout)
    try:
        s.sendall(data)
        if not read:
            return None
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                return None
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return status, headers, rest[:n]
    finally:
        s.close()


def post(body, target="DynamoDB_20120810.ListTables", ctype="application/x-amz-json-1.0",
         extra=b""):
    if isinstance(body, str):
        body = body.encode()
    req = (b"POST / HTTP/1.1\r\nHost: %s:%d\r\n" % (HOST.encode(), PORT))
    signed = {}
    if target is not None:
        req += b"X-Amz-Target: " + target.encode() + b"\r\n"
        signed["X-Amz-Target"] = target
    if ctype is not None:
        req += b"Content-Type: " + ctype.encode() + b"\r\n"
        signed["Content-Type"] = ctype
    req += auth_lines("%s:%d" % (HOST, PORT), body, signed)  # the cluster requires it
    req += extra
    req += b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
    return raw(req)


def error_type(resp):
    status, headers, body = resp
    j = json.loads(body)
    return status, j["__type"].split("#")[-1], j.get("message", j.get("Message", ""))


class Endpoint(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()

    # ------------------------------------------------------------------ basics
    def test_health_and_headers(self):
        r = raw(b"GET / HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (HOST.encode(), PORT))
        self.assertEqual(r[0], 200)
        self.assertEqual(r[2].decode(), "healthy: %s:%d" % (HOST, PORT))
        status, headers, body = post("{}")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "application/x-amz-json-1.0")
        self.assertEqual(int(headers["x-amz-crc32"]), zlib.crc32(body))
        self.assertEqual(len(headers["x-amzn-requestid"]), 52)
        self.assertIn("TableNames", json.loads(body))
        # DynamoDB Local's content type is accepted too, and echoed.
        status, headers, body = post("{}", ctype="application/x-amz-json-1.1")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "application/x-amz-json-1.1")
        self.assertEqual(int(headers["x-amz-crc32"]), zlib.crc32(body))

    @unittest.skipIf(TLS is None, "HTTPS only")
    def test_tls_suite(self):
        # The router's preference wins (common/tls_mbed.c's suites): TLS 1.2,
        # ECDHE-ECDSA with ChaCha20-Poly1305, which mbedtls seals faster
        # than AES-GCM; a client without it gets AES-GCM.
        s = connect()
        try:
            self.assertEqual(s.version(), "TLSv1.2")
            self.assertEqual(s.cipher()[0], "ECDHE-ECDSA-CHACHA20-POLY1305")
        finally:
            s.close()
        ctx = ssl.create_default_context(cafile=os.path.join(DIR, "tls", "ca.pem"))
        ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
        s = ctx.wrap_socket(socket.create_connection((HOST, PORT), timeout=10), server_hostname=HOST)
        try:
            self.assertEqual(s.cipher()[0], "ECDHE-ECDSA-AES128-GCM-SHA256")
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 200 "))
        finally:
            s.close()

    def test_tables(self):
        c = self.c
        name = new_table(c)
        waiter = c.get_waiter("table_exists")
        waiter.wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 10})
        d = c.describe_table(TableName=name)["Table"]
        self.assertEqual(d["TableName"], name)
        self.assertEqual(d["TableStatus"], "ACTIVE")
        self.assertEqual([k["AttributeName"] for k in d["KeySchema"]], ["pk", "sk"])
        self.assertEqual(d["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
        names = []
        for page in c.get_paginator("list_tables").paginate(PaginationConfig={"PageSize": 1}):
            names += page["TableNames"]
        self.assertIn(name, names)
        self.assertEqual(names, sorted(names))
        with self.assertRaises(c.exceptions.ResourceInUseException):
            new_table(c, name=name)
        c.delete_table(TableName=name)
        with self.assertRaises(c.exceptions.ResourceNotFoundException):
            c.describe_table(TableName=name)
        with self.assertRaises(c.exceptions.ResourceNotFoundException):
            c.get_item(TableName=name, Key={"pk": {"S": "a"}, "sk": {"N": "1"}})

    # --------------------------------------------------------------- indexes
    def test_indexes_and_update_table(self):
        """A GSI (write-sharded, Shoal's WriteShards extension is not needed by
        SDK users, so plain DynamoDB shapes here), UpdateTable adding a second
        GSI to a table with data, the describe_table fields an SDK waits on,
        and the errors of index reads."""
        c = self.c
        name = "t-" + uuid.uuid4().hex[:12]
        c.create_table(
            TableName=name, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "g", "AttributeType": "S"},
                                  {"AttributeName": "n", "AttributeType": "N"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[{
                "IndexName": "byG",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                              {"AttributeName": "n", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"}}])
        for i in range(30):
            item = {"pk": {"S": "p%d" % i}, "n": {"N": str(i)}, "x": {"S": "v%d" % i}}
            if i % 3:  # sparse: every third item has no g
                item["g"] = {"S": "G%d" % (i % 2)}
            c.put_item(TableName=name, Item=item)
        want = [str(i) for i in range(30) if i % 3 and i % 2 == 1]
        deadline = time.monotonic() + 15
        while True:
            got = []
            for page in c.get_paginator("query").paginate(
                    TableName=name, IndexName="byG",
                    KeyConditionExpression="g = :g",
                    ExpressionAttributeValues={":g": {"S": "G1"}},
                    PaginationConfig={"PageSize": 2}):
                got += [it["n"]["N"] for it in page["Items"]]
            if got == want or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(got, want)
        with self.assertRaises(c.exceptions.ClientError) as cm:
            c.query(TableName=name, IndexName="byG", ConsistentRead=True,
                    KeyConditionExpression="g = :g",
                    ExpressionAttributeValues={":g": {"S": "G1"}})
        self.assertEqual(cm.exception.response["Error"]["Code"], "ValidationException")
        with self.assertRaises(c.exceptions.ClientError) as cm:
            c.query(TableName=name, IndexName="nope",
                    KeyConditionExpression="g = :g",
                    ExpressionAttributeValues={":g": {"S": "G1"}})
        self.assertIn("does not have the specified index", cm.exception.response["Error"]["Message"])

        # UpdateTable: a new GSI on the data already there, CREATING then ACTIVE.
        r = c.update_table(
            TableName=name,
            AttributeDefinitions=[{"AttributeName": "x", "AttributeType": "S"}],
            GlobalSecondaryIndexUpdates=[{"Create": {
                "IndexName": "byX",
                "KeySchema": [{"AttributeName": "x", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"}}}])
        idx = {g["IndexName"]: g for g in r["TableDescription"]["GlobalSecondaryIndexes"]}
        self.assertIn(idx["byX"]["IndexStatus"], ("CREATING", "ACTIVE"))
        deadline = time.monotonic() + 30
        while True:
            d = c.describe_table(TableName=name)["Table"]
            idx = {g["IndexName"]: g for g in d["GlobalSecondaryIndexes"]}
            if idx["byX"]["IndexStatus"] == "ACTIVE" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(idx["byX"]["IndexStatus"], "ACTIVE")
        r = c.query(TableName=name, IndexName="byX", KeyConditionExpression="x = :x",
                    ExpressionAttributeValues={":x": {"S": "v7"}})
        self.assertEqual([it["pk"]["S"] for it in r["Items"]], ["p7"])
        c.update_table(TableName=name,
                       GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byX"}}])
        with self.assertRaises(c.exceptions.ResourceNotFoundException):
            c.update_table(TableName=name,
                           GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byX"}}])
        c.delete_table(TableName=name)

    # ------------------------------------------------------------ single items
    def test_items_and_return_values(self):
        c = self.c
        t = new_table(c)
        key = {"pk": {"S": "u1"}, "sk": {"N": "1"}}
        item = dict(key, name={"S": "Ana"}, n={"N": "10.50"}, b={"B": b"\x00\xff"},
                    ok={"BOOL": True}, nul={"NULL": True}, ss={"SS": ["x", "y"]},
                    ns={"NS": ["1", "2.5"]}, bs={"BS": [b"a"]},
                    m={"M": {"deep": {"L": [{"S": "z"}, {"N": "-1E+5"}]}}})
        r = c.put_item(TableName=t, Item=item, ReturnValues="ALL_OLD")
        self.assertNotIn("Attributes", r)
        got = c.get_item(TableName=t, Key=key, ConsistentRead=True)["Item"]
        self.assertEqual(got["n"], {"N": "10.5"})
        self.assertEqual(got["b"], {"B": b"\x00\xff"})
        self.assertEqual(got["m"]["M"]["deep"]["L"][1], {"N": "-100000"})
        self.assertEqual(sorted(got["ss"]["SS"]), ["x", "y"])
        r = c.put_item(TableName=t, Item=dict(key, name={"S": "Bia"}), ReturnValues="ALL_OLD")
        self.assertEqual(r["Attributes"]["name"], {"S": "Ana"})
        r = c.get_item(TableName=t, Key=key, ProjectionExpression="#n",
                       ExpressionAttributeNames={"#n": "name"})
        self.assertEqual(r["Item"], {"name": {"S": "Bia"}})
        self.assertNotIn("Item", c.get_item(TableName=t, Key={"pk": {"S": "no"}, "sk": {"N": "1"}}))

        r = c.update_item(TableName=t, Key=key, UpdateExpression="SET c = :one, #n = :n",
                          ExpressionAttributeNames={"#n": "name"},
                          ExpressionAttributeValues={":one": {"N": "1"}, ":n": {"S": "Cy"}},
                          ReturnValues="ALL_NEW")
        self.assertEqual(r["Attributes"], dict(key, name={"S": "Cy"}, c={"N": "1"}))
        r = c.update_item(TableName=t, Key=key, UpdateExpression="ADD c :d",
                          ExpressionAttributeValues={":d": {"N": "41"}}, ReturnValues="UPDATED_NEW")
        self.assertEqual(r["Attributes"], {"c": {"N": "42"}})
        r = c.update_item(TableName=t, Key=key, UpdateExpression="REMOVE c",
                          ReturnValues="UPDATED_OLD")
        self.assertEqual(r["Attributes"], {"c": {"N": "42"}})
        r = c.update_item(TableName=t, Key=key, UpdateExpression="SET x = :x",
                          ExpressionAttributeValues={":x": {"S": "1"}}, ReturnValues="ALL_OLD")
        self.assertEqual(r["Attributes"], dict(key, name={"S": "Cy"}))
        r = c.update_item(TableName=t, Key=key, UpdateExpression="SET y = :x",
                          ExpressionAttributeValues={":x": {"S": "1"}})
        self.assertNotIn("Attributes", r)
        r = c.delete_item(TableName=t, Key=key, ReturnValues="ALL_OLD")
        self.assertEqual(r["Attributes"]["y"], {"S": "1"})
        self.assertNotIn("Item", c.get_item(TableName=t, Key=key, ConsistentRead=True))
        r = c.delete_item(TableName=t, Key=key, ReturnValues="ALL_OLD")
        self.assertNotIn("Attributes", r)

    def test_conditions(self):
        c = self.c
        t = new_table(c, hash_only=True)
        c.put_item(TableName=t, Item={"pk": {"S": "a"}, "v": {"N": "1"}},
                   ConditionExpression="attribute_not_exists(pk)")
        with self.assertRaises(c.exceptions.ConditionalCheckFailedException) as cm:
            c.put_item(TableName=t, Item={"pk": {"S": "a"}},
                       ConditionExpression="attribute_not_exists(pk)")
        self.assertEqual(cm.exception.response["Error"]["Message"], "The conditional request failed")
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        c.update_item(TableName=t, Key={"pk": {"S": "a"}}, UpdateExpression="SET v = v + :one",
                      ConditionExpression="v = :one",
                      ExpressionAttributeValues={":one": {"N": "1"}})
        with self.assertRaises(c.exceptions.ConditionalCheckFailedException):
            c.update_item(TableName=t, Key={"pk": {"S": "a"}}, UpdateExpression="SET v = :one",
                          ConditionExpression="v = :one",
                          ExpressionAttributeValues={":one": {"N": "1"}})
        with self.assertRaises(c.exceptions.ConditionalCheckFailedException):
            c.delete_item(TableName=t, Key={"pk": {"S": "a"}},
                          ConditionExpression="attribute_not_exists(v)")
        c.delete_item(TableName=t, Key={"pk": {"S": "a"}}, ConditionExpression="v = :two",
                      ExpressionAttributeValues={":two": {"N": "2"}})
        # Boto3's condition builders.
        tbl = boto3.resource("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
                             config=CFG).Table(t)
        tbl.put_item(Item={"pk": "b", "v": 5})
        with self.assertRaises(ClientError) as cm:
            tbl.put_item(Item={"pk": "b", "v": 6}, ConditionExpression=Attr("v").lt(5))
        self.assertEqual(cm.exception.response["Error"]["Code"], "ConditionalCheckFailedException")
        tbl.put_item(Item={"pk": "b", "v": 6}, ConditionExpression=Attr("v").between(1, 5))
        self.assertEqual(tbl.get_item(Key={"pk": "b"})["Item"]["v"], decimal.Decimal(6))

    # ------------------------------------------------------ query, scan, pages
    def test_query_scan_pagination(self):
        c = self.c
        t = new_table(c)
        for i in range(30):
            c.put_item(TableName=t, Item={"pk": {"S": "p"}, "sk": {"N": str(i)},
                                          "odd": {"BOOL": i % 2 == 1}})
        for i in range(7):
            c.put_item(TableName=t, Item={"pk": {"S": "q%d" % i}, "sk": {"N": "0"}})
        pag = c.get_paginator("query")
        pages = list(pag.paginate(TableName=t, KeyConditionExpression="pk = :p",
                                  ExpressionAttributeValues={":p": {"S": "p"}},
                                  PaginationConfig={"PageSize": 7}))
        self.assertEqual(len(pages), 5)  # 7+7+7+7+2 (no empty last page: 30 % 7 != 0)
        self.assertIn("LastEvaluatedKey", pages[0])
        self.assertNotIn("LastEvaluatedKey", pages[-1])
        sks = [int(i["sk"]["N"]) for p in pages for i in p["Items"]]
        self.assertEqual(sks, list(range(30)))
        # Backwards, with a key condition on the sort key and a filter.
        r = c.query(TableName=t, KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
                    FilterExpression="odd = :t", ScanIndexForward=False,
                    ExpressionAttributeValues={":p": {"S": "p"}, ":a": {"N": "10"},
                                               ":b": {"N": "19"}, ":t": {"BOOL": True}})
        self.assertEqual([int(i["sk"]["N"]) for i in r["Items"]], [19, 17, 15, 13, 11])
        self.assertEqual((r["Count"], r["ScannedCount"]), (5, 10))
        r = c.query(TableName=t, KeyConditionExpression="pk = :p", Select="COUNT",
                    ExpressionAttributeValues={":p": {"S": "p"}})
        self.assertEqual(r["Count"], 30)
        self.assertNotIn("Items", r)
        # Scan: paginator across partitions, then parallel segments.
        items = []
        for page in c.get_paginator("scan").paginate(TableName=t,
                                                     PaginationConfig={"PageSize": 4}):
            items += page["Items"]
        self.assertEqual(len(items), 37)
        seen = []
        for seg in range(3):
            for page in c.get_paginator("scan").paginate(TableName=t, Segment=seg,
                                                         TotalSegments=3):
                seen += [(i["pk"]["S"], i["sk"]["N"]) for i in page["Items"]]
        self.assertEqual(len(seen), 37)
        self.assertEqual(len(set(seen)), 37)
        # MaxItems with resume tokens.
        first = pag.paginate(TableName=t, KeyConditionExpression="pk = :p",
                             ExpressionAttributeValues={":p": {"S": "p"}},
                             PaginationConfig={"MaxItems": 12, "PageSize": 5}).build_full_result()
        self.assertEqual(len(first["Items"]), 12)
        rest = pag.paginate(TableName=t, KeyConditionExpression="pk = :p",
                            ExpressionAttributeValues={":p": {"S": "p"}},
                            PaginationConfig={"StartingToken": first["NextToken"],
                                              "PageSize": 5}).build_full_result()
        self.assertEqual([int(i["sk"]["N"]) for i in first["Items"] + rest["Items"]],
                         list(range(30)))
        # Resource API: Key() builders and Decimal numbers.
        tbl = boto3.resource("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
                             config=CFG).Table(t)
        r = tbl.query(KeyConditionExpression=Key("pk").eq("p") & Key("sk").gte(28))
        self.assertEqual([i["sk"] for i in r["Items"]], [28, 29])

    # ---------------------------------------------------------------- batches
    def test_batches(self):
        c = self.c
        t1, t2 = new_table(c), new_table(c, hash_only=True)
        reqs = [{"PutRequest": {"Item": {"pk": {"S": "k%d" % i}, "sk": {"N": str(i)}}}}
                for i in range(25)]
        r = c.batch_write_item(RequestItems={t1: reqs})
        self.assertEqual(r["UnprocessedItems"], {})
        r = c.batch_write_item(RequestItems={
            t2: [{"PutRequest": {"Item": {"pk": {"S": "a"}}}}],
            t1: [{"DeleteRequest": {"Key": {"pk": {"S": "k0"}, "sk": {"N": "0"}}}}]})
        self.assertEqual(r["UnprocessedItems"], {})
        keys = [{"pk": {"S": "k%d" % i}, "sk": {"N": str(i)}} for i in range(25)]
        r = c.batch_get_item(RequestItems={t1: {"Keys": keys, "ProjectionExpression": "pk"},
                                           t2: {"Keys": [{"pk": {"S": "a"}}, {"pk": {"S": "zz"}}],
                                                "ConsistentRead": True}})
        self.assertEqual(r["UnprocessedKeys"], {})
        self.assertEqual(sorted(i["pk"]["S"] for i in r["Responses"][t1]),
                         sorted("k%d" % i for i in range(1, 25)))
        self.assertEqual(r["Responses"][t2], [{"pk": {"S": "a"}}])
        with self.assertRaises(c.exceptions.ClientError) as cm:
            c.batch_write_item(RequestItems={t1: reqs + reqs[:1]})
        self.assertEqual(cm.exception.response["Error"]["Code"], "ValidationException")
        with self.assertRaises(c.exceptions.ClientError) as cm:
            c.batch_get_item(RequestItems={t1: {"Keys": keys[:2] + keys[:1]}})
        self.assertEqual(cm.exception.response["Error"]["Code"], "ValidationException")
        # boto3's batch_writer retries UnprocessedItems until empty.
        tbl = boto3.resource("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
                             config=CFG).Table(t2)
        with tbl.batch_writer() as w:
            for i in range(60):
                w.put_item(Item={"pk": "w%d" % i, "n": decimal.Decimal(i)})
        self.assertEqual(c.scan(TableName=t2, Select="COUNT")["Count"], 61)

    # ----------------------------------------------------------------- errors
    def test_consumed_capacity(self):
        """ReturnConsumedCapacity with DynamoDB's on-demand arithmetic: reads
        in 4 KB units (halved when eventually consistent, Query/Scan charged
        for the sum of the items evaluated), writes in 1 KB units of the
        larger of the old and new item, index entry writes under INDEXES,
        batches one entry per table, nothing without the parameter."""
        c = self.c

        def item(pk, size, sk=None, g=None):
            """An item of exactly `size` bytes by DynamoDB's rules (sk: a
            one-digit number, 2 + 2 bytes; g: a one-letter S, 1 + 1)."""
            it = {"pk": {"S": pk}}
            used = 2 + len(pk) + 4  # "pk" + its value + the name "data"
            if sk is not None:
                it["sk"] = {"N": str(sk)}
                used += 4
            if g is not None:
                it["g"] = {"S": g}
                used += 2
            it["data"] = {"S": "d" * (size - used)}
            return it

        def cc(resp):
            return resp.get("ConsumedCapacity")

        name = new_table(c)  # pk S, sk N
        five = 5 * 1024
        # PutItem: 5 KB -> 5 units; no parameter or NONE -> no member at all.
        r = c.put_item(TableName=name, Item=item("a", five, sk=1), ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r), {"TableName": name, "CapacityUnits": 5.0})
        self.assertIsNone(cc(c.put_item(TableName=name, Item=item("a", five, sk=2))))
        self.assertIsNone(cc(c.put_item(TableName=name, Item=item("a", five, sk=3),
                                        ReturnConsumedCapacity="NONE")))
        # Replacing by a smaller item costs the larger one.
        r = c.put_item(TableName=name, Item=item("a", 1024, sk=3), ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 5.0)
        r = c.put_item(TableName=name, Item=item("a", five, sk=3), ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 5.0)
        # GetItem: 2 units consistent, 1 eventually, a missing item the minimum.
        key = {"pk": {"S": "a"}, "sk": {"N": "1"}}
        r = c.get_item(TableName=name, Key=key, ConsistentRead=True,
                       ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r), {"TableName": name, "CapacityUnits": 2.0})
        r = c.get_item(TableName=name, Key=key, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 1.0)
        r = c.get_item(TableName=name, Key=key, ProjectionExpression="pk",
                       ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 1.0)  # the whole item is read
        r = c.get_item(TableName=name, Key={"pk": {"S": "none"}, "sk": {"N": "1"}},
                       ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 0.5)
        self.assertIsNone(cc(c.get_item(TableName=name, Key=key)))
        # UpdateItem and DeleteItem.
        r = c.update_item(TableName=name, Key=key, UpdateExpression="SET x = :x",
                          ExpressionAttributeValues={":x": {"S": "y"}},
                          ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 6.0)  # 5 KB + 2 bytes
        r = c.delete_item(TableName=name, Key=key, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 6.0)
        r = c.delete_item(TableName=name, Key=key, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 1.0)
        c.put_item(TableName=name, Item=item("a", five, sk=1))
        # Query: the sum of the items evaluated (15 KB), filtered out or not.
        for consistent, units in ((True, 4.0), (False, 2.0)):
            r = c.query(TableName=name, KeyConditionExpression="pk = :p",
                        FilterExpression="attribute_exists(nothing)",
                        ExpressionAttributeValues={":p": {"S": "a"}},
                        ConsistentRead=consistent, ReturnConsumedCapacity="TOTAL")
            self.assertEqual((r["Count"], r["ScannedCount"]), (0, 3))
            self.assertEqual(cc(r), {"TableName": name, "CapacityUnits": units})
        r = c.query(TableName=name, KeyConditionExpression="pk = :p", Limit=1,
                    ExpressionAttributeValues={":p": {"S": "a"}}, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r)["CapacityUnits"], 1.0)
        # Scan across partitions: 3 x 5 KB + 2 x 5 KB elsewhere = 25 KB, once.
        c.put_item(TableName=name, Item=item("b", five, sk=1))
        c.put_item(TableName=name, Item=item("zz", five, sk=1))
        r = c.scan(TableName=name, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(r["ScannedCount"], 5)
        self.assertEqual(cc(r), {"TableName": name, "CapacityUnits": 7.0})
        r = c.scan(TableName=name, ReturnConsumedCapacity="INDEXES")
        self.assertEqual(cc(r), {"TableName": name, "CapacityUnits": 3.5,
                                 "Table": {"CapacityUnits": 3.5}})
        self.assertIsNone(cc(c.scan(TableName=name)))

        # A table with a KEYS_ONLY GSI (entries of pk + g: 5 bytes, 1 unit).
        gname = "t-" + uuid.uuid4().hex[:12]
        c.create_table(
            TableName=gname, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "g", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[{
                "IndexName": "byG", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"}}])
        r = c.put_item(TableName=gname, Item=item("a", five, g="x"),
                       ReturnConsumedCapacity="INDEXES")
        self.assertEqual(cc(r), {"TableName": gname, "CapacityUnits": 6.0,
                                 "Table": {"CapacityUnits": 5.0},
                                 "GlobalSecondaryIndexes": {"byG": {"CapacityUnits": 1.0}}})
        r = c.put_item(TableName=gname, Item=item("b", 1000, g="x"),
                       ReturnConsumedCapacity="TOTAL")
        self.assertEqual(cc(r), {"TableName": gname, "CapacityUnits": 2.0})
        # Moving the index key: a delete and a put of the entry.
        r = c.update_item(TableName=gname, Key={"pk": {"S": "a"}}, UpdateExpression="SET g = :g",
                          ExpressionAttributeValues={":g": {"S": "y"}},
                          ReturnConsumedCapacity="INDEXES")
        self.assertEqual(cc(r), {"TableName": gname, "CapacityUnits": 7.0,
                                 "Table": {"CapacityUnits": 5.0},
                                 "GlobalSecondaryIndexes": {"byG": {"CapacityUnits": 2.0}}})
        # Not touching the index: no index share.
        r = c.update_item(TableName=gname, Key={"pk": {"S": "b"}}, UpdateExpression="SET q = :q",
                          ExpressionAttributeValues={":q": {"S": "1"}},
                          ReturnConsumedCapacity="INDEXES")
        self.assertEqual(cc(r), {"TableName": gname, "CapacityUnits": 1.0,
                                 "Table": {"CapacityUnits": 1.0}})
        # A GSI query is charged to the index, eventually consistent.
        deadline = time.monotonic() + 15
        while True:
            r = c.query(TableName=gname, IndexName="byG", KeyConditionExpression="g = :g",
                        ExpressionAttributeValues={":g": {"S": "x"}},
                        ReturnConsumedCapacity="INDEXES")
            if r["Count"] == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(r["Count"], 1)
        self.assertEqual(cc(r), {"TableName": gname, "CapacityUnits": 0.5,
                                 "Table": {"CapacityUnits": 0.0},
                                 "GlobalSecondaryIndexes": {"byG": {"CapacityUnits": 0.5}}})

        # Batches: one ConsumedCapacity per table.
        r = c.batch_write_item(RequestItems={
            name: [{"PutRequest": {"Item": item("c", five, sk=1)}},
                   {"PutRequest": {"Item": item("d", 2048, sk=1)}},
                   {"DeleteRequest": {"Key": {"pk": {"S": "b"}, "sk": {"N": "1"}}}}],
            gname: [{"PutRequest": {"Item": item("c", 100, g="z")}}]},
            ReturnConsumedCapacity="INDEXES")
        got = {x["TableName"]: x for x in r["ConsumedCapacity"]}
        self.assertEqual(len(r["ConsumedCapacity"]), 2)
        self.assertEqual(got[name], {"TableName": name, "CapacityUnits": 12.0,
                                     "Table": {"CapacityUnits": 12.0}})
        self.assertEqual(got[gname], {"TableName": gname, "CapacityUnits": 2.0,
                                      "Table": {"CapacityUnits": 1.0},
                                      "GlobalSecondaryIndexes": {"byG": {"CapacityUnits": 1.0}}})
        self.assertNotIn("ConsumedCapacity", c.batch_write_item(RequestItems={
            name: [{"PutRequest": {"Item": item("e", 10, sk=1)}}]}))
        r = c.batch_get_item(RequestItems={
            name: {"Keys": [{"pk": {"S": "a"}, "sk": {"N": "2"}},
                            {"pk": {"S": "c"}, "sk": {"N": "1"}},
                            {"pk": {"S": "d"}, "sk": {"N": "1"}},
                            {"pk": {"S": "nope"}, "sk": {"N": "1"}}], "ConsistentRead": True},
            gname: {"Keys": [{"pk": {"S": "a"}}]}}, ReturnConsumedCapacity="TOTAL")
        got = {x["TableName"]: x for x in r["ConsumedCapacity"]}
        self.assertEqual(got, {name: {"TableName": name, "CapacityUnits": 2 + 2 + 1 + 1.0},
                               gname: {"TableName": gname, "CapacityUnits": 1.0}})

        # The shoal CLI prints what the AWS CLI prints.
        args = ["get-item", "--table-name", name, "--key",
                '{"pk":{"S":"a"},"sk":{"N":"2"}}', "--projection-expression", "pk",
                "--return-consumed-capacity", "TOTAL", "--consistent-read"]
        mine = subprocess.run([SHOAL, "--endpoint", NATIVE] + args,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(mine.returncode, 0, mine.stderr)
        theirs = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb"] + args +
                                ["--output", "json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(theirs.returncode, 0, theirs.stderr)
        self.assertEqual(mine.stdout, theirs.stdout)
        self.assertEqual(json.loads(mine.stdout)["ConsumedCapacity"],
                         {"TableName": name, "CapacityUnits": 2.0})

    def test_error_types(self):
        c = self.c
        t = new_table(c, hash_only=True)
        with self.assertRaises(ClientError) as cm:
            c.put_item(TableName=t, Item={"pk": {"S": "a"}}, ConditionExpression="pk = = :x")
        self.assertEqual(cm.exception.response["Error"]["Code"], "ValidationException")
        with self.assertRaises(ClientError) as cm:
            c.get_item(TableName=t, Key={"nope": {"S": "a"}})
        self.assertEqual(cm.exception.response["Error"]["Code"], "ValidationException")
        self.assertIn("key", cm.exception.response["Error"]["Message"].lower())
        with self.assertRaises(c.exceptions.ResourceNotFoundException):
            c.put_item(TableName="no-such-table", Item={"pk": {"S": "a"}})
        # A cancelled transaction: HTTP 400 and the reasons (test_txn.py has more).
        with self.assertRaises(c.exceptions.TransactionCanceledException) as cm:
            c.transact_write_items(TransactItems=[{"ConditionCheck": {
                "TableName": t, "Key": {"pk": {"S": "a"}},
                "ConditionExpression": "attribute_exists(pk)"}}])
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        self.assertEqual(cm.exception.response["CancellationReasons"],
                         [{"Code": "ConditionalCheckFailed",
                           "Message": "The conditional request failed"}])
        with self.assertRaises(ClientError) as cm:
            c.describe_continuous_backups(TableName=t)
        self.assertEqual(cm.exception.response["Error"]["Code"], "UnknownOperationException")

    # ------------------------------------------------------------- robustness
    def test_bad_requests(self):
        st, typ, msg = error_type(post("{not json"))
        self.assertEqual((st, typ), (400, "SerializationException"))
        st, typ, _ = error_type(post('{"TableName": 5}', "DynamoDB_20120810.DescribeTable"))
        self.assertEqual((st, typ), (400, "SerializationException"))
        st, typ, _ = error_type(post('{"TableName": ["x"]}', "DynamoDB_20120810.DescribeTable"))
        self.assertEqual((st, typ), (400, "SerializationException"))
        st, typ, _ = error_type(post("{}", "DynamoDB_20120810.PutItem"))
        self.assertEqual((st, typ), (400, "ValidationException"))
        st, typ, _ = error_type(post("[1,2]", "DynamoDB_20120810.PutItem"))
        self.assertEqual((st, typ), (400, "SerializationException"))
        st, typ, _ = error_type(post(b'{"TableName": "\xff\xfe"}', "DynamoDB_20120810.DescribeTable"))
        self.assertEqual((st, typ), (400, "SerializationException"))
        st, typ, _ = error_type(post("{}", "DynamoDB_20120810.NoSuchThing"))
        self.assertEqual((st, typ), (400, "UnknownOperationException"))
        st, typ, _ = error_type(post("{}", None))
        self.assertEqual((st, typ), (400, "UnknownOperationException"))
        st, typ, _ = error_type(post("{}", "Other_2020.ListTables"))
        self.assertEqual((st, typ), (400, "UnknownOperationException"))
        st, typ, _ = error_type(post("{}", ctype="text/plain"))
        self.assertEqual((st, typ), (400, "SerializationException"))
        # An empty body is {}.
        self.assertEqual(post("")[0], 200)
        # 10,000 levels of nesting: arrays, objects, and inside an item.
        for deep in ("[" * 10000 + "]" * 10000,
                     '{"a":' * 10000 + "1" + "}" * 10000,
                     '{"TableName":"x","Item":{"pk":' + '{"M":{"a":' * 5000 + '{"S":"x"}' +
                     "}}" * 5000 + "}}"):
            st, typ, _ = error_type(post(deep, "DynamoDB_20120810.PutItem"))
            self.assertEqual(st, 400)
            self.assertIn(typ, ("SerializationException", "ValidationException"))
        # The same item nested 40 deep reaches the value codec's limit.
        item = '{"S":"x"}'
        for _ in range(40):
            item = '{"M":{"a":%s}}' % item
        t = new_table(self.c, hash_only=True)
        st, typ, msg = error_type(post('{"TableName":"%s","Item":{"pk":{"S":"k"},"v":%s}}' % (t, item),
                                       "DynamoDB_20120810.PutItem"))
        self.assertEqual((st, typ), (400, "ValidationException"))
        self.assertIn("Nesting", msg)
        self.assertEqual(self.c.list_tables()["ResponseMetadata"]["HTTPStatusCode"], 200)

    def test_http_framing(self):
        head = b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
        # Declared body over 16 MiB: refused before it is read.
        r = raw(head + b"Content-Length: 16777217\r\n\r\n")
        self.assertEqual(r[0], 413)
        self.assertEqual(json.loads(r[2])["__type"].split("#")[1], "ValidationException")
        self.assertEqual(r[1].get("connection"), "close")
        r = raw(head + b"Content-Length: abc\r\n\r\n{}")
        self.assertEqual(r[0], 400)
        r = raw(head + b"Content-Length: -1\r\n\r\n{}")
        self.assertEqual(r[0], 400)
        # Chunked bodies are decoded (test_smallops.py has the oversized
        # one); other transfer codings, or chunked beside Content-Length, 411.
        signed = head + auth_lines("x", b"{}", {"X-Amz-Target": "DynamoDB_20120810.ListTables"})
        r = raw(signed + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        self.assertEqual(r[0], 200)
        self.assertIn("TableNames", json.loads(r[2]))
        r = raw(head + b"Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        self.assertEqual(r[0], 411)
        r = raw(head + b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}")
        self.assertEqual(r[0], 411)
        # Content-Length shorter than the body: the body is cut (bad JSON),
        # the rest is garbage the server refuses; nothing else is harmed.
        r = raw(head + b"Content-Length: 3\r\n\r\n{\"a\": 1}")
        self.assertEqual(r[0], 400)
        # Longer than the body, then the client goes away.
        r = raw(head + b"Content-Length: 100\r\n\r\n{}", timeout=1, read=False)
        # Garbage and non-HTTP.
        r = raw(b"\x00\x01\x02 garbage\r\n\r\n")
        self.assertTrue(r is None or r[0] >= 400)
        r = raw(b"DELETE / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        self.assertEqual(r[0], 405)
        # A body the endpoint does not read closes the connection after the answer.
        r = raw(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        self.assertEqual((r[0], r[1].get("connection")), (200, "close"))
        r = raw(b"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        self.assertEqual((r[0], r[1].get("connection")), (405, "close"))
        r = raw(b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(r[0], 404)
        self.assertEqual(self.c.list_tables()["ResponseMetadata"]["HTTPStatusCode"], 200)

    def test_slowloris(self):
        """Connections that never finish their request hold only themselves."""
        c = self.c
        t = new_table(c, hash_only=True)
        held = []
        body = b'{"Limit": 1}' + b" " * (1000000 - 12)
        sign = auth_lines("x", body, {"X-Amz-Target": "DynamoDB_20120810.ListTables"})
        try:
            for i in range(100):
                s = connect(5)
                if i % 3 == 0:  # headers never finished
                    s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Tar")
                elif i % 3 == 1:  # body never finished
                    s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810."
                              b"ListTables\r\n" + sign + b"Content-Length: 1000000\r\n\r\n" +
                              body[:4])
                else:  # connected, silent
                    pass
                held.append(s)
            t0 = time.monotonic()
            for i in range(50):
                c.put_item(TableName=t, Item={"pk": {"S": "k%d" % i}})
                self.assertEqual(c.get_item(TableName=t, Key={"pk": {"S": "k%d" % i}})["Item"],
                                 {"pk": {"S": "k%d" % i}})
            self.assertLess(time.monotonic() - t0, 20)
            # The held connections are still open and usable for their request.
            s = held[1]
            s.sendall(body[4:])
            buf = s.recv(65536)
            self.assertTrue(buf.startswith(b"HTTP/1.1 200"), buf[:100])
        finally:
            for s in held:
                s.close()
        # Native clients were never affected either.
        out = subprocess.run([SHOAL, "--endpoint", NATIVE, "list-tables"], capture_output=True,
                             timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_keep_alive(self):
        s = connect(10)
        try:
            req = (b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
                   b"Content-Type: application/x-amz-json-1.0\r\n" +
                   auth_lines("x", b"{}", {"X-Amz-Target": "DynamoDB_20120810.ListTables",
                                           "Content-Type": "application/x-amz-json-1.0"}) +
                   b"Content-Length: 2\r\n\r\n{}")
            s.sendall(req * 3)  # pipelined
            buf = b""
            deadline = time.monotonic() + 10
            while buf.count(b"HTTP/1.1 200") < 3 and time.monotonic() < deadline:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            self.assertEqual(buf.count(b"HTTP/1.1 200"), 3)
        finally:
            s.close()


# ---------------------------------------------------------------------------
# Seed 002: the session's own Python code and CLI commands, endpoint changed.
# ---------------------------------------------------------------------------

SEED_TABLE = "edtech-platform"


def load_seed():
    c = client()
    try:
        c.describe_table(TableName=SEED_TABLE)
        return
    except c.exceptions.ResourceNotFoundException:
        pass
    with open(os.path.join(ROOT, "deploy/demo/edtech-table.json")) as f:
        c.create_table(**json.load(f))
    with open(os.path.join(ROOT, "deploy/demo/edtech-items.json")) as f:
        items = json.load(f)
    while items:
        r = c.batch_write_item(RequestItems=items)
        items = r["UnprocessedItems"]


class Seed002(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        load_seed()

    def test_python_functions(self):
        # Seed 002's code verbatim, but for endpoint_url (and no IMDS).
        from datetime import datetime, timezone
        dynamodb = boto3.resource("dynamodb", region_name="us-east-1", endpoint_url=ENDPOINT)
        table = dynamodb.Table("edtech-platform")

        def enroll_student(student_id: str, course_id: str) -> None:
            now = datetime.now(timezone.utc).isoformat()
            try:
                dynamodb.meta.client.transact_write_items(
                    TransactItems=[
                        {"Put": {"TableName": "edtech-platform",
                                 "Item": {"PK": {"S": f"STUDENT#{student_id}"},
                                          "SK": {"S": f"ENROLLMENT#{course_id}"},
                                          "GSI1PK": {"S": f"COURSE#{course_id}"},
                                          "GSI1SK": {"S": f"STUDENT#{student_id}"},
                                          "entity_type": {"S": "ENROLLMENT"},
                                          "enrolled_at": {"S": now},
                                          "progress": {"N": "0"}},
                                 "ConditionExpression": "attribute_not_exists(PK)"}},
                        {"Put": {"TableName": "edtech-platform",
                                 "Item": {"PK": {"S": f"COURSE#{course_id}"},
                                          "SK": {"S": f"ENROLLMENT#STUDENT#{student_id}"},
                                          "GSI1PK": {"S": f"COURSE#{course_id}"},
                                          "GSI1SK": {"S": f"STUDENT#{student_id}"},
                                          "entity_type": {"S": "ENROLLMENT"},
                                          "enrolled_at": {"S": now},
                                          "progress": {"N": "0"},
                                          "last_seen": {"S": now}},
                                 "ConditionExpression": "attribute_not_exists(PK)"}},
                    ]
                )
            except ClientError as e:
                if e.response["Error"]["Code"] == "TransactionCanceledException":
                    print("Aluno já matriculado (condition check falhou)")
                else:
                    raise

        def get_student_courses(student_id: str) -> list:
            response = table.query(
                KeyConditionExpression=(
                    Key("PK").eq(f"STUDENT#{student_id}") &
                    Key("SK").begins_with("ENROLLMENT#")
                )
            )
            return response.get("Items", [])

        def get_course_students(course_id: str) -> list:
            response = table.query(
                IndexName="GSI1",
                KeyConditionExpression=(
                    Key("GSI1PK").eq(f"COURSE#{course_id}") &
                    Key("GSI1SK").begins_with("STUDENT#")
                )
            )
            return response.get("Items", [])

        def get_course_structure(course_id: str) -> dict:
            response = table.query(
                KeyConditionExpression=(
                    Key("PK").eq(f"COURSE#{course_id}") &
                    Key("SK").begins_with("MODULE#")
                ),
                ScanIndexForward=True,
            )
            items = response.get("Items", [])
            modules = {}
            for item in items:
                sk = item["SK"]
                parts = sk.split("#")
                if len(parts) == 2:
                    mod_id = parts[1]
                    modules[mod_id] = {**item, "lessons": []}
                elif len(parts) == 4 and parts[2] == "LESSON":
                    mod_id = parts[1]
                    lesson_id = parts[3]
                    if mod_id in modules:
                        modules[mod_id]["lessons"].append(item)
            return {"course_id": course_id, "modules": list(modules.values())}

        def get_module_lessons(course_id: str, module_id: str) -> list:
            response = table.query(
                KeyConditionExpression=(
                    Key("PK").eq(f"COURSE#{course_id}") &
                    Key("SK").begins_with(f"MODULE#{module_id}#LESSON#")
                ),
                ScanIndexForward=True,
            )
            return response.get("Items", [])

        courses = get_student_courses("s1")
        self.assertEqual([i["SK"] for i in courses], ["ENROLLMENT#c10", "ENROLLMENT#c20"])
        self.assertEqual(courses[0]["GSI1PK"], "COURSE#c10")
        s = get_course_structure("c10")
        self.assertEqual([m["SK"] for m in s["modules"]], ["MODULE#m1", "MODULE#m2"])
        self.assertEqual([l["SK"] for l in s["modules"][0]["lessons"]],
                         ["MODULE#m1#LESSON#l1", "MODULE#m1#LESSON#l2"])
        self.assertEqual([l["SK"] for l in s["modules"][1]["lessons"]], ["MODULE#m2#LESSON#l3"])
        self.assertEqual([i["SK"] for i in get_module_lessons("c10", "m1")],
                         ["MODULE#m1#LESSON#l1", "MODULE#m1#LESSON#l2"])
        self.assertEqual(get_module_lessons("c10", "m9"), [])
        # The seed's trap: a boto3 *resource*'s client serializes values
        # itself, so {"S": "STUDENT#s3"} is sent as a map -- DynamoDB refuses
        # the key's type, and so must Shoal.
        with self.assertRaises(ClientError) as cm:
            enroll_student("s3", "c10")
        err = cm.exception.response["Error"]
        self.assertEqual(err["Code"], "ValidationException")
        self.assertEqual(err["Message"], "One or more parameter values were invalid: Type "
                                         "mismatch for key PK expected: S actual: M")
        self.assertEqual(get_student_courses("s3"), [])

        # The same two Puts through a low-level client (or plain values on
        # the resource's client) enrol: both edges, in one transaction.
        low = client()

        def enroll_low(student_id, course_id, values):
            now = datetime.now(timezone.utc).isoformat()
            v = (lambda x: x) if values == "plain" else (lambda x: {"S": x})
            c = dynamodb.meta.client if values == "plain" else low
            items = [
                {"Put": {"TableName": "edtech-platform",
                         "Item": {"PK": v(f"STUDENT#{student_id}"),
                                  "SK": v(f"ENROLLMENT#{course_id}"),
                                  "GSI1PK": v(f"COURSE#{course_id}"),
                                  "GSI1SK": v(f"STUDENT#{student_id}"),
                                  "entity_type": v("ENROLLMENT"), "enrolled_at": v(now)},
                         "ConditionExpression": "attribute_not_exists(PK)"}},
                {"Put": {"TableName": "edtech-platform",
                         "Item": {"PK": v(f"COURSE#{course_id}"),
                                  "SK": v(f"ENROLLMENT#STUDENT#{student_id}"),
                                  "GSI1PK": v(f"COURSE#{course_id}"),
                                  "GSI1SK": v(f"STUDENT#{student_id}"),
                                  "entity_type": v("ENROLLMENT"), "last_seen": v(now)},
                         "ConditionExpression": "attribute_not_exists(PK)"}}]
            return c.transact_write_items(TransactItems=items)

        enroll_low("s3", "c10", "typed")
        self.assertEqual([i["SK"] for i in get_student_courses("s3")], ["ENROLLMENT#c10"])
        first = table.get_item(Key={"PK": "COURSE#c10", "SK": "ENROLLMENT#STUDENT#s3"})["Item"]
        # The second enrolment is cancelled, both conditions failing, and
        # changes nothing.
        with self.assertRaises(ClientError) as cm:
            enroll_low("s3", "c10", "typed")
        err = cm.exception.response
        self.assertEqual(err["Error"]["Code"], "TransactionCanceledException")
        self.assertEqual([r["Code"] for r in err["CancellationReasons"]],
                         ["ConditionalCheckFailed", "ConditionalCheckFailed"])
        self.assertEqual(err["Error"]["Message"],
                         "Transaction cancelled, please refer cancellation reasons for specific "
                         "reasons [ConditionalCheckFailed, ConditionalCheckFailed]")
        self.assertEqual(table.get_item(
            Key={"PK": "COURSE#c10", "SK": "ENROLLMENT#STUDENT#s3"})["Item"], first)
        # Plain Python values on the resource's client enrol too.
        enroll_low("s4", "c20", "plain")
        self.assertEqual([i["SK"] for i in get_student_courses("s4")], ["ENROLLMENT#c20"])
        want = ["STUDENT#s1", "STUDENT#s1", "STUDENT#s2", "STUDENT#s2", "STUDENT#s3",
                "STUDENT#s3"]
        deadline = time.monotonic() + 15  # indexes are asynchronous: poll
        while True:
            students = get_course_students("c10")
            got = sorted(i["GSI1SK"] for i in students)
            if got == want or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(got, want)

    CLI_QUERIES = [
        ("AP3", ["--index-name", "GSI1", "--key-condition-expression",
                 "GSI1PK = :pk AND begins_with(GSI1SK, :prefix)",
                 "--expression-attribute-values",
                 '{":pk":{"S":"COURSE#c10"}, ":prefix":{"S":"STUDENT#"}}']),
        ("AP4", ["--index-name", "GSI1", "--key-condition-expression",
                 "GSI1PK = :pk AND begins_with(GSI1SK, :prefix)",
                 "--expression-attribute-values",
                 '{":pk":{"S":"INSTRUCTOR#i5"}, ":prefix":{"S":"COURSE#"}}']),
        ("AP7", ["--key-condition-expression", "PK = :pk AND begins_with(SK, :prefix)",
                 "--expression-attribute-values",
                 '{\n":pk":{"S":"COURSE#c10"},\n":prefix":{"S":"MODULE#m1#LESSON#"}\n}']),
    ]

    def test_aws_cli_queries(self):
        env = dict(os.environ)
        for name, args in self.CLI_QUERIES:
            with self.subTest(name):
                def run_aws():
                    return subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb", "query",
                                           "--table-name", "edtech-platform",
                                           "--output", "json"] + args,
                                          capture_output=True, text=True, env=env, timeout=60)

                def run_shoal():
                    return subprocess.run([SHOAL, "--endpoint", NATIVE, "query",
                                           "--table-name", "edtech-platform"] + args,
                                          capture_output=True, text=True, timeout=60)
                # GSIs are eventually consistent: poll until both clients
                # see the same non-empty answer, or the deadline passes.
                deadline = time.monotonic() + 15
                while True:
                    aws, sh = run_aws(), run_shoal()
                    self.assertEqual(aws.returncode, 0, aws.stderr)
                    self.assertEqual(sh.returncode, 0, sh.stderr)
                    a, b = json.loads(aws.stdout), json.loads(sh.stdout)
                    if (a["Items"] == b["Items"] and a["Count"] > 0) or \
                            time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                self.assertGreater(a["Count"], 0)
                self.assertEqual(a["Items"], b["Items"])
                self.assertEqual(a["Count"], b["Count"])
                self.assertGreater(a["Count"], 0)

    def test_aws_cli_other_commands(self):
        r = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb", "get-item",
                            "--table-name", "edtech-platform", "--key",
                            '{"PK":{"S":"STUDENT#s1"},"SK":{"S":"PROFILE"}}', "--output", "json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["Item"]["name"], {"S": "Ana Souza"})
        r = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb", "put-item",
                            "--table-name", "edtech-platform", "--item",
                            '{"PK":{"S":"STUDENT#s1"},"SK":{"S":"PROFILE"}}',
                            "--condition-expression", "attribute_not_exists(PK)"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 254)
        self.assertIn("An error occurred (ConditionalCheckFailedException) when calling the "
                      "PutItem operation: The conditional request failed", r.stderr)
        r = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb", "scan",
                            "--table-name", "edtech-platform", "--page-size", "4",
                            "--output", "json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(json.loads(r.stdout)["Count"], 15)


# ---------------------------------------------------------------------------
# SigV4: a second router on the same cluster with --http-credentials.
# ---------------------------------------------------------------------------

class SigV4(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = BASE + 71
        creds = os.path.join(DIR, "http.creds")
        with open(creds, "w") as f:
            f.write("# key id, secret\nAKIDSHOAL s3cr3t/key\nx y\n")
        cls.log = open(os.path.join(DIR, "sigv4-router.log"), "ab")
        cls.proc = subprocess.Popen(
            [os.path.join(BIN, "shoal-router"), "--config", os.path.join(DIR, "cluster.ini"),
             "--listen", "tcp://127.0.0.1:%d" % (BASE + 70), "--workers", "8",
             "--metrics", "127.0.0.1:%d" % (BASE + 72),
             "--http", "127.0.0.1:%d" % cls.port, "--http-credentials", creds],
            stdout=subprocess.PIPE, stderr=cls.log)
        with open(os.path.join(DIR, "sigv4-router.pid"), "w") as f:
            f.write(str(cls.proc.pid))
        line = cls.proc.stdout.readline()  # "ready" once listening
        if line.strip() != b"ready":
            raise RuntimeError("the SigV4 router did not start: %r" % line)
        cls.url = "http://127.0.0.1:%d" % cls.port

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.kill()  # by PID; test_zz_stop normally stopped it
            cls.proc.wait()
        os.unlink(os.path.join(DIR, "sigv4-router.pid"))
        cls.log.close()

    def test_zz_stop(self):
        """SIGTERM stops the router promptly even with requests half sent."""
        held = []
        for part in (b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-",
                     b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"):
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            s.sendall(part)
            held.append(s)
        self.assertIn("TableNames", self.cli("AKIDSHOAL", "s3cr3t/key").list_tables())
        t0 = time.monotonic()
        self.proc.terminate()  # by PID
        self.assertEqual(self.proc.wait(timeout=20), 0)
        self.assertLess(time.monotonic() - t0, 10)
        for s in held:
            s.close()

    def cli(self, key, secret, **kw):
        return boto3.client("dynamodb", endpoint_url=self.url, region_name="eu-west-1",
                            aws_access_key_id=key, aws_secret_access_key=secret,
                            config=kw.get("config", CFG))

    def code(self, c):
        with self.assertRaises(ClientError) as cm:
            c.list_tables()
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        return cm.exception.response["Error"]["Code"], cm.exception.response["Error"]["Message"]

    def test_verified(self):
        c = self.cli("AKIDSHOAL", "s3cr3t/key")
        self.assertIn("TableNames", c.list_tables())
        t = new_table(c, hash_only=True)
        c.put_item(TableName=t, Item={"pk": {"S": "signed"}, "v": {"S": "é€😀"}})
        self.assertEqual(c.get_item(TableName=t, Key={"pk": {"S": "signed"}})["Item"]["v"],
                         {"S": "é€😀"})
        self.assertIn("TableNames", self.cli("x", "y").list_tables())
        code, msg = self.code(self.cli("AKIDSHOAL", "wrong"))
        self.assertEqual(code, "InvalidSignatureException")
        self.assertTrue(msg.startswith("The request signature we calculated does not match "
                                       "the signature you provided."), msg)
        code, msg = self.code(self.cli("NOBODY", "s3cr3t/key"))
        self.assertEqual((code, msg), ("UnrecognizedClientException",
                                       "The security token included in the request is invalid."))
        unsigned = self.cli("x", "y", config=Config(signature_version=botocore.UNSIGNED,
                                                   retries={"max_attempts": 1}))
        code, msg = self.code(unsigned)
        self.assertEqual(code, "MissingAuthenticationTokenException")
        # The AWS CLI too.
        env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDSHOAL", AWS_SECRET_ACCESS_KEY="s3cr3t/key")
        r = subprocess.run([AWS, "--endpoint-url", self.url, "dynamodb", "list-tables",
                            "--output", "json"], capture_output=True, text=True, env=env,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        env["AWS_SECRET_ACCESS_KEY"] = "bad"
        r = subprocess.run([AWS, "--endpoint-url", self.url, "dynamodb", "list-tables"],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 254)
        self.assertIn("InvalidSignatureException", r.stderr)

    def test_skew_and_tampering(self):
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        from unittest import mock
        import datetime as dt

        def send(body, when=None, tamper=None):
            req = AWSRequest(method="POST", url=self.url + "/", data=body, headers={
                "X-Amz-Target": "DynamoDB_20120810.ListTables",
                "Content-Type": "application/x-amz-json-1.0"})
            auth = SigV4Auth(Credentials("AKIDSHOAL", "s3cr3t/key"), "dynamodb", "us-east-1")
            if when is None:
                auth.add_auth(req)
            else:
                with mock.patch("botocore.auth.datetime") as d:
                    d.datetime.utcnow.return_value = when
                    auth.add_auth(req)
            headers = dict(req.headers)
            if tamper:
                body = tamper
            msg = b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % self.port
            for k, v in headers.items():
                msg += ("%s: %s\r\n" % (k, v)).encode()
            msg += b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            try:
                s.sendall(msg)
                buf = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
            finally:
                s.close()
            head, payload = buf.split(b"\r\n\r\n", 1)
            return int(head.split()[1]), json.loads(payload)

        st, j = send(b"{}")
        self.assertEqual(st, 200, j)
        st, j = send(b"{}", tamper=b'{"Limit":1}')
        self.assertEqual((st, j["__type"].split("#")[1]), (400, "InvalidSignatureException"))
        old = dt.datetime.utcnow() - dt.timedelta(minutes=20)
        st, j = send(b"{}", when=old)
        self.assertEqual((st, j["__type"].split("#")[1]), (400, "InvalidSignatureException"))
        self.assertIn("Signature expired", j["message"])
        st, j = send(b"{}", when=dt.datetime.utcnow() - dt.timedelta(minutes=10))
        self.assertEqual(st, 200, j)


# Transactions: their own module, run as part of this suite.
from test_txn import Transactions  # noqa: E402,F401
# PROVISIONED tables, billing modes, OnDemandThroughput: likewise.
from test_provisioned import Provisioned  # noqa: E402,F401
# The legacy conditional parameters, legacy and expression forms side by side.
from test_legacy import Legacy  # noqa: E402,F401
# Time to Live: the operations, and expiry with indexes.
from test_ttl import TimeToLive  # noqa: E402,F401
# Tags, deletion protection, ids and ARNs, limits, endpoints, CORS; and the
# restart of every process (its class sorts last).
from test_smallops import SmallOps, WholeClusterRestart  # noqa: E402,F401
# DynamoDB Streams.
from test_streams import Streams  # noqa: E402,F401

if __name__ == "__main__":
    # boto3 clients keep their pooled connections open until collected.
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main(verbosity=2, warnings="ignore")
