"""PROVISIONED tables through DynamoDB's own clients (boto3, the AWS CLI) and
the `shoal` CLI: CreateTable with table and GSI throughput, DescribeTable,
UpdateTable up and down (LastIncreaseDateTime, LastDecreaseDateTime,
NumberOfDecreasesToday, the day's decrease budget), switches between
PROVISIONED and PAY_PER_REQUEST (BillingModeSummary), OnDemandThroughput, and
DynamoDB's validation errors for each.

Debian's botocore (1.29) and AWS CLI (2.9) predate OnDemandThroughput: they
refuse it in requests and drop it from responses, so what involves it goes
as DynamoDB JSON over HTTP (api()), and through the `shoal` CLI.

Imported by test_http.py (run.sh starts the cluster); the environment is
test_http's.
"""
import datetime as dt
import json
import os
import subprocess
import time
import unittest
import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from sigv4 import HOST, PORT, auth_headers, http_connection

ENDPOINT = os.environ["SHOAL_HTTP_ENDPOINT"]
DIR = os.environ["SHOAL_CLUSTER_DIR"]
BIN = os.environ["SHOAL_BIN"]
AWS = "/usr/bin/aws"
SHOAL = os.path.join(BIN, "shoal")
NATIVE = "file://" + os.path.join(DIR, "router.endpoint")
CFG = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=30)
INVALID = "One or more parameter values were invalid: "


def client():
    return boto3.client("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1", config=CFG)


def api(op, body):
    """DynamoDB JSON over HTTP: (status, decoded body)."""
    conn = http_connection(30)
    try:
        data = json.dumps(body)
        headers = {"X-Amz-Target": "DynamoDB_20120810." + op,
                   "Content-Type": "application/x-amz-json-1.0"}
        headers.update(auth_headers("%s:%d" % (HOST, PORT), data, headers))
        conn.request("POST", "/", data, headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def pt(r, w):
    return {"ReadCapacityUnits": r, "WriteCapacityUnits": w}


def will_not_change(r, w, index=None):
    if index is None:
        return ("The provisioned throughput for the table will not change. The requested value "
                "equals the current value. Current ReadCapacityUnits provisioned for the table: "
                "%d. Requested ReadCapacityUnits: %d. Current WriteCapacityUnits provisioned for "
                "the table: %d. Requested WriteCapacityUnits: %d. Refer to the Amazon DynamoDB "
                "Developer Guide for current limits and how to request higher limits."
                % (r, r, w, w))
    return ("The provisioned throughput for the index %s will not change. The requested value "
            "equals the current value. Current ReadCapacityUnits provisioned for index %s: %d. "
            "Requested ReadCapacityUnits: %d. Current WriteCapacityUnits provisioned for index "
            "%s: %d. Requested WriteCapacityUnits: %d. Refer to the Amazon DynamoDB Developer "
            "Guide for current limits and how to request higher limits."
            % (index, index, r, r, index, w, w))


class Provisioned(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()

    def create(self, billing="PROVISIONED", table_pt=pt(5, 5), gsi_pt=pt(3, 3), **kw):
        name = "pv-" + uuid.uuid4().hex[:10]
        gsi = {"IndexName": "byG", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
               "Projection": {"ProjectionType": "KEYS_ONLY"}}
        if gsi_pt is not None:
            gsi["ProvisionedThroughput"] = gsi_pt
        if "gsi_odt" in kw:
            gsi["OnDemandThroughput"] = kw.pop("gsi_odt")
        args = dict(TableName=name, BillingMode=billing,
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                          {"AttributeName": "g", "AttributeType": "S"}],
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                    GlobalSecondaryIndexes=[gsi], **kw)
        if table_pt is not None:
            args["ProvisionedThroughput"] = table_pt
        if "OnDemandThroughput" in args or "OnDemandThroughput" in gsi:
            st, r = api("CreateTable", args)
            self.assertEqual(st, 200, r)
        else:
            r = self.c.create_table(**args)
        self.c.get_waiter("table_exists").wait(TableName=name,
                                               WaiterConfig={"Delay": 1, "MaxAttempts": 30})
        self.addCleanup(self.c.delete_table, TableName=name)
        return name, r["TableDescription"]

    def describe(self, name):
        return self.c.describe_table(TableName=name)["Table"]

    def describe_raw(self, name):
        """DescribeTable as JSON (with OnDemandThroughput; times as epoch seconds)."""
        st, r = api("DescribeTable", {"TableName": name})
        self.assertEqual(st, 200, r)
        return r["Table"]

    def api_error(self, code, message, op, body):
        st, r = api(op, body)
        self.assertEqual((st, r.get("__type", "").split("#")[-1], r.get("message")),
                         (400, code, message))

    def gsi(self, desc, name="byG"):
        return {g["IndexName"]: g for g in desc["GlobalSecondaryIndexes"]}[name]

    def assert_error(self, code, message, fn, **kw):
        with self.assertRaises(ClientError) as cm:
            fn(**kw)
        err = cm.exception.response["Error"]
        self.assertEqual((err["Code"], err["Message"]), (code, message))

    def assert_recent(self, when, before):
        """A boto3 datetime between `before` (time.time()) and now."""
        self.assertIsInstance(when, dt.datetime)
        self.assertGreaterEqual(when.timestamp(), before - 1)
        self.assertLessEqual(when.timestamp(), time.time() + 1)

    def test_create_and_describe(self):
        name, created = self.create()
        for d in (created, self.describe(name)):
            self.assertEqual(d["ProvisionedThroughput"],
                             {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 5,
                              "WriteCapacityUnits": 5})
            # DynamoDB describes a table created PROVISIONED without a summary.
            self.assertNotIn("BillingModeSummary", d)
            self.assertNotIn("OnDemandThroughput", d)
            g = self.gsi(d)
            self.assertEqual(g["ProvisionedThroughput"],
                             {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 3,
                              "WriteCapacityUnits": 3})
            self.assertNotIn("OnDemandThroughput", g)
        # The errors of CreateTable.
        c = self.c
        base = dict(TableName="pv-bad", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                          {"AttributeName": "g", "AttributeType": "S"}])
        gsi = {"IndexName": "byG", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
               "Projection": {"ProjectionType": "ALL"}}
        self.assert_error("ValidationException",
                          INVALID + "ProvisionedThroughput is not specified for index: byG",
                          c.create_table, BillingMode="PROVISIONED", ProvisionedThroughput=pt(1, 1),
                          GlobalSecondaryIndexes=[gsi], **base)
        self.assert_error("ValidationException",
                          INVALID + "ReadCapacityUnits and WriteCapacityUnits must both be "
                          "specified when BillingMode is PROVISIONED",
                          c.create_table, BillingMode="PROVISIONED",
                          GlobalSecondaryIndexes=[dict(gsi, ProvisionedThroughput=pt(1, 1))],
                          **base)
        self.assert_error("ValidationException",
                          INVALID + "Neither ReadCapacityUnits nor WriteCapacityUnits can be "
                          "specified when BillingMode is PAY_PER_REQUEST",
                          c.create_table, BillingMode="PAY_PER_REQUEST",
                          ProvisionedThroughput=pt(1, 1), GlobalSecondaryIndexes=[gsi], **base)
        self.api_error("ValidationException",
                       INVALID + "MaxReadRequestUnits for OnDemandThroughput cannot be "
                       "specified when table BillingMode is PROVISIONED.",
                       "CreateTable", dict(base, BillingMode="PROVISIONED",
                                           ProvisionedThroughput=pt(1, 1),
                                           OnDemandThroughput={"MaxReadRequestUnits": 10},
                                           GlobalSecondaryIndexes=[
                                               dict(gsi, ProvisionedThroughput=pt(1, 1))]))
        self.api_error("ValidationException",
                       INVALID + "Requested MaxWriteRequestUnits for OnDemandThroughput for "
                       "table is outside of valid range",
                       "CreateTable", dict(base, BillingMode="PAY_PER_REQUEST",
                                           OnDemandThroughput={"MaxWriteRequestUnits": -1},
                                           GlobalSecondaryIndexes=[gsi]))
        self.api_error("ValidationException",
                       INVALID + "MaxWriteRequestUnits for OnDemandThroughput for index : byG "
                       "cannot be specified when the table BillingMode is PROVISIONED",
                       "CreateTable", dict(base, BillingMode="PROVISIONED",
                                           ProvisionedThroughput=pt(1, 1),
                                           GlobalSecondaryIndexes=[
                                               dict(gsi, ProvisionedThroughput=pt(1, 1),
                                                    OnDemandThroughput={
                                                        "MaxWriteRequestUnits": 5})]))
        # (botocore refuses 0 itself; the service's answer over HTTP)
        self.api_error("ValidationException",
                       "1 validation error detected: Value '0' at "
                       "'provisionedThroughput.readCapacityUnits' failed to satisfy "
                       "constraint: Member must have value greater than or equal to 1",
                       "CreateTable", dict(base, BillingMode="PROVISIONED",
                                           ProvisionedThroughput=pt(0, 1),
                                           GlobalSecondaryIndexes=[
                                               dict(gsi, ProvisionedThroughput=pt(1, 1))]))
        with self.assertRaises(c.exceptions.ResourceNotFoundException):
            c.describe_table(TableName="pv-bad")

    def test_update_up_and_down(self):
        name, _ = self.create()
        c = self.c
        before = time.time()
        r = c.update_table(TableName=name, ProvisionedThroughput=pt(10, 5))
        self.assertEqual(r["TableDescription"]["ProvisionedThroughput"]["ReadCapacityUnits"], 10)
        d = self.describe(name)
        p = d["ProvisionedThroughput"]
        self.assertEqual((p["ReadCapacityUnits"], p["WriteCapacityUnits"]), (10, 5))
        self.assert_recent(p["LastIncreaseDateTime"], before)
        self.assertNotIn("LastDecreaseDateTime", p)
        self.assertEqual(p["NumberOfDecreasesToday"], 0)

        before = time.time()
        c.update_table(TableName=name, ProvisionedThroughput=pt(4, 5))
        p = self.describe(name)["ProvisionedThroughput"]
        self.assertEqual((p["ReadCapacityUnits"], p["NumberOfDecreasesToday"]), (4, 1))
        self.assert_recent(p["LastDecreaseDateTime"], before)

        # The same values again: DynamoDB's "will not change".
        self.assert_error("ValidationException", will_not_change(4, 5),
                          c.update_table, TableName=name, ProvisionedThroughput=pt(4, 5))
        self.assert_error("ValidationException", will_not_change(4, 5),
                          c.update_table, TableName=name, BillingMode="PROVISIONED",
                          ProvisionedThroughput=pt(4, 5))
        self.assert_error("ValidationException",
                          INVALID + "ProvisionedThroughput must be specified when BillingMode "
                          "is PROVISIONED",
                          c.update_table, TableName=name, BillingMode="PROVISIONED")

        # A GSI: up in reads, down in writes; its own counter.
        before = time.time()
        c.update_table(TableName=name, GlobalSecondaryIndexUpdates=[
            {"Update": {"IndexName": "byG", "ProvisionedThroughput": pt(6, 2)}}])
        d = self.describe(name)
        g = self.gsi(d)["ProvisionedThroughput"]
        self.assertEqual((g["ReadCapacityUnits"], g["WriteCapacityUnits"],
                          g["NumberOfDecreasesToday"]), (6, 2, 1))
        self.assert_recent(g["LastIncreaseDateTime"], before)
        self.assert_recent(g["LastDecreaseDateTime"], before)
        self.assertEqual(d["ProvisionedThroughput"]["NumberOfDecreasesToday"], 1)
        self.assert_error("ValidationException", will_not_change(6, 2, "byG"),
                          c.update_table, TableName=name, GlobalSecondaryIndexUpdates=[
                              {"Update": {"IndexName": "byG", "ProvisionedThroughput": pt(6, 2)}}])
        self.assert_error("ResourceNotFoundException",
                          "Requested resource not found: Index: nope not found",
                          c.update_table, TableName=name, GlobalSecondaryIndexUpdates=[
                              {"Update": {"IndexName": "nope", "ProvisionedThroughput": pt(6, 2)}}])
        self.api_error("ValidationException",
                       INVALID + "MaxReadRequestUnits for OnDemandThroughput cannot be "
                       "specified when the table BillingMode is PROVISIONED",
                       "UpdateTable", {"TableName": name,
                                       "OnDemandThroughput": {"MaxReadRequestUnits": 100}})
        self.api_error("ValidationException",
                       INVALID + "MaxReadRequestUnits for OnDemandThroughput for index : byG "
                       "cannot be specified when the table BillingMode is PROVISIONED",
                       "UpdateTable", {"TableName": name, "GlobalSecondaryIndexUpdates": [
                           {"Update": {"IndexName": "byG",
                                       "OnDemandThroughput": {"MaxReadRequestUnits": 1}}}]})

        # Decreases: 4 a UTC day, then one an hour.  Three more make four.
        for r_units in (3, 2, 1):
            c.update_table(TableName=name, ProvisionedThroughput=pt(r_units, 5))
        p = self.describe(name)["ProvisionedThroughput"]
        if p["NumberOfDecreasesToday"] != 4:
            self.skipTest("a UTC day ended during the test")
        with self.assertRaises(ClientError) as cm:
            c.update_table(TableName=name, ProvisionedThroughput=pt(1, 4))
        err = cm.exception.response["Error"]
        self.assertEqual(err["Code"], "LimitExceededException")
        self.assertRegex(
            err["Message"],
            r"^Subscriber limit exceeded: Provisioned throughput decreases are limited within a "
            r"given UTC day\. After the first 4 decreases, each subsequent decrease in the same "
            r"UTC day can be performed at most once every 3600 seconds\. Number of decreases "
            r"today: 4\. Last decrease at \w+day, \w+ \d+, \d{4} at \d+:\d\d:\d\d [AP]M "
            r"Coordinated Universal Time\. Next decrease can be made at \w+day, \w+ \d+, \d{4} at "
            r"\d+:\d\d:\d\d [AP]M Coordinated Universal Time\.$")
        # Nothing changed; an increase is still allowed.
        self.assertEqual(self.describe(name)["ProvisionedThroughput"]["WriteCapacityUnits"], 5)
        c.update_table(TableName=name, ProvisionedThroughput=pt(1, 6))
        self.assertEqual(self.describe(name)["ProvisionedThroughput"]["WriteCapacityUnits"], 6)

    def test_switch_billing_mode(self):
        name, _ = self.create()
        c = self.c
        before = time.time()
        r = c.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")
        for d in (r["TableDescription"], self.describe(name)):
            self.assertEqual(d["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
            self.assert_recent(d["BillingModeSummary"]["LastUpdateToPayPerRequestDateTime"],
                               before)
            self.assertEqual(d["ProvisionedThroughput"],
                             {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 0,
                              "WriteCapacityUnits": 0})
            g = self.gsi(d)
            self.assertEqual((g["ProvisionedThroughput"]["ReadCapacityUnits"],
                              g["ProvisionedThroughput"]["WriteCapacityUnits"]), (0, 0))
        d = self.describe_raw(name)
        self.assertEqual(d["OnDemandThroughput"],
                         {"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": -1})
        self.assertEqual(self.gsi(d)["OnDemandThroughput"],
                         {"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": -1})
        switched = self.describe(name)["BillingModeSummary"]["LastUpdateToPayPerRequestDateTime"]
        # Re-sending PAY_PER_REQUEST is accepted.
        c.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")

        # Throughput on a PAY_PER_REQUEST table.
        self.assert_error("ValidationException",
                          INVALID + "Neither ReadCapacityUnits nor WriteCapacityUnits can be "
                          "specified when BillingMode is PAY_PER_REQUEST",
                          c.update_table, TableName=name, ProvisionedThroughput=pt(5, 5))
        self.assert_error("ValidationException",
                          INVALID + "The only Updates for index: byG when TableThroughputMode is "
                          "PAY_PER_REQUEST can be to OnDemandThroughput, WarmThroughput",
                          c.update_table, TableName=name, GlobalSecondaryIndexUpdates=[
                              {"Update": {"IndexName": "byG", "ProvisionedThroughput": pt(1, 1)}}])
        # Back to PROVISIONED: every GSI needs its throughput.
        self.assert_error("ValidationException",
                          INVALID + "ProvisionedThroughput must be specified for index: byG",
                          c.update_table, TableName=name, BillingMode="PROVISIONED",
                          ProvisionedThroughput=pt(7, 8))
        r = c.update_table(TableName=name, BillingMode="PROVISIONED",
                           ProvisionedThroughput=pt(7, 8), GlobalSecondaryIndexUpdates=[
                               {"Update": {"IndexName": "byG",
                                           "ProvisionedThroughput": pt(2, 9)}}])
        for d in (r["TableDescription"], self.describe(name)):
            self.assertEqual(d["BillingModeSummary"],
                             {"BillingMode": "PROVISIONED",
                              "LastUpdateToPayPerRequestDateTime": switched})
            self.assertEqual((d["ProvisionedThroughput"]["ReadCapacityUnits"],
                              d["ProvisionedThroughput"]["WriteCapacityUnits"]), (7, 8))
            g = self.gsi(d)
            self.assertEqual((g["ProvisionedThroughput"]["ReadCapacityUnits"],
                              g["ProvisionedThroughput"]["WriteCapacityUnits"]), (2, 9))
        d = self.describe_raw(name)
        self.assertNotIn("OnDemandThroughput", d)
        self.assertNotIn("OnDemandThroughput", self.gsi(d))

    def test_on_demand_throughput(self):
        name, created = self.create(billing="PAY_PER_REQUEST", table_pt=None, gsi_pt=None,
                                    OnDemandThroughput={"MaxReadRequestUnits": 100},
                                    gsi_odt={"MaxWriteRequestUnits": 40})
        c = self.c
        for d in (created, self.describe_raw(name)):
            self.assertEqual(d["OnDemandThroughput"],
                             {"MaxReadRequestUnits": 100, "MaxWriteRequestUnits": -1})
            self.assertEqual(self.gsi(d)["OnDemandThroughput"],
                             {"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": 40})
            self.assertEqual(d["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
            # LastUpdateToPayPerRequestDateTime of a table created on demand: its creation.
            self.assertEqual(d["BillingModeSummary"]["LastUpdateToPayPerRequestDateTime"],
                             d["CreationDateTime"])
        # Set the write maximum, remove the read one (-1), change the GSI's.
        st, r = api("UpdateTable", {
            "TableName": name,
            "OnDemandThroughput": {"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": 50},
            "GlobalSecondaryIndexUpdates": [{"Update": {
                "IndexName": "byG", "OnDemandThroughput": {"MaxReadRequestUnits": 7}}}]})
        self.assertEqual(st, 200, r)
        self.assertEqual(r["TableDescription"]["OnDemandThroughput"],
                         {"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": 50})
        d = self.describe_raw(name)
        self.assertEqual(d["OnDemandThroughput"],
                         {"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": 50})
        self.assertEqual(self.gsi(d)["OnDemandThroughput"],
                         {"MaxReadRequestUnits": 7, "MaxWriteRequestUnits": 40})
        self.api_error("ValidationException",
                       INVALID + "Requested MaxReadRequestUnits for OnDemandThroughput for "
                       "table is outside of valid range",
                       "UpdateTable", {"TableName": name,
                                       "OnDemandThroughput": {"MaxReadRequestUnits": 0}})
        self.api_error("ValidationException",
                       INVALID + "Requested MaxWriteRequestUnits for OnDemandThroughput for "
                       "index : byG is outside of valid range",
                       "UpdateTable", {"TableName": name, "GlobalSecondaryIndexUpdates": [
                           {"Update": {"IndexName": "byG", "OnDemandThroughput": {
                               "MaxWriteRequestUnits": -5}}}]})
        # Switching to PROVISIONED drops the maximums.
        c.update_table(TableName=name, BillingMode="PROVISIONED", ProvisionedThroughput=pt(1, 1),
                       GlobalSecondaryIndexUpdates=[{"Update": {
                           "IndexName": "byG", "ProvisionedThroughput": pt(1, 1)}}])
        d = self.describe_raw(name)
        self.assertNotIn("OnDemandThroughput", d)
        self.assertNotIn("OnDemandThroughput", self.gsi(d))
        c.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")
        self.assertEqual(self.describe_raw(name)["OnDemandThroughput"],
                         {"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": -1})

    def test_clis(self):
        """The AWS CLI and the `shoal` CLI take and show the same fields."""
        name, _ = self.create()
        r = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb", "update-table",
                            "--table-name", name, "--provisioned-throughput",
                            "ReadCapacityUnits=9,WriteCapacityUnits=5"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb", "describe-table",
                            "--table-name", name, "--output", "json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        p = json.loads(r.stdout)["Table"]["ProvisionedThroughput"]
        self.assertEqual((p["ReadCapacityUnits"], p["WriteCapacityUnits"]), (9, 5))
        self.assertIn("LastIncreaseDateTime", p)
        r = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb", "update-table",
                            "--table-name", name, "--provisioned-throughput",
                            "ReadCapacityUnits=9,WriteCapacityUnits=5"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("(ValidationException) when calling the UpdateTable operation: "
                      + will_not_change(9, 5), r.stderr)

        # shoal: switch to on-demand with a maximum, then describe.
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "update-table", "--table-name", name,
                            "--billing-mode", "PAY_PER_REQUEST", "--on-demand-throughput",
                            "MaxReadRequestUnits=30"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "describe-table", "--table-name", name],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        t = json.loads(r.stdout)["Table"]
        self.assertEqual(t["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
        self.assertIn("LastUpdateToPayPerRequestDateTime", t["BillingModeSummary"])
        self.assertEqual(t["OnDemandThroughput"],
                         {"MaxReadRequestUnits": 30, "MaxWriteRequestUnits": -1})
        self.assertEqual(t["ProvisionedThroughput"]["ReadCapacityUnits"], 0)
        # And shoal create-table with throughput.
        other = "pv-" + uuid.uuid4().hex[:10]
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "create-table", "--table-name", other,
                            "--attribute-definitions", "AttributeName=pk,AttributeType=S",
                            "--key-schema", "AttributeName=pk,KeyType=HASH",
                            "--billing-mode", "PROVISIONED", "--provisioned-throughput",
                            "ReadCapacityUnits=2,WriteCapacityUnits=3"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.c.delete_table, TableName=other)
        p = self.describe(other)["ProvisionedThroughput"]
        self.assertEqual((p["ReadCapacityUnits"], p["WriteCapacityUnits"]), (2, 3))
