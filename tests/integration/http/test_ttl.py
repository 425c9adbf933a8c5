"""Time to Live through boto3, the AWS CLI and the shoal CLI:
UpdateTimeToLive / DescribeTimeToLive (shapes and errors), and expiry:
items whose TTL attribute is a Number of epoch seconds in the past are
deleted by each partition's leader (and leave the GSI and the LSI), items
with a future, String or far-past TTL stay, and an item whose TTL an update
moved into the future before it expired stays.  run.sh starts the cluster
with ttl_scan_ms = 500.  Imported by test_http.py (run.sh's environment).
"""
import configparser
import http.client
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
ROOT = os.environ["SHOAL_ROOT"]
AWS = "/usr/bin/aws"
SHOAL = os.path.join(BIN, "shoal")
NATIVE = "file://" + os.path.join(DIR, "router.endpoint")
CFG = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30)
# Generous: the scan runs every 500 ms; the point is "gone", not how fast.
DEADLINE_S = 60


def client():
    return boto3.client("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1", config=CFG)


def create(c):
    name = "ttl-" + uuid.uuid4().hex[:12]
    c.create_table(TableName=name,
                   AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                         {"AttributeName": "sk", "AttributeType": "S"},
                                         {"AttributeName": "g", "AttributeType": "S"}],
                   KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                              {"AttributeName": "sk", "KeyType": "RANGE"}],
                   GlobalSecondaryIndexes=[{"IndexName": "by-g",
                                            "KeySchema": [{"AttributeName": "g",
                                                           "KeyType": "HASH"}],
                                            "Projection": {"ProjectionType": "KEYS_ONLY"}}],
                   LocalSecondaryIndexes=[{"IndexName": "by-g-local",
                                           "KeySchema": [{"AttributeName": "pk",
                                                          "KeyType": "HASH"},
                                                         {"AttributeName": "g",
                                                          "KeyType": "RANGE"}],
                                           "Projection": {"ProjectionType": "ALL"}}],
                   BillingMode="PAY_PER_REQUEST")
    return name


INTERVAL_S = int(os.environ.get("SHOAL_TTL_CHANGE_INTERVAL_MS", "3600000")) / 1000.0
INTERVAL_MSG = "Time to live has been modified multiple times within a fixed interval"


def update_ttl(c, name, enabled, attr):
    """UpdateTimeToLive, again while it is refused for the change interval
    (run.sh makes it 1.5 s), up to a deadline."""
    deadline = time.monotonic() + INTERVAL_S + 10
    while True:
        try:
            return c.update_time_to_live(TableName=name, TimeToLiveSpecification={
                "Enabled": enabled, "AttributeName": attr})
        except ClientError as e:
            if (e.response["Error"]["Message"] != INTERVAL_MSG
                    or time.monotonic() > deadline):
                raise
            time.sleep(0.05)


def api(op, body):
    """DynamoDB JSON over HTTP, for requests boto3 refuses to send
    (missing members): (status, decoded body)."""
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


def ttl_metrics():
    """The sum over the nodes of shoal_ttl_expired_total and
    shoal_ttl_passes_total (their metrics endpoints, from cluster.ini)."""
    conf = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    conf.read(os.path.join(DIR, "cluster.ini"))
    total = {"shoal_ttl_expired_total": 0, "shoal_ttl_passes_total": 0}
    for sec in conf.sections():
        if not sec.startswith("node.") or "metrics" not in conf[sec]:
            continue
        host, port = conf[sec]["metrics"].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        for line in text.splitlines():
            name = line.split("{", 1)[0]
            if name in total:
                total[name] += int(float(line.rsplit(" ", 1)[1]))
    return total


class TimeToLive(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()

    def err(self, fn, code, msg=None, **kw):
        with self.assertRaises(ClientError) as cm:
            fn(**kw)
        e = cm.exception.response["Error"]
        self.assertEqual(e["Code"], code, e)
        if msg is not None:
            self.assertEqual(e["Message"], msg)

    def api_err(self, op, body, code, msg):
        status, got = api(op, body)
        self.assertEqual(status, 400, got)
        self.assertTrue(got.get("__type", "").endswith("#" + code), got)
        self.assertEqual(got.get("message", got.get("Message")), msg)

    def test_update_and_describe(self):
        c = self.c
        name = create(c)
        self.assertEqual(c.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                         {"TimeToLiveStatus": "DISABLED"})
        self.err(c.update_time_to_live, "ValidationException", "TimeToLive is already disabled",
                 TableName=name, TimeToLiveSpecification={"Enabled": False, "AttributeName": "e"})
        r = c.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "exp"})
        self.assertEqual(r["TimeToLiveSpecification"], {"Enabled": True, "AttributeName": "exp"})
        self.assertEqual(c.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                         {"TimeToLiveStatus": "ENABLED", "AttributeName": "exp"})
        for attr in ("exp", "other"):
            self.err(c.update_time_to_live, "ValidationException",
                     "TimeToLive is already enabled", TableName=name,
                     TimeToLiveSpecification={"Enabled": True, "AttributeName": attr})
        self.err(c.update_time_to_live, "ValidationException",
                 "TimeToLive is active on a different AttributeName: current AttributeName is exp",
                 TableName=name, TimeToLiveSpecification={"Enabled": False,
                                                          "AttributeName": "other"})
        # A second change within the interval: DynamoDB's refusal, and
        # nothing changed.
        t_changed = time.monotonic()
        self.err(c.update_time_to_live, "ValidationException", INTERVAL_MSG,
                 TableName=name, TimeToLiveSpecification={"Enabled": False,
                                                          "AttributeName": "exp"})
        self.assertEqual(c.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                         {"TimeToLiveStatus": "ENABLED", "AttributeName": "exp"})
        r = update_ttl(c, name, False, "exp")
        self.assertGreaterEqual(time.monotonic() - t_changed, INTERVAL_S * 0.5)
        self.assertEqual(r["TimeToLiveSpecification"], {"Enabled": False, "AttributeName": "exp"})
        # UpdateTimeToLive waited for every data group, so the change is in
        # force on every partition leader already: DISABLED, not DISABLING.
        self.assertEqual(c.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                         {"TimeToLiveStatus": "DISABLED"})
        # Enabled again, on another attribute.
        update_ttl(c, name, True, "exp2")
        self.assertEqual(c.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                         {"TimeToLiveStatus": "ENABLED", "AttributeName": "exp2"})
        # DescribeTable is unchanged by it; the table goes away with its setting.
        self.assertEqual(c.describe_table(TableName=name)["Table"]["TableStatus"], "ACTIVE")
        c.delete_table(TableName=name)
        self.err(c.describe_time_to_live, "ResourceNotFoundException", TableName=name)

    def test_errors(self):
        c = self.c
        missing = "ttl-missing-" + uuid.uuid4().hex[:8]
        self.err(c.update_time_to_live, "ResourceNotFoundException",
                 "Requested resource not found: Table: %s not found" % missing,
                 TableName=missing, TimeToLiveSpecification={"Enabled": True,
                                                             "AttributeName": "exp"})
        self.err(c.describe_time_to_live, "ResourceNotFoundException",
                 "Requested resource not found: Table: %s not found" % missing,
                 TableName=missing)
        name = create(c)
        self.api_err("UpdateTimeToLive", {"TableName": name}, "ValidationException",
                     "1 validation error detected: Value null at 'timeToLiveSpecification' "
                     "failed to satisfy constraint: Member must not be null")
        self.api_err("UpdateTimeToLive", {"TableName": name, "TimeToLiveSpecification": {}},
                     "ValidationException",
                     "2 validation errors detected: Value null at "
                     "'timeToLiveSpecification.enabled' failed to satisfy constraint: Member "
                     "must not be null; Value null at 'timeToLiveSpecification.attributeName' "
                     "failed to satisfy constraint: Member must not be null")
        self.api_err("UpdateTimeToLive", {"TableName": name, "TimeToLiveSpecification": {
            "Enabled": True, "AttributeName": ""}}, "ValidationException",
            "TimeToLiveSpecification.AttributeName must be non empty")
        long_name = "a" * 256
        self.api_err("UpdateTimeToLive", {"TableName": name, "TimeToLiveSpecification": {
            "Enabled": True, "AttributeName": long_name}}, "ValidationException",
            "1 validation error detected: Value '%s' at "
            "'timeToLiveSpecification.attributeName' failed to satisfy constraint: Member "
            "must have length less than or equal to 255" % long_name)
        self.api_err("UpdateTimeToLive", {"TimeToLiveSpecification": {
            "Enabled": True, "AttributeName": "e"}}, "ValidationException",
            "The parameter 'TableName' is required but was not present in the request")
        self.api_err("DescribeTimeToLive", {"TableName": "ab"}, "ValidationException",
                     "TableName must be at least 3 characters long and at most 255 characters "
                     "long")
        status, got = api("UpdateTimeToLive", {"TableName": name, "TimeToLiveSpecification": {
            "Enabled": "maybe", "AttributeName": "e"}})
        self.assertEqual(status, 400, got)
        self.assertTrue(got["__type"].endswith("#SerializationException"), got)
        # None of these changed the setting.
        self.assertEqual(c.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                         {"TimeToLiveStatus": "DISABLED"})
        # 255 bytes is the limit, and is accepted.
        c.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "a" * 255})

    def cli(self, prog, *args):
        cmd = ([AWS, "--endpoint-url", ENDPOINT, "dynamodb"] if prog == "aws"
               else [SHOAL, "--endpoint", NATIVE])
        r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60)
        return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr

    def test_clis(self):
        for prog in ("aws", "shoal"):
            name = create(self.c)
            rc, out, err = self.cli(prog, "update-time-to-live", "--table-name", name,
                                    "--time-to-live-specification",
                                    "Enabled=true,AttributeName=ttl")
            self.assertEqual(rc, 0, err)
            self.assertEqual(out, {"TimeToLiveSpecification": {"Enabled": True,
                                                               "AttributeName": "ttl"}})
            rc, out, err = self.cli(prog, "describe-time-to-live", "--table-name", name)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out, {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED",
                                                             "AttributeName": "ttl"}})
            rc, out, err = self.cli(prog, "update-time-to-live", "--table-name", name,
                                    "--time-to-live-specification",
                                    "Enabled=true,AttributeName=ttl")
            self.assertNotEqual(rc, 0)
            self.assertIn("An error occurred (ValidationException) when calling the "
                          "UpdateTimeToLive operation: TimeToLive is already enabled", err)

    def test_stream_records(self):
        """A table's stream shows an expiry as a REMOVE whose userIdentity
        is the TTL service, as DynamoDB's does; a client's DeleteItem has
        none."""
        from test_streams import flat, read_all, streams
        c, s = self.c, streams()
        name = create(c)
        c.update_table(TableName=name, StreamSpecification={
            "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
        arn = c.describe_table(TableName=name)["Table"]["LatestStreamArn"]
        c.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "exp"})
        old = {"pk": {"S": "old"}, "sk": {"S": "a"}, "g": {"S": "x"},
               "exp": {"N": str(int(time.time()) - 100)}}
        mine = {"pk": {"S": "mine"}, "sk": {"S": "a"}, "g": {"S": "x"}}
        c.put_item(TableName=name, Item=old)
        c.put_item(TableName=name, Item=mine)
        c.delete_item(TableName=name, Key={"pk": mine["pk"], "sk": mine["sk"]})
        deadline = time.time() + DEADLINE_S
        while True:
            removes = [r for r in flat(read_all(s, arn)) if r["eventName"] == "REMOVE"]
            if len(removes) == 2 or time.time() > deadline:
                break
            time.sleep(0.2)  # polling the stream with a deadline
        by_pk = {r["dynamodb"]["Keys"]["pk"]["S"]: r for r in removes}
        self.assertEqual(sorted(by_pk), ["mine", "old"], removes)
        self.assertEqual(by_pk["old"].get("userIdentity"),
                         {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"})
        self.assertEqual(by_pk["old"]["dynamodb"]["OldImage"]["exp"], old["exp"])
        self.assertNotIn("userIdentity", by_pk["mine"])

    def test_expiry(self):
        c = self.c
        name = create(c)
        c.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "exp"})
        before = ttl_metrics()
        now = int(time.time())
        expires = now + 2  # in the future when written: a write is never "already late"
        g = "g-" + uuid.uuid4().hex[:8]
        doomed, kept = [], []
        for i in range(12):
            pk = "p%d" % i
            doomed.append({"pk": {"S": pk}, "sk": {"S": "a"}, "g": {"S": g},
                           "exp": {"N": str(expires)}})
            doomed.append({"pk": {"S": pk}, "sk": {"S": "b"}, "g": {"S": g + "b"},
                           "exp": {"N": "%d.5" % (now - 100)}})
            kept.append({"pk": {"S": pk}, "sk": {"S": "future"}, "g": {"S": g},
                         "exp": {"N": str(now + 3600)}})
            kept.append({"pk": {"S": pk}, "sk": {"S": "string"}, "g": {"S": g},
                         "exp": {"S": str(now - 100)}})
            kept.append({"pk": {"S": pk}, "sk": {"S": "ancient"}, "g": {"S": g},
                         "exp": {"N": str(now - 6 * 366 * 86400)}})
            kept.append({"pk": {"S": pk}, "sk": {"S": "none"}, "g": {"S": g}})
        moved = {"pk": {"S": "p0"}, "sk": {"S": "moved"}, "g": {"S": g},
                 "exp": {"N": str(expires)}}
        # Before it expires, an update moves `moved`'s TTL an hour ahead
        # (first: two requests, however slow the rest of the setup is).
        c.put_item(TableName=name, Item=moved)
        c.update_item(TableName=name, Key={"pk": moved["pk"], "sk": moved["sk"]},
                      UpdateExpression="SET exp = :e",
                      ExpressionAttributeValues={":e": {"N": str(now + 3600)}})
        self.assertLess(time.time(), expires, "the setup took too long to test `moved`")
        for it in doomed + kept:
            c.put_item(TableName=name, Item=it)
        kept.append(moved)

        def present(it):
            return "Item" in c.get_item(TableName=name, Key={"pk": it["pk"], "sk": it["sk"]},
                                        ConsistentRead=True)

        def gsi_keys(value):
            got, kw = set(), {}
            while True:
                r = c.query(TableName=name, IndexName="by-g",
                            KeyConditionExpression="g = :g",
                            ExpressionAttributeValues={":g": {"S": value}}, **kw)
                got |= {(i["pk"]["S"], i["sk"]["S"]) for i in r["Items"]}
                if "LastEvaluatedKey" not in r:
                    return got
                kw = {"ExclusiveStartKey": r["LastEvaluatedKey"]}

        # Gone from the table, the GSI (eventually) and the LSI.
        deadline = time.time() + DEADLINE_S
        gone_at, left = None, doomed
        while time.time() < deadline:
            left = [it for it in left if present(it)]
            if not left:
                gone_at = time.time()
                break
            time.sleep(0.05)
        self.assertIsNotNone(gone_at, "expired items still there after %d s: %s" % (
            DEADLINE_S, [it["pk"]["S"] + "/" + it["sk"]["S"] for it in left]))
        print("\nTTL: the last of %d expired items was gone %.1f s after it expired "
              "(ttl_scan_ms 500, %s)" % (len(doomed), gone_at - expires,
                                         time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
        # The leaders counted them (other tests' deletions may add to it).
        after = ttl_metrics()
        self.assertGreaterEqual(after["shoal_ttl_expired_total"] -
                                before["shoal_ttl_expired_total"], len(doomed))
        self.assertGreater(after["shoal_ttl_passes_total"], before["shoal_ttl_passes_total"])
        # The GSI converges to the survivors only.
        deadline = time.time() + DEADLINE_S
        want = {(it["pk"]["S"], it["sk"]["S"]) for it in kept}
        while time.time() < deadline and gsi_keys(g) != want:
            time.sleep(0.1)
        self.assertEqual(gsi_keys(g), want)
        self.assertEqual(gsi_keys(g + "b"), set())
        # The LSI (same transaction as the base item).
        r = c.query(TableName=name, IndexName="by-g-local", ConsistentRead=True,
                    KeyConditionExpression="pk = :p",
                    ExpressionAttributeValues={":p": {"S": "p1"}})
        self.assertEqual(sorted(i["sk"]["S"] for i in r["Items"]),
                         ["ancient", "future", "none", "string"])
        # Survivors: future, String and far-past TTLs, no TTL, and the moved one.
        for it in kept:
            self.assertTrue(present(it), it)
        got = c.get_item(TableName=name, Key={"pk": moved["pk"], "sk": moved["sk"]},
                         ConsistentRead=True)["Item"]
        self.assertEqual(got["exp"], {"N": str(now + 3600)})
        # A table with a Number partition key and no sort key or index.
        simple = "ttl-" + uuid.uuid4().hex[:12]
        c.create_table(TableName=simple,
                       AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "N"}],
                       KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                       BillingMode="PAY_PER_REQUEST")
        c.update_time_to_live(TableName=simple, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "t"})
        for i in range(10):
            c.put_item(TableName=simple, Item={"id": {"N": str(i)},
                                               "t": {"N": str(now - 10 if i % 2 else now + 3600)}})
        deadline = time.time() + DEADLINE_S
        ids = None
        while time.time() < deadline:
            ids = sorted(int(i["id"]["N"]) for i in c.scan(TableName=simple,
                                                           ConsistentRead=True)["Items"])
            if ids == [0, 2, 4, 6, 8]:
                break
            time.sleep(0.05)
        self.assertEqual(ids, [0, 2, 4, 6, 8])
        # TTL disabled: an expired item stays (reads return it, as they do
        # any expired item not deleted yet).
        c.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": False, "AttributeName": "exp"})
        late = {"pk": {"S": "p0"}, "sk": {"S": "late"}, "g": {"S": g},
                "exp": {"N": str(now - 50)}}
        c.put_item(TableName=name, Item=late)
        self.assertTrue(present(late))

    def test_pacing(self):
        """Expiry draws on ttl_share (10 %) of partition_wcu (1000): 100
        units a second per group.  The bucket holds at most one second of
        tokens and may go one second into debt, so 2400 one-unit items over
        3 data groups (at least 800 in the fullest) take at least
        (800 - 200) / 100 = 6 s; unpaced, they take about 2 s.  The figure
        is printed, a bound of 5 s asserted."""
        c = self.c
        name = create(c)
        c.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "exp"})
        n = 2400
        expires = int(time.time()) + 10
        for b in range(0, n, 25):
            reqs = [{"PutRequest": {"Item": {"pk": {"S": "q%d" % i}, "sk": {"S": "s"},
                                             "exp": {"N": str(expires)}}}}
                    for i in range(b, b + 25)]
            pending = {name: reqs}
            while pending:
                pending = c.batch_write_item(RequestItems=pending).get("UnprocessedItems")
        self.assertLess(time.time(), expires, "writing took too long to measure")
        while time.time() < expires:
            time.sleep(0.05)

        def count():
            total, kw = 0, {}
            while True:
                r = c.scan(TableName=name, Select="COUNT", ConsistentRead=True, **kw)
                total += r["Count"]
                if "LastEvaluatedKey" not in r:
                    return total
                kw = {"ExclusiveStartKey": r["LastEvaluatedKey"]}

        deadline = time.time() + DEADLINE_S
        left = count()
        while left > 0 and time.time() < deadline:
            time.sleep(0.1)
            left = count()
        elapsed = time.time() - expires
        self.assertEqual(left, 0, "%d of %d expired items left after %d s" % (
            left, n, DEADLINE_S))
        print("\nTTL pacing: %d expired items gone in %.1f s (%.0f items/s over 3 data "
              "groups; ttl_share 10%% of partition_wcu 1000)" % (n, elapsed, n / elapsed))
        self.assertGreaterEqual(elapsed, 5.0, "expiry ran faster than its share allows")

    def test_pacing_provisioned(self):
        """A PROVISIONED table's partitions have its write units over the
        partitions (30 over 3: 10 a second); expiry takes 10 % of that, one
        unit a second per partition.  15 items (at least 5 in the fullest
        partition; one token at most, one second of debt) take at least
        3 s; at the partition limit's share they take well under one."""
        c = self.c
        name = "ttl-" + uuid.uuid4().hex[:12]
        c.create_table(TableName=name,
                       AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                       KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                       BillingMode="PROVISIONED",
                       ProvisionedThroughput={"ReadCapacityUnits": 100,
                                              "WriteCapacityUnits": 30})
        c.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "exp"})
        expires = int(time.time()) + 3
        for i in range(15):
            c.put_item(TableName=name, Item={"id": {"S": "i%d" % i},
                                             "exp": {"N": str(expires)}})
        while time.time() < expires:
            time.sleep(0.05)
        deadline = time.time() + DEADLINE_S
        left = 15
        while left and time.time() < deadline:
            time.sleep(0.1)
            left = c.scan(TableName=name, Select="COUNT", ConsistentRead=True)["Count"]
        elapsed = time.time() - expires
        self.assertEqual(left, 0, "items left after %d s" % DEADLINE_S)
        print("\nTTL pacing, PROVISIONED 30 WCU: 15 items gone in %.1f s" % elapsed)
        self.assertGreaterEqual(elapsed, 2.5, "expiry ran faster than its share allows")

    def cluster(self, *args):
        r = subprocess.run([os.path.join(ROOT, "deploy", "cluster.sh")] + list(args)
                           + ["--dir", DIR], capture_output=True, text=True, timeout=180,
                           env=dict(os.environ, SHOAL_BIN=BIN))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_node_killed(self):
        """SIGKILL of a node (a replica of every group, the leader of some):
        the other two elect leaders, which find the setting in their own
        copy of the definition and expire the items; the node comes back."""
        c = self.c
        name = create(c)
        c.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "exp"})
        expires = int(time.time()) + 3
        keys = [{"pk": {"S": "k%d" % i}, "sk": {"S": "s"}} for i in range(30)]
        for k in keys:
            c.put_item(TableName=name, Item=dict(k, g={"S": "x"}, exp={"N": str(expires)}))
        self.cluster("stop-node", "1", "--hard")
        try:
            deadline = time.time() + DEADLINE_S
            left = keys
            while left and time.time() < deadline:
                try:
                    left = [k for k in left if "Item" in c.get_item(
                        TableName=name, Key=k, ConsistentRead=True)]
                except ClientError:
                    pass  # a group still electing: poll with the deadline
                time.sleep(0.1)
            self.assertEqual(left, [], "expired items left with node 1 down")
            self.assertEqual(c.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                             {"TimeToLiveStatus": "ENABLED", "AttributeName": "exp"})
        finally:
            self.cluster("start-node", "1")
            self.cluster("wait")


if __name__ == "__main__":
    unittest.main(verbosity=2)
