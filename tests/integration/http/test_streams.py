"""DynamoDB Streams through DynamoDB's own clients (boto3's dynamodbstreams,
`aws dynamodbstreams`) and `shoal dynamodbstreams`: StreamSpecification on
CreateTable and UpdateTable, every view type, INSERT/MODIFY/REMOVE (and no
record for a write that changes nothing), every iterator type, paging with
Limit and NextShardIterator, the documented errors, and the time from an
acknowledged write to its record in GetRecords (printed, not asserted).

Imported by test_http.py (run.sh starts the cluster); the environment is
test_http's.  TrimmedDataAccessException needs records older than the
retention: tests/unit/test_stream.c provokes it with a short one.
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
KS = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
AD = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}]


def ddb():
    return boto3.client("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1", config=CFG)


def streams():
    return boto3.client("dynamodbstreams", endpoint_url=ENDPOINT, region_name="us-east-1",
                        config=CFG)


def S(x):
    return {"S": x}


def N(x):
    return {"N": str(x)}


def key(pk, sk=1):
    return {"pk": S(pk), "sk": N(sk)}


def new_table(c, view=None, name=None):
    name = name or "st-" + uuid.uuid4().hex[:10]
    kw = {}
    if view is not None:
        kw["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": view}
    c.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=AD,
                   KeySchema=KS, **kw)
    c.get_waiter("table_exists").wait(TableName=name)
    return name


def read_all(s, arn, horizon="TRIM_HORIZON", limit=None):
    """Every record of every shard, by shard, from an iterator of type horizon."""
    out = {}
    for sh in s.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        it = s.get_shard_iterator(StreamArn=arn, ShardId=sh["ShardId"],
                                  ShardIteratorType=horizon)["ShardIterator"]
        recs = []
        for _ in range(1000):
            kw = {"Limit": limit} if limit else {}
            r = s.get_records(ShardIterator=it, **kw)
            recs += r["Records"]
            it = r.get("NextShardIterator")
            if not r["Records"] or it is None:
                break
        out[sh["ShardId"]] = recs
    return out


def all_stream_arns(s):
    """Every StreamArn ListStreams gives, page by page."""
    arns, kw = [], {}
    while True:
        r = s.list_streams(Limit=100, **kw)
        arns += [x["StreamArn"] for x in r["Streams"]]
        if "LastEvaluatedStreamArn" not in r:
            return arns
        kw = {"ExclusiveStartStreamArn": r["LastEvaluatedStreamArn"]}


def flat(by_shard):
    return [r for recs in by_shard.values() for r in recs]


class Streams(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = ddb()
        cls.s = streams()
        # Without boto3's own checks, so that the server's are what answers.
        cls.raw = boto3.client("dynamodbstreams", endpoint_url=ENDPOINT, region_name="us-east-1",
                               config=CFG.merge(Config(parameter_validation=False)))

    def arn(self, table):
        return self.c.describe_table(TableName=table)["Table"]["LatestStreamArn"]

    def code(self, fn, **kw):
        with self.assertRaises(ClientError) as e:
            fn(**kw)
        return e.exception.response["Error"]["Code"], e.exception.response["Error"]["Message"]

    def test_describe_table_and_arn_shape(self):
        t = new_table(self.c, "KEYS_ONLY")
        d = self.c.describe_table(TableName=t)["Table"]
        self.assertEqual(d["StreamSpecification"],
                         {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
        label = d["LatestStreamLabel"]
        self.assertRegex(label, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$")
        self.assertEqual(d["LatestStreamArn"], d["TableArn"] + "/stream/" + label)
        plain = new_table(self.c)
        d = self.c.describe_table(TableName=plain)["Table"]
        self.assertNotIn("LatestStreamArn", d)
        self.assertNotIn("StreamSpecification", d)
        # ListStreams: ours is there, by table name too; a table without one is not.
        arns = [x["StreamArn"] for x in self.s.list_streams(Limit=100)["Streams"]]
        self.assertIn(self.arn(t), arns)
        one = self.s.list_streams(TableName=t)["Streams"]
        self.assertEqual(one, [{"StreamArn": self.arn(t), "TableName": t, "StreamLabel": label}])
        self.assertEqual(self.s.list_streams(TableName=plain)["Streams"], [])
        self.assertEqual(self.code(self.s.list_streams, TableName="nope-" + t)[0],
                         "ResourceNotFoundException")

    def test_view_types_and_events(self):
        for view in ("KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
            t = new_table(self.c, view)
            self.c.put_item(TableName=t, Item={**key("a"), "v": N(1)})
            self.c.update_item(TableName=t, Key=key("a"), UpdateExpression="SET v = :v",
                               ExpressionAttributeValues={":v": N(2)})
            # Changes nothing: no record (DynamoDB writes none either).
            self.c.update_item(TableName=t, Key=key("a"), UpdateExpression="SET v = :v",
                               ExpressionAttributeValues={":v": N(2)})
            self.c.put_item(TableName=t, Item={**key("a"), "v": N(2)})
            self.c.delete_item(TableName=t, Key=key("a"))
            self.c.delete_item(TableName=t, Key=key("absent"))
            recs = flat(read_all(self.s, self.arn(t)))
            self.assertEqual([r["eventName"] for r in recs], ["INSERT", "MODIFY", "REMOVE"], view)
            old = [None, {**key("a"), "v": N(1)}, {**key("a"), "v": N(2)}]
            new = [{**key("a"), "v": N(1)}, {**key("a"), "v": N(2)}, None]
            for i, r in enumerate(recs):
                d = r["dynamodb"]
                self.assertEqual(r["eventVersion"], "1.1")
                self.assertEqual(r["eventSource"], "aws:dynamodb")
                self.assertRegex(r["eventID"], r"^[0-9a-f]{32}$")
                self.assertIn("awsRegion", r)
                self.assertEqual(d["Keys"], key("a"))
                self.assertEqual(d["StreamViewType"], view)
                self.assertGreater(d["SizeBytes"], 0)
                self.assertTrue(20 <= len(d["SequenceNumber"]) <= 40)
                self.assertLess(abs(d["ApproximateCreationDateTime"].timestamp() - time.time()),
                                300)
                want_old = old[i] if view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES") else None
                want_new = new[i] if view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") else None
                self.assertEqual(d.get("OldImage"), want_old, (view, i))
                self.assertEqual(d.get("NewImage"), want_new, (view, i))
            seqs = [int(r["dynamodb"]["SequenceNumber"]) for r in recs]
            self.assertEqual(seqs, sorted(seqs))

    def test_batch_and_transaction_writes(self):
        t = new_table(self.c, "NEW_IMAGE")
        self.c.batch_write_item(RequestItems={t: [
            {"PutRequest": {"Item": {**key("b%d" % i), "v": N(i)}}} for i in range(20)]})
        self.c.transact_write_items(TransactItems=[
            {"Put": {"TableName": t, "Item": {**key("t1"), "v": N(1)}}},
            {"Delete": {"TableName": t, "Key": key("b0")}},
            {"Update": {"TableName": t, "Key": key("b1"), "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": N(100)}}}])
        recs = flat(read_all(self.s, self.arn(t)))
        by = {}
        for r in recs:
            by.setdefault(r["dynamodb"]["Keys"]["pk"]["S"], []).append(r["eventName"])
        self.assertEqual(len(recs), 23)
        self.assertEqual(by["b0"], ["INSERT", "REMOVE"])
        self.assertEqual(by["b1"], ["INSERT", "MODIFY"])
        self.assertEqual(by["t1"], ["INSERT"])

    def test_iterators_and_paging(self):
        t = new_table(self.c, "NEW_IMAGE")
        arn = self.arn(t)
        # One partition key: every record in one shard, in order.
        for i in range(25):
            self.c.put_item(TableName=t, Item={**key("p", i), "v": N(i)})
        shards = read_all(self.s, arn, limit=7)
        full = [recs for recs in shards.values() if recs]
        self.assertEqual(len(full), 1)
        recs = full[0]
        shard = [s for s, r in shards.items() if r][0]
        self.assertEqual([int(r["dynamodb"]["Keys"]["sk"]["N"]) for r in recs], list(range(25)))
        # Limit pages: 7 at a time.
        it = self.s.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        r = self.s.get_records(ShardIterator=it, Limit=7)
        self.assertEqual(len(r["Records"]), 7)
        r2 = self.s.get_records(ShardIterator=r["NextShardIterator"], Limit=7)
        self.assertEqual(r2["Records"][0]["dynamodb"]["SequenceNumber"],
                         recs[7]["dynamodb"]["SequenceNumber"])
        # AT and AFTER a sequence number.
        seq = recs[10]["dynamodb"]["SequenceNumber"]
        for typ, first in (("AT_SEQUENCE_NUMBER", 10), ("AFTER_SEQUENCE_NUMBER", 11)):
            it = self.s.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType=typ,
                                           SequenceNumber=seq)["ShardIterator"]
            got = self.s.get_records(ShardIterator=it, Limit=1)["Records"]
            self.assertEqual(got[0]["dynamodb"]["Keys"]["sk"], N(first), typ)
        # LATEST: only what comes after it.
        it = self.s.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                       ShardIteratorType="LATEST")["ShardIterator"]
        r = self.s.get_records(ShardIterator=it)
        self.assertEqual(r["Records"], [])
        self.assertIn("NextShardIterator", r)
        self.c.put_item(TableName=t, Item={**key("p", 99), "v": N(99)})
        r = self.s.get_records(ShardIterator=r["NextShardIterator"])
        self.assertEqual([x["dynamodb"]["Keys"]["sk"] for x in r["Records"]], [N(99)])
        # DescribeStream: a shard per partition, sequence numbers in range.
        d = self.s.describe_stream(StreamArn=arn)["StreamDescription"]
        self.assertEqual(d["StreamStatus"], "ENABLED")
        self.assertEqual(d["StreamViewType"], "NEW_IMAGE")
        self.assertEqual(d["TableName"], t)
        self.assertEqual(d["KeySchema"], KS)
        self.assertIn("CreationRequestDateTime", d)
        ids = [s["ShardId"] for s in d["Shards"]]
        self.assertEqual(len(ids), len(set(ids)))
        for s in d["Shards"]:
            self.assertIn("StartingSequenceNumber", s["SequenceNumberRange"])
            self.assertNotIn("EndingSequenceNumber", s["SequenceNumberRange"])
        p = self.s.describe_stream(StreamArn=arn, Limit=1)["StreamDescription"]
        self.assertEqual(len(p["Shards"]), 1)
        if len(ids) > 1:
            self.assertEqual(p["LastEvaluatedShardId"], ids[0])
            q = self.s.describe_stream(StreamArn=arn, ExclusiveStartShardId=ids[0])
            self.assertEqual([s["ShardId"] for s in q["StreamDescription"]["Shards"]], ids[1:])

    def test_errors(self):
        t = new_table(self.c, "KEYS_ONLY")
        arn = self.arn(t)
        shard = self.s.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        gsi = self.s.get_shard_iterator
        self.assertEqual(self.code(self.raw.describe_stream, StreamArn="arn:too-short"),
                         ("ValidationException",
                          "1 validation error detected: Value 'arn:too-short' at 'streamArn' "
                          "failed to satisfy constraint: Member must have length greater than "
                          "or equal to 37"))
        self.assertEqual(self.code(self.raw.describe_stream, StreamArn="x" * 40),
                         ("ValidationException", "Invalid StreamArn"))
        self.assertEqual(self.code(self.s.describe_stream, StreamArn=arn.replace(t, "no" + t)),
                         ("ResourceNotFoundException",
                          "Requested resource not found: Stream: %s not found"
                          % arn.replace(t, "no" + t)))
        old = arn[:-23] + "2001-01-01T00:00:00.000"
        self.assertEqual(self.code(self.s.describe_stream, StreamArn=old)[0],
                         "ResourceNotFoundException")
        self.assertEqual(self.code(gsi, StreamArn=arn, ShardId=shard,
                                   ShardIteratorType="SOMEWHERE"),
                         ("ValidationException",
                          "1 validation error detected: Value 'SOMEWHERE' at 'shardIteratorType' "
                          "failed to satisfy constraint: Member must satisfy enum value set: "
                          "[AFTER_SEQUENCE_NUMBER, LATEST, AT_SEQUENCE_NUMBER, TRIM_HORIZON]"))
        self.assertEqual(self.code(gsi, StreamArn=arn, ShardId=shard,
                                   ShardIteratorType="AT_SEQUENCE_NUMBER")[0],
                         "ValidationException")
        self.assertEqual(self.code(gsi, StreamArn=arn, ShardId=shard,
                                   ShardIteratorType="AT_SEQUENCE_NUMBER",
                                   SequenceNumber="123456789012345678901234x")[0],
                         "ValidationException")
        self.assertEqual(self.code(gsi, StreamArn=arn, ShardId="shardId-" + "9" * 20 + "-00000000",
                                   ShardIteratorType="LATEST")[0], "ResourceNotFoundException")
        it = gsi(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]
        for lim, word in ((0, "greater than or equal to 1"), (1001, "less than or equal to 1000")):
            c, m = self.code(self.raw.get_records, ShardIterator=it, Limit=lim)
            self.assertEqual(c, "ValidationException")
            self.assertIn(word, m)
        self.assertEqual(self.code(self.s.get_records, ShardIterator="garbage"),
                         ("ValidationException", "Invalid ShardIterator"))
        # An iterator older than 15 minutes (its issue time is part of it).
        parts = it.split("|")
        parts[-1] = str(int(time.time() * 1000) - 16 * 60 * 1000)
        c, m = self.code(self.s.get_records, ShardIterator="|".join(parts))
        self.assertEqual(c, "ExpiredIteratorException")
        self.assertIn("Iterator expired", m)

    def test_update_table_enable_disable(self):
        t = new_table(self.c)
        self.c.put_item(TableName=t, Item={**key("before"), "v": N(0)})
        self.assertEqual(self.code(self.c.update_table, TableName=t,
                                   StreamSpecification={"StreamEnabled": False})[0],
                         "ValidationException")
        self.assertEqual(self.code(self.c.update_table, TableName=t,
                                   StreamSpecification={"StreamEnabled": True})[0],
                         "ValidationException")
        d = self.c.update_table(TableName=t, StreamSpecification={
            "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})["TableDescription"]
        arn1 = d["LatestStreamArn"]
        self.assertEqual(self.arn(t), arn1)
        self.assertEqual(self.code(self.c.update_table, TableName=t, StreamSpecification={
            "StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})[0], "ValidationException")
        self.c.put_item(TableName=t, Item={**key("during"), "v": N(1)})
        recs = flat(read_all(self.s, arn1))
        self.assertEqual([r["dynamodb"]["Keys"]["pk"]["S"] for r in recs], ["during"])
        self.c.update_table(TableName=t, StreamSpecification={"StreamEnabled": False})
        self.c.put_item(TableName=t, Item={**key("after"), "v": N(2)})
        d = self.c.describe_table(TableName=t)["Table"]
        self.assertEqual(d["StreamSpecification"], {"StreamEnabled": False})
        self.assertEqual(d["LatestStreamArn"], arn1)
        desc = self.s.describe_stream(StreamArn=arn1)["StreamDescription"]
        self.assertEqual(desc["StreamStatus"], "DISABLED")
        for sh in desc["Shards"]:
            self.assertIn("EndingSequenceNumber", sh["SequenceNumberRange"])
        # A closed shard read to its end hands out no more iterators.
        by = read_all(self.s, arn1)
        self.assertEqual([r["dynamodb"]["Keys"]["pk"]["S"] for r in flat(by)], ["during"])
        for sh in desc["Shards"]:
            it = self.s.get_shard_iterator(StreamArn=arn1, ShardId=sh["ShardId"],
                                           ShardIteratorType="LATEST")["ShardIterator"]
            self.assertNotIn("NextShardIterator", self.s.get_records(ShardIterator=it))
        # Enabled again: a new stream; the one it replaced stays readable
        # (DISABLED, its own view type and records) and listed, as in
        # DynamoDB, until the retention has passed (test_retention).
        d = self.c.update_table(TableName=t, StreamSpecification={
            "StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})["TableDescription"]
        arn2 = d["LatestStreamArn"]
        self.assertNotEqual(arn1, arn2)
        self.c.put_item(TableName=t, Item={**key("again"), "v": N(3)})
        recs = flat(read_all(self.s, arn2))
        self.assertEqual([r["dynamodb"]["Keys"]["pk"]["S"] for r in recs], ["again"])
        self.assertNotIn("NewImage", recs[0]["dynamodb"])
        old = self.s.describe_stream(StreamArn=arn1)["StreamDescription"]
        self.assertEqual((old["StreamStatus"], old["StreamViewType"]),
                         ("DISABLED", "NEW_AND_OLD_IMAGES"))
        recs = flat(read_all(self.s, arn1))
        self.assertEqual([r["dynamodb"]["Keys"]["pk"]["S"] for r in recs], ["during"])
        self.assertIn("NewImage", recs[0]["dynamodb"])
        self.assertEqual([x["StreamArn"] for x in self.s.list_streams(TableName=t)["Streams"]],
                         [arn2, arn1])
        self.assertEqual(self.s.describe_stream(StreamArn=arn2)["StreamDescription"][
            "StreamStatus"], "ENABLED")

    def test_retention(self):
        """Records past the retention (run.sh: SHOAL_STREAM_RETENTION_S) are
        trimmed although nothing is written any more (the leader's timer), a
        replaced stream and a deleted table's stream are listed and readable
        until then, and a position in the trimmed range is
        TrimmedDataAccessException."""
        ret = int(os.environ.get("SHOAL_STREAM_RETENTION_S", "86400"))
        if ret > 60:
            self.skipTest("retention of %d s: too long to wait for" % ret)
        t = new_table(self.c, "KEYS_ONLY")
        arn1 = self.arn(t)
        self.c.put_item(TableName=t, Item=key("one"))
        self.c.update_table(TableName=t, StreamSpecification={"StreamEnabled": False})
        arn2 = self.c.update_table(TableName=t, StreamSpecification={
            "StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})["TableDescription"][
            "LatestStreamArn"]
        self.c.put_item(TableName=t, Item=key("two"))
        # A deleted table's stream stays too: listed, DISABLED, readable.
        gone = new_table(self.c, "NEW_IMAGE")
        arn_gone = self.arn(gone)
        self.c.put_item(TableName=gone, Item={**key("three"), "v": N(3)})
        self.c.delete_table(TableName=gone)
        t_written = time.monotonic()
        self.c.get_waiter("table_not_exists").wait(TableName=gone)
        self.assertEqual(self.s.list_streams(TableName=gone)["Streams"],
                         [{"StreamArn": arn_gone, "TableName": gone,
                           "StreamLabel": arn_gone.split("/stream/")[1]}])
        self.assertIn(arn_gone, all_stream_arns(self.s))
        desc = self.s.describe_stream(StreamArn=arn_gone)["StreamDescription"]
        self.assertEqual((desc["StreamStatus"], desc["StreamViewType"], desc["TableName"]),
                         ("DISABLED", "NEW_IMAGE", gone))
        self.assertEqual(desc["KeySchema"][0]["AttributeName"], "pk")
        for sh in desc["Shards"]:
            self.assertIn("EndingSequenceNumber", sh["SequenceNumberRange"])
        recs = flat(read_all(self.s, arn_gone))
        self.assertEqual([(r["eventName"], r["dynamodb"]["NewImage"]["v"]["N"]) for r in recs],
                         [("INSERT", "3")])
        self.assertEqual(len(flat(read_all(self.s, arn1))), 1)
        rec2 = flat(read_all(self.s, arn2))
        self.assertEqual(len(rec2), 1)
        shard2 = [sh["ShardId"] for sh in self.s.describe_stream(StreamArn=arn2)[
            "StreamDescription"]["Shards"]]
        seq2 = rec2[0]["dynamodb"]["SequenceNumber"]
        # No writes from here on: the timer alone trims, within about a
        # second of the retention passing.
        deadline = t_written + ret + 20
        while True:
            listed = [x["StreamArn"] for x in self.s.list_streams(TableName=t)["Streams"]]
            left = flat(read_all(self.s, arn2))
            all_arns = all_stream_arns(self.s)
            # The deleted table itself is forgotten by group 0's next
            # stream trim after its stream expired (about a second later):
            # until then ListStreams names it with no streams.
            gone_code = None
            if arn_gone not in all_arns:
                try:
                    self.s.list_streams(TableName=gone)
                except ClientError as e:
                    gone_code = e.response["Error"]["Code"]
            if (not left and listed == [arn2] and arn_gone not in all_arns
                    and gone_code == "ResourceNotFoundException"):
                break
            self.assertLess(time.monotonic(), deadline, (listed, left))
            time.sleep(0.2)
        self.assertGreaterEqual(time.monotonic() - t_written, ret * 0.9)
        self.assertEqual(self.code(self.s.describe_stream, StreamArn=arn1)[0],
                         "ResourceNotFoundException")
        self.assertEqual(self.code(self.s.describe_stream, StreamArn=arn_gone)[0],
                         "ResourceNotFoundException")
        self.assertEqual(self.code(self.s.list_streams, TableName=gone)[0],
                         "ResourceNotFoundException")
        trimmed = 0
        for sid in shard2:
            try:
                self.s.get_shard_iterator(StreamArn=arn2, ShardId=sid,
                                          ShardIteratorType="AT_SEQUENCE_NUMBER",
                                          SequenceNumber=seq2)
            except ClientError as e:
                self.assertEqual(e.response["Error"]["Code"], "TrimmedDataAccessException")
                trimmed += 1
        self.assertGreaterEqual(trimmed, 1)
        print("\nstreams: records trimmed without writes %.1f s after the last one "
              "(retention %d s)" % (time.monotonic() - t_written, ret), flush=True)

    def test_clis(self):
        aws = [AWS, "--endpoint-url", ENDPOINT, "dynamodbstreams"]
        shoal = [SHOAL, "--endpoint", NATIVE, "dynamodbstreams"]
        ret = int(os.environ.get("SHOAL_STREAM_RETENTION_S", "86400"))
        for cmd in (aws, shoal):
            # A table and a record for each CLI: run.sh keeps records 30 s,
            # and the AWS CLI's eight calls took more than that on a loaded
            # machine (an ASan run), so the second CLI found the record
            # trimmed.
            t = new_table(self.c, "NEW_IMAGE")
            self.c.put_item(TableName=t, Item={**key("cli"), "v": N(7)})
            t_put = time.monotonic()
            arn = self.arn(t)

            def run(*args):
                r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, (cmd[0], args, r.stderr))
                return json.loads(r.stdout)
            self.assertIn(arn, [x["StreamArn"] for x in
                                run("list-streams", "--table-name", t)["Streams"]])
            shards = run("describe-stream", "--stream-arn", arn)["StreamDescription"]["Shards"]
            got = []
            for sh in shards:
                it = run("get-shard-iterator", "--stream-arn", arn, "--shard-id", sh["ShardId"],
                         "--shard-iterator-type", "TRIM_HORIZON")["ShardIterator"]
                got += run("get-records", "--shard-iterator", it)["Records"]
            took = time.monotonic() - t_put
            print("\nstreams: %s read its record's shards %.1f s after the put" %
                  (os.path.basename(cmd[0]), took), flush=True)
            if not got and took >= ret:
                self.skipTest("%s took %.0f s, past the records' retention (%d s)" %
                              (cmd[0], took, ret))
            self.assertEqual([r["dynamodb"]["NewImage"] for r in got], [{**key("cli"), "v": N(7)}],
                             cmd[0])
        # The wrong service: a Streams command under `shoal dynamodb` is refused.
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "list-streams"], capture_output=True,
                           text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)

    def test_latency_write_to_get_records(self):
        """A write's record in GetRecords: p50/p99 from the write's acknowledgement to the
        first GetRecords that returns it, polling as a consumer would (no sleeps)."""
        t = new_table(self.c, "KEYS_ONLY")
        arn = self.arn(t)
        shards = self.s.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        its = {}
        for sh in shards:
            its[sh["ShardId"]] = self.s.get_shard_iterator(
                StreamArn=arn, ShardId=sh["ShardId"], ShardIteratorType="LATEST")["ShardIterator"]
        lat = []
        for i in range(200):
            pk = "lat-%d" % i
            self.c.put_item(TableName=t, Item=key(pk))
            t0 = time.monotonic()
            found = False
            deadline = t0 + 10
            while not found and time.monotonic() < deadline:
                for sid in list(its):
                    r = self.s.get_records(ShardIterator=its[sid])
                    its[sid] = r["NextShardIterator"]
                    if any(x["dynamodb"]["Keys"]["pk"]["S"] == pk for x in r["Records"]):
                        found = True
            self.assertTrue(found, pk)
            lat.append(time.monotonic() - t0)
        lat.sort()
        print("\nstreams: write -> GetRecords over HTTP, %d writes: p50 %.1f ms, p99 %.1f ms, "
              "max %.1f ms (polling %d shards)" % (len(lat), lat[len(lat) // 2] * 1000,
                                                  lat[int(len(lat) * 0.99) - 1] * 1000,
                                                  lat[-1] * 1000, len(its)), flush=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
