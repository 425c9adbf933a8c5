"""DynamoDB Streams (DynamoDBStreams_20120810): ListStreams (TableName,
Limit, ExclusiveStartStreamArn), DescribeStream, GetShardIterator and
GetRecords: the record's members as botocore's dynamodbstreams model names
them, for INSERT, MODIFY and REMOVE.  (Every view type, iterator types,
paging, disabling and the errors are test_streams.py's in
tests/integration/http; a record per change under SIGKILL is it_streams.)"""
import datetime

from conformance import RANGE, STREAM, Case, N, S, constraint, ddbstreams, main, poll, uid


class Streams(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.s = ddbstreams()
        cls.sraw = ddbstreams(validate=False)
        cls.arn = cls.c.describe_table(TableName=STREAM)["Table"]["LatestStreamArn"]

    def records_of(self, k):
        """Every record of key k, from the start of every shard."""
        out = []
        for sh in self.s.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]:
            it = self.s.get_shard_iterator(StreamArn=self.arn, ShardId=sh["ShardId"],
                                           ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            while it:
                r = self.s.get_records(ShardIterator=it, Limit=1000)
                out += [x for x in r["Records"] if x["dynamodb"]["Keys"]["pk"] == S(k)]
                if not r["Records"]:
                    break
                it = r.get("NextShardIterator")
        return out

    def test_record_members(self):
        k = uid()
        self.c.put_item(TableName=STREAM, Item={"pk": S(k), "v": N(1)})
        self.c.update_item(TableName=STREAM, Key={"pk": S(k)}, UpdateExpression="SET v = :v",
                           ExpressionAttributeValues={":v": N(2)})
        self.c.delete_item(TableName=STREAM, Key={"pk": S(k)})
        recs = poll(lambda: (lambda r: r if len(r) == 3 else None)(self.records_of(k)))
        self.assertEqual([r["eventName"] for r in recs], ["INSERT", "MODIFY", "REMOVE"])
        images = [(r["dynamodb"].get("OldImage"), r["dynamodb"].get("NewImage")) for r in recs]
        self.assertEqual(images, [(None, {"pk": S(k), "v": N(1)}),
                                  ({"pk": S(k), "v": N(1)}, {"pk": S(k), "v": N(2)}),
                                  ({"pk": S(k), "v": N(2)}, None)])
        seqs = [int(r["dynamodb"]["SequenceNumber"]) for r in recs]
        self.assertEqual(seqs, sorted(seqs))
        for r in recs:
            self.assertEqual((r["eventSource"], r["eventVersion"]), ("aws:dynamodb", "1.1"))
            self.assertTrue(r["eventID"])
            self.assertIn("awsRegion", r)
            d = r["dynamodb"]
            self.assertEqual(d["Keys"], {"pk": S(k)})
            self.assertEqual(d["StreamViewType"], "NEW_AND_OLD_IMAGES")
            self.assertGreater(d["SizeBytes"], 0)
            self.assertIsInstance(d["ApproximateCreationDateTime"], datetime.datetime)
            self.assertEqual(set(r) - {"eventID", "eventName", "eventVersion", "eventSource",
                                       "awsRegion", "dynamodb", "userIdentity"}, set())

    def test_list_streams_pages(self):
        mine = self.s.list_streams(TableName=STREAM)["Streams"]
        self.assertEqual(mine, [{"StreamArn": self.arn, "TableName": STREAM,
                                 "StreamLabel": self.arn.rsplit("/", 1)[1]}])
        self.assertEqual(self.s.list_streams(TableName=RANGE)["Streams"], [])
        seen, start = [], None
        while True:
            page = {"ExclusiveStartStreamArn": start} if start else {}
            r = self.s.list_streams(Limit=1, **page)
            self.assertLessEqual(len(r["Streams"]), 1)
            seen += [x["StreamArn"] for x in r["Streams"]]
            start = r.get("LastEvaluatedStreamArn")
            if not start:
                break
        self.assertIn(self.arn, seen)
        self.assertEqual(len(seen), len(set(seen)))

    def test_describe_stream_pages(self):
        d = self.s.describe_stream(StreamArn=self.arn)["StreamDescription"]
        self.assertEqual((d["StreamArn"], d["TableName"], d["StreamStatus"], d["StreamViewType"]),
                         (self.arn, STREAM, "ENABLED", "NEW_AND_OLD_IMAGES"))
        ids = [s["ShardId"] for s in d["Shards"]]
        got, start = [], None
        while True:
            page = {"ExclusiveStartShardId": start} if start else {}
            p = self.s.describe_stream(StreamArn=self.arn, Limit=1, **page)["StreamDescription"]
            got += [s["ShardId"] for s in p["Shards"]]
            start = p.get("LastEvaluatedShardId")
            if not start:
                break
        self.assertEqual(got, ids)

    def test_errors(self):
        self.invalid(self.sraw.list_streams, constraint("'0'", "limit",
                                                        "have value greater than or equal to 1"),
                     Limit=0)
        self.invalid(self.sraw.list_streams, constraint("'101'", "limit",
                                                        "have value less than or equal to 100"),
                     Limit=101)
        t = "conf-absent-" + uid()
        self.refused(self.s.list_streams, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t)
        self.invalid(self.sraw.describe_stream, constraint("null", "streamArn", "not be null"))
        self.invalid(self.sraw.get_records, constraint("null", "shardIterator", "not be null"))


if __name__ == "__main__":
    main([__file__])
